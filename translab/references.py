"""Where the notebooks' checks find the tensors they compare against, and reading them.

Each ``<name>.pt`` is a dict with a ``visible`` split (the cases a notebook shows) and, in the
instructor's course only, a ``hidden`` one.  They are built by the grader (``grader.references``,
``make references``); a student release (``make student-release``) carries the visible split alone.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import NamedTuple

import torch

from .contract import REFERENCES_ENV
from .paths import GRADER_DIR, LAB_HOME, REPO_ROOT, where_to_look

NAMES = ("mask", "positional_encoding", "attention", "multi_head_attention", "transformer", "heads", "model", "parameters",
         "lm_targets", "lm_loss", "greedy", "decoding", "tokenization", "accuracy", "transfer", "mlm_loss",
         "bert_base", "bert_mapping", "bert_parameters", "bert_classifier")


class Tolerance(NamedTuple):
    """How far a float may be from its reference and still be right: ``|found - expected| <= atol + rtol *
    |expected|``, element by element, in float64.  Integers, booleans and shapes are always compared exactly."""
    atol: float
    rtol: float


EXACT = Tolerance(0.0, 0.0)
# One tolerance per reference, read by the checks (``translab.checks``) and by the grader's staleness test
# (``grader.references.stale``).  A reference is built in exact arithmetic, the same bits on every CPU; a student's
# right answer is computed in float32 on the student's or the grading server's CPU, whose vector kernels add in
# another order.  Each tolerance stays at least 10x above the largest such difference measured over the code paths
# another CPU takes, and each known mistake at least 2x outside it (``python -m grader references --margins``,
# results/reference_margins.json, and its test).
TOLERANCES: dict[str, Tolerance] = {
    "mask": EXACT,  # 0 and -inf, nothing computed
    "positional_encoding": Tolerance(1e-5, 1e-5),
    "attention": Tolerance(2e-5, 2e-5),  # a head of width 64 in float32: 1e-5 left a margin of about 12
    "multi_head_attention": Tolerance(1e-5, 1e-5),
    "transformer": Tolerance(2e-5, 2e-5),  # three encoder layers in float32: 1e-5 left a margin of about 10
    "heads": Tolerance(1e-5, 1e-5),
    # four encoder layers and a 100-way head in float32: 1e-5 left a margin of 9.6 on no-AVX paths (AMD EPYC, CI)
    "model": Tolerance(2e-5, 2e-5),
    "parameters": EXACT,  # integer counts
    "lm_targets": EXACT,  # token ids
    "lm_loss": Tolerance(1e-5, 1e-5),
    "greedy": EXACT,  # token ids: argmax decisions, whose logit gaps the margins measure
    "decoding": Tolerance(1e-6, 1e-5),  # a softmax of a few logits; the filters' choices are exact
    "tokenization": EXACT,  # text
    "accuracy": Tolerance(1e-6, 0.0),  # a fraction of whole sentences: any real change moves it by 1/n
    "transfer": Tolerance(1e-5, 1e-5),
    "mlm_loss": Tolerance(1e-5, 1e-5),
    # random LayerNorms at a scale where every mistake shows: 1e-5 left a margin of about 10; tanh-GELU stays outside
    "bert_base": Tolerance(2e-5, 1e-4),
    # six 384-wide layers of the real MiniLM, activations up to about 6: the check has already asked for every weight
    # bit for bit, so this end-to-end comparison can be loose (1e-4 left a margin of about 8)
    "bert_mapping": Tolerance(3e-4, 3e-4),
    "bert_parameters": EXACT,  # integer counts
    "bert_classifier": Tolerance(1e-5, 1e-4),
}


def tolerance(name: str) -> Tolerance:
    return TOLERANCES[name]


def within(found: torch.Tensor, expected: torch.Tensor, tol: Tolerance, equal_nan: bool = False) -> bool:
    """``found`` has ``expected``'s shape and its values within ``tol`` (compared in float64; exactly for integer
    and boolean tensors)."""
    if tuple(found.shape) != tuple(expected.shape):
        return False
    if not (found.is_floating_point() or expected.is_floating_point()):
        return bool(torch.equal(found, expected.to(found.dtype)))
    return bool(torch.allclose(found.to(torch.float64), expected.to(torch.float64), atol=tol.atol, rtol=tol.rtol,
                               equal_nan=equal_nan))


def references_dir() -> Path:
    """The folder of the references: ``TRANSLAB_REFERENCES`` if set; else the course's ``grader/references``
    or a student release's ``references``, in ``LAB_HOME`` or next to this package; else the nearest one above
    the working directory (a notebook run from ``notebooks/``, ``autograded/<student>/`` or an unpacked LMS zip)."""
    override = os.environ.get(REFERENCES_ENV)
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
