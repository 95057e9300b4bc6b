"""Autograde's first sanitize step: the variant code a submission's outputs show, kept for ``GuardedExecute``."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.course.variants import SHOWN_KEY, variant_in_outputs


class RecordVariantShown(NbGraderPreprocessor):
    """Before ClearOutput removes them (``nbgrader_config.py``): the variant code the submission's outputs show
    goes into the notebook's metadata, where ``GuardedExecute`` compares it with the one it derives and flags a
    mismatch.  It decides no score."""

    def preprocess(self, nb, resources):
        meta = nb.metadata.setdefault("translab", {})
        meta.pop(SHOWN_KEY, None)  # whatever the submission says there itself
        shown = variant_in_outputs(nb)
        if shown is not None:
            meta[SHOWN_KEY] = shown
        return nb, resources
