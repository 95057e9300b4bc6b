"""The pages students and instructors read, audited in headless Chromium with axe-core (issue 55): every feedback
page of a complete and of a failing submission, the similarity page, the interview pages and `make report`'s page
have no critical, serious or moderate violation of the WCAG 2.0-2.2 A/AA rules and axe's best practices.  At 200 %
zoom nothing needs a horizontal scroll (screenshots in ``test-artifacts/``); by keyboard the feedback page starts
with a skip link to the notebook, and focus is visible.  In the students' JupyterLab (`make lab`), a figure of the
lab's has its text alternative, saved in the notebook as drawn live (issue 90)."""
from __future__ import annotations

import json
import re
import shutil

import nbformat
import pytest
from nbclient import NotebookClient

from conftest import ARTIFACTS, BOB_ID, course_copy, page_of, run_grader
from grader.testing.accessibility import RULE_TAGS, ZOOM_200, audit, blocking, sideways
from test_lab_servers import TOKEN, served
from translab.contract import ASSIGNMENT

pytestmark = pytest.mark.slow
STUDENTS = {"complete": "alice", "failing": BOB_ID}


@pytest.fixture(scope="module")
def pages(course, tmp_path_factory) -> dict:
    """{name: path} of the pages to audit: the class's feedback, and the reports made from a copy of its submissions
    (the shared course stays as the other tests expect it)."""
    reports = tmp_path_factory.mktemp("reports_course")
    for folder in ("submitted", "notebooks"):
        shutil.copytree(course / folder, reports / folder)
    for command in (("similarity",), ("interviews", "--sample", "1"), ("report",)):
        run_grader(reports if command[0] != "report" else course, *command)
    found = {f"feedback {kind} {path.stem}": path for kind, student in STUDENTS.items()
             for path in sorted((course / "feedback" / student / ASSIGNMENT).glob("*.html"))}
    found["similarity"] = reports / "reports" / "similarity.html"
    found["interviews index"] = reports / "reports" / "interviews" / "index.html"
    found.update({f"interview {path.stem}": path for path in sorted((reports / "reports" / "interviews").glob("*.html"))
                  if path.name != "index.html"})
    found["report"] = course / "reports" / "report.html"
    assert sum(name.startswith("feedback") for name in found) == 12 and len(found) >= 16, sorted(found)
    return found


def test_no_page_has_a_critical_serious_or_moderate_violation(axe, pages, browser):
    findings = {}
    with page_of(browser, "accessibility") as page:
        for name, path in pages.items():
            page.goto(path.as_uri())
            findings[name] = audit(page)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "accessibility.json").write_text(json.dumps(
        {"tags": RULE_TAGS, **{name: found for name, found in findings.items()}}, indent=1))
    some = next(iter(findings.values()))
    assert {"color-contrast", "html-has-lang", "region", "scrollable-region-focusable", "heading-order",
            "link-name", "image-alt"} <= set(some["rules"])  # the rules the pages failed before, and more, ran
    assert {name: blocking(found) for name, found in findings.items() if blocking(found)} == {}


def test_at_200_percent_zoom_nothing_scrolls_sideways(pages, browser):
    """Every page at 200 % zoom (``ZOOM_200``), a screenshot each."""
    context = browser.new_context(**ZOOM_200)
    wide = {}
    try:
        page = context.new_page()
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        for name, path in pages.items():
            page.goto(path.as_uri())
            page.screenshot(path=str(ARTIFACTS / f"zoom-200-{name.replace(' ', '-')}.png"))
            wide[name] = sideways(page)
    finally:
        context.close()
    assert {name: pixels for name, pixels in wide.items() if pixels > 1} == {}, "CSS pixels wider than the window"


def test_the_feedback_page_by_keyboard_alone(pages, browser):
    with page_of(browser, "keyboard") as page:
        page.goto(pages["feedback failing 01_mask_and_positional_encoding"].as_uri())
        page.keyboard.press("Tab")
        first = page.evaluate("[document.activeElement.textContent, getComputedStyle(document.activeElement).outlineStyle]")
        assert first[0] == "Skip to the notebook" and first[1] != "none"
        page.keyboard.press("Enter")
        assert page.evaluate("document.activeElement.id") == "notebook-content"
        page.goto(pages["feedback failing 01_mask_and_positional_encoding"].as_uri())
        reached = []
        for _ in range(6):
            page.keyboard.press("Tab")
            reached.append(page.evaluate("document.activeElement.getAttribute('href')"))
        assert reached[0] == "#notebook-content" and all(href and href.startswith("#") for href in reached)
        # the page's one h1 is its score (the notebook's headings one level down), and each graded cell a
        # heading that says its outcome in words
        assert page.locator("h1").count() == 1 and "Score: " in page.locator("h1").inner_text()
        headings = page.locator("h3.graded-heading").all_inner_texts()
        assert headings and any("no marks" in text or "part marks" in text for text in headings)


# ----------------------------------------------------------------- a figure in the students' JupyterLab

FIGURE_CELL = ("import torch\nfrom translab import plots\n"
               "plots.plot_mask(torch.triu(torch.full((6, 6), float('-inf')), diagonal=1));")
LAB_WAIT = 180_000  # ms: a kernel start and torch's import on a busy 2-core machine


@pytest.fixture(scope="module")
def lab_with_figures(tmp_path_factory):
    """A students' lab whose notebooks hold part 1's mask figure as a kernel drew it: ``figure`` with the lab's
    output (saved, so JupyterLab opens it untrusted, as a student who reopens it), ``png_only`` with that output's
    PNG alone, its alt in the metadata (what the lab saved before issue 90, and what JupyterLab shows without alt)."""
    root = course_copy(tmp_path_factory.mktemp("lab_figures"), "translab/jupyter_student")
    folder = root / "notebooks" / ASSIGNMENT
    folder.mkdir(parents=True)
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(FIGURE_CELL)])
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    NotebookClient(notebook, timeout=120, kernel_name="python3").execute()
    nbformat.write(notebook, folder / "figure.ipynb")
    figure = next(output for output in notebook.cells[0].outputs if output.output_type == "display_data")
    said = next(output.text for output in notebook.cells[0].outputs if output.output_type == "stream").strip()
    figure.data = {mime: value for mime, value in figure.data.items() if mime != "text/html"}
    nbformat.write(notebook, folder / "png_only.ipynb")
    with served(root, "lab") as (base, _):
        yield base, said


def _open(page, base: str, notebook: str) -> None:
    """``notebook`` in a workspace of its own: JupyterLab would reopen the other notebooks of the default one."""
    page.goto(f"{base}/lab/workspaces/{notebook}/tree/{notebook}.ipynb?reset&token={TOKEN}")


def _figures(page) -> list:
    """The alt (None where there is none) of each image in the notebook's outputs, once one shows."""
    images = page.locator(".jp-Notebook .jp-OutputArea-output img")
    images.first.wait_for(timeout=LAB_WAIT)
    return [image.get_attribute("alt") for image in images.all()]


def _image_alt(page) -> list:
    return [violation for violation in audit(page)["violations"] if violation[0] == "image-alt"]


def _menu(page, menu: str, item: str) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{menu}$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{item}$")).click()


def test_in_jupyterlab_a_figure_has_its_alt_saved_and_drawn_live(axe, lab_with_figures, browser):
    base, said = lab_with_figures
    with page_of(browser, "lab_figure_alt") as page:
        _open(page, base, "png_only")
        assert _figures(page) == [None] and _image_alt(page), "the audit must see a figure without alt"

        _open(page, base, "figure")
        assert _figures(page) == [said] and said.startswith("causal mask")
        assert _image_alt(page) == []

        _menu(page, "Edit", "Clear Outputs of All Cells")
        page.locator(".jp-Notebook .jp-OutputArea-output img").wait_for(state="detached", timeout=LAB_WAIT)
        _menu(page, "Run", "Run All Cells")
        assert _figures(page) == [said]
        assert _image_alt(page) == []
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "lab-figure-drawn-live.png"))
