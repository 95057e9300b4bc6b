"""Autograde's sanitize step: the figures an own-run notebook's outputs showed, kept for ``NoteOwnRun``."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.own_run import MAX_FIGURES, OWN_RUN, SUBMITTED_KEY, figures, outputs_text


class RecordSubmittedFigures(NbGraderPreprocessor):
    """Before ClearOutput removes them (``nbgrader_config.py``): the figures of the submitted outputs of a notebook
    with an own-run written answer (``grader.course.own_run``) go into its metadata.  It decides no score."""

    def preprocess(self, nb, resources):
        meta = nb.metadata.setdefault("translab", {})
        meta.pop(SUBMITTED_KEY, None)  # whatever the submission says there itself
        if (resources.get("nbgrader") or {}).get("notebook") in OWN_RUN:
            meta[SUBMITTED_KEY] = sorted(figures(outputs_text(nb)))[:MAX_FIGURES]
        return nb, resources
