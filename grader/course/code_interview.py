"""The code interview as a grade (issue 54): one manually graded task cell, ``code_interview``, whose points the
course config sets, and ``make interviews RECORD=file.csv``, which writes the interviews' outcomes into it through
nbgrader's Gradebook API, so that `make grades`, its Canvas and Moodle files and the feedback carry them.

The course opts in before the students submit, in ``nbgrader_config.py``::

    c.CodeInterview.points = 4                 # 0 (the default): no interview cell, the lab's points as they are
    c.CodeInterview.notebook = ""              # the notebook that carries it: the assignment's last, by default
    c.CodeInterview.not_interviewed = "full"   # a student nobody interviewed: "full" points, or "grade" by hand

``make release`` then adds the cell (``AddCodeInterview``) at the end of that notebook.  nbgrader refuses to add a
graded cell to a notebook that has submissions, so the points are decided before the first one.

The sample is random, so a student the course did not pick is not the one to pay for it: by default every student
with no interview recorded gets the points in full when RECORD runs (the comment says why), and a later RECORD that
lists them replaces that.  ``not_interviewed = "grade"`` leaves them to the formgrader instead.
"""
from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from traitlets import Enum, Float, Unicode
from traitlets.config import Configurable
from traitlets.config.loader import PyFileConfigLoader

from translab.contract import ASSIGNMENT

from grader.course import GradingError
from grader.course.gradebook import autograded_gradebook
from grader.course.spreadsheet import undefused

GRADE_ID = "code_interview"
NOT_PICKED = "Not picked for a code interview: full points, by the course's policy."
INTERVIEWED = "Code interview."  # the comment of an interview recorded without one
COMMENT_PREFIX = "Code interview: "
STUDENT_COLUMNS = ("student", "student_id")  # make interviews writes "student"; nbgrader's own files "student_id"
MAX_ROWS = 10_000


class CodeInterview(Configurable):
    """The course's code interview (``c.CodeInterview`` in nbgrader_config.py)."""

    points = Float(0.0, min=0.0, help="The interview cell's points; 0: no interview cell").tag(config=True)
    notebook = Unicode("", help="The notebook that carries the cell (default: the assignment's last)").tag(config=True)
    not_interviewed = Enum(["full", "grade"], "full",
                           help="A student with no interview recorded: 'full' points when RECORD runs, or "
                                "'grade' in the formgrader").tag(config=True)


def cell_text(points: float, not_interviewed: str) -> str:
    """What the students read in the cell the release adds."""
    others = ("A student who is not asked gets these points in full." if not_interviewed == "full" else
              "A student who is not asked is graded on this cell by the instructor.")
    return (f"## Code interview ({points:g} points)\n\n"
            "Your instructor may ask you about your own code in this lab, for about five minutes: why a line of yours "
            "is written the way it is, what would change if it changed, what your own run showed. Some students are "
            f"picked at random, some because of what their submissions show. {others} This cell is where that "
            "conversation is graded: there is nothing to write here.")


def settings(root: Path) -> CodeInterview:
    """The course's settings, read from its nbgrader_config.py (the instructor's own file, loaded as nbgrader does)."""
    path = root / "nbgrader_config.py"
    if not path.exists():
        return CodeInterview()
    return CodeInterview(config=PyFileConfigLoader(path.name, path=str(root)).load_config())


@dataclass(frozen=True)
class Outcome:
    student: str
    points: float
    comment: str


def read_outcomes(path: Path, known: set[str], max_points: float) -> tuple[list[Outcome], set[str]]:
    """The filled-in interviews of ``path`` (``reports/interviews.csv``, or any CSV with a student and a points
    column), and the students listed with blank points: picked, not interviewed yet.  Every problem is found before
    anything is written, and all of them are named."""
    try:
        with open(path, newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.DictReader(handle))[:MAX_ROWS + 1]
    except FileNotFoundError:
        raise GradingError(f"RECORD={path}: no such file; fill in the points column of reports/interviews.csv "
                           "(`make interviews` writes it) and give its path") from None
    except (OSError, UnicodeDecodeError, csv.Error) as error:
        raise GradingError(f"RECORD={path} cannot be read as a UTF-8 CSV file: {error}; save it as CSV (UTF-8) and "
                           "record again; nothing was recorded") from None
    header = list(rows[0]) if rows else []
    column = next((name for name in STUDENT_COLUMNS if name in header), None)
    if column is None or "points" not in header:
        raise GradingError(f"RECORD={path} needs a 'student' and a 'points' column (it has {header or 'none'}): fill in "
                           "reports/interviews.csv, which `make interviews` writes; nothing was recorded")
    if len(rows) > MAX_ROWS:
        raise GradingError(f"RECORD={path} has more than {MAX_ROWS} rows; nothing was recorded")
    outcomes, problems, seen, pending = [], [], {}, set()
    for line, row in enumerate(rows, start=2):
        student, text = (row.get(column) or "").strip(), (row.get("points") or "").strip()
        student = undefused(student)  # make interviews wrote it defused
        if not text:
            pending.add(student)
            continue
        try:
            points = float(text.replace(",", "."))
        except ValueError:
            points = math.nan
        if student not in known:
            problems.append(f"line {line}: {student!r} has no graded submission")
        elif not 0 <= points <= max_points:
            problems.append(f"line {line}: {student}'s points {text!r} are not a number from 0 to {max_points:g}")
        elif student in seen and seen[student] != points:
            problems.append(f"line {line}: {student} is listed twice, with {seen[student]:g} and {points:g} points")
        else:
            seen[student] = points
            outcomes.append(Outcome(student, points, (row.get("comment") or "").strip()))
    if problems:
        raise GradingError(f"RECORD={path}: " + "; ".join(problems[:20]) + "; fix the file and record again; nothing "
                           "was recorded")
    return outcomes, pending - set(seen)


def record(root: Path, path: Path) -> dict[str, list[str]]:
    """Write the interviews of ``path`` into the gradebook's ``code_interview`` cell; by the course's policy, give
    the students it does not list and who have no interview recorded full points.  {"recorded": [...], "full": [...],
    "left": [...]}: "left" are still to grade (listed without points, or by the policy "grade")."""
    policy = settings(root).not_interviewed
    with autograded_gradebook(root) as gradebook:
        notebook = next((nb for nb in gradebook.find_assignment(ASSIGNMENT).notebooks
                         if GRADE_ID in {cell.name for cell in nb.task_cells}), None)
        if notebook is None:
            raise GradingError(
                "the gradebook has no code interview cell: set c.CodeInterview.points (more than 0) in "
                "nbgrader_config.py and run `make release` before the students submit (nbgrader refuses to add a "
                "graded cell to a notebook that has submissions); nothing was recorded")
        max_points = gradebook.find_task_cell(GRADE_ID, notebook.name, ASSIGNMENT).max_score
        graded = {submitted.student.id for submitted in notebook.submissions}
        outcomes, pending = read_outcomes(path, graded, max_points)
        done = {"recorded": [], "full": [], "left": []}
        for outcome in outcomes:
            _grade(gradebook, notebook.name, outcome.student, outcome.points,
                   COMMENT_PREFIX + outcome.comment if outcome.comment else INTERVIEWED)
            done["recorded"].append(outcome.student)
        listed = {outcome.student for outcome in outcomes} | pending  # pending: picked, not interviewed yet
        for student in sorted(graded - listed):
            grade = gradebook.find_grade(GRADE_ID, notebook.name, ASSIGNMENT, student)
            comment = gradebook.find_comment(GRADE_ID, notebook.name, ASSIGNMENT, student)
            never_graded = grade.manual_score is None or comment.manual_comment == NOT_PICKED
            if policy == "full" and never_graded:
                _grade(gradebook, notebook.name, student, max_points, NOT_PICKED)
                done["full"].append(student)
            elif grade.manual_score is None:
                done["left"].append(student)
        for student in sorted(pending & graded):  # picked since an earlier RECORD gave full points: to grade
            comment = gradebook.find_comment(GRADE_ID, notebook.name, ASSIGNMENT, student)
            if comment.manual_comment == NOT_PICKED:
                grade = gradebook.find_grade(GRADE_ID, notebook.name, ASSIGNMENT, student)
                grade.manual_score, grade.needs_manual_grade, comment.manual_comment = None, True, None
            done["left"].append(student)
        done["left"] = sorted(set(done["left"]))
        gradebook.db.commit()
    return done


def _grade(gradebook, notebook: str, student: str, points: float, comment: str) -> None:
    grade = gradebook.find_grade(GRADE_ID, notebook, ASSIGNMENT, student)
    grade.manual_score, grade.needs_manual_grade = points, False
    gradebook.find_comment(GRADE_ID, notebook, ASSIGNMENT, student).manual_comment = comment
