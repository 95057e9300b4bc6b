"""Autograde's sanitize step: the figures an own-run notebook's outputs showed, kept for ``NoteOwnRun``."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.own_run import (MAX_FIGURES, OWN_RUN, SUBMITTED_KEY, SUBMITTED_LINES_KEY, figures, outputs_text,
                                   quoted_lines)


class RecordSubmittedFigures(NbGraderPreprocessor):
    """Before ClearOutput removes them (``nbgrader_config.py``): the figures of the submitted outputs of a notebook
    with an own-run written answer (``grader.course.own_run``), and the lines its note quotes, go into its metadata.
    It decides no score."""

    def preprocess(self, nb, resources):
        meta = nb.metadata.setdefault("translab", {})
        meta.pop(SUBMITTED_KEY, None)  # whatever the submission says there itself
        meta.pop(SUBMITTED_LINES_KEY, None)
        own = OWN_RUN.get((resources.get("nbgrader") or {}).get("notebook"))
        if own is not None:
            text = outputs_text(nb)
            meta[SUBMITTED_KEY] = sorted(figures(text))[:MAX_FIGURES]
            if own.lines:
                meta[SUBMITTED_LINES_KEY] = quoted_lines(text, own.lines)
        return nb, resources
