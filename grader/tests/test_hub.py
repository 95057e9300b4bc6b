"""The course on a real JupyterHub (hub/jupyterhub_config.py, configurable-http-proxy from npm, nbgrader's exchange):
generate -> release -> fetch -> work -> submit -> collect -> autograde -> manual grades -> feedback -> fetch_feedback,
each step sent as the formgrader's buttons and the students' Assignments panel send it: no terminal.  The class: one
complete submission, one blank, one hostile probe (complete too, and reading for its classmates' work); the bench's
hub cycle (``make bench``) takes ten through the same steps."""
from __future__ import annotations

import os
import re
from pathlib import Path

import nbformat
import pytest

from grader.testing import hub as hubs
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

from conftest import hidden_test_lines, page_text

pytestmark = pytest.mark.slow
# each student costs the cycle a server and an Autograde press (about 25 s on a 2-core machine): one of each kind
CLASS = {"student01": "complete", "student02": "blank", "student03": "probe"}
BROWSER_WAIT = 120_000  # ms: a hub, eleven servers and JupyterLab on a busy 2-core machine


@pytest.fixture(scope="module")
def term(tmp_path_factory):
    """(hub, cycle result): the hub stays up for the tests of who sees what."""
    reason = hubs.missing()
    if reason and os.environ.get("CI") == "true":  # CI installs the proxy (make setup, where npm is): missing, broken
        pytest.fail(reason)
    if reason:  # a machine without npm: `make setup` said it skipped the proxy
        pytest.skip(reason)
    demo = hubs.DemoHub(tmp_path_factory.mktemp("hub"), list(CLASS))
    demo.prepare(generate=False)  # the cycle presses Generate
    with demo:
        yield demo, hubs.cycle(demo, CLASS)


def _students(kind: str) -> list[str]:
    return [name for name, each in CLASS.items() if each == kind]


def test_the_class_gets_the_scores_a_fair_grader_gives(term):
    _, result = term
    assert set(result["scores"]) == set(CLASS), result["scores"]
    maximum = {total for _, total in result["scores"].values()}
    assert len(maximum) == 1 and maximum.pop() > 0
    for name in _students("complete") + _students("probe"):  # written answers graded in the formgrader's API
        score, total = result["scores"][name]
        assert score == total, (name, result["scores"][name])
    for name in _students("blank"):
        assert result["scores"][name][0] == 0, (name, result["scores"][name])


def test_the_probe_reaches_nothing_of_the_hub_from_its_grading_kernel(term):
    demo, _ = term
    for name in _students("probe"):
        graded = demo.course / "autograded" / name / ASSIGNMENT / "01_mask_and_positional_encoding.ipynb"
        outputs = [output.get("text", "") for cell in nbformat.read(graded, as_version=4).cells
                   if cell.cell_type == "code" for output in cell.get("outputs", [])]
        reports = [line for text in outputs for line in text.splitlines() if line.startswith(hubs.PROBE_MARK)]
        assert reports == [f"{hubs.PROBE_MARK} []"], reports  # it ran, and found no file, folder or port
    assert not (demo.exchange / "probe-was-here").exists()


def test_the_formgrader_s_buttons_grade_and_give_feedback_with_no_terminal(term):
    """Autograde, pressed for each submission, grades in the sandbox (the probe above found nothing); Generate
    Feedback refuses while written answers await their grade, naming them, and works once they are graded."""
    demo, result = term
    assert result["autograde_buttons"] and all(pressed["success"] for pressed in result["autograde_buttons"].values())
    said = "".join(pressed.get("log", "") for pressed in result["autograde_buttons"].values())
    assert said.count("in its sandbox") == len(CLASS), said[-2000:]
    early = result["early_feedback"]
    assert early["success"] is False and "not graded yet" in early.get("error", "") + early.get("log", "")
    assert (demo.course / "autograded" / "autograde_report.csv").exists()


def test_each_student_fetches_feedback_without_hidden_tests(term):
    demo, result = term
    hidden = hidden_test_lines()
    assert hidden, "no hidden tests found in the solutions"
    notebooks = len(list((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")))
    for name in CLASS:
        pages = result["feedback"][name]
        assert len(pages) == notebooks, (name, pages)
        assert all(Path(page).is_relative_to(demo.homes / name) for page in pages)
        for page in pages:
            text = page_text(Path(page))
            assert "HIDDEN TESTS" not in text and not [line for line in hidden if line in text], page
            first_score = re.search(r"Score: ([\d.]+) / ([\d.]+)", text)
            assert first_score, page
            if CLASS[name] == "blank":
                assert float(first_score.group(1)) == 0, page
            else:
                assert first_score.group(1) == first_score.group(2), page


def _page_config(text: str) -> str:
    match = re.search(r'<script id="jupyter-config-data" type="application/json">(.*?)</script>', text, re.S)
    assert match, text[:500]
    return match.group(1)


def test_students_get_no_instructor_tools_and_the_instructor_a_formgrader_that_frames(term):
    demo, _ = term
    student, instructor = demo.session(next(iter(CLASS))), demo.session(hubs.INSTRUCTOR)
    assert student.request("GET", "formgrader", ok=None).status_code == 404
    assert student.request("GET", "formgrader/api/assignments", ok=None).status_code == 404
    assert student.request("GET", "assignments", params={"course_id": hubs.COURSE_ID}).json()["success"]
    config = _page_config(student.request("GET", "lab").text)
    for panel in ("formgrader", "create-assignment", "course-list"):
        assert f'"@jupyter/nbgrader:{panel}"' in config, panel
    assert '"@jupyter/nbgrader:assignment-list"' not in config
    assert "frame-ancestors 'none'" in student.request("GET", "lab").headers["Content-Security-Policy"]

    page = instructor.request("GET", "formgrader")
    assert "frame-ancestors 'self'" in page.headers["Content-Security-Policy"]  # JupyterLab shows it in a panel
    assert '"@jupyter/nbgrader:formgrader"' not in _page_config(instructor.request("GET", "lab").text)
    assignments = instructor.formgrader("GET", "assignments")  # the course's gradebook, not an empty one
    assert [row["name"] for row in assignments] == [ASSIGNMENT]
    assert assignments[0]["num_submissions"] == len(CLASS)


def _log_in(page, demo, name: str) -> None:
    page.goto(f"{demo.url}/hub/login")
    page.fill("#username_input", name)
    page.fill("#password_input", demo.password)
    page.click("#login_submit")
    page.wait_for_url(re.compile(rf".*/user/{name}/lab.*"), timeout=BROWSER_WAIT)
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile("^Nbgrader$")).click(timeout=BROWSER_WAIT)


def test_in_a_browser_the_instructor_sees_the_formgrader_panel_and_a_student_only_assignments(term, browser):
    """What the header test above means on screen: JupyterLab's Formgrader panel shows the course (blank under
    the hub's default frame-ancestors 'none'), and a student's Nbgrader menu has the Assignments panel only."""
    from conftest import page_of
    demo, _ = term
    with page_of(browser, "hub_instructor") as page:
        _log_in(page, demo, hubs.INSTRUCTOR)
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Formgrader$")).click()
        panel = page.frame_locator("iframe").first
        row = panel.locator("tr", has_text=ASSIGNMENT).first
        row.wait_for(timeout=BROWSER_WAIT)
        assert "released" in row.inner_text()
    with page_of(browser, "hub_student") as page:
        _log_in(page, demo, next(iter(CLASS)))
        items = [item for item in page.locator(".lm-Menu-itemLabel").all_inner_texts() if item.strip()]
        assert items == ["Assignment List"], items
        page.locator(".lm-Menu-itemLabel", has_text=re.compile("^Assignment List$")).click()
        submitted = page.locator("#submitted_assignments_list", has_text=ASSIGNMENT)
        submitted.wait_for(timeout=BROWSER_WAIT)
