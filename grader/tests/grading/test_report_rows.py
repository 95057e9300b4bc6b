"""Issue 81, lost rows: `make autograde WARM=0` for one late student rewrote autograded/autograde_report.csv with that
student's row alone; every batch now merges its rows into the report (grader.grading.batch.write_report)."""
from __future__ import annotations

import csv

from grader.grading.batch import REPORT_COLUMNS, REPORT_NAME, BatchReport, StudentResult, write_report


def _rows(root) -> dict[str, dict]:
    with open(root / "autograded" / REPORT_NAME, newline="", encoding="utf-8") as handle:
        return {row["student_id"]: row for row in csv.DictReader(handle)}


def test_a_batch_of_one_replaces_that_student_s_row_and_keeps_the_class(tmp_path):
    write_report(tmp_path, BatchReport([StudentResult("alice", 10.0), StudentResult("bob", 11.0),
                                        StudentResult("carol", 12.0, failed_notebooks=["01_x"])], 30.0, jobs=2))
    write_report(tmp_path, BatchReport([StudentResult("carol", 9.5)], 10.0, jobs=1))
    rows = _rows(tmp_path)
    assert list(rows) == ["alice", "bob", "carol"]
    assert (rows["alice"]["seconds"], rows["bob"]["seconds"]) == ("10.0", "11.0")
    assert (rows["carol"]["status"], rows["carol"]["seconds"], rows["carol"]["failed_notebooks"]) == ("ok", "9.5", "")
    write_report(tmp_path, BatchReport([StudentResult("dave", 8.0)], 8.0, jobs=1))
    assert list(_rows(tmp_path)) == ["alice", "bob", "carol", "dave"]


def test_a_report_of_other_columns_is_kept_aside_not_merged(tmp_path):
    old = tmp_path / "autograded" / REPORT_NAME
    old.parent.mkdir()
    old.write_text("student_id,score\nalice,3\n", encoding="utf-8")
    write_report(tmp_path, BatchReport([StudentResult("bob", 1.0)], 1.0, jobs=1))
    assert list(_rows(tmp_path)) == ["bob"]
    assert old.with_name(REPORT_NAME + ".old").read_text(encoding="utf-8") == "student_id,score\nalice,3\n"
    with open(old, newline="", encoding="utf-8") as handle:
        assert next(csv.reader(handle)) == REPORT_COLUMNS
