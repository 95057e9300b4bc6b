"""Checks of part 3: pieces back into text, language-model targets, the loss, greedy generation and sampling.

Why one file: each check is short, and part 3's notebook calls them in this order; splitting would leave files of a
check each.
"""
from __future__ import annotations

from typing import Callable

import torch
from torch import nn

from .. import datasets, generation, references, tokens, training
from ..data import PAD_ID
from . import properties
from . import scripted as scripted_module
from .properties import Probe
from .scripted import scripted_chain
from .harness import (CheckFailed, OutputMistake, as_number, attempt_again, call_student, checked, equal_elementwise,
                      fail, forbid, in_hidden_check, kind_of, lab_model_module, matches_reference, report_ok,
                      require_tensor, shorten, twin_mistakes, variant_matches)


def _name_a_misplaced_shift(ids: torch.Tensor, inputs, targets) -> None:
    """A pair that is ids shifted somewhere else than along the time axis by one, named by what it measurably is."""
    if equal_elementwise(inputs, ids) and equal_elementwise(targets, ids.roll(-1, dims=1)):
        fail("the targets are ids rolled by one position: the last target wraps round to the sentence's first token, "
             "which does not follow it.", hint="the last token has no next token to predict: drop it from the "
             "inputs, and drop the first token from the targets, so both are one token shorter than ids",
             key="targets.rolled")
    if equal_elementwise(inputs, ids) and equal_elementwise(targets, ids[:, 1:]):
        fail("the inputs keep every token but the targets one fewer: the two no longer line up.",
             hint="the last token has no next token to predict: drop it from the inputs, as the first token is "
             "dropped from the targets", key="targets.lengths_differ")
    if ids.size(0) > 1 and equal_elementwise(inputs, ids[:-1]) and equal_elementwise(targets, ids[1:]):
        fail("the shift runs along the batch axis: each sentence's target is the next sentence.",
             hint="ids is (batch, seq): shift along the sequence axis (dim 1), one token, in every sentence",
             key="targets.batch_axis")


@checked
def check_lm_targets(make_lm_targets: Callable, split: str = "visible") -> None:
    visible = split == "visible"
    case = references.load("lm_targets")[split]
    ids = case["ids"]
    with forbid(datasets.make_lm_targets):
        result = call_student("make_lm_targets(ids)", make_lm_targets, ids.clone())
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        fail("make_lm_targets must return a pair (inputs, targets).", "(inputs, targets)", kind_of(result),
             key="wrong_type", keep=True)
    inputs, targets = result
    _name_a_misplaced_shift(ids, inputs, targets)
    expected_shape = (ids.size(0), ids.size(1) - 1)
    for name, tensor in (("inputs", inputs), ("targets", targets)):
        require_tensor(tensor, f"make_lm_targets's {name}")
        if tuple(tensor.shape) != expected_shape:
            fail(f"{name} has the wrong shape" + (f" for ids of shape {tuple(ids.shape)}." if visible else "."),
                 expected_shape, tuple(tensor.shape), "both drop one token: the inputs lose the last, the targets the first",
                 key="wrong_shape")
    if torch.equal(inputs, targets):
        fail("targets equal inputs: the model would learn to copy its input.", "targets = the NEXT token",
             hint="shift by one: inputs = ids[:, :-1], targets = ids[:, 1:]", key="targets.copy", keep=True)
    if torch.equal(inputs, case["targets"]) and torch.equal(targets, case["inputs"]):
        fail("inputs and targets are swapped: the model would predict the previous token.",
             "inputs = ids[:, :-1], targets = ids[:, 1:]", "inputs = ids[:, 1:], targets = ids[:, :-1]",
             key="targets.swapped", keep=True)
    if not (torch.equal(inputs, case["inputs"]) and torch.equal(targets, case["targets"])):
        fail("inputs/targets differ from the reference.", f"inputs {shorten(case['inputs'])}, targets {shorten(case['targets'])}",
             f"inputs {shorten(inputs)}, targets {shorten(targets)}", "the target at position t is the input at t + 1")
    report_ok(f"LM targets for ids of shape {tuple(ids.shape) if visible else '(hidden)'}: the target at t is the token at t + 1")


# from SimpleNamespace(logits, targets), flattened to (batch*seq, vocab) and (batch*seq,); key loss.<name>
LM_LOSS_MISTAKES = {
    "softmax_first": OutputMistake("softmax was applied before CrossEntropyLoss. It expects raw logits and applies "
                             "log-softmax itself; a softmax first squashes the loss into a narrow range and the "
                             "gradients vanish",
                             lambda p: nn.functional.cross_entropy(p.logits.softmax(-1), p.targets, ignore_index=PAD_ID)),
    "padding_counted": OutputMistake("padding positions are counted. Use CrossEntropyLoss(ignore_index=PAD_ID)",
                               lambda p: nn.functional.cross_entropy(p.logits, p.targets)),
    "sum": OutputMistake("the loss is summed; use the mean over real (non-padding) tokens (the default reduction)",
                   lambda p: nn.functional.cross_entropy(p.logits, p.targets, ignore_index=PAD_ID, reduction="sum")),
}


@checked
def check_lm_loss(lm_loss: Callable, split: str = "visible") -> None:
    case = references.load("lm_loss")[split]
    tol = references.tolerance("lm_loss")
    logits = case["logits"].clone().requires_grad_(True)
    flat_logits, flat_targets = case["logits"].reshape(-1, case["logits"].size(-1)), case["targets"].reshape(-1)
    with forbid(*_loss_forbidden()):
        try:
            loss = call_student("lm_loss(logits, targets)", lm_loss, logits, case["targets"].clone())
        except CheckFailed as failed:
            if failed.key == "raised" and matches_reference(attempt_again(lm_loss, flat_logits.clone(), flat_targets.clone()),
                                                            case["expected"], tol):
                fail("lm_loss raises on logits of shape (batch, seq, vocab) and is right on flattened ones.",
                     hint="cross-entropy reads the classes on axis 1 of its input: (N, vocab) with targets (N,), "
                     "or (batch, vocab, seq); flatten the batch and sequence axes together (or move the vocabulary "
                     "axis to position 1)", key="loss.class_axis")
            raise
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        fail("lm_loss must return a scalar tensor.", "a 0-dim tensor (the mean over real tokens)",
             kind_of(loss), "return the loss tensor itself, not loss.item(): backward() needs it",
             key="loss.not_scalar", keep=True)
    if not loss.requires_grad:
        fail("the loss is detached from the logits: no gradient can flow.",
             hint="do not wrap the loss in torch.no_grad() or call .detach()/.item()", key="loss.detached")
    expected = case["expected"]
    if not matches_reference(loss, expected, tol):
        value = float(loss.detach().double())
        mistakes = {name: mistake.hint for name, mistake in LM_LOSS_MISTAKES.items()}
        matches = variant_matches(loss, case, mistakes, expected, tol)
        if not matches and matches_reference(loss, nn.functional.nll_loss(flat_logits, flat_targets, ignore_index=PAD_ID), tol):
            fail("lm_loss(logits, targets) is nll_loss of the raw logits.", f"{expected.item():.4f}", f"{value:.4f}",
                 "nll_loss expects log-probabilities: on logits it only negates the target's logit, which is not a "
                 "loss (it can go below 0). Cross-entropy applies the log-softmax itself: give it the raw logits",
                 key="loss.nll_on_logits")
        if matches:
            fail("lm_loss(logits, targets) differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
                 twin_mistakes([mistakes[k] for k in matches]), key="|".join(f"loss.{k}" for k in matches))
        fail("lm_loss(logits, targets) differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
             "flatten logits to (batch*seq, vocab) and targets to (batch*seq,), then "
             "nn.CrossEntropyLoss(ignore_index=PAD_ID) on the raw logits")
    report_ok(f"LM loss {'on the hidden case' if in_hidden_check() else f'{loss.item():.4f}'}: cross-entropy on raw logits, "
              "padding ignored")


def _loss_forbidden():
    return (training.batch_loss,)


def _token_list(found, what: str) -> list[int]:
    """A list of ints from a list / tuple / tensor / numpy array of token ids; a message otherwise."""
    if isinstance(found, torch.Tensor) or type(found).__module__ == "numpy":
        found = found.tolist()
    if not isinstance(found, (list, tuple)):
        fail(f"{what} must return a list of token ids.", "a list of ints", kind_of(found), key="wrong_type", keep=True)
    out = []
    for token in found:
        if isinstance(token, (list, tuple)):
            fail(f"{what} returns a nested list.", "a flat list of new token ids", shorten(found, 120),
                 "return the new ids as a flat list, e.g. [12, 7, 3]", key="wrong_shape", keep=True)
        try:
            out.append(as_number(token, f"{what}: each token id", whole=True))
        except CheckFailed:
            fail(f"{what} must return a list of token ids.", "a list of ints", shorten(found, 120), key="wrong_type",
                 keep=True)
    return out


AGAIN = 5  # calls that look for a second answer before generation is judged deterministic


def _greedy_probes(greedy_generate_ids: Callable) -> list[Probe]:
    """Greedy decoding's properties, each on a scripted LM (``scripted.ScriptedLM``) whose next token is known: argmax,
    not a draw; eval mode; only the new tokens; the stop at eos; max_new_tokens; the last position read."""
    prompt, steps, never = [5], 4, 63  # 63: an eos the chain from 5 never reaches in 4 steps

    def run(what: str, model, prompt_ids: list[int], max_new: int, eos_id: int) -> list[int]:
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            found = call_student(f"greedy_generate_ids on {what}", greedy_generate_ids, model, list(prompt_ids),
                                 max_new, eos_id)
        found = _token_list(found, "greedy_generate_ids")
        return found[len(prompt_ids):] if found[: len(prompt_ids)] == list(prompt_ids) else found

    def scripted(mode: str = "eval", close_second: bool = False):  # a fresh scripted LM in ``mode``
        return scripted_module.ScriptedLM(close_second).train(mode == "train")

    def draws():
        what = "a model whose two likeliest tokens are close"
        runs = [run(what, scripted(close_second=True), prompt, steps, never) for _ in range(AGAIN)]
        if any(found != runs[0] for found in runs):
            return ("greedy_generate_ids draws the next token instead of taking the most likely one: on a model in "
                    "eval mode whose second likeliest token is close behind the first, its calls gave different "
                    "tokens.\n  likely:   take logits[0, -1].argmax(): greedy decoding never samples")
        return None

    def evaluated():
        found = run("a model handed over in training mode", scripted("train"), prompt, steps, never)
        if found[:1] == scripted_chain(prompt, 1, step=2):  # the first token: where every position reads the same
            return ("greedy_generate_ids decodes in training mode: a scripted model that predicts another token in "
                    "training mode, handed over in that mode, gave its training-mode token.\n  likely:   call "
                    "model.eval() first: dropout is on in training mode")
        return None

    def only_new():
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            found = _token_list(call_student("greedy_generate_ids on a scripted model", greedy_generate_ids,
                                             scripted(), list(prompt), steps, never), "greedy_generate_ids")
        new = found[len(prompt):]
        if found[: len(prompt)] == prompt and new == scripted_chain(prompt, steps)[: len(new)]:
            return ("greedy_generate_ids returns the prompt too: on a scripted model it returned the prompt, then "
                    "the new tokens.\n  likely:   return only the NEW tokens")
        return None

    def stops():
        eos = prompt[-1] + 3
        found, expected = run("a model that predicts the end token", scripted(), prompt, steps, eos), \
            scripted_chain(prompt, steps, eos_id=eos)
        if found == expected + [eos]:
            return ("greedy_generate_ids includes the end token: when the model predicts eos_id it appended it "
                    "before stopping.\n  likely:   stop when eos is predicted, without appending it",
                    "greedy.includes_eos")
        if found[: len(expected)] == expected and len(found) > len(expected):
            return ("greedy_generate_ids does not stop at the end token: it went on after the model predicted "
                    "eos_id.\n  likely:   stop as soon as the predicted token is eos_id (and do not append it)",
                    "greedy.no_stop")
        return None

    def counts():
        found, expected = run("a model that never predicts the end token", scripted(), prompt, steps, never), \
            scripted_chain(prompt, steps)
        if found == expected[:-1]:
            return ("greedy_generate_ids stops one token early: with max_new_tokens new tokens asked and no end "
                    "token predicted, it returned one fewer.\n  likely:   the loop runs max_new_tokens times unless "
                    "eos comes first")
        return None

    def position():
        longer = [5, 20]
        found = run("a two-token prompt", scripted(), longer, steps, never)
        if found != scripted_chain(longer, steps) and found == [longer[0] + 1] * steps:
            return ("greedy_generate_ids reads the prediction at position 0: after a two-token prompt it repeated "
                    "what the first token predicts.\n  likely:   the next token is predicted at the LAST position of "
                    "the sequence so far: logits[0, -1]")
        return None

    return [Probe("greedy.samples", "a model whose two likeliest tokens are close", draws),
            Probe("greedy.no_eval", "a model handed over in training mode", evaluated),
            Probe("greedy.returns_prompt", "a scripted model", only_new),
            Probe("greedy.includes_eos", "a model that predicts the end token", stops),
            Probe("greedy.too_few", "a model that never predicts the end token", counts),
            Probe("greedy.wrong_position", "a two-token prompt", position)]


@checked
def check_greedy(greedy_generate_ids: Callable, split: str = "visible") -> None:
    m = lab_model_module()
    visible = split == "visible"
    case = references.load("greedy")[split]
    cfg = case["config"]
    model = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.5))
    model.load_state_dict(case["state_dict"])
    if properties.report(_greedy_probes(greedy_generate_ids)):
        return  # the properties found are the failure (``checked`` raises them)
    for item in case["cases"]:
        prompt = list(item["prompt"])
        call = (f"greedy_generate_ids(model, {prompt}, max_new_tokens={item['max_new_tokens']}, eos_id={item['eos_id']})"
                if visible else "greedy_generate_ids on a hidden model and prompt")
        model.train()  # the answer must switch dropout off itself
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            found = call_student(call, greedy_generate_ids, model, list(prompt), item["max_new_tokens"], item["eos_id"])
        found = _token_list(found, "greedy_generate_ids")
        expected = list(item["expected"])
        if found == expected:
            continue
        what = (f"greedy generation from prompt {prompt} (eos_id={item['eos_id']})" if visible
                else "greedy generation on a hidden model and prompt")
        if found[: len(prompt)] == prompt and found[len(prompt):] == expected:
            fail(f"{what} returns the prompt too.", expected, found, "return only the NEW tokens",
                 key="greedy.returns_prompt")
        if found[: len(expected)] == expected and len(found) > len(expected):
            if found[len(expected)] == item["eos_id"]:
                fail(f"{what} includes the end token.", expected, found,
                     "stop when eos is predicted, without appending it", key="greedy.includes_eos")
            fail(f"{what} does not stop at the end token.", expected, found,
                 "stop as soon as the predicted token is eos_id (and do not append it)", key="greedy.no_stop")
        if found == expected[:-1] and len(expected) == item["max_new_tokens"]:
            fail(f"{what} stops one token early.", expected, found, "generate up to max_new_tokens new tokens: "
                 "the loop runs max_new_tokens times unless eos comes first", key="greedy.too_few")
        for _ in range(AGAIN):  # dropout left on changes a few logits per call, not always the argmax
            with forbid(generation.greedy_generate_ids, generation.greedy_generate):
                again = call_student("greedy_generate_ids (second call)", greedy_generate_ids, model.train(), list(prompt),
                                     item["max_new_tokens"], item["eos_id"])
            if _token_list(again, "greedy_generate_ids") != found:
                break
        if _token_list(again, "greedy_generate_ids") != found:
            fail(f"{what} is not deterministic.", expected, found,
                 "call model.eval() first: in training mode dropout changes the logits at every call",
                 key="greedy.no_eval")
        with torch.no_grad():
            first = int(model.eval()(torch.tensor([prompt[:1]]))[0, 0].argmax())  # what position 0 predicts
        if found and set(found) == {first} and first not in expected[:1]:
            fail(f"{what} repeats one token, the one the first position predicts.", expected, found,
                 "the next token is predicted at the LAST position of the sequence so far; with the causal mask "
                 "the first position only ever sees the first token, so reading it gives the same token at every "
                 "step", key="greedy.wrong_position")
        fail(f"{what} differs from the reference.", expected, found,
             "at each step run the model on the whole sequence so far, take logits[0, -1].argmax() (the last "
             "position predicts the next token), append it and repeat")
    report_ok(f"greedy generation matches the reference on {len(case['cases'])} prompts, stopping at eos")


# ----------------------------------------------------------------- sampling: the next-token distribution, and draws

# The stored mistakes of next_token_probs (their outputs on each case: ``grader.references.build_decoding``), with
# what the check then says.  What the distribution measurably is (not renormalised, logits returned) is measured.
DECODING_MISTAKES = {
    "temperature_after_softmax": (
        "the temperature has no effect: it is applied after the softmax.",
        "divide the LOGITS by the temperature, then take the softmax: probabilities divided by T and renormalised "
        "are the same probabilities"),
    "temperature_multiplied": (
        "the logits are multiplied by the temperature.",
        "divide the logits by T: a temperature above 1 flattens the distribution, below 1 sharpens it"),
    "top_k_ties": (
        "top-k keeps exactly k tokens where several tie with the k-th largest logit.",
        "keep every token whose logit is at least the k-th largest (logits < kth set to -inf): a tied token is as "
        "likely as the one kept, and which of them torch.topk returns first is arbitrary"),
    "top_p_wrong_side": (
        "top-p keeps the unlikely tail instead of the most likely tokens.",
        "sort the probabilities in DESCENDING order and keep the most likely tokens until their mass reaches p; the "
        "tail after that is dropped"),
    "top_p_crossing_dropped": (
        "top-p drops the token whose probability crosses p.",
        "keep the smallest set whose mass REACHES p: a token stays if the more likely tokens before it hold less than "
        "p (cumsum - p_token < p), so the token that crosses p is kept (cumsum <= p drops it)"),
    "top_p_before_top_k": (
        "top-p is applied before top-k.",
        "apply the temperature, then top-k, then top-p on the renormalised top-k distribution"),
}


def _decoding_label(case: dict, visible: bool) -> str:
    settings = ", ".join(f"{name}={case[name]}" for name in ("temperature", "top_k", "top_p"))
    return (f"next_token_probs(logits {tuple(case['logits'].shape)}, {settings})" if visible
            else "next_token_probs on hidden logits and settings")


@checked
def check_decoding(next_token_probs: Callable, split: str = "visible") -> None:
    """next_token_probs(logits, temperature, top_k, top_p): the distribution, against the reference."""
    visible = split == "visible"
    cases = [case for case in references.load("decoding")[split] if case["kind"] == "probs"]
    tol = references.tolerance("decoding")
    for case in cases:
        label = _decoding_label(case, visible)
        with forbid(generation.next_token_probs, generation.sample_next_token):
            found = call_student(label, next_token_probs, case["logits"].clone(), case["temperature"], case["top_k"],
                                 case["top_p"])
        found = require_tensor(found, label)
        expected = case["expected"]
        if matches_reference(found, expected, tol):
            continue
        if tuple(found.shape) != tuple(expected.shape):
            fail(f"{label} returns the wrong shape.", tuple(expected.shape), tuple(found.shape),
                 "one probability per token, the logits' shape: the filters set entries to 0, they do not remove "
                 "them", key="wrong_shape")
        finite = found.detach().double()
        if bool(torch.isnan(finite).any()):
            fail(f"{label}: NaN in the distribution, where a row lost every token.", hint="a softmax over logits "
                 "that are all -inf is NaN: the most likely token must always stay (top-p keeps the token that "
                 "crosses p, so at least one)", key="decoding.nan")
        sums = finite.sum(-1, keepdim=True)
        if bool(torch.isfinite(finite).all()) and bool((sums > 0).all()) and \
                not torch.allclose(sums, torch.ones_like(sums), atol=1e-4) and matches_reference(finite / sums, expected, tol):
            fail(f"{label}: the rows sum to less than 1; divided by their sum they are right.",
                 "rows summing to 1", f"row sums {shorten(sums.flatten()[:4])}",
                 "after zeroing the filtered tokens, renormalise: probs / probs.sum(-1, keepdim=True)",
                 key="decoding.no_renormalisation")
        if matches_reference(torch.softmax(finite, dim=-1), expected, tol):
            fail(f"{label} returns the filtered logits, not probabilities.", hint="take the softmax of the filtered "
                 "logits (filtered tokens at -inf get probability 0)", key="decoding.returns_logits")
        matches = variant_matches(found, case, DECODING_MISTAKES, expected, tol)
        if matches:
            fail(twin_mistakes([DECODING_MISTAKES[k][0].rstrip(".") for k in matches]) + ".",
                 shorten(expected.flatten()[:8]), shorten(found.flatten()[:8]),
                 twin_mistakes([DECODING_MISTAKES[k][1] for k in matches]), key="|".join(f"decoding.{k}" for k in matches))
        fail(f"{label} differs from the reference.", shorten(expected.flatten()[:8]), shorten(found.flatten()[:8]),
             "logits / temperature; then logits below the k-th largest to -inf; softmax; then, sorted by "
             "probability, drop the tokens the more likely ones already reach p without; renormalise")
    report_ok(f"next_token_probs matches the reference on {len(cases)} settings "
              "(temperature, top-k with a tie, top-p, all three)")


# Draws per sampling case, and how far a token's frequency may stray from its probability: 5 standard deviations of
# a frequency over DRAWS draws (a right sampler fails one token in about 3.5 million), plus one draw: at most 0.017,
# where each stored mistake moves some probability by 0.049 or more (grader.references.build_decoding).
DRAWS = 20000
SIGMAS = 5.0


def _frequencies_fit(counts: torch.Tensor, probs: torch.Tensor) -> bool:
    """The counts of ``DRAWS`` draws are what ``probs`` gives: no draw of a token with probability 0, and every
    frequency within ``SIGMAS`` standard deviations (and one draw) of its probability."""
    p = probs.double()
    frequency = counts.double() / counts.sum()
    if bool((counts[p == 0] > 0).any()):
        return False
    bound = SIGMAS * torch.sqrt(p * (1 - p) / counts.sum()) + 1.0 / counts.sum()
    return bool(((frequency - p).abs() <= bound).all())


def _sampling_ids(found, label: str, vocab: int) -> torch.Tensor:
    found = require_tensor(found, label)
    if tuple(found.shape) == (DRAWS, 1):
        fail(f"{label} returns shape (batch, 1).", f"({DRAWS},) = (batch,)", tuple(found.shape),
             "torch.multinomial(probs, 1) gives one column per row: .squeeze(-1) it to one id per row",
             key="wrong_shape", keep=True)
    if tuple(found.shape) != (DRAWS,):
        fail(f"{label} returns the wrong shape.", f"({DRAWS},) = (batch,): one token id per row of logits",
             tuple(found.shape), key="wrong_shape", keep=True)
    if found.is_floating_point():
        if not bool((found == found.round()).all()):
            fail(f"{label} returns numbers that are not token ids.", "integer ids", str(found.dtype),
                 "draw ids (torch.multinomial), do not return probabilities", key="wrong_type", keep=True)
        found = found.round()
    if bool((found < 0).any()) or bool((found >= vocab).any()):
        fail(f"{label} returns ids outside the vocabulary.", f"ids in [0, {vocab})", hint="one id per row, the index "
             "of the drawn token along the last axis", key="wrong_type", keep=True)
    return found.long()


@checked
def check_sampling(sample_next_token: Callable, split: str = "visible") -> None:
    """sample_next_token(logits, temperature, top_k, top_p, generator): judged by the frequencies of many draws,
    never by a seeded sequence (a right answer may use the random generator in any way)."""
    visible = split == "visible"
    cases = [case for case in references.load("decoding")[split] if case["kind"] == "sampling"]
    for case in cases:
        logits, vocab = case["logits"], case["logits"].size(-1)
        label = (f"sample_next_token(logits ({DRAWS}, {vocab}), temperature={case['temperature']}, "
                 f"top_k={case['top_k']}, top_p={case['top_p']}, generator)" if visible
                 else "sample_next_token on hidden logits and settings")
        with forbid(generation.next_token_probs, generation.sample_next_token):
            found = call_student(label, sample_next_token, logits.expand(DRAWS, vocab).clone(), case["temperature"],
                                 case["top_k"], case["top_p"], generator=torch.Generator().manual_seed(case["seed"]))
        counts = torch.bincount(_sampling_ids(found, label, vocab), minlength=vocab)
        expected = case["expected"]
        if _frequencies_fit(counts, expected):
            continue
        # shown in the visible check only: fail leaves expected and found out of a hidden one
        shown = f"frequencies {shorten((counts.double() / DRAWS).round(decimals=3))}"
        wanted = shorten(expected.double().round(decimals=3))
        if int(counts[int(expected.argmax())]) == DRAWS:
            fail(f"{label} always returns the most likely token.", wanted, shown, "that is greedy decoding: draw "
                 "from the distribution instead, torch.multinomial(probs, 1)", key="sampling.greedy")
        for name, (what, hint) in DECODING_MISTAKES.items():
            if name in case and not matches_reference(case[name], expected, references.tolerance("decoding")) \
                    and _frequencies_fit(counts, case[name]):
                fail(f"{label} draws from a distribution in which {what[0].lower()}{what[1:]}", wanted, shown, hint,
                     key=f"decoding.{name}")
        others = {"sampling.settings_ignored": (torch.softmax(logits.double(), -1), "ignores the temperature, top-k "
                                                "and top-p: it draws from softmax(logits)", "reshape the distribution "
                                                "first (next_token_probs), then draw from it"),
                  "sampling.softmax_twice": (torch.softmax(expected.double(), -1), "draws from softmax(probabilities)",
                                             "the distribution is already probabilities: draw from it directly "
                                             "(torch.multinomial takes probabilities, not logits)"),
                  "sampling.uniform": (torch.full((vocab,), 1.0 / vocab, dtype=torch.float64), "draws every token "
                                       "equally often", "draw with the probabilities as weights: "
                                       "torch.multinomial(probs, 1), not torch.randint"),
                  "sampling.uniform_over_kept": ((expected > 0).double() / (expected > 0).sum(), "draws the tokens the "
                                                 "filters keep equally often", "weight each kept token by its "
                                                 "probability: torch.multinomial(probs, 1)")}
        for key, (probs, what, hint) in others.items():
            if not matches_reference(probs, expected.double(), references.tolerance("decoding")) and _frequencies_fit(counts, probs):
                fail(f"{label} {what}.", wanted, shown, hint, key=key)
        worst = int(((counts.double() / DRAWS) - expected.double()).abs().argmax())
        fail(f"{label}: over {DRAWS} draws the frequencies are not the probabilities of next_token_probs"
             + (f" (token {worst} drawn {int(counts[worst])} times for a probability of {float(expected[worst]):.3f})"
                if visible else "") + ".", wanted, shown,
             "draw from the reference distribution: ids = torch.multinomial(probs, 1, generator=generator).squeeze(-1)")
    report_ok(f"sample_next_token: {DRAWS} draws on each of {len(cases)} settings have the probabilities of next_token_probs")


# ----------------------------------------------------------------- tokens: pieces back into text

# The usual mistakes of pieces_to_text, their outputs stored per case (``grader.references.build_tokenization``).
TOKEN_MISTAKES = {
    "marker_kept": ("the word-start mark \u2581 is still in the text.",
                    "each \u2581 (U+2581, not the ASCII underscore _) stands for the space before a word: turn it "
                    "into ' '"),
    "pieces_as_words": ("every piece became a word of its own.",
                        "a piece without \u2581 continues the word before it: join the pieces with nothing between "
                        "them, then turn each \u2581 into a space"),
    "leading_space": ("the text starts with a space.",
                      "the first word's \u2581 becomes a space too: strip the text's ends"),
    "specials_kept": ("the markers (<s>, </s>, <pad>, <mask>) are in the text.",
                      "leave out <s>, </s>, <pad> and <mask>: they mark where a sentence starts and ends, fill a batch "
                      "or hide a token, and are not text"),
}


@checked
def check_pieces_to_text(pieces_to_text: Callable, split: str = "visible") -> None:
    """pieces_to_text(pieces): the text, against the reference, each usual mistake named."""
    visible = split == "visible"
    cases = references.load("tokenization")[split]
    for case in cases:
        pieces, expected = list(case["pieces"]), case["expected"]
        label = f"pieces_to_text({pieces})" if visible else "pieces_to_text on hidden pieces"
        with forbid(tokens.pieces_to_text):
            found = call_student(label, pieces_to_text, list(pieces))
        if isinstance(found, (list, tuple)) and all(isinstance(piece, str) for piece in found):
            fail(f"{label} returns a list, not one string.", repr(expected),
                 shorten(found, 160), "join the pieces into one string: ''.join(...)",
                 key="wrong_type")
        if not isinstance(found, str):
            fail(f"{label} must return a string.", "a str", kind_of(found), key="wrong_type", keep=True)
        if found == expected:
            continue
        matches = [key for key in TOKEN_MISTAKES if case[key] != expected and found == case[key]]
        shown = (repr(expected), repr(found))  # a hidden check's fail leaves them out
        if matches:
            fail(f"{label}: " + twin_mistakes([TOKEN_MISTAKES[k][0].rstrip(".") for k in matches]) + ".", *shown,
                 twin_mistakes([TOKEN_MISTAKES[k][1] for k in matches]), key="|".join(f"tokens.{k}" for k in matches))
        if found.split() == expected.split():
            fail(f"{label}: the words are right, the spaces between them are not.", *shown,
                 "a space goes where a piece starts with \u2581, and only there; none at either end",
                 key="tokens.spacing")
        fail(f"{label} differs from the reference.", *shown, "join the pieces but <s>, </s>, <pad> and <mask>, "
             "turn each \u2581 into a space and strip the ends")
    report_ok(f"pieces_to_text gives the text of {len(cases)} tokenized sentences")
