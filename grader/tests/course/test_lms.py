"""Grades into the LMS (grader.course.lms_grades): what `make grades FORMAT=canvas|moodle` writes, read back with each importer's
documented rules.

Canvas (Grades > Import): the header starts ``Student,ID,SIS User ID,SIS Login ID,Section``, each assignment column is
``<title> (<assignment id>)``, a first cell ``Points Possible`` marks the maxima row, and every other row is matched to
a student by ``ID``.  Moodle (Upload grading worksheet): the file is the worksheet Moodle wrote, rows matched by
``Identifier`` = "Participant <n>", ``Grade`` and ``Feedback comments`` read, every other column as it was.
"""
from __future__ import annotations

import csv
import io
import subprocess
import sys
from pathlib import Path

import pytest

from grader.course import roster
from grader.course import GradingError
from grader.commands.grades import grades
from grader.course.gradebook import open_gradebook
from translab.contract import ASSIGNMENT

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

CANVAS_EXPORT = """Student,ID,SIS User ID,SIS Login ID,Section,Transfer learning lab (4242),Quiz 1 (4243)
    Points Possible,,,,,100.00,10.00
"Doe, Jane",4711,S001,jdoe,Section A,,
"Smith, John",4712,S002,jsmith,Section A,,
"Müller, Zoë",4713,,zmuller,Section B,,
"""
MOODLE_EN = ('\ufeff"Identifier","Full name","Email address","Status","Grade","Maximum Grade","Grade can be changed",'
             '"Last modified (submission)","Last modified (grade)","Feedback comments"\n'
             '"Participant 12345","Jane Doe",jane@example.org,"Submitted for grading",,100.00,Yes,'
             '"Monday, 23 November 2026, 9:00 AM",-,\n'
             '"Participant 12346","John Smith",john@example.org,"Submitted for grading",,100.00,Yes,'
             '"Monday, 23 November 2026, 9:05 AM",-,\n'
             '"Participant 99999","Late Comer",late@example.org,"No submission",,100.00,Yes,-,-,\n')
MOODLE_DE = ('"Identifikator";"Vollständiger Name";"Status";"Bewertung";"Bestmögliche Bewertung";'
             '"Feedback als Kommentar"\n'
             '"Teilnehmer/in 12345";"Jane Doe";"Zur Bewertung abgegeben";;"100,00";\n')


def _course(root: Path, students: dict[str, tuple[float, float | None]]) -> Path:
    """A gradebook of one notebook with a code test (10 points) and a written answer (5), and ``students``
    {id: (auto score, manual score or None: awaiting its grade)}."""
    with open_gradebook(root / "gradebook.db") as book:
        book.add_assignment(ASSIGNMENT)
        book.add_notebook("01_mask", ASSIGNMENT)
        book.add_grade_cell("test_mask", "01_mask", ASSIGNMENT, max_score=10, cell_type="code")
        book.add_grade_cell("written_mask", "01_mask", ASSIGNMENT, max_score=5, cell_type="markdown")
        for student, (auto, manual) in students.items():
            book.update_or_create_student(student)
            book.add_submission(ASSIGNMENT, student)
            for grade in book.find_submission_notebook("01_mask", ASSIGNMENT, student).grades:
                if grade.name == "test_mask":
                    grade.auto_score, grade.needs_manual_grade = auto, False
                elif manual is not None:
                    grade.manual_score, grade.needs_manual_grade = manual, False
                else:
                    grade.needs_manual_grade = True
        book.db.commit()
    return root


def _rows(path: Path, delimiter: str = ",") -> list[list[str]]:
    return list(csv.reader(io.StringIO(path.read_bytes().decode("utf-8-sig")), delimiter=delimiter))


def test_a_canvas_roster_keeps_each_student_s_canvas_id_under_the_id_collect_gives(tmp_path):
    export = tmp_path / "canvas.csv"
    export.write_text(CANVAS_EXPORT, encoding="utf-8")
    students = {s.id: s for s in roster.read(export)}
    assert sorted(students) == ["doejane", "mullerzoe", "smithjohn"]  # Canvas's zip: doejane_4711_..._01_x.ipynb
    assert students["doejane"].lms_user_id == "4711" and students["doejane"].last_name == "Doe"
    assert students["mullerzoe"].first_name == "Zoë"
    bad = tmp_path / "bad.csv"
    bad.write_text(CANVAS_EXPORT.replace("4712", "x4712"), encoding="utf-8")
    with pytest.raises(roster.RosterError, match="line 4: Canvas id 'x4712' is not a number"):
        roster.read(bad)


def test_canvas_imports_one_row_per_student_matched_by_canvas_id(tmp_path):
    root = _course(tmp_path, {"doejane": (10, 4), "smithjohn": (7, None), "walkin": (3, 5)})
    export = tmp_path / "canvas.csv"
    export.write_text(CANVAS_EXPORT, encoding="utf-8")
    roster.import_roster(root, export)
    out = grades(root, form="canvas", canvas_column="Transfer learning lab (4242)")
    rows = _rows(out)
    assert rows[0] == ["Student", "ID", "SIS User ID", "SIS Login ID", "Section", "Transfer learning lab (4242)"]
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == 15
    by_id = {row[1]: row for row in rows[2:]}
    assert all(row[1].isdigit() for row in rows[2:]), "Canvas matches each row by its numeric ID"
    assert float(by_id["4711"][5]) == 14 and by_id["4711"][0] == "Doe, Jane"
    assert float(by_id["4712"][5]) == 7, "an answer awaiting its grade counts 0 (and the command says so)"
    assert float(by_id["4713"][5]) == 0, "on the roster, nothing submitted: 0"
    assert len(rows) == 2 + 3, "walkin has no Canvas id: left out, not guessed"


def test_canvas_needs_the_assignment_column_as_canvas_heads_it(tmp_path):
    root = _course(tmp_path, {"doejane": (10, 4)})
    for column in (None, "Transfer learning lab", "Transfer learning lab (x)"):
        with pytest.raises(GradingError, match="CANVAS_COLUMN"):
            grades(root, form="canvas", canvas_column=column)
    with pytest.raises(GradingError, match="no student has a Canvas id"):
        grades(root, form="canvas", canvas_column="Lab (1)")


def test_moodle_s_worksheet_comes_back_with_its_columns_and_grades_filled_in(tmp_path):
    root = _course(tmp_path, {"12345": (10, 4), "12346": (7, None), "55555": (1, 1)})
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_bytes(MOODLE_EN.encode("utf-8"))
    out = grades(root, form="moodle", moodle_worksheet=worksheet)
    assert out.read_bytes().startswith(b"\xef\xbb\xbf"), "Moodle's own encoding (UTF-8 with BOM) is kept"
    before, after = _rows(worksheet), _rows(out)
    assert after[0] == before[0] and [row[0] for row in after] == [row[0] for row in before]
    by_participant = {row[0]: dict(zip(after[0], row)) for row in after[1:]}
    jane = by_participant["Participant 12345"]
    assert float(jane["Grade"]) == 14 and "14 of 15" in jane["Feedback comments"]
    assert float(by_participant["Participant 12346"]["Grade"]) == 7
    assert "still to grade" in by_participant["Participant 12346"]["Feedback comments"]
    absent = by_participant["Participant 99999"]
    assert absent["Grade"] == "" and absent["Feedback comments"] == ""
    for row_before, row_after in zip(before[1:], after[1:]):  # nothing but Grade and Feedback comments changes
        changed = {name for name, old, new in zip(before[0], row_before, row_after) if old != new}
        assert changed <= {"Grade", "Feedback comments"}


def test_moodle_in_another_language_keeps_its_language_and_decimal_comma(tmp_path):
    root = _course(tmp_path, {"12345": (10, 2.5)})
    worksheet = tmp_path / "bewertung.csv"
    worksheet.write_text(MOODLE_DE, encoding="utf-8")
    out = grades(root, form="moodle", moodle_worksheet=worksheet, out=tmp_path / "out.csv")
    rows = _rows(out, delimiter=";")
    assert rows[0] == _rows(worksheet, delimiter=";")[0]
    assert rows[1][3] == "12,5" and rows[1][5].startswith("translab: 12.5 of 15")
    unknown = tmp_path / "unknown.csv"
    unknown.write_text(MOODLE_DE.replace("Bewertung", "Arvosana"), encoding="utf-8")
    with pytest.raises(GradingError, match="MOODLE_GRADE_COLUMN"):
        grades(root, form="moodle", moodle_worksheet=unknown)
    filled = grades(root, form="moodle", moodle_worksheet=unknown, grade_column="Arvosana", out=tmp_path / "fi.csv")
    assert _rows(filled, delimiter=";")[1][3] == "12,5"


def test_make_grades_format_canvas_on_the_command_line(tmp_path):
    root = _course(tmp_path, {"doejane": (10, 4)})
    (root / "canvas.csv").write_text(CANVAS_EXPORT, encoding="utf-8")
    roster.import_roster(root, root / "canvas.csv")
    done = subprocess.run([sys.executable, "-m", "grader", "--root", str(root), "grades", "--format", "canvas",
                           "--canvas-column", "Lab (42)"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert _rows(root / "grades_canvas.csv")[0][-1] == "Lab (42)"
    refused = subprocess.run([sys.executable, "-m", "grader", "--root", str(root), "grades", "--format", "moodle"],
                             capture_output=True, text=True)
    assert refused.returncode == 1 and "Download grading worksheet" in refused.stderr
