"""``python -m grader COMMAND``: the instructor's commands behind the Makefile, one module each in
``grader/commands/`` (``COMMANDS`` below is the one list of them; ``python -m grader --help`` prints it).

Each command module gives ``HELP``, ``arguments(parser)`` and ``run(root, args)``.  Every command is idempotent
(nbgrader runs with --force) and exits non-zero when nbgrader reports an error, including a configuration file that
failed to load (nbgrader itself only logs that).  ``--root`` points at another course folder (the tests grade a
temporary copy of the course).  Only ``autograde`` takes options of the form ``--Class.trait=value``, passed on to
nbgrader.
"""
from __future__ import annotations

import argparse
import importlib
import sys
from pathlib import Path
from types import ModuleType

from .course import GradingError, course_root

# in the order a term runs them; each is the module of its name in grader/commands/ (student-release: student_release)
COMMANDS = ("release", "references", "students", "variants", "student-release", "collect", "autograde", "warm", "merge",
            "feedback", "grades", "report", "similarity", "interviews")


def command_module(command: str) -> ModuleType:
    return importlib.import_module(f"{__package__}.commands.{command.replace('-', '_')}")


def parser_of_commands() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=None,
                        help="the course folder (default: the nearest folder from here up that holds "
                             "nbgrader_config.py, else this repository)")
    commands = parser.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        module = command_module(command)
        module.arguments(commands.add_parser(command, help=module.HELP))
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = parser_of_commands()
    args, extra = parser.parse_known_args(argv)
    args.nbgrader_options = tuple(extra)
    module = command_module(args.command)
    if extra and not getattr(module, "PASSES_NBGRADER_OPTIONS", False):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    bad = [arg for arg in extra if not arg.startswith("--") or "=" not in arg]
    if bad:
        parser.error(f"extra nbgrader options must look like --Class.trait=value: {' '.join(bad)}")
    root = (args.root or course_root()).resolve()
    try:
        return module.run(root, args)
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
