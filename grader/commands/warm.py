"""``python -m grader warm``: the course's warm grader (``grader.grading.warm_grader``), running or not; ``--stop``
ends it (a later ``autograde --warm`` starts another)."""
from __future__ import annotations

from pathlib import Path

from grader.grading.warm_grader import running, stop

HELP = "say whether the warm grader (autograde --warm) is running; --stop ends it"


def arguments(parser) -> None:
    parser.add_argument("--stop", action="store_true", help="end the warm grader now")


def run(root: Path, args) -> int:
    found = running(root)
    if args.stop:
        print("stopped the warm grader" if stop(root) else "no warm grader was running")
    elif found:
        print(f"the warm grader runs at {found['address']} since {found['started']} (it stops after "
              f"{found['idle_s']:.0f} s without work; code key {found['key'][:12]})")
    else:
        print("no warm grader is running: python -m grader autograde --warm starts one")
    return 0
