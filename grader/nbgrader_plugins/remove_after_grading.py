"""Release step, first in nbgrader's ``GenerateAssignment``: the cells shown only after grading are not released."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.after_grading import after_grading


class RemoveAfterGrading(NbGraderPreprocessor):
    """Release preprocessor: no after-grading cell in a student notebook (nor in the gradebook's copy)."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not after_grading(cell)]
        return nb, resources
