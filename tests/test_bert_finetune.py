"""Part 6's helpers: the reference answers agree with the strict loader, fine-tuning and its plot."""
from __future__ import annotations

import json

import matplotlib
import pytest
import torch
from torch import nn

from translab import plots
from translab.bert import (BertClassifier, BertConfig, BertEncoder, MINILM_TRAINING, convert_checkpoint,
                           count_parameters_formula, evaluate_accuracy, fine_tune_classifier, load_checkpoint,
                           load_pretrained_weights, minilm_tokenizer, pretraining_comparison, sentence_batches)
from translab.budget import FAST, FULL
from translab.paths import RESULTS_DIR
from translab.bert import to_checkpoint

matplotlib.use("Agg")
TINY = BertConfig(vocab_size=30522, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=16,
                  max_position_embeddings=64)
PAIRS = [("a gorgeous , witty , seductive movie .", 1), ("the plot is a mess .", 0), ("quiet and lovely .", 1),
         ("it never comes alive , not for a moment .", 0), ("fine .", 1)]


@pytest.fixture(scope="module")
def tokenizer():
    return minilm_tokenizer()


def test_convert_checkpoint_is_what_the_strict_loader_loads():
    config, checkpoint = load_checkpoint()
    strict, converted = BertEncoder(config), BertEncoder(config)
    load_pretrained_weights(strict, checkpoint)
    converted.load_state_dict(convert_checkpoint(checkpoint, config), strict=True)
    for (name, a), (_, b) in zip(strict.named_parameters(), converted.named_parameters()):
        assert torch.equal(a, b), name


@pytest.mark.parametrize("config", [BertConfig(), TINY, BertConfig(vocab_size=7, hidden_size=12, num_hidden_layers=3,
                                                                   num_attention_heads=3, intermediate_size=5,
                                                                   max_position_embeddings=9, type_vocab_size=4)])
def test_parameter_formula_equals_numel(config):
    model = BertEncoder(config)
    numel = sum(p.numel() for p in model.parameters())
    assert count_parameters_formula(config) == numel
    assert count_parameters_formula(config, pooler=True) == numel + sum(p.numel() for p in nn.Linear(
        config.hidden_size, config.hidden_size).parameters())


def test_synthetic_checkpoint_round_trips_through_the_mapping():
    torch.manual_seed(0)
    model = BertEncoder(TINY)
    checkpoint = to_checkpoint(model)
    assert {"embeddings.position_ids", "pooler.dense.weight", "pooler.dense.bias"} <= checkpoint.keys()
    again = BertEncoder(TINY)
    again.load_state_dict(convert_checkpoint(checkpoint, TINY))
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), again.parameters()))


def test_sentence_batches_keep_every_sentence_once_with_similar_lengths(tokenizer):
    pairs = PAIRS * 7
    batches = sentence_batches(tokenizer, pairs, 4, shuffle=True, seed=3)
    assert sum(len(b.labels) for b in batches) == len(pairs)
    assert sorted(int(label) for b in batches for label in b.labels) == sorted(label for _, label in pairs)
    for batch in batches:
        assert batch.input_ids.shape == batch.padding_mask.shape == batch.token_type_ids.shape
        lengths = (~batch.padding_mask).sum(1)
        assert int(lengths.max() - lengths.min()) <= 10  # sorted by length: batches hold similar sentences
    again = sentence_batches(tokenizer, pairs, 4, shuffle=True, seed=3)
    assert all(torch.equal(a.input_ids, b.input_ids) for a, b in zip(batches, again))


def test_fine_tune_returns_a_history_keeps_the_best_epoch_and_writes_no_stderr(tokenizer, capfd):
    torch.manual_seed(0)
    model = BertClassifier(BertEncoder(TINY), nclasses=2)
    history = fine_tune_classifier(model, tokenizer, PAIRS, PAIRS, epochs=3, lr=1e-3, batch_size=2, progress=False)
    assert history["epoch"] == [1, 2, 3] and history["seen"] == [5, 10, 15]
    assert len(history["train_loss"]) == len(history["valid_accuracy"]) == 3
    best = history["best_epoch"]
    assert history["valid_accuracy"][best - 1] == max(history["valid_accuracy"])
    assert evaluate_accuracy(model, sentence_batches(tokenizer, PAIRS, 64)) == pytest.approx(
        history["valid_accuracy"][best - 1])
    assert capfd.readouterr().err == ""


def test_plot_beside_part4_with_and_without_results():
    history = {"epoch": [1, 2], "seen": [400, 800], "valid_accuracy": [0.75, 0.76], "best_epoch": 2}
    results = plots.load_results(RESULTS_DIR / "transfer.json")
    assert results is not None
    rows = plots.validation_by_size(results)
    assert [row["n_train"] for row in rows] == [row["n_train"] for row in results["learning_curve"]]
    runs = [r for r in results["runs"] if r["size"] == "400" and r["init"] == "pretrained"]
    assert rows[2]["pretrained"][0] == pytest.approx(sum(r["valid_accuracy"] for r in runs) / len(runs))
    left, right = plots.plot_bert_beside_part4(history, 400, results, [dict(history, seed=1)])
    assert len(left.lines) > 3 and len(right.lines) > 3
    left, right = plots.plot_bert_beside_part4(history, 400, None)
    assert right.lines


def test_the_measured_runs_match_the_student_budget():
    measured = json.loads((RESULTS_DIR / "bert_finetune.json").read_text())
    assert measured["budget"] == {"train_size": FULL.bert_train_size, "epochs": FULL.bert_epochs,
                                  "eval_size": FULL.bert_eval_size}
    assert [run["seed"] for run in measured["runs"]] == [0, 1, 2]
    assert FAST.bert_train_size < FULL.bert_train_size


def test_cost_table_reads_the_manifest_and_the_model_card():
    rows = {what: (ours, theirs) for what, ours, theirs in pretraining_comparison()}
    assert rows["parameters"] == ("2,572,000 (with its LM head)", "22,713,216")
    assert "1,717,960 tokens" in rows["pretraining text"][0]
    assert f"{MINILM_TRAINING['steps']:,} x {MINILM_TRAINING['batch size (pairs)']:,}" in rows["optimizer steps x batch"][1]
