"""Where a batch's seconds go: each student's and each notebook's phases, so that every second has a name.

A student's seconds are the batch's steps around nbgrader (``STUDENT_PHASES``: copying the plain files, nbgrader
itself, the clean-up after it, the merge into the gradebook) and, inside nbgrader, each notebook's execution
(``NOTEBOOK_PHASES``, timed by ``grader.nbgrader_plugins.guarded_execute``: its kernel's start up to the first
cell, the cells, the test cells with their checkers' round trips, the kernel's end).  What nbgrader spends outside
the executions (its start, the sanitizing and the conversions before a notebook runs, the write-back and the
gradebook after) is named ``nbgrader's own``: nbgrader's time less its notebooks'.  The nbgrader process writes
one JSON line per notebook into a file of the batch's (``--GuardedExecute.phases_file``), out of the kernels' reach,
and the batch writes ``autograded/autograde_phases.csv``: one row per student (or notebook) and phase.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

PHASES_NAME = "autograde_phases.csv"
NOTEBOOK_PHASES = ("kernel start", "cells", "checks", "kernel stop")
NBGRADER_OWN = "nbgrader's own"
STUDENT_PHASES = ("copy", NBGRADER_OWN, *NOTEBOOK_PHASES, "clean-up", "merge")
SETUP = "batch setup"  # once per batch: the sandbox's walls, the zygotes, the stages of translab


def record_notebook(path: str | os.PathLike, notebook: str, seconds: dict[str, float]) -> None:
    """Append one notebook's phases (``NOTEBOOK_PHASES`` -> seconds) to the nbgrader process's file."""
    with open(path, "a", encoding="utf-8") as handle:
        handle.write(json.dumps({"notebook": notebook, **{name: round(seconds.get(name, 0.0), 3)
                                                           for name in NOTEBOOK_PHASES}}) + "\n")


def read_notebooks(path: Path) -> list[dict]:
    """The notebooks' records of one student (each nbgrader run appended its own), [] if none was written."""
    if not path.is_file():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            record = json.loads(line)
        except json.JSONDecodeError:  # a run killed while writing: that notebook's phases are unknown
            continue
        if isinstance(record, dict) and isinstance(record.get("notebook"), str):
            records.append(record)
    return records


def student_phases(copy: float, nbgrader: float, clean_up: float, notebooks: list[dict]) -> dict[str, float]:
    """A student's phases (``STUDENT_PHASES``) from the batch's timings and the notebooks' records; merge is added
    by the batch once it has merged."""
    summed = {name: sum(float(record.get(name, 0.0)) for record in notebooks) for name in NOTEBOOK_PHASES}
    own = max(0.0, nbgrader - sum(summed.values()))
    return {"copy": copy, NBGRADER_OWN: own, **summed, "clean-up": clean_up, "merge": 0.0}


def write(root: Path, setup: float, students: dict[str, tuple[dict[str, float], list[dict]]]) -> Path:
    """``autograded/autograde_phases.csv``: the batch's setup, then for each student its phases and its notebooks'."""
    out = root / "autograded" / PHASES_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student_id", "notebook", "phase", "seconds"])
        writer.writerow(["", "", SETUP, f"{setup:.2f}"])
        for student, (phases, notebooks) in students.items():
            for name in STUDENT_PHASES:
                writer.writerow([student, "", name, f"{phases.get(name, 0.0):.2f}"])
            for record in notebooks:
                for name in NOTEBOOK_PHASES:
                    writer.writerow([student, record["notebook"], name, f"{float(record.get(name, 0.0)):.2f}"])
    return out


def read_students(path: Path) -> list[str]:
    """The students a phases file times, in its order."""
    with open(path, newline="", encoding="utf-8") as handle:
        return list(dict.fromkeys(row["student_id"] for row in csv.DictReader(handle) if row["student_id"]))


def read_totals(path: Path) -> dict[str, float]:
    """What ``write`` wrote, summed: the batch's setup, then each student phase over the students."""
    summed: dict[str, float] = {}
    with open(path, newline="", encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            if not row["notebook"]:
                summed[row["phase"]] = round(summed.get(row["phase"], 0.0) + float(row["seconds"]), 2)
    return summed


def totals(students: dict[str, tuple[dict[str, float], list[dict]]]) -> dict[str, float]:
    """Each student phase summed over the students, in ``STUDENT_PHASES`` order."""
    return {name: sum(phases.get(name, 0.0) for phases, _ in students.values()) for name in STUDENT_PHASES}


def summary(setup: float, students: dict[str, tuple[dict[str, float], list[dict]]]) -> str:
    """One line for the instructor: the setup and the students' summed phases, largest first."""
    summed = sorted(totals(students).items(), key=lambda item: -item[1])
    return (f"where the time went: {SETUP} {setup:.1f} s; the students' "
            + ", ".join(f"{name} {seconds:.1f} s" for name, seconds in summed))
