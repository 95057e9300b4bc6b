"""Where the notebooks' checks find the tensors they compare against, and reading them.

Each ``<name>.pt`` is a dict with a ``visible`` split (the cases a notebook shows) and, in the
instructor's course only, a ``hidden`` one.  They are built by the grader (``grader.references``,
``make references``); a student release (``make student-release``) carries the visible split alone.
"""
from __future__ import annotations

import os
from pathlib import Path

import torch

from .paths import GRADER_DIR, LAB_HOME, REPO_ROOT, where_to_look

NAMES = ("mask", "positional_encoding", "transformer", "heads", "model", "parameters",
         "lm_targets", "lm_loss", "greedy", "accuracy", "transfer", "mlm_loss",
         "bert_base", "bert_mapping", "bert_parameters", "bert_classifier")


def references_dir() -> Path:
    """The folder of the references: ``TRANSLAB_REFERENCES`` if set; else the course's ``grader/references``
    or a student release's ``references``, in ``LAB_HOME`` or next to this package; else the nearest one above
    the working directory (a notebook run from ``notebooks/``, ``autograded/<student>/`` or an unpacked LMS zip)."""
    override = os.environ.get("TRANSLAB_REFERENCES")
    if override:
        return Path(override)
    candidates = [LAB_HOME / "grader" / "references", LAB_HOME / "references", GRADER_DIR / "references",
                  REPO_ROOT / "references"]
    here = Path.cwd().resolve()
    candidates += [parent / folder for parent in (here, *here.parents) for folder in ("grader/references", "references")]
    for candidate in candidates:
        if (candidate / "mask.pt").exists():
            return candidate
    raise FileNotFoundError(
        "the checks' references were not found (grader/references/ or references/, next to translab or above "
        "the current folder). Open the notebook inside the course or the student release, or run `make references` "
        "in the course. " + where_to_look())


def load(name: str) -> dict:
    return load_from(references_dir(), name)


def load_from(folder: Path, name: str) -> dict:
    path = Path(folder) / f"{name}.pt"
    if not path.exists():
        raise FileNotFoundError(f"reference {path} is missing: run `make references` in the course")
    return torch.load(path, map_location="cpu", weights_only=True)
