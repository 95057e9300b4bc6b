"""Counting trainable parameters, by formula and by inspection.

The count is a sum of named terms (``TERMS``), one per parameter tensor of ``Model``: the embedding, per encoder
layer the attention's in-projection (Q, K, V packed) and out-projection, the feed-forward's two Linears and the two
LayerNorms, each a weight and a bias, and the head.  ``TERMS`` says which tensor each term is, not how big: the
formula (``term_sizes``, ``count_parameters_formula``) is part 2's answer, held back from a staged student release
(``grader.course.withheld``).  What the checks' diagnosis of a wrong count needs (``translab.diagnosis``) it takes by
inspection: ``inspected_shapes`` reads the shapes of PyTorch's own modules, built at small sizes,
``monomials`` writes each shape as a product of the sizes, and ``inspected_sizes`` evaluates them.  A test holds
the formula and the inspection equal.
"""
from __future__ import annotations

import functools
import math
import warnings
from dataclasses import dataclass

import torch
from torch import nn

from .model import ModelConfig

VARIABLES = ("ntoken", "nhid", "nlayers", "nhead", "dim_feedforward", "outputs")


@dataclass(frozen=True)
class Term:
    """One parameter tensor of ``Model`` (``per_layer``: one in each encoder layer)."""
    key: str          # short stable name, e.g. "in_proj.bias"
    parameter: str    # the parameter's name in Model: "base.transformer_encoder.layers.*.self_attn.in_proj_bias"
    label: str        # what a student reads
    per_layer: bool
    component: str    # "embedding" | "attention" | "feed_forward" | "layer_norm" | "head"
    kind: str         # "weight" | "bias"


_LAYER = "base.transformer_encoder.layers.*."
TERMS: tuple[Term, ...] = (
    Term("embedding", "base.encoder.weight", "the token embedding", False, "embedding", "weight"),
    Term("in_proj.weight", _LAYER + "self_attn.in_proj_weight", "the Q, K, V projection weights (in_proj_weight)",
         True, "attention", "weight"),
    Term("in_proj.bias", _LAYER + "self_attn.in_proj_bias", "the Q, K, V projection biases (in_proj_bias)",
         True, "attention", "bias"),
    Term("out_proj.weight", _LAYER + "self_attn.out_proj.weight", "the attention's out-projection weight",
         True, "attention", "weight"),
    Term("out_proj.bias", _LAYER + "self_attn.out_proj.bias", "the attention's out-projection bias",
         True, "attention", "bias"),
    Term("linear1.weight", _LAYER + "linear1.weight", "the feed-forward's first weight (linear1, nhid -> ff)",
         True, "feed_forward", "weight"),
    Term("linear1.bias", _LAYER + "linear1.bias", "the feed-forward's first bias (linear1)", True, "feed_forward",
         "bias"),
    Term("linear2.weight", _LAYER + "linear2.weight", "the feed-forward's second weight (linear2, ff -> nhid)",
         True, "feed_forward", "weight"),
    Term("linear2.bias", _LAYER + "linear2.bias", "the feed-forward's second bias (linear2)", True, "feed_forward",
         "bias"),
    Term("norm1.weight", _LAYER + "norm1.weight", "the first LayerNorm's weight", True, "layer_norm", "weight"),
    Term("norm1.bias", _LAYER + "norm1.bias", "the first LayerNorm's bias", True, "layer_norm", "bias"),
    Term("norm2.weight", _LAYER + "norm2.weight", "the second LayerNorm's weight", True, "layer_norm", "weight"),
    Term("norm2.bias", _LAYER + "norm2.bias", "the second LayerNorm's bias", True, "layer_norm", "bias"),
    Term("head.weight", "head.decoder.weight", "the head's weight", False, "head", "weight"),
    Term("head.bias", "head.decoder.bias", "the head's bias", False, "head", "bias"),
)
TERM_KEYS = tuple(term.key for term in TERMS)


def _sizes(ntoken: int, nhid: int, nhead: int, dim_feedforward: int | None, nclasses: int | None) -> dict[str, int]:
    """The sizes a count multiplies: the feed-forward as wide as nhid unless given, the head's outputs ntoken for the
    language-model head (``nclasses=None``)."""
    if nhid % nhead:
        raise ValueError(f"nhid={nhid} must be divisible by nhead={nhead}")
    return {"ntoken": ntoken, "nhid": nhid, "dim_feedforward": nhid if dim_feedforward is None else dim_feedforward,
            "outputs": ntoken if nclasses is None else nclasses}


def inspected_shapes(ntoken: int, nhid: int, nhead: int, dim_feedforward: int, outputs: int) -> dict[str, tuple]:
    """{term key: shape} read from PyTorch's own modules of these sizes: counting by inspection, as
    ``count_trainable_parameters`` does for a built model.  Built on the CPU, so meant for small sizes
    (``monomials``' are a few thousand numbers): on the meta device, the modules' initialisation imports
    ``torch._dynamo``, 1.3 s in every grading checker that diagnoses a count.  The global random state is put back,
    so that inspecting never changes what a seeded run draws next."""
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")  # a size of 0 makes init warn of empty tensors
        modules = {"base.encoder.": nn.Embedding(ntoken, nhid),
                   _LAYER: nn.TransformerEncoderLayer(nhid, nhead, dim_feedforward, batch_first=True),
                   "head.decoder.": nn.Linear(nhid, outputs)}
    shapes = {prefix + name: tuple(tensor.shape) for prefix, module in modules.items()
              for name, tensor in module.named_parameters()}
    return {term.key: shapes[term.parameter] for term in TERMS}


def inspected_sizes(ntoken: int, nhid: int, nlayers: int, nhead: int, dim_feedforward: int | None = None,
                    nclasses: int | None = None) -> dict[str, int]:
    """{term key: parameters} of ``Model``: the inspected shapes' ``monomials`` at these sizes (a product of sizes
    is exact at any size, and quick enough for the diagnosis's searches); equal to ``term_sizes``, a test holds it."""
    values = _sizes(ntoken, nhid, nhead, dim_feedforward, nclasses)
    return {term.key: coefficient * math.prod(values[name] for name in variables) * (nlayers if term.per_layer else 1)
            for term in TERMS for coefficient, variables in [monomials()[term.key]]}


# Sizes at which every dimension of every term names its variable: distinct primes above any coefficient.
_NAMING_SIZES = {"ntoken": 31, "nhid": 11, "dim_feedforward": 13, "outputs": 17}


@functools.lru_cache(maxsize=1)
def monomials() -> dict[str, tuple[int, tuple[str, ...]]]:
    """{term key: (coefficient, variables)}: each inspected shape written as coefficient * product of sizes (per
    layer for a layer's term), e.g. a (3*nhid, nhid) weight as (3, ("nhid", "nhid"))."""
    sizes = _NAMING_SIZES
    shapes = inspected_shapes(sizes["ntoken"], sizes["nhid"], 1, sizes["dim_feedforward"], sizes["outputs"])
    out = {}
    for key, shape in shapes.items():
        coefficient, variables = 1, []
        for dim in shape:
            name = next(name for name, size in sizes.items() if dim % size == 0 and dim // size < min(sizes.values()))
            coefficient *= dim // sizes[name]
            variables.append(name)
        out[key] = (coefficient, tuple(sorted(variables, key=VARIABLES.index)))
    return out


def formula_text(*keys: str) -> str:
    """The terms ``keys`` as a sum of monomials, equal ones added up: ("norm1.weight", "norm1.bias") -> "2*nhid"."""
    summed: dict[tuple[str, ...], int] = {}
    for key in keys:
        coefficient, variables = monomials()[key]
        summed[variables] = summed.get(variables, 0) + coefficient
    return " + ".join("*".join(([str(c)] if c != 1 else []) + list(v)) for v, c in summed.items())


def term_sizes(ntoken: int, nhid: int, nlayers: int, nhead: int, dim_feedforward: int | None = None,
               nclasses: int | None = None) -> dict[str, int]:
    """{term key: parameters} of ``Model`` for this configuration; they sum to ``count_parameters_formula``."""
    sizes = _sizes(ntoken, nhid, nhead, dim_feedforward, nclasses)
    ff, outputs = sizes["dim_feedforward"], sizes["outputs"]
    layer = {"in_proj.weight": 3 * nhid * nhid, "in_proj.bias": 3 * nhid,  # Q, K, V packed; nhead splits, not adds
             "out_proj.weight": nhid * nhid, "out_proj.bias": nhid,
             "linear1.weight": nhid * ff, "linear1.bias": ff, "linear2.weight": ff * nhid, "linear2.bias": nhid,
             "norm1.weight": nhid, "norm1.bias": nhid, "norm2.weight": nhid, "norm2.bias": nhid}
    return {"embedding": ntoken * nhid, **{key: size * nlayers for key, size in layer.items()},
            "head.weight": nhid * outputs, "head.bias": outputs}


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
FORMULA_FUNCTIONS = (count_parameters_formula, encoder_layer_parameters, term_sizes, count_trainable_parameters,
                     inspected_sizes, inspected_shapes, monomials, formula_text)
