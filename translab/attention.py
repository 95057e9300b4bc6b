"""Attention written out: what ``nn.MultiheadAttention`` computes inside every encoder layer of the lab.

Part 1's students write these two functions; the library's versions are the reference their checks compare with
(``grader.references``) and what the attention maps of parts 3 and 6 are read with (``attention_maps``).
"""
from __future__ import annotations

import math

import torch
from torch import nn


def scaled_dot_product_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor,
                                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """(output, weights) of softmax(q k^T / sqrt(d) + mask) v, over any leading batch dimensions.

    q: (..., T_q, d), k: (..., T_k, d), v: (..., T_k, d_v); mask: additive, broadcast to (..., T_q, T_k).
    Dividing by sqrt(d) keeps the scores' spread at about 1 whatever d is, so the softmax does not saturate."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def split_heads(x: torch.Tensor, num_heads: int) -> torch.Tensor:
    """(batch, seq, d_model) -> (batch, heads, seq, d_model / heads): head h reads features h*dh .. (h+1)*dh - 1."""
    batch, seq, d_model = x.shape
    return x.view(batch, seq, num_heads, d_model // num_heads).transpose(1, 2)


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    """The inverse of ``split_heads``: (batch, heads, seq, dh) -> (batch, seq, heads * dh)."""
    batch, heads, seq, head_dim = x.shape
    return x.transpose(1, 2).reshape(batch, seq, heads * head_dim)


def multi_head_attention(x: torch.Tensor, in_proj_weight: torch.Tensor, in_proj_bias: torch.Tensor,
                         out_proj_weight: torch.Tensor, out_proj_bias: torch.Tensor, num_heads: int,
                         mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Self-attention of ``nn.MultiheadAttention(d_model, num_heads, batch_first=True)`` from its packed weights.

    ``in_proj_weight`` (3 d_model, d_model) stacks W_q, W_k, W_v in that order; each head attends in its own slice
    of d_model / num_heads features.  Returns (output (batch, seq, d_model), weights (batch, heads, seq, seq))."""
    q, k, v = torch.nn.functional.linear(x, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    heads, weights = scaled_dot_product_attention(split_heads(q, num_heads), split_heads(k, num_heads),
                                                  split_heads(v, num_heads), mask)
    return torch.nn.functional.linear(merge_heads(heads), out_proj_weight, out_proj_bias), weights


def attention_of(module: nn.MultiheadAttention, x: torch.Tensor,
                 mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """``multi_head_attention`` with a module's own weights."""
    return multi_head_attention(x, module.in_proj_weight, module.in_proj_bias, module.out_proj.weight,
                                module.out_proj.bias, module.num_heads, mask)


def _as_additive(mask: torch.Tensor | None, dtype: torch.dtype) -> torch.Tensor | None:
    if mask is None or mask.is_floating_point():
        return mask
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill(mask, float("-inf"))


@torch.no_grad()
def attention_maps(model: nn.Module, *inputs, **kwargs) -> torch.Tensor:
    """The attention weights of every layer and head of the first ``nn.TransformerEncoder`` in ``model`` (batch
    first) while ``model(*inputs, **kwargs)`` runs: (layers, batch, heads, seq, seq).

    Each layer's input and masks are recorded by a hook and its attention recomputed from the layer's own weights
    (``multi_head_attention``), so the model runs unchanged: an encoder layer never asks its attention for the weights
    (it calls it with ``need_weights=False`` in every mode)."""
    encoder = next((m for m in model.modules() if isinstance(m, nn.TransformerEncoder)), None)
    if encoder is None:
        raise ValueError(f"{type(model).__name__} holds no nn.TransformerEncoder whose attention could be read")
    seen = []

    def record(layer, args, layer_kwargs):
        names = ("src", "src_mask", "src_key_padding_mask")
        given = {**dict(zip(names, args)), **layer_kwargs}
        seen.append((given["src"], given.get("src_mask"), given.get("src_key_padding_mask")))
    hooks = [layer.register_forward_pre_hook(record, with_kwargs=True) for layer in encoder.layers]
    try:
        model(*inputs, **kwargs)
    finally:
        for hook in hooks:
            hook.remove()
    maps = []
    for layer, (layer_input, mask, padding) in zip(encoder.layers, seen):
        combined = _as_additive(mask, layer_input.dtype)
        padding = _as_additive(padding, layer_input.dtype)
        if padding is not None:  # (batch, seq) -> (batch, 1, 1, seq): every head and query of a sentence
            padding = padding[:, None, None, :]
            combined = padding if combined is None else combined + padding
        attended = layer.norm1(layer_input) if layer.norm_first else layer_input
        maps.append(attention_of(layer.self_attn, attended, combined)[1])
    return torch.stack(maps)


def head_roles(maps: torch.Tensor) -> list[dict]:
    """Where each head of one sentence's maps (layers, heads, seq, seq) puts its weight, averaged over the queries
    that have the position in question: on the first token, on the token itself, on the one before, the one after."""
    layers, heads, seq, _ = maps.shape
    rows = []
    for layer in range(layers):
        for head in range(heads):
            w = maps[layer, head]
            rows.append({"layer": layer, "head": head, "first": float(w[1:, 0].mean()) if seq > 1 else 1.0,
                         "itself": float(w.diagonal().mean()),
                         "previous": float(w.diagonal(-1).mean()) if seq > 1 else 0.0,
                         "next": float(w.diagonal(1).mean()) if seq > 1 else 0.0})
    return rows


@torch.no_grad()
def scaling_demo(dims=(4, 16, 64, 256, 1024), keys: int = 16, queries: int = 2000, seed: int = 0) -> list[dict]:
    """Why the scores are divided by sqrt(d): for random q and k of unit-variance entries, per width d, the spread
    (standard deviation) of q.k, and the softmax over ``keys`` keys with and without the division: its entropy as a
    fraction of the uniform's log(keys) (1 = spread evenly, 0 = all weight on one key), its largest weight, and how
    far it can still move: the trace of its Jacobian, 1 - sum of the squared weights, 0 when one key has it all
    (the gradient that reaches the scores through the softmax is then 0 too)."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for d in dims:
        q, k = torch.randn(queries, 1, d, generator=g), torch.randn(queries, keys, d, generator=g)
        raw = (q * k).sum(-1)
        row = {"d": d}
        for name, scores in (("raw", raw), ("scaled", raw / math.sqrt(d))):
            weights = torch.softmax(scores, dim=-1)
            entropy = -(weights * weights.clamp_min(1e-30).log()).sum(-1) / math.log(keys)
            row |= {f"spread_{name}": float(scores.std()), f"entropy_{name}": float(entropy.mean()),
                    f"largest_weight_{name}": float(weights.max(-1).values.mean()),
                    f"gradient_{name}": float((1 - (weights ** 2).sum(-1)).mean())}
        rows.append(row)
    return rows


def cached_attention_step(x_new: torch.Tensor, cache: tuple[torch.Tensor, torch.Tensor] | None,
                          in_proj_weight: torch.Tensor, in_proj_bias: torch.Tensor, out_proj_weight: torch.Tensor,
                          out_proj_bias: torch.Tensor, num_heads: int
                          ) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """One generation step of causal self-attention with a KV cache: the new token ``x_new`` (batch, 1, d_model)
    attends to the cached keys and values and its own; returns (its output (batch, 1, d_model), the cache with its
    key and value appended: K and V, each (batch, heads, T, d_head)).  Earlier positions' keys and values do not
    change when a token is appended (they attend to the left only), so no step recomputes them."""
    q, k, v = torch.nn.functional.linear(x_new, in_proj_weight, in_proj_bias).chunk(3, dim=-1)
    k, v = split_heads(k, num_heads), split_heads(v, num_heads)
    if cache is not None:
        k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
    heads, _ = scaled_dot_product_attention(split_heads(q, num_heads), k, v)  # the newest query may read every key
    return torch.nn.functional.linear(merge_heads(heads), out_proj_weight, out_proj_bias), (k, v)
