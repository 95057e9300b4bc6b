"""Release step, after ``RemoveAfterGrading``: the code interview's task cell, where the course gives it points."""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.code_interview import GRADE_ID, CodeInterview, cell_text


class AddCodeInterview(NbGraderPreprocessor):
    """Release preprocessor: with ``c.CodeInterview.points`` above 0, a locked, manually graded task cell
    ``code_interview`` at the end of ``c.CodeInterview.notebook`` (the assignment's last notebook by default), so that
    nbgrader's gradebook holds it; ``make interviews RECORD=...`` grades it (``grader.course.code_interview``)."""

    def preprocess(self, nb, resources):
        settings = CodeInterview(config=self.config)
        info = resources.get("nbgrader", {})
        if settings.points <= 0 or info.get("notebook") != (settings.notebook or self._last_notebook(info)):
            return nb, resources
        nb.cells = [cell for cell in nb.cells if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") != GRADE_ID]
        cell = nbformat.v4.new_markdown_cell(cell_text(settings.points, settings.not_interviewed))
        cell.metadata["nbgrader"] = {"grade": False, "grade_id": GRADE_ID, "locked": True, "points": settings.points,
                                     "schema_version": 3, "solution": False, "task": True}
        nb.cells.append(cell)
        return nb, resources

    def _last_notebook(self, info) -> str | None:
        course = CourseDirectory(config=self.config)
        folder = Path(course.format_path(course.source_directory, ".", info.get("assignment", "")))
        names = sorted(path.stem for path in folder.glob("*.ipynb"))
        return names[-1] if names else None
