"""Where things live.

The lab's files (``artifacts/``: tokenizer and checkpoint; ``results/``; ``references/``; ``data/``) are read from
``LAB_HOME``: the folder ``TRANSLAB_HOME`` names (one environment shared by the users of a JupyterHub, with a
student release unpacked read-only in /srv/translab); else the folder that holds this package in a checkout of the
course or a student release; else, in an install of the student wheel (``pip install``, Colab's setup cell), the
copy of those files the wheel carries inside the package (``translab/_lab``), read-only, with the data in the
user's own data folder.  ``TRANSLAB_DATA_DIR`` moves the data alone, ``TRANSLAB_CACHE`` the downloads.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

from .contract import ASSIGNMENT, CACHE_ENV, CHECKER_ENV, DATA_DIR_ENV, EXCHANGE_ENV, HOME_ENV  # noqa: F401 - named here too

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_ROOT = PACKAGE_DIR.parent  # the checkout (or student release) this package is in, if any
BUNDLED_HOME = PACKAGE_DIR / "_lab"  # the lab's files inside the student wheel (grader.course.student_release)


def _lab_home() -> Path:
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser().resolve()
    if not (REPO_ROOT / "artifacts").is_dir() and BUNDLED_HOME.is_dir():
        return BUNDLED_HOME
    return REPO_ROOT


LAB_HOME = _lab_home()
INSTALLED_WHEEL = LAB_HOME == BUNDLED_HOME  # no checkout around: the data goes to the user's data folder
ARTIFACTS_DIR = LAB_HOME / "artifacts"
GRADER_DIR = REPO_ROOT / "grader"
RESULTS_DIR = LAB_HOME / "results"


def as_recorded(path: Path | str) -> str:
    """A path as results and manifests record it: relative to the checkout when inside it, so that a committed file
    says the same on every machine."""
    path = Path(path).resolve()
    return str(path.relative_to(REPO_ROOT)) if REPO_ROOT in path.parents else str(path)


def exchange_root(course_root: Path | str) -> Path:
    """nbgrader's exchange: the hub's shared folder, else a folder of the course's own (the local flow)."""
    return Path(os.environ.get(EXCHANGE_ENV) or Path(course_root) / "exchange")


def data_dir() -> Path:
    if os.environ.get(DATA_DIR_ENV):
        return Path(os.environ[DATA_DIR_ENV])
    return user_data_dir() if INSTALLED_WHEEL else LAB_HOME / "data"


def user_data_dir() -> Path:
    """Where an installed wheel keeps the data it fetches: the platform's per-user data folder (site-packages may
    be read-only or shared), as Windows, macOS and Linux each name it."""
    home = Path.home()
    if os.name == "nt":
        return Path(os.environ.get("LOCALAPPDATA") or home / "AppData" / "Local") / "translab"
    if sys.platform == "darwin":
        return home / "Library" / "Application Support" / "translab"
    return Path(os.environ.get("XDG_DATA_HOME") or home / ".local" / "share") / "translab"


def notebooks_dir() -> Path | None:
    """The released notebooks of a checkout or student release, where students work on them; None in a wheel
    install, where ``python -m translab setup`` copies them into a folder of the student's."""
    folder = LAB_HOME / "notebooks" / ASSIGNMENT
    return None if INSTALLED_WHEEL or not folder.is_dir() else folder


def where_to_look() -> str:
    """What to tell someone whose lab file is missing: where translab looked, and how to point it elsewhere."""
    source = (f"{HOME_ENV}={os.environ[HOME_ENV]}" if os.environ.get(HOME_ENV) else
              "the files the installed wheel carries" if INSTALLED_WHEEL else "the folder holding translab/")
    return (f"translab reads the lab's files below {LAB_HOME} ({source}). Open the notebooks inside the course or "
            f"the student release; where translab is installed for many users, set {HOME_ENV} to the folder of the "
            "student release (`make student-release DEST=...`).")


def raw_dir() -> Path:
    return data_dir() / "raw"


def processed_dir() -> Path:
    return data_dir() / "processed"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, data_dir() / "cache"))
