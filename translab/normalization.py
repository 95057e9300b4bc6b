"""Post-LN against pre-LN at initialisation: each encoder layer's gradient norm, for part 4's note on warm-up."""
from __future__ import annotations

import torch
from torch import nn


def layer_gradient_norms(nlayers: int, norm_first: bool, nhid: int = 200, nhead: int = 2, ntoken: int = 4000,
                         batch: int = 16, seq: int = 32, seed: int = 0) -> list[float]:
    """The gradient norm of each layer's parameters, first layer first, after one backward pass of a causal LM loss
    on random inputs and targets, in a freshly initialised stack of ``nn.TransformerEncoderLayer`` shaped as the
    lab's model (feed-forward width nhid, no dropout); ``norm_first=True`` is pre-LN, with a final LayerNorm as
    pre-LN stacks have."""
    generator = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    layer = nn.TransformerEncoderLayer(nhid, nhead, nhid, dropout=0.0, batch_first=True, norm_first=norm_first)
    encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
    head = nn.Linear(nhid, ntoken)
    x = torch.randn(batch, seq, nhid, generator=generator)
    mask = nn.Transformer.generate_square_subsequent_mask(seq)
    out = encoder(x, mask=mask, is_causal=True)
    if norm_first:
        out = nn.functional.layer_norm(out, (nhid,))
    targets = torch.randint(0, ntoken, (batch * seq,), generator=generator)
    nn.functional.cross_entropy(head(out).reshape(-1, ntoken), targets).backward()
    return [float(torch.sqrt(sum((p.grad ** 2).sum() for p in layer.parameters()))) for layer in encoder.layers]
