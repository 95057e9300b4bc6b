"""Feedback step: the grader's notes (``NoteOwnRun``) are not the student's to read."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.own_run import is_note


class RemoveGraderNotes(NbGraderPreprocessor):
    """First in GenerateFeedback: the cells ``NoteOwnRun`` put under own-run answers are removed."""

    def preprocess(self, nb, resources):
        nb.cells = [cell for cell in nb.cells if not is_note(cell)]
        return nb, resources
