"""One engine per gradebook in an nbgrader process of the batch (grader.grading.gradebook_engines)."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts a process (the change lasts for the process): make test runs it

# nbgrader's own use: a gradebook opened inside another (its converter's, its preprocessors'), then again later;
# once as nbgrader does it, once after share_engines (called twice, as a process may).
OPENS = """\
import sys
from nbgrader.api import Gradebook
from grader.grading.gradebook_engines import share_engines

folder = sys.argv[1]  # both rounds: a new gradebook costs nbgrader an alembic process

def opens(round):
    with Gradebook(f"sqlite:///{folder}/gradebook.db") as outer:
        outer.add_student(round + "1")
        with Gradebook(f"sqlite:///{folder}/gradebook.db") as inner:
            inner.add_student(round + "2")
            shared = inner.engine is outer.engine
        outer.add_student(round + "3")  # after the inner one closed its engine's connections
    with Gradebook(f"sqlite:///{folder}/gradebook.db") as later:
        students = [student.id for student in later.students]
        shared = shared and later.engine is outer.engine
    with Gradebook(f"sqlite:///{folder}/other.db") as other:
        print(shared, other.engine is not later.engine, *students)

opens("a")
share_engines()
share_engines()
opens("b")
"""


def test_a_gradebook_opened_again_reuses_its_engine_and_still_reads_and_writes(tmp_path):
    path = os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))  # a new one runs alembic
    done = subprocess.run([sys.executable, "-c", OPENS, str(tmp_path)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PATH": path})
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["False True a1 a2 a3", "True True a1 a2 a3 b1 b2 b3"]
