"""The formgrader's Manual Grading page, which the course changes (its template ``grader/templates/formgrade``, formulas
as MathML, sanitized answers, the grader's notes): in headless Chromium on `make formgrader`, the note under an
own-run answer sits right under that answer (issue 54), and the page passes the accessibility audit, at 200 % zoom
too (issue 55).  The formgrader's other pages are nbgrader's own, unchanged by the course."""
from __future__ import annotations

import json

import nbformat
import pytest

from conftest import ARTIFACTS, add_release, course_copy, page_of, run_grader, submission_id
from grader.course.own_run import NOTE_MARK, OWN_RUN
from grader.testing.accessibility import ZOOM_200, audit, blocking, sideways
from test_lab_servers import TOKEN, served
from translab.contract import ASSIGNMENT

pytestmark = pytest.mark.slow
NB2 = "02_model_and_parameters"
ANSWER = OWN_RUN[NB2].grade_id
CLAIM = "123,457"  # a figure in no output of anyone's: the note must say so
WAIT = 180_000  # ms: a formgrader page on a busy 2-core machine


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    """A course whose student alice submitted notebook 02's solution with a figure of her own in the written
    answer, autograded; and its formgrader, served."""
    root = add_release(course_copy(tmp_path_factory.mktemp("formgrader_pages"), "solutions"))
    notebook = nbformat.read(root / "solutions" / ASSIGNMENT / f"{NB2}.ipynb", as_version=4)
    cell = next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == ANSWER)
    cell.source = f"My model has {CLAIM} parameters.\n\n" + cell.source
    folder = root / "submitted" / "alice" / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / f"{NB2}.ipynb")
    run_grader(root, "autograde")
    with served(root, "formgrader") as (base, _):
        yield root, base


def _open_submission(page, root, base) -> None:
    page.goto(f"{base}/formgrader?token={TOKEN}")  # logs in
    page.goto(f"{base}/formgrader/submissions/{submission_id(root, 'alice', NB2)}/")
    page.locator(f"input.score#{ANSWER}").wait_for(timeout=WAIT)
    page.wait_for_load_state("networkidle")


def test_the_grader_s_note_is_right_under_the_own_run_answer(graded, browser):
    root, base = graded
    with page_of(browser, "formgrader_note") as page:
        _open_submission(page, root, base)
        answer = page.locator(".nbgrader_cell", has=page.locator(f"input.score#{ANSWER}"))
        note = page.locator(".cell", has_text=NOTE_MARK.strip("*"))
        assert answer.count() == 1 and note.count() == 1, (answer.count(), note.count())
        follows = page.evaluate("""([answer, note]) => {
            const cell = answer.closest('.cell');
            return cell.nextElementSibling === note;
        }""", [answer.element_handle(), note.element_handle()])
        assert follows, "the note is not the cell right after the answer"
        text = note.inner_text()
        assert f"{CLAIM}: in none of them" in text, text
        assert "deterministic" in text


def test_the_manual_grading_page_passes_the_audit(axe, graded, browser):
    root, base = graded
    with page_of(browser, "formgrader_audit") as page:
        _open_submission(page, root, base)
        found = audit(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "accessibility-formgrader.json").write_text(json.dumps({"manual grading": found}, indent=1))
    assert blocking(found) == [], found["violations"]


def test_the_manual_grading_page_at_200_percent_zoom(graded, browser):
    root, base = graded
    context = browser.new_context(**ZOOM_200)
    try:
        page = context.new_page()
        _open_submission(page, root, base)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "zoom-200-formgrader-manual-grading.png"))
        wide = sideways(page)
        assert wide <= 1, f"{wide} CSS pixels wider than the window at 200 % zoom"
    finally:
        context.close()
