"""``python -m grader merge DIR...`` (``make merge RESULTS=...``): result folders graded elsewhere into gradebook.db."""
from __future__ import annotations

from pathlib import Path

from grader.grading.result_folders import merge as merge_folders

HELP = "merge result folders graded elsewhere (autograde --results-dir) into gradebook.db"


def arguments(parser) -> None:
    parser.add_argument("folders", type=Path, nargs="+")


def run(root: Path, args) -> int:
    return merge(root, args.folders)


def merge(root: Path, folders: list[Path]) -> int:
    for described in merge_folders(root, folders):
        print(f"merged {described['student']} (graded on {described['host']})")
    return 0
