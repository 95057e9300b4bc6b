"""One probe per property (issue 82): each property of an answer measured on an input built to show it alone, all
of them every time, so that code with three mistakes hears of three.

A ``Probe`` names its diagnosis key, the kind of input it builds (what any split may say: "a batch with padding",
never sizes or values) and a ``measure`` that calls the answer and returns what it found (``None``: the property
holds).  ``measure_all`` runs every probe: a probe whose call raises has that as its finding, phrased from its input,
and the others still run.  A check reports the findings instead of its generic "differs" line: where no property
explains a difference, the check says what it measured and gives no recipe.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from translab.contract import CheckFailed

from .findings import WHOLE_ANSWER_KEYS, defer
from .harness import in_hidden_check


@dataclass(frozen=True)
class Probe:
    key: str                                  # the diagnosis key its finding carries
    input_kind: str  # the input it builds, in words any split may show ("": the check words the failure itself)
    measure: Callable[[], str | tuple[str, str] | None]  # what it found wrong (with a key of its own), or None


def measure_all(probes: list[Probe]) -> list[tuple[str, str]]:
    """The findings (message, key) of every probe, most basic first (the order given), one per key; a call that
    raises is that probe's finding; the same failure on several inputs is said once, naming them."""
    found: dict[str, tuple[str, str]] = {}
    raised: dict[str, list[str]] = {}  # the failure's message -> the inputs it happened on
    raised_keys: dict[str, str] = {}
    for probe in probes:
        try:
            said = probe.measure()
        except CheckFailed as failed:
            if not probe.input_kind:  # a property the check words itself (``fail``): its message as it is
                found.setdefault(failed.key or probe.key, (failed.message, failed.key or probe.key))
                continue
            if failed.key in WHOLE_ANSWER_KEYS:  # the same whatever the input: said once, as it is
                found.setdefault(failed.key, (failed.message, failed.key))
                continue
            raised.setdefault(failed.message, []).append(probe.input_kind)
            raised_keys[failed.message] = failed.key
            continue
        message, key = said if isinstance(said, tuple) else (said, probe.key)
        if message and key not in found:
            found[key] = (message, key)
    for message, kinds in raised.items():
        key = raised_keys[message]
        if key not in found:  # on every input alike: the failure as it is (an answer not written, translab called)
            found[key] = (message if len(kinds) == len(probes) else f"with {' and with '.join(kinds)}: {message}", key)
    return list(found.values())


def report(probes: list[Probe]) -> list[str]:
    """Measure every probe and keep its findings for the end of the check (``defer``): the keys that failed."""
    findings = measure_all(probes)
    defer(findings)
    return [key for _, key in findings]


def sizes_said(text: str) -> str:
    """`` (measured: text)`` in a visible check; nothing in a hidden one, whose sizes are the hidden inputs'."""
    return "" if in_hidden_check() else f" (measured: {text})"
