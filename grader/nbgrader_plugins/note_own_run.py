"""Autograde step after the re-run: the grader's note under an own-run written answer."""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course import course_root
from grader.course.own_run import (OWN_RUN, SUBMITTED_KEY, SUBMITTED_LINES_KEY, figures, is_note, note, outputs_text,
                                   quoted_lines)
from grader.grading.similarity import released_notebooks


class NoteOwnRun(NbGraderPreprocessor):
    """Right after ``GuardedExecute``: under the notebook's own-run written answer (``grader.course.own_run``), a
    markdown cell for the grader with each figure the answer states, found or not in the submitted outputs and in
    the re-run, and the output lines the notebook's ``OwnRun`` quotes, both ways.  The formgrader shows it beside
    the answer; ``RemoveGraderNotes`` keeps it out of the feedback.  It decides no score."""

    def preprocess(self, nb, resources):
        own = OWN_RUN.get((resources.get("nbgrader") or {}).get("notebook"))
        if own is None:
            return nb, resources
        nb.cells = [cell for cell in nb.cells if not is_note(cell)]  # a note the submission carried is not ours
        index = next((i for i, cell in enumerate(nb.cells)
                      if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == own.grade_id), None)
        if index is None:
            return nb, resources
        kept = nb.metadata.get("translab", {})
        released = [path for path in released_notebooks(course_root()) if path.stem == resources["nbgrader"]["notebook"]]
        public = figures(released[0].read_text(encoding="utf-8")) if released else set()
        rerun = outputs_text(nb)
        quoted = (list(kept.get(SUBMITTED_LINES_KEY, [])), quoted_lines(rerun, own.lines)) if own.lines else None
        text = note(figures(nb.cells[index].source), set(kept.get(SUBMITTED_KEY, [])), figures(rerun), own.deterministic,
                    public, quoted)
        nb.cells.insert(index + 1, nbformat.v4.new_markdown_cell(text))
        return nb, resources
