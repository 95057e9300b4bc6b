"""``make interviews``: whom to ask about their own code and what to ask (``grader.grading.interviews``)."""
from __future__ import annotations

from pathlib import Path

from grader.grading import interviews

HELP = "reports/interviews/: a page of questions on their own code for each student to interview"


def arguments(parser) -> None:
    parser.add_argument("--sample", type=int, default=5,
                        help="how many students to pick at random, besides those the submissions point to (default 5)")
    parser.add_argument("--seed", type=int, default=None,
                        help="the random sample's seed (default: one derived from the course secret)")


def run(root: Path, args) -> int:
    return interviews.main(root, args.sample, args.seed)
