"""Feedback step: no output of a student's cell that ran after a hidden test (it could print the test's inputs)."""
from __future__ import annotations

import nbformat
from nbgrader.preprocessors import NbGraderPreprocessor

HIDDEN_AFTER_NOTE = ("[Output not shown in feedback: this cell ran after a hidden test, so what it printed could show "
                     "the hidden test's inputs. Your instructor sees it.]\n")


def is_test(cell) -> bool:
    """A test cell: graded, not an answer (its source is the gradebook's, its outputs the checker's)."""
    metadata = cell.metadata.get("nbgrader", {})
    return bool(metadata.get("grade", False) and not metadata.get("solution", False))


def is_hidden_test(cell) -> bool:
    """A test cell with hidden tests: from it on, the kernel has seen hidden inputs."""
    return cell.cell_type == "code" and is_test(cell) and "BEGIN HIDDEN TESTS" in cell.source


class ClearOutputsAfterHiddenTests(NbGraderPreprocessor):
    """A hidden test's inputs necessarily reach the kernel (the checker runs the student's code on them), so a cell
    that runs later can print them (an answer that records its arguments, printed in a cell of the student's
    own), and the feedback would hand them to the class.  Every code cell after the first hidden test shows a
    note instead of its outputs, except test cells: their source is the gradebook's and their outputs are the
    checker's record.  The autograded notebook keeps everything for the instructor.  Runs before
    ``ClearHiddenTests`` (which removes the markers)."""

    def preprocess(self, nb, resources):
        after_hidden = False
        for cell in nb.cells:
            if cell.cell_type != "code":
                continue
            if after_hidden and not is_test(cell) and cell.get("outputs"):
                cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=HIDDEN_AFTER_NOTE)]
            after_hidden = after_hidden or is_hidden_test(cell)
        return nb, resources
