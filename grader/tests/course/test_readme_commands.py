"""The students' commands as both READMEs give them, run exactly as written: a wheel file, a URL, the Colab cell
with and without a package, each week's wheel over the last, and ``python -m translab lab`` wherever it is run."""
from __future__ import annotations

import functools
import http.server
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from grader.course import student_release
from grader.course.variants import code_for
from grader.testing import student_venv
from grader.testing.completed import with_solutions
from translab import setup_cell
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # builds wheels, venvs and runs notebooks

WEEK_ONE, WEEK_TWO = "01_mask_and_positional_encoding", "02_model_and_parameters"
KERNEL = "student"
RUN_NOTEBOOK = """
import sys
import nbformat
from nbclient import NotebookClient
notebook = nbformat.read(sys.argv[1], as_version=4)
NotebookClient(notebook, timeout=600, kernel_name="student", allow_errors=True).execute()
nbformat.write(notebook, sys.argv[1])
"""


def laptop_commands(readme: str) -> list[str]:
    """The release README's three commands: its indented block, comments dropped."""
    return [shlex.join(shlex.split(line, comments=True)) for line in readme.splitlines()
            if line.startswith("    ") and line.strip()]


def course_readme_commands() -> list[str]:
    """The course README's laptop block ("For students"), as written (a comment may give another form)."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    block = text.split("**On a laptop**", 1)[1].split("```bash\n", 1)[1].split("```", 1)[0]
    return [line.strip() for line in block.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def weeks(tmp_path_factory) -> dict[int, Path]:
    """Weeks 1 and 2 as the course numbers them: its first and second release, each with its wheel."""
    made = {}
    for serial, until in enumerate((1, 2), start=1):
        dest = tmp_path_factory.mktemp(f"week-{until}") / "translab-students"
        student_release.write(dest, until=until, wheel=True, serial=serial)
        made[until] = dest
    return made


def _wheel(release: Path) -> Path:
    return next((release / "dist").glob("translab-*.whl"))


class _Student:
    """A laptop: a venv holding what the wheel needs (not translab), a home, a folder of their own to work in."""

    def __init__(self, root: Path, wheel: Path):
        self.python = student_venv.create(root / "venv", wheel, install=False)
        self.home, self.work, self.kernels, self.config = (root / name for name in ("home", "work", "jupyter", "config"))
        for folder in (self.home, self.work, self.config, self.kernels / "kernels" / KERNEL):
            folder.mkdir(parents=True)
        (self.kernels / "kernels" / KERNEL / "kernel.json").write_text(json.dumps({
            "argv": [str(self.python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "the student's venv", "language": "python"}))
        (self.config / "student.json").write_text(json.dumps({"code": code_for("alice", REPO_ROOT)}), encoding="utf-8")
        self.env = {key: value for key, value in os.environ.items()
                    if not key.startswith(("TRANSLAB_", "PYTHONPATH", "VIRTUAL_ENV", "JUPYTER", "XDG_", "PIP_"))}
        # the data where `make setup` put it (its fetch is tested in tests/test_local.py); pip offline: what the
        # wheel needs is in the venv already, so an index is never asked
        self.env.update(HOME=str(self.home), JUPYTER_PATH=str(self.kernels), TRANSLAB_CONFIG_DIR=str(self.config),
                        TRANSLAB_DATA_DIR=str(REPO_ROOT / "data"), TRANSLAB_FAST="1", PIP_NO_INDEX="1",
                        PIP_DISABLE_PIP_VERSION_CHECK="1", PATH=f"{self.python.parent}{os.pathsep}{os.environ['PATH']}")

    def run(self, command: str, cwd: Path | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
        """A README command as a student types it in their venv: ``pip`` and ``python`` are the venv's."""
        words = shlex.split(command)
        program = {"pip": [str(self.python), "-m", "pip"], "python": [str(self.python)]}[words[0]]
        done = subprocess.run(program + words[1:], cwd=cwd or self.work, env=self.env, capture_output=True,
                              text=True, timeout=timeout)
        assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done

    def python_says(self, program: str) -> str:
        return subprocess.run([str(self.python), "-c", program], cwd=self.work, env=self.env, capture_output=True,
                              text=True, timeout=300, check=True).stdout.strip()


def test_the_release_readme_gives_commands_that_name_this_release(weeks):
    """Each release names its own wheel, the version says the week and the release, and pip reads every line."""
    for until, release in weeks.items():
        readme = (release / "README.md").read_text(encoding="utf-8")
        wheel = _wheel(release)
        assert wheel.name == student_release.wheel_name(until=until, serial=until)
        assert wheel.name.startswith(f"translab-{student_release.student_version(until=until, serial=until)}-")
        install, setup, lab = laptop_commands(readme)
        assert install == shlex.join(["pip", "install", f"{wheel.name}[lab]"]), install
        assert setup == "python -m translab setup" and lab == "python -m translab lab"
        assert f"dist/{wheel.name}" in readme and f"week {until}" in readme
    assert student_release.pip_requirement("https://x.org/d/translab-1-py3-none-any.whl") == \
        "translab[lab] @ https://x.org/d/translab-1-py3-none-any.whl"
    assert student_release.pip_requirement("translab==0.1.0.2.3") == "translab[lab]==0.1.0.2.3"


def test_week_two_installs_over_week_one_with_the_readme_command_and_keeps_the_students_work(weeks, tmp_path):
    """Issue 90: week 1 as its README says, the student's work in notebook 01, then week 2 with the same commands in
    the same folder: pip replaces translab (no "already installed"), setup copies notebook 02 beside the student's
    01 untouched, part 1's reference code now runs, and notebook 02 with the solutions pasted in passes its visible
    checks in that venv."""
    student = _Student(tmp_path, _wheel(weeks[1]))
    for until in (1, 2):
        shutil.copy(_wheel(weeks[until]), student.work)
        install, setup, _ = laptop_commands((weeks[until] / "README.md").read_text(encoding="utf-8"))
        installed = student.run(install)
        assert "already installed" not in installed.stdout + installed.stderr
        said = student.run(setup).stdout
        version = student.python_says("import importlib.metadata as m; print(m.version('translab'))")
        assert version == student_release.student_version(until=until, serial=until), version
        folder = student.work / "translab-notebooks"
        if until == 1:
            assert sorted(path.name for path in folder.iterdir()) == [f"{WEEK_ONE}.ipynb"], said
            assert "NotReleased" in student.python_says(
                "from translab.model import generate_square_subsequent_mask as mask\n"
                "try: mask(3)\nexcept Exception as error: print(type(error).__name__)")
            mine = with_solutions(folder / f"{WEEK_ONE}.ipynb", REPO_ROOT / "solutions" / ASSIGNMENT / f"{WEEK_ONE}.ipynb")
            mine.cells.append(nbformat.v4.new_markdown_cell("my own notes, week 1"))
            nbformat.write(mine, folder / f"{WEEK_ONE}.ipynb")
    assert f"1 copied ({WEEK_TWO}.ipynb), 1 of yours kept as they are" in said, said
    assert "my own notes, week 1" in (folder / f"{WEEK_ONE}.ipynb").read_text(encoding="utf-8")
    assert student.python_says("from translab.model import generate_square_subsequent_mask as mask\n"
                               "print(mask(3).tolist())") == "[[0.0, -inf, -inf], [0.0, 0.0, -inf], [0.0, 0.0, 0.0]]"

    notebook = folder / f"{WEEK_TWO}.ipynb"
    nbformat.write(with_solutions(notebook, REPO_ROOT / "solutions" / ASSIGNMENT / f"{WEEK_TWO}.ipynb"), notebook)
    ran = subprocess.run([sys.executable, "-c", RUN_NOTEBOOK, str(notebook)], cwd=folder, env=student.env,
                         capture_output=True, text=True, timeout=900)
    assert ran.returncode == 0, ran.stderr[-3000:]
    cells = nbformat.read(notebook, as_version=4).cells
    errors = [cell.metadata.get("nbgrader", {}).get("grade_id") or cell.source[:60] for cell in cells
              if cell.cell_type == "code" for output in cell.get("outputs", []) if output.output_type == "error"]
    assert errors == [], errors
    visible = [cell for cell in cells if cell.metadata.get("nbgrader", {}).get("grade_id", "").endswith("_visible")]
    assert visible and all(cell.get("execution_count") for cell in visible)


def test_translab_lab_run_inside_the_notebooks_folder_serves_that_folder(weeks, tmp_path):
    """The README's ``python -m translab lab``, run where ``setup`` put the notebooks (inside
    translab-notebooks/), serves the student's own notebooks there, not a fresh copy in a folder below."""
    student = _Student(tmp_path, _wheel(weeks[1]))
    shutil.copy(_wheel(weeks[1]), student.work)
    install, setup, lab = laptop_commands((weeks[1] / "README.md").read_text(encoding="utf-8"))
    student.run(install)
    student.run(setup)
    inside = student.work / "translab-notebooks"
    mine = nbformat.read(inside / f"{WEEK_ONE}.ipynb", as_version=4)
    mine.cells.append(nbformat.v4.new_markdown_cell("(my copy)"))
    nbformat.write(mine, inside / f"{WEEK_ONE}.ipynb")
    served = _served_names(student, lab, inside)
    assert served == [f"{WEEK_ONE}.ipynb"], served
    assert not (inside / "translab-notebooks").exists(), "a nested copy hides the student's work"
    assert "(my copy)" in (inside / f"{WEEK_ONE}.ipynb").read_text(encoding="utf-8")


def _served_names(student: _Student, command: str, cwd: Path) -> list[str]:
    """Start ``command`` (JupyterLab), read the URL it prints, list the folder it serves, stop it."""
    words = shlex.split(command)
    server = subprocess.Popen([str(student.python), *words[1:]], cwd=cwd, env=student.env, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True, start_new_session=True)  # JupyterLab is its child
    printed, url = [], None
    try:
        deadline = time.monotonic() + 120
        while url is None and time.monotonic() < deadline:
            line = server.stdout.readline()
            if not line and server.poll() is not None:
                break
            printed.append(line)
            found = re.search(r"(http://127\.0\.0\.1:\d+)/lab\?token=(\w+)", line)
            if found:
                url = found.groups()
        assert url, "".join(printed)[-3000:]
        base, token = url
        for attempt in range(30):  # the URL may be printed a moment before the socket answers
            try:
                with urllib.request.urlopen(f"{base}/api/contents?token={token}", timeout=30) as response:
                    listing = json.loads(response.read())
                break
            except urllib.error.URLError:
                time.sleep(1)
        else:
            raise AssertionError(f"{base} never answered:\n{''.join(printed)[-3000:]}")
        return sorted(item["name"] for item in listing["content"])
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


def _setup_cell(release: Path) -> str:
    cells = nbformat.read(release / "notebooks" / ASSIGNMENT / f"{WEEK_ONE}.ipynb", as_version=4).cells
    return next(cell.source for cell in cells if cell.cell_type == "code")


def _run_setup_cell(student: _Student, source: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(student.python), "-c", source], cwd=student.work, env=student.env,
                          capture_output=True, text=True, timeout=600)


def test_the_colab_cell_installs_from_the_url_the_release_wrote(weeks, tmp_path):
    """``make student-release PACKAGE=<url>`` (what COLAB=owner/name computes for GitHub): the first cell of a
    notebook of that release, run in a Python without translab, installs the wheel from the URL and fetches the
    part's data; run again, it does nothing."""
    wheel = _wheel(weeks[1])
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(wheel.parent)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/{wheel.name}"
        release = tmp_path / "published"
        student_release.write(release, until=1, package=url, serial=1)
        cell = _setup_cell(release)
        assert f"TRANSLAB_PACKAGE = {url!r}" in cell
        readme = (release / "README.md").read_text(encoding="utf-8")
        assert laptop_commands(readme)[0] == shlex.join(["pip", "install", f"translab[lab] @ {url}"])
        student = _Student(tmp_path / "colab", wheel)
        done = _run_setup_cell(student, cell)
        assert done.returncode == 0, done.stderr[-3000:]
        assert f"translab installed from {url} in" in done.stdout and "data for part 1" in done.stdout, done.stdout
        again = _run_setup_cell(student, cell)
        assert again.returncode == 0 and again.stdout == "", again.stdout
    finally:
        server.shutdown()


def test_the_colab_cell_without_a_package_installs_the_wheel_uploaded_beside_it_or_says_to_upload_it(weeks, tmp_path):
    """A release made without COLAB= or PACKAGE=: its README says to upload the wheel with the notebook; the first
    cell without it says so too (no pip error), and with it installs it."""
    readme = (weeks[1] / "README.md").read_text(encoding="utf-8")
    assert f"upload `dist/{_wheel(weeks[1]).name}`" in readme
    cell = _setup_cell(weeks[1])
    assert "TRANSLAB_PACKAGE = ''" in cell
    student = _Student(tmp_path, _wheel(weeks[1]))
    refused = _run_setup_cell(student, cell)
    assert refused.returncode != 0 and "upload the translab-*.whl file" in refused.stderr, refused.stderr[-2000:]
    assert "pip" not in refused.stderr.split("RuntimeError", 1)[1]
    shutil.copy(_wheel(weeks[1]), student.work)
    done = _run_setup_cell(student, cell)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"translab installed from {_wheel(weeks[1]).name} in" in done.stdout, done.stdout


def test_the_course_readme_gives_the_same_commands_as_the_release(weeks, tmp_path):
    """The course README's laptop block: the same three commands, its install line in the two forms pip takes
    (a URL, a wheel file), each of which the release README writes; run as written with week 1's wheel file."""
    install, setup, lab = (line.split("  #", 1)[0].strip() if index else line
                           for index, line in enumerate(course_readme_commands()))
    assert (setup, lab) == ("python -m translab setup", "python -m translab lab")
    forms = re.findall(r'pip install "([^"]+)"', install)
    assert forms == ["translab[lab] @ <the wheel's URL>", "<the wheel file>[lab]"], install
    wheel = _wheel(weeks[1])
    student = _Student(tmp_path, wheel)
    shutil.copy(wheel, student.work)
    student.run(shlex.join(["pip", "install", forms[1].replace("<the wheel file>", wheel.name)]))
    assert "1 copied" in student.run(setup).stdout
