"""The code interview as a grade (grader.course.code_interview, issue 54): the release adds its task cell where the
course gives it points, and `make interviews RECORD=file.csv` writes the interviews' points into nbgrader's gradebook,
from which `make grades` and the Canvas and Moodle files take them; a bad file records nothing and says why."""
from __future__ import annotations

import csv
import io
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat
import pytest

from conftest import run_grader
from grader.commands.grades import grades
from grader.course import GradingError, roster
from grader.course.code_interview import GRADE_ID, INTERVIEWED, NOT_PICKED, read_outcomes, record
from grader.course.gradebook import open_gradebook
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # nbgrader's gradebook (and a release): make test runs it, make test-fast does not
NB = "01_mask"
NB1 = "01_mask_and_positional_encoding"
CONFIG = "c.CodeInterview.points = {points}\nc.CodeInterview.not_interviewed = {policy!r}\n"
CANVAS_EXPORT = """Student,ID,SIS User ID,SIS Login ID,Section,Transfer learning lab (4242)
"Doe, Jane",4711,S001,jdoe,Section A,
"Smith, John",4712,S002,jsmith,Section A,
"Roe, Ann",4713,S003,aroe,Section A,
"""


_TEMPLATES: dict[float, Path] = {}  # interview points -> a gradebook built once (nbgrader's migrations: seconds)


def _course(root: Path, policy: str = "full", interview: float = 4) -> Path:
    """A course whose config sets the interview's ``policy`` and ``points``, and its gradebook (``_gradebook``)."""
    (root / "nbgrader_config.py").write_text(CONFIG.format(points=interview, policy=policy), encoding="utf-8")
    if interview not in _TEMPLATES:
        folder = Path(tempfile.mkdtemp(prefix="interview-gradebook-"))
        _gradebook(folder / "gradebook.db", interview)
        _TEMPLATES[interview] = folder / "gradebook.db"
    shutil.copy(_TEMPLATES[interview], root / "gradebook.db")
    return root


def _gradebook(db: Path, interview: float) -> None:
    """One notebook: a code test (10 points), and the interview's task cell as the release records it; three
    students with 10, 6 and 0 on the test (the interview awaits its grade, as autograde leaves a task cell)."""
    with open_gradebook(db) as book:
        book.add_assignment(ASSIGNMENT)
        book.add_notebook(NB, ASSIGNMENT)
        book.add_grade_cell("test_mask", NB, ASSIGNMENT, max_score=10, cell_type="code")
        if interview:
            book.add_task_cell(GRADE_ID, NB, ASSIGNMENT, max_score=interview, cell_type="markdown")
        for student, auto in (("doejane", 10), ("smithjohn", 6), ("roeann", 0)):
            book.update_or_create_student(student)
            book.add_submission(ASSIGNMENT, student)
            for grade in book.find_submission_notebook(NB, ASSIGNMENT, student).grades:
                if grade.name == "test_mask":
                    grade.auto_score, grade.needs_manual_grade = auto, False
                else:
                    grade.needs_manual_grade = True
        book.db.commit()


def _interviews(root: Path, rows: list[tuple[str, str, str]], name: str = "interviews.csv") -> Path:
    """The table `make interviews` writes, filled in: student, page, reasons, points, comment."""
    path = root / name
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "page", "reasons", "points", "comment"])
        for student, points, comment in rows:
            writer.writerow([student, f"interviews/{student}.html", "picked at random", points, comment])
    return path


def _interview_grade(root: Path, student: str, notebook: str = NB) -> tuple[float | None, str | None, bool]:
    with open_gradebook(root / "gradebook.db") as book:
        grade = book.find_grade(GRADE_ID, notebook, ASSIGNMENT, student)
        comment = book.find_comment(GRADE_ID, notebook, ASSIGNMENT, student)
        return grade.manual_score, comment.manual_comment, grade.needs_manual_grade


def test_record_puts_the_points_into_the_gradebook_and_grades_csv(tmp_path):
    root = _course(tmp_path)
    done = record(root, _interviews(root, [("doejane", "3", "explained the mask's diagonal"),
                                           ("smithjohn", "", "")]))
    assert done == {"recorded": ["doejane"], "full": ["roeann"], "left": ["smithjohn"]}
    assert _interview_grade(root, "doejane") == (3.0, "Code interview: explained the mask's diagonal", False)
    assert _interview_grade(root, "roeann") == (4.0, NOT_PICKED, False)  # not picked: the course's policy
    assert _interview_grade(root, "smithjohn") == (None, None, True)  # picked, not interviewed yet
    rows = {row["student_id"]: row for row in csv.DictReader(open(grades(root), encoding="utf-8"))}
    column = f"{NB}/{GRADE_ID}"
    # smithjohn's interview awaits its grade: blank, not 0
    assert (rows["doejane"][column], rows["roeann"][column], rows["smithjohn"][column]) == ("3.0", "4.0", "")
    assert float(rows["doejane"]["total"]) == 13 and float(rows["doejane"]["max_score"]) == 14
    assert rows["smithjohn"]["needs_manual_grade"] == "True"
    # a later round: smithjohn interviewed; the earlier grades stay
    record(root, _interviews(root, [("smithjohn", "1,5", "")], "round2.csv"))
    assert _interview_grade(root, "smithjohn") == (1.5, INTERVIEWED, False)
    assert _interview_grade(root, "doejane")[0] == 3.0 and _interview_grade(root, "roeann")[0] == 4.0
    # a student given full points as not picked, then picked: back to be graded, then graded
    record(root, _interviews(root, [("roeann", "", "")], "round3.csv"))
    assert _interview_grade(root, "roeann") == (None, None, True)
    record(root, _interviews(root, [("roeann", "0", "could not say what her loop computes")], "round4.csv"))
    assert _interview_grade(root, "roeann")[0] == 0.0


def test_the_lms_files_carry_the_interview(tmp_path):
    root = _course(tmp_path)
    record(root, _interviews(root, [("doejane", "2", ""), ("smithjohn", "0", "")]))
    export = tmp_path / "canvas.csv"
    export.write_text(CANVAS_EXPORT, encoding="utf-8")
    roster.import_roster(root, export)
    rows = list(csv.reader(io.StringIO(grades(root, form="canvas", canvas_column="Transfer learning lab (4242)")
                                       .read_text(encoding="utf-8-sig"))))
    totals = {row[1]: float(row[5]) for row in rows[2:]}
    assert rows[1][0] == "Points Possible" and float(rows[1][5]) == 14
    assert totals == {"4711": 12.0, "4712": 6.0, "4713": 4.0}
    worksheet = tmp_path / "worksheet.csv"
    worksheet.write_text('"Identifier","Full name","Grade","Maximum Grade","Feedback comments"\n'
                         '"Participant 1","Jane Doe",,14,\n', encoding="utf-8")
    with open_gradebook(root / "gradebook.db") as book:  # Moodle's participant number is the student id
        book.update_or_create_student("1")
        book.add_submission(ASSIGNMENT, "1")
        for grade in book.find_submission_notebook(NB, ASSIGNMENT, "1").grades:
            grade.auto_score = 10 if grade.name == "test_mask" else None
        book.db.commit()
    record(root, _interviews(root, [("1", "3.5", "")], "moodle_round.csv"))
    filled = list(csv.DictReader(io.StringIO(grades(root, form="moodle", moodle_worksheet=worksheet)
                                             .read_text(encoding="utf-8-sig"))))
    assert float(filled[0]["Grade"]) == 13.5 and "13.5 of 14" in filled[0]["Feedback comments"]


def test_the_policy_grade_leaves_the_others_to_the_formgrader(tmp_path):
    root = _course(tmp_path, policy="grade")
    done = record(root, _interviews(root, [("doejane", "4", "")]))
    assert done == {"recorded": ["doejane"], "full": [], "left": ["roeann", "smithjohn"]}
    assert _interview_grade(root, "roeann") == (None, None, True)


@pytest.mark.parametrize("rows, says", [
    ([("mallory", "3", "")], "'mallory' has no graded submission"),
    ([("doejane", "5", "")], "'5' are not a number from 0 to 4"),
    ([("doejane", "-1", "")], "not a number from 0 to 4"),
    ([("doejane", "three", "")], "not a number"),
    ([("doejane", "nan", "")], "not a number"),
    ([("doejane", "2", ""), ("doejane", "3", "")], "listed twice"),
])
def test_a_bad_file_records_nothing_and_says_what_is_wrong(tmp_path, rows, says):
    root = _course(tmp_path)
    before = (root / "gradebook.db").read_bytes()
    with pytest.raises(GradingError, match="nothing was recorded") as raised:
        record(root, _interviews(root, [("smithjohn", "2", ""), *rows]))
    assert says in str(raised.value)
    assert (root / "gradebook.db").read_bytes() == before


def test_a_file_that_is_not_the_table_records_nothing(tmp_path):
    root = _course(tmp_path)
    (root / "other.csv").write_text("name,score\ndoejane,3\n", encoding="utf-8")
    with pytest.raises(GradingError, match="needs a 'student' and a 'points' column"):
        record(root, root / "other.csv")
    (root / "latin1.csv").write_bytes("student,points,comment\ndoejane,3,très bien\xe9\n".encode("latin-1"))
    with pytest.raises(GradingError, match="UTF-8"):
        record(root, root / "latin1.csv")
    with pytest.raises(GradingError, match="no such file"):
        record(root, root / "missing.csv")
    assert _interview_grade(root, "doejane") == (None, None, True)


def test_a_defused_student_id_is_read_back(tmp_path):
    outcomes, pending = read_outcomes(_interviews(tmp_path, [("'=cmd", "2", ""), ("'plain", "", "")]),
                                      {"=cmd", "'plain"}, 4)
    assert [o.student for o in outcomes] == ["=cmd"] and pending == {"'plain"}


def test_without_interview_points_record_says_how_to_set_them(tmp_path):
    root = _course(tmp_path, interview=0)
    with pytest.raises(GradingError, match=r"set c.CodeInterview.points .* before the students submit"):
        record(root, _interviews(root, [("doejane", "3", "")]))


def test_the_release_adds_the_cell_autograde_leaves_it_to_grade_and_record_grades_it(tmp_path):
    """Through the real commands: release, autograde (the batch, in its sandbox), RECORD, grades."""
    root = tmp_path / "course"
    root.mkdir()
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    config = (REPO_ROOT / "nbgrader_config.py").read_text(encoding="utf-8")
    assert "c.CodeInterview.points = 0\n" in config, "the lab's own points stay as they are unless a course opts in"
    (root / "nbgrader_config.py").write_text(config.replace(
        "c.CodeInterview.points = 0\n", f"c.CodeInterview.points = 5\nc.CodeInterview.notebook = {NB1!r}\n"),
        encoding="utf-8")
    run_grader(root, "release")
    released = {path.stem: json.loads(path.read_text(encoding="utf-8"))
                for path in sorted((root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))}
    last = released[NB1]["cells"][-1]
    assert {key: last["metadata"]["nbgrader"].get(key) for key in ("grade", "grade_id", "locked", "points", "solution",
                                                                   "task")} == \
        {"grade": False, "grade_id": GRADE_ID, "locked": True, "points": 5.0, "solution": False, "task": True}
    assert last["metadata"]["nbgrader"]["checksum"], "nbgrader's own release steps took it as theirs"
    assert "Code interview (5 points)" in "".join(last["source"]) and "in full" in "".join(last["source"])
    assert [name for name, notebook in released.items() if GRADE_ID in json.dumps(notebook)] == [NB1]
    with open_gradebook(root / "gradebook.db") as book:
        assert book.find_task_cell(GRADE_ID, NB1, ASSIGNMENT).max_score == 5
        assert book.find_assignment(ASSIGNMENT).max_score == 76 + 5

    submission = json.loads((root / "solutions" / ASSIGNMENT / f"{NB1}.ipynb").read_text(encoding="utf-8"))
    submission["cells"].append(last)  # alice's notebook: the released one, answered
    folder = root / "submitted" / "alice" / ASSIGNMENT
    folder.mkdir(parents=True)
    (folder / f"{NB1}.ipynb").write_text(json.dumps(submission), encoding="utf-8")
    run_grader(root, "autograde")
    assert _interview_grade(root, "alice", NB1) == (None, None, True), "autograde leaves the interview to grade"

    table = _interviews(root, [("alice", "3", "explained her mask; unsure why the scores are scaled")])
    assert "recorded 1 interview" in run_grader(root, "interviews", "--record", str(table))
    assert _interview_grade(root, "alice", NB1) == (
        3.0, "Code interview: explained her mask; unsure why the scores are scaled", False)
    run_grader(root, "grades")
    row = next(csv.DictReader(open(root / "grades.csv", encoding="utf-8")))
    assert row[f"{NB1}/{GRADE_ID}"] == "3.0" and float(row[NB1]) == 8 + 3 and float(row["max_score"]) == 81
    done = subprocess.run([sys.executable, "-m", "grader", "--root", str(root), "interviews", "--record",
                           str(root / "missing.csv")], capture_output=True, text=True)
    assert done.returncode == 1 and "no such file" in done.stdout + done.stderr


def test_by_default_the_cell_goes_to_the_last_notebook(tmp_path):
    from traitlets.config import Config

    from grader.nbgrader_plugins.add_code_interview import AddCodeInterview
    config = Config()
    config.CodeInterview.points = 2
    config.CourseDirectory.root = str(REPO_ROOT)
    config.CourseDirectory.source_directory = "solutions"
    add = AddCodeInterview(config=config)
    last = sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))[-1].stem
    for name, added in ((last, True), (NB1, False)):
        notebook, _ = add.preprocess(nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("x")]),
                                     {"nbgrader": {"notebook": name, "assignment": ASSIGNMENT}})
        assert (notebook.cells[-1].metadata.get("nbgrader", {}).get("grade_id") == GRADE_ID) is added, name
    config.CodeInterview.points = 0
    notebook, _ = AddCodeInterview(config=config).preprocess(nbformat.v4.new_notebook(), {"nbgrader": {
        "notebook": last, "assignment": ASSIGNMENT}})
    assert notebook.cells == []
