"""The formgrader's Autograde button (nbgrader's ``NbGraderAPI.autograde``, called in-process by the server) must not
run student code outside ``grader.sandbox``: it is refused with a message that says what to run instead, before
nbgrader touches anything, while ``python -m grader autograde`` grades the same submission."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.testing import corpus
from translab.contract import ASSIGNMENT, UNSANDBOXED_ENV
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow

# What the formgrader's AutogradeHandler does: the course's config, nbgrader's API, one student's autograde.
BUTTON = """
import json, sys
from traitlets.config.loader import PyFileConfigLoader
from nbgrader.apps import NbGraderAPI
from nbgrader.coursedir import CourseDirectory
config = PyFileConfigLoader("nbgrader_config.py", path=".").load_config()
api = NbGraderAPI(CourseDirectory(config=config), config=config)
print(json.dumps(api.autograde(sys.argv[1], sys.argv[2])))
"""


def _press_autograde(root: Path, student: str, env: dict | None = None) -> dict:
    done = subprocess.run([sys.executable, "-c", BUTTON, ASSIGNMENT, student], cwd=root, capture_output=True,
                          text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def run_grader(root: Path, *args: str) -> None:
    done = subprocess.run([sys.executable, "-m", "grader", "--root", str(root), *args], capture_output=True,
                          text=True, timeout=900)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> tuple[Path, Path]:
    """A one-notebook course: alice graded by `python -m grader autograde`; probe's answer writes a marker."""
    root = tmp_path_factory.mktemp("button_course")
    marker = tmp_path_factory.mktemp("outside") / "student-code-ran"
    os.chmod(marker.parent, 0o777)  # the sandbox's uid could write it, were the folder in its view
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    (root / "solutions" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(REPO_ROOT / "solutions" / ASSIGNMENT / f"{corpus.NB1}.ipynb", root / "solutions" / ASSIGNMENT)
    run_grader(root, "release")
    for student in ("alice", "probe"):
        (root / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    solution = root / "solutions" / ASSIGNMENT / f"{corpus.NB1}.ipynb"
    shutil.copy(solution, root / "submitted" / "alice" / ASSIGNMENT)
    notebook = nbformat.read(solution, as_version=4)
    answer = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mask_answer")
    answer.source = f"open({str(marker)!r}, 'w').write('ran')\n" + answer.source
    nbformat.write(notebook, root / "submitted" / "probe" / ASSIGNMENT / f"{corpus.NB1}.ipynb")
    run_grader(root, "autograde", "--student", "alice")
    return root, marker


def test_the_button_is_refused_with_what_to_run_instead_and_no_student_code_runs(course):
    root, marker = course
    result = _press_autograde(root, "probe")
    assert result["success"] is False
    said = result.get("error", "") + result.get("log", "")
    assert "translab grades only in its sandbox" in said and "python -m grader autograde --student" in said, said
    assert not marker.exists(), "the probe's code ran outside the sandbox"
    assert not (root / "autograded" / "probe").exists()


def test_a_refused_button_leaves_what_was_graded(course):
    root, _ = course
    graded = root / "autograded" / "alice" / ASSIGNMENT / f"{corpus.NB1}.ipynb"
    before = graded.read_bytes()
    assert _press_autograde(root, "alice")["success"] is False
    assert graded.read_bytes() == before


def test_the_probe_would_run_without_the_refusal(course):
    """The control: asked for explicitly (what `--no-sandbox` sets), nbgrader runs the probe, so the tests above
    could fail."""
    root, marker = course
    result = _press_autograde(root, "probe", env={**os.environ, UNSANDBOXED_ENV: "1"})
    assert result["success"] is True, result.get("error", "")[-2000:]
    assert marker.read_text() == "ran"
    marker.unlink()
