"""``make variants``: each student's configuration for part 2's counts (``grader.course.variants``); ``--init`` creates
the course secret they derive from."""
from __future__ import annotations

from pathlib import Path

from grader.course import variants

from ..course import GradingError

HELP = ("reports/variants.csv: each student's configuration for part 2's counts; --student ID: one student's code; "
        "--init: the course secret")


def arguments(parser) -> None:
    parser.add_argument("--student")
    parser.add_argument("--init", action="store_true", help="create the course secret unless there is one")


def run(root: Path, args) -> int:
    try:
        variants.main(root, args.student, args.init)
    except variants.SecretMissing as error:
        raise GradingError(str(error)) from error
    return 0
