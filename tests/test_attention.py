"""Attention by hand (part 1): the library's reference against PyTorch's own, the sqrt(d) demo's claims, and the
checks: right answers pass, each usual mistake is named, hidden checks keep their sizes to themselves."""
from __future__ import annotations

import math
import re

import pytest
import torch
from torch import nn

from grader import references as builders
from translab import attention as A
from translab import checks
from translab.model import generate_square_subsequent_mask

from test_diagnosis import failure, keys_of


def named(message: str) -> set[str]:
    """The diagnosis keys of a failure, alternatives (``a|b``) apart."""
    return {key for keys in keys_of(message) for key in keys.split("|")}


# ----------------------------------------------------------------- the reference is PyTorch's computation

@pytest.mark.parametrize("d_model, heads, causal", [(8, 2, True), (12, 3, False), (6, 1, True), (16, 4, True)])
def test_multi_head_attention_is_nn_multihead_attention(d_model, heads, causal):
    torch.manual_seed(d_model)
    module = nn.MultiheadAttention(d_model, heads, batch_first=True)
    nn.init.normal_(module.in_proj_bias)
    x = torch.randn(3, 7, d_model)
    mask = generate_square_subsequent_mask(7) if causal else None
    with torch.no_grad():
        theirs, their_weights = module(x, x, x, attn_mask=mask, need_weights=True, average_attn_weights=False)
        mine, my_weights = A.attention_of(module, x, mask)
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(my_weights, their_weights, atol=1e-6, rtol=1e-5)


def test_scaled_dot_product_attention_is_torchs_and_the_future_weighs_zero():
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 8), torch.randn(2, 3, 5, 4)
    mask = generate_square_subsequent_mask(5)
    output, weights = A.scaled_dot_product_attention(q, k, v, mask)
    torch.testing.assert_close(output, nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask))
    assert bool((weights[..., torch.triu(torch.ones(5, 5, dtype=torch.bool), 1)] == 0).all())


def test_attention_maps_are_the_weights_each_layer_computes():
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(12, 3, 24, dropout=0.0, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x, mask = torch.randn(2, 6, 12), generate_square_subsequent_mask(6)
    maps = A.attention_maps(encoder, x, mask)
    expected, h = [], x
    with torch.no_grad():
        for each in encoder.layers:
            expected.append(each.self_attn(h, h, h, attn_mask=mask, need_weights=True, average_attn_weights=False)[1])
            h = each(h, src_mask=mask)
    assert maps.shape == (2, 2, 3, 6, 6)
    torch.testing.assert_close(maps, torch.stack(expected), atol=1e-6, rtol=1e-5)


def test_attention_maps_of_a_model_ignore_padding_and_find_the_encoder_inside():
    from translab.model import ModelConfig, build_language_model
    torch.manual_seed(0)
    model = build_language_model(ModelConfig(ntoken=30, nhid=12, nlayers=2, nhead=3, dropout=0.0)).eval()
    ids = torch.randint(5, 30, (2, 7))
    padding = torch.zeros(2, 7, dtype=torch.bool)
    padding[1, 4:] = True
    maps = A.attention_maps(model, ids, padding)
    assert maps.shape == (2, 2, 3, 7, 7)
    assert float(maps[:, 1, :, :, 4:].abs().max()) == 0.0, "padding keys get exactly 0"
    alone = A.attention_maps(model, ids[1:, :4])
    torch.testing.assert_close(maps[:, 1, :, :4, :4], alone[:, 0], atol=1e-6, rtol=1e-5)
    with pytest.raises(ValueError, match="no nn.TransformerEncoder"):
        A.attention_maps(nn.Linear(2, 2), torch.zeros(1, 2))


def test_head_roles_read_the_diagonals():
    previous = torch.zeros(1, 1, 4, 4)
    previous[0, 0, 0, 0] = 1.0
    previous[0, 0, 1:, :3] = torch.eye(3)
    [row] = A.head_roles(previous)
    assert row["previous"] == 1.0 and row["itself"] == 0.25 and row["next"] == 0.0 and row["first"] == pytest.approx(1 / 3)


def test_the_scaling_demo_shows_what_the_notebook_says():
    """Notebook 01: the unscaled spread grows as sqrt(d) and the softmax saturates; scaled, both stay put."""
    rows = A.scaling_demo(dims=(4, 16, 64, 256, 1024), keys=16, seed=0)
    for row in rows:
        assert row["spread_raw"] == pytest.approx(math.sqrt(row["d"]), rel=0.05)
        assert row["spread_scaled"] == pytest.approx(1.0, rel=0.05)
    raw = [row["entropy_raw"] for row in rows]
    assert raw == sorted(raw, reverse=True) and raw[-1] < 0.1 < 0.8 < rows[0]["entropy_scaled"]
    scaled = [row["entropy_scaled"] for row in rows]
    assert max(scaled) - min(scaled) < 0.03
    assert rows[-1]["gradient_raw"] < 0.1 < 0.8 < rows[-1]["gradient_scaled"]


# ----------------------------------------------------------------- the checks

def sdpa(q, k, v, mask=None, scale=None, dim=-1, mask_after=False, zero_after=False, pair=True):
    scores = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.size(-1)) if scale is None else scale(q.size(-1)))
    if mask is not None and not (mask_after or zero_after):
        scores = scores + mask
    weights = torch.softmax(scores, dim=dim)
    if mask is not None and mask_after:
        weights = weights + mask
    if mask is not None and zero_after:
        weights = weights.masked_fill(torch.isneginf(mask), 0.0)
    return (weights @ v, weights) if pair else weights @ v


ATTENTION_ANSWERS = {
    "no sqrt(d)": (dict(scale=lambda d: 1.0), "attention.no_scale"),
    "divided by d": (dict(scale=lambda d: 1 / d), "attention.scale_by_d"),
    "softmax over the queries": (dict(dim=-2), "attention.softmax_wrong_axis"),
    "mask after the softmax": (dict(mask_after=True), "attention.mask_after_softmax"),
    "masked weights zeroed after the softmax": (dict(zero_after=True), "attention.zeroed_after_softmax"),
    "output only": (dict(pair=False), "wrong_type"),
}


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_right_attention_passes(split, capsys):
    checks.check_attention(sdpa, split=split)
    checks.check_multi_head_attention(mha, split=split)
    assert capsys.readouterr().out.count("ok  ") == 2


@pytest.mark.parametrize("name", ATTENTION_ANSWERS)
@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_each_attention_mistake_is_named(name, split):
    changes, key = ATTENTION_ANSWERS[name]
    message = failure(checks.check_attention, lambda *args: sdpa(*args, **changes), split=split)
    assert key in named(message), message


def mha(x, w_in, b_in, w_out, b_out, heads, mask=None, order="qkv", split_view=False, merge_view=False,
        scale_model=False, out_proj=True, in_bias=True, average=False):
    batch, seq, d_model = x.shape
    head_dim = d_model // heads
    chunks = dict(zip(order, (x @ w_in.T + (b_in if in_bias else 0)).chunk(3, dim=-1)))

    def split(t):
        return t.reshape(batch, heads, seq, head_dim) if split_view else \
            t.view(batch, seq, heads, head_dim).transpose(1, 2)
    out, weights = sdpa(split(chunks["q"]), split(chunks["k"]), split(chunks["v"]), mask,
                        scale=(lambda d: 1 / math.sqrt(d_model)) if scale_model else None)
    merged = out.reshape(batch, seq, d_model) if merge_view else out.transpose(1, 2).reshape(batch, seq, d_model)
    return (merged @ w_out.T + b_out if out_proj else merged), (weights.mean(1) if average else weights)


MHA_ANSWERS = {
    "k, q, v": (dict(order="kqv"), "mha.qkv_order"),
    "v, k, q": (dict(order="vkq"), "mha.qkv_order"),
    "heads split by a plain view": (dict(split_view=True), "mha.split_no_transpose"),
    "heads merged by a plain view": (dict(merge_view=True), "mha.merge_no_transpose"),
    "sqrt(d_model)": (dict(scale_model=True), "mha.scale_by_d_model"),
    "no output projection": (dict(out_proj=False), "mha.no_out_proj"),
    "no input bias": (dict(in_bias=False), "mha.no_in_bias"),
    "weights averaged over the heads": (dict(average=True), "mha.weights_averaged"),
}


@pytest.mark.parametrize("name", MHA_ANSWERS)
@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_each_multi_head_mistake_is_named(name, split):
    changes, key = MHA_ANSWERS[name]
    message = failure(checks.check_multi_head_attention, lambda *args: mha(*args, **changes), split=split)
    assert key in named(message), message


def test_hidden_attention_checks_keep_their_sizes():
    secrets = [f"d_model={case[2]}" for case in builders.MHA_CASES["hidden"]]
    secrets += [str(tuple(case["q"].shape)) for case in builders.build_attention()["hidden"]]
    secrets += [str(tuple(case["expected"].shape)) for case in builders.build_attention()["hidden"]]
    messages = [failure(checks.check_attention, lambda *args: sdpa(*args, **changes), split="hidden")
                for changes, _ in ATTENTION_ANSWERS.values()]
    messages += [failure(checks.check_multi_head_attention, lambda *args: mha(*args, **changes), split="hidden")
                 for changes, _ in MHA_ANSWERS.values()]
    for message in messages:
        assert "likely:" in message
        leaks = [secret for secret in secrets if secret in message]
        assert not leaks, f"{leaks} in\n{message}"


def test_the_library_and_pytorchs_attention_are_switched_off_while_the_answer_runs():
    message = failure(checks.check_attention, A.scaled_dot_product_attention)
    assert "calls translab's own scaled_dot_product_attention" in message and named(message) == {"calls_translab"}
    message = failure(checks.check_multi_head_attention,
                      lambda x, w_in, b_in, w_out, b_out, heads, mask=None: nn.functional.multi_head_attention_forward(
                          x.transpose(0, 1), x.transpose(0, 1), x.transpose(0, 1), x.size(-1), heads, w_in, b_in,
                          None, None, False, 0.0, w_out, b_out, attn_mask=mask, average_attn_weights=False))
    assert "calls PyTorch's own multi_head_attention_forward" in message and named(message) == {"calls_translab"}

    def with_the_module(x, w_in, b_in, w_out, b_out, heads, mask=None):
        return nn.MultiheadAttention(x.size(-1), heads, batch_first=True)(x, x, x)
    message = failure(checks.check_multi_head_attention, with_the_module)
    assert "uses PyTorch's own MultiheadAttention" in message and named(message) == {"calls_translab"}
    # an accusation states its evidence: the student's line that made the call
    assert re.search(r"The call is at line \d+ of your code \(return nn.MultiheadAttention\(x.size\(-1\)", message), message


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_an_answer_that_writes_into_its_callers_tensor_is_named(split):
    """Issue 50: the checks hand each answer copies, so one that scaled `q` in place passed; in a model `q` is the
    layer's own projection, which it overwrote."""
    def in_place(q, k, v, mask=None):
        q /= math.sqrt(q.size(-1))
        return sdpa(q, k, v, mask, scale=lambda d: 1.0)
    message = failure(checks.check_attention, in_place, split=split)
    assert named(message) == {"mutates_input"} and "`q` in place" in message, message
