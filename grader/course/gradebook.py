"""Every read and write of the gradebook that nbgrader's own commands do not do: the merge of a student's private
copy into the course's (one transaction), the flags and zeros of notebooks nbgrader could not run, and what still
awaits a manual grade.

SQLite allows one writer at a time and nbgrader does not retry a locked database, so the batch's nbgrader
processes never share gradebook.db: each student is graded against a private copy (``sqlite_copy``), and the
batch copies that student's rows back (``merge_student``).  Students never share rows, so the merged gradebook
equals what sequential grading writes.
"""
from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from translab.contract import ASSIGNMENT

from grader.course import GradingError, with_venv_bin


def open_gradebook(db: Path):
    """nbgrader's API on the gradebook ``db`` (a new one runs nbgrader's migrations: ``alembic`` from this venv,
    ``with_venv_bin``)."""
    from nbgrader.api import Gradebook
    os.environ["PATH"] = with_venv_bin(os.environ.get("PATH", ""))
    return Gradebook(f"sqlite:///{db}")


def autograded_gradebook(root: Path):
    """The course's gradebook, which ``make autograde`` makes: a command that reads grades refuses without one."""
    db = root / "gradebook.db"
    if not db.exists():
        raise GradingError("no gradebook.db yet: run `make autograde` first")
    return open_gradebook(db)


def cell_scores(root: Path, student: str) -> dict:
    """{(notebook, grade_id): (score, max_score, is_code_test)} of one student's graded submission."""
    scores = {}
    with open_gradebook(root / "gradebook.db") as gradebook:
        submission = gradebook.find_submission(ASSIGNMENT, student)
        for notebook in submission.notebooks:
            for grade in notebook.grades:
                scores[(notebook.name, grade.name)] = (grade.score, grade.max_score, grade.cell_type == "code")
    return scores


def sqlite_copy(source: Path, dest: Path) -> None:
    """A consistent snapshot (the backup API), not a file copy that could catch a half-written page."""
    with sqlite3.connect(source) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)
    src.close()
    dst.close()


_SUBMISSION = ("SELECT sa.id FROM {db}submitted_assignment sa JOIN {db}assignment a ON sa.assignment_id = a.id "
               "WHERE sa.student_id = :student AND a.name = :assignment")


_NOTEBOOKS = "SELECT id FROM {db}submitted_notebook WHERE assignment_id IN (" + _SUBMISSION + ")"


def merge_student(main_db: Path, student_db: Path, student: str) -> None:
    """Replace the student's rows in ``main_db`` with those of ``student_db``, atomically.

    Both databases come from the same gradebook, so assignment, notebook and cell ids agree and the rows can
    be copied column for column.  Manual grades are carried over as nbgrader left them in the copy.
    """
    keys = {"student": student, "assignment": ASSIGNMENT}
    main, src = _NOTEBOOKS.format(db="main."), _NOTEBOOKS.format(db="src.")
    connection = sqlite3.connect(main_db, timeout=120, isolation_level=None)
    try:
        connection.execute("ATTACH DATABASE ? AS src", (str(student_db),))
        connection.execute("BEGIN IMMEDIATE")
        for table in ("comment", "grade"):
            connection.execute(f"DELETE FROM main.{table} WHERE notebook_id IN ({main})", keys)
        connection.execute(f"DELETE FROM main.submitted_notebook WHERE id IN ({main})", keys)
        connection.execute(f"DELETE FROM main.submitted_assignment WHERE id IN ({_SUBMISSION.format(db='main.')})", keys)
        connection.execute("INSERT OR REPLACE INTO main.student SELECT * FROM src.student WHERE id = :student", keys)
        connection.execute("INSERT INTO main.submitted_assignment SELECT * FROM src.submitted_assignment "
                           f"WHERE id IN ({_SUBMISSION.format(db='src.')})", keys)
        connection.execute(f"INSERT INTO main.submitted_notebook SELECT * FROM src.submitted_notebook WHERE id IN ({src})",
                           keys)
        for table in ("grade", "comment"):
            connection.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} WHERE notebook_id IN ({src})", keys)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    finally:
        connection.close()


def _query(db: Path, sql: str, params) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def gradebook_notebooks(db: Path) -> list[str]:
    rows = _query(db, "SELECT n.name FROM notebook n JOIN assignment a ON n.assignment_id = a.id WHERE a.name = ?",
                  (ASSIGNMENT,))
    return sorted(name for (name,) in rows)


def gradebook_has_assignment(root: Path) -> bool:
    """Read with sqlite3 first: importing nbgrader's API (SQLAlchemy) here costs the batch 0.7 s before the
    first kernel can start; a gradebook sqlite3 cannot read goes through nbgrader, which migrates or explains."""
    db = root / "gradebook.db"
    if not db.exists():
        return False
    try:
        return bool(gradebook_notebooks(db))
    except sqlite3.Error:
        pass
    from nbgrader.api import MissingEntry
    with open_gradebook(db) as gradebook:
        try:
            return len(gradebook.find_assignment(ASSIGNMENT).notebooks) > 0
        except MissingEntry:
            return False


def zero_and_flag(db: Path, student: str, notebooks: list[str], reason: str) -> None:
    """Notebooks nbgrader could not run: their test cells score 0 (not whatever an earlier run left) and
    the notebook is flagged, so the formgrader shows the instructor where to look."""
    keys = {"student": student, "assignment": ASSIGNMENT}
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        for name in notebooks:
            ids = (f"SELECT sn.id FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
                   f"WHERE n.name = :notebook AND sn.assignment_id IN ({_SUBMISSION.format(db='')})")
            args = {**keys, "notebook": name}
            connection.execute("UPDATE grade SET auto_score = 0, needs_manual_grade = 1 WHERE notebook_id IN "
                               f"({ids}) AND cell_id IN (SELECT id FROM grade_cells WHERE cell_type = 'code')", args)
            connection.execute(f"UPDATE comment SET auto_comment = :reason WHERE notebook_id IN ({ids})",
                               {**args, "reason": reason})
            connection.execute(f"UPDATE submitted_notebook SET flagged = 1 WHERE id IN ({ids})", args)
        connection.execute("COMMIT")
    finally:
        connection.close()


def add_submission(db: Path, student: str) -> None:
    """An empty submission (every notebook, every grade unset), as nbgrader would have created it."""
    import warnings
    with open_gradebook(db) as gradebook, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's "not in session" noise, harmless (nbgrader's own too)
        gradebook.update_or_create_student(student)
        gradebook.add_submission(ASSIGNMENT, student)


def has_submission(db: Path, student: str) -> bool:
    return bool(_query(db, _SUBMISSION.format(db=""), {"student": student, "assignment": ASSIGNMENT}))


def flagged_notebooks(db: Path, student: str) -> list[str]:
    rows = _query(db, "SELECT n.name FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
                      f"WHERE sn.flagged = 1 AND sn.assignment_id IN ({_SUBMISSION.format(db='')})",
                  {"student": student, "assignment": ASSIGNMENT})
    return sorted(name for (name,) in rows)


def ungraded(root: Path) -> dict[str, list[str]]:
    """{student: ["<notebook>/<grade_id>", ...]} for every student who submitted: the answers still waiting for
    a manual grade (an empty list once all are graded)."""
    pending: dict[str, list[str]] = {}
    with autograded_gradebook(root) as gradebook:
        for submission in gradebook.find_assignment(ASSIGNMENT).submissions:
            pending[submission.student.id] = sorted(f"{notebook.name}/{grade.name}" for notebook in submission.notebooks
                                                    for grade in notebook.grades if grade.needs_manual_grade)
    return pending
