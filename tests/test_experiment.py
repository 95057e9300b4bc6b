"""The transfer experiment: its pieces, and a reduced end-to-end run checked for schema and sense."""
from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
import torch

from translab import data, experiment
from translab.experiment import RECIPES, Recipe, balanced_subset, param_groups
from translab.model import ModelConfig, build_classifier


def test_balanced_subset_is_balanced_seeded_and_from_train():
    train = data.load_split("train")
    subset = balanced_subset(train, 100, seed=3)
    assert len(subset) == 100 and sum(label for _, label in subset) == 50
    assert subset == balanced_subset(train, 100, seed=3)
    assert subset != balanced_subset(train, 100, seed=4)
    assert set(subset) <= set(train)
    with pytest.raises(ValueError):
        balanced_subset(train, 101, seed=0)


def test_all_means_train_plus_pool():
    pairs = experiment.training_pairs("all", seed=0)
    assert len(pairs) == len(data.load_split("train")) + len(data.load_split("pool"))


def test_param_groups_cover_the_model_with_discriminative_rates():
    model = build_classifier(ModelConfig(50, nhid=8, nlayers=3, nhead=2), 2)
    recipe = Recipe(lr_head=1e-3, lr_base=1e-4, layer_decay=0.5)
    groups = param_groups(model, recipe)
    assert [g["lr"] for g in groups] == pytest.approx([1e-3, 1e-4, 5e-5, 2.5e-5, 1.25e-5])
    assert groups[-1]["params"] == [model.base.encoder.weight]  # the embedding learns slowest
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))


def test_epoch_cap_scales_with_dataset_size():
    recipe = Recipe(lr_head=1e-3, lr_base=1e-4, batch_size=32, min_steps=300, max_epochs=12, min_epochs=3)
    assert recipe.epochs(100) == 12          # 4 steps per epoch: capped
    assert recipe.epochs(1600) == 6          # 50 steps per epoch: 300 steps
    assert recipe.epochs(7670) == 3          # big data: the minimum
    assert recipe.epochs(7670) <= recipe.epochs(800) <= recipe.epochs(100)


def test_missing_checkpoint_says_how_to_fix(tmp_path):
    with pytest.raises(FileNotFoundError, match="make pretrain"):
        experiment.load_pretrained(tmp_path / "nope.pt")


def test_run_one_is_deterministic_and_selects_on_validation():
    valid = balanced_subset(data.load_split("valid"), 64, 0)
    test = balanced_subset(data.load_split("test"), 64, 0)
    recipe = replace(RECIPES["pretrained"], max_epochs=2, min_epochs=2, min_steps=1, patience=5)
    job = {"size": "32", "seed": 1, "init": "pretrained", "threads": 1, "recipe": asdict(recipe),
           "checkpoint": str(experiment.PRETRAINED_PATH), "valid": valid, "test": test, "curve": True}
    first, second = experiment.run_one(job), experiment.run_one(job)
    assert first["history"]["train_loss"] == second["history"]["train_loss"]
    assert first["test_accuracy"] == second["test_accuracy"]
    history = first["history"]
    best = history["valid_accuracy"].index(max(history["valid_accuracy"])) + 1
    assert first["best_epoch"] == best, "the kept epoch must be the first best on validation"
    assert first["test_accuracy"] == history["test_accuracy"][best - 1]


@pytest.fixture(scope="module")
def quick_result(tmp_path_factory):
    out = tmp_path_factory.mktemp("experiment")
    assert experiment.main(["--quick", "--out", str(out), "--jobs", "2", "--no-progress"]) == 0
    return json.loads((out / "transfer.json").read_text()), out


def test_quick_run_writes_json_and_plot(quick_result):
    result, out = quick_result
    assert (out / "transfer.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    for key in ("schema_version", "sizes", "seeds", "recipes", "learning_curve", "targets", "runs",
                "baselines", "epoch_curves", "checkpoint", "selection"):
        assert key in result, f"transfer.json lacks {key}"
    assert result["quick"] is True
    assert len(result["runs"]) == len(result["sizes"]) * len(result["seeds"]) * 2
    assert set(result["recipes"]) == {"pretrained", "scratch"}


def test_quick_run_numbers_are_consistent(quick_result):
    result, _ = quick_result
    runs = {(r["size"], r["seed"], r["init"]): r for r in result["runs"]}
    for row in result["learning_curve"]:
        assert row["n_train"] == int(row["size"])
        pre, scr = row["pretrained"]["per_seed"], row["scratch"]["per_seed"]
        assert pre == [runs[row["size"], s, "pretrained"]["test_accuracy"] for s in result["seeds"]]
        assert row["gap"]["per_seed"] == pytest.approx([p - q for p, q in zip(pre, scr)])
        assert row["gap"]["mean"] == pytest.approx(sum(pre) / len(pre) - sum(scr) / len(scr))
        assert row["gap"]["all_positive"] == all(g > 0 for g in row["gap"]["per_seed"])
        for key in ("pretrained", "scratch", "naive_bayes", "logistic_regression"):
            assert len(row[key]["per_seed"]) == len(result["seeds"])
            assert all(0.25 <= a <= 1.0 for a in row[key]["per_seed"]), (key, row[key])
    for run in result["runs"]:
        assert 1 <= run["best_epoch"] <= run["epochs_run"] <= run["max_epochs"]


def test_quick_run_records_epoch_curves(quick_result):
    result, _ = quick_result
    for init in ("pretrained", "scratch"):
        curves = result["epoch_curves"][init]
        assert len(curves) == len(result["seeds"])
        for curve in curves:
            assert len(curve["test_accuracy"]) == len(curve["valid_accuracy"]) == len(curve["epoch"]) >= 1
            assert all(torch.isfinite(torch.tensor(curve["train_loss"])))


def test_recipe_search_ranks_candidates_on_validation_without_touching_test(tmp_path, monkeypatch):
    loaded = []
    real_load_split = data.load_split

    def spy(name, *args, **kwargs):
        loaded.append(name)
        return real_load_split(name, *args, **kwargs)

    monkeypatch.setattr(data, "load_split", spy)
    small = {"pretrained": {"a": RECIPES["pretrained"], "b": replace(RECIPES["pretrained"], lr_base=1e-4)},
             "scratch": {"c": RECIPES["scratch"]}}
    monkeypatch.setattr(experiment, "CANDIDATES", small)
    search = experiment.tune(["32"], [0], tmp_path, experiment.PRETRAINED_PATH, threads=1, jobs=1,
                             progress=False, quick=True)
    assert "test" not in loaded, "the recipe search must never load the test set"
    assert json.loads((tmp_path / "recipe_search.json").read_text())["best"] == search["best"]
    ranking = search["ranking"]["pretrained"]
    assert [row["candidate"] for row in ranking] == sorted(["a", "b"], key=lambda name: -next(
        row["mean_valid_accuracy"] for row in ranking if row["candidate"] == name))
    assert ranking[0]["mean_valid_accuracy"] >= ranking[1]["mean_valid_accuracy"]
    assert search["best"] == {"pretrained": ranking[0]["candidate"], "scratch": "c"}


def test_the_recipes_are_the_winners_of_the_committed_search():
    """RECIPES must be what `--tune` chose on validation (results/recipe_search.json), not a hand pick."""
    search = json.loads((experiment.RESULTS_DIR / "recipe_search.json").read_text())
    assert search["best"] == experiment.CHOSEN
    assert "test" in search["selection"] and "not loaded" in search["selection"]
    for init, rows in search["ranking"].items():
        assert rows[0]["candidate"] == experiment.CHOSEN[init]
        assert rows[0]["mean_valid_accuracy"] == max(row["mean_valid_accuracy"] for row in rows)
        for row in rows:  # the file describes the candidates this code would run
            assert row["recipe"] == asdict(experiment.CANDIDATES[init][row["candidate"]]), row["candidate"]
    assert experiment.RECIPES == {init: experiment.CANDIDATES[init][name] for init, name in experiment.CHOSEN.items()}


def test_checkpoint_comparison_is_on_validation_only_and_deterministic(tmp_path, monkeypatch):
    loaded = []
    real_load_split = data.load_split
    monkeypatch.setattr(data, "load_split", lambda name, *a, **k: loaded.append(name) or real_load_split(name, *a, **k))
    same = experiment.PRETRAINED_PATH
    comparison = experiment.compare_checkpoints({"a": same, "b": same}, ["32"], [0], tmp_path, threads=1, jobs=1,
                                                progress=False, quick=True)
    assert "test" not in loaded, "a pretraining choice must never be made on the test set"
    rows = comparison["checkpoints"]
    assert rows["a"]["valid_accuracy"] == rows["b"]["valid_accuracy"], "same checkpoint, same seed: same score"
    assert 0 < rows["a"]["mean_valid_accuracy"] < 1 and rows["a"]["heldout_perplexity"] > 1
    assert json.loads((tmp_path / "checkpoint_comparison.json").read_text())["best"] in ("a", "b")


def test_committed_results_are_a_full_run_on_the_shipped_checkpoint_and_the_readme_shows_them():
    from translab.paths import REPO_ROOT
    result = json.loads((experiment.RESULTS_DIR / "transfer.json").read_text())
    assert not result["quick"] and len(result["seeds"]) >= 3
    assert {"100", "400", "1600", "all"} <= set(result["sizes"])
    assert result["checkpoint"]["sha256"] == data.sha256_of(experiment.PRETRAINED_PATH), \
        "results/transfer.json was produced with another checkpoint: rerun `make experiment`"
    assert result["recipes"] == {init: asdict(recipe) for init, recipe in RECIPES.items()}
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    missing = [line for line in experiment.format_table(result).splitlines() if line not in readme]
    assert not missing, f"the README's table differs from results/transfer.json: {missing}"
