"""The translab a grading kernel imports: notebook N's kernel gets stage ``UNTIL=N``, never the full library.

A kernel that holds translab's answers is a kernel whose student can call them, however many hooks stand in the
way: the hooks run in the student's own process.  So the grader gives each notebook's kernel the library a student
of that week had (``make student-release UNTIL=N``: the parts before N as released, part N and later as stubs,
``grader.course.withheld``), whatever the course has released, and the kernel cannot read anything else:

* ``build`` writes the six stages into a folder of the batch (root's or the instructor's alone, hidden from every
  kernel), compiled, once per grading session;
* ``grader.isolation.launcher`` bind-mounts the notebook's stage over every folder a ``translab`` is imported from (the
  checkout's, an installed copy's, the course's own), in the kernel's private mount view, before any student code;
* the kernels' zygote imports no translab at all (``grader.isolation.zygote``), and the checker, which needs the references
  and the full library, is forked from a zygote of its own that no kernel is forked from.

``stage_of`` reads the notebook's part from its file name (``03_...ipynb`` is part 3); a notebook named otherwise
gets stage 1, which holds everything back.
"""
from __future__ import annotations

import compileall
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from translab.paths import PACKAGE_DIR

from grader.course import withheld

STAGE_ENV = "TRANSLAB_KERNEL_STAGE"  # set by GuardedExecute for the launcher: the part of the notebook it grades
LIBRARY = "translab"


def stages_folder(work: Path) -> Path:
    """Where a grading session keeps its stages: beside the zygote's folder, private, hidden from kernels."""
    return work / "stages"


def stage_of(notebook: str | os.PathLike) -> int:
    """The stage a notebook is graded with: its part (the leading number of its name), else 1."""
    found = re.match(r"0*([1-9]\d*)_", Path(notebook).name)
    part = int(found.group(1)) if found else 1
    return part if 1 <= part <= withheld.LAST_PART else 1


def library(work: Path, stage: int) -> Path:
    """The ``translab`` folder of one stage, as ``build`` wrote it."""
    return stages_folder(work) / str(stage) / LIBRARY


def build(source: Path, work: Path) -> Path:
    """Write stages 1 to ``LAST_PART`` of the library at ``source`` (a ``translab`` folder) below ``work``, each
    compiled (a kernel imports from a read-only view: without bytecode it would compile every import); returns the
    stages' folder."""
    folder = stages_folder(work)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_lab")
    for stage in range(1, withheld.LAST_PART + 1):
        dest = library(work, stage)
        shutil.rmtree(dest.parent, ignore_errors=True)
        shutil.copytree(source, dest, ignore=ignore)
        withheld.write_library(source, dest, stage)
        compileall.compile_dir(str(dest), quiet=1, workers=1)
        # readable by the kernel's uid through the bind mount, which keeps the files' own modes
        for path in [dest, *dest.rglob("*")]:
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return folder


def library_folders(root: Path) -> list[Path]:
    """Every folder a grading kernel could import a full ``translab`` from: the one this process imported, one on
    the interpreter's path (an installed copy), the course's own.  Each is covered by the notebook's stage."""
    candidates = [PACKAGE_DIR, Path(root) / LIBRARY] + [Path(entry or ".") / LIBRARY for entry in sys.path]
    found = []
    for folder in candidates:
        try:
            real = folder.resolve()
        except OSError:
            continue
        if (real / "__init__.py").is_file() and real not in found:
            found.append(real)
    return found


# run by the kernels' interpreter with their environment: where its import machinery finds translab (not importing it)
_FIND_LIBRARY = ("import importlib.util; spec = importlib.util.find_spec('translab'); "
                 "print(spec.submodule_search_locations[0] if spec and spec.submodule_search_locations else '')")


def unstaged_library(root: Path, env: dict) -> str | None:
    """Why the batch's kernels (started with ``env``) would not import the notebook's stage of translab, or None.
    The launcher puts the stage over every folder ``library_folders`` names and hides the rest of the machine; a
    kernel whose interpreter finds translab elsewhere (an editable install of another checkout than the one
    grading) or nowhere would fail its first import and score every answer 0, with nothing flagged."""
    done = subprocess.run([sys.executable, "-c", _FIND_LIBRARY], cwd="/", env=env, capture_output=True, text=True,
                          timeout=120)
    found = done.stdout.strip()
    covered = library_folders(root)
    if found and Path(found).resolve() in covered:
        return None
    where = f"translab from {found}" if found else "no translab at all"
    return (f"the grading kernels would import {where}, which the sandbox does not replace with the notebook's "
            f"stage ({', '.join(map(str, covered))}): every answer would score 0. Grade with the grader of the "
            f"checkout {sys.executable} has installed, or install this one (`pip install -e {root}`), or put it "
            f"first on PYTHONPATH")
