"""The transfer experiment: its pieces, and a reduced end-to-end run checked for schema and sense."""
from __future__ import annotations

import json
from dataclasses import asdict, replace

import pytest
import torch

from experiments import transfer as experiment
from translab import data
from experiments.transfer import RECIPES, Recipe, balanced_subset, param_groups
from translab.model import ModelConfig, build_classifier

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not


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


def test_param_groups_cover_a_bert_classifier_embeddings_last():
    from translab import bert
    config = bert.BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2,
                             intermediate_size=16, max_position_embeddings=16)
    model = experiment.BertForFineTune(bert.BertClassifier(bert.BertEncoder(config), nclasses=2))
    groups = param_groups(model, Recipe(lr_head=1e-3, lr_base=1e-4, layer_decay=0.5))
    assert [g["lr"] for g in groups] == pytest.approx([1e-3, 1e-4, 5e-5, 2.5e-5])
    encoder = model.encoder
    assert {id(p) for p in groups[-1]["params"]} == {id(p) for m in (
        encoder.word_embeddings, encoder.position_embeddings, encoder.token_type_embeddings, encoder.embedding_norm)
        for p in m.parameters()}
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids)) == len(list(model.parameters()))
    assert len(model.state_dict()) == len(model.classifier.state_dict()), "the adapter must not register twice"


def test_epoch_cap_scales_with_dataset_size():
    recipe = Recipe(lr_head=1e-3, lr_base=1e-4, batch_size=32, min_steps=300, max_epochs=12, min_epochs=3)
    assert recipe.epochs(100) == 12          # 4 steps per epoch: capped
    assert recipe.epochs(1600) == 6          # 50 steps per epoch: 300 steps
    assert recipe.epochs(7670) == 3          # big data: the minimum
    assert recipe.epochs(7670) <= recipe.epochs(800) <= recipe.epochs(100)


def _row(size, minilm, scratch, pretrained, nb=0.7):
    summary = lambda v: {"mean": sum(v) / len(v), "per_seed": v}  # noqa: E731
    return {"size": size, **{k: summary(v) for k, v in (("minilm", minilm), ("scratch", scratch),
                                                          ("pretrained", pretrained), ("naive_bayes", [nb] * 3))},
            "minilm_gap": experiment.paired_gap(minilm, scratch), "gap": experiment.paired_gap(pretrained, scratch)}


def test_minilm_target_needs_15_points_on_every_seed_up_to_400_labels():
    good = [_row("100", [0.70] * 3, [0.54] * 3, [0.55] * 3), _row("400", [0.75] * 3, [0.55] * 3, [0.58] * 3),
            _row("all", [0.85] * 3, [0.68] * 3, [0.73] * 3, nb=0.80)]
    targets = experiment.check_targets(good)
    assert targets["minilm_beats_scratch_by_ge_15_points_at_le_400_labels_every_seed"] is True
    assert targets["minilm_reaches_naive_bayes_at_all_labels"] is True
    assert targets["pretrained_reaches_naive_bayes_at_all_labels"] is False
    assert targets["minilm_minus_naive_bayes_at_all_labels"] == pytest.approx(0.05)
    one_seed_short = [_row("100", [0.70, 0.70, 0.68], [0.54] * 3, [0.55] * 3)] + good[1:]  # +14 points on seed 2
    assert experiment.check_targets(one_seed_short)[
        "minilm_beats_scratch_by_ge_15_points_at_le_400_labels_every_seed"] is False
    assert experiment.check_targets([_row("800", [0.8] * 3, [0.5] * 3, [0.5] * 3)])[
        "minilm_beats_scratch_by_ge_15_points_at_le_400_labels_every_seed"] is None


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
    assert len(result["runs"]) == len(result["sizes"]) * len(result["seeds"]) * len(experiment.INITS)
    assert set(result["recipes"]) == set(experiment.INITS) == {"pretrained", "scratch", "minilm"}
    assert set(result["cost"]) == {*experiment.INITS, "minilm_frozen"}
    for init in experiment.INITS:
        assert result["cost"][init]["wall_time_s"] > 0 and result["cost"][init]["peak_rss_mb"] > 100
    assert len(result["probes"]) == len(result["sizes"]) * len(result["seeds"])


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
        minilm = [runs[row["size"], s, "minilm"]["test_accuracy"] for s in result["seeds"]]
        assert row["minilm"]["per_seed"] == minilm
        assert row["minilm_gap"]["per_seed"] == pytest.approx([p - q for p, q in zip(minilm, scr)])
        assert row["minilm_gap"]["min"] == min(row["minilm_gap"]["per_seed"])
        probes = {(p["size"], p["seed"]): p for p in result["probes"]}
        assert row["minilm_frozen"]["per_seed"] == [probes[row["size"], s]["test_accuracy"] for s in result["seeds"]]
        for key in ("pretrained", "scratch", "minilm", "minilm_frozen", "naive_bayes", "logistic_regression"):
            assert len(row[key]["per_seed"]) == len(result["seeds"])
            assert all(0.25 <= a <= 1.0 for a in row[key]["per_seed"]), (key, row[key])
    for run in result["runs"]:
        assert 1 <= run["best_epoch"] <= run["epochs_run"] <= run["max_epochs"]


def test_quick_run_records_epoch_curves(quick_result):
    result, _ = quick_result
    for init in experiment.INITS:
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


def test_searching_one_arm_keeps_the_other_arms_ranking(tmp_path, monkeypatch):
    small = {"pretrained": {"a": RECIPES["pretrained"]}, "scratch": {"c": RECIPES["scratch"]}}
    monkeypatch.setattr(experiment, "CANDIDATES", small)
    kept = {"ranking": {"pretrained": [{"candidate": "a", "mean_valid_accuracy": 0.5}]}, "best": {"pretrained": "a"},
            "searches": {"pretrained": {"sizes": ["400"]}}}
    (tmp_path / "recipe_search.json").write_text(json.dumps(kept))
    search = experiment.tune(["32"], [0], tmp_path, experiment.PRETRAINED_PATH, threads=1, jobs=1,
                             progress=False, quick=True, inits=["scratch"])
    assert search["ranking"]["pretrained"] == kept["ranking"]["pretrained"]
    assert search["best"] == {"pretrained": "a", "scratch": "c"}
    assert search["searches"]["scratch"]["sizes"] == ["32"] and search["searches"]["pretrained"]["sizes"] == ["400"]


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
    assert set(result["recipes"]) == set(experiment.INITS), "every arm of the experiment must be in the results"
    assert result["minilm"]["sha256"] == data.sha256_of(data.minilm_dir() / "model.safetensors")
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    missing = [line for line in experiment.format_table(result).splitlines() if line not in readme]
    assert not missing, f"the README's table differs from results/transfer.json: {missing}"
    assert experiment.format_cost(result) in " ".join(readme.split()), \
        "the README's cost line differs from results/transfer.json"


def test_the_prose_quotes_the_committed_results():
    """The numbers the README, notebooks 04 and 06 and the rubric quote are the ones in results/transfer.json (and
    the rubric's BERT seeds, in results/bert_finetune.json)."""
    from translab import plots
    from translab.paths import REPO_ROOT
    result = json.loads((experiment.RESULTS_DIR / "transfer.json").read_text())
    rows = {row["size"]: row for row in result["learning_curve"]}
    valid = {row["size"]: row for row in plots.validation_by_size(result)}
    pct = lambda x: f"{100 * x:.1f}"  # noqa: E731
    def read(path: str) -> str:
        text = (REPO_ROOT / path).read_text(encoding="utf-8")
        if path.endswith(".ipynb"):
            text = " ".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
        return " ".join(text.split())
    gaps = [gap for size in ("400", "800", "1600", "all") for gap in rows[size]["gap"]["per_seed"]]
    per_seed = f"+{pct(min(gaps))} to +{pct(max(gaps))}"
    small = [rows[size][arm]["mean"] for size in ("100", "200") for arm in ("pretrained", "scratch")]
    noise = f"both sit between {pct(min(small))} and {pct(max(small))} %"
    bert = [max(run["valid_accuracy"]) for run in json.loads((experiment.RESULTS_DIR / "bert_finetune.json").read_text())["runs"]]
    seeds = f"{pct(bert[0])} %, {pct(bert[1])} % and {pct(bert[2])} % with seeds 0–2 (mean {pct(sum(bert) / len(bert))} %)"
    student = json.loads((experiment.RESULTS_DIR / "student_run.json").read_text())
    runs = {(run["seed"], run["init"]): run for run in student["runs"]}
    best = lambda init: ", ".join(pct(runs[(seed, init)]["best_valid"]) for seed in range(3))  # noqa: E731
    test_gaps = ", ".join(f"{100 * (runs[(seed, 'pretrained')]['test_accuracy'] - runs[(seed, 'scratch')]['test_accuracy']):+.1f}"
                          for seed in range(3))
    probe = student["linear_probe"]
    student_phrases = [f"best validation {best('pretrained')} % against {best('scratch')} %", f"test gaps {test_gaps} points",
                       f"{pct(probe['pretrained']['last'])} % against {pct(probe['random']['last'])} % for a random base",
                       f"{pct(probe['pretrained']['mean'])} and {pct(probe['random']['mean'])} %"]
    assert all(runs[(seed, "pretrained")]["test_accuracy"] > runs[(seed, "scratch")]["test_accuracy"] for seed in range(3)), \
        "the prose says the pretrained classifier is ahead on every seed of the student's run"
    quoted = {
        "README.md": [student_phrases[2],", ".join(f"+{pct(rows[s]['minilm_gap']['mean'])}" for s in ("100", "200", "400")),
                      f"({pct(rows['all']['minilm']['mean'])} vs {pct(rows['all']['naive_bayes']['mean'])} %)",
                      f"(+{pct(rows['1600']['gap']['mean'])})"],
        "solutions/transfer_learning/04_transfer_experiment.ipynb": [
            f"(+{pct(rows['1600']['gap']['mean'])} at 1,600 labels)", f"by {per_seed} test points", noise,
            f"({pct(rows['1600']['naive_bayes']['mean'])} % vs {pct(rows['1600']['pretrained']['mean'])} % at 1,600",
            *student_phrases],
        "grader/rubric.md": [f"(+{pct(rows['1600']['gap']['mean'])} at 1,600 labels)", f"by {per_seed} points", noise,
                             seeds, *student_phrases,
                             f"reaches {pct(valid['400']['pretrained'][0])} %, the one from scratch "
                             f"{pct(valid['400']['scratch'][0])} %",
                             f"{pct(valid['400']['minilm'][0])} % at 400 labels and {pct(valid['all']['minilm'][0])} %"],
        "solutions/transfer_learning/06_transfer_at_scale.ipynb": [
            f"{pct(valid['400']['minilm'][0])} % at 400 labels and {pct(valid['all']['minilm'][0])} %"],
    }
    for path, phrases in quoted.items():
        text = read(path)
        missing = [phrase for phrase in phrases if phrase not in text]
        assert not missing, f"{path} does not quote results/transfer.json: {missing}"
