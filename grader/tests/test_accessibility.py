"""The pages students and instructors read, audited in headless Chromium with axe-core (issue 55): every feedback
page of a complete and of a failing submission, the similarity page, the interview pages and `make report`'s page
have no critical, serious or moderate violation of the WCAG 2.0-2.2 A/AA rules and axe's best practices.  At 200 %
zoom nothing needs a horizontal scroll (screenshots in ``test-artifacts/``); by keyboard the feedback page starts
with a skip link to the notebook, and focus is visible."""
from __future__ import annotations

import json
import shutil

import pytest

from conftest import ARTIFACTS, BOB_ID, page_of, run_grader
from grader.testing.accessibility import RULE_TAGS, ZOOM_200, audit, blocking, sideways
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
