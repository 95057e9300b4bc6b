"""Checks of part 1: the causal mask, the attention demo and attention by hand (the positional encoding's are in
``part1_encoding``).

Why one file: the mask and the two attention checks share the stored mistakes and the weight diagnosis
(``_check_weights``) that tells a mask's fault from an attention's.
"""
from __future__ import annotations

import math
import warnings
from typing import Callable, NoReturn

import torch
from torch import nn

from .. import references
from ..attention import merge_heads, multi_head_attention, scaled_dot_product_attention, split_heads
from ..relations import scale_finding, softmax_scale
from .harness import (CheckFailed, OutputMistake, attempt_again, call_student, checked, fail, fail_if_transposed,
                      fail_measured, forbid, kind_of, lab_model_module, matches_reference, report_ok, require_tensor,
                      shorten, twin_mistakes, variant_matches)


def _forbid_mask():
    from torch.nn.modules import transformer
    return forbid(lab_model_module().generate_square_subsequent_mask, nn.Transformer.generate_square_subsequent_mask,
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


@checked
def check_mask(generate_square_subsequent_mask: Callable[[int], torch.Tensor], split: str = "visible") -> None:
    visible = split == "visible"
    expected_all = references.load("mask")[split]
    for size, expected in expected_all.items():
        size = int(size)
        name = f"the mask for sz={size}" if visible else "the mask for a hidden size"
        call = f"generate_square_subsequent_mask({size})" if visible else "generate_square_subsequent_mask on a hidden size"
        with _forbid_mask():
            mask = call_student(call, generate_square_subsequent_mask, size)
        require_tensor(mask, call)
        found_shape = mask.shape
        extra = ""  # leading axes of size 1 (a batch or head axis): judged as the square they hold, then named
        if tuple(mask.shape) != (size, size):
            if mask.dim() <= 2 or tuple(mask.shape[-2:]) != (size, size) or mask.numel() != size * size:
                fail(f"{name} has the wrong shape.", (size, size), tuple(mask.shape),
                     "the mask is square: one row per query position, one column per key position", key="wrong_shape")
            extra = (f" (and it has leading axes of size 1: {tuple(mask.shape)} instead of (sz, sz))" if visible
                     else " (and it has leading axes of size 1 before the (sz, sz) matrix)")
            mask = mask.reshape(size, size)

        def fail_mask(what: str, *args, **kwargs) -> NoReturn:
            fail(what[:-1] + extra + what[-1], *args, **kwargs)
        if mask.dtype == torch.bool:
            fail_mask(f"{name} is boolean.", "a float mask of 0 and -inf", mask.dtype,
                      "this lab uses an additive mask: it is added to the attention scores before the softmax",
                      key="mask.boolean", keep=True)
        if not mask.is_floating_point():
            fail_mask(f"{name} holds integers.", "float32 with 0 and -inf", mask.dtype,
                      "integers cannot hold -inf; build it with torch.full(..., float('-inf')) or masked_fill",
                      key="mask.integer", keep=True)
        mask = mask.detach().to(torch.float32)
        if bool(torch.isnan(mask).any()):
            fail_mask(f"{name} holds NaN.", "0 on and below the diagonal, -inf above", shorten(mask),
                      "0 * -inf is NaN: a triangle of 0 and 1 multiplied by -inf puts NaN where the mask must be 0. "
                      "Put -inf in the blocked places (torch.full or masked_fill) instead of multiplying by it, and "
                      "leave the others at 0", key="mask.nan")
        lower = torch.tril(torch.ones(size, size, dtype=torch.bool))
        values = set(mask.unique().tolist())
        if values <= {0.0, 1.0} and bool((mask[lower] == 1).all()):
            fail_mask(f"{name} has 1 on and below the diagonal" + (" and 0 above" if size > 1 else "") +
                      ": a mask of 1s.", "0 on and below the diagonal, -inf above", shorten(mask),
                      _ones_mask_hint(mask), key="mask.ones")
        if values <= {0.0, 1.0} and size > 1:
            fail_mask(f"{name} holds only 0 and 1.", "0 on and below the diagonal, -inf above", shorten(mask),
                      "the mask is added to the scores before the softmax: blocked positions need -inf, not 1",
                      key="mask.zero_one")
        if bool(torch.isinf(mask.diagonal()).any()):
            fail_mask(f"the diagonal of {name} is -inf.", "0 on the diagonal", shorten(mask),
                      "each position must attend to itself (else the first row is all -inf and the softmax gives NaN); "
                      "start the blocked part one above the diagonal: torch.triu(..., diagonal=1)",
                      key="mask.diagonal_blocked")
        if size > 1 and bool(torch.isinf(mask[~lower.T]).all()) and not bool(torch.isinf(mask[~lower]).any()):
            fail_mask(f"{name} blocks the past instead of the future.", "-inf ABOVE the diagonal", shorten(mask),
                      "row i is the query, column j the key: position i may look at j <= i; use triu, not tril",
                      key="mask.blocks_past")
        if bool((mask[lower] != 0).any()):
            fail_mask(f"{name} is not 0 on and below the diagonal.", "0 where j <= i", shorten(mask),
                      "allowed positions must leave the scores unchanged: add 0", key="mask.nonzero_allowed")
        above = mask[~lower]
        if above.numel() and not bool(torch.isneginf(above).all()):
            fail_mask(f"{name} is not -inf above the diagonal.", "-inf where j > i", shorten(mask),
                      ("the mask is specified as -inf above the diagonal, as PyTorch's own causal mask is; a large negative "
                       "number such as -1e9 also gives weight 0 after a float32 softmax, but it is another mask (a score "
                       "of that size would leak through it): use float('-inf')"),
                      key="mask.finite_negative")
        if not torch.equal(mask, expected):
            fail_mask(f"{name} differs from the reference.", shorten(expected), shorten(mask))
        if extra:
            fail(f"{name} has extra leading axes" + (f": {tuple(found_shape)}." if visible else "."), (size, size),
                 tuple(found_shape),
                 "return the (sz, sz) matrix: adding it to scores of shape (..., sz, sz) broadcasts it over every "
                 "batch and head", key="wrong_shape")
        weights = torch.softmax(torch.randn(size, size) + mask, dim=-1)
        if not bool((weights[~lower] == 0).all()) or not torch.allclose(weights.sum(-1), torch.ones(size)):
            fail_mask("softmax(scores + mask) does not give exactly 0 above the diagonal.")
    sizes = "for sz = " + ", ".join(str(s) for s in expected_all) if visible else f"on {len(expected_all)} hidden sizes"
    report_ok(f"causal mask {sizes}: 0 on and below the diagonal, -inf above, future weights exactly 0 after softmax")


@checked
def check_attention_demo(weights: torch.Tensor) -> None:
    """The notebook's demo: attention weights computed with the mask are 0 above the diagonal."""
    weights = require_tensor(weights, "the demo's attention weights", verb="be")
    size = weights.size(-1)
    upper = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    if not bool((weights[..., upper] == 0).all()):
        fail("attention weights above the diagonal are not exactly 0.", "0", shorten(weights))
    report_ok("every weight above the diagonal is exactly 0 and every row sums to 1")


# ----------------------------------------------------------------- attention by hand

def _forbid_attention():
    from torch.nn import functional
    return forbid(scaled_dot_product_attention, multi_head_attention, split_heads, merge_heads,
                  functional.multi_head_attention_forward, nn.MultiheadAttention,
                  functional.scaled_dot_product_attention)


def _attend(q, k, v, mask, scale: float | None = None, softmax_dim: int = -1, use_mask: bool = True) -> torch.Tensor:
    """softmax(q k^T * scale + mask) v, where the mistakes of ``ATTENTION_MISTAKES`` change one piece."""
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale)
    if mask is not None and use_mask:
        scores = scores + mask
    return torch.softmax(scores, dim=softmax_dim) @ v


ATTENTION_MISTAKES = {  # key attention.<name>; variants of the output from SimpleNamespace(q, k, v, mask)
    "no_scale": OutputMistake("the scores are not divided by sqrt(d): q.k grows with d (its spread is about sqrt(d) for "
                        "unit-variance vectors), so without the division the softmax saturates toward one key",
                        lambda p: _attend(p.q, p.k, p.v, p.mask, scale=1.0), looks_like="softmax(q k^T + mask) v"),
    "scale_by_d": OutputMistake("the scores are divided by d instead of sqrt(d): the spread of q.k is sqrt(d), so d "
                          "over-corrects and flattens the weights toward uniform",
                          lambda p: _attend(p.q, p.k, p.v, p.mask, scale=1 / p.q.size(-1)),
                          looks_like="softmax(q k^T / d + mask) v"),
    "softmax_wrong_axis": OutputMistake("the softmax runs over the queries (dim=-2): each query's weights over the keys "
                                  "must sum to 1, so normalise along the last axis, dim=-1",
                                  lambda p: _attend(p.q, p.k, p.v, p.mask, softmax_dim=-2),
                                  looks_like="a softmax over dim=-2"),
    "mask_ignored": OutputMistake("the mask is not added to the scores: add it before the softmax, where -inf becomes a "
                            "weight of exactly 0", lambda p: _attend(p.q, p.k, p.v, p.mask, use_mask=False),
                            looks_like="the output without the mask"),
}


def attention_pieces(q, k, v, mask):
    from types import SimpleNamespace
    return SimpleNamespace(q=q, k=k, v=v, mask=mask)


def _folded_attempt(attention: Callable, q, k, v, mask):
    """The answer called on q, k, v whose leading axes are folded into one (the 3-D tensors bmm wants), its pair
    unfolded back; None when that fails too or when there is nothing to fold."""
    if q.dim() <= 3 or (mask is not None and mask.dim() > 2):
        return None
    lead = tuple(q.shape[:-2])

    def fold(t):
        return t.reshape(-1, *t.shape[-2:]).clone()
    found = attempt_again(attention, fold(q), fold(k), fold(v), None if mask is None else mask.clone())
    if not isinstance(found, (tuple, list)) or len(found) != 2 or \
            not all(isinstance(t, torch.Tensor) and t.dim() == 3 for t in found):
        return None
    return tuple(t.reshape(*lead, *t.shape[-2:]) for t in found)


def _attention_answer(found, call: str) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(found, torch.Tensor):
        fail(f"{call} returns one tensor.", "a tuple (output, weights)", kind_of(found),
             "return both the weighted sum of the values and the weights after the softmax: return output, weights "
             "(the weights are what the attention maps of parts 3 and 6 show)", key="wrong_type")
    if not isinstance(found, (tuple, list)) or len(found) != 2:
        fail(f"{call} does not return a pair.", "a tuple (output, weights)", kind_of(found), key="wrong_type")
    output, weights = found
    return require_tensor(output, f"{call}[0], the output"), require_tensor(weights, f"{call}[1], the weights")


def _check_weights(weights: torch.Tensor, mask, what: str, scores: torch.Tensor | None = None) -> None:
    """What the weights show whatever the inputs: finite, rows summing to 1, the masked keys at exactly 0.
    ``scores``: the scaled scores q k^T / sqrt(d), where the check knows them, to tell a mask multiplied into them."""
    weights = weights.detach().to(torch.float64)
    if bool(torch.isinf(weights).any()) or bool(torch.isnan(weights).any()):
        if scores is not None and mask is not None and weights.shape == scores.shape:
            multiplied = torch.softmax(scores.double() * mask.double(), dim=-1)
            if torch.allclose(weights, multiplied, atol=1e-5, equal_nan=True):
                fail(f"{what}: the weights are softmax(scores * mask), NaN where a blocked score was positive.",
                     "finite weights in [0, 1], rows summing to 1", "NaN in the weights",
                     "the mask is MULTIPLIED into the scores: 0 * score turns every allowed score into 0 (so the "
                     "allowed keys weigh the same) and -inf * score is +inf, -inf or NaN by the score's sign. This "
                     "mask is additive: scores + mask keeps the allowed scores and sends blocked ones to -inf, "
                     "which the softmax turns into exactly 0", key="attention.mask_multiplied", keep=True)
        fail(f"{what}: the weights hold -inf or NaN.", "finite weights in [0, 1], rows summing to 1",
             "-inf/NaN in the weights", "the mask is added to the SCORES before the softmax, where exp(-inf) = 0; "
             "added (or multiplied) after it, -inf stays in the weights and 0 * -inf is NaN",
             key="attention.mask_after_softmax", keep=True)
    rows = weights.sum(-1)
    if not torch.allclose(rows, torch.ones_like(rows), atol=1e-5):
        columns = weights.sum(-2)
        if torch.allclose(columns, torch.ones_like(columns), atol=1e-5):
            fail(f"{what}: the weights sum to 1 down each column, not along each row.",
                 "each row (one query) sums to 1", f"row sums {shorten(rows.flatten()[:6])}",
                 ATTENTION_MISTAKES["softmax_wrong_axis"].hint, key="attention.softmax_wrong_axis")
        if mask is not None:
            fail(f"{what}: the rows of the weights do not sum to 1.", "each row sums to 1",
                 f"row sums {shorten(rows.flatten()[:6])}",
                 "the masked weights were zeroed AFTER the softmax, so the rest no longer sums to 1: add the mask "
                 "(0 / -inf) to the scores before the softmax, which renormalises over the allowed keys",
                 key="attention.zeroed_after_softmax")
        fail(f"{what}: the rows of the weights do not sum to 1.", "each row sums to 1",
             f"row sums {shorten(rows.flatten()[:6])}", "the weights are the softmax of the scores over the keys "
             "(dim=-1), nothing else", key="attention.not_softmax")
    if mask is not None:
        blocked = torch.isneginf(mask).expand(weights.shape)
        if bool((weights[blocked] != 0).any()):
            allowed = ~blocked & blocked.any(-1, keepdim=True)  # allowed keys, in rows where some are blocked
            if bool(allowed.any()) and bool((weights[allowed] < 1e-6).all()):
                fail(f"{what}: the keys the mask allows weigh 0 and the blocked ones carry the weight.",
                     hint="the mask is read as a keep-mask, blocking where it is 0 (masked_fill(mask == 0, ...): "
                     "The Annotated Transformer's convention for its boolean masks). This lab's mask is additive, "
                     "0 where allowed and -inf where blocked: add it to the scores",
                     key="attention.mask_as_keep")
            fail(f"{what}: keys the mask blocks get a weight above 0.", "exactly 0 where the mask is -inf",
                 f"largest such weight {float(weights[blocked].max()):.3g}", ATTENTION_MISTAKES["mask_ignored"].hint,
                 key="attention.mask_ignored")


def _judge_attention(label: str, output: torch.Tensor, weights: torch.Tensor, case: dict, tol, mistakes: dict,
                     family: str, reference: str, weights_hint: str) -> bool:
    """True when output and weights are the reference's; else fails with the named mistake (``mistakes``, keys
    ``<family>.<name>`` unless the mistake has its own), or says the output is right and the weights are not; False
    when nothing is recognised (the caller says what the computation is)."""
    if matches_reference(output, case["expected"], tol) and matches_reference(weights, case["weights"], tol):
        return True
    diagnoses = {name: mistake.hint for name, mistake in mistakes.items()}
    matches = variant_matches(output, case, diagnoses, case["expected"], tol)
    if matches:
        keys = dict.fromkeys(mistakes[m].key or f"{family}.{m}" for m in matches)
        fail(f"{label}: the output differs from {reference}.", reference,
             twin_mistakes(list(dict.fromkeys(mistakes[m].looks_like for m in matches))),
             twin_mistakes(list(dict.fromkeys(diagnoses[m] for m in matches))), key="|".join(keys))
    if matches_reference(output, case["expected"], tol):
        fail(f"{label}: the output is right but the weights are not.", shorten(case["weights"]), shorten(weights),
             weights_hint)
    return False


@checked
def check_attention(scaled_dot_product_attention: Callable, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("attention")[split]
    tol = references.tolerance("attention")
    for case in cases:
        q, k, v, mask = case["q"], case["k"], case["v"], case["mask"]
        shapes = f"q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)}"
        label = (f"scaled_dot_product_attention({shapes}, mask={'None' if mask is None else 'causal'})" if visible
                 else "scaled_dot_product_attention on hidden sizes" + ("" if mask is None else " with a mask"))
        folded = False  # right only once the leading axes are folded into one: judged so, then named
        with _forbid_attention():
            try:
                found = call_student(label, scaled_dot_product_attention, q.clone(), k.clone(), v.clone(),
                                     None if mask is None else mask.clone())
            except CheckFailed as failed:
                found = _folded_attempt(scaled_dot_product_attention, q, k, v, mask) if failed.key == "raised" else None
                if found is None:
                    raise
                folded = True
        output, weights = _attention_answer(found, label)
        expected_weights = case["weights"]
        if tuple(weights.shape) != tuple(expected_weights.shape):
            fail(f"{label}: the weights have the wrong shape.", tuple(expected_weights.shape), tuple(weights.shape),
                 "one weight per (query, key) pair: scores = q @ k.transpose(-2, -1), of shape (..., T_q, T_k); "
                 "transpose the last two axes of k only, so that leading (batch, head) axes are kept",
                 key="wrong_shape")
        if tuple(output.shape) != tuple(case["expected"].shape):
            fail_if_transposed(f"{label}: the output has the wrong shape", output, case["expected"], tol,
                               ("batch", "query", "d_v")[-case["expected"].dim():],
                               "the output is weights @ v: one d_v-vector per query, (..., T_q, d_v)")
            fail(f"{label}: the output has the wrong shape.", tuple(case["expected"].shape), tuple(output.shape),
                 "the output is weights @ v: one d_v-vector per query, (..., T_q, d_v)", key="wrong_shape")
        _check_weights(weights, mask, label, scores=q @ k.transpose(-2, -1) / math.sqrt(q.size(-1)))
        if _judge_attention(label, output, weights, case, tol, ATTENTION_MISTAKES, "attention",
                            "softmax(q k^T / sqrt(d) + mask) v", "return the weights after the softmax (and after the "
                            "mask), the very tensor the output multiplies v with"):
            if folded:
                fail(f"{label} raises on q, k, v with two leading axes (batch, heads) and is right once they are "
                     "folded into one.", hint="write it for any number of leading axes: @ (matmul) and "
                     "k.transpose(-2, -1) broadcast over them; torch.bmm, an einsum spelled 'bqd,bkd' and "
                     "transpose(1, 2) assume exactly three", key="attention.three_axes_only")
            continue
        fitted = softmax_scale(weights, q @ k.transpose(-2, -1), mask)
        finding = scale_finding(fitted, q.size(-1), show_values=visible) if fitted is not None else None
        if finding is not None:  # the scale, measured from the weights: whatever number divides the scores
            fail(f"{label}: {finding.text}.", hint="scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))",
                 key=finding.key, keep=True)
        fail_measured(f"{label}: the output differs from softmax(q k^T / sqrt(d) + mask) v", output, case["expected"],
                      tol, "scores = q @ k.transpose(-2, -1) / math.sqrt(d) with d = q.size(-1); add the mask; "
                      "softmax over the last axis; multiply by v", position_axis=-2,
                      scales={"sqrt(d)": math.sqrt(q.size(-1))})
    sizes = f"{len(cases)} {'hidden ' if not visible else ''}cases"
    report_ok(f"scaled dot-product attention on {sizes}: weights and output match, rows sum to 1, masked keys weigh 0")


def _mha(p, order: str = "qkv", split: str = "right", merge: str = "right", head_scale: bool = True,
         out_proj: bool = True, in_bias: bool = True) -> torch.Tensor:
    """Multi-head self-attention where the mistakes of ``MHA_MISTAKES`` change one piece."""
    projected = torch.nn.functional.linear(p.x, p.in_proj_weight, p.in_proj_bias if in_bias else None)
    chunks = dict(zip(order, projected.chunk(3, dim=-1)))
    batch, seq, d_model = p.x.shape
    head_dim = d_model // p.num_heads

    def heads(t):
        if split == "no_transpose":
            return t.reshape(batch, p.num_heads, seq, head_dim)
        return split_heads(t, p.num_heads)
    q, k, v = heads(chunks["q"]), heads(chunks["k"]), heads(chunks["v"])
    scale = 1 / math.sqrt(head_dim if head_scale else d_model)
    attended = _attend(q, k, v, p.mask, scale=scale)
    merged = attended.reshape(batch, seq, d_model) if merge == "no_transpose" else merge_heads(attended)
    return torch.nn.functional.linear(merged, p.out_proj_weight, p.out_proj_bias) if out_proj else merged


_ORDER_HINT = ("in_proj_weight stacks W_q, W_k, W_v in that order (rows 0..d-1 make q, d..2d-1 k, 2d..3d-1 v): "
               "q, k, v = (x @ in_proj_weight.T + in_proj_bias).chunk(3, dim=-1)")
MHA_MISTAKES = {  # key mha.<name>, the orders key mha.qkv_order; variants of the output from mha_pieces
    **{f"order_{order}": OutputMistake(_ORDER_HINT, lambda p, order=order: _mha(p, order=order),
                                 looks_like=f"q, k, v taken in the order {', '.join(order)}", key="mha.qkv_order")
       for order in ("kqv", "qvk", "vkq", "kvq", "vqk")},
    "split_no_transpose": OutputMistake(
        "the heads are split with a plain view(batch, heads, seq, d_head): that cuts the sequence, not the features; "
        "view(batch, seq, heads, d_head) then transpose(1, 2) gives each head its own slice of every position",
        lambda p: _mha(p, split="no_transpose"), looks_like="heads split by view(batch, heads, seq, d_head)"),
    "merge_no_transpose": OutputMistake(
        "the heads are merged with a plain view(batch, seq, d_model) of (batch, heads, seq, d_head): transpose(1, 2) "
        "back to (batch, seq, heads, d_head) first, then reshape",
        lambda p: _mha(p, merge="no_transpose"), looks_like="heads merged without transposing back"),
    "scale_by_d_model": OutputMistake(
        "the scores are divided by sqrt(d_model): each head's dot product runs over its d_head = d_model / heads "
        "features, so its spread is sqrt(d_head)", lambda p: _mha(p, head_scale=False),
        looks_like="scores divided by sqrt(d_model)"),
    "no_out_proj": OutputMistake("the heads' concatenation is returned without the output projection (out_proj_weight, "
                           "out_proj_bias), which mixes what the heads found",
                           lambda p: _mha(p, out_proj=False), looks_like="no output projection"),
    "no_in_bias": OutputMistake("in_proj_bias is not added to the projections", lambda p: _mha(p, in_bias=False),
                          looks_like="projections without in_proj_bias"),
}


def mha_pieces(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, mask):
    from types import SimpleNamespace
    return SimpleNamespace(x=x, in_proj_weight=in_proj_weight, in_proj_bias=in_proj_bias,
                           out_proj_weight=out_proj_weight, out_proj_bias=out_proj_bias, num_heads=num_heads, mask=mask)


@checked
def check_multi_head_attention(multi_head_attention: Callable, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("multi_head_attention")[split]
    tol = references.tolerance("multi_head_attention")
    for case in cases:
        x, heads, mask = case["x"], case["num_heads"], case["mask"]
        label = (f"multi_head_attention(x {tuple(x.shape)}, ..., num_heads={heads}, "
                 f"mask={'None' if mask is None else 'causal'})" if visible
                 else "multi_head_attention on a hidden d_model and number of heads")
        weights_in = [case[name].clone() for name in ("in_proj_weight", "in_proj_bias", "out_proj_weight",
                                                        "out_proj_bias")]
        expected, expected_weights = case["expected"], case["weights"]
        with _forbid_attention():
            try:
                found = call_student(label, multi_head_attention, x.clone(), *weights_in, heads,
                                     None if mask is None else mask.clone())
            except CheckFailed as failed:
                if failed.key == "raised":  # right once the projections are handed over transposed?
                    swapped = [w.T.contiguous() if w.dim() == 2 else w.clone() for w in weights_in]
                    again = attempt_again(multi_head_attention, x.clone(), *swapped, heads,
                                          None if mask is None else mask.clone())
                    if isinstance(again, (tuple, list)) and len(again) == 2 and matches_reference(again[0], expected, tol):
                        fail(f"{label} raises, and is right when given the projection matrices transposed.",
                             hint="nn.Linear and nn.MultiheadAttention keep a weight as (out_features, "
                             "in_features): a projection of x is x @ W.T + b (F.linear(x, W, b)), not x @ W",
                             key="mha.weight_not_transposed")
                raise
        output, weights = _attention_answer(found, label)
        if weights.dim() == expected_weights.dim() - 1 and matches_reference(weights, expected_weights.mean(dim=1), tol):
            fail(f"{label}: the weights are averaged over the heads.", f"{tuple(expected_weights.shape)} (batch, "
                 "heads, seq, seq)" if visible else None, tuple(weights.shape) if visible else None,
                 "nn.MultiheadAttention averages them by default (average_attn_weights=True); here return every "
                 "head's weights, (batch, heads, seq, seq): the maps of parts 3 and 6 show each head",
                 key="mha.weights_averaged")
        if tuple(weights.shape) != tuple(expected_weights.shape):
            fail(f"{label}: the weights have the wrong shape.", f"{tuple(expected_weights.shape)} (batch, heads, "
                 "seq, seq)", tuple(weights.shape), "return every head's weights, not their average: after "
                 "splitting, q, k and v are (batch, heads, seq, d_head) and the weights (batch, heads, seq, seq)",
                 key="wrong_shape")
        if tuple(output.shape) != tuple(expected.shape):
            fail_if_transposed(f"{label}: the output has the wrong shape", output, expected, tol,
                               ("batch", "seq", "d_model"), "the heads are merged back to (batch, seq, d_model): "
                               "transpose (batch, heads, seq, d_head) to (batch, seq, heads, d_head) before the reshape")
            fail(f"{label}: the output has the wrong shape.", tuple(expected.shape), tuple(output.shape),
                 "merge the heads back to (batch, seq, d_model) and apply the output projection", key="wrong_shape")
        _check_weights(weights, mask, label)
        if _judge_attention(label, output, weights, case, tol, MHA_MISTAKES, "mha", "nn.MultiheadAttention's output",
                            "return the weights of every head after the softmax, (batch, heads, seq, seq), as "
                            "scaled_dot_product_attention gives them"):
            continue
        fail_measured(f"{label}: the output differs from nn.MultiheadAttention's", output, expected, tol,
                      "project x with in_proj_weight and in_proj_bias, chunk into q, k, v, split each into heads, "
                      "attend in each head (scaled by sqrt(d_head)), merge, apply out_proj", position_axis=1,
                      names=("batch", "seq", "d_model"))
    report_ok(f"multi-head attention on {len(cases)} {'hidden ' if not visible else ''}case(s): output and every head's "
              "weights match nn.MultiheadAttention")
