"""``python -m translab setup`` once, then ``python -m translab lab``: the student's two commands, on any OS."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from . import local
from .data import DataError


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m translab", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    setup = commands.add_parser("setup", help="fetch (sha256-checked) and prepare the data, place the notebooks")
    setup.add_argument("--part", type=int, choices=range(1, 7), help="only the data this part reads (default: all)")
    lab = commands.add_parser("lab", help="JupyterLab on the notebooks, with the student settings")
    lab.add_argument("--port", type=int, default=8888)
    lab.add_argument("--host", default="127.0.0.1")
    lab.add_argument("--browser", action="store_true", help="open a browser tab (default: print the URL)")
    for command in (setup, lab):
        command.add_argument("--notebooks", type=Path, default=None,
                             help=f"where your notebooks are (an installed wheel: default ./{local.DEFAULT_NOTEBOOKS})")
    args = parser.parse_args(argv)
    try:
        if args.command == "setup":
            local.setup(args.part, args.notebooks)
            return 0
        return local.lab(args.notebooks, args.port, args.host, args.browser)
    except DataError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
