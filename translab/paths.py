"""Where things live.  ``TRANSLAB_DATA_DIR`` moves the data, ``TRANSLAB_CACHE`` the downloads."""
from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS_DIR = REPO_ROOT / "artifacts"
GRADER_DIR = REPO_ROOT / "grader"
RESULTS_DIR = REPO_ROOT / "results"
# the grader's checker socket, set in a grading kernel's environment (translab.wire); here, away from torch, so
# the grader's processes can name it without importing torch
CHECKER_ENV = "TRANSLAB_CHECKER"


def data_dir() -> Path:
    return Path(os.environ.get("TRANSLAB_DATA_DIR", REPO_ROOT / "data"))


def raw_dir() -> Path:
    return data_dir() / "raw"


def processed_dir() -> Path:
    return data_dir() / "processed"


def cache_dir() -> Path:
    return Path(os.environ.get("TRANSLAB_CACHE", data_dir() / "cache"))
