"""``make students ROSTER=...``: the class's names and e-mails from an LMS roster into the gradebook
(``grader.course.roster``)."""
from __future__ import annotations

from pathlib import Path

from grader.course import roster

from ..course import GradingError

HELP = "add the class's names and e-mails from an LMS roster CSV"


def arguments(parser) -> None:
    parser.add_argument("roster", type=Path)


def run(root: Path, args) -> int:
    try:
        added, updated = roster.import_roster(root, args.roster)
    except roster.RosterError as error:
        raise GradingError(str(error)) from error
    print(f"roster {args.roster}: {added} student(s) added, {updated} updated in {root / 'gradebook.db'}")
    return 0
