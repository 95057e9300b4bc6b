"""``make release``: the student notebooks (and the gradebook's copy of the tests) from the solutions."""
from __future__ import annotations

from pathlib import Path

from translab.contract import ASSIGNMENT

from ..course import GradingError
from grader.grading.nbgrader_process import check_config, nbgrader

HELP = "regenerate notebooks/ from solutions/ (nbgrader generate_assignment)"


def arguments(parser) -> None:
    """No options."""


def run(root: Path, args) -> int:
    for path in release(root):
        print(f"released {path.relative_to(root)}")
    return 0


def release(root: Path) -> list[Path]:
    """Regenerate the student notebooks (and the gradebook's copy of the tests) from the solutions."""
    source = root / "solutions" / ASSIGNMENT
    dirty = [p.name for p in sorted(source.glob("*.ipynb")) if _has_outputs(p)]
    if dirty:
        raise GradingError(f"solution notebooks must be committed without outputs: {dirty}. "
                           "Clear them (Edit > Clear Outputs of All Cells, or `jupyter nbconvert --clear-output "
                           "--inplace`) and release again.")
    check_config(root)  # nbgrader would log the error and release with its defaults (answers and all)
    nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return sorted((root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))


def _has_outputs(path: Path) -> bool:
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    return any(cell.get("outputs") or cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code")
