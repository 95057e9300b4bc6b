"""``make similarity``: reports/similarity.*, the pairs of students whose answers match (``grader.grading.similarity``)."""
from __future__ import annotations

from pathlib import Path

from grader.grading import similarity

from ..course import GradingError

HELP = "reports/similarity.*: pairs of students whose answers match"


def arguments(parser) -> None:
    parser.add_argument("--past", type=Path, help="a past year's submitted/ folder to compare with too")


def run(root: Path, args) -> int:
    if args.past is not None and not args.past.is_dir():
        raise GradingError(f"--past {args.past}: no such folder (a past year's submitted/, one folder per student)")
    similarity.main(root, args.past)
    return 0
