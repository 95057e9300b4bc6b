"""``python -m translab setup`` and ``python -m translab lab``: what ``make setup`` and ``make lab`` do, without make.

They run the same on Linux, macOS and Windows (paths through pathlib, programs started as
``sys.executable -m ...``, no shell), in a checkout of the course, in a student release, and in an install of the
student wheel, where the notebooks are copied into a folder of the student's (never over their work).
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path

from . import data
from .contract import ASSIGNMENT
from .paths import BUNDLED_HOME, PACKAGE_DIR, cache_dir, notebooks_dir

# Where an installed wheel's notebooks go when the student names no folder (relative to where they run it).
DEFAULT_NOTEBOOKS = "translab-notebooks"
# nbgrader's server extensions that students do without: their panels are off in jupyter_student too.
INSTRUCTOR_EXTENSIONS = ("formgrader", "course_list", "assignment_list")


def fetch_data(part: int | None = None, say=print) -> dict:
    """Fetch (sha256-checked) and prepare the data that ``part`` reads (None: every part); says what it
    downloaded and how long it took.  Idempotent: a second run downloads nothing."""
    started = time.monotonic()
    sources = data.sources_for(part)
    before = _archive_bytes()
    data.fetch(sources)
    if any(source in data.SOURCES for source in sources):
        data.prepare()
    downloaded = _archive_bytes() - before
    seconds = time.monotonic() - started
    what = "nothing to fetch" if not sources else f"{downloaded / 1e6:.1f} MB downloaded into {cache_dir()}"
    say(f"data for {'every part' if part is None else f'part {part}'}: {what}, ready in {seconds:.0f} s "
        f"({data.processed_dir().parent})")
    return {"seconds": seconds, "downloaded_bytes": downloaded, "sources": [s.requirement for s in sources]}


def _archive_bytes() -> int:
    folder = cache_dir()
    return sum(path.stat().st_size for path in folder.iterdir() if path.is_file()) if folder.is_dir() else 0


def place_notebooks(folder: Path | None = None, say=print) -> Path:
    """The folder the student works in: a checkout's or release's own notebooks, or (a wheel install) ``folder``
    (default: the folder it is run in when that holds the lab's notebooks already, else ./translab-notebooks) with
    the wheel's notebooks copied in where missing; a notebook already there is the student's work and is kept as
    it is."""
    if folder is None and notebooks_dir() is not None:
        return notebooks_dir()
    bundled = BUNDLED_HOME / "notebooks" / ASSIGNMENT
    released = sorted(bundled.glob("*.ipynb")) if bundled.is_dir() else []
    target = Path(folder or _working_folder(notebook.name for notebook in released)).expanduser().resolve()
    if not released:
        if folder is not None and target.is_dir():
            return target
        raise SystemExit(f"no notebooks to open: {bundled} is missing. Install the student wheel your instructor "
                         "gives (`pip install ...`), or run this inside the course or its student release.")
    target.mkdir(parents=True, exist_ok=True)
    copied, kept = [], []
    for notebook in released:
        destination = target / notebook.name
        if destination.exists():
            kept.append(notebook.name)
        else:
            shutil.copyfile(notebook, destination)
            copied.append(notebook.name)
    say(f"notebooks in {target}: {len(copied)} copied" + (f" ({', '.join(copied)})" if copied else "")
        + (f", {len(kept)} of yours kept as they are" if kept else ""))
    return target


def _working_folder(names) -> Path:
    """Where a student who names no folder works: here, when they run it inside the folder that ``setup`` made
    (it holds one of the lab's notebooks), so that their work is served rather than a new copy below it."""
    here = Path.cwd()
    if here.name == DEFAULT_NOTEBOOKS or any((here / name).is_file() for name in names):
        return here
    return here / DEFAULT_NOTEBOOKS


def setup(part: int | None = None, notebooks: Path | None = None, say=print) -> dict:
    """``python -m translab setup``: the data, then the notebooks where the student works."""
    report = fetch_data(part, say=say)
    report["notebooks"] = str(place_notebooks(notebooks, say=say))
    say("ready: `python -m translab lab` opens them in JupyterLab")
    return report


def lab_command(notebooks: Path, port: int = 8888, host: str = "127.0.0.1", browser: bool = False) -> list[str]:
    """JupyterLab on the student's notebooks with the student settings: no instructor panels."""
    command = [sys.executable, "-m", "jupyterlab", f"--notebook-dir={notebooks}", f"--ServerApp.ip={host}",
               f"--port={port}"]
    command += [f"--ServerApp.jpserver_extensions=nbgrader.server_extensions.{name}=False"
                for name in INSTRUCTOR_EXTENSIONS]
    if not browser:
        command.append("--no-browser")
    if getattr(os, "geteuid", lambda: -1)() == 0:
        command.append("--allow-root")
    return command


def lab_environment() -> dict[str, str]:
    """The student settings (JUPYTER_CONFIG_PATH) and this environment's scripts first on PATH, so that the
    kernel and nbgrader's tools are the ones installed beside translab."""
    scripts = str(Path(sys.executable).parent)
    return dict(os.environ, JUPYTER_CONFIG_PATH=str(PACKAGE_DIR / "jupyter_student"),
                PATH=scripts + os.pathsep + os.environ.get("PATH", ""))


def lab(notebooks: Path | None = None, port: int = 8888, host: str = "127.0.0.1", browser: bool = False) -> int:
    """``python -m translab lab``: JupyterLab until Ctrl+C; returns its exit status."""
    import importlib.util
    import subprocess
    if importlib.util.find_spec("jupyterlab") is None:
        raise SystemExit("JupyterLab is not installed here: install translab with its lab tools, "
                         "`pip install \"translab[lab] @ <the wheel your instructor gives>\"` (or `pip install jupyterlab`)")
    folder = place_notebooks(notebooks)
    try:
        return subprocess.call(lab_command(folder, port, host, browser), env=lab_environment())
    except KeyboardInterrupt:
        return 0
