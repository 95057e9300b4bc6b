"""What a count that no combination of the usual mistakes explains measurably is: which variables its error
changes with (``error_dependence``), the formula it fits (``fit_count``), the variables it ignores and the values it
counts as if they were fixed (``fixed_values``), and the configuration or multiple whose right count it is
(``other_readings``)."""
from __future__ import annotations

import math
from typing import Callable

from ..params import TERMS, monomials
from .counts import head_outputs, close_enough, right_count

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
    "nhid*outputs": (lambda c: c["nhid"] * head_outputs(c), "the head's weight, once (outputs = ntoken for the LM "
                     "head, nclasses for a classifier)"),
    "outputs": (lambda c: head_outputs(c), "the head's bias, once"),
    "nhid*nhid": (lambda c: c["nhid"] ** 2, "nothing is nhid x nhid outside the layers"),
    "nhid*dim_feedforward": (lambda c: c["nhid"] * c["dim_feedforward"], "the feed-forward is inside every layer"),
    "nhid": (lambda c: c["nhid"], "no vector of size nhid outside the layers (the positional encoding is a buffer)"),
    "dim_feedforward": (lambda c: c["dim_feedforward"], "linear1's bias is inside every layer"),
    "nlayers*ntoken*nhid": (lambda c: c["nlayers"] * c["ntoken"] * c["nhid"], "there is one embedding"),
    "nlayers*nhid*outputs": (lambda c: c["nlayers"] * c["nhid"] * head_outputs(c), "there is one head"),
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


