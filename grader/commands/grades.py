"""``make grades``: grades.csv, one row per student of the roster or with a submission; ``FORMAT=canvas`` or
``FORMAT=moodle``: the file that LMS's grade import takes (``grader.course.lms_grades``)."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

from translab.contract import ASSIGNMENT

from grader.course import lms_grades
from ..course import GradingError
from grader.course.gradebook import autograded_gradebook


OUTPUT = {"csv": "grades.csv", "canvas": "grades_canvas.csv", "moodle": "grades_moodle.csv"}  # by format
FORMATS = tuple(OUTPUT)
HELP = "write grades.csv, one row per student, or an LMS's import file"


def arguments(parser) -> None:
    parser.add_argument("--out", type=Path)
    parser.add_argument("--format", default="csv", choices=FORMATS,
                        help="canvas: Canvas's gradebook import; moodle: Moodle's grading worksheet, filled in")
    parser.add_argument("--canvas-column", help='the assignment as Canvas heads its column: "Title (4242)"')
    parser.add_argument("--moodle-worksheet", type=Path, help="the grading worksheet downloaded from Moodle")
    parser.add_argument("--grade-column", help="the worksheet's grade column, where its language is not known")
    parser.add_argument("--feedback-column", help="the worksheet's feedback comments column, likewise")


def run(root: Path, args) -> int:
    grades(root, args.out, args.format, args.canvas_column, args.moodle_worksheet, args.grade_column,
           args.feedback_column)
    return 0


def grades(root: Path, out: Path | None = None, form: str = "csv", canvas_column: str | None = None,
           moodle_worksheet: Path | None = None, grade_column: str | None = None,
           feedback_column: str | None = None) -> Path:
    """One row per student: id, name and e-mail (from `make students`), whether they submitted, the score of each
    notebook, the total, the maximum, manual grading left, then one column per graded cell,
    ``<notebook>/<grade_id>`` (empty while a written answer awaits its manual grade).  A student of the roster
    who submitted nothing gets a row of zeros."""
    import nbformat
    from nbgrader.api import MissingEntry

    def task_order(notebook: str, names: list[str]) -> list[str]:
        """The graded cells of a notebook in the source notebook's order (by name for cells it does not have)."""
        order: list[str] = []
        source = root / "solutions" / ASSIGNMENT / f"{notebook}.ipynb"
        try:
            for cell in nbformat.read(source, as_version=4).cells if source.exists() else ():
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                if grade_id in names and grade_id not in order:
                    order.append(grade_id)
        except Exception:  # noqa: BLE001 - an unreadable source only costs the order
            order = []
        return order + sorted(set(names) - set(order))

    if form not in FORMATS:
        raise GradingError(f"FORMAT={form}: choose one of {', '.join(FORMATS)}")
    out = Path(out) if out is not None else root / OUTPUT[form]
    lms_ids = {}
    with autograded_gradebook(root) as gradebook:
        assignment = gradebook.find_assignment(ASSIGNMENT)
        notebooks = sorted(nb.name for nb in assignment.notebooks)
        tasks = [(nb.name, cell) for nb in sorted(assignment.notebooks, key=lambda nb: nb.name)
                 for cell in task_order(nb.name, [c.name for c in (*nb.grade_cells, *nb.task_cells)])]
        rows = []
        for person in sorted(gradebook.students, key=lambda s: s.id):
            student = person.id
            lms_ids[student] = person.lms_user_id or ""
            row = {"student_id": student, "first_name": person.first_name or "", "last_name": person.last_name or "",
                   "email": person.email or ""}
            try:
                submission = gradebook.find_submission(ASSIGNMENT, student)
            except MissingEntry:  # on the roster (`make students`), nothing submitted: a row of zeros says so
                rows.append({**row, "submitted": False, **{name: 0.0 for name in notebooks}, "total": 0.0,
                             "max_score": assignment.max_score, "auto_score": 0.0, "written_score": 0.0,
                             "needs_manual_grade": False})
                continue
            row["submitted"] = True
            cells = {}
            for name in notebooks:
                try:
                    notebook = gradebook.find_submission_notebook(name, ASSIGNMENT, student)
                except MissingEntry:
                    row[name] = 0.0
                    continue
                row[name] = notebook.score
                # nbgrader's score of a written answer awaiting its grade is 0.0: the column says it is not graded yet
                cells.update({(name, grade.name): None if grade.needs_manual_grade else grade.score
                              for grade in notebook.grades})
            row.update(total=submission.score, max_score=submission.max_score,
                       auto_score=submission.code_score, written_score=submission.written_score,
                       needs_manual_grade=bool(submission.needs_manual_grade))
            for name, cell in tasks:
                score = cells.get((name, cell), 0.0)
                row[f"{name}/{cell}"] = "" if score is None else score
            rows.append(row)
    if form != "csv":
        return _to_lms(rows, lms_ids, form, out, canvas_column, moodle_worksheet, grade_column, feedback_column)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["student_id", "first_name", "last_name", "email", "submitted",
                                                    *notebooks, "total", "max_score", "auto_score",
                                                    "written_score", "needs_manual_grade",
                                                    *(f"{name}/{cell}" for name, cell in tasks)])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out} ({len(rows)} students, {len(tasks)} tasks)")
    return out


def _to_lms(rows: list[dict], lms_ids: dict[str, str], form: str, out: Path, canvas_column: str | None,
            moodle_worksheet: Path | None, grade_column: str | None, feedback_column: str | None) -> Path:
    class_grades = [lms_grades.StudentGrade(row["student_id"], row["first_name"], row["last_name"], lms_ids[row["student_id"]],
                                     row["submitted"], row["total"], row["max_score"], row["auto_score"],
                                     row["written_score"], row["needs_manual_grade"]) for row in rows]
    waiting = sorted(g.id for g in class_grades if g.needs_manual_grade)
    if waiting:
        print(f"warning: {len(waiting)} student(s) have written answers not graded yet, counted as 0: "
              f"{', '.join(waiting[:20])}", file=sys.stderr)
    if form == "canvas":
        written, left_out = lms_grades.canvas(class_grades, canvas_column, out)
        print(f"wrote {written} for Canvas (Grades > Import): {len(class_grades) - len(left_out)} students")
        if left_out:
            print(f"warning: not in the file, no Canvas id (import Canvas's gradebook export with `make students "
                  f"ROSTER=...`): {', '.join(left_out[:20])}", file=sys.stderr)
    else:
        written, unlisted = lms_grades.moodle(class_grades, moodle_worksheet, out, grade_column, feedback_column)
        print(f"wrote {written} for Moodle (Upload grading worksheet): the worksheet's columns, grades and comments "
              "filled in")
        if unlisted:
            print(f"warning: graded here but not in the worksheet (no participant with that number): "
                  f"{', '.join(unlisted[:20])}", file=sys.stderr)
    return written
