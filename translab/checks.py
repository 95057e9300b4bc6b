"""The checks that the notebooks' test cells run, with feedback that teaches.

Each ``check_*`` takes the student's function or class, runs it on small inputs and compares
the result with reference tensors computed from translab (``grader/references``, built by
``make references``).  On failure it raises ``CheckFailed`` (an ``AssertionError``) whose message
says what was expected, what was found and the likely misconception; on success it prints one
line starting with ``ok``.  ``split="hidden"`` runs the same check on sizes, hyperparameters
and seeds that the notebook never shows.

While the student's code runs, translab's own implementation of the same thing is switched off
(``forbid``): an answer that calls it, under any name, fails with a message saying so.
"""
from __future__ import annotations

import contextlib
import math
import warnings
from typing import Callable

import torch
from torch import nn

from . import references
from .data import BOS_ID, EOS_ID, MASK_ID, PAD_ID

__all__ = ["CheckFailed", "forbid", "check_mask", "check_attention_demo", "check_positional_encoding",
           "check_transformer_model", "check_heads", "check_model", "check_parameter_formula",
           "check_stated_counts", "check_lm_targets", "check_lm_loss", "check_greedy", "check_accuracy",
           "check_transfer", "check_masking", "check_mlm_loss"]


class CheckFailed(AssertionError):
    """A test cell's check failed; the message explains why."""


def _fail(what: str, expected=None, found=None, hint: str | None = None) -> None:
    lines = [what]
    if expected is not None:
        lines.append(f"  expected: {expected}")
    if found is not None:
        lines.append(f"  found:    {found}")
    if hint:
        lines.append(f"  likely:   {hint}")
    raise CheckFailed("\n".join(lines))


def _ok(message: str) -> None:
    print(f"ok  {message}")


def _short(value, limit: int = 300) -> str:
    if isinstance(value, torch.Tensor):
        text = str(value.detach()) if value.numel() <= 36 else f"tensor of shape {tuple(value.shape)}"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[:limit] + " ..."


# ----------------------------------------------------------------- running student code

def _raising_code(name: str):
    message = (f"this answer calls translab's own {name}. The exercise is to write it yourself: "
               f"translab's version is switched off while this test runs.")
    namespace: dict = {}
    exec(f"def _forbidden(*args, **kwargs):\n    raise AssertionError({message!r})\n", namespace)
    return namespace["_forbidden"].__code__


def _innermost(function):
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return function


@contextlib.contextmanager
def forbid(*targets):
    """Make translab's functions and classes raise while the block runs, whatever name they were
    imported under: a function's code object and a class's ``__init__``/``forward`` are swapped
    (on the shared object itself) and restored afterwards."""
    saved = []
    try:
        for target in targets:
            if isinstance(target, type):
                for attr in ("__init__", "forward"):
                    if attr in vars(target):
                        saved.append((target, attr, vars(target)[attr]))
                        message = (f"this answer uses translab's own {target.__name__}. The exercise is to "
                                   f"write it yourself: translab's version is switched off while this test runs.")

                        def raiser(self, *args, _message=message, **kwargs):
                            raise AssertionError(_message)
                        setattr(target, attr, raiser)
            else:
                function = _innermost(target)
                saved.append((function, "__code__", function.__code__))
                function.__code__ = _raising_code(getattr(function, "__qualname__", "function"))
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


@contextlib.contextmanager
def _no_warnings(what: str):
    """Turn a warning from the student's code into a clear failure (in nbgrader, stderr scores 0)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        hint = ("nn.TransformerEncoderLayer needs batch_first=True (our tensors are (batch, seq, features)), "
                "and nn.TransformerEncoder enable_nested_tensor=False"
                if "nested" in str(warning.message) or "batch_first" in str(warning.message) else
                "PyTorch wants the attention mask and the padding mask of the same type: "
                "keep the given lines that convert the padding mask"
                if "mismatched" in str(warning.message) else None)
        _fail(f"{what} printed a warning to stderr; under nbgrader any stderr output scores the cell 0.",
              found=f"{warning.category.__name__}: {warning.message}", hint=hint)


def _call(what: str, function: Callable, *args, **kwargs):
    try:
        with _no_warnings(what):
            return function(*args, **kwargs)
    except CheckFailed:
        raise
    except NotImplementedError:
        _fail(f"{what} is not written yet (it raises NotImplementedError).",
              hint="replace `raise NotImplementedError()` in the answer cell with your code, then run that cell")
    except AssertionError:
        raise
    except Exception as error:
        _fail(f"{what} raised {type(error).__name__}: {error}")


def _model_module():
    from . import model
    return model


# ----------------------------------------------------------------- notebook 01

def _forbid_mask():
    return forbid(_model_module().generate_square_subsequent_mask, nn.Transformer.generate_square_subsequent_mask)


def check_mask(generate_square_subsequent_mask: Callable[[int], torch.Tensor], split: str = "visible") -> None:
    expected_all = references.load("mask")[split]
    for size, expected in expected_all.items():
        size = int(size)
        with _forbid_mask():
            mask = _call(f"generate_square_subsequent_mask({size})", generate_square_subsequent_mask, size)
        if not isinstance(mask, torch.Tensor):
            _fail(f"generate_square_subsequent_mask({size}) must return a torch.Tensor.", "a tensor", type(mask).__name__)
        if tuple(mask.shape) != (size, size):
            _fail(f"the mask for sz={size} has the wrong shape.", (size, size), tuple(mask.shape),
                  "the mask is square: one row per query position, one column per key position")
        if mask.dtype == torch.bool:
            _fail(f"the mask for sz={size} is boolean.", "a float mask of 0 and -inf", mask.dtype,
                  "this lab uses an additive mask: it is added to the attention scores before the softmax")
        if not mask.is_floating_point():
            _fail(f"the mask for sz={size} holds integers.", "float32 with 0 and -inf", mask.dtype,
                  "integers cannot hold -inf; build it with torch.full(..., float('-inf')) or masked_fill")
        mask = mask.float()
        lower = torch.tril(torch.ones(size, size, dtype=torch.bool))
        values = set(mask.unique().tolist())
        if values <= {0.0, 1.0} and size > 1:
            if bool((mask[lower] == 1).all()):
                _fail(f"the mask for sz={size} has 1 on and below the diagonal and 0 above: a mask of 1s.",
                      "0 on and below the diagonal, -inf above", _short(mask),
                      "a 'keep' mask of 1s is not how nn.TransformerEncoder reads a float mask: it ADDS the mask "
                      "to the scores before the softmax. Adding 1 leaves the future visible; allowed positions need "
                      "0 and the future -inf, so that exp(-inf) = 0")
            _fail(f"the mask for sz={size} holds only 0 and 1.", "0 on and below the diagonal, -inf above", _short(mask),
                  "the mask is added to the scores before the softmax: blocked positions need -inf, not 1")
        if bool(torch.isinf(mask.diagonal()).any()):
            _fail(f"the diagonal of the mask for sz={size} is -inf.", "0 on the diagonal", _short(mask),
                  "each position must attend to itself (else the first row is all -inf and the softmax gives NaN); "
                  "start the blocked part one above the diagonal: torch.triu(..., diagonal=1)")
        if size > 1 and bool(torch.isinf(mask[~lower.T]).all()) and not bool(torch.isinf(mask[~lower]).any()):
            _fail(f"the mask for sz={size} blocks the past instead of the future.", "-inf ABOVE the diagonal",
                  _short(mask), "row i is the query, column j the key: position i may look at j <= i; use triu, not tril")
        if bool((mask[lower] != 0).any()):
            _fail(f"the mask for sz={size} is not 0 on and below the diagonal.", "0 where j <= i", _short(mask),
                  "allowed positions must leave the scores unchanged: add 0")
        above = mask[~lower]
        if above.numel() and not bool(torch.isneginf(above).all()):
            _fail(f"the mask for sz={size} is not -inf above the diagonal.", "-inf where j > i", _short(mask),
                  "a large negative number is close but not exact; use float('-inf') so the future gets weight exactly 0")
        if not torch.equal(mask, expected):
            _fail(f"the mask for sz={size} differs from the reference.", _short(expected), _short(mask))
        weights = torch.softmax(torch.randn(size, size) + mask, dim=-1)
        if not bool((weights[~lower] == 0).all()) or not torch.allclose(weights.sum(-1), torch.ones(size)):
            _fail("softmax(scores + mask) does not give exactly 0 above the diagonal.")
    sizes = ", ".join(str(s) for s in expected_all)
    _ok(f"causal mask for sz = {sizes}: 0 on and below the diagonal, -inf above, future weights exactly 0 after softmax")


def check_attention_demo(weights: torch.Tensor) -> None:
    """The notebook's demo: attention weights computed with the mask are 0 above the diagonal."""
    size = weights.size(-1)
    upper = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    if not bool((weights[..., upper] == 0).all()):
        _fail("attention weights above the diagonal are not exactly 0.", "0", _short(weights))
    _ok("every weight above the diagonal is exactly 0 and every row sums to 1")


def _pe_variants(table: torch.Tensor, d_model: int, max_len: int) -> dict:
    position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
    swapped = torch.zeros(max_len, d_model)
    div = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
    swapped[:, 0::2] = torch.cos(position * div)
    swapped[:, 1::2] = torch.sin(position * div[: d_model // 2])
    no_two = torch.zeros(max_len, d_model)
    div_i = torch.exp(torch.arange(0, d_model, 2).float() / 2 * (-math.log(10000.0) / d_model))
    no_two[:, 0::2] = torch.sin(position * div_i)
    no_two[:, 1::2] = torch.cos(position * div_i[: d_model // 2])
    return {
        "sin and cos swapped (cos on even dimensions)": swapped,
        "an exponent of i/d_model instead of 2i/d_model": no_two,
    }


def check_positional_encoding(PositionalEncoding: type, split: str = "visible") -> None:
    model_module = _model_module()
    for case in references.load("positional_encoding")[split]:
        d_model, max_len, x, expected = case["d_model"], case["max_len"], case["x"], case["expected"]
        with forbid(model_module.PositionalEncoding, model_module.sinusoidal_table):
            module = _call(f"PositionalEncoding(d_model={d_model}, dropout=0.0, max_len={max_len})",
                           PositionalEncoding, d_model, dropout=0.0, max_len=max_len)
            trainable = [name for name, p in module.named_parameters()]
            if trainable:
                _fail("the positional encoding has trainable parameters.", "no parameters (a fixed buffer)",
                      f"parameters {trainable}",
                      "the sinusoidal table is fixed, not learned: store it with self.register_buffer('pe', ...), "
                      "not nn.Parameter (a buffer moves with .to(device) and is never updated by the optimizer)")
            module.eval()
            out = _call("PositionalEncoding.forward", module, x.clone())
        if not isinstance(out, torch.Tensor) or out.shape != x.shape:
            _fail(f"PositionalEncoding(d_model={d_model}) returns the wrong shape for a (batch, seq, d_model) input.",
                  tuple(x.shape), tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__,
                  "inputs are batch-first (batch, seq, d_model): add pe[:seq_len] where seq_len = x.size(1), "
                  "broadcast over the batch")
        if torch.allclose(out, expected, atol=1e-5):
            continue
        added = out - x
        table = case["table"][: x.size(1)]
        if torch.allclose(added[0], added[-1], atol=1e-5):
            for label, variant in _pe_variants(case["table"], d_model, max_len).items():
                if torch.allclose(added[0], variant[: x.size(1)], atol=1e-5):
                    _fail(f"the positional encoding (d_model={d_model}) uses {label}.",
                          "pe[pos, 2i] = sin(pos / 10000^(2i/d_model)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))",
                          _short(added[0]))
            if torch.allclose(added[0], table.flip(0), atol=1e-5) or torch.allclose(added[0].T[: table.size(0)], table, atol=1e-5):
                _fail("the positional encoding rows are in the wrong order or transposed.", _short(table), _short(added[0]))
        if torch.allclose(out, x * case["table"][: x.size(1)], atol=1e-5):
            _fail("the positional encoding multiplies the input.", "x + pe[:seq_len]", "x * pe[:seq_len]",
                  "the encoding is ADDED to the token embeddings")
        _fail(f"PositionalEncoding(d_model={d_model}, max_len={max_len}) output differs from x + pe[:seq_len].",
              f"x + table, e.g. table[1, :4] = {table[1, :4].tolist() if table.size(0) > 1 else table[0, :4].tolist()}",
              f"out - x at position 1: {added[0, 1 if added.size(1) > 1 else 0, :4].tolist()}",
              "pe[pos, 2i] = sin(pos * exp(-2i * ln(10000) / d_model)), odd dimensions the cos of the same angle; "
              "check the dropout is applied after the addition and that eval() turns it off")
    sizes = ", ".join(f"d_model={c['d_model']}" for c in references.load("positional_encoding")[split])
    _ok(f"positional encoding ({sizes}): fixed sinusoids added to batch-first inputs, no trainable parameters")


# ----------------------------------------------------------------- notebook 02

def _load_state(module: nn.Module, state: dict, what: str) -> None:
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as error:
        own = sorted(module.state_dict().keys())
        _fail(f"{what}: the reference weights do not fit your module.",
              f"parameters {sorted(state.keys())[:8]} ...", f"{own[:8]} ...",
              "keep the attribute names and layer types of the skeleton (encoder, pos_encoder, transformer_encoder, "
              f"decoder) and the sizes asked for. PyTorch says: {str(error).splitlines()[0]} "
              + " ".join(str(error).splitlines()[1:3]))


def _forbid_models():
    m = _model_module()
    return forbid(m.TransformerModel, m.LanguageModelHead, m.ClassificationHead, m.Model, m.last_token_states,
                  m.build_language_model, m.build_classifier)


def check_transformer_model(TransformerModel: type, split: str = "visible") -> None:
    cases = references.load("transformer")[split]
    for case in cases:
        cfg = case["config"]
        label = f"TransformerModel(ntoken={cfg['ntoken']}, nhead={cfg['nhead']}, nhid={cfg['nhid']}, nlayers={cfg['nlayers']})"
        with _forbid_models():
            model = _call(label, TransformerModel, cfg["ntoken"], cfg["nhead"], cfg["nhid"], cfg["nlayers"], dropout=0.1)
            _load_state(model, case["state_dict"], label)
            model.eval()
            with torch.no_grad():
                out = _call(f"{label}.forward(src, src_mask, src_key_padding_mask)", model, case["src"],
                            case["causal"], case["padding"])
                out_plain = _call(f"{label}.forward(src)", model, case["src"])
        expected = case["expected"]
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            _fail(f"{label} returns the wrong shape for src of shape {tuple(case['src'].shape)}.", tuple(expected.shape),
                  shape, "the base returns (batch, seq, nhid) contextual vectors; build the encoder layer with "
                  "batch_first=True and do not apply a head inside the base")
        if not torch.allclose(out, expected, atol=1e-5):
            real = ~case["padding"]
            diagnoses = {
                "no_scale": "the embeddings are not multiplied by sqrt(nhid) before adding the positions",
                "no_positions": "the positional encoding is not applied (self.pos_encoder)",
                "no_causal_mask": "src_mask is not passed to the encoder: mask=src_mask",
                "no_padding_mask": "src_key_padding_mask is not passed to the encoder",
            }
            for key, hint in diagnoses.items():
                if torch.allclose(out, case[key], atol=1e-5) or (
                        key == "no_padding_mask" and torch.allclose(out[real], expected[real], atol=1e-5)):
                    _fail(f"{label}: output differs from the reference.", "the reference output", f"the output when {hint}",
                          hint)
            _fail(f"{label}: output differs from the reference.", f"{_short(expected[0, 0, :4])} at [0, 0, :4]",
                  f"{_short(out[0, 0, :4])}", "embedding * sqrt(nhid) -> positional encoding -> encoder(mask, padding mask)")
        if not torch.allclose(out_plain, case["expected_no_masks"], atol=1e-5):
            _fail(f"{label}: forward(src) without masks differs from the reference.",
                  hint="both masks are optional (default None); pass them through unchanged")
    _ok(f"TransformerModel on {len(cases)} configuration(s): reference outputs with and without masks")


def check_heads(LanguageModelHead: type, ClassificationHead: type, split: str = "visible") -> None:
    cases = references.load("heads")[split]
    for case in cases:
        cfg = case["config"]
        hidden, padding = case["hidden"], case["padding"]
        with _forbid_models():
            lm = _call(f"LanguageModelHead(nhid={cfg['nhid']}, ntoken={cfg['ntoken']})", LanguageModelHead,
                       cfg["nhid"], cfg["ntoken"])
            _load_state(lm, case["lm_state"], "LanguageModelHead")
            cls = _call(f"ClassificationHead(nhid={cfg['nhid']}, nclasses={cfg['nclasses']})", ClassificationHead,
                        cfg["nhid"], cfg["nclasses"])
            _load_state(cls, case["cls_state"], "ClassificationHead")
            with torch.no_grad():
                lm_out = _call("LanguageModelHead.forward(hidden)", lm, hidden)
                cls_out = _call("ClassificationHead.forward(hidden, src_key_padding_mask)", cls, hidden, padding)
        if not isinstance(lm_out, torch.Tensor) or lm_out.shape != case["lm_expected"].shape:
            _fail("LanguageModelHead returns the wrong shape.", f"{tuple(case['lm_expected'].shape)} = (batch, seq, ntoken)",
                  tuple(lm_out.shape) if isinstance(lm_out, torch.Tensor) else type(lm_out).__name__,
                  "the LM head scores every vocabulary token at every position")
        if not torch.allclose(lm_out, case["lm_expected"], atol=1e-5):
            if torch.allclose(lm_out, case["lm_expected"].softmax(-1), atol=1e-5) or \
                    torch.allclose(lm_out, case["lm_expected"].log_softmax(-1), atol=1e-5):
                _fail("LanguageModelHead applies a softmax.", "raw logits", "probabilities",
                      "CrossEntropyLoss applies log-softmax itself: the head returns raw scores (logits)")
            _fail("LanguageModelHead output differs from the reference.", hint="one nn.Linear(nhid, ntoken) named decoder")
        expected = case["cls_expected"]
        if not isinstance(cls_out, torch.Tensor) or cls_out.shape != expected.shape:
            found = tuple(cls_out.shape) if isinstance(cls_out, torch.Tensor) else type(cls_out).__name__
            _fail("ClassificationHead returns the wrong shape.", f"{tuple(expected.shape)} = (batch, nclasses)", found,
                  "one prediction per sentence: pick one position per sequence before the linear layer")
        if not torch.allclose(cls_out, expected, atol=1e-5):
            if torch.allclose(cls_out, case["cls_last_position"], atol=1e-5):
                _fail("ClassificationHead reads the last position, hidden[:, -1], which is padding for shorter sentences.",
                      "the state at each sentence's last real token", "the state at position -1 for every sentence",
                      "with right padding, sentence b ends at position (~padding[b]).sum() - 1; use the padding mask "
                      "to find it (the original lab had this bug: short reviews were classified from padding)")
            if torch.allclose(cls_out, case["cls_first_position"], atol=1e-5):
                _fail("ClassificationHead reads the first position.", "the last real token", "position 0",
                      "with a causal mask, position 0 has only seen the first token; the last real token has seen them all")
            if torch.allclose(cls_out, case["cls_mean"], atol=1e-5):
                _fail("ClassificationHead averages over all positions, padding included.", "the last real token",
                      "the mean over the sequence", "read the state of each sentence's last non-padding token")
            _fail("ClassificationHead output differs from the reference.", _short(expected), _short(cls_out))
        with _forbid_models(), torch.no_grad():
            no_mask = _call("ClassificationHead.forward(hidden) without a padding mask", cls, hidden)
        if not torch.allclose(no_mask, case["cls_no_padding_mask"], atol=1e-5):
            _fail("ClassificationHead without a padding mask should read the last position.",
                  hint="src_key_padding_mask=None means no padding: every sequence ends at position -1")
    _ok(f"LM head and classification head on {len(cases)} configuration(s); the classifier reads each "
        "sentence's last real token, never padding")


def check_model(Model: type, split: str = "visible") -> None:
    m = _model_module()
    cases = references.load("model")[split]
    for case in cases:
        cfg = case["config"]
        base = m.TransformerModel(cfg["ntoken"], cfg["nhead"], cfg["nhid"], cfg["nlayers"], dropout=0.1)
        head = m.LanguageModelHead(cfg["nhid"], cfg["ntoken"])
        base.load_state_dict(case["base_state"])
        head.load_state_dict(case["head_state"])
        with forbid(m.Model, m.build_language_model, m.build_classifier):
            model = _call("Model(base, head)", Model, base, head)
            trainable = sum(p.numel() for p in model.parameters())
            expected_count = sum(p.numel() for p in base.parameters()) + sum(p.numel() for p in head.parameters())
            if trainable != expected_count:
                _fail("Model(base, head) does not register the base and the head as submodules.",
                      f"{expected_count} parameters", f"{trainable}",
                      "assign them as attributes (self.base = base; self.head = head) after super().__init__()")
            model.eval()
            with torch.no_grad():
                causal = _call("model(src, src_key_padding_mask)", model, case["src"], case["padding"])
                bidirectional = _call("model(src, src_key_padding_mask, causal=False)", model, case["src"],
                                      case["padding"], causal=False)
                plain = _call("model(src)", model, case["src"])
        if not isinstance(causal, torch.Tensor) or causal.shape != case["causal_expected"].shape:
            _fail("Model returns the wrong shape.", tuple(case["causal_expected"].shape),
                  tuple(causal.shape) if isinstance(causal, torch.Tensor) else type(causal).__name__)
        if not torch.allclose(causal, case["causal_expected"], atol=1e-5):
            if torch.allclose(causal, case["bidirectional_expected"], atol=1e-5):
                _fail("Model(src) is not causal.", "a square subsequent mask when causal=True", "no mask",
                      "build the mask with generate_square_subsequent_mask(src.size(1)) and pass it as src_mask")
            _fail("Model output differs from the reference.",
                  hint="hidden = base(src, src_mask, src_key_padding_mask); return head(hidden, src_key_padding_mask)")
        if not torch.allclose(bidirectional, case["bidirectional_expected"], atol=1e-5):
            _fail("Model(..., causal=False) still masks the future.", hint="causal=False means src_mask=None")
        if not torch.allclose(plain, case["causal_no_padding"], atol=1e-5):
            _fail("Model(src) without a padding mask differs from the reference.")
    _ok(f"Model joins base and head on {len(cases)} configuration(s); causal by default, bidirectional with causal=False")


_PARAMETER_MISTAKES = {
    "no_biases": "weights counted without biases: every nn.Linear has a bias (Q, K, V in-projection: 3*nhid, "
                 "out-projection: nhid, feed-forward: dim_feedforward + nhid, head: its number of outputs)",
    "no_layer_norms": "the two LayerNorms of each layer are missing (each has a weight and a bias of size nhid: "
                      "4*nhid per layer)",
    "one_layer_norm": "only one LayerNorm per layer; an encoder layer has two (after attention, after feed-forward)",
    "no_out_projection": "the attention output projection is missing (nhid*nhid + nhid per layer)",
    "attention_times_heads": "the attention is multiplied by the number of heads; the heads split nhid into nhead "
                             "slices of nhid/nhead, so the projections are nhid x nhid whatever nhead is",
    "no_head": "the head (nhid*outputs + outputs) is missing",
    "no_embedding": "the embedding (ntoken*nhid) is missing",
    "trainable_positional_encoding": "the positional encoding is counted; it is a fixed buffer with no parameters",
    "one_layer": "only one encoder layer counted; multiply by nlayers",
    "qkv_once": "one projection counted instead of three (Q, K and V each have nhid*nhid + nhid)",
}


def _diagnose_count(found, variants: dict, what: str) -> None:
    expected = variants["expected"]
    try:
        value = int(found)
    except (TypeError, ValueError):
        _fail(f"{what} is not a number.", expected, _short(found))
    if value == expected and float(found) == expected:
        return
    for key, hint in _PARAMETER_MISTAKES.items():
        if value == variants[key]:
            _fail(f"{what} is off by {value - expected:+,}.", f"{expected:,}", f"{value:,}", hint)
    _fail(f"{what} is off by {value - expected:+,}.", f"{expected:,}", f"{value:,}",
          "count embedding (ntoken*nhid), per layer: attention in-projection 3*(nhid*nhid + nhid), out-projection "
          "nhid*nhid + nhid, feed-forward nhid*ff + ff + ff*nhid + nhid, two LayerNorms 2*2*nhid; then the head "
          "nhid*outputs + outputs; the positional encoding has none")


def check_parameter_formula(count_parameters: Callable, split: str = "visible") -> None:
    from . import params
    cases = references.load("parameters")[split]
    for case in cases:
        cfg = case["config"]
        with forbid(params.count_parameters_formula, params.encoder_layer_parameters, params.count_trainable_parameters):
            found = _call(f"count_parameters(**{cfg})", count_parameters, **cfg)
        head = "the LM head" if cfg["nclasses"] is None else f"{cfg['nclasses']} classes"
        _diagnose_count(found, case, f"count_parameters for ntoken={cfg['ntoken']}, nhid={cfg['nhid']}, "
                                     f"nlayers={cfg['nlayers']}, nhead={cfg['nhead']}, "
                                     f"dim_feedforward={cfg['dim_feedforward']} with {head}")
    _ok(f"parameter formula right on {len(cases)} configuration(s)")


def check_stated_counts(n_params_lm, n_params_classifier) -> None:
    lm_case, cls_case = references.load("parameters")["visible"]
    _diagnose_count(n_params_lm, lm_case, "n_params_lm (LM head, ntoken=100, nhid=200, nlayers=4, nhead=2, ff=200)")
    _diagnose_count(n_params_classifier, cls_case, "n_params_classifier (2 classes, same base)")
    _ok(f"{lm_case['expected']:,} parameters with the LM head, {cls_case['expected']:,} with 2 classes")


# ----------------------------------------------------------------- notebook 03

def check_lm_targets(make_lm_targets: Callable, split: str = "visible") -> None:
    from . import datasets
    case = references.load("lm_targets")[split]
    ids = case["ids"]
    with forbid(datasets.make_lm_targets):
        result = _call("make_lm_targets(ids)", make_lm_targets, ids.clone())
    if not isinstance(result, tuple) or len(result) != 2:
        _fail("make_lm_targets must return a pair (inputs, targets).", "(inputs, targets)", _short(result))
    inputs, targets = result
    expected_shape = (ids.size(0), ids.size(1) - 1)
    for name, tensor in (("inputs", inputs), ("targets", targets)):
        if not isinstance(tensor, torch.Tensor) or tuple(tensor.shape) != expected_shape:
            _fail(f"{name} has the wrong shape for ids of shape {tuple(ids.shape)}.", expected_shape,
                  tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__,
                  "both drop one token: the inputs lose the last, the targets the first")
    if torch.equal(inputs, targets):
        _fail("targets equal inputs: the model would learn to copy its input.", "targets = the NEXT token",
              hint="shift by one: inputs = ids[:, :-1], targets = ids[:, 1:]")
    if torch.equal(inputs, case["targets"]) and torch.equal(targets, case["inputs"]):
        _fail("inputs and targets are swapped: the model would predict the previous token.",
              "inputs = ids[:, :-1], targets = ids[:, 1:]", "inputs = ids[:, 1:], targets = ids[:, :-1]")
    if not (torch.equal(inputs, case["inputs"]) and torch.equal(targets, case["targets"])):
        _fail("inputs/targets differ from the reference.", f"inputs {_short(case['inputs'])}, targets {_short(case['targets'])}",
              f"inputs {_short(inputs)}, targets {_short(targets)}", "the target at position t is the input at t + 1")
    _ok(f"LM targets for ids of shape {tuple(ids.shape)}: the target at t is the token at t + 1")


def check_lm_loss(lm_loss: Callable, split: str = "visible") -> None:
    case = references.load("lm_loss")[split]
    logits = case["logits"].clone().requires_grad_(True)
    with forbid(*_loss_forbidden()):
        loss = _call("lm_loss(logits, targets)", lm_loss, logits, case["targets"].clone())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        _fail("lm_loss must return a scalar tensor.", "a 0-dim tensor (the mean over real tokens)",
              _short(loss), "return the loss tensor itself, not loss.item(): backward() needs it")
    if not loss.requires_grad:
        _fail("the loss is detached from the logits: no gradient can flow.",
              hint="do not wrap the loss in torch.no_grad() or call .detach()/.item()")
    expected = case["expected"]
    if not torch.allclose(loss, expected, atol=1e-5):
        mistakes = {
            "softmax_first": "softmax was applied before CrossEntropyLoss. It expects raw logits and applies "
                             "log-softmax itself; a softmax first squashes the loss into a narrow range and the gradients vanish",
            "padding_counted": "padding positions are counted. Use CrossEntropyLoss(ignore_index=PAD_ID)",
            "sum": "the loss is summed; use the mean over real (non-padding) tokens (the default reduction)",
        }
        for key, hint in mistakes.items():
            if torch.allclose(loss, case[key], atol=1e-5):
                _fail(f"lm_loss = {loss.item():.4f}.", f"{expected.item():.4f}", f"{loss.item():.4f}", hint)
        _fail(f"lm_loss = {loss.item():.4f}.", f"{expected.item():.4f}", f"{loss.item():.4f}",
              "flatten logits to (batch*seq, vocab) and targets to (batch*seq,), then "
              "nn.CrossEntropyLoss(ignore_index=PAD_ID) on the raw logits")
    _ok(f"LM loss {loss.item():.4f}: cross-entropy on raw logits, padding ignored")


def _loss_forbidden():
    from . import training
    return (training.batch_loss,)


def check_greedy(greedy_generate_ids: Callable, split: str = "visible") -> None:
    from . import generation
    m = _model_module()
    case = references.load("greedy")[split]
    cfg = case["config"]
    model = m.build_language_model(cfg["ntoken"], cfg["nhid"], cfg["nlayers"], cfg["nhead"], dropout=0.5)
    model.load_state_dict(case["state_dict"])
    for item in case["cases"]:
        prompt = list(item["prompt"])
        model.train()  # the answer must switch dropout off itself
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            found = _call(f"greedy_generate_ids(model, {prompt}, max_new_tokens={item['max_new_tokens']}, "
                          f"eos_id={item['eos_id']})", greedy_generate_ids, model, list(prompt),
                          item["max_new_tokens"], item["eos_id"])
        try:
            found = [int(t) for t in (found.tolist() if isinstance(found, torch.Tensor) else found)]
        except (TypeError, ValueError):
            _fail("greedy_generate_ids must return a list of token ids.", "a list of ints", _short(found))
        expected = list(item["expected"])
        if found == expected:
            continue
        what = f"greedy generation from prompt {prompt} (eos_id={item['eos_id']})"
        if found[: len(prompt)] == prompt and found[len(prompt):] == expected:
            _fail(f"{what} returns the prompt too.", expected, found, "return only the NEW tokens")
        if found[: len(expected)] == expected and len(found) > len(expected):
            if found[len(expected)] == item["eos_id"]:
                _fail(f"{what} includes the end token.", expected, found, "stop when eos is predicted, without appending it")
            _fail(f"{what} does not stop at the end token.", expected, found,
                  "stop as soon as the predicted token is eos_id (and do not append it)")
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            again = _call("greedy_generate_ids (second call)", greedy_generate_ids, model.train(), list(prompt),
                          item["max_new_tokens"], item["eos_id"])
        if [int(t) for t in again] != found:
            _fail(f"{what} is not deterministic.", expected, found,
                  "call model.eval() first: in training mode dropout changes the logits at every call")
        _fail(f"{what} differs from the reference.", expected, found,
              "at each step run the model on the whole sequence so far, take logits[0, -1].argmax() (the last "
              "position predicts the next token), append it and repeat")
    _ok(f"greedy generation matches the reference on {len(case['cases'])} prompts, stopping at eos")


# ----------------------------------------------------------------- notebook 04

def _classifier(case: dict):
    m = _model_module()
    cfg = case["config"]
    model = m.build_classifier(cfg["ntoken"], cfg["nclasses"], cfg["nhid"], cfg["nlayers"], cfg["nhead"], dropout=0.5)
    model.load_state_dict(case["state_dict"])
    return model


def check_accuracy(evaluate_accuracy: Callable, split: str = "visible") -> None:
    from . import training
    from .datasets import Batch
    case = references.load("accuracy")[split]
    model = _classifier(case).train()
    batches = [Batch(b["inputs"], b["padding_mask"], b["targets"]) for b in case["batches"]]
    total = sum(len(b.targets) for b in batches)
    with forbid(training.evaluate_accuracy, training.predict):
        found = _call("evaluate_accuracy(model, batches)", evaluate_accuracy, model, batches)
    try:
        value = float(found)
    except (TypeError, ValueError):
        _fail("evaluate_accuracy must return a number.", "a float in [0, 1]", _short(found))
    expected = case["expected"]
    if math.isclose(value, expected, abs_tol=1e-6):
        _ok(f"accuracy {value:.4f} over {total} sentences in {len(batches)} batches of different lengths")
        return
    if math.isclose(value, expected * total, abs_tol=1e-4):
        _fail("evaluate_accuracy returns a count.", f"{expected:.4f}", value, "divide by the number of sentences")
    if math.isclose(value, expected * 100, abs_tol=1e-4):
        _fail("evaluate_accuracy returns a percentage.", f"{expected:.4f}", value, "return a fraction in [0, 1]")
    if math.isclose(value, case["no_padding_mask"], abs_tol=1e-6):
        _fail("evaluate_accuracy ignores the padding mask.", f"{expected:.4f}", f"{value:.4f}",
              "call model(batch.inputs, batch.padding_mask): without it the classifier reads padding "
              "and attends to it")
    with forbid(training.evaluate_accuracy, training.predict):
        again = float(_call("evaluate_accuracy (second call)", evaluate_accuracy, model.train(), batches))
    if not math.isclose(again, value, abs_tol=1e-9):
        _fail("evaluate_accuracy gives a different answer each call.", f"{expected:.4f}", f"{value:.4f} then {again:.4f}",
              "call model.eval() (dropout off) and use torch.no_grad()")
    _fail("evaluate_accuracy differs from the reference.", f"{expected:.4f}", f"{value:.4f}",
          "accuracy = mean over ALL sentences of (argmax of the logits == label); weight batches by their size")


def check_transfer(transfer: Callable, split: str = "visible") -> None:
    m = _model_module()
    case = references.load("transfer")[split]
    cfg, nclasses = case["config"], case["nclasses"]
    lm = m.build_language_model(cfg["ntoken"], cfg["nhid"], cfg["nlayers"], cfg["nhead"], dropout=0.1)
    lm.load_state_dict(case["state_dict"])
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    with forbid(m.build_classifier):
        clf = _call(f"transfer(pretrained_lm, nclasses={nclasses})", transfer, lm, nclasses)
    if not isinstance(clf, nn.Module):
        _fail("transfer must return a model (an nn.Module).", "Model(base, ClassificationHead(...))", type(clf).__name__)
    changed = [k for k, v in lm.state_dict().items() if k not in before or not torch.equal(v, before[k])]
    if changed or not isinstance(lm.head, m.LanguageModelHead):
        _fail("transfer changed the pretrained language model.", "the pretrained LM left intact",
              f"changes in {changed[:3] or ['lm.head']}",
              "build a new Model around a copy of lm.base and a new head; do not assign to lm.head")
    clf.eval()
    lm.eval()
    with torch.no_grad():
        out = _call("classifier(src, src_key_padding_mask)", clf, case["src"], case["padding"])
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != (case["src"].size(0), nclasses):
        _fail("the classifier returns the wrong shape.", (case["src"].size(0), nclasses),
              tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__,
              f"the new head is ClassificationHead(nhid, nclasses={nclasses}), one prediction per sentence")
    base = getattr(clf, "base", None)
    if base is None:
        _fail("the classifier has no .base.", hint="return Model(base, head)")
    base_state = base.state_dict()
    lm_base = lm.base.state_dict()
    if base_state.keys() != lm_base.keys() or not all(torch.equal(base_state[k], lm_base[k]) for k in lm_base):
        _fail("the classifier's base does not hold the pretrained weights.", "the pretrained base's weights",
              "other weights", "the point of transfer is to start from the pretrained base: copy lm.base, "
              "do not build a new TransformerModel")
    shared = {p.data_ptr() for p in lm.parameters()} & {p.data_ptr() for p in clf.parameters()}
    if shared:
        _fail("the classifier shares its weights with the pretrained LM.", "an independent copy of the base",
              f"{len(shared)} shared tensors", "fine-tuning would change the pretrained LM too (and the next "
              "experiment would start from a fine-tuned base); use copy.deepcopy(lm.base)")
    head = getattr(clf, "head", None)
    if head is None or isinstance(head, m.LanguageModelHead):
        _fail("the classifier keeps the language-model head.", "a fresh ClassificationHead",
              type(head).__name__, "the LM head predicts the next token among ntoken; classification needs a new head")
    with torch.no_grad():
        hidden = lm.base(case["src"], m.generate_square_subsequent_mask(case["src"].size(1)), case["padding"])
        reference_out = head(hidden, case["padding"])
    if not torch.allclose(out, reference_out, atol=1e-5):
        _fail("the classifier's output is not head(base(src)) with the causal and padding masks.",
              hint="return Model(base, head): its forward applies both masks")
    trainable = sum(p.numel() for p in clf.parameters() if p.requires_grad)
    if trainable != sum(p.numel() for p in clf.parameters()):
        _fail("some parameters are frozen.", "every parameter trainable (we fine-tune the whole model)",
              f"{trainable} trainable")
    _ok(f"transfer: pretrained base copied ({sum(p.numel() for p in base.parameters()):,} weights), fresh "
        f"{nclasses}-class head, pretrained LM untouched")


# ----------------------------------------------------------------- notebook 05

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
    from . import mlm
    generator = torch.Generator().manual_seed(seed)
    original = ids.clone()
    with forbid(mlm.mask_tokens):
        result = _call(f"mask_tokens(ids, vocab_size={vocab_size}, generator, mlm_probability={probability})",
                       mask_tokens, ids, vocab_size, generator, probability)
    if not isinstance(result, tuple) or len(result) != 2:
        _fail("mask_tokens must return a pair (inputs, labels).", "(inputs, labels)", _short(result))
    inputs, labels = result
    if not torch.equal(ids, original):
        _fail("mask_tokens modified ids in place.", "ids unchanged", "ids changed",
              "start from inputs = ids.clone(); the original ids are needed for the labels")
    for name, tensor in (("inputs", inputs), ("labels", labels)):
        if not isinstance(tensor, torch.Tensor) or tensor.shape != ids.shape:
            _fail(f"{name} has the wrong shape.", tuple(ids.shape),
                  tuple(tensor.shape) if isinstance(tensor, torch.Tensor) else type(tensor).__name__)
        if tensor.dtype != torch.long:
            _fail(f"{name} must hold token ids (torch.long).", "torch.long", tensor.dtype)
    return inputs, labels


def check_masking(mask_tokens: Callable, part: str = "structure", split: str = "visible") -> None:
    """``part``: "structure" (labels, special tokens, reproducibility) or "rates" (15 % / 80-10-10)."""
    case = MASKING_CASES[split]
    vocab_size, probability = case["vocab_size"], case["mlm_probability"]
    ids = _masking_batch(vocab_size, case["shape"], case["seeds"][0])
    inputs, labels = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][0], probability)
    special = torch.isin(ids, torch.tensor(SPECIAL))
    chosen = labels != PAD_ID
    if part == "structure":
        if bool((chosen & special).any()):
            _fail("special tokens were chosen for prediction.", "labels = PAD_ID at PAD, UNK, BOS, EOS and MASK",
                  f"{int((chosen & special).sum())} special positions with a label",
                  "only real tokens are chosen: set their probability to 0 before sampling")
        if bool((inputs[special] != ids[special]).any()):
            _fail("special tokens were changed in the inputs.", "PAD, BOS, EOS unchanged",
                  f"{int((inputs[special] != ids[special]).sum())} changed", "padding and sentence markers are never masked")
        if bool(chosen.all()) or bool((labels == ids).all()):
            _fail("every position has a label.", "labels only at the chosen ~15 % (PAD_ID elsewhere, ignored by the loss)",
                  "labels everywhere", "the model is only scored on the tokens it could not see")
        if not torch.equal(labels[chosen], ids[chosen]):
            _fail("labels at the chosen positions are not the original tokens.", "labels[chosen] == ids[chosen]",
                  _short(labels[chosen][:10]), "the label is what the model must recover: the token before masking")
        if bool((inputs[~chosen] != ids[~chosen]).any()):
            changed = int((inputs[~chosen] != ids[~chosen]).sum())
            _fail("tokens that were not chosen were changed.", "inputs == ids wherever labels == PAD_ID",
                  f"{changed} unlabeled positions changed",
                  "the 80/10/10 split applies only to the chosen tokens; draw it, then AND it with the chosen mask")
        if not bool((inputs >= 0).all() and (inputs < vocab_size).all()):
            _fail("inputs hold ids outside the vocabulary.", f"0 <= id < {vocab_size}",
                  f"min {int(inputs.min())}, max {int(inputs.max())}")
        inputs_again, labels_again = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][0], probability)
        if not (torch.equal(inputs_again, inputs) and torch.equal(labels_again, labels)):
            _fail("the same generator seed gives different masks.", "reproducible masking",
                  hint="pass generator=generator to every torch.rand / torch.bernoulli / torch.randint call")
        other_inputs, other_labels = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][1], probability)
        if torch.equal(other_labels, labels):
            _fail("another seed gives the same choice of tokens.", "a fresh random choice per call",
                  hint="draw the choice with the generator, do not hard-code positions")
        _ok(f"masking structure: labels only at chosen real tokens (original ids), specials untouched, "
            "reproducible with the generator")
        return
    regular = ~special
    rate = float(chosen.sum()) / float(regular.sum())
    if abs(rate - probability) > 0.02:
        base_rate = float(chosen.sum()) / float(ids.numel())
        hint = ("the rate is computed over all positions or padding counted" if abs(base_rate - probability) < 0.02
                else "choose each real token with probability mlm_probability (torch.bernoulli) ")
        _fail(f"{rate:.1%} of the real tokens were chosen.", f"{probability:.0%} (+-2 %)", f"{rate:.1%}", hint)
    n = int(chosen.sum())
    masked = float((inputs[chosen] == MASK_ID).sum()) / n
    random_ = float(((inputs[chosen] != MASK_ID) & (inputs[chosen] != ids[chosen])).sum()) / n
    kept = float((inputs[chosen] == ids[chosen]).sum()) / n
    found = f"{masked:.0%} mask, {random_:.0%} random, {kept:.0%} unchanged"
    if abs(masked - 0.8) > 0.06 or abs(random_ - 0.1) > 0.05 or abs(kept - 0.1) > 0.05:
        hint = "of the CHOSEN tokens: 80 % -> MASK_ID, 10 % -> a random token, 10 % left as they are"
        if masked > 0.95:
            hint = "every chosen token became MASK_ID; BERT replaces only 80 % (the model must also handle real tokens)"
        elif abs(masked - 0.8) < 0.06 and random_ < 0.07:
            hint = "the random 10 % is missing: half of the chosen tokens that are not masked get a random id"
        elif abs(random_ - 0.2) < 0.05:
            hint = "the remaining 20 % all became random; half of them must stay unchanged"
        _fail("the 80/10/10 split of the chosen tokens is off.", "80% mask, 10% random, 10% unchanged", found, hint)
    random_positions = chosen & (inputs != MASK_ID) & (inputs != ids)
    if bool(random_positions.any()) and len(inputs[random_positions].unique()) < 10:
        _fail("the random replacements use few distinct tokens.", "ids drawn uniformly from the vocabulary",
              f"{len(inputs[random_positions].unique())} distinct ids", "use torch.randint(low, vocab_size, ...)")
    _ok(f"masking rates: {rate:.1%} of real tokens chosen; of those {found}")


def check_mlm_loss(mlm_loss: Callable, split: str = "visible") -> None:
    from . import mlm
    m = _model_module()
    case = references.load("mlm_loss")[split]
    cfg = case["config"]
    model = m.build_language_model(cfg["ntoken"], cfg["nhid"], cfg["nlayers"], cfg["nhead"], dropout=0.1)
    model.load_state_dict(case["state_dict"])
    model.eval()
    with forbid(mlm.mlm_loss):
        loss = _call("mlm_loss(model, inputs, labels, padding_mask)", mlm_loss, model, case["inputs"].clone(),
                     case["labels"].clone(), case["padding"].clone())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        _fail("mlm_loss must return a scalar tensor.", "a 0-dim tensor", _short(loss))
    if not loss.requires_grad:
        _fail("the MLM loss carries no gradient.", hint="do not use torch.no_grad() or .item() inside mlm_loss")
    expected = case["expected"]
    if torch.allclose(loss, expected, atol=1e-5):
        _ok(f"MLM loss {loss.item():.4f}: bidirectional encoder, loss only on the chosen tokens")
        return
    if torch.allclose(loss, case["causal"], atol=1e-5):
        _fail("the MLM loss uses the causal mask.", f"{expected.item():.4f}", f"{loss.item():.4f}",
              "a masked LM reads both sides of the blank: call the model with causal=False (no square mask)")
    if torch.allclose(loss, case["all_positions"], atol=1e-5):
        _fail("the loss is computed at every position.", f"{expected.item():.4f}", f"{loss.item():.4f}",
              "only the chosen positions have labels; the others hold PAD_ID and must be ignored")
    _fail("the MLM loss differs from the reference.", f"{expected.item():.4f}", f"{loss.item():.4f}",
          "logits = model(inputs, padding_mask, causal=False); CrossEntropyLoss(ignore_index=PAD_ID) on the "
          "flattened logits and labels")
