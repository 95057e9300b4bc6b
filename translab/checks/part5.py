"""Checks of part 5: BERT's masking and the MLM loss."""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .. import mlm, references
from ..data import BOS_ID, EOS_ID, MASK_ID, PAD_ID
from ..mlm import FIRST_REGULAR_ID
from . import properties
from .properties import Probe
from .harness import (OutputMistake, call_student, checked, defer, fail, forbid, in_hidden_check, kind_of, lab_model_module,
                      matches_reference, report_ok, require_tensor, shorten, twin_mistakes, variant_matches)


MASKING_CASES = {
    "visible": dict(vocab_size=1000, shape=(128, 64), mlm_probability=0.15, seeds=(0, 1)),
    "hidden": dict(vocab_size=300, shape=(96, 81), mlm_probability=0.25, seeds=(1234, 77)),
}
SPECIAL = (PAD_ID, 1, BOS_ID, EOS_ID, MASK_ID)


def _masking_batch(vocab_size: int, shape: tuple, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 99)
    ids = torch.randint(5, vocab_size, shape, generator=g)
    lengths = torch.randint(shape[1] // 3, shape[1] + 1, (shape[0],), generator=g)
    for row, length in enumerate(lengths.tolist()):
        ids[row, 0] = BOS_ID
        ids[row, length - 1] = EOS_ID
        ids[row, length:] = PAD_ID
    ids[::7, 3] = 1  # an UNK now and then
    return ids


def _run_masking(mask_tokens, ids, vocab_size, seed, probability):
    generator = torch.Generator().manual_seed(seed)
    original = ids.clone()
    call = (f"mask_tokens(ids, vocab_size={vocab_size}, generator, mlm_probability={probability})" if not in_hidden_check()
            else "mask_tokens on a hidden batch")
    with forbid(mlm.mask_tokens):
        result = call_student(call, mask_tokens, ids, vocab_size, generator, probability)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail("mask_tokens must return a pair (inputs, labels).", "(inputs, labels)", kind_of(result),
             key="wrong_type", keep=True)
    inputs, labels = result
    if not torch.equal(ids, original):  # said by call_student (mutates_input); the other properties still measured
        inputs, labels = (t.clone() if isinstance(t, torch.Tensor) else t for t in (inputs, labels))
        ids.copy_(original)
    for name, tensor in (("inputs", inputs), ("labels", labels)):
        require_tensor(tensor, f"mask_tokens's {name}")
        if tensor.shape != ids.shape:
            fail(f"{name} has the wrong shape.", tuple(ids.shape), tuple(tensor.shape), key="wrong_shape")
        if tensor.dtype != torch.long:
            fail(f"{name} must hold token ids (torch.long).", "torch.long", tensor.dtype,
                 "token ids are integers: keep ids' dtype (ids.clone(), torch.full_like(ids, PAD_ID), "
                 "torch.randint)", key="wrong_dtype", keep=True)
    return inputs, labels


def _check_random_ids_are_regular(mask_tokens: Callable, seed: int) -> None:
    """Random replacements must be regular tokens: with a vocabulary of 8 ids, 5 of them special, a draw from the
    whole vocabulary hits a special id more often than not, which a large vocabulary hides."""
    vocab_size = FIRST_REGULAR_ID + 3
    ids = _masking_batch(vocab_size, (64, 64), seed)
    inputs, labels = _run_masking(mask_tokens, ids, vocab_size, seed, 0.5)
    replaced = (labels != PAD_ID) & (inputs != MASK_ID) & (inputs != ids)
    drawn = inputs[replaced]
    special = drawn[torch.isin(drawn, torch.tensor(SPECIAL))]
    if special.numel():
        fail("random replacements include special tokens.", f"regular ids only ({FIRST_REGULAR_ID} <= id < vocab_size)",
             f"{special.numel()} of {drawn.numel()} random replacements are special ids {sorted(set(special.tolist()))} "
             f"(a vocabulary of {vocab_size})", "PAD, UNK, BOS, EOS and MASK are not words: a PAD in the input is "
             "ignored by attention and a MASK is not a random token; draw with torch.randint(FIRST_REGULAR_ID, "
             "vocab_size, ...)", key="masking.random_special", keep=True)


@checked
def check_masking(mask_tokens: Callable, part: str = "structure", split: str = "visible") -> None:
    """``part``: "structure" (labels, special tokens, reproducibility) or "rates" (15 % / 80-10-10)."""
    case = MASKING_CASES[split]
    vocab_size, probability = case["vocab_size"], case["mlm_probability"]
    ids = _masking_batch(vocab_size, case["shape"], case["seeds"][0])
    inputs, labels = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][0], probability)
    negative = labels[labels < 0]
    if negative.numel():
        values = sorted(set(negative.tolist()))
        why = ("-100 is the ignore index of Hugging Face and of CrossEntropyLoss's default; " if -100 in values else "")
        defer([(f"labels hold negative values.\n  expected: PAD_ID ({PAD_ID}) wherever nothing is predicted\n"
                f"  found:    {values[:5]}\n  likely:   {why}this lab's loss ignores PAD_ID "
                "(nn.CrossEntropyLoss(ignore_index=PAD_ID)): fill the labels with PAD_ID, as torch.full_like(ids, "
                "PAD_ID), and put the original ids at the chosen positions", "masking.ignore_index")])
    special = torch.isin(ids, torch.tensor(SPECIAL))
    chosen = (labels != PAD_ID) & (labels >= 0)  # a negative label is an ignore index: nothing chosen there
    if part == "structure":
        if not properties.report(_masking_structure(mask_tokens, case, ids, inputs, labels, special, chosen)):
            report_ok("masking structure: labels only at chosen real tokens (original ids), specials untouched, "
                      "reproducible with the generator")
    else:
        _masking_rates(mask_tokens, case, ids, inputs, special, chosen)


def _masking_structure(mask_tokens: Callable, case: dict, ids, inputs, labels, special, chosen) -> list[Probe]:
    """Labels only at chosen real tokens (the original ids), specials untouched, reproducible with the generator:
    each a property of its own, every one reported."""
    vocab_size, probability = case["vocab_size"], case["mlm_probability"]

    def specials_chosen():
        if bool((chosen & special).any()):
            fail("special tokens were chosen for prediction.", "labels = PAD_ID at PAD, UNK, BOS, EOS and MASK",
                 f"{int((chosen & special).sum())} special positions with a label",
                 "only real tokens are chosen: set their probability to 0 before sampling", key="masking.special_chosen")

    def specials_changed():  # where specials were chosen, their change is that choice's (said by specials_chosen)
        if not bool((chosen & special).any()) and bool((inputs[special] != ids[special]).any()):
            fail("special tokens were changed in the inputs.", "PAD, BOS, EOS unchanged",
                 f"{int((inputs[special] != ids[special]).sum())} changed", "padding and sentence markers are never "
                 "masked", key="masking.special_changed")

    def labels_only_chosen():
        if bool(chosen.all()) or bool((labels == ids).all()):
            fail("every position has a label.", "labels only at the chosen ~15 % (PAD_ID elsewhere, ignored by the "
                 "loss)", "labels everywhere", "the model is only scored on the tokens it could not see",
                 key="masking.labels_everywhere", keep=True)

    def original_labels():
        if not torch.equal(labels[chosen], ids[chosen]):
            fail("labels at the chosen positions are not the original tokens.", "labels[chosen] == ids[chosen]",
                 shorten(labels[chosen][:10]), "the label is what the model must recover: the token before masking",
                 key="masking.wrong_labels")

    def unchosen_kept():  # real tokens only: a chosen PAD has the label PAD, and looks unchosen
        unchosen = ~chosen & ~special
        if bool((inputs[unchosen] != ids[unchosen]).any()):
            changed = int((inputs[unchosen] != ids[unchosen]).sum())
            fail("tokens that were not chosen were changed.", "inputs == ids wherever labels == PAD_ID",
                 f"{changed} unlabeled positions changed",
                 "the 80/10/10 split applies only to the chosen tokens; draw it, then AND it with the chosen mask",
                 key="masking.unchosen_changed")

    def in_vocabulary():
        if not bool((inputs >= 0).all() and (inputs < vocab_size).all()):
            fail("inputs hold ids outside the vocabulary.", f"0 <= id < {vocab_size}",
                 f"min {int(inputs.min())}, max {int(inputs.max())}", "draw random ids with torch.randint(low, "
                 "vocab_size, ...): the upper bound is excluded", key="masking.out_of_vocabulary")

    def reproducible():
        inputs_again, labels_again = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][0], probability)
        if not (torch.equal(inputs_again, inputs) and torch.equal(labels_again, labels)):
            fail("the same generator seed gives different masks.", "reproducible masking",
                 hint="pass generator=generator to every torch.rand / torch.bernoulli / torch.randint call",
                 key="masking.no_generator")
        other_inputs, other_labels = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][1], probability)
        if torch.equal(other_labels, labels):
            fail("another seed gives the same choice of tokens.", "a fresh random choice per call",
                 hint="draw the choice with the generator, do not hard-code positions", key="masking.fixed_choice")

    probes = [Probe("masking.special_chosen", "", specials_chosen), Probe("masking.special_changed", "", specials_changed),
              Probe("masking.labels_everywhere", "", labels_only_chosen), Probe("masking.wrong_labels", "", original_labels),
              Probe("masking.unchosen_changed", "", unchosen_kept), Probe("masking.out_of_vocabulary", "", in_vocabulary),
              Probe("masking.no_generator", "", reproducible)]
    return probes


def _masking_rates(mask_tokens: Callable, case: dict, ids, inputs, special, chosen) -> None:
    """About 15 % of the real tokens chosen; of those, 80 % masked, 10 % random, 10 % unchanged."""
    probability = case["mlm_probability"]
    regular = ~special
    rate = float(chosen.sum()) / float(regular.sum())
    if abs(rate - probability) > 0.02:
        base_rate = float(chosen.sum()) / float(ids.numel())
        hint = ("the rate is computed over all positions or padding counted" if abs(base_rate - probability) < 0.02
                else "choose each real token with probability mlm_probability (torch.bernoulli) ")
        fail(f"{rate:.1%} of the real tokens were chosen.", f"{probability:.0%} (+-2 %)", f"{rate:.1%}", hint,
             key="masking.rate")
    n = int(chosen.sum())
    if n == 0:
        fail("no token was chosen.", hint="choose each real token with probability mlm_probability", key="masking.rate")
    masked = float((inputs[chosen] == MASK_ID).sum()) / n
    random_ = float(((inputs[chosen] != MASK_ID) & (inputs[chosen] != ids[chosen])).sum()) / n
    kept = float((inputs[chosen] == ids[chosen]).sum()) / n
    found = f"{masked:.0%} mask, {random_:.0%} random, {kept:.0%} unchanged"
    if abs(masked - 0.8) > 0.06 or abs(random_ - 0.1) > 0.05 or abs(kept - 0.1) > 0.05:
        hint, key = "of the CHOSEN tokens: 80 % -> MASK_ID, 10 % -> a random token, 10 % left as they are", "masking.split"
        if masked > 0.95:
            hint = "every chosen token became MASK_ID; BERT replaces only 80 % (the model must also handle real tokens)"
            key = "masking.all_masked"
        elif abs(masked - 0.8) < 0.06 and random_ < 0.07:
            hint = "the random 10 % is missing: half of the chosen tokens that are not masked get a random id"
            key = "masking.no_random"
        elif abs(random_ - 0.2) < 0.05:
            hint, key = "the remaining 20 % all became random; half of them must stay unchanged", "masking.random_20"
        fail("the 80/10/10 split of the chosen tokens is off.", "80% mask, 10% random, 10% unchanged", found, hint,
             key=key, keep=True)
    random_positions = chosen & (inputs != MASK_ID) & (inputs != ids)
    if bool(random_positions.any()) and len(inputs[random_positions].unique()) < 10:
        fail("the random replacements use few distinct tokens.", "ids drawn uniformly from the vocabulary",
             f"{len(inputs[random_positions].unique())} distinct ids", "use torch.randint(low, vocab_size, ...)",
             key="masking.few_random_ids")
    _check_random_ids_are_regular(mask_tokens, case["seeds"][1])
    report_ok(f"masking rates: {rate:.1%} of real tokens chosen; of those {found}" if not in_hidden_check() else
              "masking rates on a hidden batch and probability: the share of chosen tokens and the 80/10/10 split are right")



# from SimpleNamespace(model, ids, inputs, labels, padding, ntoken); key mlm.<name>
MLM_LOSS_MISTAKES = {
    "causal": OutputMistake("a masked LM reads both sides of the blank: call the model with causal=False (no square mask)",
                      lambda p: nn.functional.cross_entropy(p.model(p.inputs, p.padding, causal=True).reshape(-1, p.ntoken),
                                                            p.labels.reshape(-1), ignore_index=PAD_ID),
                      what="the MLM loss uses the causal mask."),
    "all_positions": OutputMistake("only the chosen positions have labels; the others hold PAD_ID and must be ignored: "
                             "ignore_index=PAD_ID (Hugging Face's collators mark them -100; this lab's labels hold "
                             "PAD_ID there)",
                             lambda p: nn.functional.cross_entropy(
                                 p.model(p.inputs, p.padding, causal=False).reshape(-1, p.ntoken), p.labels.reshape(-1)),
                             what="the loss is computed at every position, PAD_ID counted as a target."),
    "inputs_as_labels": OutputMistake("the targets are the labels (the original tokens at the chosen positions), not the "
                                "inputs, which hold [MASK] or a random token there",
                                lambda p: nn.functional.cross_entropy(
                                    p.model(p.inputs, p.padding, causal=False)[p.labels != PAD_ID],
                                    p.inputs[p.labels != PAD_ID]),
                                what="the loss predicts the masked inputs instead of the labels."),
    "no_padding_mask": OutputMistake("pass the padding mask to the model, model(inputs, padding_mask, causal=False): without "
                               "it every real token also attends to the padding after its sentence, which changes "
                               "its vector and so the loss",
                               lambda p: nn.functional.cross_entropy(
                                   p.model(p.inputs, causal=False).reshape(-1, p.ntoken), p.labels.reshape(-1),
                                   ignore_index=PAD_ID),
                               what="the model is run without the padding mask."),
}


@checked
def check_mlm_loss(mlm_loss: Callable, split: str = "visible") -> None:
    m = lab_model_module()
    case = references.load("mlm_loss")[split]
    tol = references.tolerance("mlm_loss")
    cfg = case["config"]
    model = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.1))
    model.load_state_dict(case["state_dict"])
    model.eval()
    with forbid(mlm.mlm_loss):
        loss = call_student("mlm_loss(model, inputs, labels, padding_mask)", mlm_loss, model, case["inputs"].clone(),
                            case["labels"].clone(), case["padding"].clone())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        fail("mlm_loss must return a scalar tensor.", "a 0-dim tensor", kind_of(loss), key="loss.not_scalar", keep=True)
    if not loss.requires_grad:
        fail("the MLM loss carries no gradient.", hint="do not use torch.no_grad() or .item() inside mlm_loss",
             key="mlm.detached")
    expected = case["expected"]
    value = float(loss.detach().double())
    if matches_reference(loss, expected, tol):
        report_ok(f"MLM loss {'on the hidden case' if in_hidden_check() else f'{value:.4f}'}: bidirectional encoder, loss only on "
                  "the chosen tokens")
        return
    mistakes = MLM_LOSS_MISTAKES
    matches = variant_matches(loss, case, mistakes, expected, tol)
    if matches:
        fail(twin_mistakes([mistakes[k].what.rstrip(".") for k in matches]) + ".", f"{expected.item():.4f}", f"{value:.4f}",
             twin_mistakes([mistakes[k].hint for k in matches]), key="|".join(f"mlm.{k}" for k in matches))
    fail("the MLM loss differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
         "logits = model(inputs, padding_mask, causal=False); CrossEntropyLoss(ignore_index=PAD_ID) on the "
         "flattened logits and labels")
