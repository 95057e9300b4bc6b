"""The Transformer of the lab: a causal encoder base and interchangeable heads.

Batch-first throughout: tensors are (batch, seq[, features]).  Batch-first also keeps
PyTorch from warning about nested tensors, a warning that would zero a graded cell.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

import torch
from torch import nn


@dataclass(frozen=True)
class ModelConfig:
    """Every hyperparameter of the lab's Transformer, in one place (nanoGPT's ``GPTConfig``).

    The defaults are the shipped checkpoint's shape (part 2's count: ntoken=100 gives 1,008,100 parameters
    with the LM head).  ``dim_feedforward=None`` means ``nhid``, the lab's choice, as in PyTorch's tutorial.
    """
    ntoken: int
    nhid: int = 200
    nlayers: int = 4
    nhead: int = 2
    dim_feedforward: int | None = None
    dropout: float = 0.1
    max_len: int = 5000

    def __post_init__(self):
        if self.nhid % self.nhead:
            raise ValueError(f"nhid={self.nhid} must be divisible by nhead={self.nhead} "
                             "(each head gets nhid/nhead dims)")

    @property
    def feedforward(self) -> int:
        return self.nhid if self.dim_feedforward is None else self.dim_feedforward

    def to_dict(self) -> dict:
        """Plain data, as a checkpoint stores it."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict) -> ModelConfig:
        """From a checkpoint's config; says which keys it does not know rather than guess."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(values) - known)
        if unknown:
            raise ValueError(f"unknown model config keys {unknown}; a ModelConfig has {sorted(known)}")
        return cls(**values)

    @classmethod
    def pick(cls, values: dict, **changes) -> ModelConfig:
        """The model's fields out of a larger record (a test case's configuration), with ``changes``."""
        return cls(**{**{f.name: values[f.name] for f in fields(cls) if f.name in values}, **changes})


def generate_square_subsequent_mask(sz: int) -> torch.Tensor:
    """Additive attention mask: 0 where a position may look (itself and the past), -inf above.

    It is added to the attention scores before the softmax, so the future gets weight exactly 0.
    """
    if sz < 1:
        raise ValueError(f"mask size must be a positive integer, got {sz!r}")
    return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1)


class PositionalEncoding(nn.Module):
    """Adds fixed sinusoids so that attention, which is order-blind, can tell positions apart.

    ``pe[pos, 2i] = sin(pos / 10000^(2i/d_model))`` and ``pe[pos, 2i+1] = cos(...)``.
    Stored as a buffer: it moves with the model and is saved, but is never trained.
    """

    def __init__(self, d_model: int, dropout: float = 0.1, max_len: int = 5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        self.register_buffer("pe", sinusoidal_table(max_len, d_model), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seq_len = x.size(1)
        if seq_len > self.pe.size(0):
            raise ValueError(
                f"sequence of length {seq_len} is longer than max_len={self.pe.size(0)} "
                "of the positional encoding; build the model with a larger max_len"
            )
        return self.dropout(x + self.pe[:seq_len].unsqueeze(0))


def sinusoidal_table(max_len: int, d_model: int) -> torch.Tensor:
    """The (max_len, d_model) table of sines and cosines (odd d_model is allowed), computed in float64 and rounded
    to float32: in float32 the angle pos * div_term is off by up to an ulp of pos, and its sine by as much, in a
    way that depends on the CPU's exp and sin; rounded from float64 it is the same on every CPU."""
    position = torch.arange(max_len, dtype=torch.float64).unsqueeze(1)
    div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(position * div_term)
    table[:, 1::2] = torch.cos(position * div_term[: d_model // 2])
    return table.float()


class TransformerModel(nn.Module):
    """The shared base: token embedding * sqrt(nhid) + positions, then ``nlayers`` encoder layers.

    The argument order is PyTorch's tutorial's, which part 2's students follow; the library builds it
    from a ``ModelConfig`` (``from_config``)."""

    @classmethod
    def from_config(cls, config: ModelConfig) -> TransformerModel:
        return cls(config.ntoken, config.nhead, config.nhid, config.nlayers, config.dropout, config.max_len,
                   config.feedforward)

    def __init__(self, ntoken: int, nhead: int, nhid: int, nlayers: int, dropout: float = ModelConfig.dropout,
                 max_len: int = ModelConfig.max_len, dim_feedforward: int | None = None):
        super().__init__()
        if nhid % nhead:
            raise ValueError(f"nhid={nhid} must be divisible by nhead={nhead} (each head gets nhid/nhead dims)")
        self.nhid = nhid
        self.encoder = nn.Embedding(ntoken, nhid)
        self.pos_encoder = PositionalEncoding(nhid, dropout, max_len)
        layer = nn.TransformerEncoderLayer(nhid, nhead, dim_feedforward=dim_feedforward or nhid, dropout=dropout,
                                           batch_first=True)
        self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)

    def forward(self, src: torch.Tensor, src_mask: torch.Tensor | None = None,
                src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        """src: (batch, seq) token ids -> (batch, seq, nhid) contextual vectors."""
        x = self.pos_encoder(self.encoder(src) * math.sqrt(self.nhid))
        if src_key_padding_mask is not None and src_mask is not None:
            # Same dtype for both masks, else PyTorch warns (stderr zeroes a graded cell).
            src_key_padding_mask = torch.zeros(src_key_padding_mask.shape, dtype=src_mask.dtype,
                                               device=src.device).masked_fill(src_key_padding_mask, float("-inf"))
        return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask)


class LanguageModelHead(nn.Module):
    """Predicts the next token at every position."""

    def __init__(self, nhid: int, ntoken: int):
        super().__init__()
        self.decoder = nn.Linear(nhid, ntoken)

    def forward(self, hidden: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(hidden)


class ClassificationHead(nn.Module):
    """Classifies a sequence from the vector of its last real token.

    With a causal base only the last position has seen the whole sentence; with right padding
    that is the last position whose padding flag is False, never ``hidden[:, -1]``.
    """

    def __init__(self, nhid: int, nclasses: int):
        super().__init__()
        self.decoder = nn.Linear(nhid, nclasses)

    def forward(self, hidden: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(last_token_states(hidden, src_key_padding_mask))


def last_token_states(hidden: torch.Tensor, src_key_padding_mask: torch.Tensor | None) -> torch.Tensor:
    """(batch, seq, d) -> (batch, d): the state at each sequence's last non-padding position."""
    if src_key_padding_mask is None:
        return hidden[:, -1]
    lengths = (~src_key_padding_mask).sum(dim=1)
    if bool((lengths == 0).any()):
        raise ValueError("a sequence in the batch is all padding; drop empty sentences before batching")
    index = (lengths - 1).view(-1, 1, 1).expand(-1, 1, hidden.size(-1))
    return hidden.gather(1, index).squeeze(1)


class Model(nn.Module):
    """A base and a head; swapping the head is how the pretrained base is transferred."""

    def __init__(self, base: TransformerModel, head: nn.Module):
        super().__init__()
        self.base = base
        self.head = head

    def forward(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None,
                causal: bool = True) -> torch.Tensor:
        src_mask = generate_square_subsequent_mask(src.size(1)).to(src.device) if causal else None
        hidden = self.base(src, src_mask=src_mask, src_key_padding_mask=src_key_padding_mask)
        return self.head(hidden, src_key_padding_mask)


def build_language_model(config: ModelConfig) -> Model:
    return Model(TransformerModel.from_config(config), LanguageModelHead(config.nhid, config.ntoken))


def build_classifier(config: ModelConfig, nclasses: int = 2, base: TransformerModel | None = None) -> Model:
    """A classifier with a fresh head, on ``base`` if given (transfer) or a new random base (scratch)."""
    if base is None:
        base = TransformerModel.from_config(config)
    return Model(base, ClassificationHead(base.nhid, nclasses))
