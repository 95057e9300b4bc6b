"""``make feedback``: the students' feedback pages, never with an answer that still awaits its manual grade shown
as 0 unless the instructor says so."""
from __future__ import annotations

from pathlib import Path

from translab.contract import ASSIGNMENT

from ..course import GradingError
from ..gradebook import ungraded
from ..nbgrader_process import nbgrader


FEEDBACK_MODES = ("complete", "graded-only", "force")


def feedback(root: Path, mode: str = "complete") -> list[Path]:
    """Feedback pages for the class.  ``complete`` (the default) refuses while any written answer awaits its
    manual grade (nbgrader would release it as 0 without a word); ``graded-only`` releases the students whose
    every answer is graded; ``force`` releases everyone, ungraded answers as 0."""
    if mode not in FEEDBACK_MODES:
        raise ValueError(f"feedback mode {mode!r}; choose one of {FEEDBACK_MODES}")
    everyone = ungraded(root) if mode != "force" else {}
    pending = {student: names for student, names in everyone.items() if names}
    options = []
    if pending and mode == "complete":
        listing = "\n".join(f"  {student}: {', '.join(names)}" for student, names in sorted(pending.items())[:20])
        more = f"\n  ... and {len(pending) - 20} more students" if len(pending) > 20 else ""
        raise GradingError(
            f"{len(pending)} student(s) have answers not graded yet; their feedback would show them as 0:\n"
            f"{listing}{more}\ngrade them in the formgrader (Manual Grading), or release the fully graded students "
            "only with `make feedback ARGS=--graded-only`, or everyone with `make feedback ARGS=--force`")
    if pending:
        if set(everyone) <= set(pending):
            raise GradingError("no student is fully graded yet: grade the written answers in the formgrader first")
        options.append(f"--CourseDirectory.student_id_exclude={','.join(sorted(pending))}")
        print(f"feedback for the fully graded students; left out until graded: {', '.join(sorted(pending))}")
    nbgrader(root, "generate_feedback", ASSIGNMENT, "--force", *options)
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    leaking = [p for p in pages if "BEGIN HIDDEN TESTS" in p.read_text(encoding="utf-8", errors="replace")]
    if leaking:
        raise GradingError(f"feedback shows hidden tests: {leaking[:3]}; check nbgrader_config.py")
    return pages
