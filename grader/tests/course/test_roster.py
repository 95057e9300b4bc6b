"""`make students ROSTER=...`: an LMS roster's names and e-mails into the gradebook, checked before anything is written."""
from __future__ import annotations

import csv
import subprocess
import sys

import pytest
from nbgrader.api import Gradebook

from grader.course import roster


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


def test_reads_an_lms_export_whatever_its_column_names_and_order(tmp_path):
    moodle = _write(tmp_path / "moodle.csv", "\ufeffFirst name;Surname;ID number;Email address\n"
                                             "Ada;Lovelace;ada;ada@example.org\nAlan;Turing;alan.t;\n\n")
    assert roster.read(moodle) == [roster.Student("ada", "Ada", "Lovelace", "ada@example.org"),
                                   roster.Student("alan.t", "Alan", "Turing", None)]
    plain = _write(tmp_path / "plain.csv", "id,first_name,last_name,email\nbob,Bob,Smith,bob@example.org\n")
    assert roster.read(plain)[0].last_name == "Smith"


@pytest.mark.parametrize("text, message", [
    ("name,email\nAda,ada@example.org\n", "no student id column"),
    ("id,email\n../etc,x@y.z\n", "not a valid student id"),
    ("id,email\nada,a@b.c\nada,d@e.f\n", "again (first on line 2)"),
    ("id,email\nada,not-an-address\n", "not an e-mail address"),
    ("id,email\n", "a header but no students"),
    ("id,first_name,last_name\nada,<script>alert(1)</script>,L\n", "has characters other than letters"),
    ("id,email\nada,\"<b>@x.org\"\n", "not an e-mail address"),
])
def test_a_bad_roster_says_which_row_and_imports_nothing(tmp_path, text, message):
    path = _write(tmp_path / "roster.csv", text)
    with pytest.raises(roster.RosterError, match=message.replace("(", r"\(").replace(")", r"\)")):
        roster.import_roster(tmp_path, path)
    if (tmp_path / "gradebook.db").exists():
        with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
            assert gradebook.students == []


@pytest.mark.slow
def test_the_command_adds_then_updates_and_grades_csv_shows_names(course, tmp_path):
    import shutil
    root = course
    copy = tmp_path / "course"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("feedback", "autograded", "submitted"))
    path = _write(tmp_path / "roster.csv", "id,first_name,last_name,email\nalice,Alice,Liddell,alice@example.org\n"
                                           "zoe,Zoe,Absent,zoe@example.org\n")

    def grader(*args):
        done = subprocess.run([sys.executable, "-m", "grader", "--root", str(copy), *args], capture_output=True,
                              text=True)
        assert done.returncode == 0, done.stderr[-3000:]
        return done.stdout

    assert "1 student(s) added, 1 updated" in grader("students", str(path))
    assert "0 student(s) added, 2 updated" in grader("students", str(path))
    grader("grades")
    with open(copy / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert (rows["alice"]["first_name"], rows["alice"]["last_name"], rows["alice"]["submitted"]) == \
        ("Alice", "Liddell", "True")
    assert rows["zoe"]["submitted"] == "False" and float(rows["zoe"]["total"]) == 0, "a roster student without work"
    assert rows["blank"]["first_name"] == "" and rows["blank"]["submitted"] == "True"


def test_the_commands_find_the_course_from_the_current_folder(tmp_path, monkeypatch):
    from grader.course import course_root
    from translab.paths import REPO_ROOT
    (tmp_path / "course" / "notebooks").mkdir(parents=True)
    (tmp_path / "course" / "nbgrader_config.py").write_text("c = get_config()\n")
    assert course_root(tmp_path / "course" / "notebooks") == (tmp_path / "course").resolve()
    assert course_root(tmp_path) == REPO_ROOT  # no course above: this repository
