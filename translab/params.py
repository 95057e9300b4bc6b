"""Counting trainable parameters, by formula and by inspection.

The formula is a sum of named terms (``TERMS``), one per parameter tensor of ``Model``: the embedding, per encoder
layer the attention's in-projection (Q, K, V packed) and out-projection, the feed-forward's two Linears and the two
LayerNorms, each a weight and a bias, and the head.  Each term is one monomial in (ntoken, nhid, nlayers,
dim_feedforward, outputs), ``outputs`` being ntoken for the language-model head and nclasses for a classifier.  The
number of heads appears in none of them.  The reference formula, the checks' diagnosis of wrong counts
(``translab.diagnosis``) and the tests all use this one list.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from torch import nn

from .model import ModelConfig

VARIABLES = ("ntoken", "nhid", "nlayers", "nhead", "dim_feedforward", "outputs")


@dataclass(frozen=True)
class Term:
    """``coefficient * product(factors)`` parameters, times nlayers when ``per_layer``."""
    key: str          # short stable name, e.g. "in_proj.bias"
    parameter: str    # the parameter's name in Model: "base.transformer_encoder.layers.*.self_attn.in_proj_bias"
    label: str        # what a student reads
    coefficient: int
    factors: tuple[str, ...]
    per_layer: bool
    component: str    # "embedding" | "attention" | "feed_forward" | "layer_norm" | "head"
    kind: str         # "weight" | "bias"

    @property
    def formula(self) -> str:
        text = "*".join(([str(self.coefficient)] if self.coefficient != 1 else []) + list(self.factors))
        return f"{text} per layer" if self.per_layer else text


_LAYER = "base.transformer_encoder.layers.*."
TERMS: tuple[Term, ...] = (
    Term("embedding", "base.encoder.weight", "the token embedding", 1, ("ntoken", "nhid"), False, "embedding", "weight"),
    Term("in_proj.weight", _LAYER + "self_attn.in_proj_weight", "the Q, K, V projection weights (in_proj_weight)",
         3, ("nhid", "nhid"), True, "attention", "weight"),
    Term("in_proj.bias", _LAYER + "self_attn.in_proj_bias", "the Q, K, V projection biases (in_proj_bias)",
         3, ("nhid",), True, "attention", "bias"),
    Term("out_proj.weight", _LAYER + "self_attn.out_proj.weight", "the attention's out-projection weight",
         1, ("nhid", "nhid"), True, "attention", "weight"),
    Term("out_proj.bias", _LAYER + "self_attn.out_proj.bias", "the attention's out-projection bias",
         1, ("nhid",), True, "attention", "bias"),
    Term("linear1.weight", _LAYER + "linear1.weight", "the feed-forward's first weight (linear1, nhid -> ff)",
         1, ("nhid", "dim_feedforward"), True, "feed_forward", "weight"),
    Term("linear1.bias", _LAYER + "linear1.bias", "the feed-forward's first bias (linear1, size ff)",
         1, ("dim_feedforward",), True, "feed_forward", "bias"),
    Term("linear2.weight", _LAYER + "linear2.weight", "the feed-forward's second weight (linear2, ff -> nhid)",
         1, ("dim_feedforward", "nhid"), True, "feed_forward", "weight"),
    Term("linear2.bias", _LAYER + "linear2.bias", "the feed-forward's second bias (linear2, size nhid)",
         1, ("nhid",), True, "feed_forward", "bias"),
    Term("norm1.weight", _LAYER + "norm1.weight", "the first LayerNorm's weight", 1, ("nhid",), True, "layer_norm", "weight"),
    Term("norm1.bias", _LAYER + "norm1.bias", "the first LayerNorm's bias", 1, ("nhid",), True, "layer_norm", "bias"),
    Term("norm2.weight", _LAYER + "norm2.weight", "the second LayerNorm's weight", 1, ("nhid",), True, "layer_norm", "weight"),
    Term("norm2.bias", _LAYER + "norm2.bias", "the second LayerNorm's bias", 1, ("nhid",), True, "layer_norm", "bias"),
    Term("head.weight", "head.decoder.weight", "the head's weight (nhid x outputs)", 1, ("nhid", "outputs"), False,
         "head", "weight"),
    Term("head.bias", "head.decoder.bias", "the head's bias (one per output)", 1, ("outputs",), False, "head", "bias"),
)
TERM_KEYS = tuple(term.key for term in TERMS)


def term_sizes(ntoken: int, nhid: int, nlayers: int, nhead: int, dim_feedforward: int | None = None,
               nclasses: int | None = None) -> dict[str, int]:
    """{term key: parameters} of ``Model`` for this configuration; they sum to ``count_parameters_formula``."""
    if nhid % nhead:
        raise ValueError(f"nhid={nhid} must be divisible by nhead={nhead}")
    values = {"ntoken": ntoken, "nhid": nhid, "nlayers": nlayers, "nhead": nhead,
              "dim_feedforward": nhid if dim_feedforward is None else dim_feedforward,
              "outputs": ntoken if nclasses is None else nclasses}
    return {term.key: term.coefficient * math.prod(values[f] for f in term.factors) * (nlayers if term.per_layer else 1)
            for term in TERMS}


def encoder_layer_parameters(nhid: int, dim_feedforward: int) -> int:
    """One ``nn.TransformerEncoderLayer``; the number of heads does not change it.

    Attention: in-projection for Q, K, V (3 nhid x nhid weights + 3 nhid biases) and the
    out-projection (nhid x nhid + nhid).  Feed-forward: nhid -> ff -> nhid with biases.
    Two LayerNorms, each a weight and a bias of size nhid.
    """
    sizes = term_sizes(0, nhid, 1, 1, dim_feedforward, 0)
    return sum(sizes[term.key] for term in TERMS if term.per_layer)


def count_parameters_formula(config: ModelConfig, nclasses: int | None = None) -> int:
    """Trainable parameters of ``Model``: embedding + layers + head, the sum of ``TERMS``.

    ``nclasses=None`` means the language-model head (nhid -> ntoken).  The positional
    encoding is a fixed buffer and contributes nothing.
    """
    return sum(term_sizes(config.ntoken, config.nhid, config.nlayers, config.nhead, config.feedforward,
                          nclasses).values())


def split_config(cfg: dict) -> tuple[ModelConfig, int | None]:
    """A count's configuration as the references store it (model fields + ``nclasses``) -> (config, nclasses)."""
    return ModelConfig(**{k: v for k, v in cfg.items() if k != "nclasses"}), cfg.get("nclasses")


def count_trainable_parameters(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


# What a check switches off while a student's count runs (``translab.checks.forbid``).
FORMULA_FUNCTIONS = (count_parameters_formula, encoder_layer_parameters, term_sizes, count_trainable_parameters)
