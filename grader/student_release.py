"""``make student-release DEST=dir``: exactly what students get, and nothing of the grader's.

The released notebooks (``notebooks/``, made by ``make release`` from the solutions), the student library
(``translab/``), the visible half of every reference (``references/``: the hidden cases never leave the
instructor), the shipped tokenizer and checkpoint, the measured results the notebooks read, and a
Makefile whose ``make setup`` / ``make lab`` work there on their own.  No solutions, no gradebook, no
grader code, no hidden test data, no course secret: only ``variants.json``, the variant code of each student known
at release time under a hash of their id (``translab.variants``).
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

from translab import references
from translab.contract import ASSIGNMENT
from translab.variants import TABLE_NAME as VARIANTS_TABLE

from . import withheld
from translab.paths import REPO_ROOT

# What the student package needs to run every notebook: the library and what it reads.
LIBRARY = "translab"
ARTIFACTS = ("tokenizer.model", "pretrained_lm.pt", "pretrained_lm.json")
RESULTS = ("transfer.json", "transfer.png", "bert_finetune.json", "diagnostics.json", "recipe_search.json",
           "student_run.json")
# Dependencies the students' environment does without: the test runner and the browser driver of our CI.
INSTRUCTOR_ONLY_DEPENDENCIES = ("pytest", "playwright")

STUDENT_MAKEFILE = """\
# translab, the student release: `make setup` once, then `make lab`.
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTHON ?= python3
PORT   ?= 8888

.PHONY: help setup data lab

help: ## list the targets
\t@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml constraints.txt
\ttest -x $(PY) || $(PYTHON) -m venv $(VENV)
\t$(PY) -m pip install --quiet -c constraints.txt -e .
\ttouch $@

setup: $(VENV)/.installed data ## create .venv, install the pinned dependencies, fetch and prepare the data

data: $(VENV)/.installed ## fetch the corpora and the pretrained encoder (sha256-checked) and prepare them
\t$(PY) -m translab.data all

lab: $(VENV)/.installed ## start JupyterLab on the notebooks (prints the URL)
\tJUPYTER_CONFIG_PATH=$(CURDIR)/translab/jupyter_student $(VENV)/bin/jupyter lab --no-browser \\
\t\t--notebook-dir=notebooks/transfer_learning --ServerApp.ip=127.0.0.1 --port=$(PORT) \\
\t\t$(foreach ext,formgrader course_list assignment_list,--ServerApp.jpserver_extensions=nbgrader.server_extensions.$(ext)=False) \\
\t\t$$( [ "$$(id -u)" = 0 ] && echo --allow-root )
"""

STUDENT_README = """\
# translab: Transformers and transfer learning, an autograded lab

Six notebooks, each to complete in order; `notebooks/transfer_learning/` holds those released so far:

1. causal mask and positional encoding; 2. the model and its parameters; 3. pretraining and generation;
4. transfer: pretrained vs from scratch; 5. masked language modelling; 6. transfer at scale (a real BERT).

Part 2 asks once for the id your instructor uses for you (`variants.set_student_id("...")` in a cell), to show
you the configuration whose parameters you count. Your instructor releases the next part after each deadline, with translab's own versions of the answers of the
parts before it (a later part builds on them, whether or not yours work).

    make setup   # once: a virtual environment with the pinned packages, then the data (a few minutes)
    make lab     # JupyterLab on the notebooks, at the printed URL

Each exercise is followed by a check cell that tells you what is right or wrong. Your instructor grades
your submitted notebooks with more checks, on cases you have not seen, and reads your written answers.
"""


class ReleaseError(RuntimeError):
    """The release cannot be written as asked; the message says why and what to do."""


def write(dest: Path, root: Path = REPO_ROOT, student_ids: list[str] | None = None, until: int = 1) -> list[Path]:
    """Write the student release into ``dest`` (which must not exist or be empty); returns the files written.
    ``until``: the part the students start now: the notebooks up to it, translab's reference code of the parts
    before it, stubs for the rest (``grader.withheld``; ``LAST_PART + 1``: everything).  ``student_ids``: whose
    variant codes the release's table holds (default: the gradebook's roster and the students with a
    submission); a student not in it gets a code from the instructor (``grader.variants``)."""
    dest = Path(dest).resolve()
    try:
        withheld.withheld(until)
    except withheld.StageError as error:
        raise ReleaseError(str(error)) from error
    from .variants import SecretMissing, require_secret
    try:
        require_secret(root)
    except SecretMissing as error:
        raise ReleaseError(str(error)) from error
    if dest.exists() and any(dest.iterdir()):
        raise ReleaseError(f"{dest} is not empty: choose a new folder (the release never overwrites files)")
    if dest == root.resolve() or root.resolve() in dest.parents:
        raise ReleaseError(f"{dest} is inside the course; choose a folder outside it")
    released = root / "notebooks" / ASSIGNMENT
    notebooks = sorted(released.glob("*.ipynb"))
    if not notebooks:
        raise ReleaseError(f"no released notebooks in {released}: run `make release` first")
    dest.mkdir(parents=True, exist_ok=True)
    for notebook in notebooks:
        if int(notebook.name[:2]) <= until:
            _copy(notebook, dest / "notebooks" / ASSIGNMENT / notebook.name)
    shutil.copytree(root / LIBRARY, dest / LIBRARY, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    try:
        withheld.write_library(root / LIBRARY, dest / LIBRARY, until)
    except withheld.StageError as error:
        raise ReleaseError(str(error)) from error
    for name in ARTIFACTS:
        _copy(root / "artifacts" / name, dest / "artifacts" / name)
    for name in RESULTS:
        if (root / "results" / name).exists():
            _copy(root / "results" / name, dest / "results" / name)
    (dest / "references").mkdir()
    for name in references.NAMES:
        visible = references.load_from(root / "grader" / "references", name)["visible"]
        torch.save({"visible": visible}, dest / "references" / f"{name}.pt")
    _copy(root / "constraints.txt", dest / "constraints.txt")
    (dest / "pyproject.toml").write_text(student_pyproject((root / "pyproject.toml").read_text(encoding="utf-8")),
                                         encoding="utf-8")
    (dest / "Makefile").write_text(STUDENT_MAKEFILE, encoding="utf-8")
    (dest / "README.md").write_text(STUDENT_README, encoding="utf-8")
    (dest / "data").mkdir()
    _copy(root / "data" / "README.md", dest / "data" / "README.md")
    from . import variants
    table = variants.release_table(variants.known_students(root) if student_ids is None else student_ids, root)
    (dest / VARIANTS_TABLE).write_text(json.dumps(table, indent=1), encoding="utf-8")
    return sorted(path for path in dest.rglob("*") if path.is_file())


def student_pyproject(text: str) -> str:
    """The course's pyproject.toml for the student package: ``translab`` only, without instructor-only tools."""
    text = re.sub(r'^packages = \[.*\]$', 'packages = ["translab", "translab.checks"]', text, flags=re.M)
    text = re.sub(r'^testpaths = \[.*\]$', 'testpaths = []', text, flags=re.M)
    for name in INSTRUCTOR_ONLY_DEPENDENCIES:
        text = re.sub(rf'^\s*"{name}==[^"]*",\n', "", text, flags=re.M)
    if 'packages = ["translab", "translab.checks"]' not in text:
        raise ReleaseError("pyproject.toml has no [tool.setuptools] packages line to rewrite")
    return text


def _copy(source: Path, target: Path) -> None:
    if not source.exists():
        raise ReleaseError(f"{source} is missing from the course; the release needs it")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
