"""Feedback step: a failing hidden test keeps only its message, not the traceback that quotes its source."""
from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from translab.contract import untagged


class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """``ClearHiddenTests`` removes the hidden source, but an error's traceback quotes the failing line of the
    cell, i.e. the hidden test.  Runs before ``ClearHiddenTests`` (which removes the markers)."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    # the message only; its machine-readable diagnosis line is for `make report`, not the student
                    message, _ = untagged(output.get("evalue", ""))
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {message}"]
        return cell, resources
