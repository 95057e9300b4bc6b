"""``make student-release DEST=dir``: exactly what students get, and nothing of the grader's.

The released notebooks (``notebooks/``, made by ``make release`` from the solutions), the student library
(``translab/``), the visible half of every reference (``references/``: the hidden cases never leave the
instructor), the shipped tokenizer and checkpoint, the measured results the notebooks read, and a
Makefile whose ``make setup`` / ``make lab`` work there on their own.  No solutions, no gradebook, no
grader code, no hidden test data, no course secret and no student's variant code (the instructor sends each
student theirs: ``make variants``).

Beside the folder, ``dist/`` holds the same as one wheel (``pip install``-able anywhere: the lab's files ride inside
the package, ``translab/_lab``), whose dependencies are ranges tested with the torch a platform ships (Colab's),
not our pins.  ``package`` (where students' setup cells install it from) and ``colab`` (the GitHub repository the
release is pushed to, for the "Open in Colab" badges) are written into each notebook.
"""
from __future__ import annotations

import datetime
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import torch

from translab import references, setup_cell
from translab.contract import ASSIGNMENT

from grader.course import withheld
from translab.paths import REPO_ROOT

# What the student package needs to run every notebook: the library and what it reads.
LIBRARY = "translab"
ARTIFACTS = ("tokenizer.model", "pretrained_lm.pt", "pretrained_lm.json")
RESULTS = ("transfer.json", "transfer.png", "bert_finetune.json", "diagnostics.json", "recipe_search.json",
           "student_run.json", "decoding.json",
           "bench.json")  # bench.json: the time each training cell prints before it starts
# What the student wheel needs, as ranges: the platform's own packages (Colab's torch, numpy, ...) satisfy them, so
# the setup cell installs translab beside them instead of replacing them.  torch: the versions tested, by
# grader/tests/test_students_anywhere.py (2.14.1, a fresh venv, CPU), `make test` itself (2.13.0) and a GPU runtime
# (2.11.0, Python 3.12, as Colab has them: experiments/gpu_check.py, results/gpu_check.json).  The others are lower
# bounds below which nothing was tested: what those runs had was our pins and, on the GPU runtime, its own packages.
# A test checks that our pins lie inside, and that these are all that translab imports.
STUDENT_REQUIREMENTS = {
    "torch": ">=2.11,<2.15",
    "numpy": ">=1.26",
    "matplotlib": ">=3.7",
    "sentencepiece": ">=0.1.99",
    "safetensors": ">=0.4",
    "tokenizers": ">=0.15",
    "tqdm": ">=4.64",
    "scikit-learn": ">=1.3",
}
# `pip install "translab[lab] @ ..."`: JupyterLab with nbgrader's Validate, where no Jupyter is (a laptop).
LAB_REQUIREMENTS = {"jupyterlab": ">=4.0", "notebook": ">=7.0", "nbgrader": ">=0.9", "ipykernel": ">=6.25"}
TESTED_PYTHON = ">=3.11"  # 3.11 here, 3.12 on the GPU runtime
BUNDLED = "_lab"  # translab/_lab in the wheel: artifacts, results, references, notebooks
# Every release of the course, numbered: the wheel's version carries the week and this number, so that each release
# upgrades the one before with the README's one `pip install` (pip skips a wheel whose version is installed).  Kept
# in the course root beside the gradebook; git-ignored like the other working files.
RELEASE_LOG = ".translab_releases.json"

STUDENT_MAKEFILE = """\
# translab, the student release: `make setup` once, then `make lab` (shortcuts for python -m translab setup / lab).
SHELL := /bin/bash
.DEFAULT_GOAL := help
VENV   ?= .venv
PY     := $(VENV)/bin/python
PYTHON ?= python3
PORT   ?= 8888

.PHONY: help setup lab

help: ## list the targets
\t@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-8s %s\\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml constraints.txt
\ttest -x $(PY) || $(PYTHON) -m venv $(VENV)
\t$(PY) -m pip install --quiet -c constraints.txt -e ".[lab]"
\ttouch $@

setup: $(VENV)/.installed ## create .venv with the pinned packages, fetch and prepare the data (python -m translab setup)
\t$(PY) -m translab setup

lab: $(VENV)/.installed ## start JupyterLab on the notebooks (prints the URL; python -m translab lab)
\t$(PY) -m translab lab --notebooks notebooks/transfer_learning --port $(PORT)
"""

STUDENT_README = """\
# translab: Transformers and transfer learning, an autograded lab

{badge}Six notebooks, each to complete in order; `notebooks/transfer_learning/` holds those released so far:

1. causal mask and positional encoding; 2. the model and its parameters; 3. pretraining and generation;
4. transfer: pretrained vs from scratch; 5. masked language modelling; 6. transfer at scale (a real BERT).

**In Colab** (or any hosted Jupyter): {colab} The first cell installs translab and fetches the part's data (a
few minutes, once per runtime); a GPU runtime trains faster, and the checks run on the CPU either way. Download your
notebook (File > Download .ipynb) and hand it in as your course asks.

**On your laptop** (Linux, macOS or Windows, Python 3.11 or later; a virtual environment is best), in one folder of
your own that you keep all term{save}:

    pip install "{requirement}"
    python -m translab setup    # the data (sha256-checked) and the notebooks, into ./translab-notebooks
    python -m translab lab      # JupyterLab on them, at the printed URL

Each release has a version of its own ({version}: week {until}, the course's release {serial}). When the next week's
comes, run the same three commands with its wheel, in the same folder: pip replaces translab with the new release,
`setup` adds the new week's notebooks and leaves yours as they are.

In this folder, `make setup` then `make lab` do the same with the exact versions the course was tested with.

Part 2 asks once for the variant code your instructor sends you (`variants.use_code("XXXXX-XXXXX")` in a cell),
to show you the configuration whose parameters you count. Your instructor releases the next part after each deadline, with
translab's own versions of the answers of the parts before it (a later part builds on them, whether or not yours
work).

Each exercise is followed by a check cell that tells you what is right or wrong. Your instructor grades
your submitted notebooks with more checks, on cases you have not seen, and reads your written answers.
"""


class ReleaseError(RuntimeError):
    """The release cannot be written as asked; the message says why and what to do."""


def write(dest: Path, root: Path = REPO_ROOT, until: int = 1, package: str = "", colab: str = "", wheel: bool = False,
          serial: int = 0) -> list[Path]:
    """Write the student release into ``dest`` (which must not exist or be empty); returns the files written.
    ``until``: the part the students start now: the notebooks up to it, translab's reference code of the parts
    before it, stubs for the rest (``grader.course.withheld``; ``LAST_PART + 1``: everything).
    ``package``: what the notebooks' setup cells ``pip install`` (a wheel URL, a name on PyPI); ``colab``: the
    GitHub repository (owner/name[@ref]) the release will be pushed to: badges open its notebooks in Colab, and
    ``package`` defaults to its ``dist/`` wheel.  ``wheel``: build that wheel into ``dest/dist``.  ``serial``: the
    release's number in the course (``next_serial``; 0: unnumbered), which with ``until`` makes its version."""
    dest = Path(dest).resolve()
    if colab and not re.fullmatch(r"[\w.-]+/[\w.-]+(@[\w./-]+)?", colab):
        raise ReleaseError(f"COLAB={colab!r} is not a GitHub repository: write owner/name or owner/name@branch")
    version = student_version(root, until, serial)
    if colab and not package:
        package = setup_cell.wheel_url(colab, wheel_file(version))
    try:
        withheld.withheld(until)
    except withheld.StageError as error:
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
            _fill_in(dest / "notebooks" / ASSIGNMENT / notebook.name, package, colab)
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
    (dest / "pyproject.toml").write_text(student_pyproject(version), encoding="utf-8")
    (dest / "Makefile").write_text(STUDENT_MAKEFILE, encoding="utf-8")
    (dest / "README.md").write_text(student_readme(package, colab, notebooks[0].name, until, serial, version,
                                                   built=wheel), encoding="utf-8")
    (dest / "data").mkdir()
    _copy(root / "data" / "README.md", dest / "data" / "README.md")
    if wheel:
        build_wheel(dest, dest / "dist")
    return sorted(path for path in dest.rglob("*") if path.is_file())


def _version(course_pyproject: str) -> str:
    found = re.search(r'^version = "([^"]+)"$', course_pyproject, flags=re.M)
    if not found:
        raise ReleaseError("pyproject.toml has no version line for the student package")
    return found.group(1)


def student_version(root: Path = REPO_ROOT, until: int = 1, serial: int = 0) -> str:
    """The course's version, then the week (the part students start now) and the release's number: 0.1.0.2.5 is
    week 2, the course's fifth release.  No two releases share a version, so pip installs each over the last."""
    return f"{_version((root / 'pyproject.toml').read_text(encoding='utf-8'))}.{until}.{serial}"


def wheel_name(root: Path = REPO_ROOT, until: int = 1, serial: int = 0) -> str:
    return wheel_file(student_version(root, until, serial))


def wheel_file(version: str) -> str:
    """The file name setuptools gives the student wheel at ``version``."""
    return f"translab-{version}-py3-none-any.whl"


def releases(root: Path = REPO_ROOT) -> list[dict]:
    """The course's releases so far, oldest first (``RELEASE_LOG``)."""
    log = Path(root) / RELEASE_LOG
    if not log.exists():
        return []
    try:
        return json.loads(log.read_text(encoding="utf-8"))["releases"]
    except (ValueError, KeyError, TypeError) as error:
        raise ReleaseError(f"{log} is not the release log translab writes ({error}): restore it from a backup, or "
                           "give the release's number yourself (--serial N, above every number already given out)") \
            from error


def next_serial(root: Path = REPO_ROOT) -> int:
    return max((release["serial"] for release in releases(root)), default=0) + 1


def record(root: Path, serial: int, until: int, dest: Path) -> None:
    """Add a release to the course's log, so that the next one gets the next number."""
    entries = [release for release in releases(root) if release["serial"] != serial]
    entries.append({"serial": serial, "until": until, "version": student_version(root, until, serial),
                    "dest": str(Path(dest).resolve()), "written": datetime.date.today().isoformat()})
    (Path(root) / RELEASE_LOG).write_text(json.dumps({"releases": entries}, indent=1) + "\n", encoding="utf-8")


def student_packages(root: Path = REPO_ROOT) -> list[str]:
    """translab and every subpackage of it: a subpackage the wheel leaves out is an ImportError in every notebook."""
    return sorted(".".join(init.parent.relative_to(root).parts) for init in (root / "translab").rglob("__init__.py")
                  if "__pycache__" not in init.parts)


def student_pyproject(version: str) -> str:
    """The student package's pyproject.toml at ``version`` (``student_version``): ``translab`` only, its
    dependencies as tested ranges (not the course's
    pins, which ``constraints.txt`` still applies in ``make setup``), JupyterLab and nbgrader as the ``lab`` extra,
    and the lab's files inside the package where a wheel carries them."""
    def listed(requirements: dict[str, str]) -> str:
        return "".join(f'    "{name}{spec}",\n' for name, spec in requirements.items())
    return f"""[build-system]
requires = ["setuptools>=68"]
build-backend = "setuptools.build_meta"

[project]
name = "translab"
version = "{version}"
description = "Transformers and transfer learning for NLP: the student package of an autograded lab"
readme = "README.md"
license = {{text = "MIT"}}
requires-python = "{TESTED_PYTHON}"
dependencies = [
{listed(STUDENT_REQUIREMENTS)}]

[project.optional-dependencies]
lab = [
{listed(LAB_REQUIREMENTS)}]

[tool.setuptools]
packages = [{", ".join(f'"{name}"' for name in student_packages())}]

[tool.setuptools.package-data]
translab = ["jupyter_student/*/*.json", "{BUNDLED}/**/*"]
"""


def student_readme(package: str, colab: str, first_notebook: str, until: int, serial: int, version: str,
                   built: bool = True) -> str:
    """The release's README: the Colab badge first when the release says where it is published, and the commands
    that install this release (``version``: week ``until``, release ``serial``) as written: from ``package`` where
    it is published, else from its wheel in ``dist/`` (``built``) or the file the instructor hands out."""
    wheel = wheel_file(version)
    if colab:
        url = setup_cell.colab_url(colab, f"notebooks/{ASSIGNMENT}/{first_notebook}")
        badge, where = setup_cell.badge(url), f"open [part 1 in Colab]({url}), then each part from its own badge."
    elif package:
        badge, where = "", "open a notebook of this release (File > Upload notebook)."
    else:
        badge, where = "", (f"open a notebook of this release (File > Upload notebook) and upload `dist/{wheel}` "
                            "from this folder into the runtime's files (the folder icon on the left, then Upload).")
    local = wheel if built else "<the wheel file your instructor gives>"
    save = "" if package else (f" (save this release's wheel, `dist/{wheel}`, into it first)" if built
                               else " (save the wheel your instructor gives into it first)")
    return STUDENT_README.format(badge=badge, colab=where, requirement=pip_requirement(package or local), save=save,
                                 version=version, until=until, serial=serial)


def pip_requirement(where: str, extras: str = "lab") -> str:
    """What ``pip install`` takes for translab with ``extras`` from ``where``: a URL (``translab[lab] @ URL``), a
    wheel file (``path.whl[lab]``: pip takes no ``name @`` before a plain path) or a name on PyPI."""
    if "://" in where:
        return f"translab[{extras}] @ {where}"
    if where.endswith(".whl") or where.startswith("<"):
        return f"{where}[{extras}]"
    named = re.fullmatch(r"([A-Za-z0-9_.-]+)(.*)", where)  # a name on PyPI, with or without a version
    return f"{named.group(1)}[{extras}]{named.group(2)}" if named else where


def _fill_in(notebook: Path, package: str, colab: str) -> None:
    """Write where translab comes from into the setup cell, and the Colab badge into the title cell."""
    import nbformat
    document = nbformat.read(notebook, as_version=4)
    cells = [cell for cell in document.cells if cell.cell_type == "code" and cell.source.startswith(setup_cell.MARKER)]
    if len(cells) != 1:
        raise ReleaseError(f"{notebook.name} has {len(cells)} setup cells, not 1: run `make release` after "
                           "editing solutions/ (the setup cell is the first code cell, as translab.setup_cell writes it)")
    if package:
        cells[0].source = setup_cell.with_package(cells[0].source, package)
    if colab:
        title = document.cells[0]
        title.source = setup_cell.with_badge(title.source, setup_cell.colab_url(
            colab, f"notebooks/{ASSIGNMENT}/{notebook.name}"))
    nbformat.write(document, notebook)


def build_wheel(release: Path, dist: Path) -> Path:
    """The release as one wheel: the package with the lab's files inside it (``translab/_lab``), built by
    setuptools (pip wheel, offline: the build needs only the setuptools of this environment)."""
    with tempfile.TemporaryDirectory(prefix="translab-wheel-") as scratch:
        stage = Path(scratch) / "translab"
        shutil.copytree(release / LIBRARY, stage / LIBRARY, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        for name in ("pyproject.toml", "README.md"):
            shutil.copy2(release / name, stage / name)
        bundled = stage / LIBRARY / BUNDLED
        for name in ("artifacts", "results", "references", "notebooks"):
            if (release / name).is_dir():
                shutil.copytree(release / name, bundled / name)
        dist.mkdir(parents=True, exist_ok=True)
        built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
                                "--wheel-dir", str(dist), str(stage)], capture_output=True, text=True)
        if built.returncode != 0:
            raise ReleaseError(f"building the student wheel failed:\n{built.stderr.strip()[-2000:]}")
    wheels = sorted(dist.glob("translab-*.whl"))
    if len(wheels) != 1:
        raise ReleaseError(f"expected one wheel in {dist}, found {[w.name for w in wheels]}")
    return wheels[0]


def _copy(source: Path, target: Path) -> None:
    if not source.exists():
        raise ReleaseError(f"{source} is missing from the course; the release needs it")
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(source, target)
