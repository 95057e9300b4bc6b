"""Cells students see only after grading: the summaries that restate a written question's answer, the answers
to the ungraded self-check questions, and the model answer of each written question.

A markdown cell of the solutions tagged ``"translab": {"after_grading": true}`` is taken out of the student
notebooks when they are released (``RemoveAfterGrading``, first in nbgrader's ``GenerateAssignment``) and put back
in each student's feedback (``ShowAfterGrading``), read from the solutions, after the cell it follows there.  The
model answer of a written question is the solution of its answer cell (nbgrader's release leaves only "YOUR ANSWER
HERE"); the feedback shows it below the student's own answer, found by ``grade_id``.
"""
from __future__ import annotations

from pathlib import Path

import nbformat
from nbgrader.coursedir import CourseDirectory
from nbgrader.preprocessors import NbGraderPreprocessor

KEY = "after_grading"
NOTE = "*Shown after grading.*\n\n"
MODEL_ANSWER = "*Model answer, shown after grading* (your answer is above; the rubric gives the points):\n\n"


def written_answer(cell) -> bool:
    """A written question's answer cell: markdown, graded, and the student's to write."""
    grading = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and bool(grading.get("grade")) and bool(grading.get("solution"))


def model_answer(cell) -> str:
    """The solution's text of a written answer cell, without nbgrader's delimiters."""
    lines = [line for line in cell.source.splitlines() if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
    return "\n".join(lines).strip()


def after_grading(cell) -> bool:
    return cell.cell_type == "markdown" and bool(cell.metadata.get("translab", {}).get(KEY))


class RemoveAfterGrading(NbGraderPreprocessor):
    """Release preprocessor: no after-grading cell in a student notebook (nor in the gradebook's copy)."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not after_grading(cell)]
        return nb, resources


class ShowAfterGrading(NbGraderPreprocessor):
    """Feedback preprocessor: the notebook's after-grading cells, from the solutions, each after the cell it follows
    there (found by cell id; at the end when the student deleted that cell), and each written question's model
    answer below the student's answer."""

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
        for cell in source.cells:
            if not written_answer(cell):
                continue
            grade_id = cell.metadata["nbgrader"]["grade_id"]
            ids = [c.metadata.get("nbgrader", {}).get("grade_id") for c in nb.cells]
            position = ids.index(grade_id) + 1 if grade_id in ids else len(nb.cells)
            nb.cells.insert(position, nbformat.v4.new_markdown_cell(MODEL_ANSWER + model_answer(cell)))
        return nb, resources

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
