"""The README sent readers to "the bench table below", "times below" and the tables under "How long it takes", none
of which it has: ``python -m experiments.bench --readme`` writes its tables into the grader's pages
(``grader/docs/``), never into README.md.  What a page says of them must lead where they are."""
from __future__ import annotations

import re

from experiments.bench import tables
from translab.paths import REPO_ROOT

MARKS = (tables.README_BEGIN, tables.HUB_BEGIN, tables.SIZING_BEGIN, tables.PHASES_BEGIN)
PAGES = [REPO_ROOT / "README.md", REPO_ROOT / "grader" / "README.md", *sorted(tables.PAGES.glob("*.md"))]


def test_the_bench_writes_its_tables_into_the_pages_the_readme_links_for_them():
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert not any(mark in readme for mark in MARKS), "the bench writes no table into README.md"
    row = next(line for line in readme.splitlines() if line.startswith("| `make bench` |"))
    linked = {(REPO_ROOT / target).resolve() for target in re.findall(r"\]\(([^)#]+\.md)\)", row)}
    written = {page.resolve() for page in tables.PAGES.glob("*.md")
               if any(mark in page.read_text(encoding="utf-8") for mark in MARKS)}
    assert written and written == linked, (sorted(map(str, written)), sorted(map(str, linked)))


def test_a_page_that_points_below_or_under_a_heading_for_measured_times_has_them_there():
    headings = {line.lstrip("#").strip() for page in PAGES
                for line in page.read_text(encoding="utf-8").splitlines() if line.startswith("#")}
    wrong = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for named in re.findall(r'(?:tables?|figures?) (?:are )?under\s+"([^"]+)"', text):
            if named not in headings:
                wrong.append(f"{page.relative_to(REPO_ROOT)}: no heading {named!r}")
        for pointer in re.finditer(r"(?:bench|grading) tables? below|times below", text):
            if not any(mark in text[pointer.end():] for mark in MARKS):
                wrong.append(f"{page.relative_to(REPO_ROOT)}: {pointer.group(0)!r}, and no bench table below it")
    assert wrong == []
