"""``make interviews``: whom to ask about their own code and what to ask (``grader.grading.interviews``);
``RECORD=file.csv``: the interviews' outcomes into the gradebook's code interview cell (``grader.course.code_interview``)."""
from __future__ import annotations

from pathlib import Path

from grader.course import code_interview
from grader.grading import interviews

HELP = "reports/interviews/: a page of questions on their own code for each student to interview; --record: the points"


def arguments(parser) -> None:
    parser.add_argument("--sample", type=int, default=5,
                        help="how many students to pick at random, besides those the submissions point to (default 5)")
    parser.add_argument("--seed", type=int, default=None,
                        help="the random sample's seed (default: one derived from the course secret)")
    parser.add_argument("--record", type=Path, default=None, metavar="FILE.csv",
                        help="record the interviews' points (and comments) of FILE.csv, reports/interviews.csv filled "
                             "in, into the code interview cell (c.CodeInterview.points in nbgrader_config.py)")


def run(root: Path, args) -> int:
    if args.record is None:
        return interviews.main(root, args.sample, args.seed)
    done = code_interview.record(root, args.record)
    print(f"code interview: recorded {len(done['recorded'])} interview(s)" +
          (f": {', '.join(done['recorded'][:20])}" if done["recorded"] else ""))
    if done["full"]:
        print(f"  full points, not interviewed (c.CodeInterview.not_interviewed = 'full'): {len(done['full'])} "
              f"student(s)")
    if done["left"]:
        print(f"  still to grade (listed without points, or not interviewed where c.CodeInterview.not_interviewed = "
              f"'grade'): {', '.join(done['left'][:20])}{' ...' if len(done['left']) > 20 else ''}: the formgrader, or "
              "a later RECORD")
    print("  `make grades` and `make feedback` now carry them")
    return 0
