"""Checks of part 2: the Transformer base, the heads, the model and the parameter count.

Why one file: the base, the heads, the model and the counts are checked against one set of configurations, and the
counts' diagnosis reads the modules' pieces the other checks build.
"""
from __future__ import annotations

import math
import warnings
from types import ModuleType, SimpleNamespace
from typing import Callable

import torch
from torch import nn

from .. import params, references, variants
from ..stages import held_in_kernel
from . import part2_probes, properties
from .scripted import RECORDED_CALLS, RecordedBase, RecordedHead  # noqa: F401 - the references use them
from .harness import (CheckFailed, OutputMistake, as_number, attempt_again, call_student, checked, defer, fail,
                      fail_if_transposed, fail_measured, forbid, held_parameters,
                      in_hidden_check, kind_of, lab_model_module, matches_reference, report_ok, require_tensor,
                      shorten, twin_mistakes, variant_matches)


def _diagnosis() -> ModuleType:
    """``translab.diagnosis``, imported when a count is checked: it builds a model to write its formulas (0.8 s with
    torch loaded), which every other notebook's ``import translab.checks`` would pay for nothing."""
    from .. import diagnosis  # lazy for speed: the docstring says why
    return diagnosis


def _load_state(module: nn.Module, state: dict, what: str, cfg: dict | None = None) -> None:
    if not isinstance(module, nn.Module):
        fail(f"{what} is not an nn.Module.", "an instance of a subclass of nn.Module", kind_of(module),
             "keep the skeleton's `class ...(nn.Module)` and call super().__init__() first", key="wrong_type", keep=True)
    def parameter_names() -> set[str]:  # asked only when something is missing: from the grading kernel, each
        return {name for name, _ in module.named_parameters()}  # parameter crosses the wire to name it
    try:
        # (missing, unexpected): a named tuple here, a plain one when the module answers from the grading kernel
        missing, unexpected = module.load_state_dict(state, strict=False)
        parameters = parameter_names() if missing else set()
        # a buffer the reference does not carry (a positional table kept in the state_dict) is the student's right
        if unexpected or set(missing) & parameters:
            raise RuntimeError("Error(s) in loading state_dict: " + "; ".join(
                [f"missing {name}" for name in missing if name in parameters]
                + [f"unexpected {name}" for name in unexpected]))
    except RuntimeError as error:
        state_mismatch = _diagnosis().state_mismatch
        # PyTorch's error lists what does not fit; read as causes, each size named after where it comes from
        sizes = {2048: "nn.TransformerEncoderLayer's default dim_feedforward (the lab uses dim_feedforward=nhid)",
                 5000: "max_len"}
        for name in ("ntoken", "nclasses", "nhead", "nlayers", "nhid"):  # the more likely reading last: it wins
            if (cfg or {}).get(name) is not None:
                sizes[cfg[name]] = name if in_hidden_check() else f"{name} ({cfg[name]})"
        if cfg and cfg.get("nhid"):
            sizes.setdefault(4 * cfg["nhid"], "4*nhid")
            sizes.setdefault(3 * cfg["nhid"], "3*nhid (Q, K and V together: nn.MultiheadAttention's in_proj)")
        parameters, current = parameter_names(), module.state_dict()
        own = {name: value for name, value in current.items() if name in parameters or name in state}
        causes = state_mismatch(own, state, sizes, show_shapes=not in_hidden_check())
        if causes:
            fail(f"{what}: the reference weights do not fit your module: " + "; ".join(text for _, text in causes) + ".",
                 hint="keep the skeleton's attribute names and layer types, sized as asked",
                 key=" ".join(dict.fromkeys(key for key, _ in causes)), keep=True)
        own = sorted(current.keys())
        says = "" if in_hidden_check() else (f" PyTorch says: {str(error).splitlines()[0]} "
                                             + " ".join(str(error).splitlines()[1:3]))
        fail(f"{what}: the reference weights do not fit your module.",
             f"parameters {sorted(state.keys())[:8]} ...", f"{own[:8]} ...",
             "keep the attribute names and layer types of the skeleton (encoder, pos_encoder, transformer_encoder, "
             f"decoder) and the sizes asked for.{says}", key="model.load_state")


MODEL_RECIPE = "hidden = base(src, src_mask, src_key_padding_mask); return head(hidden, src_key_padding_mask)"
# why a model returns logits, for the outputs that are a softmax or log-softmax of them (translab.relations)
LOGITS_WHY = {
    "output.softmax": "return the head's raw scores (logits): CrossEntropyLoss applies log-softmax itself, so a softmax "
                      "before it squashes the scores twice and the gradients vanish (a defect of the original lab); "
                      "apply softmax only where you want probabilities, outside the model",
    "output.log_softmax": "return the head's raw scores (logits): CrossEntropyLoss applies log-softmax itself (a "
                          "log-softmax is what NLLLoss expects, not CrossEntropyLoss)",
}


def _forbid_models():
    m = lab_model_module()
    return forbid(m.TransformerModel, m.LanguageModelHead, m.ClassificationHead, m.Model, m.last_token_states,
                  m.build_language_model, m.build_classifier)


def transformer_pieces(base: nn.Module, src, padding, causal) -> SimpleNamespace:
    """What a reference TransformerModel computes on the way, from which its mistakes are computed."""
    return SimpleNamespace(encoder=base.transformer_encoder, embedded=base.encoder(src), scale=math.sqrt(base.nhid),
                           positions=base.pos_encoder.pe[: src.size(1)], causal=causal, padding=padding,
                           padding_float=torch.zeros(padding.shape).masked_fill(padding, float("-inf")))


TRANSFORMER_MISTAKES = {  # key model.<name>
    "no_scale": OutputMistake("the embeddings are not multiplied by sqrt(nhid) before adding the positions",
                        lambda p: p.encoder(p.embedded + p.positions, mask=p.causal, src_key_padding_mask=p.padding_float)),
    "no_positions": OutputMistake("the positional encoding is not applied (self.pos_encoder)",
                            lambda p: p.encoder(p.embedded * p.scale, mask=p.causal, src_key_padding_mask=p.padding_float)),
    "no_causal_mask": OutputMistake("src_mask is not passed to the encoder: mask=src_mask",
                              lambda p: p.encoder(p.embedded * p.scale + p.positions, src_key_padding_mask=p.padding)),
    "no_padding_mask": OutputMistake("src_key_padding_mask is not passed to the encoder",
                               lambda p: p.encoder(p.embedded * p.scale + p.positions, mask=p.causal)),
}


def _base_outputs(model, label: str, case: dict) -> tuple[tuple, CheckFailed | None]:
    """(output with both masks, output of forward(src)), and the failure of the first call that raised, if any."""
    outputs = []
    try:
        outputs.append(call_student(f"{label}.forward(src, src_mask, src_key_padding_mask)", model, case["src"],
                                    case["causal"], case["padding"]))
        outputs.append(call_student(f"{label}.forward(src)", model, case["src"]))
    except CheckFailed as failed:
        return tuple(outputs), failed
    return tuple(outputs), None


def _base_properties(model, recorder, case: dict, failure: CheckFailed | None) -> bool:
    """Report every property of the base that its encoder's input shows broken, the call's own failure after them;
    whether any was."""
    found = properties.report(part2_probes.base_probes(model, recorder, case))
    if found and failure is not None and not ({"model.masks_not_optional", "model.layout"} & set(found)):
        defer([(failure.message, failure.key)])
    return bool(found)


@checked
def check_transformer_model(TransformerModel: type, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("transformer")[split]
    tol = references.tolerance("transformer")
    for case in cases:
        cfg = case["config"]
        label = (f"TransformerModel(ntoken={cfg['ntoken']}, nhead={cfg['nhead']}, nhid={cfg['nhid']}, "
                 f"nlayers={cfg['nlayers']})" if visible else "TransformerModel on a hidden configuration")
        with _forbid_models():
            model = call_student(label, TransformerModel, cfg["ntoken"], cfg["nhead"], cfg["nhid"], cfg["nlayers"], dropout=0.1)
            _load_state(model, case["state_dict"], label, cfg)
            model.eval()
            recorder = part2_probes.record_encoder(model) if case is cases[0] else None
            with torch.no_grad():
                outputs, failure = _base_outputs(model, label, case)
        if recorder is not None and _base_properties(model, recorder, case, failure):
            return  # the properties found are the failure (``checked`` raises them)
        if failure is not None:
            raise failure
        out, out_plain = outputs
        expected = case["expected"]
        require_tensor(out, f"{label}.forward(src, src_mask, src_key_padding_mask)")
        if out.shape != expected.shape:
            fail_if_transposed(f"{label} returns the wrong shape", out, expected, tol, ("batch", "seq", "nhid"),
                               "the encoder layer is built with batch_first=True: inputs and outputs are (batch, seq, "
                               "nhid); do not transpose them")
            fail(f"{label} returns the wrong shape" + (f" for src of shape {tuple(case['src'].shape)}." if visible else "."),
                 tuple(expected.shape), tuple(out.shape), "the base returns (batch, seq, nhid) contextual vectors; "
                 "build the encoder layer with batch_first=True and do not apply a head inside the base",
                 key="wrong_shape")
        if not matches_reference(out, expected, tol):
            real = ~case["padding"]
            diagnoses = {name: mistake.hint for name, mistake in TRANSFORMER_MISTAKES.items()}
            matches = variant_matches(out, case, diagnoses, expected, tol)
            if not matches and matches_reference(out[real], expected[real], tol):
                matches = ["no_padding_mask"]
            if matches:
                hint = twin_mistakes([diagnoses[k] for k in matches])
                fail(f"{label}: output differs from the reference.", "the reference output", f"the output when {hint}",
                     hint, key="|".join(f"model.{k}" for k in matches), keep=True)
            if bool(torch.isnan(out).any()):
                fail(f"{label}: the output holds NaN.", hint="a row of the attention mask that is all -inf gives NaN "
                     "(softmax of nothing); pass the masks as given, do not invert the padding mask")
            fail_measured(f"{label}: output differs from the reference", out, expected, tol,
                          "embedding * sqrt(nhid) -> positional encoding -> encoder(mask, padding mask)",
                          position_axis=1, names=("batch", "seq", "nhid"), scales={"sqrt(nhid)": math.sqrt(cfg["nhid"])})
        if not matches_reference(out_plain, case["expected_no_masks"], tol):
            fail(f"{label}: forward(src) without masks differs from the reference.",
                 hint="both masks are optional (default None); pass them through unchanged", key="model.masks_not_optional")
    report_ok(f"TransformerModel on {len(cases)} {'' if visible else 'hidden '}configuration(s): reference outputs with and "
              "without masks")


CLASSIFICATION_HEAD_MISTAKES = {  # variants of ClassificationHead(hidden, padding), from SimpleNamespace(head, hidden)
    "cls_last_position": OutputMistake(
        "with right padding, sentence b ends at position (~padding[b]).sum() - 1; use the padding mask to find it (the "
        "original lab had this bug: short reviews were classified from padding)",
        lambda p: p.head.decoder(p.hidden[:, -1]), looks_like="the state at position -1 for every sentence",
        what="ClassificationHead reads the last position, hidden[:, -1], which is padding for shorter sentences.",
        key="heads.last_position"),
    "cls_first_position": OutputMistake(
        "with a causal mask, position 0 has only seen the first token; the last real token has seen them all",
        lambda p: p.head.decoder(p.hidden[:, 0]), looks_like="position 0",
        what="ClassificationHead reads the first position.", key="heads.first_position"),
    "cls_mean": OutputMistake(
        "read the state of each sentence's last non-padding token", lambda p: p.head.decoder(p.hidden.mean(dim=1)),
        looks_like="the mean over the sequence", what="ClassificationHead averages over all positions, padding included.",
        key="heads.mean"),
}


@checked
def check_heads(LanguageModelHead: type, ClassificationHead: type, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("heads")[split]
    tol = references.tolerance("heads")
    for case in cases:
        cfg = case["config"]
        hidden, padding = case["hidden"], case["padding"]
        lm_label = f"LanguageModelHead(nhid={cfg['nhid']}, ntoken={cfg['ntoken']})" if visible else \
            "LanguageModelHead on a hidden configuration"
        cls_label = f"ClassificationHead(nhid={cfg['nhid']}, nclasses={cfg['nclasses']})" if visible else \
            "ClassificationHead on a hidden configuration"
        with _forbid_models():
            lm = call_student(lm_label, LanguageModelHead, cfg["nhid"], cfg["ntoken"])
            _load_state(lm, case["lm_state"], "LanguageModelHead", cfg)
            cls = call_student(cls_label, ClassificationHead, cfg["nhid"], cfg["nclasses"])
            _load_state(cls, case["cls_state"], "ClassificationHead", cfg)
            lm.eval()  # mode first: a dropout the student put in a head is off, as in evaluation
            cls.eval()
        if properties.report(_head_probes(lm, cls, case, tol)):
            return  # the properties found are the failure (``checked`` raises them)
    report_ok(f"LM head and classification head on {len(cases)} {'' if visible else 'hidden '}configuration(s); the "
              "classifier reads each sentence's last real token, never padding")


def _head_probes(lm, cls, case: dict, tol) -> list:
    """The LM head's logits, the classifier's readout, its default without a mask: each measured, every one said."""
    hidden, padding = case["hidden"], case["padding"]

    def lm_logits():
        with _forbid_models(), torch.no_grad():
            lm_out = call_student("LanguageModelHead.forward(hidden)", lm, hidden)
        require_tensor(lm_out, "LanguageModelHead.forward(hidden)")
        if lm_out.shape != case["lm_expected"].shape:
            fail_if_transposed("LanguageModelHead returns the wrong shape", lm_out, case["lm_expected"], tol,
                               ("batch", "seq", "ntoken"), "return decoder(hidden) as it comes: (batch, seq, ntoken)")
            fail("LanguageModelHead returns the wrong shape.", f"{tuple(case['lm_expected'].shape)} = (batch, seq, ntoken)",
                 tuple(lm_out.shape), "the LM head scores every vocabulary token at every position", key="wrong_shape")
        if not matches_reference(lm_out, case["lm_expected"], tol):
            if matches_reference(lm_out, case["lm_expected"].softmax(-1), tol) or matches_reference(lm_out, case["lm_expected"].log_softmax(-1), tol):
                fail("LanguageModelHead applies a softmax.", "raw logits", "probabilities",
                     "CrossEntropyLoss applies log-softmax itself: the head returns raw scores (logits)",
                     key="heads.lm_softmax", keep=True)
            fail_measured("LanguageModelHead output differs from the reference", lm_out, case["lm_expected"], tol,
                          "one nn.Linear(nhid, ntoken) named decoder", position_axis=1, names=("batch", "seq", "ntoken"),
                          why=LOGITS_WHY)

    readout_right = []  # whether the readout with the mask was right: the default without it is judged only then

    def readout():
        with _forbid_models(), torch.no_grad():
            cls_out = call_student("ClassificationHead.forward(hidden, src_key_padding_mask)", cls, hidden, padding)
        expected = case["cls_expected"]
        require_tensor(cls_out, "ClassificationHead.forward(hidden, src_key_padding_mask)")
        if cls_out.shape != expected.shape:
            fail("ClassificationHead returns the wrong shape.", f"{tuple(expected.shape)} = (batch, nclasses)",
                 tuple(cls_out.shape), "one prediction per sentence: pick one position per sequence before the "
                 "linear layer", key="wrong_shape")
        readout_right.append(matches_reference(cls_out, expected, tol))
        if not readout_right[-1]:
            said = part2_probes.readout_finding(cls_out, case, tol)
            if said:
                fail(*said[:1], hint=said[1], key=said[2], keep=True)
            fail_measured("ClassificationHead output differs from the reference", cls_out, expected, tol,
                          "decoder(hidden[b, last real position of b]) for each sentence b", names=("batch", "nclasses"),
                          why=LOGITS_WHY)

    def default_without_mask():
        try:
            with _forbid_models(), torch.no_grad():
                no_mask = call_student("ClassificationHead.forward(hidden) without a padding mask", cls, hidden)
        except CheckFailed as failed:  # src_key_padding_mask=None is the property under test
            raise CheckFailed(failed.message, "heads.no_padding_mask_default") from None
        if all(readout_right) and not matches_reference(no_mask, case["cls_no_padding_mask"], tol):  # else: said
            fail("ClassificationHead without a padding mask should read the last position.",
                 hint="src_key_padding_mask=None means no padding: every sequence ends at position -1",
                 key="heads.no_padding_mask_default")

    return [properties.Probe("heads.lm", "", lm_logits), properties.Probe("heads.readout", "", readout),
            properties.Probe("heads.no_padding_mask_default", "", default_without_mask)]


def reference_base_and_head(case: dict) -> tuple[nn.Module, nn.Module]:
    """The reference base and LM head that check_model gives Model: translab's, with the case's weights; in a
    release that holds part 2's answers back (``translab.stages``), stand-ins that replay their stored outputs."""
    m = lab_model_module()
    if held_in_kernel(m.TransformerModel) or held_in_kernel(m.LanguageModelHead):
        return RecordedBase(case), RecordedHead({(i, given): out for i, out in enumerate(case["lm_outputs"])
                                                   for given in (True, False)}, case, case["head_state"])  # reads no padding
    base = m.TransformerModel.from_config(m.ModelConfig.pick(case["config"], dropout=0.1))
    head = m.LanguageModelHead(case["config"]["nhid"], case["config"]["ntoken"])
    base.load_state_dict(case["base_state"])
    head.load_state_dict(case["head_state"])
    return base, head


@checked
def check_model(Model: type, split: str = "visible") -> None:
    m = lab_model_module()
    cases = references.load("model")[split]
    tol = references.tolerance("model")
    for case in cases:
        cfg = case["config"]
        base, head = reference_base_and_head(case)
        with forbid(m.Model, m.build_language_model, m.build_classifier):
            model = call_student("Model(base, head)", Model, base, head)
            if not isinstance(model, nn.Module):
                fail("Model(base, head) is not an nn.Module.", "an instance of a subclass of nn.Module", kind_of(model),
                     "keep `class Model(nn.Module)` and call super().__init__() first", key="wrong_type", keep=True)
            trainable = sum(p.numel() for p in held_parameters(model))
            expected_count = sum(p.numel() for p in base.parameters()) + sum(p.numel() for p in head.parameters())
            if trainable != expected_count:
                fail("Model(base, head) does not register the base and the head as submodules.",
                     f"{expected_count} parameters", f"{trainable}",
                     "assign them as attributes (self.base = base; self.head = head) after super().__init__()",
                     key="model.not_registered")
            model.eval()
            with torch.no_grad():
                causal = _mask_size_named(lambda: call_student("model(src, src_key_padding_mask)", model, case["src"],
                                                               case["padding"]), model, case["src"], case["padding"])
                bidirectional = call_student("model(src, src_key_padding_mask, causal=False)", model, case["src"],
                                             case["padding"], causal=False)
                plain = call_student("model(src)", model, case["src"])
        require_tensor(causal, "model(src, src_key_padding_mask)")
        if causal.shape != case["causal_expected"].shape:
            fail_if_transposed("Model returns the wrong shape", causal, case["causal_expected"], tol,
                               ("batch", "seq", "ntoken"), "everything is batch-first here: return head(hidden, ...) "
                               "as it comes, (batch, seq, ntoken)")
            fail("Model returns the wrong shape.", tuple(case["causal_expected"].shape), tuple(causal.shape),
                 key="wrong_shape")
        if not matches_reference(causal, case["causal_expected"], tol):
            if matches_reference(causal, case["bidirectional_expected"], tol):
                fail("Model(src) is not causal.", "a square subsequent mask when causal=True", "no mask",
                     "build the mask with generate_square_subsequent_mask(src.size(1)) and pass it as src_mask",
                     key="model.not_causal", keep=True)
            fail_measured("Model output differs from the reference", causal, case["causal_expected"], tol, MODEL_RECIPE,
                          position_axis=1, names=("batch", "seq", "ntoken"), why=LOGITS_WHY)
        if not matches_reference(bidirectional, case["bidirectional_expected"], tol):
            fail("Model(..., causal=False) still masks the future.", hint="causal=False means src_mask=None",
                 key="model.causal_false_masks")
        if not matches_reference(plain, case["causal_no_padding"], tol):
            fail("Model(src) without a padding mask differs from the reference.", key="model.masks_not_optional")
        _check_padding_reaches_the_head(Model, base, case, tol)
    report_ok(f"Model joins base and head on {len(cases)} configuration(s); causal by default, bidirectional with causal=False, "
              "the padding mask passed on to the head")


def _mask_size_named(run: Callable, model, src: torch.Tensor, padding: torch.Tensor):
    """``run()``; when it raises with a mask sized by the batch: PyTorch's error says so in a visible check, and a
    model that runs on a square batch (as many sentences as positions) and without its causal mask, but raises on
    this one, shows it in a hidden check (which does not show the error's words)."""
    batch, seq = src.shape
    try:
        return run()
    except CheckFailed as failed:
        side = min(batch, seq)
        # PyTorch's words, where a visible check shows them (a week's release replays stored outputs, so the
        # second calls cannot run there); measured otherwise
        said = (f"attn_mask is torch.Size([{batch}, {batch}])", f"is invalid for input of size {batch * batch}")
        if failed.key == "raised" and batch != seq and (
                any(words in failed.message for words in said)
                or (attempt_again(model, src[:side, :side].clone()) is not None
                    and attempt_again(model, src.clone(), padding.clone(), causal=False) is not None)):
            fail("Model builds the causal mask from the batch size.", f"a ({seq}, {seq}) mask: one row per position",
                 f"a ({batch}, {batch}) mask", "src is batch-first, (batch, seq): the mask's size is the sequence "
                 "length, src.size(1), not src.size(0)", key="model.mask_from_batch")
        raise


def _check_padding_reaches_the_head(Model: type, base: nn.Module, case: dict, tol) -> None:
    """The LM head ignores the padding mask, so the cases above cannot tell whether Model passes it on; a
    classification head reads it (each sentence's last real token)."""
    m = lab_model_module()
    if held_in_kernel(m.ClassificationHead):
        head = RecordedHead({(0, True): case["cls_expected"], (0, False): case["cls_padding_not_to_head"]}, case,
                             case["cls_state"])
    else:
        head = m.ClassificationHead(case["config"]["nhid"], 3)
        head.load_state_dict(case["cls_state"])
    with forbid(m.Model, m.build_language_model, m.build_classifier):
        classifier = call_student("Model(base, ClassificationHead(...))", Model, base, head)
        classifier.eval()
        with torch.no_grad():
            found = call_student("Model(base, classification head)(src, src_key_padding_mask)", classifier, case["src"],
                                 case["padding"])
    require_tensor(found, "Model(base, classification head)(src, src_key_padding_mask)")
    if matches_reference(found, case["cls_expected"], tol):
        return
    if matches_reference(found, case["cls_padding_not_to_head"], tol):
        fail("Model does not pass the padding mask on to the head.", "head(hidden, src_key_padding_mask)",
             "head(hidden)", "a classification head finds each sentence's last real token with the padding mask; "
             "without it, it reads position -1, which is padding for the shorter sentences: "
             "return self.head(hidden, src_key_padding_mask)", key="model.padding_not_to_head", keep=True)
    fail_measured("Model with a classification head differs from the reference", found, case["cls_expected"], tol,
                  MODEL_RECIPE, names=("batch", "nclasses"), why=LOGITS_WHY)


def _count_recipe() -> str:
    """Where to look, not the formula: the count (and the written question's working) is the student's to find."""
    return ("count every tensor that `model.named_parameters()` lists, weights and biases: the embedding; in each "
            "layer the attention's in-projection (Q, K and V at once) and out-projection, the feed-forward's two "
            "Linears and the two LayerNorms; then the head (ntoken outputs for the LM head, nclasses for a "
            "classifier). The positional encoding is a buffer, not a parameter")


def _probe_counts(count_parameters: Callable) -> tuple[list[dict], list[float]]:
    """The student's count at ``diagnosis.PROBES``, where it runs and returns a number (translab's formula off)."""
    diagnosis = _diagnosis()
    configs, values = [], []
    with forbid(*params.FORMULA_FUNCTIONS), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cfg in diagnosis.PROBES:
            try:
                value = as_number(count_parameters(**cfg), "count_parameters")
            except Exception:  # noqa: BLE001 - a probe the answer cannot handle is left out
                continue
            configs.append(cfg)
            values.append(value)
    return configs, values


def _count_at(count_parameters: Callable) -> Callable:

    def count(cfg):
        try:
            with forbid(*params.FORMULA_FUNCTIONS), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return as_number(count_parameters(**cfg), "count_parameters")
        except Exception:  # noqa: BLE001
            return None
    return count


def _explain(configs: list[dict], values: list[float]) -> tuple[str, str]:
    diagnosis = _diagnosis()
    explanations, total = diagnosis.explain_counts(configs, values, limit=4)
    return diagnosis.describe_explanations(explanations, total)


def _diagnose_formula(count_parameters: Callable, cfg: dict, value: int) -> tuple[str, str]:
    """(hint, keys) for a wrong count_parameters: the combination of mistakes that gives exactly its numbers at the
    failing configuration and at ``diagnosis.PROBES``; else whether it depends on nhead and where the error lies."""
    diagnosis = _diagnosis()
    configs, values = _probe_counts(count_parameters)
    hint, keys = _explain(configs + [cfg], values + [value])
    if hint:
        return hint, keys
    family = [(c, v) for c, v in zip(configs, values) if c in diagnosis.NHEAD_PROBES]
    if len({round(v, 6) for _, v in family}) > 1:
        right = diagnosis.right_count(family[0][0])
        shown = ", ".join(f"nhead={c['nhead']}: {v:,.0f}" for c, v in family)
        base = ", ".join(f"{k}={v}" for k, v in family[0][0].items() if k != "nhead")
        return (f"your count changes with nhead alone ({base}: {shown}; the right count is {right:,} for every "
                f"nhead): {diagnosis.WHY_NHEAD}", "count.depends_on_nhead")
    count = _count_at(count_parameters)
    if len(values) > 1 and len({round(v, 6) for v in values}) == 1:
        stated = {case["expected"] for case in references.load("parameters")["visible"]}
        whose = " (the notebook's own number)" if values[0] in stated else ""
        return (f"your count is {values[0]:,.0f}{whose} whatever the sizes: a formula must compute it from ntoken, "
                "nhid, nlayers, dim_feedforward and the head's outputs", "count.constant")
    ignored = diagnosis.ignored_variables(count)
    ignoring, ignoring_keys = "", [f"count.ignores_{name}" for name in ignored]
    if ignored:
        fixed = ["the head had ntoken outputs" if name == "nclasses" and value is None
                 else diagnosis.configuration_text(name, value)
                 for name, value in diagnosis.fixed_values(count, ignored).items()]
        ignoring = (f"your count does not change with {', '.join(ignored)}, the right one does"
                    + (f" (it counts as if {', '.join(fixed)})" if fixed else ""))
    coefficients = diagnosis.fit_count(count)
    if coefficients is not None:
        text = diagnosis.describe_fit(coefficients)
        return (f"{ignoring}; {text}" if ignored else text), " ".join(["count.coefficients", *ignoring_keys])
    if ignored:
        return f"{ignoring}. {_count_recipe()}", " ".join(ignoring_keys)
    variables = diagnosis.error_dependence(count)
    recipe = _count_recipe()
    if variables is None:
        return recipe, "count.unexplained"
    return f"{diagnosis.locate_text(variables)}. {recipe[0].upper()}{recipe[1:]}", "count.unexplained"


@checked
def check_parameter_formula(count_parameters: Callable, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("parameters")[split]
    for case in cases:
        cfg = case["config"]
        head = "the LM head" if cfg["nclasses"] is None else f"{cfg['nclasses']} classes"
        what = (f"count_parameters for ntoken={cfg['ntoken']}, nhid={cfg['nhid']}, nlayers={cfg['nlayers']}, "
                f"nhead={cfg['nhead']}, dim_feedforward={cfg['dim_feedforward']} with {head}" if visible
                else "count_parameters on a hidden configuration")
        with forbid(*params.FORMULA_FUNCTIONS):
            found = call_student(f"count_parameters(**{cfg})" if visible else what, count_parameters, **cfg)
        value = as_number(found, what, whole=True)
        expected = case["expected"]
        if value == expected:
            continue
        hint, keys = _diagnose_formula(count_parameters, cfg, value)
        fail(f"{what} is off by {value - expected:+,}." if visible else
             f"{what} is wrong (other ntoken, nhid, nlayers, nhead, dim_feedforward or head than the notebook's).",
             f"{expected:,}", f"{value:,}", hint, key=keys)
    if visible:  # right at the notebook's sizes is not enough: the hidden test tries others, and so does this one
        diagnosis = _diagnosis()
        configs, values = _probe_counts(count_parameters)
        for cfg, value in zip(configs, values):
            if value != diagnosis.right_count(cfg):
                hint, keys = _diagnose_formula(count_parameters, cfg, value)
                fail(f"count_parameters is right for the notebook's sizes but not for {_sizes_text(cfg)}.",
                     f"{diagnosis.right_count(cfg):,}", f"{value:,.0f}", hint, key=keys)
    report_ok(f"parameter formula right on {len(cases)} {'' if visible else 'hidden '}configuration(s)"
              + (f" and at {len(diagnosis.PROBES)} other sizes" if visible else ""))


def _sizes_text(cfg: dict) -> str:
    head = "the LM head" if cfg.get("nclasses") is None else f"{cfg['nclasses']} classes"
    return ", ".join(f"{k}={v}" for k, v in cfg.items() if k != "nclasses") + f" with {head}"


@checked
def check_stated_counts(n_params_lm, n_params_classifier, variant: str | None = None) -> None:
    """The two numbers for the student's own configuration (``translab.variants``).  ``variant`` is the code: in the
    lab, this kernel's own; while grading, the checker sets it from the id nbgrader records (what the kernel passes
    is ignored), so numbers copied from another student are another configuration's, and the message says so."""
    diagnosis = _diagnosis()
    if variant == "":
        fail("The grader has no variant for you: this course grades without its secret (grader.course.variants).",
             "your variant's counts", "no variant", "ask your instructor: the course secret is missing on the grading "
             "machine", key="checker_error")
    mine = variants.from_code(variant) if variant else variants.mine()
    lm_cfg, cls_cfg = mine.config("lm"), mine.config("classifier")
    lm_case = {"config": lm_cfg, "expected": diagnosis.right_count(lm_cfg)}
    cls_case = {"config": cls_cfg, "expected": diagnosis.right_count(cls_cfg)}
    shown = mine.text()
    numbers = [("n_params_lm", as_number(n_params_lm, "n_params_lm", whole=True), lm_case),
               ("n_params_classifier", as_number(n_params_classifier, "n_params_classifier", whole=True), cls_case)]
    wrong = [(name, value, case) for name, value, case in numbers if value != case["expected"]]
    if wrong:
        heads = {"n_params_lm": "the LM head", "n_params_classifier": f"{mine.nclasses} classes"}
        what = (" and ".join(f"{name} ({heads[name]})" for name, _, _ in wrong)  # never the right count nor the gap
                + f" {'is not the count' if len(wrong) == 1 else 'are not the counts'} of your configuration ({shown}).")
        expected = "the count of your configuration's model (your formula's, or the sum of numel of its parameters)"
        found = " and ".join(f"{value:,}" for _, value, _ in wrong)
        others = diagnosis.configurations_counting(numbers[0][1], numbers[1][1], exclude=cls_cfg)
        if others:  # both numbers right, for someone else's model
            other = min(others, key=lambda cfg: (cfg != {k: variants.WORKED_EXAMPLE[k] for k in cfg}, cfg["nclasses"]))
            worked = other == {k: variants.WORKED_EXAMPLE[k] for k in other}
            fail(what, expected, found,
                 f"these are the counts of another configuration{': the worked example' if worked else ''} "
                 f"(ntoken={other['ntoken']}, nhid={other['nhid']}, nlayers={other['nlayers']}, a "
                 f"{other['nclasses']}-class head), not of yours: each student counts a model of their own. State "
                 "the numbers for the configuration printed at the top of section 5", key="count.another_variant")
        hint, keys = _explain_stated(wrong)
        fail(what, expected, found, hint or _count_recipe(), key=keys or "count.unexplained")
    report_ok(f"{lm_case['expected']:,} parameters with the LM head, {cls_case['expected']:,} with {mine.nclasses} classes "
              f"(your configuration)")


def _explain_stated(wrong: list[tuple[str, float, dict]]) -> tuple[str, str]:
    """(hint, keys) for stated numbers that are no configuration's counts: the mistakes that give them."""
    diagnosis = _diagnosis()
    configs, values = [case["config"] for _, _, case in wrong], [value for _, value, _ in wrong]
    hint, keys = _explain(configs, values)
    if hint:
        bigger, _ = diagnosis.explain_counts(configs, values, limit=12, slack=1)
        fewest = min(len(e) for e in bigger)
        others = [e for e in bigger if len(e) > fewest]
        if others or "equivalently" in hint:
            also = diagnosis.describe_explanations(others[:1], 1)[0]
            hint += ("; but at one size several mistakes give the same numbers" +
                     (f" (for instance also: {also})" if also else "") + ": check_parameter_formula, which "
                     "tries your formula at other sizes too, tells them apart")
    if not hint and len(wrong) == 2:  # no common explanation: each number on its own
        parts = [(name, *_explain([case["config"]], [value])) for name, value, case in wrong]
        hint = "; ".join(f"{name}: {text}" for name, text, _ in parts if text)
        keys = " ".join(dict.fromkeys(k for _, _, key in parts for k in key.split() if k))
    readings = [f"{name} is the right count for {' or '.join(found)}" for name, value, case in wrong
                for found in [diagnosis.other_readings(case["config"], value)] if found]
    if readings:  # a number that answers another question than the one asked
        hint = "; ".join(readings) + (f". Otherwise: {hint}" if hint else "")
        keys = " ".join(filter(None, ["count.other_configuration", keys]))
    return hint, keys
