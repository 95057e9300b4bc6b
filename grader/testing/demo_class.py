"""``make demo-class``: a class graded on a fresh checkout, to see what an instructor gets before grading a real one.

A new course in ``DEST`` (default ``demo-class/``, which git ignores) with the solutions released and a course secret
of its own, as ``make variants`` makes one; part 1's class from the outside corpus submitted (each student answers
notebook 01's graded cells the way code outside this lab writes them: the Annotated Transformer's mask, a tutorial's
sequence-first encoding, d2l's attention, some right, most with a usual mistake); then what an instructor runs:
``autograde``, ``feedback --force`` (the written answers are not graded yet), ``grades`` and ``report``.  It ends by
saying what to open.  About a minute on 2 cores.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

from .outside.end_to_end import grader_command, released_course, submit

DEFAULT = REPO_ROOT / "demo-class"
FEEDBACK_PAGES = "feedback/{student}/" + ASSIGNMENT + "/*.html"  # where nbgrader writes them, in the course


def make_demo_class(dest: Path, part: int = 1) -> dict:
    """Build and grade the demo class in ``dest`` (a new folder); returns what an instructor opens (``feedback``: the
    pages nbgrader wrote), and each student's answers (``students``)."""
    if dest.exists() and any(dest.iterdir()):
        raise FileExistsError(f"{dest} is not empty: remove it (rm -r {dest}) or give another DEST")
    course = released_course(dest)
    grader_command(course, "variants", "--init")
    students = submit(course, part)
    for command in (("autograde",), ("feedback", "--force"), ("grades",), ("report",)):
        grader_command(course, *command)
    pages = sorted(course.glob(FEEDBACK_PAGES.format(student="*")))
    return {"course": course, "students": students, "feedback": pages,
            "grades": course / "grades.csv", "report": course / "reports" / "report.html"}


def what_to_open(made: dict) -> str:
    """What ``main`` prints: each path one that exists; the feedback pages as the pattern they follow (nbgrader's
    ``feedback/<student>/<assignment>/``), with one of them."""
    course, pattern = made["course"], FEEDBACK_PAGES.format(student="<student>")
    return (f"graded {len(made['students'])} students of notebook 01 in {course}:\n"
            f"  their feedback pages   {course / pattern} (one: {made['feedback'][0]})\n"
            f"  the class's grades     {made['grades']}\n"
            f"  what the class got wrong, ranked   {made['report']}\n"
            f"  grade the written answers by hand: make formgrader COURSE={course}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.testing.demo_class", description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, default=DEFAULT, help="a new folder for the course (default: %(default)s)")
    args = parser.parse_args(argv)
    try:
        made = make_demo_class(args.dest.resolve())
    except FileExistsError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(what_to_open(made))
    return 0


if __name__ == "__main__":
    sys.exit(main())
