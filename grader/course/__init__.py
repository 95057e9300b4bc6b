"""The course on disk, as every command finds it: its root folder, its students' submissions, and the PATH its
nbgrader processes run with (this module); and the files it keeps, one module each: the roster, the gradebook, each
student's variant, what a release withholds, the LMS's zips in and grade files out, what feedback shows, the markdown
the sanitizer found clean.  The lowest role: this module imports nothing else of the grader, and the folder's
modules no other role."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT


def course_root(start: Path | None = None) -> Path:
    """The course the commands act on: the nearest folder, from ``start`` (the current one) up, that holds
    ``nbgrader_config.py``, as nbgrader finds its configuration; else the repository this package came from."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "nbgrader_config.py").is_file():
            return folder
    return REPO_ROOT


def students(root: Path) -> list[str]:
    """The students with a submission of the assignment in ``submitted/``."""
    submitted = root / "submitted"
    return sorted(p.parent.name for p in submitted.glob(f"*/{ASSIGNMENT}") if p.is_dir())


MAX_READ_NOTEBOOK_BYTES = 50 * 1024 * 1024  # a notebook the reports read as JSON: larger ones are left out


def read_notebook_json(path: Path) -> dict | None:
    """A course's notebook (a submission, an autograded copy) read as JSON, never run; None for a link, a missing or
    too large file, or one that is not a notebook, so the report reading it goes on without it."""
    try:
        if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_READ_NOTEBOOK_BYTES:
            return None
        notebook = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    return notebook if isinstance(notebook, dict) and isinstance(notebook.get("cells"), list) else None


def with_venv_bin(path: str) -> str:
    """``path`` (a PATH value) with this interpreter's bin/ first: nbgrader runs ``alembic`` (a new gradebook's
    migrations) from PATH, and it must be this venv's."""
    bin_dir = str(Path(sys.executable).parent)
    return path if path.split(os.pathsep)[:1] == [bin_dir] else os.pathsep.join([bin_dir, path])


class GradingError(RuntimeError):
    """A command cannot do what it was asked; the message says why and what to do.  ``python -m grader`` prints it
    and exits 1."""
