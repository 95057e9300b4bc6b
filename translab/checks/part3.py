"""Checks of part 3: language-model targets, the loss and greedy generation."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .. import references
from ..data import PAD_ID
from .harness import (Mistake, CheckFailed, _attempt, _call, _checked, _equal, _fail, _hidden, _kind, _model_module,
                      _number, _ok, _require_tensor, _same, _short, _twins, _variant_matches, forbid)


def _name_a_misplaced_shift(ids: torch.Tensor, inputs, targets) -> None:
    """A pair that is ids shifted somewhere else than along the time axis by one, named by what it measurably is."""
    if _equal(inputs, ids) and _equal(targets, ids.roll(-1, dims=1)):
        _fail("the targets are ids rolled by one position: the last target wraps round to the sentence's first token, "
              "which does not follow it.", hint="the last token has no next token to predict: drop it from the "
              "inputs, and drop the first token from the targets, so both are one token shorter than ids",
              key="targets.rolled")
    if _equal(inputs, ids) and _equal(targets, ids[:, 1:]):
        _fail("the inputs keep every token but the targets one fewer: the two no longer line up.",
              hint="the last token has no next token to predict: drop it from the inputs, as the first token is "
              "dropped from the targets", key="targets.lengths_differ")
    if ids.size(0) > 1 and _equal(inputs, ids[:-1]) and _equal(targets, ids[1:]):
        _fail("the shift runs along the batch axis: each sentence's target is the next sentence.",
              hint="ids is (batch, seq): shift along the sequence axis (dim 1), one token, in every sentence",
              key="targets.batch_axis")


@_checked
def check_lm_targets(make_lm_targets: Callable, split: str = "visible") -> None:
    from .. import datasets
    visible = split == "visible"
    case = references.load("lm_targets")[split]
    ids = case["ids"]
    with forbid(datasets.make_lm_targets):
        result = _call("make_lm_targets(ids)", make_lm_targets, ids.clone())
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        _fail("make_lm_targets must return a pair (inputs, targets).", "(inputs, targets)", _kind(result),
              key="wrong_type", keep=True)
    inputs, targets = result
    _name_a_misplaced_shift(ids, inputs, targets)
    expected_shape = (ids.size(0), ids.size(1) - 1)
    for name, tensor in (("inputs", inputs), ("targets", targets)):
        _require_tensor(tensor, f"make_lm_targets's {name}")
        if tuple(tensor.shape) != expected_shape:
            _fail(f"{name} has the wrong shape" + (f" for ids of shape {tuple(ids.shape)}." if visible else "."),
                  expected_shape, tuple(tensor.shape), "both drop one token: the inputs lose the last, the targets the first",
                  key="wrong_shape")
    if torch.equal(inputs, targets):
        _fail("targets equal inputs: the model would learn to copy its input.", "targets = the NEXT token",
              hint="shift by one: inputs = ids[:, :-1], targets = ids[:, 1:]", key="targets.copy", keep=True)
    if torch.equal(inputs, case["targets"]) and torch.equal(targets, case["inputs"]):
        _fail("inputs and targets are swapped: the model would predict the previous token.",
              "inputs = ids[:, :-1], targets = ids[:, 1:]", "inputs = ids[:, 1:], targets = ids[:, :-1]",
              key="targets.swapped", keep=True)
    if not (torch.equal(inputs, case["inputs"]) and torch.equal(targets, case["targets"])):
        _fail("inputs/targets differ from the reference.", f"inputs {_short(case['inputs'])}, targets {_short(case['targets'])}",
              f"inputs {_short(inputs)}, targets {_short(targets)}", "the target at position t is the input at t + 1")
    _ok(f"LM targets for ids of shape {tuple(ids.shape) if visible else '(hidden)'}: the target at t is the token at t + 1")


# from SimpleNamespace(logits, targets), flattened to (batch*seq, vocab) and (batch*seq,); key loss.<name>
LM_LOSS_MISTAKES = {
    "softmax_first": Mistake("softmax was applied before CrossEntropyLoss. It expects raw logits and applies "
                             "log-softmax itself; a softmax first squashes the loss into a narrow range and the "
                             "gradients vanish",
                             lambda p: nn.functional.cross_entropy(p.logits.softmax(-1), p.targets, ignore_index=PAD_ID)),
    "padding_counted": Mistake("padding positions are counted. Use CrossEntropyLoss(ignore_index=PAD_ID)",
                               lambda p: nn.functional.cross_entropy(p.logits, p.targets)),
    "sum": Mistake("the loss is summed; use the mean over real (non-padding) tokens (the default reduction)",
                   lambda p: nn.functional.cross_entropy(p.logits, p.targets, ignore_index=PAD_ID, reduction="sum")),
}


@_checked
def check_lm_loss(lm_loss: Callable, split: str = "visible") -> None:
    case = references.load("lm_loss")[split]
    tol = references.tolerance("lm_loss")
    logits = case["logits"].clone().requires_grad_(True)
    flat_logits, flat_targets = case["logits"].reshape(-1, case["logits"].size(-1)), case["targets"].reshape(-1)
    with forbid(*_loss_forbidden()):
        try:
            loss = _call("lm_loss(logits, targets)", lm_loss, logits, case["targets"].clone())
        except CheckFailed as failed:
            if failed.key == "raised" and _same(_attempt(lm_loss, flat_logits.clone(), flat_targets.clone()),
                                                case["expected"], tol):
                _fail("lm_loss raises on logits of shape (batch, seq, vocab) and is right on flattened ones.",
                      hint="cross-entropy reads the classes on axis 1 of its input: (N, vocab) with targets (N,), "
                      "or (batch, vocab, seq); flatten the batch and sequence axes together (or move the vocabulary "
                      "axis to position 1)", key="loss.class_axis")
            raise
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        _fail("lm_loss must return a scalar tensor.", "a 0-dim tensor (the mean over real tokens)",
              _kind(loss), "return the loss tensor itself, not loss.item(): backward() needs it",
              key="loss.not_scalar", keep=True)
    if not loss.requires_grad:
        _fail("the loss is detached from the logits: no gradient can flow.",
              hint="do not wrap the loss in torch.no_grad() or call .detach()/.item()", key="loss.detached")
    expected = case["expected"]
    if not _same(loss, expected, tol):
        value = float(loss.detach().double())
        mistakes = {name: mistake.hint for name, mistake in LM_LOSS_MISTAKES.items()}
        matches = _variant_matches(loss, case, mistakes, expected, tol)
        if not matches and _same(loss, nn.functional.nll_loss(flat_logits, flat_targets, ignore_index=PAD_ID), tol):
            _fail("lm_loss(logits, targets) is nll_loss of the raw logits.", f"{expected.item():.4f}", f"{value:.4f}",
                  "nll_loss expects log-probabilities: on logits it only negates the target's logit, which is not a "
                  "loss (it can go below 0). Cross-entropy applies the log-softmax itself: give it the raw logits",
                  key="loss.nll_on_logits")
        if matches:
            _fail("lm_loss(logits, targets) differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
                  _twins([mistakes[k] for k in matches]), key="|".join(f"loss.{k}" for k in matches))
        _fail("lm_loss(logits, targets) differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
              "flatten logits to (batch*seq, vocab) and targets to (batch*seq,), then "
              "nn.CrossEntropyLoss(ignore_index=PAD_ID) on the raw logits")
    _ok(f"LM loss {'on the hidden case' if _hidden() else f'{loss.item():.4f}'}: cross-entropy on raw logits, "
        "padding ignored")


def _loss_forbidden():
    from .. import training
    return (training.batch_loss,)


def _token_list(found, what: str) -> list[int]:
    """A list of ints from a list / tuple / tensor / numpy array of token ids; a message otherwise."""
    if isinstance(found, torch.Tensor) or type(found).__module__ == "numpy":
        found = found.tolist()
    if not isinstance(found, (list, tuple)):
        _fail(f"{what} must return a list of token ids.", "a list of ints", _kind(found), key="wrong_type", keep=True)
    out = []
    for token in found:
        if isinstance(token, (list, tuple)):
            _fail(f"{what} returns a nested list.", "a flat list of new token ids", _short(found, 120),
                  "return the new ids as a flat list, e.g. [12, 7, 3]", key="wrong_shape", keep=True)
        try:
            out.append(_number(token, f"{what}: each token id", whole=True))
        except CheckFailed:
            _fail(f"{what} must return a list of token ids.", "a list of ints", _short(found, 120), key="wrong_type",
                  keep=True)
    return out


AGAIN = 5  # calls that look for a second answer before generation is judged deterministic


@_checked
def check_greedy(greedy_generate_ids: Callable, split: str = "visible") -> None:
    from .. import generation
    m = _model_module()
    visible = split == "visible"
    case = references.load("greedy")[split]
    cfg = case["config"]
    model = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.5))
    model.load_state_dict(case["state_dict"])
    for item in case["cases"]:
        prompt = list(item["prompt"])
        call = (f"greedy_generate_ids(model, {prompt}, max_new_tokens={item['max_new_tokens']}, eos_id={item['eos_id']})"
                if visible else "greedy_generate_ids on a hidden model and prompt")
        model.train()  # the answer must switch dropout off itself
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            found = _call(call, greedy_generate_ids, model, list(prompt), item["max_new_tokens"], item["eos_id"])
        found = _token_list(found, "greedy_generate_ids")
        expected = list(item["expected"])
        if found == expected:
            continue
        what = (f"greedy generation from prompt {prompt} (eos_id={item['eos_id']})" if visible
                else "greedy generation on a hidden model and prompt")
        if found[: len(prompt)] == prompt and found[len(prompt):] == expected:
            _fail(f"{what} returns the prompt too.", expected, found, "return only the NEW tokens",
                  key="greedy.returns_prompt")
        if found[: len(expected)] == expected and len(found) > len(expected):
            if found[len(expected)] == item["eos_id"]:
                _fail(f"{what} includes the end token.", expected, found,
                      "stop when eos is predicted, without appending it", key="greedy.includes_eos")
            _fail(f"{what} does not stop at the end token.", expected, found,
                  "stop as soon as the predicted token is eos_id (and do not append it)", key="greedy.no_stop")
        if found == expected[:-1] and len(expected) == item["max_new_tokens"]:
            _fail(f"{what} stops one token early.", expected, found, "generate up to max_new_tokens new tokens: "
                  "the loop runs max_new_tokens times unless eos comes first", key="greedy.too_few")
        for _ in range(AGAIN):  # dropout left on changes a few logits per call, not always the argmax
            with forbid(generation.greedy_generate_ids, generation.greedy_generate):
                again = _call("greedy_generate_ids (second call)", greedy_generate_ids, model.train(), list(prompt),
                              item["max_new_tokens"], item["eos_id"])
            if _token_list(again, "greedy_generate_ids") != found:
                break
        if _token_list(again, "greedy_generate_ids") != found:
            _fail(f"{what} is not deterministic.", expected, found,
                  "call model.eval() first: in training mode dropout changes the logits at every call",
                  key="greedy.no_eval")
        with torch.no_grad():
            first = int(model.eval()(torch.tensor([prompt[:1]]))[0, 0].argmax())  # what position 0 predicts
        if found and set(found) == {first} and first not in expected[:1]:
            _fail(f"{what} repeats one token, the one the first position predicts.", expected, found,
                  "the next token is predicted at the LAST position of the sequence so far; with the causal mask "
                  "the first position only ever sees the first token, so reading it gives the same token at every "
                  "step", key="greedy.wrong_position")
        _fail(f"{what} differs from the reference.", expected, found,
              "at each step run the model on the whole sequence so far, take logits[0, -1].argmax() (the last "
              "position predicts the next token), append it and repeat")
    _ok(f"greedy generation matches the reference on {len(case['cases'])} prompts, stopping at eos")

