"""Feedback step: the cells held back at release, and each written question's model answer, back in place."""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.after_grading import AWAITING_GRADE, MODEL_ANSWER, NOTE, after_grading, model_answer, written_answer


class ShowAfterGrading(NbGraderPreprocessor):
    """Feedback preprocessor: the notebook's after-grading cells, from the solutions, each after the cell it follows
    there (found by cell id; at the end when the student deleted that cell), and each written question's model
    answer below the student's answer once that answer is graded (``make feedback --force`` may release a
    notebook whose written answers still wait for their grade: their model answers wait too)."""

    def preprocess(self, nb, resources):
        source = self._source(resources)
        if source is None:
            return nb, resources
        for index, cell in enumerate(source.cells):
            if not after_grading(cell):
                continue
            shown = nbformat.v4.new_markdown_cell(NOTE + cell.source)
            before = next((c.get("id") for c in reversed(source.cells[:index]) if not after_grading(c)), None)
            ids = [c.get("id") for c in nb.cells]
            position = ids.index(before) + 1 if before in ids else len(nb.cells)
            while position < len(nb.cells) and nb.cells[position].source.startswith(NOTE):
                position += 1  # after the ones already put back there, in their order
            nb.cells.insert(position, shown)
        awaiting = self._awaiting_grade(resources)
        for cell in source.cells:
            if not written_answer(cell):
                continue
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
            position = ids.index(grade_id) + 1 if grade_id in ids else len(nb.cells)
            text = AWAITING_GRADE if grade_id in awaiting else MODEL_ANSWER + model_answer(cell)
            nb.cells.insert(position, nbformat.v4.new_markdown_cell(text))
        return nb, resources

    def _awaiting_grade(self, resources) -> set[str]:
        """The grade ids of this notebook's answers that still wait for a manual grade, from the gradebook."""
        from nbgrader.api import Gradebook, MissingEntry
        info = resources.get("nbgrader", {})
        if not all(info.get(key) for key in ("db_url", "notebook", "assignment", "student")):
            return set()
        with Gradebook(info["db_url"]) as gradebook:
            try:
                notebook = gradebook.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
            except MissingEntry:
                return set()
            return {grade.name for grade in notebook.grades if grade.needs_manual_grade}

    def _source(self, resources):
        info = resources.get("nbgrader", {})
        if not info.get("assignment") or not info.get("notebook"):
            return None
        course = CourseDirectory(config=self.config)
        path = Path(course.format_path(course.source_directory, ".", info["assignment"])) / f"{info['notebook']}.ipynb"
        if not path.exists():
            self.log.warning("no source notebook %s: its after-grading cells are not in the feedback", path)
            return None
        return nbformat.read(path, as_version=4)
