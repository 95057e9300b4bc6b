import math

import pytest
import torch
import torch.nn.functional as F

from translab.data import PAD_ID
from translab.datasets import Batch, classification_collate, lm_collate
from translab.model import ModelConfig, build_classifier, build_language_model
from translab.training import (batch_loss, evaluate_accuracy, evaluate_language_model, fine_tune, make_loss,
                               set_seed, train_steps)

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not


def copy_task_batches(n, seed):
    """Sequences 2, a, a+1, a+2, ...: the next token is predictable, so a working loop learns it."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        starts = torch.randint(5, 20, (8,), generator=g)
        seqs = [[2] + [int(s) + k for k in range(6)] for s in starts]
        batches.append(lm_collate(seqs))
    return batches


def test_loss_is_cross_entropy_on_raw_logits_ignoring_padding():
    logits = torch.randn(4, 7)
    targets = torch.tensor([1, PAD_ID, 3, 6])
    expected = F.cross_entropy(logits[[0, 2, 3]], targets[[0, 2, 3]])
    assert torch.allclose(make_loss()(logits, targets), expected)
    # softmax before the loss would give a different (wrong) value
    assert not torch.allclose(make_loss()(logits.softmax(-1), targets), expected)


def test_language_model_loop_learns_and_reports_perplexity():
    set_seed(0)
    model = build_language_model(ModelConfig(40, nhid=32, nlayers=1, nhead=2, dropout=0.0))
    held_out = copy_task_batches(4, seed=99)
    before = evaluate_language_model(model, held_out)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    losses = train_steps(model, copy_task_batches(120, seed=1), optimizer, progress=False)
    after = evaluate_language_model(model, held_out)
    assert len(losses) == 120 and losses[-1] < losses[0]
    assert after["perplexity"] < before["perplexity"] / 3
    assert after["perplexity"] == pytest.approx(math.exp(after["loss"]))


def test_evaluation_counts_only_real_tokens():
    set_seed(0)
    model = build_language_model(ModelConfig(30, nhid=8, nlayers=1, nhead=2, dropout=0.0))
    alone = evaluate_language_model(model, [lm_collate([[2, 7, 8, 3]])])
    padded = lm_collate([[2, 7, 8, 3], [2, 9, 3]])
    with torch.no_grad():
        model.eval()
        logits = model(padded.inputs, padded.padding_mask)
    manual = F.cross_entropy(logits.reshape(-1, 30), padded.targets.reshape(-1), ignore_index=PAD_ID)
    assert evaluate_language_model(model, [padded])["loss"] == pytest.approx(manual.item(), rel=1e-5)
    assert alone["loss"] > 0


def sentiment_batches(n, seed):
    """Label = whether token 9 occurs; variable lengths so padding matters."""
    g = torch.Generator().manual_seed(seed)
    batches = []
    for _ in range(n):
        examples = []
        for _ in range(16):
            length = int(torch.randint(2, 7, (1,), generator=g))
            ids = torch.randint(10, 20, (length,), generator=g).tolist()
            label = int(torch.rand(1, generator=g) < 0.5)
            if label:
                ids[int(torch.randint(0, length, (1,), generator=g))] = 9
            examples.append(([2] + ids + [3], label))
        batches.append(classification_collate(examples))
    return batches


def test_fine_tune_learns_keeps_best_valid_epoch_and_is_seeded():
    def run():
        set_seed(0)
        model = build_classifier(ModelConfig(25, nhid=16, nlayers=1, nhead=2, dropout=0.0), 2)
        optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
        valid = sentiment_batches(4, seed=50)
        history = fine_tune(model, lambda epoch: sentiment_batches(20, seed=epoch), valid, epochs=4,
                            optimizer=optimizer, test_batches=sentiment_batches(4, seed=60), progress=False)
        return model, history, valid

    model, history, valid = run()
    assert history["epoch"] == [1, 2, 3, 4]
    assert len(history["test_accuracy"]) == 4
    best = max(history["valid_accuracy"])
    assert best > 0.8
    assert history["best_epoch"] == history["valid_accuracy"].index(best) + 1
    assert evaluate_accuracy(model, valid) == pytest.approx(best)
    _, again, _ = run()
    assert again["valid_accuracy"] == history["valid_accuracy"]


def test_early_stopping_stops():
    set_seed(0)
    model = build_classifier(ModelConfig(25, nhid=8, nlayers=1, nhead=2), 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.0)  # nothing improves
    history = fine_tune(model, lambda e: sentiment_batches(2, e), sentiment_batches(2, 9), epochs=10,
                        optimizer=optimizer, patience=2, progress=False)
    assert len(history["epoch"]) == 3


def test_batch_loss_for_classification_uses_labels():
    model = build_classifier(ModelConfig(25, nhid=8, nlayers=1, nhead=2, dropout=0.0), 3).eval()
    batch = Batch(torch.tensor([[2, 11, 3]]), torch.tensor([[False] * 3]), torch.tensor([2]))
    with torch.no_grad():
        expected = F.cross_entropy(model(batch.inputs), batch.targets)
        assert torch.allclose(batch_loss(model, batch), expected)
        label_zero = Batch(batch.inputs, batch.padding_mask, torch.tensor([PAD_ID]))
        assert batch_loss(model, label_zero) > 0  # class 0 counts: it is not padding


def test_bf16_only_where_the_cpu_has_it():
    from translab.training import fast_bf16_available
    assert fast_bf16_available("flags : fpu sse2 avx2 avx512f avx512_bf16") is True
    assert fast_bf16_available("flags : fpu sse2 avx2 amx_bf16 amx_tile") is True
    assert fast_bf16_available("flags : fpu sse2 avx2 avx512f") is False
    assert fast_bf16_available("") is False


def test_warmup_rises_then_decays_to_zero():
    from translab.training import warmup_linear
    optimizer = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
    scheduler = warmup_linear(optimizer, warmup_steps=4, total_steps=10)
    rates = []
    for _ in range(10):
        rates.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        scheduler.step()
    assert rates[:4] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert rates[4:] == pytest.approx([1.0, 5 / 6, 4 / 6, 3 / 6, 2 / 6, 1 / 6])


def test_part_4_runs_the_recipe_chosen_on_validation_for_each_model():
    """The notebook's recipe is the search's best among those that read the last token, for each model, and a
    uniform one (the notebook has no per-layer learning rates); it trains and is seeded."""
    import json
    from translab.paths import RESULTS_DIR
    from translab.results import chosen_recipe
    from translab.training import fine_tune_with_recipe
    search = json.loads((RESULTS_DIR / "recipe_search.json").read_text(encoding="utf-8"))
    for init in ("pretrained", "scratch"):
        name, recipe = chosen_recipe(search, init)
        last = [row for row in search["ranking"][init] if row["recipe"]["pooling"] == "last"]
        assert name == last[0]["candidate"]
        assert last[0]["mean_valid_accuracy"] == max(row["mean_valid_accuracy"] for row in last)
        assert recipe["lr_head"] == recipe["lr_base"] and recipe["layer_decay"] == 1.0 and not recipe["freeze_epochs"]

    def run():
        set_seed(0)
        model = build_classifier(ModelConfig(25, nhid=16, nlayers=1, nhead=2, dropout=0.0), 2)
        return fine_tune_with_recipe(model, recipe, lambda epoch: sentiment_batches(20, seed=epoch),
                                     sentiment_batches(4, seed=50), epochs=4, progress=False)
    history = run()
    assert max(history["valid_accuracy"]) > 0.8 and run()["valid_accuracy"] == history["valid_accuracy"]
    with pytest.raises(ValueError, match="uniform recipes"):
        fine_tune_with_recipe(build_classifier(ModelConfig(25, nhid=8, nlayers=1, nhead=2), 2),
                              {**recipe, "lr_head": 1e-3, "lr_base": 3e-4}, lambda e: [], [], epochs=1)
    with pytest.raises(FileNotFoundError, match="ask your instructor"):
        chosen_recipe(None, "pretrained")
