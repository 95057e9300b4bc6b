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
# nbgrader's own log level: its INFO and WARNING lines are six a student (converting, writing, permissions, "removing
# existing assignment" under --force) and the same config notes each run; its errors still show, and still fail
QUIET = ("--log-level=ERROR",)


def arguments(parser) -> None:
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--graded-only", action="store_true", help="release only the students whose every answer is graded")
    mode.add_argument("--force", action="store_true", help="release everyone; answers not graded yet show as 0")
    parser.add_argument("--verbose", action="store_true", help="nbgrader's full log (its INFO and WARNING lines)")


def run(root: Path, args) -> int:
    mode = "graded-only" if args.graded_only else "force" if args.force else "complete"
    print(summary(root, feedback(root, mode, verbose=args.verbose), args.verbose))
    return 0


def summary(root: Path, pages: list[Path], verbose: bool = False) -> str:
    """One line per student (their pages' folder), then the class's."""
    by_student: dict[str, list[Path]] = {}
    for page in pages:
        by_student.setdefault(page.relative_to(root / "feedback").parts[0], []).append(page)
    lines = [f"  {student}: {len(theirs)} page(s) in {theirs[0].parent.relative_to(root)}/"
             for student, theirs in sorted(by_student.items())]
    lines.append(f"feedback for {len(by_student)} student(s), {len(pages)} page(s), in {root / 'feedback'}"
                 + ("" if verbose else " (nbgrader's log: ARGS=--verbose)"))
    return "\n".join(lines)


def feedback(root: Path, mode: str = "complete", verbose: bool = True) -> list[Path]:
    """Feedback pages for the class, as ``grader.course.feedback_rule`` allows under ``mode``; nbgrader's log only
    when ``verbose``, its errors always."""
    options = [] if verbose else list(QUIET)
    pending = held_back(root, mode, HOW)
    if pending:
        options.append(f"--CourseDirectory.student_id_exclude={','.join(pending)}")
        print(f"feedback for the fully graded students; left out until graded: {', '.join(pending)}")
    nbgrader(root, "generate_feedback", ASSIGNMENT, "--force", *options)
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    leaking = [p for p in pages if "BEGIN HIDDEN TESTS" in p.read_text(encoding="utf-8", errors="replace")]
    if leaking:
        raise GradingError(f"feedback shows hidden tests: {leaking[:3]}; check nbgrader_config.py")
    return [page for page in pages if page.relative_to(root / "feedback").parts[0] not in pending]  # this run's
