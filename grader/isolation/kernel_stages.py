"""The translab a grading kernel imports: notebook N's kernel gets stage ``UNTIL=N``, never the full library.

A kernel that holds translab's answers is a kernel whose student can call them, however many hooks stand in the
way: the hooks run in the student's own process.  So the grader gives each notebook's kernel the library a student
of that week had (``make student-release UNTIL=N``: the parts before N as released, part N and later as stubs,
``grader.course.withheld``), whatever the course has released, and the kernel cannot read anything else:

* ``build`` writes the six stages into a folder of the batch (root's or the instructor's alone, hidden from every
  kernel), compiled, once per grading session: linked from the course's cache (``cache_folder``, hidden from every
  kernel too), where they were built once for this very source (``stages_key``), which saves each batch 2 s of
  compiling;
* ``grader.isolation.launcher`` bind-mounts the notebook's stage over every folder a ``translab`` is imported from (the
  checkout's, an installed copy's, the course's own), in the kernel's private mount view, before any student code;
* the kernels' zygote imports no translab at all (``grader.isolation.zygote``), and the checker, which needs the references
  and the full library, is forked from a zygote of its own that no kernel is forked from.

``stage_of`` reads the notebook's part from its file name (``03_...ipynb`` is part 3); a notebook named otherwise
gets stage 1, which holds everything back.
"""
from __future__ import annotations

import compileall
import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
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


SKIPPED = ("__pycache__", "*.pyc", "_lab")  # of the source: what no stage holds
COMPLETE = "complete"  # written last into a cached build: a build cut short is never used


def build(source: Path, work: Path, cache: Path | None = None) -> Path:
    """Write stages 1 to ``LAST_PART`` of the library at ``source`` (a ``translab`` folder) below ``work``, each
    compiled (a kernel imports from a read-only view: without bytecode it would compile every import); returns the
    stages' folder.  With ``cache``, the stages are linked from there (built there first if this source has none):
    the same files, bytecode and modes as a build in place."""
    folder = stages_folder(work)
    folder.mkdir(mode=0o700, exist_ok=True)
    os.chmod(folder, 0o700)
    built = _cached(source, cache) if cache is not None else None
    for stage in range(1, withheld.LAST_PART + 1):
        dest = library(work, stage)
        shutil.rmtree(dest.parent, ignore_errors=True)
        if built is not None:
            shutil.copytree(built / str(stage) / LIBRARY, dest, copy_function=_link_or_copy)
        else:
            _write_stage(source, dest, stage)
    return folder


def _link_or_copy(source: str, dest: str) -> None:
    """A cached stage's file, hard-linked (0.08 s for the six stages, against 0.8 s to copy them): no process
    writes to a stage's files, which the kernels see through a read-only mount.  Copied, with its mode and the
    time its bytecode was checked against, where the cache lies on another file system."""
    try:
        os.link(source, dest)
    except OSError:
        shutil.copy2(source, dest)


def _write_stage(source: Path, dest: Path, stage: int) -> None:
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns(*SKIPPED))
    withheld.write_library(source, dest, stage)
    compileall.compile_dir(str(dest), quiet=1, workers=1)
    # readable by the kernel's uid through the bind mount, which keeps the files' own modes
    for path in [dest, *dest.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


CACHE_NAME = ".translab_stages"  # in the course folder, hidden from every kernel (grader.isolation.sandbox.hidden_paths)


def cache_folder(root: Path) -> Path:
    """The course's cache of built stages.  It holds every part's answers (stage 6 holds parts 1 to 5), so it lives
    where the sandbox hides it from every kernel, in root's and in a user namespace's mode alike: in the course."""
    return Path(root) / CACHE_NAME


def stages_key(source: Path) -> str:
    """What the stages are built from: every file of ``source`` a stage holds, the code that builds them (this module
    and ``grader.course.withheld``) and the interpreter that compiles them.  A change to any of them is a new key."""
    digest = hashlib.sha256(sys.version.encode() + b"\0")
    for own in (Path(__file__), Path(withheld.__file__)):
        digest.update(own.read_bytes() + b"\0")
    for path in sorted(source.rglob("*")):
        relative = path.relative_to(source)
        if path.is_file() and not any(fnmatch.fnmatch(part, skipped) for part in relative.parts for skipped in SKIPPED):
            digest.update(str(relative).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:32]


def _cached(source: Path, cache: Path) -> Path | None:
    """The cached build of ``source`` (built now if there is none); None where the cache cannot be used (a
    read-only course folder): the stages are then built in place, as without a cache."""
    try:
        entry = cache / stages_key(source)
        if (entry / COMPLETE).exists():
            return entry
        cache.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(cache, 0o700)  # the instructor's alone, as the batch's own folder is (and hidden from kernels)
        building = Path(tempfile.mkdtemp(prefix=".building-", dir=cache))
        for stage in range(1, withheld.LAST_PART + 1):
            _write_stage(source, building / str(stage) / LIBRARY, stage)
        (building / COMPLETE).touch()
        try:
            os.rename(building, entry)
        except OSError:  # another batch finished the same build first
            shutil.rmtree(building, ignore_errors=True)
        for other in cache.iterdir():  # one source's stages at a time: older ones are not used again, nor a build
            # that died an hour ago (a younger one may be another batch's, under way)
            if other != entry and (not other.name.startswith(".building-")
                                   or time.time() - other.stat().st_mtime > 3600):
                shutil.rmtree(other, ignore_errors=True)
        return entry if (entry / COMPLETE).exists() else None
    except OSError:
        return None


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
            f"stage ({', '.join(map(str, covered))}): every answer would score 0. {how_to_stage(root, found)}")


ORIGIN_FILE = ".translab_course_origin"  # in a worker's copy of a course: the course folder it was copied from


def named_root(root: Path) -> Path:
    """The course folder as the instructor named it: ``root``, or where a worker's copy of it came from (the copy is
    a temporary folder no instructor typed; grader.grading.result_folders.scratch_course writes ``ORIGIN_FILE``)."""
    try:
        origin = (Path(root) / ORIGIN_FILE).read_text(encoding="utf-8").strip()
    except OSError:
        return Path(root)
    return Path(origin) if origin and Path(origin).is_absolute() else Path(root)


def how_to_stage(root: Path, found: str) -> str:
    """What gives the kernels a translab the stage covers: an interpreter with this grader's own checkout installed
    (``make setup`` there), never ``pip install -e`` of the course, which is a folder of notebooks, not a package."""
    root = named_root(root)
    checkout = PACKAGE_DIR.parent
    if not (checkout / "Makefile").is_file():  # this translab is an installed package, not a checkout's
        return (f"Grade with a Python that imports {PACKAGE_DIR} from any folder (`make autograde PY=/path/to/python` "
                f"in the course's checkout), or put {checkout} first on PYTHONPATH")
    grade = ("`make autograde` there" if Path(root).resolve() == checkout.resolve()
             else f"`.venv/bin/python -m grader --root {root} autograde` in it")
    elsewhere = Path(found).parent
    other = (f"; or grade with the grader of the checkout {sys.executable} has installed: `{sys.executable} -m grader "
             f"--root {root} autograde` in {elsewhere}" if found and (elsewhere / "grader").is_dir() else "")
    return (f"Run `make setup` in {checkout}, the checkout of this grader (its .venv installs that checkout's "
            f"translab), then {grade}{other}; or put {checkout} first on PYTHONPATH")
