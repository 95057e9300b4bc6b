"""grader.grading.phases: a student's seconds split into named phases, and the file the batch writes."""
from __future__ import annotations

import csv

from grader.grading import phases


def test_a_notebook_s_record_survives_a_run_killed_while_writing(tmp_path):
    path = tmp_path / "student0.phases"
    phases.record_notebook(path, "01_mask", {"kernel start": 0.61, "cells": 0.2, "checks": 1.5, "kernel stop": 0.1})
    phases.record_notebook(path, "02_model", {"kernel start": 0.7})
    with open(path, "a", encoding="utf-8") as handle:
        handle.write('{"notebook": "03_pre')  # cut off by a kill
    records = phases.read_notebooks(path)
    assert [record["notebook"] for record in records] == ["01_mask", "02_model"]
    assert records[1] == {"notebook": "02_model", "kernel start": 0.7, "cells": 0.0, "checks": 0.0, "kernel stop": 0.0}
    assert phases.read_notebooks(tmp_path / "absent") == []


def test_nbgrader_s_own_time_is_what_its_notebooks_did_not_spend():
    notebooks = [{"notebook": "a", "kernel start": 1.0, "cells": 2.0, "checks": 3.0, "kernel stop": 0.5},
                 {"notebook": "b", "kernel start": 0.5, "cells": 0.0, "checks": 1.0, "kernel stop": 0.5}]
    mine = phases.student_phases(copy=0.1, nbgrader=10.0, clean_up=0.4, notebooks=notebooks)
    assert list(mine) == list(phases.STUDENT_PHASES)
    assert mine[phases.NBGRADER_OWN] == 1.5 and mine["checks"] == 4.0 and mine["kernel start"] == 1.5
    assert sum(mine.values()) == 0.1 + 10.0 + 0.4
    # a notebook whose record says more than nbgrader took (a clock's step) does not make nbgrader's own negative
    assert phases.student_phases(0.0, 1.0, 0.0, notebooks)[phases.NBGRADER_OWN] == 0.0


def test_the_file_has_the_setup_then_each_student_and_its_notebooks(tmp_path):
    notebooks = [{"notebook": "01_mask", "kernel start": 0.6, "cells": 0.2, "checks": 0.3, "kernel stop": 0.1}]
    students = {"alice": (phases.student_phases(0.1, 2.0, 0.2, notebooks), notebooks),
                "blank": (phases.student_phases(0.0, 1.0, 0.1, []), [])}
    path = phases.write(tmp_path, 4.25, students)
    with open(path, newline="", encoding="utf-8") as handle:
        rows = [tuple(row.values()) for row in csv.DictReader(handle)]
    assert rows[0] == ("", "", phases.SETUP, "4.25")
    assert [row[2] for row in rows if row[0] == "alice" and not row[1]] == list(phases.STUDENT_PHASES)
    assert [row[2:] for row in rows if row[1] == "01_mask"] == [("kernel start", "0.60"), ("cells", "0.20"),
                                                                 ("checks", "0.30"), ("kernel stop", "0.10")]
    assert len(rows) == 1 + 2 * len(phases.STUDENT_PHASES) + len(phases.NOTEBOOK_PHASES)
    totals = phases.read_totals(path)
    assert list(totals) == [phases.SETUP, *phases.STUDENT_PHASES] and totals[phases.SETUP] == 4.25
    assert totals[phases.NBGRADER_OWN] == round(0.8 + 1.0, 2) and totals["kernel start"] == 0.6
    line = phases.summary(4.25, students)
    assert line.startswith(f"where the time went: {phases.SETUP} 4.2 s") or line.startswith(
        f"where the time went: {phases.SETUP} 4.3 s")
    assert f"{phases.NBGRADER_OWN} 1.8 s" in line and line.index(phases.NBGRADER_OWN) < line.index("kernel start")
