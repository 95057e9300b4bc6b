"""Whose feedback may be released: never a page that shows an answer awaiting its manual grade as 0, unless the
instructor says so.  One rule for ``make feedback`` (``commands/feedback.py``) and for nbgrader's own
``generate_feedback`` and the formgrader's Generate Feedback buttons (``nbgrader_plugins/feedback_gate_exporter.py``).

``complete`` (the default) refuses while any selected student has such an answer, listing them; ``graded-only``
releases the students whose every answer is graded; ``force`` releases everyone, ungraded answers as 0.
"""
from __future__ import annotations

from pathlib import Path

from grader.course import GradingError
from grader.course.gradebook import ungraded

FEEDBACK_MODES = ("complete", "graded-only", "force")
LISTED = 20  # students named in a refusal; the rest are counted


def held_back(root: Path, mode: str, how: dict[str, str], student_ids: list[str] | None = None) -> list[str]:
    """The students of ``selected`` (default: everyone who submitted) whose feedback waits for a manual grade under
    ``mode``; raises ``GradingError`` with the list when ``mode`` is ``complete`` and someone waits, or when nobody
    would be released.  ``how`` says, for each other mode, what the instructor types to choose it."""
    if mode not in FEEDBACK_MODES:
        raise ValueError(f"feedback mode {mode!r}; choose one of {FEEDBACK_MODES}")
    if mode == "force":
        return []
    everyone = ungraded(root)
    chosen = everyone if student_ids is None else {student: everyone.get(student, []) for student in student_ids}
    pending = {student: names for student, names in chosen.items() if names}
    if pending and mode == "complete":
        listing = "\n".join(f"  {student}: {', '.join(names)}" for student, names in sorted(pending.items())[:LISTED])
        more = f"\n  ... and {len(pending) - LISTED} more students" if len(pending) > LISTED else ""
        raise GradingError(
            f"{len(pending)} student(s) have answers not graded yet; their feedback would show them as 0:\n"
            f"{listing}{more}\nNo feedback was written. Grade them in the formgrader (Manual Grading), or release "
            f"the fully graded students only ({how['graded-only']}), or everyone ({how['force']})")
    if pending and set(chosen) <= set(pending):
        raise GradingError("no selected student is fully graded yet: grade the written answers in the formgrader "
                           "(Manual Grading) first")
    return sorted(pending)
