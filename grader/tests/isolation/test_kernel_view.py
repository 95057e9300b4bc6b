"""Issue 81: a grading kernel sees an allow-list of the machine, never the course or the checkout minus names.

One student submits notebooks 01 and 02, each with a cell at its end that lists everything its kernel can open
(``grader.testing.kernel_view``): files, folders, an editable install's links back to the checkout, descriptors and
processes.  The course holds what a kernel graded late in a class would have found beside it before: a classmate's
graded folder, reports, grades files, the gradebook.  Every path the kernel opens must be on the allow-list this test
states on its own (the interpreter, the grader's files the kernel imports, the lab's files, its HOME, sockets and
working folder without any notebook); anything else fails the test, whatever its name.
"""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from grader.testing import kernel_view
from translab.contract import ASSIGNMENT
from translab.paths import LAB_HOME, REPO_ROOT, cache_dir, data_dir

from conftest import run_grader, small_course

pytestmark = pytest.mark.slow
STUDENT = "viewer"
NOTEBOOKS = ("01_mask_and_positional_encoding", "02_model_and_parameters")
# what a class leaves in the course folder that no kernel may read (issue 81's evidence: grades*.csv and reports/)
PLANTED = ("autograded/classmate/transfer_learning/answers.txt", "reports/similarity.html", "grades.csv",
           "grades_canvas.csv", "autograded/autograde_report.csv")


def _grader_files() -> set[str]:
    """The grader's files a kernel imports: what `import grader.isolation.launcher` loads of the grader, with bytecode."""
    code = ("import importlib.util, sys, grader.isolation.launcher\n"
            "for name, m in list(sys.modules.items()):\n"
            "    f = getattr(m, '__file__', None) or ''\n"
            "    if name.split('.')[0] == 'grader' and f.endswith('.py'):\n"
            "        print(f); print(importlib.util.cache_from_source(f))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return {str(Path(line).resolve()) for line in done.stdout.split()}


def _under(path: str, folders) -> bool:
    return any(path == str(folder) or path.startswith(str(folder).rstrip("/") + "/") for folder in folders)


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    root = small_course(tmp_path_factory.mktemp("view_course"))
    for relative in PLANTED:
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text("a classmate's grade\n")
    folder = root / "submitted" / STUDENT / ASSIGNMENT
    folder.mkdir(parents=True)
    for name in NOTEBOOKS:
        notebook = nbformat.read(root / "solutions" / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        notebook.cells.append(nbformat.v4.new_code_cell(kernel_view.view_cell()))
        nbformat.write(notebook, folder / f"{name}.ipynb")
    (folder / "my_notes.txt").write_text("the student's own file\n")
    run_grader(root, "autograde")
    reports = {}
    for name in NOTEBOOKS:
        notebook = nbformat.read(root / "autograded" / STUDENT / ASSIGNMENT / f"{name}.ipynb", as_version=4)
        reports[name] = kernel_view.report(notebook.cells[-1].get("outputs", []))
    assert all(reports.values()), f"a probe did not report: {reports}"
    return root, reports


def _allowed(report: dict) -> list[Path | str]:
    lab = [REPO_ROOT / "translab", LAB_HOME / "artifacts", LAB_HOME / "results", data_dir(), cache_dir()]
    lab += [path.resolve() for path in lab]
    return [*lab, report["home"], report["cwd"]]


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_file_the_kernel_can_open_is_on_the_allow_list(graded, name):
    root, reports = graded
    report = reports[name]
    allowed, grader = _allowed(report), _grader_files()
    outside = [path for path in report["files"] if not _under(path, allowed) and path not in grader]
    assert outside == [], f"{name}'s kernel can open what is not on its allow-list: {outside[:20]}"
    notebooks = [path for path in report["files"] if path.endswith(".ipynb") or "/.ipynb_checkpoints" in path]
    assert notebooks == [], f"{name}'s kernel sees a notebook's copy: {notebooks}"
    planted = [path for path in report["files"] if any(path.endswith(p) for p in PLANTED)]
    assert planted == [], planted
    classmate = root / "autograded" / "classmate"
    assert [folder for folder in report["folders"] if _under(folder, [classmate])] == [], "it lists a classmate's folder"
    # the control: it lists what it may see (so an empty list of others means they are not there, not blindness)
    assert any(path.endswith("/translab/contract.py") for path in report["files"]), report["files"][:20]
    assert str(Path(report["cwd"]) / "my_notes.txt") in report["files"]
    assert any(_under(path, [report["home"]]) for path in report["files"])  # its connection file


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_an_editable_install_s_links_lead_only_to_what_the_allow_list_holds(graded, name):
    report = graded[1][name]
    assert report["links"], "no editable install's link was found: the probe proves nothing about them"
    grader = _grader_files()
    for link in report["links"]:
        reached = [path for path in report["files"] if _under(path, [link])]
        outside = [path for path in reached if not _under(path, _allowed(report)) and path not in grader]
        assert outside == [], f"{link} leads {name}'s kernel to {outside[:10]}"


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_the_kernel_holds_no_descriptor_and_sees_no_process_beyond_its_own(graded, name):
    report = graded[1][name]
    allowed, grader = _allowed(report), _grader_files()
    for fd, target in report["fds"].items():
        if not target.startswith("/") or target in ("/dev/null", "/dev/urandom", "/dev/random"):
            continue  # a socket, a pipe, an eventfd: nothing a path could name
        assert (re.search(r"/kernel-\d+\.out$", target) or _under(target, allowed) or target in grader
                or _under(target, report["prefixes"])), f"{name}'s kernel holds descriptor {fd} on {target}"
    for pid, process in report["processes"].items():
        command = process["cmdline"] or ""
        assert "nbgrader" not in command and " -m grader " not in command, f"{name}'s kernel sees {pid}: {command}"
        assert process["self"] or not process["environ"], f"{name}'s kernel reads process {pid}'s environment"
    assert len(report["processes"]) <= 3, json.dumps(report["processes"], indent=1)
