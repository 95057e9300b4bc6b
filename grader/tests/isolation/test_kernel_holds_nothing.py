"""Issue 47: the student's kernel holds nothing worth taking, checked from inside it.

One student submits the six released notebooks, each with a probe cell at its end (``grader.testing.kernel_probe``):
in notebook N's grading kernel it finds no code of the full library's answers of parts N and later (nor, in
notebook 01, in any file the student's uid can read, another checkout beside this one included), no hidden expected output, and no stand-in token of the
batch's environment (in notebook 01, in its own memory, its environment and every ``/proc/*/environ``).  The class
is graded by ``make autograde`` and again by the formgrader's Autograde button (nbgrader's own entry point), with
the tokens in the environment of each; neither the autograded notebooks nor the feedback holds one.
"""
from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys

import nbformat
import pytest

from grader.testing import kernel_probe
from grader.course.variants import SECRET_ENV
from translab.contract import ASSIGNMENT
from translab.paths import GRADER_DIR, REPO_ROOT

from conftest import press_formgrader_button, small_course, venv_env

pytestmark = pytest.mark.slow
STUDENT = "probe"
# stand-ins for what an instructor's environment holds: a hub's API token (the formgrader's button runs in the
# instructor's server), a cloud key, and the course secret given by the README's override
TOKENS = {name: kernel_probe.TOKEN_PREFIX + secrets.token_hex(16)
          for name in ("JUPYTERHUB_API_TOKEN", "AWS_SECRET_ACCESS_KEY", SECRET_ENV)}


@pytest.fixture(scope="module")
def other_checkout():
    """Another copy of the full library where nothing names it: last year's course, a second clone beside this
    one (as on the CI machine, where one at /work/main was readable from every kernel).  The kernel must not
    find it: it sees only what it needs of the machine, not everything but what we hid."""
    folder = REPO_ROOT.parent / f".translab-probe-{secrets.token_hex(4)}"
    shutil.copytree(REPO_ROOT / "translab", folder / "translab", ignore=shutil.ignore_patterns("__pycache__"))
    os.chmod(folder, 0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="module")
def course(tmp_path_factory, other_checkout):
    root = small_course(tmp_path_factory.mktemp("probe_course"))
    released = root / "notebooks" / ASSIGNMENT
    folder = root / "submitted" / STUDENT / ASSIGNMENT
    folder.mkdir(parents=True)
    for path in sorted(released.glob("*.ipynb")):
        stage = int(path.name[:2])
        notebook = nbformat.read(path, as_version=4)
        notebook.cells.append(nbformat.v4.new_code_cell(kernel_probe.probe_cell(
            stage, GRADER_DIR / "references", list(TOKENS.values()), files=stage == 1, memory=stage == 1)))
        nbformat.write(notebook, folder / path.name)
    return root


def _probe_reports(root) -> dict[str, dict]:
    reports = {}
    for path in sorted((root / "autograded" / STUDENT / ASSIGNMENT).glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        reports[path.stem] = kernel_probe.report(notebook.cells[-1].get("outputs", []))
    return reports


def _assert_nothing_held(root, notebooks: int = 6) -> None:
    reports = _probe_reports(root)
    assert len(reports) == notebooks and all(reports.values()), f"a probe did not report: {reports}"
    for name, report in reports.items():
        assert report["code"] == [], f"{name}'s kernel holds the full library's answers: {report['code'][:5]}"
        assert report["tensors"] == [], f"{name}'s kernel holds hidden expected outputs: {report['tensors'][:5]}"
        assert "gc" in report["control"], f"{name}'s probe found not even translab's own contract: it proves nothing"
        assert "/stages/" not in report["stage_file"]  # the stage is mounted where translab was: the same paths
    first = reports["01_mask_and_positional_encoding"]
    assert first["tokens"] == ["memory: control"], \
        f"a stand-in token of the batch's environment reached the kernel, or the search is blind: {first['tokens']}"
    assert first["memory_regions"] > 10 and first["files_read"] > 100, first
    assert "file" in first["control"], "the file scan did not find translab's own contract.py: it proves nothing"
    for path in (root / "autograded" / STUDENT).rglob("*"):
        if path.is_file():
            text = path.read_bytes()
            assert not any(token.encode() in text for token in TOKENS.values()), f"a token in {path}"


def _grade_env() -> dict:
    return venv_env(**TOKENS)


def test_make_autograde_gives_each_notebook_a_kernel_that_holds_nothing_worth_taking(course):
    process = subprocess.run([sys.executable, "-m", "grader", "--root", str(course), "autograde"],
                             env=_grade_env(), text=True, capture_output=True, timeout=900)
    assert process.returncode == 0, (process.stdout + process.stderr)[-4000:]
    _assert_nothing_held(course)
    done = subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, "--student", STUDENT,
                           "--force", "--FeedbackGateExporter.release=force"], cwd=course, env=_grade_env(),
                          text=True, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    pages = list((course / "feedback" / STUDENT / ASSIGNMENT).glob("*.html"))
    assert len(pages) == 6
    for page in pages:
        assert not any(token in page.read_text(encoding="utf-8") for token in TOKENS.values()), page


def test_the_formgrader_button_grades_in_kernels_that_hold_nothing_either(course):
    """The button's path (nbgrader's own autograde, in the instructor's server, whose environment holds a hub's
    token): notebook 01 alone, whose probe looks at the kernel's memory, environment and files."""
    for path in (course / "autograded" / STUDENT / ASSIGNMENT).glob("*.ipynb"):
        path.unlink()
    for path in (course / "submitted" / STUDENT / ASSIGNMENT).glob("0[2-6]_*.ipynb"):
        path.unlink()
    result = press_formgrader_button(course, "autograde", ASSIGNMENT, STUDENT, env=_grade_env())
    assert result["success"], result
    _assert_nothing_held(course, notebooks=1)


def test_the_probe_finds_the_full_library_where_it_is(tmp_path):
    """The probe's own control: run outside any sandbox, where the full library is imported, it finds the answers
    (so an empty report in the kernel means they are not there, not that the probe is blind)."""
    source = kernel_probe.probe_cell(1, GRADER_DIR / "references", list(TOKENS.values()))
    done = subprocess.run([sys.executable, "-c", source], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(GRADER_DIR.parent)})
    report = kernel_probe.report([{"text": done.stdout}])
    assert report is not None, done.stderr[-3000:]
    assert any(entry.startswith("model:generate_square_subsequent_mask") for entry in report["code"]), report["code"]
