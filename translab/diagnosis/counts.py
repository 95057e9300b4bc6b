"""The parameter count's usual mistakes and the smallest combinations of them that explain a student's numbers.

The right count is the sum of ``translab.params.TERMS``, sized by inspection (``params.inspected_sizes``: the formula
itself is part 2's answer, not shipped before its deadline); the usual mistakes (``COUNT_MISTAKES``) leave terms out,
count extra ones, scale some by nlayers or nhead or size them with the wrong variable.  ``explain_counts`` finds the
smallest combinations of mistakes that give exactly the numbers a student's formula gives at several configurations
(``PROBES``: sizes chosen so that the terms separate), and returns every combination of that size: numerically
identical explanations are stated together.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

from ..params import TERMS, TERM_KEYS, formula_text as _sum, inspected_sizes, monomials

@dataclass(frozen=True)
class CountMistake:
    """One way to get the count wrong.  ``omit``: the terms are left out; ``extra``: ``extra(cfg)`` parameters are
    added; ``scale``: each term is multiplied by ``factor(cfg, term)`` (per layer instead of once, by nhead, another
    variable in place of the right one)."""
    key: str
    text: str
    kind: str
    terms: tuple[str, ...] = ()
    factor: Callable | None = field(default=None, compare=False)
    extra: Callable | None = field(default=None, compare=False)


def _keys(**where) -> tuple[str, ...]:
    return tuple(t.key for t in TERMS if all(getattr(t, name) == value for name, value in where.items()))


def head_outputs(cfg: dict) -> int:
    return cfg["ntoken"] if cfg.get("nclasses") is None else cfg["nclasses"]


LINEAR_BIASES = tuple(t.key for t in TERMS if t.kind == "bias" and t.component != "layer_norm")
LAYER_TERMS = _keys(per_layer=True)
ATTENTION = _keys(component="attention")
FEED_FORWARD = _keys(component="feed_forward")
LAYER_NORMS = _keys(component="layer_norm")
HEAD = _keys(component="head")
WHY_NHEAD = ("the number of heads does not change the count: the heads split nhid into nhead slices of nhid/nhead, "
             "so the Q, K, V and out-projections stay nhid x nhid whatever nhead is")


def _omit(key, text, terms) -> CountMistake:
    return CountMistake(f"count.{key}", text, "omit", tuple(terms))


def _scale(key, text, terms, factor) -> CountMistake:
    return CountMistake(f"count.{key}", text, "scale", tuple(terms), factor=factor)


def _nhead_mistakes() -> list[CountMistake]:
    groups = {"the attention (in- and out-projection, weights and biases) is": ATTENTION,
              "the Q, K, V in-projection is": ("in_proj.weight", "in_proj.bias"),
              "the attention weights are": ("in_proj.weight", "out_proj.weight"),
              "the out-projection is": ("out_proj.weight", "out_proj.bias"),
              "the feed-forward is": FEED_FORWARD, "the LayerNorms are": LAYER_NORMS,
              "each encoder layer is": LAYER_TERMS}
    factors = {"multiplied by nhead": lambda c, t: c["nhead"], "divided by nhead": lambda c, t: 1 / c["nhead"],
               "multiplied by nhead/2 (right only when nhead = 2)": lambda c, t: c["nhead"] / 2,
               "multiplied by 2/nhead (right only when nhead = 2)": lambda c, t: 2 / c["nhead"]}
    out = []
    for label, terms in groups.items():
        for how, factor in factors.items():
            out.append(_scale("depends_on_nhead", f"{label} {how}; {WHY_NHEAD}", terms, factor))
    return out


def _term_factor(term_key: str, variable: str, replacement: Callable) -> Callable:
    """Factor that sizes a term with ``replacement(cfg)`` in place of ``variable``."""
    term = next(t for t in TERMS if t.key == term_key)

    def factor(cfg, _key):
        right = cfg[variable] if variable != "outputs" else head_outputs(cfg)
        return (replacement(cfg) / right) ** monomials()[term.key][1].count(variable)
    return factor


def _replace(key, text, terms, variable, replacement) -> CountMistake:
    factors = {t: _term_factor(t, variable, replacement) for t in terms}
    return _scale(key, text, terms, lambda cfg, t: factors[t](cfg, t))


COUNT_MISTAKES: tuple[CountMistake, ...] = (
    _omit("no_biases", "weights counted without biases: every nn.Linear has a bias (Q, K, V in-projection: "
          f"{_sum('in_proj.bias')}, out-projection: {_sum('out_proj.bias')}, feed-forward: "
          f"{_sum('linear1.bias', 'linear2.bias')}, head: its number of outputs)", LINEAR_BIASES),
    _omit("no_layer_norms", "the two LayerNorms of each layer are missing (each has a weight and a bias: "
          f"{_sum(*LAYER_NORMS)} per layer)", LAYER_NORMS),
    _omit("layer_norm_as_nhid", f"each LayerNorm counted as {_sum('norm1.weight')}: it has a weight AND a bias, "
          f"{_sum('norm1.weight', 'norm1.bias')}, so the two LayerNorms of a layer make {_sum(*LAYER_NORMS)}",
          ("norm1.bias", "norm2.bias")),
    _omit("one_layer_norm", "only one LayerNorm per layer; an encoder layer has two (after attention, after "
          f"feed-forward), {_sum('norm2.weight', 'norm2.bias')} each", ("norm2.weight", "norm2.bias")),
    _omit("no_attention_biases", f"the attention's biases are missing: in_proj_bias ({_sum('in_proj.bias')}) and the "
          f"out-projection's bias ({_sum('out_proj.bias')}), per layer", ("in_proj.bias", "out_proj.bias")),
    _omit("no_feed_forward_biases", f"the feed-forward's biases are missing: linear1's ({_sum('linear1.bias')}) and "
          f"linear2's ({_sum('linear2.bias')}), per layer", ("linear1.bias", "linear2.bias")),
    _omit("no_out_projection", "the attention output projection is missing "
          f"({_sum('out_proj.weight', 'out_proj.bias')} per layer)", ("out_proj.weight", "out_proj.bias")),
    _scale("qkv_once", "one projection counted instead of three (Q, K and V each have a weight and a bias of their "
           "own, packed into in_proj)", ("in_proj.weight", "in_proj.bias"), lambda c, t: 1 / 3),
    _scale("attention_times_heads", "the attention is multiplied by the number of heads; " + WHY_NHEAD,
           ATTENTION, lambda c, t: c["nhead"]),
    _omit("no_attention", f"the attention (in- and out-projection: {_sum(*ATTENTION)} per layer) is missing",
          ATTENTION),
    _omit("no_feed_forward", f"the feed-forward ({_sum(*FEED_FORWARD)} per layer) is missing", FEED_FORWARD),
    _omit("no_head", f"the head ({_sum(*HEAD)}) is missing", HEAD),
    _omit("no_embedding", f"the embedding ({_sum('embedding')}) is missing", ("embedding",)),
    CountMistake("count.trainable_positional_encoding", "the positional encoding is counted (max_len*nhid); it is a fixed "
            "buffer (register_buffer), not a parameter", "extra", extra=lambda c: 5000 * c["nhid"]),
    _scale("one_layer", "only one encoder layer counted; multiply by nlayers", LAYER_TERMS, lambda c, t: 1 / c["nlayers"]),
    _scale("layer_norms_once", "the LayerNorms counted once, not in every layer (each layer has its own two)",
           LAYER_NORMS, lambda c, t: 1 / c["nlayers"]),
    _scale("attention_once", "the attention counted once, not in every layer (each layer has its own)",
           ATTENTION, lambda c, t: 1 / c["nlayers"]),
    _scale("feed_forward_once", "the feed-forward counted once, not in every layer (each layer has its own)",
           FEED_FORWARD, lambda c, t: 1 / c["nlayers"]),
    _scale("embedding_per_layer", "the embedding counted in every layer; there is one embedding, before the layers",
           ("embedding",), lambda c, t: c["nlayers"]),
    _scale("head_per_layer", "the head counted in every layer; there is one head, after the layers", HEAD,
           lambda c, t: c["nlayers"]),
    _replace("feed_forward_width_nhid", "the feed-forward counted with width nhid: its hidden size is "
             "dim_feedforward (nhid -> dim_feedforward -> nhid)", FEED_FORWARD, "dim_feedforward", lambda c: c["nhid"]),
    _replace("head_ignores_nclasses", "the head always has ntoken outputs; a classifier's head has nclasses "
             "(ntoken only for the language-model head, nclasses=None)", HEAD, "outputs", lambda c: c["ntoken"]),
    *_nhead_mistakes(),
    *(_omit(f"missing.{t.key}", f"{t.label} is missing ({_sum(t.key)}{' per layer' if t.per_layer else ''})",
            (t.key,)) for t in TERMS),
)
MISTAKES_BY_KEY = {}
for _mistake in COUNT_MISTAKES:
    MISTAKES_BY_KEY.setdefault(_mistake.key, _mistake)

# Configurations at which a student's count_parameters is tried: distinct, mostly prime sizes (nhid a multiple
# of nhead), so that the terms separate; the last four differ only in nhead.
PROBES: tuple[dict, ...] = (
    dict(ntoken=101, nhid=26, nlayers=3, nhead=2, dim_feedforward=34, nclasses=7),
    dict(ntoken=53, nhid=33, nlayers=5, nhead=3, dim_feedforward=19, nclasses=None),
    dict(ntoken=71, nhid=35, nlayers=2, nhead=5, dim_feedforward=43, nclasses=11),
    dict(ntoken=29, nhid=22, nlayers=7, nhead=1, dim_feedforward=17, nclasses=3),
    dict(ntoken=113, nhid=28, nlayers=4, nhead=4, dim_feedforward=23, nclasses=None),
    dict(ntoken=47, nhid=39, nlayers=6, nhead=3, dim_feedforward=29, nclasses=5),
    dict(ntoken=61, nhid=60, nlayers=3, nhead=1, dim_feedforward=37, nclasses=2),
    dict(ntoken=61, nhid=60, nlayers=3, nhead=2, dim_feedforward=37, nclasses=2),
    dict(ntoken=61, nhid=60, nlayers=3, nhead=4, dim_feedforward=37, nclasses=2),
    dict(ntoken=61, nhid=60, nlayers=3, nhead=5, dim_feedforward=37, nclasses=2),
)
NHEAD_PROBES = PROBES[-4:]


def _sizes(cfg: dict) -> list[float]:
    sizes = inspected_sizes(cfg["ntoken"], cfg["nhid"], cfg["nlayers"], cfg["nhead"], cfg["dim_feedforward"],
                            cfg.get("nclasses"))
    return [float(sizes[key]) for key in TERM_KEYS]


def right_count(cfg: dict) -> int:
    return int(sum(_sizes(cfg)))


def mistaken_count(cfg: dict, *keys: str) -> float:
    """The count a formula with these mistakes (keys of ``COUNT_MISTAKES``) gives at ``cfg``."""
    return count_with_mistakes(cfg, [MISTAKES_BY_KEY[key] for key in keys])


def count_with_mistakes(cfg: dict, mistakes) -> float:
    sizes = dict(zip(TERM_KEYS, _sizes(cfg)))
    multiplier = dict.fromkeys(TERM_KEYS, 1.0)
    extra = 0.0
    for mistake in mistakes:
        if mistake.kind == "omit":
            for key in mistake.terms:
                multiplier[key] = 0.0
        elif mistake.kind == "scale":
            for key in mistake.terms:
                multiplier[key] *= mistake.factor(cfg, key)
        else:
            extra += mistake.extra(cfg)
    return sum(multiplier[k] * sizes[k] for k in TERM_KEYS) + extra


def explain_counts(configs: list[dict], found: list[float], max_mistakes: int = 6, limit: int = 6,
                   slack: int = 0):
    """The smallest combinations of ``COUNT_MISTAKES`` that give exactly ``found`` at ``configs``.

    Returns (explanations, total): up to ``limit`` tuples of mistakes (fewest mistakes first, then the most
    plausible), and how many combinations fit.  With ``slack``, combinations of up to ``slack`` more mistakes than
    the smallest are included.  ([], 0) when none fits; [()] when the counts are right."""
    import numpy as np

    sizes = np.array([_sizes(cfg) for cfg in configs])                      # configs x terms
    target = np.array([float(v) for v in found])
    if np.allclose(target, sizes.sum(1), rtol=0, atol=1e-6):
        return [()], 1
    index = {key: i for i, key in enumerate(TERM_KEYS)}
    additive = [m for m in COUNT_MISTAKES if m.kind in ("omit", "extra")]
    modifiers = [m for m in COUNT_MISTAKES if m.kind == "scale"]
    order = {id(m): i for i, m in enumerate(COUNT_MISTAKES)}
    # configurations that differ only in nhead and get the same count: the formula does not use nhead
    families: dict = {}
    for cfg, value in zip(configs, target):
        families.setdefault(tuple((k, v) for k, v in sorted(cfg.items()) if k != "nhead"), []).append(round(value, 6))
    varied = [values for values in families.values() if len(values) > 1]
    nhead_free = bool(varied) and all(len(set(values)) == 1 for values in varied)
    # with one nhead throughout, a factor of nhead cannot be told from a constant: leave nhead out of it
    nhead_free = nhead_free or len({cfg["nhead"] for cfg in configs}) == 1
    halves = _halves(additive)
    found_sets: list[tuple[int, tuple]] = []
    best = max_mistakes + 1
    for modifier in [None, *modifiers]:
        multiplier = np.ones_like(sizes)
        if modifier is not None:
            for key in modifier.terms:
                multiplier[:, index[key]] = [modifier.factor(cfg, key) for cfg in configs]
            if np.allclose(multiplier, 1.0) or (nhead_free and modifier.key == "count.depends_on_nhead"):
                continue
        scaled = multiplier * sizes
        need = target - scaled.sum(1)
        budget = min(best + slack, max_mistakes) - (modifier is not None)
        if budget < 0:
            continue
        vectors = np.array([-scaled[:, [index[k] for k in m.terms]].sum(1) if m.kind == "omit"
                            else [m.extra(cfg) for cfg in configs] for m in additive], dtype=float)
        for combo in _subsets_summing_to(halves, vectors, need, budget):
            mistakes = tuple(sorted((additive[i] for i in combo), key=lambda m: order[id(m)]))
            if modifier is not None:
                omitted = set().union(*(m.terms for m in mistakes if m.kind == "omit")) if mistakes else set()
                if not set(modifier.terms) - omitted:
                    continue  # the modifier would change only terms that are left out anyway
                mistakes = tuple(sorted((*mistakes, modifier), key=lambda m: order[id(m)]))
            cost = len(mistakes)
            best = min(best, cost)
            found_sets.append((cost, sum(order[id(m)] for m in mistakes), mistakes))
    found_sets = [(prior, mistakes) for cost, prior, mistakes in sorted(found_sets, key=lambda item: item[:2])
                  if cost <= best + slack]
    unique = {}
    for prior, mistakes in found_sets:
        unique.setdefault(tuple(m.text for m in mistakes), mistakes)
    explanations = list(unique.values())
    return explanations[:limit], len(explanations)


def _halves(items) -> tuple[list[tuple[int, ...]], list[frozenset]]:
    """Every set of up to 3 of ``items`` whose terms do not overlap (an extra counts as a term of its own)."""
    terms = [frozenset(m.terms) or frozenset({m.key}) for m in items]
    combos, used = [()], [frozenset()]
    for size in (1, 2, 3):
        for combo in itertools.combinations(range(len(items)), size):
            parts = [terms[i] for i in combo]
            union = frozenset().union(*parts)
            if sum(len(p) for p in parts) == len(union):
                combos.append(combo)
                used.append(union)
    return combos, used


def _subsets_summing_to(halves, vectors, need, max_size: int):
    """Index sets of disjoint items of at most ``max_size`` whose ``vectors`` sum to ``need``: meet in the middle
    over two halves of up to 3 items each.  Items whose vector is 0 (no effect here) are never used."""
    import numpy as np
    combos, used = halves
    useless = set(np.flatnonzero(np.all(np.abs(vectors) < 1e-9, axis=1)).tolist())
    keep = [i for i, combo in enumerate(combos) if len(combo) <= max_size and not useless.intersection(combo)]
    incidence = np.zeros((len(keep), len(vectors)))
    for row, i in enumerate(keep):
        incidence[row, list(combos[i])] = 1.0
    sums = np.round(incidence @ vectors, 3) + 0.0  # + 0.0: no negative zeros in the keys
    rest = np.round(need - incidence @ vectors, 3) + 0.0
    table: dict = {}
    for row in range(len(keep)):
        table.setdefault(sums[row].tobytes(), []).append(keep[row])
    out = set()
    for row, i in enumerate(keep):
        for j in table.get(rest[row].tobytes(), ()):
            if used[i] & used[j] or set(combos[i]) & set(combos[j]):
                continue
            union = tuple(sorted(set(combos[i]) | set(combos[j])))
            if len(union) <= max_size:
                out.add(union)
    return sorted(out, key=len)


def _join(parts: list[str]) -> str:
    if len(parts) == 1:
        return parts[0]
    return "; ".join(f"({i}) {p}" for i, p in enumerate(parts, 1))


def describe_explanations(explanations, total: int) -> tuple[str, str]:
    """(text for the student, diagnosis keys) of ``explain_counts``'s result."""
    if not explanations or explanations == [()]:
        return "", ""
    common = [m for m in explanations[0] if all(m in e for e in explanations)]
    rests = [[m for m in e if m not in common] for e in explanations]
    parts = [m.text for m in common]
    keys = [m.key for m in common]
    alternatives = [r for r in rests if r]
    if alternatives:
        texts = [" and ".join(m.text for m in r) for r in alternatives]
        more = total - len(explanations)
        tail = f", or {more} other combination{'s' if more > 1 else ''} of the same size" if more > 0 else ""
        parts.append(", equivalently ".join(texts) + tail +
                     " (these give exactly the same numbers, so the check cannot tell them apart)")
        keys.append("|".join(dict.fromkeys("+".join(m.key for m in r) for r in alternatives)))
    n = len(parts)
    lead = {1: "", 2: "two things at once: ", 3: "three things at once: "}.get(n, f"{n} things at once: ")
    return lead + _join(parts), " ".join(dict.fromkeys(keys))



def close_enough(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-6)


