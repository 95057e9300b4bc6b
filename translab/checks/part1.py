"""Checks of part 1: the causal mask, the attention demo and the positional encoding."""
from __future__ import annotations

import math
import warnings
from typing import Callable

import torch
from torch import nn

from .. import references
from .harness import _call, _checked, _fail, _kind, _model_module, _ok, _require_tensor, _same, _short, _twins, forbid


def _forbid_mask():
    from torch.nn.modules import transformer
    return forbid(_model_module().generate_square_subsequent_mask, nn.Transformer.generate_square_subsequent_mask,
                  transformer._generate_square_subsequent_mask)


def _mask_in_encoder(mask: torch.Tensor) -> tuple[bool, bool]:
    """(NaN in eval() under no_grad, NaN in train()): a small nn.TransformerEncoder run with ``mask``, so that the
    message states what this torch version really does with it."""
    size = mask.size(0)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        x = torch.randn(2, size, 8)
        encoder.eval()
        with torch.no_grad():
            in_eval = bool(torch.isnan(encoder(x, mask=mask)).any())
        encoder.train()
        with torch.no_grad():
            in_train = bool(torch.isnan(encoder(x, mask=mask)).any())
    return in_eval, in_train


def _ones_mask_hint(mask: torch.Tensor) -> str:
    adds = ("the mask then *adds* 1 to the allowed scores instead of blocking the future: nn.TransformerEncoder adds "
            "a float mask to the attention scores before the softmax, so allowed positions need 0 and the future "
            "-inf (exp(-inf) = 0); a 'keep' mask of 1s is the convention of other libraries, not of this one")
    try:
        in_eval, in_train = _mask_in_encoder(mask)
    except Exception:  # noqa: BLE001 - the demonstration is a bonus; the reason below holds anyway
        in_eval = in_train = False
    version = torch.__version__.split("+")[0]
    if in_eval and not in_train:
        return (f"in eval() (under torch.no_grad(), as when a model is evaluated) nn.TransformerEncoder's fast path "
                f"returns NaN with this mask on torch {version}; in train() it happens to run, but " + adds)
    if in_eval:
        return f"nn.TransformerEncoder returns NaN with this mask on torch {version}; and " + adds
    return adds[0].upper() + adds[1:]


@_checked
def check_mask(generate_square_subsequent_mask: Callable[[int], torch.Tensor], split: str = "visible") -> None:
    visible = split == "visible"
    expected_all = references.load("mask")[split]
    for size, expected in expected_all.items():
        size = int(size)
        name = f"the mask for sz={size}" if visible else "the mask for a hidden size"
        call = f"generate_square_subsequent_mask({size})" if visible else "generate_square_subsequent_mask on a hidden size"
        with _forbid_mask():
            mask = _call(call, generate_square_subsequent_mask, size)
        _require_tensor(mask, call)
        if tuple(mask.shape) != (size, size):
            _fail(f"{name} has the wrong shape.", (size, size), tuple(mask.shape),
                  "the mask is square: one row per query position, one column per key position", key="wrong_shape")
        if mask.dtype == torch.bool:
            _fail(f"{name} is boolean.", "a float mask of 0 and -inf", mask.dtype,
                  "this lab uses an additive mask: it is added to the attention scores before the softmax",
                  key="mask.boolean", keep=True)
        if not mask.is_floating_point():
            _fail(f"{name} holds integers.", "float32 with 0 and -inf", mask.dtype,
                  "integers cannot hold -inf; build it with torch.full(..., float('-inf')) or masked_fill",
                  key="mask.integer", keep=True)
        mask = mask.detach().to(torch.float32)
        lower = torch.tril(torch.ones(size, size, dtype=torch.bool))
        values = set(mask.unique().tolist())
        if values <= {0.0, 1.0} and bool((mask[lower] == 1).all()):
            _fail(f"{name} has 1 on and below the diagonal" + (" and 0 above" if size > 1 else "") +
                  ": a mask of 1s.", "0 on and below the diagonal, -inf above", _short(mask),
                  _ones_mask_hint(mask), key="mask.ones")
        if values <= {0.0, 1.0} and size > 1:
            _fail(f"{name} holds only 0 and 1.", "0 on and below the diagonal, -inf above", _short(mask),
                  "the mask is added to the scores before the softmax: blocked positions need -inf, not 1",
                  key="mask.zero_one")
        if bool(torch.isinf(mask.diagonal()).any()):
            _fail(f"the diagonal of {name} is -inf.", "0 on the diagonal", _short(mask),
                  "each position must attend to itself (else the first row is all -inf and the softmax gives NaN); "
                  "start the blocked part one above the diagonal: torch.triu(..., diagonal=1)",
                  key="mask.diagonal_blocked")
        if size > 1 and bool(torch.isinf(mask[~lower.T]).all()) and not bool(torch.isinf(mask[~lower]).any()):
            _fail(f"{name} blocks the past instead of the future.", "-inf ABOVE the diagonal", _short(mask),
                  "row i is the query, column j the key: position i may look at j <= i; use triu, not tril",
                  key="mask.blocks_past")
        if bool((mask[lower] != 0).any()):
            _fail(f"{name} is not 0 on and below the diagonal.", "0 where j <= i", _short(mask),
                  "allowed positions must leave the scores unchanged: add 0", key="mask.nonzero_allowed")
        above = mask[~lower]
        if above.numel() and not bool(torch.isneginf(above).all()):
            _fail(f"{name} is not -inf above the diagonal.", "-inf where j > i", _short(mask),
                  ("the mask is specified as -inf above the diagonal, as PyTorch's own causal mask is; a large negative "
                   "number such as -1e9 also gives weight 0 after a float32 softmax, but it is another mask (a score "
                   "of that size would leak through it): use float('-inf')"),
                  key="mask.finite_negative")
        if not torch.equal(mask, expected):
            _fail(f"{name} differs from the reference.", _short(expected), _short(mask))
        weights = torch.softmax(torch.randn(size, size) + mask, dim=-1)
        if not bool((weights[~lower] == 0).all()) or not torch.allclose(weights.sum(-1), torch.ones(size)):
            _fail("softmax(scores + mask) does not give exactly 0 above the diagonal.")
    sizes = "for sz = " + ", ".join(str(s) for s in expected_all) if visible else f"on {len(expected_all)} hidden sizes"
    _ok(f"causal mask {sizes}: 0 on and below the diagonal, -inf above, future weights exactly 0 after softmax")


@_checked
def check_attention_demo(weights: torch.Tensor) -> None:
    """The notebook's demo: attention weights computed with the mask are 0 above the diagonal."""
    weights = _require_tensor(weights, "the demo's attention weights", verb="be")
    size = weights.size(-1)
    upper = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    if not bool((weights[..., upper] == 0).all()):
        _fail("attention weights above the diagonal are not exactly 0.", "0", _short(weights))
    _ok("every weight above the diagonal is exactly 0 and every row sums to 1")


def _pe_table(max_len: int, d_model: int, base: float = 10000.0, exponent_halved: bool = False,
              swapped: bool = False, halves: bool = False, first_position: int = 0) -> torch.Tensor:
    position = torch.arange(first_position, first_position + max_len, dtype=torch.float32).unsqueeze(1)
    two_i = torch.arange(0, d_model, 2).float()
    div = torch.exp((two_i / 2 if exponent_halved else two_i) * (-math.log(base) / d_model))
    even, odd = (torch.cos, torch.sin) if swapped else (torch.sin, torch.cos)
    table = torch.zeros(max_len, d_model)
    if halves:
        table[:, : len(div)] = even(position * div)
        table[:, len(div):] = odd(position * div[: d_model - len(div)])
    else:
        table[:, 0::2] = even(position * div)
        table[:, 1::2] = odd(position * div[: d_model // 2])
    return table


def _pe_variants(table: torch.Tensor, d_model: int, max_len: int) -> dict:
    """{key: (what a student reads, table)} of the usual positional-encoding mistakes.  Numerically identical
    ones (base 100 with 2i/d_model is 10000 with i/d_model) are all listed: the check states them together."""
    return {
        "pe.sin_cos_swapped": ("sin and cos swapped (cos on even dimensions)", _pe_table(max_len, d_model, swapped=True)),
        "pe.base_100": ("base 100 instead of 10000", _pe_table(max_len, d_model, base=100.0)),
        "pe.exponent_i": ("an exponent of i/d_model instead of 2i/d_model",
                          _pe_table(max_len, d_model, exponent_halved=True)),
        "pe.halves": ("sin in the first half of the dimensions and cos in the second, instead of interleaved (sin on "
                      "even dimensions, cos on odd ones)", _pe_table(max_len, d_model, halves=True)),
        "pe.positions_from_1": ("positions counted from 1 instead of 0 (the first row must be sin(0) = 0, cos(0) = 1)",
                                _pe_table(max_len, d_model, first_position=1)),
    }


@_checked
def check_positional_encoding(PositionalEncoding: type, split: str = "visible") -> None:
    model_module = _model_module()
    visible = split == "visible"
    cases = references.load("positional_encoding")[split]
    tol = references.tolerance("positional_encoding")
    for case in cases:
        d_model, max_len, x, expected = case["d_model"], case["max_len"], case["x"], case["expected"]
        label = (f"PositionalEncoding(d_model={d_model}, dropout=0.0, max_len={max_len})" if visible
                 else "PositionalEncoding on a hidden d_model and max_len")
        with forbid(model_module.PositionalEncoding, model_module.sinusoidal_table):
            module = _call(label, PositionalEncoding, d_model, dropout=0.0, max_len=max_len)
            if not isinstance(module, nn.Module):
                _fail(f"{label} is not an nn.Module.", "an instance of a subclass of nn.Module", _kind(module),
                      "keep `class PositionalEncoding(nn.Module)` and call super().__init__() first",
                      key="wrong_type", keep=True)
            trainable = [name for name, p in module.named_parameters()]
            if trainable:
                _fail("the positional encoding has trainable parameters.", "no parameters (a fixed buffer)",
                      f"parameters {trainable}",
                      "the sinusoidal table is fixed, not learned: store it with self.register_buffer('pe', ...), "
                      "not nn.Parameter (a buffer moves with .to(device) and is never updated by the optimizer)",
                      key="pe.trainable", keep=True)
            module.eval()
            out = _call(f"{label}.forward(x)", module, x.clone())
        _require_tensor(out, f"{label}.forward(x)")
        if out.shape != x.shape:
            _fail(f"{label} returns the wrong shape for a (batch, seq, d_model) input.", tuple(x.shape),
                  tuple(out.shape), "inputs are batch-first (batch, seq, d_model): add pe[:seq_len] where "
                  "seq_len = x.size(1), broadcast over the batch", key="wrong_shape")
        if out.dtype != x.dtype:
            buffers = [f"{name} ({str(b.dtype).replace('torch.', '')})" for name, b in module.named_buffers()
                       if b.is_floating_point() and b.dtype != x.dtype]
            values = "the values are right" if _same(out, expected, tol) else "the values differ too"
            _fail(f"{label} returns {str(out.dtype).replace('torch.', '')} for a float32 input"
                  + (f": its buffer {', '.join(buffers)} is not float32." if buffers else "."),
                  "float32, like the input", f"{str(out.dtype).replace('torch.', '')} ({values})",
                  "adding a float64 table turns every output float64, and the encoder's float32 weights then refuse "
                  "it (\"expected m1 and m2 to have the same dtype, but got: double != float\"); build the table in "
                  "float32 (torch.arange(..., dtype=torch.float32), torch.zeros(max_len, d_model)), not from numpy or "
                  "with dtype=torch.float64, or .float() it before register_buffer", key="pe.dtype", keep=True)
        if _same(out, expected, tol):
            continue
        added = (out.detach() - x).to(torch.float32)
        table = case["table"][: x.size(1)]
        if _same(added[0], added[-1], tol):
            variants = {key: (text, variant[: x.size(1)]) for key, (text, variant) in
                        _pe_variants(case["table"], d_model, max_len).items()}
            matches = [key for key, (text, variant) in variants.items()
                       if not _same(variant, table, tol) and _same(added[0], variant, tol)]
            if matches:
                name = "the positional encoding" + (f" (d_model={d_model})" if visible else "")
                why = "100^(2i/d_model) = 10000^(i/d_model)" if {"pe.base_100", "pe.exponent_i"} <= set(matches) else ""
                _fail(f"{name} uses {_twins([variants[k][0] for k in matches], why)}.",
                      "pe[pos, 2i] = sin(pos / 10000^(2i/d_model)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))",
                      _short(added[0]), "dimensions 2i and 2i+1 share the angle pos / 10000^(2i/d_model): div_term = "
                      "exp(arange(0, d_model, 2) * (-ln(10000) / d_model)), sin on the even dimensions, cos on the "
                      "odd ones, positions from 0", key="|".join(matches))
            if _same(added[0], table.flip(0), tol) or (added.size(1) == added.size(2) and _same(added[0].T, table, tol)):
                _fail("the positional encoding rows are in the wrong order or transposed.", _short(table),
                      _short(added[0]), "row pos of the table is the encoding of position pos: pe[:seq_len], "
                      "added to x of shape (batch, seq, d_model)", key="pe.rows_order")
        if _same(out, x * case["table"][: x.size(1)], tol):
            _fail("the positional encoding multiplies the input.", "x + pe[:seq_len]", "x * pe[:seq_len]",
                  "the encoding is ADDED to the token embeddings", key="pe.multiplied", keep=True)
        _fail(f"{label}: the output differs from x + pe[:seq_len].",
              f"x + table, e.g. table[1, :4] = {table[1, :4].tolist() if table.size(0) > 1 else table[0, :4].tolist()}",
              f"out - x at position 1: {added[0, 1 if added.size(1) > 1 else 0, :4].tolist()}",
              "pe[pos, 2i] = sin(pos * exp(-2i * ln(10000) / d_model)), odd dimensions the cos of the same angle; "
              "check the dropout is applied after the addition and that eval() turns it off")
    sizes = ", ".join(f"d_model={c['d_model']}" for c in cases) if visible else f"{len(cases)} hidden sizes"
    _ok(f"positional encoding ({sizes}): fixed sinusoids added to batch-first inputs, no trainable parameters")
