"""The formgrader's Autograde button (nbgrader's ``NbGraderAPI.autograde``, called in-process by the server) and plain
``nbgrader autograde`` grade as ``python -m grader autograde`` does, in ``grader.isolation.sandbox``: student code never runs as
the instructor (nbgrader_plugins/batch_autograde_exporter.py)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.course.variants import SECRET_ENVS
from grader.testing import corpus
from translab.contract import ASSIGNMENT, UNSANDBOXED_ENV
from translab.paths import REPO_ROOT

from conftest import press_formgrader_button, run_grader, venv_env

pytestmark = pytest.mark.slow


def _press_autograde(root: Path, student: str, env: dict | None = None) -> dict:
    return press_formgrader_button(root, "autograde", ASSIGNMENT, student, env=env)


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


def _score(root: Path, student: str) -> tuple[float, bool]:
    """(score, flagged) of the student's submission in the course's gradebook."""
    from grader.course.gradebook import open_gradebook
    with open_gradebook(root / "gradebook.db") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        return submission.score, any(notebook.flagged for notebook in submission.notebooks)


def _nbgrader(root: Path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    env = env or venv_env()
    return subprocess.run([sys.executable, "-m", "nbgrader", "autograde", ASSIGNMENT, *args], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_button_grades_in_the_sandbox_and_the_probe_reaches_nothing_outside(course):
    root, marker = course
    result = _press_autograde(root, "probe")
    assert result["success"] is True, (result.get("error", "") + result.get("log", ""))[-3000:]
    assert "translab grades 1 submission(s) in its sandbox (in a process of its own)" in result.get("log", ""), \
        result.get("log", "")[-2000:]  # not in the notebook server's process, where nbgrader runs the button
    assert not marker.exists(), "the probe's code ran outside the sandbox"
    assert (root / "autograded" / "probe" / ASSIGNMENT / f"{corpus.NB1}.ipynb").exists()
    report = (root / "autograded" / "autograde_report.csv").read_text().splitlines()
    rows = {line.split(",")[0]: line.split(",")[1] for line in report[1:]}
    assert len(rows) == len(report) - 1, report  # one row a student: the press merged its row by student id
    assert rows == {"alice": "ok", "probe": "ok"}, report  # alice's row from the batch before is kept, not lost


def test_the_button_and_plain_nbgrader_give_the_batch_s_grade(course):
    root, _ = course
    by_batch = _score(root, "alice")
    assert by_batch[0] > 0
    assert _press_autograde(root, "alice")["success"] is True
    assert _score(root, "alice") == by_batch
    for warm in (True, False):  # on the course's warm grader (the default), then in a batch of its own
        done = _nbgrader(root, "--student", "alice", "--force", f"--BatchAutogradeExporter.warm={warm}")
        said = done.stdout + done.stderr
        assert done.returncode == 0, said[-3000:]
        assert ("of the warm grader" in said) is warm, said[-3000:]
        assert "in its sandbox (in nbgrader's process)" in said and "autograded 1 student(s)" in said, said[-3000:]
        assert _score(root, "alice") == by_batch


def test_plain_nbgrader_says_why_the_batch_in_its_process_graded_nothing(course):
    """The batch runs in nbgrader's own process from the command line: its refusal still reaches the instructor as
    the batch's words and a failed command, and the gradebook keeps what it had."""
    root, _ = course
    before = _score(root, "alice")
    env = {name: value for name, value in venv_env().items() if name not in SECRET_ENVS}
    done = _nbgrader(root, "--student", "alice", "--force", env=env)
    said = done.stdout + done.stderr
    assert done.returncode != 0, said[-3000:]
    assert "translab's batch exited 1: error: no course secret" in said, said[-3000:]
    assert _score(root, "alice") == before


def test_plain_nbgrader_refuses_an_unknown_student_without_create(course, tmp_path):
    root, _ = course
    copy = tmp_path / "course"
    shutil.copytree(root, copy)
    shutil.copytree(copy / "submitted" / "alice", copy / "submitted" / "newcomer")
    done = _nbgrader(copy, "--student", "newcomer", "--Autograde.create_student=False")
    assert done.returncode != 0 and "No student with ID 'newcomer'" in done.stdout + done.stderr
    assert not (copy / "autograded" / "newcomer").exists()


def test_plain_nbgrader_refuses_to_score_without_running(course):
    """--no-execute would score the outputs a student saved (forged at will): translab scores what its checker saw."""
    root, _ = course
    done = _nbgrader(root, "--student", "alice", "--force", "--no-execute")
    assert done.returncode != 0 and "--no-execute" in done.stdout + done.stderr, (done.stdout + done.stderr)[-2000:]


def test_the_probe_would_run_without_the_sandbox(course):
    """The control: opted out explicitly (what `--no-sandbox` sets), nbgrader runs the probe itself, so the tests
    above could fail."""
    root, marker = course
    result = _press_autograde(root, "probe", env={**os.environ, UNSANDBOXED_ENV: "1"})
    assert result["success"] is True, result.get("error", "")[-2000:]
    assert marker.read_text() == "ran"
    marker.unlink()
