"""Training cells say how long they take before they start (``Budget.estimate``), from what ``make bench`` measured."""
from __future__ import annotations

import json
import re

import nbformat
import pytest

from experiments.bench.notebooks import ESTIMATE, training_cells
from translab import budget as budget_module
from translab.paths import REPO_ROOT

SOLUTIONS = sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb"))
TRAINING = re.compile(r"\bfine_tune(_classifier)?\(|tqdm\(range\(budget\.")


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda p: p.stem)
def test_every_training_cell_announces_its_time(path):
    for cell in nbformat.read(path, as_version=4).cells:
        if cell.cell_type == "code" and TRAINING.search(cell.source):
            match = ESTIMATE.search(cell.source)
            assert match and match.group(1) == path.stem[:2], f"{path.stem}: a training cell without its estimate"


def test_the_estimate_reads_the_bench_and_says_when_it_has_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("translab.paths.RESULTS_DIR", tmp_path)
    assert budget_module.FULL.estimate("04", "fine-tuning both classifiers") is None
    assert "no time measured" in capsys.readouterr().out
    (tmp_path / "bench.json").write_text(json.dumps({"cpu_count": 2, "notebooks": {"04_transfer_experiment": {
        "cells": {"student": {"fine-tuning both classifiers": 96.4}, "nbgrader": {"fine-tuning both classifiers": 3.2}}}}}))
    assert budget_module.FULL.estimate("04", "fine-tuning both classifiers") == 96.4
    assert "about 96 s at the full budget on a 2-core laptop CPU" in capsys.readouterr().out
    assert budget_module.FAST.estimate("04", "fine-tuning both classifiers") == 3.2


def test_the_bench_times_each_training_cell_from_nbclients_record():
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('budget.estimate("04", "fine-tuning")\nrun()'), nbformat.v4.new_code_cell("x = 1")])
    for cell, (began, ended) in zip(notebook.cells, [("12:00:00.0", "12:01:36.4"), ("12:01:37.0", "12:01:37.1")]):
        cell.metadata["execution"] = {"iopub.execute_input": f"2026-11-23T{began}Z",
                                      "shell.execute_reply": f"2026-11-23T{ended}Z"}
    assert training_cells(notebook) == {"fine-tuning": 96.4}


def test_the_committed_bench_times_every_training_cell():
    bench = json.loads((REPO_ROOT / "results" / "bench.json").read_text())
    for path in SOLUTIONS:
        named = {m.group(2) for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code"
                 for m in [ESTIMATE.search(c.source)] if m}
        if named:
            assert set(bench["notebooks"][path.stem]["cells"]["student"]) == named, path.stem
