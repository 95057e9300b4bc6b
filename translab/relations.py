"""What a wrong answer does, measured: its output as a transformation of the right one, a formula's parameters fitted.

The checks first compare an answer's output with the outputs of known mistakes (``checks.harness.OutputMistake``).  Real
students keep finding mistakes that are in no list, so here a mistake's *family* is recognised by testing a relation
between the answer's output and the right one: a softmax or log-softmax of it along some axis, the same values
scaled, shifted, with the axes in another order or taken from other positions; a positional encoding's frequencies
and phases fitted, which names its base whatever it is.  Each test returns a ``Finding`` only when its relation holds
within the check's own tolerance (a misdiagnosis is worse than none); where none holds, ``measured`` says what was
seen rather than repeating the recipe.

A finding's text states relations, never the reference's values, so a hidden check can show it.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Callable

import torch

Same = Callable[[torch.Tensor, torch.Tensor], bool]  # the check's comparison, with its tolerance


@dataclass(frozen=True)
class Finding:
    key: str   # a stable diagnosis key (``translab.diagnosis.KEYS``)
    text: str  # what the student reads: the relation, with what was measured in it


KEYS = {
    "output.transposed": "the right values with the axes in another order",
    "output.softmax": "a softmax of the right output (slices that sum to 1)",
    "output.log_softmax": "a log-softmax of the right output (log-probabilities)",
    "output.scaled": "the right output multiplied by a constant",
    "output.shifted": "the right output plus a constant",
    "output.positions": "the right values at the wrong positions",
    "attention.scale": "attention scores divided by another number than sqrt(d) (fitted from the weights)",
    "pe.base": "a positional encoding with another base than 10000 (fitted)",
    "pe.frequencies": "frequencies that do not follow base^(-2i/d_model)",
    "pe.phase": "sinusoids with the right frequencies but another phase (sin/cos or the positions' origin)",
    "pe.amplitude": "sinusoids of another amplitude than 1",
}


def _floats(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu", torch.float64)


def _constant(value: float, scales: dict[str, float]) -> str:
    """``value`` with the name of the constant it equals, if any (``scales``: name -> value)."""
    for name, known in scales.items():
        for shown, candidate in ((name, known), (f"1/{name}", 1 / known if known else math.nan)):
            if math.isclose(value, candidate, rel_tol=1e-3):
                return f"{value:.4g} = {shown}"
    return f"{value:.4g}"


def output_relation(found, expected: torch.Tensor, same: Same, *, position_axis: int | None = None,
                    scales: dict[str, float] | None = None, names: tuple[str, ...] = ()) -> Finding | None:
    """The family of transformations of ``expected`` that ``found`` is, or None.  ``position_axis``: the axis
    along which values may sit at the wrong place (a sequence's positions); ``scales``: constants worth naming
    (``{"sqrt(d)": 4.0}``); ``names``: the axes' names, for the text."""
    if not isinstance(found, torch.Tensor) or not found.is_floating_point() or found.numel() == 0:
        return None
    found_cpu, expected_cpu = found.detach().to("cpu", expected.dtype), expected.detach().cpu()
    if found_cpu.shape != expected_cpu.shape:
        return _transposed(found_cpu, expected_cpu, same, names)
    if not bool(torch.isfinite(found_cpu).all()) or not bool(torch.isfinite(expected_cpu).all()):
        return None
    for dim in range(expected_cpu.dim()):
        if expected_cpu.size(dim) < 2:
            continue
        axis = f"{names[dim]} axis" if dim < len(names) else f"dim={dim}"
        if same(found_cpu, expected_cpu.softmax(dim)):
            return Finding("output.softmax", f"your output is the softmax of the right one over the {axis}: every "
                                             f"slice along it sums to {float(found_cpu.sum(dim).mean()):.3f}")
        if same(found_cpu, expected_cpu.log_softmax(dim)):
            return Finding("output.log_softmax", f"your output is the log-softmax of the right one over the {axis} "
                                                 "(log-probabilities: the exponentials of each slice sum to 1)")
    f, e = _floats(found_cpu), _floats(expected_cpu)
    if float((e * e).sum()) > 0:
        factor = float((f * e).sum() / (e * e).sum())
        if abs(factor - 1) > 1e-6 and abs(factor) > 1e-9 and same(found_cpu, (factor * e).to(expected_cpu.dtype)):
            named = _constant(factor, scales or {})
            return Finding("output.scaled", f"your output is the right one multiplied by {named}")
    shift = float((f - e).mean())
    if abs(shift) > 1e-9 and same(found_cpu, (e + shift).to(expected_cpu.dtype)):
        return Finding("output.shifted", f"your output is the right one plus {_constant(shift, scales or {})} everywhere")
    if position_axis is not None:
        return _moved(found_cpu, expected_cpu, same, position_axis)
    return None


def _transposed(found: torch.Tensor, expected: torch.Tensor, same: Same, names: tuple[str, ...]) -> Finding | None:
    if sorted(found.shape) != sorted(expected.shape) or found.dim() > 5:
        return None
    for order in itertools.permutations(range(expected.dim())):
        moved = expected.permute(order)
        if moved.shape == found.shape and same(found, moved):
            label = [names[i] if i < len(names) else f"dim {i}" for i in order]
            return Finding("output.transposed", f"your output holds the right values with its axes in another order: "
                                                f"({', '.join(label)}) instead of "
                                                f"({', '.join(names[:expected.dim()]) or 'the expected order'})")
    return None


def _moved(found: torch.Tensor, expected: torch.Tensor, same: Same, axis: int) -> Finding | None:
    """Each slice of ``found`` along ``axis`` is a slice of ``expected`` at another index (all of them)."""
    size = expected.size(axis)
    if size < 2 or size > 256:
        return None
    sources = []
    for i in range(size):
        here = found.select(axis, i)
        match = next((j for j in [i, *range(size)] if same(here, expected.select(axis, j))), None)
        if match is None:
            return None
        sources.append(match)
    if sources == list(range(size)):
        return None
    wrong = [i for i, j in enumerate(sources) if i != j]
    if len(set(sources)) == 1:
        how = f"every position holds the right values of position {sources[0]}"
    elif all(j - i == sources[wrong[0]] - wrong[0] for i, j in zip(wrong, (sources[i] for i in wrong))):
        how = f"positions {wrong[0]}..{wrong[-1]} hold the right values shifted by {sources[wrong[0]] - wrong[0]:+d}"
    elif sources == list(reversed(range(size))):
        how = "the positions are in reverse order"
    else:
        how = "positions " + ", ".join(f"{i} <- {j}" for i, j in zip(wrong[:6], (sources[i] for i in wrong[:6])))
    return Finding("output.positions", f"your output holds the right values at the wrong positions: {how}")


def measured(found, expected: torch.Tensor, same: Same, position_axis: int | None = None) -> str:
    """What can be said of a wrong output when no relation holds: how its slices sum, how it correlates with the
    right one, which positions are right.  Relations only, no reference values."""
    if not isinstance(found, torch.Tensor) or found.shape != expected.shape or not found.is_floating_point():
        return ""
    f, e = _floats(found), _floats(expected)
    if not bool(torch.isfinite(f).all()):
        return f"{int((~torch.isfinite(f)).sum())} of {f.numel()} values of your output are inf or NaN"
    parts = []
    sums = f.sum(-1)
    if f.dim() >= 1 and f.size(-1) > 1 and float((sums - sums.mean()).abs().max()) < 1e-3:
        parts.append(f"every slice along the last axis sums to {float(sums.mean()):.3f}")
    if float(f.std()) == 0:
        parts.append(f"every value is {float(f.flatten()[0]):.4g}")
    elif float(e.std()) > 0:
        correlation = float(torch.corrcoef(torch.stack([f.flatten(), e.flatten()]))[0, 1])
        parts.append(f"its correlation with the right output is {correlation:.3f}")
    if position_axis is not None and expected.size(position_axis) > 1:
        right = [i for i in range(expected.size(position_axis))
                 if same(found.select(position_axis, i), expected.select(position_axis, i))]
        if right:
            parts.append(f"positions {_ranges(right)} are right, the others are not")
    return "measured: " + "; ".join(parts) if parts else ""


def _ranges(indices: list[int]) -> str:
    runs, start = [], indices[0]
    for previous, current in zip(indices, indices[1:] + [None]):
        if current != previous + 1:
            runs.append(f"{start}" if start == previous else f"{start}-{previous}")
            start = current
    return ", ".join(runs)


# ----------------------------------------------------------------- a positional encoding, fitted

@dataclass(frozen=True)
class Sinusoid:
    frequency: float  # radians per position
    amplitude: float
    phase: float      # value at position p: amplitude * sin(frequency * p + phase)
    residual: float   # the largest error of that fit


def fit_sinusoid(column: torch.Tensor, hints: tuple[float, ...] = ()) -> Sinusoid | None:
    """Fit ``a * sin(w p + phi)`` to a column of a table (position p = 0, 1, ...).  The frequency comes from the
    identity v[p-1] + v[p+1] = 2 cos(w) v[p], which holds whatever the phase; then amplitude and phase by least
    squares.  A slow column is nearly a line over a few positions, and rounding then swamps the identity: the
    frequencies in ``hints`` are tried too, and the best fit kept.  None when the column is too short or zero."""
    v = _floats(column)
    if v.numel() < 4 or float(v.abs().max()) == 0:
        return None
    middle = v[1:-1]
    energy = float((middle * middle).sum())
    candidates = list(hints)
    if energy > 0:
        cosine = float(((v[:-2] + v[2:]) * middle).sum()) / (2 * energy)
        candidates.insert(0, math.acos(max(-1.0, min(1.0, cosine))))
    p = torch.arange(v.numel(), dtype=torch.float64)
    best = None
    for frequency in candidates:
        basis = torch.stack([torch.sin(frequency * p), torch.cos(frequency * p)], 1)
        solution = torch.linalg.lstsq(basis, v.unsqueeze(1)).solution.flatten()
        a, b = float(solution[0]), float(solution[1])
        residual = float((basis @ solution - v.unsqueeze(1).flatten()).abs().max())
        if best is None or residual < best.residual:
            best = Sinusoid(frequency, math.hypot(a, b), math.atan2(b, a), residual)
    return best


def positional_fit(table: torch.Tensor, right: torch.Tensor, base: float = 10000.0) -> list[Finding]:
    """What a positional-encoding table that is not ``right`` does, from its fitted sinusoids: the base its
    frequencies follow (pe[pos, 2i] = sin(pos / base^(2i/d_model))), the right frequencies in other dimensions,
    frequencies that follow no base, another amplitude, another phase (sin and cos exchanged, positions from another
    origin).  ``table`` and ``right``: (positions, d_model); the right frequencies and phases are the formula's.
    Empty when the columns are not sinusoids."""
    if table.dim() != 2 or table.shape != right.shape or table.size(0) < 5 or table.size(1) < 4:
        return []
    d_model = table.size(1)
    right_fits = [Sinusoid(base ** (-2 * (j // 2) / d_model), 1.0, 0.0 if j % 2 == 0 else math.pi / 2, 0.0)
                  for j in range(d_model)]
    fits = [fit_sinusoid(table[:, j], hints=(right_fits[j].frequency,)) for j in range(d_model)]
    if any(fit is None or fit.residual > 1e-3 for fit in fits):
        return []
    frequencies = _frequencies(fits, right_fits, d_model, base)
    findings = [frequencies]
    # amplitude and phase where positions resolve them (a column of a slow frequency is nearly a line here)
    resolved = [j for j, fit in enumerate(fits) if RESOLVED[0] < fit.frequency < RESOLVED[1]]
    amplitudes = sorted({round(fits[j].amplitude, 3) for j in resolved})
    if amplitudes and amplitudes != [1.0]:
        findings.append(Finding("pe.amplitude", f"its amplitudes are {amplitudes[:6]} instead of 1: sin and cos of "
                                                "the angle, unscaled"))
    if frequencies is None or frequencies.key == "pe.base":  # the columns' own angles: their phases compare
        findings.append(_phases([fits[j] for j in resolved], [right_fits[j] for j in resolved]))
    return [finding for finding in findings if finding is not None]


RESOLVED = (0.05, 3.0)  # frequencies (radians per position) that a few dozen positions fit well


def _rounded(value: float) -> str:
    """Three significant digits, as a person would name a base: 1,000 and 1,000,000, not 1,000,001."""
    value = float(f"{value:.3g}")
    return f"{value:,.0f}" if value >= 10 else f"{value:.3g}"


def _frequencies(fits: list[Sinusoid], right_fits: list[Sinusoid], d_model: int, base: float) -> Finding | None:
    compared = [(j, fit, other) for j, (fit, other) in enumerate(zip(fits, right_fits))
                if max(fit.frequency, other.frequency) > RESOLVED[0]]
    if all(abs(fit.frequency - other.frequency) < 1e-3 for _, fit, other in compared):
        return None
    # the base, fitted on the frequencies that positions resolve here (not near 0, where sin(w p) is a line)
    resolved = [(2 * (j // 2) / d_model, math.log(fit.frequency)) for j, fit in enumerate(fits)
                if RESOLVED[0] < fit.frequency < RESOLVED[1]]
    exponents = torch.tensor([k for k, _ in resolved], dtype=torch.float64)
    logs = torch.tensor([w for _, w in resolved], dtype=torch.float64)
    if len(resolved) >= 2 and float((exponents * exponents).sum()) > 0:
        slope = float((exponents * logs).sum() / (exponents * exponents).sum())
        if float((slope * exponents - logs).abs().max()) < 1e-3 and not math.isclose(math.exp(-slope), base, rel_tol=1e-3):
            fitted = math.exp(-slope)
            shown = _rounded(fitted)
            twin = (f" (or base {_rounded(fitted ** 2)} with an exponent of i/d_model instead of 2i/d_model: the same "
                    "numbers)") if fitted ** 2 < 1e12 else ""
            return Finding("pe.base", f"its frequencies follow base {shown}{twin}, not 10000: pe[pos, 2i] = sin(pos / "
                                      f"{shown}^(2i/d_model)); 10000 makes the wavelengths run from 2*pi to 10000*2*pi, "
                                      "so the slow dimensions still tell positions apart thousands of tokens away")
    sources = []
    for _, fit, _ in compared:
        match = next((k for k, other in enumerate(right_fits) if abs(fit.frequency - other.frequency) < 1e-3), None)
        sources.append(match)
    if None not in sources:
        moved = [(j, k) for (j, _, _), k in zip(compared, sources) if k // 2 != j // 2]
        return Finding("pe.frequencies", "it has the right frequencies in other dimensions (" + ", ".join(
            f"dimension {j} has the angle of dimension {k}" for j, k in moved[:4]) + "): dimensions 2i and 2i+1 share "
            "the angle pos / 10000^(2i/d_model), interleaved")
    wrong = [(j, fit.frequency, other.frequency) for j, fit, other in compared
             if abs(fit.frequency - other.frequency) >= 1e-3]
    return Finding("pe.frequencies", "its columns are sinusoids whose frequencies (radians per position) follow no "
                                     "base^(-2i/d_model): " + ", ".join(f"dimension {j}: {w:.4g} (right: {r:.4g})"
                                                                        for j, w, r in wrong[:4])
                   + "; dimensions 2i and 2i+1 share the angle pos / 10000^(2i/d_model)")


def _phases(fits: list[Sinusoid], right_fits: list[Sinusoid]) -> Finding | None:
    if not fits:
        return None
    differences = [_angle(fit.phase - other.phase) for fit, other in zip(fits, right_fits)]
    if all(abs(d) < 1e-3 for d in differences):
        return None
    if all(abs(abs(d) - math.pi / 2) < 1e-3 for d in differences):
        return Finding("pe.phase", "its sin and cos are exchanged: sin on the even dimensions (2i), cos on the odd "
                                   "ones (2i+1)")
    shifts = [d / fit.frequency for d, fit in zip(differences, fits)]
    if shifts and all(abs(shift - round(shifts[0])) < 1e-2 for shift in shifts) and round(shifts[0]) != 0:
        k = round(shifts[0])
        return Finding("pe.phase", f"it is the right encoding for positions shifted by {k:+d} (row pos holds position "
                                   f"pos{k:+d}): positions count from 0, so row 0 is sin(0) = 0, cos(0) = 1")
    degrees = sorted({round(math.degrees(d)) for d in differences})
    return Finding("pe.phase", f"its phases are off by {degrees[:6]} degrees: sin(angle) on the even dimensions, "
                               "cos(angle) on the odd ones, angle = pos / 10000^(2i/d_model)")


def _angle(radians: float) -> float:
    """An angle in (-pi, pi]."""
    return math.atan2(math.sin(radians), math.cos(radians))


# ----------------------------------------------------------------- attention weights, their scale fitted

def softmax_scale(weights: torch.Tensor, scores: torch.Tensor, mask: torch.Tensor | None = None) -> float | None:
    """The factor c for which ``weights`` = softmax(c * scores + mask) over the last axis, fitted on the log-weights
    (each row's constant drops out); None when no single c gives them."""
    if not isinstance(weights, torch.Tensor) or weights.shape != scores.shape:
        return None
    w, s = _floats(weights), _floats(scores)
    allowed = torch.ones_like(w, dtype=torch.bool) if mask is None else torch.isfinite(_floats(mask)).expand_as(w)
    allowed = allowed & (w > 0)
    if not bool(allowed.any()):
        return None
    counts = allowed.sum(-1, keepdim=True).clamp(min=1)
    log_w = torch.where(allowed, w.clamp(min=1e-300).log(), torch.zeros_like(w))
    s_allowed = torch.where(allowed, s, torch.zeros_like(s))
    log_w = torch.where(allowed, log_w - log_w.sum(-1, keepdim=True) / counts, torch.zeros_like(w))
    s_centered = torch.where(allowed, s_allowed - s_allowed.sum(-1, keepdim=True) / counts, torch.zeros_like(s))
    energy = float((s_centered * s_centered).sum())
    if energy == 0:
        return None
    c = float((log_w * s_centered).sum()) / energy
    rebuilt = torch.softmax(c * s + (0 if mask is None else _floats(mask)), dim=-1)
    return c if torch.allclose(rebuilt, w, atol=1e-5, rtol=1e-4) else None


def scale_finding(c: float, d: int, show_values: bool = True) -> Finding | None:
    """The attention scale a fitted c stands for, when it is not 1/sqrt(d)."""
    if math.isclose(c, 1 / math.sqrt(d), rel_tol=1e-3):
        return None
    named = _constant(1 / c, {"sqrt(d)": math.sqrt(d), "d": float(d), "2*sqrt(d)": 2 * math.sqrt(d),
                              "sqrt(d)/2": math.sqrt(d) / 2, "d*sqrt(d)": d * math.sqrt(d), "1": 1.0})
    name = named.split(" = ", 1)[1] if " = " in named else None
    shown = f"{1 / c:.4g}" + (f" = {name}" if name else "") if show_values else (name or "another number")
    return Finding("attention.scale", f"your weights are the softmax of the scores divided by {shown}, not by "
                                      f"sqrt(d){f' = {math.sqrt(d):.4g}' if show_values else ''}: q.k has a spread "
                                      "of about sqrt(d) for unit-variance vectors, so dividing by sqrt(d) keeps the "
                                      "softmax from saturating (more) or flattening (less)")
