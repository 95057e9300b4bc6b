"""A fresh virtual environment holding the student wheel and exactly what it declares, offline and in seconds.

A student's laptop gets ``pip install "translab[lab] @ wheel"``: the wheel's declared dependencies and theirs,
nothing of the course's (no grader, no pytest, no editable translab).  Downloading them again costs minutes and the
network, so this venv borrows the distributions of the running environment (our pins) that the wheel's requirements
reach, linking each one's top-level files into the new site-packages (and its data files, JupyterLab's assets
among them, into the new prefix), then lets pip install the wheel with its
dependency check on and no index: a requirement the wheel forgets is missing there, one it states wrongly fails
pip.  (Installing from PyPI, with another torch, is ``test_students_anywhere``'s exhaustive test.)
"""
from __future__ import annotations

import importlib.metadata as metadata
import subprocess
import sys
import zipfile
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name


class MissingHere(RuntimeError):
    """The running environment lacks a distribution the wheel needs (run ``make setup``)."""


def wheel_requirements(wheel: Path, extras: tuple[str, ...] = ("lab",)) -> list[Requirement]:
    """What ``pip install "name[extras] @ wheel"`` asks for, read from the wheel's METADATA."""
    with zipfile.ZipFile(wheel) as archive:
        name = next(item for item in archive.namelist() if item.endswith(".dist-info/METADATA"))
        lines = archive.read(name).decode("utf-8").splitlines()
    wanted = []
    for line in lines:
        if line.startswith("Requires-Dist:"):
            requirement = Requirement(line.split(":", 1)[1].strip())
            if requirement.marker is None or any(requirement.marker.evaluate({"extra": extra}) for extra in extras):
                requirement.marker = None  # chosen: the closure follows it whatever extra brought it
                wanted.append(requirement)
    return wanted


def closure(requirements: list[Requirement]) -> dict[str, metadata.Distribution]:
    """Every installed distribution the requirements reach, by canonical name, markers evaluated here."""
    found: dict[str, metadata.Distribution] = {}
    todo = [(requirement, "") for requirement in requirements]
    while todo:
        requirement, extra = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": extra}):
            continue
        key = canonicalize_name(requirement.name)
        try:
            distribution = metadata.distribution(requirement.name)
        except metadata.PackageNotFoundError as missing:
            raise MissingHere(f"{requirement.name} is not installed here: run `make setup`") from missing
        extras_now = set(requirement.extras)
        if key in found and not extras_now:
            continue
        found[key] = distribution
        for line in distribution.requires or []:
            todo.extend((Requirement(line), chosen) for chosen in extras_now or {""})
    return found


def _top_level(distribution: metadata.Distribution) -> set[str]:
    """The names a distribution puts directly in site-packages (its packages, modules and .dist-info)."""
    names = set()
    for file in distribution.files or []:
        parts = Path(file).parts
        if parts and parts[0] != ".." and parts[0] != "__pycache__":
            names.add(parts[0])
    return names


def _data_files(distribution: metadata.Distribution) -> list[Path]:
    """The files a distribution puts beside site-packages, relative to the environment's prefix (JupyterLab's assets
    and extensions in share/, server extensions enabled in etc/), but not its scripts in bin/, whose first line
    names this environment's Python."""
    prefix, found = Path(sys.prefix).resolve(), []
    for file in distribution.files or []:
        if Path(file).parts[:1] == ("..",):
            path = Path(distribution.locate_file(file)).resolve()
            if prefix in path.parents and path.relative_to(prefix).parts[0] != "bin":
                found.append(path.relative_to(prefix))
    return found


def create(venv: Path, wheel: Path, extras: tuple[str, ...] = ("lab",), install: bool = True) -> Path:
    """The venv at ``venv`` with ``wheel`` installed by pip (dependency check on, no index); returns its python.
    Its own ``python -m pip`` works, as in any venv.  ``install`` False: what the wheel needs is there, translab is
    not (a platform before the setup cell, a laptop before the README's ``pip install``)."""
    subprocess.run([Path(sys.base_prefix, "bin", "python3"), "-m", "venv", "--without-pip", str(venv)], check=True,
                   timeout=120)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True, timeout=60).stdout.strip())
    here = {canonicalize_name("translab")}
    needed = closure([*wheel_requirements(wheel, extras), Requirement("pip")])
    for key, distribution in needed.items():
        if key in here:
            continue
        origin = Path(distribution.locate_file(""))
        for name in _top_level(distribution):
            target = site / name
            if (origin / name).exists() and not target.exists():
                target.symlink_to(origin / name)
        for relative in _data_files(distribution):
            target = venv / relative
            if not target.exists():
                target.parent.mkdir(parents=True, exist_ok=True)
                target.symlink_to(Path(sys.prefix).resolve() / relative)
    if not install:
        return python
    requirement = f"translab[{','.join(extras)}] @ {wheel.resolve().as_uri()}" if extras else str(wheel.resolve())
    installed = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-index", "--no-compile",
                                "--disable-pip-version-check", requirement],
                               capture_output=True, text=True, timeout=300)
    if installed.returncode != 0:
        raise RuntimeError(f"pip could not install the student wheel into a venv holding only what it declares:\n"
                           f"{installed.stderr[-3000:]}")
    return python
