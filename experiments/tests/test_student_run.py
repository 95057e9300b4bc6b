"""The student's part 4 over seeds: the notebook's code, each seed paired, the probe beside it; and the notebook runs
what this measures."""
from __future__ import annotations

import json

from experiments import student_run
from translab.budget import FAST
from translab.paths import REPO_ROOT


def test_a_small_run_pairs_both_models_per_seed_and_probes_both_bases():
    result = student_run.run([0, 1], budget=FAST)
    assert [(run["seed"], run["init"]) for run in result["runs"]] == \
        [(0, "pretrained"), (0, "scratch"), (1, "pretrained"), (1, "scratch")]
    for run in result["runs"]:
        assert 1 <= run["best_epoch"] <= run["epochs"] and 0 <= run["test_accuracy"] <= 1
        assert run["best_valid"] == max(run["valid_accuracy"])
    assert set(result["linear_probe"]) == {"pretrained", "random"}
    assert result["recipes"] == {"pretrained": "uniform lr 1e-3", "scratch": "uniform lr 1e-3"}


def test_notebook_04_runs_the_code_this_measures():
    """The committed figures are the notebook's: the same recipe call and probe functions, at the student budget."""
    cells = json.loads((REPO_ROOT / "solutions" / "transfer_learning" / "04_transfer_experiment.ipynb").read_text())
    code = "\n".join("".join(cell["source"]) for cell in cells["cells"] if cell["cell_type"] == "code")
    for call in ("chosen_recipe(search, init)", "fine_tune_with_recipe(model, recipes[name][1], train_batches,",
                 "budget.finetune_epochs, seed=0", "sentence_features(base, tokenizer, train_pairs)",
                 "linear_probe(train_features, valid_features, pooling)",
                 'load_split("train")[: budget.finetune_train_size]'):
        assert call in code, call
    committed = json.loads((REPO_ROOT / "results" / "student_run.json").read_text())
    assert committed["budget"] == "full" and [run["seed"] for run in committed["runs"]] == [0, 0, 1, 1, 2, 2]
