"""The student's and the instructor's flows, in headless Chromium against `make lab` and `make formgrader`.

Student: open notebook 01 in the students' lab, type a wrong mask, run, read the check's feedback; fix it, run,
see the check pass; Validate.  Instructor: two students autograded, the formgrader's Autograde and Generate Feedback
buttons (the sandbox's batch; the feedback rule), its Manual Grading page, a written answer graded with a comment,
`make grades`, `make feedback`, the feedback page.  A failing step saves a
screenshot under ``test-artifacts/`` (``TRANSLAB_TEST_ARTIFACTS``) and says where.
"""
from __future__ import annotations

import csv
import json
import re
import subprocess
import time
from pathlib import Path

import pytest

from conftest import add_release, run_grader, course_copy, page_of, submission_id
from test_lab_servers import TOKEN, served
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow
NB1 = "01_mask_and_positional_encoding"
WRONG_MASK = "def generate_square_subsequent_mask(sz):\n    return torch.zeros(sz, sz)\n"
RIGHT_MASK = ("def generate_square_subsequent_mask(sz):\n"
              "    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n")
LONG = 180_000  # ms: a kernel start and a run of the notebook's first cells on a busy 2-core machine


# ----------------------------------------------------------------- the student

@pytest.fixture(scope="module")
def student_course(tmp_path_factory) -> Path:
    return course_copy(tmp_path_factory.mktemp("student_lab"), "notebooks", "translab/jupyter_student")


def _code_cell(page, text: str):
    return page.locator(".jp-Notebook .jp-CodeCell", has_text=text).first


def _replace_source(page, cell, source: str) -> None:
    cell.scroll_into_view_if_needed()
    cell.locator(".cm-content").click()
    page.keyboard.press("Control+a")
    page.keyboard.insert_text(source)


def _run_all(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def _output_of(cell, text: str) -> str:
    """The cell's output once it shows ``text`` (the notebook renders only the cells in view: scroll to it)."""
    deadline = LONG / 1000
    start = time.monotonic()
    while True:
        cell.scroll_into_view_if_needed()
        output = cell.locator(".jp-OutputArea").first.inner_text()
        if text in output or time.monotonic() - start > deadline:
            assert text in output, f"the output never showed {text!r}: {output[-2000:]!r}"
            return output
        time.sleep(0.5)


def test_a_student_reads_the_feedback_fixes_the_answer_and_validates(student_course, browser):
    with served(student_course, "lab") as (base, _), page_of(browser, "student_flow") as page:
        page.goto(f"{base}/lab/tree/{NB1}.ipynb?token={TOKEN}")
        answer = _code_cell(page, "def generate_square_subsequent_mask")
        answer.wait_for(timeout=LONG)
        test = _code_cell(page, "checks.check_mask(generate_square_subsequent_mask)")

        # a wrong answer: the test cell says what is wrong
        _replace_source(page, answer, WRONG_MASK)
        _run_all(page)
        feedback = _output_of(test, "holds only 0 and 1")
        assert "likely:" in feedback and "Traceback" not in feedback, feedback

        # fixed: the same test cell passes
        _replace_source(page, answer, RIGHT_MASK)
        _run_all(page)
        assert "CheckFailed" not in _output_of(test, "ok  causal mask for sz = 5")

        # Validate (saved first): the mask passes, the encoding (still the stub) is what fails
        page.keyboard.press("Control+s")
        # saved before Validate saves again: two saves at once make JupyterLab ask "File Changed" (seen on a busy
        # machine), a dialog no student of this flow would meet
        page.locator(".lm-TabBar-tab.jp-mod-dirty").wait_for(state="detached", timeout=LONG)
        page.locator(".jp-NotebookPanel-toolbar").get_by_text("Validate", exact=True).click()
        dialog = page.locator(".jp-Dialog")
        dialog.wait_for(timeout=LONG)
        dialog.get_by_text(re.compile("PositionalEncoding|NotImplementedError")).first.wait_for(timeout=LONG)
        report = dialog.inner_text()
        assert "holds only 0 and 1" not in report and "0 on and below the diagonal" not in report, report


# ----------------------------------------------------------------- the instructor

WRITTEN = "written_mask_pe"  # notebook 01's written answer (4 points)


@pytest.fixture(scope="module")
def graded_course(tmp_path_factory) -> Path:
    """A course with two students' notebook 01 autograded: alice's right, bob's with a wrong mask."""
    import nbformat
    root = add_release(course_copy(tmp_path_factory.mktemp("instructor_course"), "solutions"))
    solution = nbformat.read(root / "solutions" / "transfer_learning" / f"{NB1}.ipynb", as_version=4)
    for student, mask in (("alice", None), ("bob", WRONG_MASK)):
        notebook = nbformat.from_dict(json.loads(json.dumps(solution)))
        if mask:
            cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "mask_answer")
            cell.source = mask
        folder = root / "submitted" / student / "transfer_learning"
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{NB1}.ipynb")
    run_grader(root, "autograde")
    return root


def _manual_grade(root: Path, student: str) -> tuple[float | None, str | None]:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        grade = gradebook.find_grade(WRITTEN, NB1, "transfer_learning", student)
        comment = gradebook.find_comment(WRITTEN, NB1, "transfer_learning", student)
        return grade.manual_score, comment.manual_comment


def _make(root: Path, *target: str) -> str:
    done = subprocess.run(["make", "-s", *target, f"VENV={REPO_ROOT / '.venv'}"], cwd=root, capture_output=True,
                          text=True, timeout=600)
    return f"exit {done.returncode}\n{done.stdout}{done.stderr}"


def _assert_formulas_typeset(page) -> None:
    """Notebook 01's formulas are drawn as MathML, offline (grader/course/mathml.py): the positional encoding's display
    formula has a real height, and no TeX source is left on the page."""
    formulas = page.locator("math")
    assert formulas.count() >= 10, f"{formulas.count()} MathML formulas on {page.url}"
    block = page.locator('math[display="block"]').first
    box = block.bounding_box()
    assert box and box["height"] > 20 and box["width"] > 100, f"display formula drawn as {box} on {page.url}"
    text = page.locator("body").inner_text()
    assert "\\frac" not in text and "$-\\infty$" not in text and "d_{model}" not in text, "raw TeX on the page"


def _modal(page, selector: str) -> str:
    """The text of the formgrader's result dialog once it opens (a button's POST is answered when it is done)."""
    modal = page.locator(selector)
    modal.wait_for(state="visible", timeout=LONG)
    return modal.inner_text()


def test_the_formgrader_s_autograde_and_feedback_buttons_take_the_safe_path(graded_course, browser, tmp_path):
    """Manage Submissions, clicked as an instructor clicks it: Autograde grades the submission in the sandbox (the
    log says the batch did it) and keeps its score; Generate Feedback is refused while the written answer awaits
    its grade, naming it, and writes nothing."""
    import shutil
    root = tmp_path / "course"
    shutil.copytree(graded_course, root, ignore=shutil.ignore_patterns("*.log"))
    before = _score(root, "bob")
    with served(root, "formgrader") as (base, _), page_of(browser, "formgrader_buttons") as page:
        page.goto(f"{base}/formgrader?token={TOKEN}")  # logs in: the page's own API calls carry the cookie
        page.get_by_text("Manual Grading").first.wait_for(timeout=LONG)
        page.goto(f"{base}/formgrader/manage_submissions/transfer_learning")
        row = page.locator("tr", has_text="bob").first
        row.wait_for(timeout=LONG)
        row.locator(".autograde a").click()
        said = _modal(page, "#success-modal")
        assert "Successfully autograded" in said and "in its sandbox" in said, said[-2000:]
        page.locator("#success-modal button.close").first.click()
        page.locator("#success-modal").wait_for(state="detached", timeout=LONG)
        row = page.locator("tr", has_text="bob").first
        row.locator(".generate-feedback a").click()
        said = _modal(page, "#error-modal")
        assert "not graded yet" in said and WRITTEN in said, said[-2000:]
    assert _score(root, "bob") == before
    assert not (root / "feedback").exists()


def _score(root: Path, student: str) -> float:
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        return gradebook.find_submission("transfer_learning", student).score


def test_an_instructor_grades_a_written_answer_and_releases_feedback(graded_course, browser):
    root = graded_course
    refused = _make(root, "feedback")
    assert not refused.startswith("exit 0") and WRITTEN in refused, f"feedback must wait for the grades:\n{refused}"
    marks = {"alice": ("3", "Clear on the mask; say why the encoding needs no parameters."),
             "bob": ("2", "The mask's role is right; the encoding is missing.")}
    with served(root, "formgrader") as (base, _), page_of(browser, "instructor_flow") as page:
        outside = []  # requests the pages make beyond this machine (page_of aborts them: offline, as in a lab room)
        page.on("request", lambda request: outside.append(request.url)
                if not request.url.startswith(("http://127.0.0.1", "file:", "data:", "blob:")) else None)
        page.goto(f"{base}/formgrader?token={TOKEN}")
        page.get_by_text("Manual Grading").first.wait_for(timeout=LONG)
        for student, (score, comment) in marks.items():
            page.goto(f"{base}/formgrader/submissions/{submission_id(root, student, NB1)}/")
            score_box = page.locator(f"input.score#{WRITTEN}")
            score_box.wait_for(timeout=LONG)
            page.wait_for_load_state("networkidle")  # the page's views, which save on change, are built by then
            for attempt in range(3):  # typed again, as an instructor would, where a change went unseen: once seen on a
                if attempt:           # machine busy with other tests, the box shown before its save was wired up
                    score_box.fill("")
                    score_box.press("Tab")
                score_box.fill(score)
                score_box.press("Tab")  # leaves the box: the formgrader saves the score on its own (once seen: not
                deadline = time.monotonic() + 20  # saved when the comment box took the focus straight away)
                while _manual_grade(root, student)[0] != float(score) and time.monotonic() < deadline:
                    time.sleep(0.3)
                if _manual_grade(root, student)[0] == float(score):
                    break
            page.locator(f"textarea#{WRITTEN}-comment").fill(comment)
            page.locator(f"textarea#{WRITTEN}-comment").press("Shift+Tab")  # leaves the box: the formgrader saves
            page.locator("body").click(position={"x": 5, "y": 5})
            deadline = time.monotonic() + 30
            while _manual_grade(root, student) != (float(score), comment) and time.monotonic() < deadline:
                time.sleep(0.3)
            assert _manual_grade(root, student) == (float(score), comment)
            if student == "bob":  # the autograded part shows the check's message, as the student will read it
                assert "holds only 0 and 1" in page.locator("body").inner_text()

        output = _make(root, "grades")
        assert output.startswith("exit 0"), output
        with open(root / "grades.csv", newline="", encoding="utf-8") as handle:
            rows = {row["student_id"]: row for row in csv.DictReader(handle)}
        column = f"{NB1}/{WRITTEN}"
        assert (rows["alice"][column], rows["bob"][column]) == ("3.0", "2.0"), {k: rows[k][column] for k in rows}
        output = _make(root, "feedback")
        assert output.startswith("exit 0"), output

        for student, (score, comment) in marks.items():
            page.goto((root / "feedback" / student / "transfer_learning" / f"{NB1}.html").as_uri())
            text = page.locator("body").inner_text()
            assert comment in text and f"Score: {float(score)} / 4.0" in text, text[:3000]
            assert ("holds only 0 and 1" in text) == (student == "bob")
            _assert_formulas_typeset(page)
        # the formgrader's page too, after the pages above: each asked for nothing beyond this machine
        page.goto(f"{base}/formgrader/submissions/{submission_id(root, 'alice', NB1)}/")
        page.locator(f"input.score#{WRITTEN}").wait_for(timeout=LONG)
        _assert_formulas_typeset(page)
        assert not outside, f"pages asked for resources beyond 127.0.0.1: {sorted(set(outside))[:5]}"
