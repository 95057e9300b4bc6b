"""Checks of part 1's positional encoding: the sinusoidal table, its usual wrong versions (base, exponent, order,
axis, scaling) named by measurement, and what a wrong output is fitted to when no stored version matches it."""
from __future__ import annotations

import math

import torch
from torch import nn

from .. import references
from ..relations import positional_fit
from .harness import (call_student, checked, fail, forbid, held_parameters, kind_of, lab_model_module,
                      matches_reference, report_ok, require_tensor, shorten, twin_mistakes)


def pe_table(max_len: int, d_model: int, base: float = 10000.0, exponent_halved: bool = False,
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
        "pe.sin_cos_swapped": ("sin and cos swapped (cos on even dimensions)", pe_table(max_len, d_model, swapped=True)),
        "pe.base_100": ("base 100 instead of 10000", pe_table(max_len, d_model, base=100.0)),
        "pe.exponent_i": ("an exponent of i/d_model instead of 2i/d_model",
                          pe_table(max_len, d_model, exponent_halved=True)),
        "pe.halves": ("sin in the first half of the dimensions and cos in the second, instead of interleaved (sin on "
                      "even dimensions, cos on odd ones)", pe_table(max_len, d_model, halves=True)),
        "pe.positions_from_1": ("positions counted from 1 instead of 0 (the first row must be sin(0) = 0, cos(0) = 1)",
                                pe_table(max_len, d_model, first_position=1)),
    }


def _pe_output(PositionalEncoding: type, label: str, d_model: int, max_len: int, x: torch.Tensor,
               expected: torch.Tensor, tol) -> torch.Tensor:
    """The answer's module built and run on ``x`` (translab's own switched off), or the failure of its type, its
    parameters, its output's shape or dtype."""
    model_module = lab_model_module()
    with forbid(model_module.PositionalEncoding, model_module.sinusoidal_table):
        module = call_student(label, PositionalEncoding, d_model, dropout=0.0, max_len=max_len)
        if not isinstance(module, nn.Module):
            fail(f"{label} is not an nn.Module.", "an instance of a subclass of nn.Module", kind_of(module),
                 "keep `class PositionalEncoding(nn.Module)` and call super().__init__() first",
                 key="wrong_type", keep=True)
        trainable = [tuple(p.shape) for p in held_parameters(module)]
        if trainable:
            fail("the positional encoding has trainable parameters.", "no parameters (a fixed buffer)",
                 f"parameters of shape {trainable}",
                 "the sinusoidal table is fixed, not learned: store it with self.register_buffer('pe', ...), "
                 "not nn.Parameter (a buffer moves with .to(device) and is never updated by the optimizer)",
                 key="pe.trainable", keep=True)
        module.eval()
        out = call_student(f"{label}.forward(x)", module, x.clone())
    require_tensor(out, f"{label}.forward(x)")
    if out.shape != x.shape:
        fail(f"{label} returns the wrong shape for a (batch, seq, d_model) input.", tuple(x.shape),
             tuple(out.shape), "inputs are batch-first (batch, seq, d_model): add pe[:seq_len] where "
             "seq_len = x.size(1), broadcast over the batch", key="wrong_shape")
    if out.dtype != x.dtype:
        buffers = [f"{name} ({str(b.dtype).replace('torch.', '')})" for name, b in module.named_buffers()
                   if b.is_floating_point() and b.dtype != x.dtype]
        values = "the values are right" if matches_reference(out, expected, tol) else "the values differ too"
        fail(f"{label} returns {str(out.dtype).replace('torch.', '')} for a float32 input"
             + (f": its buffer {', '.join(buffers)} is not float32." if buffers else "."),
             "float32, like the input", f"{str(out.dtype).replace('torch.', '')} ({values})",
             "adding a float64 table turns every output float64, and the encoder's float32 weights then refuse "
             "it (\"expected m1 and m2 to have the same dtype, but got: double != float\"); build the table in "
             "float32 (torch.arange(..., dtype=torch.float32), torch.zeros(max_len, d_model)), not from numpy or "
             "with dtype=torch.float64, or .float() it before register_buffer", key="pe.dtype", keep=True)
    return out


def _diagnose_pe(out: torch.Tensor, x: torch.Tensor, case: dict, tol, visible: bool, label: str) -> tuple:
    """The named mistake a wrong output fits (a failure), else what to say if no larger case names it."""
    d_model, max_len = case["d_model"], case["max_len"]
    added = (out.detach() - x).to(torch.float32)
    table = case["table"][: x.size(1)]
    if matches_reference(added[0], added[-1], tol):
        variants = {key: (text, variant[: x.size(1)]) for key, (text, variant) in
                    _pe_variants(case["table"], d_model, max_len).items()}
        matches = [key for key, (text, variant) in variants.items()
                   if not matches_reference(variant, table, tol) and matches_reference(added[0], variant, tol)]
        if matches:
            name = "the positional encoding" + (f" (d_model={d_model})" if visible else "")
            why = "100^(2i/d_model) = 10000^(i/d_model)" if {"pe.base_100", "pe.exponent_i"} <= set(matches) else ""
            fail(f"{name} uses {twin_mistakes([variants[k][0] for k in matches], why)}.",
                 "pe[pos, 2i] = sin(pos / 10000^(2i/d_model)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))",
                 shorten(added[0]), "dimensions 2i and 2i+1 share the angle pos / 10000^(2i/d_model): div_term = "
                 "exp(arange(0, d_model, 2) * (-ln(10000) / d_model)), sin on the even dimensions, cos on the "
                 "odd ones, positions from 0", key="|".join(matches))
        if matches_reference(added[0], table.flip(0), tol) or (added.size(1) == added.size(2) and matches_reference(added[0].T, table, tol)):
            fail("the positional encoding rows are in the wrong order or transposed.", shorten(table),
                 shorten(added[0]), "row pos of the table is the encoding of position pos: pe[:seq_len], "
                 "added to x of shape (batch, seq, d_model)", key="pe.rows_order")
    rows = case["table"][: added.size(0)].unsqueeze(1).expand_as(added)
    if added.size(0) < added.size(1) and matches_reference(added, rows, tol):
        fail("the positional encoding is added along the batch axis: every position of sentence b gets the "
             "encoding of position b.", "x + pe[:seq_len] with seq_len = x.size(1)", "x + pe[:batch_size]",
             "inputs are batch-first (batch, seq, d_model): index the table by x.size(1), not x.size(0) (the "
             "sequence-first code of PyTorch's tutorial, with pe of shape (max_len, 1, d_model), does the latter)",
             key="pe.not_batch_first", keep=True)
    if matches_reference(out, x * case["table"][: x.size(1)], tol):
        fail("the positional encoding multiplies the input.", "x + pe[:seq_len]", "x * pe[:seq_len]",
             "the encoding is ADDED to the token embeddings", key="pe.multiplied", keep=True)
    scaled = _input_scale(out, x, table, tol)
    if scaled is not None:
        named = "sqrt(d_model)" if math.isclose(scaled, math.sqrt(d_model), rel_tol=1e-3) else None
        shown = f"{scaled:.4g}" + (f" = {named}" if named else "") if visible else (named or "a constant")
        fail(f"the positional encoding multiplies the input by {shown} before adding the table.",
             hint="the encoding adds the table to x as it is. Scaling the embeddings by sqrt(d_model) is the "
             "model's step (part 2: embedding(src) * sqrt(nhid)), not the encoding's", key="pe.scales_input")
    if matches_reference(out, x, tol):
        fail("the positional encoding returns its input unchanged: out - x is 0 everywhere.",
             "x + pe[:seq_len]", "x", "build the table in __init__ (register_buffer('pe', ...)) and add its first "
             "x.size(1) rows in forward: return self.dropout(x + self.pe[: x.size(1)])", key="pe.nothing_added")
    findings = positional_fit(added[0], table) if matches_reference(added[0], added[-1], tol) else []
    if findings:  # measured: the sinusoids the answer adds, fitted
        fail("the positional encoding adds sinusoids, but not the right ones: "
             + "; ".join(finding.text for finding in findings) + ".",
             "pe[pos, 2i] = sin(pos / 10000^(2i/d_model)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))",
             f"out - x at position 1: {shorten(added[0, 1, :4])}", key=" ".join(f.key for f in findings))
    # nothing recognised here: a larger case may show what it is (a base is hard to fit on 5 positions)
    return (
        f"{label}: the output differs from x + pe[:seq_len].",
        f"x + table, e.g. table[1, :4] = {table[1, :4].tolist() if table.size(0) > 1 else table[0, :4].tolist()}",
        f"out - x at position 1: {added[0, 1 if added.size(1) > 1 else 0, :4].tolist()}",
        "pe[pos, 2i] = sin(pos * exp(-2i * ln(10000) / d_model)), odd dimensions the cos of the same angle; "
        "check the dropout is applied after the addition and that eval() turns it off")


@checked
def check_positional_encoding(PositionalEncoding: type, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("positional_encoding")[split]
    tol = references.tolerance("positional_encoding")
    unexplained = None
    for case in cases:
        d_model, max_len, x, expected = case["d_model"], case["max_len"], case["x"], case["expected"]
        label = (f"PositionalEncoding(d_model={d_model}, dropout=0.0, max_len={max_len})" if visible
                 else "PositionalEncoding on a hidden d_model and max_len")
        out = _pe_output(PositionalEncoding, label, d_model, max_len, x, expected, tol)
        if not matches_reference(out, expected, tol):
            told = _diagnose_pe(out, x, case, tol, visible, label)  # fails here where it names the mistake
            unexplained = unexplained or told
    if unexplained:
        fail(*unexplained)
    sizes = ", ".join(f"d_model={c['d_model']}" for c in cases) if visible else f"{len(cases)} hidden sizes"
    report_ok(f"positional encoding ({sizes}): fixed sinusoids added to batch-first inputs, no trainable parameters")


def _input_scale(out, x: torch.Tensor, table: torch.Tensor, tol) -> float | None:
    """c when ``out`` is c * x + table for a c other than 1 (the input scaled inside the encoding), else None."""
    if not isinstance(out, torch.Tensor) or out.shape != x.shape:
        return None
    rest, inputs = (out.detach().double() - table.double()), x.double()
    norm = float((inputs * inputs).sum())
    if norm == 0:
        return None
    c = float((rest * inputs).sum()) / norm
    return c if abs(c - 1) > 1e-3 and matches_reference(out, (c * inputs + table.double()).float(), tol) else None
