"""``make feedback``: the students' feedback pages, never with an answer that still awaits its manual grade shown
as 0 unless the instructor says so."""
from __future__ import annotations

from pathlib import Path

from translab.contract import ASSIGNMENT

from ..course import GradingError
from grader.course.feedback_rule import held_back
from grader.grading.nbgrader_process import nbgrader

HOW = {"graded-only": "`make feedback ARGS=--graded-only`", "force": "`make feedback ARGS=--force`"}
HELP = "write feedback/ (HTML, hidden tests removed); refuses while written answers await a manual grade"


def arguments(parser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--graded-only", action="store_true", help="release only the students whose every answer is graded")
    mode.add_argument("--force", action="store_true", help="release everyone; answers not graded yet show as 0")


def run(root: Path, args) -> int:
    mode = "graded-only" if args.graded_only else "force" if args.force else "complete"
    for page in feedback(root, mode):
        print(f"feedback {page.relative_to(root)}")
    return 0


def feedback(root: Path, mode: str = "complete") -> list[Path]:
    """Feedback pages for the class, as ``grader.course.feedback_rule`` allows under ``mode``."""
    options = []
    pending = held_back(root, mode, HOW)
    if pending:
        options.append(f"--CourseDirectory.student_id_exclude={','.join(pending)}")
        print(f"feedback for the fully graded students; left out until graded: {', '.join(pending)}")
    nbgrader(root, "generate_feedback", ASSIGNMENT, "--force", *options)
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    leaking = [p for p in pages if "BEGIN HIDDEN TESTS" in p.read_text(encoding="utf-8", errors="replace")]
    if leaking:
        raise GradingError(f"feedback shows hidden tests: {leaking[:3]}; check nbgrader_config.py")
    return pages
