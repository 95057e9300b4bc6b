"""The reference tensors and the notebooks' static properties (no kernel needed)."""
from __future__ import annotations

import nbformat
import pytest

from grader import references
from grader.batch import ASSIGNMENT
from translab.paths import REPO_ROOT

SOLUTIONS = sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))
POINTS = {"01_mask_and_positional_encoding": 8, "02_model_and_parameters": 17, "03_pretraining_and_generation": 6,
          "04_transfer_experiment": 8, "05_masked_language_modeling": 9, "06_transfer_at_scale": 12}
WRITTEN = {"written_mask_pe": 4, "written_heads": 2, "written_parameters": 6, "written_interpretation": 4,
           "written_mlm": 4, "written_scale": 4}


def test_references_are_up_to_date_with_translab():
    assert references.stale() == [], "grader/references/ differ from translab: run `make references` and commit"


def test_six_solution_notebooks():
    assert [p.stem for p in SOLUTIONS] == list(POINTS)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_solution_notebook_is_clean(path):
    notebook = nbformat.read(path, as_version=4)
    assert notebook.metadata["kernelspec"]["name"] == "python3"
    for cell in notebook.cells:
        if cell.cell_type == "code":
            assert not cell.outputs and cell.execution_count is None, "commit solutions without outputs"


def _grades(path):
    for cell in nbformat.read(path, as_version=4).cells:
        meta = cell.metadata.get("nbgrader", {})
        if meta.get("grade"):
            yield meta["grade_id"], meta["points"], cell


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_points_per_notebook(path):
    assert sum(points for _, points, _ in _grades(path)) == POINTS[path.stem]


def test_written_weights_and_total():
    written = {gid: points for path in SOLUTIONS for gid, points, cell in _grades(path) if cell.cell_type == "markdown"}
    assert written == WRITTEN
    assert sum(POINTS.values()) == 60


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_answer_is_followed_by_a_visible_and_a_hidden_check(path):
    cells = nbformat.read(path, as_version=4).cells
    tests = [cell for cell in cells if cell.metadata.get("nbgrader", {}).get("grade") and cell.cell_type == "code"]
    assert any("BEGIN HIDDEN TESTS" in cell.source for cell in tests)
    assert any("BEGIN HIDDEN TESTS" not in cell.source for cell in tests)
    for cell in tests:
        assert "tqdm" not in cell.source and "print(" not in cell.source or "file=" not in cell.source
