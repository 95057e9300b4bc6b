"""`make report` on a class of three where one student never handed in a notebook: nbgrader scores it 0 ("No
submitted file"), but the report counts it as not submitted, apart from the tasks the class failed, in the CSV, the
page's table and its chart (told apart by more than colour, and said in the image's alt text)."""
from __future__ import annotations

import csv
import html
import json
import re
from pathlib import Path

import pytest

from translab.contract import ASSIGNMENT

pytestmark = pytest.mark.slow  # a gradebook (nbgrader's migrations run alembic)

FIRST, SECOND = "01_first", "02_second"
# student -> {notebook: the test cell's score, or None where the notebook was never handed in}
CLASS = {"ann": {FIRST: 1.0, SECOND: 1.0}, "ben": {FIRST: 0.0, SECOND: None}, "cid": {FIRST: 1.0, SECOND: 0.0}}
FAILURE = {"output_type": "error", "ename": "CheckFailed", "traceback": [],
           "evalue": "the mask has 1s on and below the diagonal\n[diagnosis: mask.ones]"}


def _notebook(task: str, passed: bool) -> dict:
    cell = {"cell_type": "code", "execution_count": 1, "source": "check()", "id": task,
            "metadata": {"nbgrader": {"grade": True, "grade_id": task, "points": 1, "solution": False,
                                      "locked": True, "schema_version": 3}},
            "outputs": [] if passed else [FAILURE]}
    return {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture(scope="module")
def reported(tmp_path_factory) -> Path:
    """The class graded as autograde leaves it (gradebook, submitted/, autograded/), then reported."""
    from grader.course.gradebook import open_gradebook
    from grader.grading import report
    root = tmp_path_factory.mktemp("course")
    with open_gradebook(root / "gradebook.db") as gradebook:
        gradebook.add_assignment(ASSIGNMENT)
        for notebook in (FIRST, SECOND):
            gradebook.add_notebook(notebook, ASSIGNMENT)
            gradebook.add_grade_cell(f"{notebook}_test", notebook, ASSIGNMENT, max_score=1, cell_type="code")
        for student, scores in CLASS.items():
            gradebook.add_student(student)
            gradebook.add_submission(ASSIGNMENT, student)
            for notebook, score in scores.items():
                grade = gradebook.find_grade(f"{notebook}_test", notebook, ASSIGNMENT, student)
                grade.auto_score = 0.0 if score is None else score  # nbgrader's 0 for "No submitted file"
                if score is None:
                    continue
                for folder in ("submitted", "autograded"):
                    path = root / folder / student / ASSIGNMENT / f"{notebook}.ipynb"
                    path.parent.mkdir(parents=True, exist_ok=True)
                    path.write_text(json.dumps(_notebook(f"{notebook}_test", score == 1.0)), encoding="utf-8")
        gradebook.db.commit()
    report.write(root)
    return root / "reports"


def _rows(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def test_a_notebook_never_handed_in_is_not_submitted_in_the_csv_not_failed(reported):
    tasks = {row["notebook"]: row for row in _rows(reported / "tasks.csv")}
    counts = {nb: (row["students"], row["passed"], row["failed"], row["not_submitted"], row["pass_rate"])
              for nb, row in tasks.items()}
    assert counts == {FIRST: ("3", "2", "1", "0", "0.67"), SECOND: ("3", "1", "1", "1", "0.50")}
    misconceptions = {row["key"]: row for row in _rows(reported / "misconceptions.csv")}
    assert misconceptions["mask.ones"]["students"] == "2"  # ben in 01, cid in 02: never ben's missing 02
    assert all("submitted" not in key for key in misconceptions), misconceptions


def test_the_page_s_table_and_chart_keep_not_submitted_apart_and_say_so(reported):
    from grader.grading.report import TASK_BARS
    page = (reported / "report.html").read_text(encoding="utf-8")
    assert "<th>failed</th><th>not submitted</th>" in page
    assert f"<td>{SECOND}</td><td>{SECOND}_test</td><td>1</td><td>1</td><td>1</td>" in page
    alt = html.unescape(re.search(r'<img alt="([^"]*)"', page).group(1))
    assert "passed (plain bars), failed (hatched //) and did not hand the notebook in (dotted outline)" in alt, alt
    assert "not handed in: notebook 02 by 1" in alt and "notebook 01 by" not in alt, alt
    # each category of a task's bar has a hatch (or none) of its own: never told apart by colour alone
    hatches = [style.get("hatch") for _, _, style in TASK_BARS]
    assert [label for label, _, _ in TASK_BARS] == ["passed", "failed", "not submitted"]
    assert len(set(hatches)) == len(TASK_BARS), hatches
    assert all(hatch is None or hatch in f"//..\\\\xx" for hatch in hatches)
