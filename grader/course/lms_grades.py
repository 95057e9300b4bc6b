"""Grades into the LMS: the files Canvas's and Moodle's own grade importers take as they are (``make grades
FORMAT=canvas|moodle``).

**Canvas** (Grades > Import) reads a CSV whose header is ``Student,ID,SIS User ID,SIS Login ID,Section`` followed by
one column per assignment, named ``<title> (<Canvas assignment id>)``; an optional row whose first cell is
``Points Possible`` gives the maximum; each other row is matched to a student by ``ID`` (Canvas's user id, else the
SIS ids).  The user id comes from the roster: ``make students ROSTER=...`` with Canvas's gradebook export keeps it
(``grader.course.roster``, nbgrader's ``lms_user_id``).  The column is the assignment's, as Canvas's own export heads it:
``CANVAS_COLUMN="Transfer learning lab (4242)"``.  A student with no Canvas id is left out and named.

**Moodle** (the assignment's View all submissions > Grading action: Download grading worksheet, then Upload grading
worksheet) reads back the worksheet it wrote: rows matched by ``Identifier`` ("Participant 12345", in the site's
language), the ``Grade`` and ``Feedback comments`` columns read, the rest compared or ignored.  Here the
instructor's downloaded worksheet is filled in and written anew with its columns, their order, header language,
delimiter, encoding and decimal separator (as its numbers write it) kept; only Grade and Feedback comments change,
and only for the students graded here (participant numbers are the ids ``make collect`` gives a Moodle zip's students).
"""
from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass
from pathlib import Path

from grader.course import GradingError

CANVAS_HEADER = ["Student", "ID", "SIS User ID", "SIS Login ID", "Section"]
CANVAS_COLUMN = re.compile(r".*\S \((\d+)\)")  # Canvas's own heading of an assignment column: title (id)
POINTS_POSSIBLE = "Points Possible"
# Moodle's worksheet headers in the languages we have seen (its language packs: assign | grade, feedbackcomments,
# maxgrade); another language: name the columns with MOODLE_GRADE_COLUMN, MOODLE_FEEDBACK_COLUMN
MOODLE_GRADE = ("Grade", "Bewertung", "Note", "Calificación", "Voto", "Cijfer", "Ocena", "Nota")
MOODLE_FEEDBACK = ("Feedback comments", "Feedback als Kommentar", "Commentaires de feedback",
                   "Comentarios de retroalimentación", "Commenti di feedback", "Feedback commentaar",
                   "Komentarze zwrotne", "Comentários de feedback")
MOODLE_IDENTIFIER = re.compile(r"\D*?(\d+)\s*")  # "Participant 12345", "Teilnehmer/in 12345"


@dataclass(frozen=True)
class StudentGrade:
    """What the LMS needs of one student: who, and the assignment's total."""
    id: str
    first_name: str
    last_name: str
    lms_user_id: str
    submitted: bool
    total: float
    max_score: float
    auto_score: float
    written_score: float
    needs_manual_grade: bool

    def comment(self) -> str:
        """The feedback comment that goes with the grade, in plain text (LMSs show it as it is)."""
        if not self.submitted:
            return "translab: no submission"
        waiting = "; written answers still to grade" if self.needs_manual_grade else ""
        return (f"translab: {self.total:g} of {self.max_score:g} (checks {self.auto_score:g}, written answers "
                f"{self.written_score:g}){waiting}")


def canvas(grades: list[StudentGrade], column: str, out: Path) -> tuple[Path, list[str]]:
    """Canvas's gradebook import file for the assignment ``column``; (file, the students left out: no Canvas id)."""
    if not CANVAS_COLUMN.fullmatch(column or ""):
        raise GradingError(f"CANVAS_COLUMN={column!r}: give the assignment's column as Canvas heads it in its "
                           "gradebook export, its title then its id in parentheses, e.g. CANVAS_COLUMN=\"Transfer learning lab "
                           "(4242)\" (Grades > Export shows it)")
    matched = [g for g in grades if g.lms_user_id]
    left_out = sorted(g.id for g in grades if not g.lms_user_id)
    if not matched:
        raise GradingError("no student has a Canvas id: import the class from Canvas first, `make students "
                           "ROSTER=<Canvas's gradebook export>.csv`, which keeps each student's Canvas id")
    maximum = max(g.max_score for g in matched)
    rows = [CANVAS_HEADER + [column], [POINTS_POSSIBLE, "", "", "", "", _number(maximum)]]
    for g in sorted(matched, key=lambda g: (g.last_name.lower(), g.first_name.lower(), g.id)):
        rows.append([_sortable_name(g), g.lms_user_id, "", "", "", _number(g.total)])
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        csv.writer(handle).writerows(rows)
    return out, left_out


def moodle(grades: list[StudentGrade], worksheet: Path, out: Path, grade_column: str | None = None,
           feedback_column: str | None = None) -> tuple[Path, list[str]]:
    """The downloaded grading ``worksheet`` with Grade and Feedback comments filled in, written to ``out``; (file,
    the students graded here whom the worksheet does not list)."""
    if worksheet is None or not Path(worksheet).is_file():
        raise GradingError(f"MOODLE_WORKSHEET={worksheet}: no such file; download it from the assignment (View all "
                           "submissions > Grading action > Download grading worksheet) and name it here")
    raw = Path(worksheet).read_bytes()
    bom = raw.startswith(b"\xef\xbb\xbf")
    text = raw.decode("utf-8-sig")
    try:
        dialect = csv.Sniffer().sniff(text.splitlines()[0], delimiters=",;\t")
    except (csv.Error, IndexError):
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if len(rows) < 1:
        raise GradingError(f"{worksheet} is empty: download the grading worksheet again")
    header = rows[0]
    grade_at = _column(header, grade_column, MOODLE_GRADE, "grade", worksheet)
    feedback_at = _column(header, feedback_column, MOODLE_FEEDBACK, "feedback comments", worksheet)
    # the site's decimal separator, as its numbers show it (the maximum grade: "100.00" or "100,00")
    cells = [cell.strip() for row in rows[1:] for cell in row]
    comma = any(re.fullmatch(r"\d+,\d+", c) for c in cells) and not any(re.fullmatch(r"\d+\.\d+", c) for c in cells)
    by_participant = {g.id: g for g in grades}
    listed = set()
    for row in rows[1:]:
        if not row or not (found := MOODLE_IDENTIFIER.fullmatch(row[0])):
            continue
        listed.add(found.group(1))
        grade = by_participant.get(found.group(1))
        if grade is None or not grade.submitted:
            continue  # not graded here: the row goes back as Moodle wrote it
        row += [""] * (max(grade_at, feedback_at) + 1 - len(row))
        row[grade_at] = _number(grade.total).replace(".", ",") if comma else _number(grade.total)
        row[feedback_at] = grade.comment()
    unlisted = sorted(g.id for g in grades if g.submitted and g.id not in listed)
    buffer = io.StringIO()
    csv.writer(buffer, dialect, lineterminator="\n").writerows(rows)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes((b"\xef\xbb\xbf" if bom else b"") + buffer.getvalue().encode("utf-8"))
    return out, unlisted


def _column(header: list[str], named: str | None, names: tuple[str, ...], what: str, worksheet: Path) -> int:
    wanted = (named,) if named else names
    found = [i for i, cell in enumerate(header) if cell.strip() in wanted]
    if not found:
        option = "MOODLE_GRADE_COLUMN" if what == "grade" else "MOODLE_FEEDBACK_COLUMN"
        raise GradingError(f"{worksheet}: no {what} column in its header {header}; this is not Moodle's grading "
                           f"worksheet, or its language is one we do not know: name the column with {option}=...")
    return found[0]


def _sortable_name(grade: StudentGrade) -> str:
    """Canvas's "Last, First" (its gradebook matches on ID; the name is for the reader)."""
    return ", ".join(part for part in (grade.last_name, grade.first_name) if part) or grade.id


def _number(value: float) -> str:
    return f"{value:.2f}".rstrip("0").rstrip(".")
