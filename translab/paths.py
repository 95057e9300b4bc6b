"""Where things live.

The lab's files (``artifacts/``: tokenizer and checkpoint; ``results/``; ``references/``; ``data/``) are read from
``LAB_HOME``: the folder that holds this package in a checkout of the course or a student release, or the folder
``TRANSLAB_HOME`` names, which is what a normal (non-editable) install needs, e.g. one environment shared by the
users of a JupyterHub with a student release unpacked read-only in /srv/translab.  ``TRANSLAB_DATA_DIR`` moves
the data alone, ``TRANSLAB_CACHE`` the downloads.
"""
from __future__ import annotations

import os
from pathlib import Path

from .contract import CACHE_ENV, CHECKER_ENV, DATA_DIR_ENV, EXCHANGE_ENV, HOME_ENV  # noqa: F401 - named here too

REPO_ROOT = Path(__file__).resolve().parents[1]  # the checkout (or student release) this package is in, if any
LAB_HOME = Path(os.environ[HOME_ENV]).expanduser().resolve() if os.environ.get(HOME_ENV) else REPO_ROOT
ARTIFACTS_DIR = LAB_HOME / "artifacts"
GRADER_DIR = REPO_ROOT / "grader"
RESULTS_DIR = LAB_HOME / "results"


def exchange_root(course_root: Path | str) -> Path:
    """nbgrader's exchange: the hub's shared folder, else a folder of the course's own (the local flow)."""
    return Path(os.environ.get(EXCHANGE_ENV) or Path(course_root) / "exchange")


def data_dir() -> Path:
    return Path(os.environ.get(DATA_DIR_ENV, LAB_HOME / "data"))


def where_to_look() -> str:
    """What to tell someone whose lab file is missing: where translab looked, and how to point it elsewhere."""
    source = f"{HOME_ENV}={os.environ[HOME_ENV]}" if os.environ.get(HOME_ENV) else "the folder holding translab/"
    return (f"translab reads the lab's files below {LAB_HOME} ({source}). Open the notebooks inside the course or "
            f"the student release; where translab is installed for many users, set {HOME_ENV} to the folder of the "
            "student release (`make student-release DEST=...`).")


def raw_dir() -> Path:
    return data_dir() / "raw"


def processed_dir() -> Path:
    return data_dir() / "processed"


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, data_dir() / "cache"))
