"""A student who did the work: a released notebook with the solutions' answers in it (tests, the GPU check)."""
from __future__ import annotations

from pathlib import Path

import nbformat


def with_solutions(released: Path, solution: Path) -> nbformat.NotebookNode:
    """The released notebook with every autograded answer cell replaced by the solution's (a student who did it)."""
    notebook = nbformat.read(released, as_version=4)
    answers = {cell.metadata["nbgrader"]["grade_id"]: cell.source
               for cell in nbformat.read(solution, as_version=4).cells
               if cell.metadata.get("nbgrader", {}).get("solution")}
    for cell in notebook.cells:
        grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
        if grade_id in answers and cell.cell_type == "code":
            cell.source = answers[grade_id]
    return notebook
