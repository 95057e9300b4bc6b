"""The "your progress" cell: each part's visible checks, as its test cells call them, summarised."""
from __future__ import annotations

import json

import pytest
import torch

from translab import checks
from translab.paths import REPO_ROOT

NOTEBOOKS = sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb"))


def _visible_calls(path) -> list[str]:
    """The check calls of a notebook's graded test cells that are not hidden, in order."""
    calls = []
    for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        grading = cell["metadata"].get("nbgrader", {})
        if cell["cell_type"] == "code" and grading.get("grade") and not grading.get("solution"):
            source = "".join(cell["source"])
            if "BEGIN HIDDEN TESTS" not in source:
                calls += [line.strip() for line in source.splitlines() if line.strip().startswith("checks.check_")]
    return calls


@pytest.mark.parametrize("part, path", list(enumerate(NOTEBOOKS, start=1)), ids=lambda v: getattr(v, "stem", v))
def test_each_parts_progress_runs_the_checks_its_test_cells_run(part, path):
    assert checks.VISIBLE[part] == _visible_calls(path)
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    assert any("".join(c["source"]) == f"checks.progress({part}, globals());" for c in cells if c["cell_type"] == "code")


def test_progress_counts_passes_and_says_why_the_others_fail(capsys, monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)

    def generate_square_subsequent_mask(sz):
        return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1)

    results = checks.progress(1, {"generate_square_subsequent_mask": generate_square_subsequent_mask, "torch": torch})
    out = capsys.readouterr().out
    assert [why is None for _, why in results] == [True, False, False, False]
    assert "your progress in part 1: 1 of 4 visible checks pass" in out
    assert "✓ check_mask(generate_square_subsequent_mask)" in out
    assert "✗ check_positional_encoding(PositionalEncoding)" in out and "PositionalEncoding is not defined yet" in out


def test_progress_is_not_measured_while_nbgrader_runs_the_notebook(capsys, monkeypatch):
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert checks.progress(2, {}) == []
    assert "not measured while nbgrader" in capsys.readouterr().out
