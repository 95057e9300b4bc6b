"""What a check keeps to report beside its verdict (issue 82): a warning the answer printed never ends the
diagnosis; the comparisons after it still run, and the failure names every finding, each key in its tag.

Outside a check (no list kept) a finding fails at once, as before.  In the grader the kernel's call sends its
findings beside the value (``translab.wire.WithFindings``), and the checker keeps them with its own."""
from __future__ import annotations

import contextlib
import contextvars
import warnings

from translab.contract import CheckFailed

# The findings a check keeps to report beside its verdict (a warning the answer printed): a warning never ends the
# diagnosis, the comparisons after it still run.  None outside a check: then a finding fails at once.
_DEFERRED: contextvars.ContextVar[list | None] = contextvars.ContextVar("translab_deferred_findings", default=None)


def _warning_finding(what: str, warning) -> tuple[str, str]:
    text = str(warning.message)
    hint = ("build nn.TransformerEncoderLayer with batch_first=True (our tensors are (batch, seq, features)) and "
            "nn.TransformerEncoder with enable_nested_tensor=False, so that PyTorch need not warn; with "
            "batch_first=True your own transposes around the layers go"
            if "nested" in text or "batch_first" in text else
            "PyTorch wants the attention mask and the padding mask of the same type: "
            "keep the given lines that convert the padding mask"
            if "mismatched" in text else None)
    lines = [f"{what} printed a warning to stderr; under nbgrader any stderr output scores the cell 0.",
             f"  found:    {warning.category.__name__}: {text[:300]}"]
    if hint:
        lines.append(f"  likely:   {hint}")
    return "\n".join(lines), "stderr_warning"


# Failures of the answer as a whole, whatever the input (not written yet, translab's own code called): said once.
WHOLE_ANSWER_KEYS = frozenset({"not_written", "calls_translab"})


@contextlib.contextmanager
def keeping():
    """Keep the findings made while the block runs (a check, or one call of it in the kernel): the list."""
    kept: list[tuple[str, str]] = []
    token = _DEFERRED.set(kept)
    try:
        yield kept
    finally:
        _DEFERRED.reset(token)


def defer(findings: list[tuple[str, str]]) -> None:
    """Keep ``findings`` (message, key) for the end of the check; outside a check the first fails now."""
    deferred = _DEFERRED.get()
    if deferred is None:
        if findings:
            raise CheckFailed(*findings[0])
        return
    for finding in findings:
        if finding not in deferred and not (finding[1] in WHOLE_ANSWER_KEYS and any(k == finding[1] for _, k in deferred)):
            deferred.append(finding)


def with_findings(failed: CheckFailed | None, findings: list[tuple[str, str]]) -> CheckFailed | None:
    """``failed`` with every kept finding beside it (each key in its tag), or the findings alone, or None; a warning
    comes after what was measured of the code's behaviour."""
    if not findings:
        return failed
    pieces = ([(failed.message, failed.key)] if failed is not None else []) + [
        (text, key) for text, key in findings  # a probe's finding that is the failure itself is said once
        if failed is None or not (key == failed.key and (key in WHOLE_ANSWER_KEYS or text == failed.message
                                                         or text.endswith(": " + failed.message)))]
    pieces.sort(key=lambda piece: piece[1] == "stderr_warning")  # a warning beside what the code does, after it
    message = pieces[0][0] + "".join("\n  also:     " + text.replace("\n", "\n    ") for text, _ in pieces[1:])
    keys = " ".join(dict.fromkeys(key for _, key in pieces if key))
    return CheckFailed(message, keys)


@contextlib.contextmanager
def no_warnings(what: str):
    """A warning from the student's code is a finding (in nbgrader, stderr scores 0), kept for the end of the
    check (``defer``) so that what the check compares next is still reported."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    defer([_warning_finding(what, warning) for warning in caught])
