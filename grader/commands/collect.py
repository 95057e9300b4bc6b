"""``make collect ZIP=...``: an LMS download into submitted/, and the names it carries into the gradebook."""
from __future__ import annotations

from pathlib import Path

from translab.contract import ASSIGNMENT

from grader.course import lms_zip, roster

from ..course import GradingError

HELP = "unpack an LMS zip into submitted/"


def arguments(parser) -> None:
    parser.add_argument("zip", type=Path)


def run(root: Path, args) -> int:
    collect(root, args.zip)
    return 0


def collect(root: Path, archive: Path) -> list[str]:
    """Unpack an LMS zip into submitted/ (``grader.course.lms_zip``); the students collected.

    Unsafe or unreadable entries are skipped and reported, not fatal: one odd file must not stop a class.  An
    error only when the file is no zip or nothing in it could be collected (the wrong file, most likely).
    """
    try:
        report = lms_zip.collect_zip(root, Path(archive), ASSIGNMENT)
    except lms_zip.CollectError as error:
        raise GradingError(str(error)) from error
    print(report.summary())
    if not report.students:
        raise GradingError(f"nothing could be collected from {archive}: every entry was skipped (see above)")
    if report.names:
        named = roster.name_from_collect(root, report.names)
        print(f"named {named} student(s) in the gradebook from the zip (students named by a roster keep theirs)")
    return report.students
