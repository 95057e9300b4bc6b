"""What the corpus tests share: the table of fair scores, the corpus course, and how a graded case is read back.

``test_corpus.py`` grades the whole corpus in a batch that has the machine to itself; ``test_corpus_on_cluster.py``
grades a few of its cases on a Dask cluster, beside the other test files.  Both hold them to the same table."""
from __future__ import annotations

import csv
from pathlib import Path

from grader.grading.batch import REPORT_NAME
from grader.testing import corpus
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

from conftest import cell_scores, small_course

TABLE = REPO_ROOT / "grader" / "testing" / "expected_scores.csv"
NOTEBOOKS = sorted(p.stem for p in (REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))


def _table() -> dict[str, dict]:
    with open(TABLE, newline="", encoding="utf-8") as handle:
        return {row["case"]: row for row in csv.DictReader(handle)}


EXPECTED = _table()


def corpus_course(root: Path, cases: list[str]) -> None:
    """The course with ``cases`` submitted, and the classmate's submission the read_exchange case aims at."""
    small_course(root)
    corpus.build(root / "submitted", root, cases)
    classmate = root / "exchange" / "translab" / "inbound" / "classmate+transfer_learning+2026-11-23 09:00:00 UTC+x"
    classmate.mkdir(parents=True)  # what the read_exchange case aims at: the local flow's exchange
    (classmate / f"{corpus.NB1}.ipynb").write_text(corpus.EXCHANGE_SECRET)


def batch_report(root: Path) -> dict[str, dict]:
    """The batch's autograde report, by student."""
    with open(root / "autograded" / REPORT_NAME, newline="", encoding="utf-8") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def flagged_notebooks(root: Path, student: str) -> set[str]:
    """The notebooks of ``student``'s submission that the gradebook flags for the instructor."""
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{root / 'gradebook.db'}") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        return {notebook.name for notebook in submission.notebooks if notebook.flagged}


def notebook_points(root: Path, student: str) -> dict[str, float]:
    """The auto-graded points of each notebook, as the table states them."""
    scores = cell_scores(root, student)
    return {nb: sum(score for (notebook, _), (score, _, is_code) in scores.items() if is_code and notebook == nb)
            for nb in NOTEBOOKS}


def assert_graded_as_the_table_says(root: Path, students: list[str]) -> None:
    """Each student's points per notebook and flagged notebooks are the table's (what ``make autograde`` gives)."""
    for name in students:
        points, flags = table_says(name)
        assert notebook_points(root, name) == points, f"{name}: scores differ from the table (make autograde's)"
        assert flagged_notebooks(root, name) == flags, f"{name}: flags differ from the table (make autograde's)"


def table_says(case: str) -> tuple[dict[str, float], set[str]]:
    """(points per notebook, flagged notebooks) the table gives ``case``."""
    row = EXPECTED[case]
    return {nb: float(row[nb]) for nb in NOTEBOOKS}, set(row["flagged"].split())
