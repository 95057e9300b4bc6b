"""A task whose right attention map is known: reverse a sequence of digits (UvA's tutorial 6 uses the same).

With one encoder layer, one head and no causal mask, output position i can only get the digit at position
T - 1 - i through attention (the residual stream carries position i's own digit, the feed-forward works on each
position alone), so a model that reverses must put its weight on the anti-diagonal.  Notebook 03 trains one and
reads its map with part 1's attention, before reading maps of the pretrained model, where nothing says what is right.
"""
from __future__ import annotations

import torch
from torch import nn

from .attention import attention_maps
from .model import Model, ModelConfig, build_language_model

DIGITS = 10   # the vocabulary: the digits 0 to 9
LENGTH = 12   # digits per sequence


def reversal_batch(batch: int, generator: torch.Generator, length: int = LENGTH,
                   digits: int = DIGITS) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, targets), each (batch, length): random digits, and the same digits in reverse order."""
    inputs = torch.randint(0, digits, (batch, length), generator=generator)
    return inputs, inputs.flip(1)


def build_reversal_model(small_embedding: bool, nhid: int = 32, seed: int = 0) -> Model:
    """The lab's model at one layer and one head; with ``small_embedding`` its token embedding starts at std
    1/sqrt(nhid) instead of ``nn.Embedding``'s 1.

    From std 1, ``embedding * sqrt(nhid)`` makes a token's vector about sqrt(2 nhid) times longer than its
    position's encoding (length sqrt(nhid / 2)): the positions are too faint to learn from in a short run, and
    reversing is all positions.  From std 1/sqrt(nhid) (as the original Transformer's code starts it) tokens and
    positions are at the same scale."""
    torch.manual_seed(seed)
    model = build_language_model(ModelConfig(ntoken=DIGITS, nhid=nhid, nlayers=1, nhead=1,
                                             dim_feedforward=2 * nhid, dropout=0.0, max_len=64))
    if small_embedding:
        nn.init.normal_(model.base.encoder.weight, 0.0, nhid ** -0.5)
    return model


def anti_diagonal_weight(maps: torch.Tensor) -> float:
    """The mean weight a query puts on the key at the mirror position (i reads T - 1 - i), over every leading axis
    of ``maps`` (..., T, T); 1 / T if the weight were spread evenly, 1 for a perfect reversal head."""
    return float(maps.flip(-1).diagonal(dim1=-2, dim2=-1).mean())


def train_reversal(model: Model, steps: int, lr: float = 3e-3, batch: int = 64, seed: int = 0,
                   progress=None) -> list[float]:
    """Adam on the reversal task, ``steps`` batches without a causal mask (every position sees the whole input);
    returns each step's loss.  ``progress`` wraps the step range (``tqdm`` with a description, in the notebook)."""
    optimizer = torch.optim.Adam(model.parameters(), lr=lr)
    generator = torch.Generator().manual_seed(seed)
    steps_range = range(steps) if progress is None else progress(range(steps))
    losses = []
    model.train()
    for _ in steps_range:
        inputs, targets = reversal_batch(batch, generator)
        logits = model(inputs, causal=False)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    model.eval()
    return losses


@torch.no_grad()
def reversal_scores(model: Model, inputs: torch.Tensor, targets: torch.Tensor) -> tuple[float, torch.Tensor]:
    """(the share of digits right, the one head's maps (batch, T, T)) on sequences the model did not train on; the
    maps are read with part 1's attention (``translab.attention.attention_maps``)."""
    right = float((model(inputs, causal=False).argmax(-1) == targets).float().mean())
    return right, attention_maps(model, inputs, causal=False)[0, :, 0]
