"""What a wrong answer most likely got wrong, for the checks' feedback (``translab.checks``) and the report.

Parameter counts are diagnosed by structure.  The right count is the sum of ``translab.params.TERMS``, sized by
inspection (``params.inspected_sizes``: the formula itself is part 2's answer, not shipped before its deadline);
the usual mistakes (``COUNT_MISTAKES``) leave terms out, count extra ones, scale some by nlayers or nhead or size
them with the wrong variable.  ``explain_counts`` finds the smallest combinations of mistakes that give exactly the numbers a
student's formula gives at several configurations (``PROBES``: sizes chosen so that the terms separate), and
returns every combination of that size: numerically identical explanations are stated together.

Every misconception a check names has a stable key (``KEYS`` and the count mistakes' keys): a failing check
ends its error value with ``[diagnosis: key ...]`` (alternatives that give identical numbers joined by ``|``), which
``grader.report`` counts.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Callable

from .params import TERMS, TERM_KEYS, formula_text as _sum, inspected_sizes, monomials
from .relations import KEYS as RELATION_KEYS

# ----------------------------------------------------------------- the parameter count


@dataclass(frozen=True)
class Mistake:
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


def _outputs(cfg: dict) -> int:
    return cfg["ntoken"] if cfg.get("nclasses") is None else cfg["nclasses"]


LINEAR_BIASES = tuple(t.key for t in TERMS if t.kind == "bias" and t.component != "layer_norm")
LAYER_TERMS = _keys(per_layer=True)
ATTENTION = _keys(component="attention")
FEED_FORWARD = _keys(component="feed_forward")
LAYER_NORMS = _keys(component="layer_norm")
HEAD = _keys(component="head")
WHY_NHEAD = ("the number of heads does not change the count: the heads split nhid into nhead slices of nhid/nhead, "
             "so the Q, K, V and out-projections stay nhid x nhid whatever nhead is")


def _omit(key, text, terms) -> Mistake:
    return Mistake(f"count.{key}", text, "omit", tuple(terms))


def _scale(key, text, terms, factor) -> Mistake:
    return Mistake(f"count.{key}", text, "scale", tuple(terms), factor=factor)


def _nhead_mistakes() -> list[Mistake]:
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
        right = cfg[variable] if variable != "outputs" else _outputs(cfg)
        return (replacement(cfg) / right) ** monomials()[term.key][1].count(variable)
    return factor


def _replace(key, text, terms, variable, replacement) -> Mistake:
    factors = {t: _term_factor(t, variable, replacement) for t in terms}
    return _scale(key, text, terms, lambda cfg, t: factors[t](cfg, t))


COUNT_MISTAKES: tuple[Mistake, ...] = (
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
    Mistake("count.trainable_positional_encoding", "the positional encoding is counted (max_len*nhid); it is a fixed "
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


# ----------------------------------------------------------------- keys of the other checks' diagnoses

KEYS = {
    "not_written": "the answer is not written yet (NotImplementedError)",
    "calls_translab": "the answer calls translab's own implementation",
    "raised": "the answer raised an exception",
    "mutates_input": "the answer changes a tensor it was given, in place",
    "stderr_warning": "the answer printed a warning to stderr",
    "wrong_type": "the answer returns the wrong type (not a tensor / not a number)",
    "wrong_dtype": "the answer returns the wrong dtype",
    "wrong_device": "the answer returns a tensor on another device",
    "wrong_shape": "the answer returns the wrong shape",
    "checker_error": "the check could not compare the answer (an unexpected kind of answer)",
    "mask.ones": "a 'keep' mask of 1s on and below the diagonal instead of 0 / -inf",
    "mask.zero_one": "a mask of 0 and 1 instead of 0 / -inf",
    "mask.boolean": "a boolean mask instead of an additive float mask",
    "mask.integer": "an integer mask (cannot hold -inf)",
    "mask.diagonal_blocked": "the diagonal is blocked (triu without diagonal=1)",
    "mask.blocks_past": "the mask blocks the past instead of the future (tril instead of triu)",
    "mask.nonzero_allowed": "allowed positions are not 0",
    "mask.finite_negative": "a large negative number instead of -inf",
    "mask.nan": "NaN where the mask must be 0 (a 0/1 triangle multiplied by -inf)",
    "pe.trainable": "the positional encoding is a trainable parameter instead of a buffer",
    "pe.dtype": "the positional-encoding table is not float32 (e.g. float64)",
    "pe.sin_cos_swapped": "sin and cos swapped",
    "pe.exponent_i": "exponent i/d_model instead of 2i/d_model",
    "pe.base_100": "base 100 instead of 10000",
    "pe.halves": "sin in the first half, cos in the second, instead of interleaved",
    "pe.positions_from_1": "positions counted from 1 instead of 0",
    "pe.rows_order": "table rows reversed or transposed",
    "pe.multiplied": "the encoding multiplies the input instead of being added",
    "pe.nothing_added": "the positional encoding returns its input unchanged",
    "pe.not_batch_first": "the encoding is added along the wrong axis (not batch-first)",
    "pe.scales_input": "the encoding multiplies its input (by sqrt(d_model)) before adding the table",
    "attention.no_scale": "attention scores not divided by sqrt(d)",
    "attention.scale_by_d": "attention scores divided by d instead of sqrt(d)",
    "attention.softmax_wrong_axis": "attention softmax over the queries (dim=-2)",
    "attention.mask_ignored": "the attention mask is not added to the scores",
    "attention.mask_as_keep": "the additive mask read as a keep-mask (masked_fill(mask == 0, ...)): only blocked keys "
                              "weigh",
    "attention.mask_after_softmax": "the mask added (or multiplied) after the softmax: -inf or NaN in the weights",
    "attention.zeroed_after_softmax": "masked weights zeroed after the softmax: rows no longer sum to 1",
    "attention.not_softmax": "attention weights that are not a softmax over the keys",
    "attention.three_axes_only": "attention written for 3-D inputs only (bmm, 'bqd' einsum, transpose(1, 2))",
    "mha.qkv_order": "q, k, v taken from in_proj_weight in the wrong order",
    "mha.split_no_transpose": "heads split by view(batch, heads, seq, d_head), cutting the sequence",
    "mha.merge_no_transpose": "heads merged without transposing back",
    "mha.scale_by_d_model": "multi-head scores divided by sqrt(d_model) instead of sqrt(d_head)",
    "mha.no_out_proj": "no output projection after merging the heads",
    "mha.no_in_bias": "in_proj_bias not added",
    "mha.weight_not_transposed": "projections computed as x @ W instead of x @ W.T",
    "mha.weights_averaged": "the weights averaged over the heads (nn.MultiheadAttention's default)",
    "model.load_state": "the model's parameter names or sizes do not fit the skeleton",
    "model.no_scale": "embeddings not multiplied by sqrt(nhid)",
    "model.no_positions": "positional encoding not applied",
    "model.no_causal_mask": "src_mask not passed to the encoder",
    "model.no_padding_mask": "src_key_padding_mask not passed to the encoder",
    "model.masks_not_optional": "forward(src) without masks fails or differs",
    "heads.lm_softmax": "the LM head applies a softmax",
    "heads.last_position": "the classifier reads position -1 (padding for short sentences)",
    "heads.first_position": "the classifier reads the first position",
    "heads.mean": "the classifier averages over all positions, padding included",
    "heads.no_padding_mask_default": "the classifier without a padding mask does not read the last position",
    "model.not_registered": "Model does not register base and head as submodules",
    "model.not_causal": "Model(src) is not causal",
    "model.causal_false_masks": "causal=False still masks the future",
    "model.padding_not_to_head": "Model does not pass the padding mask on to the head",
    "model.mask_from_batch": "Model builds the causal mask from src.size(0), the batch size",
    "count.not_a_number": "the count is not a number (a string, a non-integral float, ...)",
    "count.depends_on_nhead": "the count depends on nhead",
    "count.unexplained": "a wrong count that matches no known combination of mistakes",
    "model.layer_size": "a layer of another size than the reference's (where the size comes from named)",
    "model.renamed": "a layer under another attribute name than the skeleton's",
    "model.missing_layer": "a layer of the reference missing from the module",
    "model.extra_layer": "a layer the reference does not have",
    "count.other_configuration": "a stated count that is right for another configuration or head",
    "count.another_variant": "both stated counts are another configuration's: another student's variant, or the "
                             "worked example (numbers passed around, or the wrong configuration)",
    "count.constant": "the count is a constant: the formula does not use the sizes",
    "count.coefficients": "the count is an exact formula of the sizes with other coefficients (fitted)",
    **{f"count.ignores_{name}": f"the count does not change with {name}"
       for name in ("ntoken", "nhid", "nlayers", "dim_feedforward", "nclasses")},
    "targets.copy": "targets equal inputs",
    "targets.swapped": "inputs and targets swapped",
    "targets.rolled": "targets made with roll: the last target wraps round to the first token",
    "targets.lengths_differ": "inputs keep every token, targets one fewer",
    "targets.batch_axis": "the shift runs along the batch axis instead of the sequence",
    "loss.not_scalar": "the loss is not a scalar tensor",
    "loss.detached": "the loss is detached from the graph",
    "loss.softmax_first": "softmax applied before CrossEntropyLoss",
    "loss.padding_counted": "padding positions counted in the loss",
    "loss.sum": "the loss is summed instead of averaged",
    "loss.nll_on_logits": "nll_loss on raw logits (it expects log-probabilities)",
    "loss.class_axis": "logits handed to cross-entropy as (batch, seq, vocab): the classes belong on axis 1",
    "greedy.returns_prompt": "greedy generation returns the prompt too",
    "greedy.includes_eos": "greedy generation includes the end token",
    "greedy.no_stop": "greedy generation does not stop at the end token",
    "greedy.no_eval": "greedy generation without model.eval() (dropout on)",
    "greedy.too_few": "greedy generation stops one token before max_new_tokens",
    "accuracy.count": "accuracy returned as a count",
    "accuracy.percentage": "accuracy returned as a percentage",
    "accuracy.no_padding_mask": "accuracy ignores the padding mask",
    "accuracy.no_eval": "accuracy without model.eval() / no_grad",
    "transfer.changes_lm": "transfer changes the pretrained LM",
    "transfer.not_pretrained": "the classifier's base does not hold the pretrained weights",
    "transfer.shared_weights": "the classifier shares weights with the pretrained LM (no deepcopy)",
    "transfer.keeps_lm_head": "the classifier keeps the LM head",
    "transfer.frozen": "some parameters are frozen",
    "masking.in_place": "mask_tokens modifies ids in place",
    "masking.special_chosen": "special tokens chosen for prediction",
    "masking.special_changed": "special tokens changed in the inputs",
    "masking.labels_everywhere": "every position has a label",
    "masking.wrong_labels": "labels at chosen positions are not the original tokens",
    "masking.unchosen_changed": "tokens that were not chosen were changed",
    "masking.out_of_vocabulary": "inputs hold ids outside the vocabulary",
    "masking.no_generator": "masking not reproducible with the generator",
    "masking.fixed_choice": "the same choice of tokens for every seed",
    "masking.rate": "the wrong share of tokens chosen",
    "masking.all_masked": "every chosen token replaced by MASK (no 80/10/10)",
    "masking.no_random": "the random 10 % is missing",
    "masking.random_20": "20 % random, none unchanged",
    "masking.split": "the 80/10/10 split is off",
    "masking.few_random_ids": "random replacements use few distinct ids",
    "masking.random_special": "random replacements include special tokens (PAD, MASK, ...)",
    "masking.ignore_index": "labels use a negative ignore index (-100) instead of PAD_ID",
    "mlm.causal": "the MLM loss uses the causal mask",
    "mlm.all_positions": "the MLM loss is computed at every position (PAD_ID counted as a target)",
    "mlm.inputs_as_labels": "the MLM loss predicts the masked inputs instead of the labels",
    "mlm.detached": "the MLM loss carries no gradient",
    "bert.scaled": "BERT's word embeddings scaled by sqrt(hidden_size), as in part 2",
    "bert.no_embedding_norm": "no LayerNorm over the summed embeddings",
    "bert.no_positions": "no position embeddings added",
    "bert.no_token_types": "no token-type embeddings added",
    "bert.types_ignored": "token_type_ids ignored when given",
    "bert.relu": "ReLU in the feed-forward (PyTorch's default) instead of BERT's GELU",
    "bert.tanh_gelu": "the tanh approximation of GELU instead of the exact one",
    "bert.pre_ln": "pre-LN layers (norm_first=True); BERT is post-LN",
    "bert.no_padding_mask": "the padding mask not passed to the encoder",
    "bert.padding_inverted": "the padding mask inverted (Hugging Face's attention_mask convention): NaN outputs",
    "bert.layer_norm_eps": "LayerNorms with PyTorch's eps instead of config.layer_norm_eps",
    "mapping.qkv_order": "query, key and value packed into in_proj in another order",
    "mapping.qkv_axis": "query, key and value stacked along dim=1 (or the stack transposed)",
    "mapping.qkv_not_packed": "query, key and value not packed into in_proj_weight / in_proj_bias",
    "mapping.transposed": "checkpoint weights transposed (nn.Linear and the checkpoint both keep (out, in))",
    "mapping.norms_swapped": "a layer's two LayerNorms swapped",
    "mapping.not_copied": "a tensor left at its initial value (never copied)",
    "mapping.other_layer": "a tensor taken from another layer of the checkpoint",
    "mapping.wrong_source": "a parameter filled from the wrong checkpoint tensor",
    "mapping.values_changed": "tensors copied with other values (scaled, re-initialised, ...)",
    "mapping.checkpoint_names": "the state dict keeps the checkpoint's names instead of BertBase's",
    "mapping.extra_tensors": "the pooler or position_ids kept in the state dict",
    "mapping.missing_tensor": "a parameter missing from the state dict (a bias, a LayerNorm, in_proj_bias)",
    "mapping.layer_count": "a fixed number of layers instead of config.num_hidden_layers",
    "mapping.names": "state-dict names that are not BertBase's",
    "classifier.mean_with_padding": "the classifier averages every position, padding included",
    "classifier.last_real_token": "the classifier reads each sentence's last real token (part 4's readout)",
    "classifier.first_token": "the classifier reads [CLS] alone instead of the mean of the real tokens",
    "classifier.last_position": "the classifier reads the last position (padding for short sentences)",
    "classifier.sum": "the classifier sums the real tokens instead of averaging them",
    "classifier.max": "the classifier max-pools the real tokens instead of averaging them",
    "classifier.no_padding_mask": "the encoder run without the padding mask",
    "classifier.types_ignored": "token_type_ids not passed on to the encoder",
    "classifier.padding_inverted": "the classifier averages the padding (padding_mask read as an attention_mask)",
    **RELATION_KEYS,  # what an output measurably is (translab.relations)
}


# Keys that say why a check could not judge the answer rather than what the student misunderstood.
NOT_MISCONCEPTIONS = frozenset({"not_written", "calls_translab", "raised", "checker_error", "count.unexplained",
                                "count.another_variant"})


def describe(key: str) -> str | None:
    """A short description of a diagnosis key, for the instructor's report (None if unknown)."""
    if key in KEYS:
        return KEYS[key]
    if "|" in key:
        parts = [describe(k) for k in key.split("|")]
        return " = ".join(p for p in parts if p) or None
    if "+" in key:
        parts = [describe(k) for k in key.split("+")]
        return " and ".join(p for p in parts if p) or None
    mistake = MISTAKES_BY_KEY.get(key)
    if mistake is not None:
        return mistake.text.split(";")[0].split(":")[0] if key != "count.depends_on_nhead" else KEYS[key]
    return None


def is_valid_key(key: str) -> bool:
    import re
    return bool(re.fullmatch(r"[a-z0-9_.+|-]{1,200}", key))


def close_enough(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=0, abs_tol=1e-6)


# ----------------------------------------------------------------- locating an unexplained count error

LOCATE_BASE = dict(ntoken=53, nhid=30, nlayers=3, nhead=2, dim_feedforward=41, nclasses=7)
LOCATE_STEPS = dict(ntoken=59, nhid=42, nlayers=5, nhead=3, dim_feedforward=47, nclasses=11)
WHERE = {"nlayers": "the encoder layers (it grows with nlayers)", "nclasses": "the head",
         "ntoken": "the embedding (or the LM head)", "dim_feedforward": "the feed-forward",
         "nhead": "a term that uses nhead (none should)", "nhid": "a term of size nhid"}


def error_dependence(count: Callable[[dict], float | None]) -> list[str] | None:
    """The variables that a wrong count's error changes with, one variable changed at a time from
    ``LOCATE_BASE``; None when the count cannot be evaluated there."""
    base = count(LOCATE_BASE)
    if base is None:
        return None
    error = base - right_count(LOCATE_BASE)
    changes = []
    for variable, value in LOCATE_STEPS.items():
        cfg = {**LOCATE_BASE, variable: value}
        found = count(cfg)
        if found is None:
            return None
        if not close_enough(found - right_count(cfg), error):
            changes.append(variable)
    return changes


def locate_text(variables: list[str]) -> str:
    if not variables:
        return "the error is the same whatever the sizes: a constant is added or missing"
    others = [v for v in LOCATE_STEPS if v not in variables]
    places = [WHERE[v] for v in ("nlayers", "dim_feedforward", "nclasses", "ntoken", "nhead") if v in variables]
    return (f"the error changes with {', '.join(variables)}" + (f" but not with {', '.join(others)}" if others else "")
            + (f": look at {'; '.join(places)}" if places else ""))


# ----------------------------------------------------------------- a count as a formula, fitted

# The monomials a parameter count can be made of, with what the right count holds of each (or why it holds
# none).  How often the right count has each (``right_coefficients``) is read from the inspected terms, not written
# here.  A count that fits a combination of them exactly at many configurations is named by the coefficients that
# differ.
MONOMIALS: dict[str, tuple[Callable, str]] = {
    "ntoken*nhid": (lambda c: c["ntoken"] * c["nhid"], "the embedding, once"),
    "nlayers*nhid*nhid": (lambda c: c["nlayers"] * c["nhid"] ** 2,
                          "per layer the Q, K, V projections and the out-projection, nhid x nhid each"),
    "nlayers*nhid*dim_feedforward": (lambda c: c["nlayers"] * c["nhid"] * c["dim_feedforward"],
                                     "per layer the feed-forward's two weights, nhid x dim_feedforward each"),
    "nlayers*dim_feedforward": (lambda c: c["nlayers"] * c["dim_feedforward"], "per layer linear1's bias"),
    "nlayers*nhid": (lambda c: c["nlayers"] * c["nhid"], "per layer the Q, K, V biases, the out-projection's and "
                     "linear2's biases, and the two LayerNorms with a weight and a bias each"),
    "nhid*outputs": (lambda c: c["nhid"] * _outputs(c), "the head's weight, once (outputs = ntoken for the LM "
                     "head, nclasses for a classifier)"),
    "outputs": (lambda c: _outputs(c), "the head's bias, once"),
    "nhid*nhid": (lambda c: c["nhid"] ** 2, "nothing is nhid x nhid outside the layers"),
    "nhid*dim_feedforward": (lambda c: c["nhid"] * c["dim_feedforward"], "the feed-forward is inside every layer"),
    "nhid": (lambda c: c["nhid"], "no vector of size nhid outside the layers (the positional encoding is a buffer)"),
    "dim_feedforward": (lambda c: c["dim_feedforward"], "linear1's bias is inside every layer"),
    "nlayers*ntoken*nhid": (lambda c: c["nlayers"] * c["ntoken"] * c["nhid"], "there is one embedding"),
    "nlayers*nhid*outputs": (lambda c: c["nlayers"] * c["nhid"] * _outputs(c), "there is one head"),
    "nhid*ntoken (classifier)": (lambda c: c["nhid"] * c["ntoken"] if c.get("nclasses") is not None else 0,
                                 "a classifier's head has nclasses outputs, not ntoken"),
    "1": (lambda c: 1, "no constant"),
}


def right_coefficients() -> dict[str, int]:
    """{name in ``MONOMIALS``: how often the right count has it}, from the inspected terms (``params.monomials``)."""
    right = dict.fromkeys(MONOMIALS, 0)
    for term in TERMS:
        coefficient, variables = monomials()[term.key]
        right["*".join((["nlayers"] if term.per_layer else []) + list(variables))] += coefficient
    return right


def fit_configs(count: int = 24) -> list[dict]:
    """Configurations to fit a count at: more than the monomials, sizes drawn once (a fixed seed), heads dividing
    nhid, half of them classifiers."""
    import random
    draw = random.Random(20261125)
    configs = []
    while len(configs) < count:
        nhead = draw.choice([1, 2, 3, 4, 5])
        cfg = dict(ntoken=draw.randrange(20, 400), nhid=nhead * draw.randrange(3, 40), nlayers=draw.randrange(1, 9),
                   nhead=nhead, dim_feedforward=draw.randrange(8, 300),
                   nclasses=None if len(configs) % 2 else draw.randrange(2, 12))
        configs.append(cfg)
    return configs


def fit_count(count: Callable[[dict], float | None]) -> dict[str, float] | None:
    """The coefficients of ``MONOMIALS`` that give ``count`` exactly at every ``fit_configs()``, or None when no
    combination does (or the count cannot be evaluated)."""
    import numpy as np
    configs = fit_configs()
    values = [count(cfg) for cfg in configs]
    if any(value is None for value in values):
        return None
    names = list(MONOMIALS)
    design = np.array([[float(MONOMIALS[name][0](cfg)) for name in names] for cfg in configs])
    target = np.array(values, dtype=float)
    solution = np.linalg.lstsq(design, target, rcond=None)[0]
    rounded = np.round(solution * 12) / 12  # halves, thirds, quarters: the fractions a mistake makes
    if not np.allclose(design @ rounded, target, rtol=0, atol=0.5):
        return None
    return {name: float(value) for name, value in zip(names, rounded)}


def _coefficient(value: float) -> str:
    from fractions import Fraction
    return str(Fraction(value).limit_denominator(12))


def describe_fit(coefficients: dict[str, float]) -> str:
    """The coefficients that differ from the right formula's, each with what the right one counts."""
    right = right_coefficients()
    wrong = [(name, value) for name, value in coefficients.items() if abs(value - right[name]) > 1e-9]
    parts = [f"{_coefficient(value)} x {name} where the right count has {right[name]} ({MONOMIALS[name][1]})"
             for name, value in wrong]
    formula = " + ".join(name if value == 1 and name != "1" else f"{value:,.0f}" if name == "1" else
                         f"{_coefficient(value)}*{name}" for name, value in coefficients.items() if value)
    return f"your count is exactly {formula or '0'} at every size tried: " + "; ".join(parts)


def ignored_variables(count: Callable[[dict], float | None]) -> list[str]:
    """The variables a count does not change with, one changed at a time from ``LOCATE_BASE``, where the right count
    does (nhead excepted: the right count ignores it too)."""
    base = count(LOCATE_BASE)
    if base is None:
        return []
    ignored = []
    for variable, value in LOCATE_STEPS.items():
        cfg = {**LOCATE_BASE, variable: value}
        found = count(cfg)
        if variable != "nhead" and found is not None and close_enough(found, base) \
                and right_count(cfg) != right_count(LOCATE_BASE):
            ignored.append(variable)
    return ignored


# ----------------------------------------------------------------- a number right for another configuration

WHY_VALUE = {("dim_feedforward", 2048): "nn.TransformerEncoderLayer's default when dim_feedforward is not passed"}
VARIABLES = ("ntoken", "nhid", "nlayers", "dim_feedforward", "nclasses")


LARGEST = 8192  # the largest size tried for a variable (nclasses: 1 to 64, or the LM head)
NOT_FOUND = object()


def configuration_text(variable: str, value) -> str:
    if variable == "nclasses":
        return "the LM head (ntoken outputs)" if value is None else f"a {value}-class head"
    why = WHY_VALUE.get((variable, value))
    return f"{variable}={value}" + (f" ({why})" if why else "")


def configurations_counting(lm: float, classifier: float, exclude: dict | None = None) -> list[dict]:
    """Configurations (feed-forward width nhid, as part 2's model; nhead left out: it changes no count) whose
    right counts are ``lm`` with the LM head and ``classifier`` with some classifier head, other than ``exclude``:
    the numbers of another student's variant, or of the worked example."""
    found = []
    for nhid in range(8, 1025, 8):
        for nlayers in range(1, 25):
            shape = dict(nhid=nhid, nlayers=nlayers, nhead=1, dim_feedforward=nhid)
            # both counts are linear in ntoken and nclasses: solved for them from the counts at 0 and 1
            fixed = right_count({**shape, "ntoken": 0, "nclasses": 0})
            ntoken, left = divmod(lm - fixed, right_count({**shape, "ntoken": 1, "nclasses": None}) - fixed)
            if left or ntoken < 2:
                continue
            nclasses, left = divmod(classifier - right_count({**shape, "ntoken": int(ntoken), "nclasses": 0}),
                                    right_count({**shape, "ntoken": 0, "nclasses": 1}) - fixed)
            cfg = dict(ntoken=int(ntoken), nhid=nhid, nlayers=nlayers, nclasses=int(nclasses))
            if not left and 2 <= nclasses <= 64 and cfg != {k: (exclude or {}).get(k) for k in cfg}:
                found.append(cfg)
    return found


def value_giving(cfg: dict, variable: str, count: float, exclude=NOT_FOUND):
    """The first value of ``variable`` (the others as in ``cfg``, nhid a multiple of nhead) whose right count is
    ``count``, other than ``exclude``; ``NOT_FOUND`` when none up to ``LARGEST`` does."""
    if variable == "nclasses":
        candidates = [None, *range(1, 65)]
    elif variable == "nhid":
        candidates = range(cfg["nhead"], LARGEST + 1, cfg["nhead"])
    else:
        candidates = range(1, LARGEST + 1)
    return next((c for c in candidates if c != exclude and right_count({**cfg, variable: c}) == count), NOT_FOUND)


def other_readings(cfg: dict, value: float) -> list[str]:
    """The configurations, one variable changed from ``cfg`` (or the other head), whose right count is ``value``:
    a number that answers another question than the one asked.  Also the count with the positional table counted."""
    found = []
    for variable in VARIABLES:
        hit = value_giving(cfg, variable, value, exclude=cfg.get(variable))
        if hit is not NOT_FOUND:
            found.append(configuration_text(variable, hit))
    for max_len in (5000, 512, 1024, 2048):
        if right_count(cfg) + max_len * cfg["nhid"] == value:
            found.append(f"the positional table counted as parameters (max_len={max_len} x nhid): it is a buffer")
    ratio = ratio_reading(right_count(cfg), value)
    return found or ([ratio] if ratio else [])


def fixed_values(count: Callable[[dict], float | None], variables: list[str]) -> dict[str, object]:
    """For each variable a count ignores, the value it counts as if it were fixed at, where one fits at two
    configurations (``LOCATE_BASE`` and ``LOCATE_STEPS``)."""
    fixed = {}
    for variable in variables:
        hits = []
        for cfg in (LOCATE_BASE, {**LOCATE_BASE, **{k: v for k, v in LOCATE_STEPS.items() if k != variable}}):
            value = count(cfg)
            hits.append(NOT_FOUND if value is None else value_giving(cfg, variable, value))
        if hits[0] is not NOT_FOUND and hits[0] == hits[1]:
            fixed[variable] = hits[0]
    return fixed


def ratio_reading(expected: float, value: float) -> str:
    """A number that is a simple multiple or fraction of the right one."""
    from fractions import Fraction
    if not expected or not value:
        return ""
    ratio = Fraction(value / expected).limit_denominator(12)
    if ratio != 1 and math.isclose(float(ratio), value / expected, rel_tol=1e-9):
        return f"it is exactly {ratio} times the right count"
    return ""


# ----------------------------------------------------------------- weights that do not load

def state_mismatch(own: dict, reference: dict, sizes: dict[int, str], show_shapes: bool = True) -> list[tuple[str, str]]:
    """(key, text) for each reason the ``reference`` state dict does not load into a module whose state dict is
    ``own``: what PyTorch's load_state_dict error lists (size mismatches, missing and unexpected keys), read as the
    cause: a layer of another size and where that size comes from (``sizes``: a number -> its name), an attribute
    renamed, a layer missing or extra."""
    import re
    found = []
    seen = set()
    for name in sorted(set(own) & set(reference)):
        mine, right = tuple(own[name].shape), tuple(reference[name].shape)
        layer = re.sub(r"\.(\d+)\.", ".*.", name).rsplit(".", 1)[0]  # every layer's, and weight with bias: once
        if mine != right and layer not in seen:
            seen.add(layer)
            name = layer
            sources = [sizes.get(dim, "") for dim, other in zip(mine, right) if dim != other]
            why = "; ".join((f"{dim} is {source}" if show_shapes else f"a size is {source}") for dim, source in
                            zip([d for d, o in zip(mine, right) if d != o], sources) if source)
            shapes = f" ({mine} where the reference has {right})" if show_shapes else ""
            found.append(("model.layer_size", f"{name} has another size{shapes}" + (f": {why}" if why else "")))
    extra = sorted(set(own) - set(reference))
    missing = sorted(set(reference) - set(own))
    renamed = []
    for name in list(extra):
        leaf = name.rsplit(".", 1)[-1]
        match = next((other for other in missing if other.rsplit(".", 1)[-1] == leaf
                      and tuple(reference[other].shape) == tuple(own[name].shape)
                      and other.count(".") == name.count(".")), None)
        if match is not None:
            missing.remove(match)
            extra.remove(name)
            renamed.append((name, match))
    for mine, right in renamed[:4]:
        found.append(("model.renamed", f"your {mine.rsplit('.', 1)[0]} is named {right.rsplit('.', 1)[0]} in the skeleton "
                                       "(the reference weights carry the skeleton's names)"))
    for name in missing[:4]:
        found.append(("model.missing_layer", f"your module has no {name}, which the reference has"))
    for name in extra[:4]:
        found.append(("model.extra_layer", f"your module has {name}, which the reference does not: a layer too many"))
    return found
