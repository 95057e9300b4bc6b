"""Counting trainable parameters, by formula and by inspection."""
from __future__ import annotations

from torch import nn


def encoder_layer_parameters(nhid: int, dim_feedforward: int) -> int:
    """One ``nn.TransformerEncoderLayer``; the number of heads does not change it.

    Attention: in-projection for Q, K, V (3 nhid x nhid weights + 3 nhid biases) and the
    out-projection (nhid x nhid + nhid).  Feed-forward: nhid -> ff -> nhid with biases.
    Two LayerNorms, each a weight and a bias of size nhid.
    """
    attention = 3 * nhid * nhid + 3 * nhid + nhid * nhid + nhid
    feed_forward = nhid * dim_feedforward + dim_feedforward + dim_feedforward * nhid + nhid
    layer_norms = 2 * 2 * nhid
    return attention + feed_forward + layer_norms


def count_parameters_formula(ntoken: int, nhid: int, nlayers: int, nhead: int,
                             dim_feedforward: int | None = None, nclasses: int | None = None) -> int:
    """Trainable parameters of ``Model``: embedding + layers + head.

    ``nclasses=None`` means the language-model head (nhid -> ntoken).  The positional
    encoding is a fixed buffer and contributes nothing.
    """
    if nhid % nhead:
        raise ValueError(f"nhid={nhid} must be divisible by nhead={nhead}")
    dim_feedforward = nhid if dim_feedforward is None else dim_feedforward
    embedding = ntoken * nhid
    layers = nlayers * encoder_layer_parameters(nhid, dim_feedforward)
    outputs = ntoken if nclasses is None else nclasses
    head = nhid * outputs + outputs
    return embedding + layers + head


def count_trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)
