"""``make students ROSTER=file.csv``: the class's names and e-mails into the gradebook.

Without a roster the formgrader lists students as "None, None" and ``grades.csv`` has ids only.  An LMS's
participants export is read as it comes: the header names its columns (``id``, ``username``, ``student_id``,
"ID number"...; ``first_name``, "First name", "Given name"...; ``last_name``, "Surname", "Family name"...;
``email``, "Email address"...), in any case and order, comma- or semicolon-separated.  Ids follow the rule
``make collect`` applies to submissions (``collect.STUDENT_ID``), so a roster row and a submission meet.
The whole file is checked before anything is written: one bad row and nothing changes.

Canvas's gradebook export (``Student,ID,SIS User ID,SIS Login ID,Section,...``) is a roster too: its students get
the id Canvas writes in front of each file of a submissions zip, which ``make collect`` takes (the sortable name
"Doe, Jane" as ``doejane``: lower-case letters and digits), their names from "Last, First", and their Canvas user
id (``ID``) kept in nbgrader's ``lms_user_id``, where ``make grades FORMAT=canvas`` finds it.
"""
from __future__ import annotations

import csv
import io
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from grader.course.lms_zip import MAX_NAME, PERSON_NAME, STUDENT_ID, split_name
from grader.course.gradebook import open_gradebook

COLUMNS = {
    "id": ("id", "student_id", "student id", "username", "user name", "login", "login id", "id number", "sis user id"),
    "first_name": ("first_name", "first name", "firstname", "given name", "given_name", "first"),
    "last_name": ("last_name", "last name", "lastname", "surname", "family name", "family_name", "last"),
    "email": ("email", "e-mail", "email address", "e-mail address", "mail"),
    "lms_user_id": ("lms user id",),
}


class RosterError(ValueError):
    """The roster cannot be read as a class list; the message says which rows and what to do."""


CANVAS_COLUMNS = ("student", "id", "sis user id", "sis login id")  # the head of Canvas's gradebook export
POINTS_POSSIBLE = "points possible"  # the row of maxima in Canvas's export


@dataclass(frozen=True)
class Student:
    id: str
    first_name: str | None
    last_name: str | None
    email: str | None
    lms_user_id: str | None = None


def canvas_key(sortable_name: str) -> str:
    """The id Canvas writes in front of a student's files in a submissions zip: the sortable name, lower case,
    letters and digits only ("Doe, Jane" -> "doejane")."""
    ascii_name = unicodedata.normalize("NFKD", sortable_name).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]", "", ascii_name.lower())


def _canvas_rows(header: list[str], rows: list[list[str]]) -> list[list[str]] | None:
    """Canvas's gradebook export as a plain roster (id, first name, last name, Canvas id), or None if it is not one."""
    if header[:4] != list(CANVAS_COLUMNS):
        return None
    plain = [["id", "first name", "last name", "lms user id"]]
    for row in rows[1:]:
        cells = row + [""] * (2 - len(row))
        sortable, canvas_id = cells[0].strip(), cells[1].strip()
        if not sortable or _normal(sortable) == POINTS_POSSIBLE:
            plain.append([])  # skipped, and the lines after it keep their numbers
            continue
        last, _, first = sortable.partition(",")
        plain.append([canvas_key(sortable), first.strip(), last.strip(), canvas_id])
    return plain


def read(path: Path) -> list[Student]:
    """The students of a roster CSV, checked (ids valid and unique, names and e-mails as given)."""
    path = Path(path)
    if not path.is_file():
        raise RosterError(f"{path}: no such file; export the participants list of your LMS as CSV")
    text = path.read_bytes().decode("utf-8-sig", errors="replace")
    try:
        dialect = csv.Sniffer().sniff(text.splitlines()[0] if text.strip() else ",", delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = list(csv.reader(io.StringIO(text), dialect))
    if not rows:
        raise RosterError(f"{path} is empty")
    header = [_normal(cell) for cell in rows[0]]
    canvas = _canvas_rows(header, rows)
    if canvas is not None:
        rows, header = canvas, canvas[0]
    where = {}
    for field, names in COLUMNS.items():
        found = [i for i, cell in enumerate(header) if cell in names]
        if found:
            where[field] = found[0]
    if "id" not in where:
        raise RosterError(f"{path}: no student id column in the header {rows[0]}; name it one of: "
                          + ", ".join(repr(n) for n in COLUMNS["id"]))
    students, problems, seen = [], [], {}
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        value = lambda field: (row[where[field]].strip() or None) if field in where and where[field] < len(row) else None  # noqa: E731
        student_id = value("id") or ""
        if not STUDENT_ID.fullmatch(student_id):
            problems.append(f"line {line}: id {student_id!r} is not a valid student id (1 to 64 letters, digits, "
                            "'.', '_' or '-', not starting with '.'; the ids `make collect` uses)")
            continue
        if student_id in seen:
            problems.append(f"line {line}: id {student_id!r} again (first on line {seen[student_id]})")
            continue
        seen[student_id] = line
        email = value("email")
        if email and not re.fullmatch(r"[^@\s<>\"'&]+@[^@\s<>\"'&]+", email):
            problems.append(f"line {line}: {email!r} is not an e-mail address")
            continue
        odd = [name for name in (value("first_name"), value("last_name"))
               if name and not (PERSON_NAME.fullmatch(name) and len(name) <= MAX_NAME)]
        if odd:
            problems.append(f"line {line}: the name {odd[0][:60]!r} has characters other than letters, spaces and "
                            "' - . (the formgrader shows names as they are; correct it in the file)")
            continue
        lms_user_id = value("lms_user_id")
        if canvas is not None and not (lms_user_id or "").isdigit():
            problems.append(f"line {line}: Canvas id {lms_user_id!r} is not a number (the export's ID column)")
            continue
        students.append(Student(student_id, value("first_name"), value("last_name"), email, lms_user_id))
    if problems:
        raise RosterError(f"{path}: nothing imported, {len(problems)} row(s) to fix:\n  " + "\n  ".join(problems[:20]))
    if not students:
        raise RosterError(f"{path}: a header but no students")
    return students


def import_roster(root: Path, path: Path) -> tuple[int, int]:
    """Add or update every student of the roster in the course's gradebook; (added, updated)."""
    from nbgrader.api import MissingEntry

    students = read(path)
    added = updated = 0
    with open_gradebook(Path(root) / "gradebook.db") as book:
        for student in students:
            try:
                book.find_student(student.id)
                updated += 1
            except MissingEntry:
                added += 1
            known = {"lms_user_id": student.lms_user_id} if student.lms_user_id else {}
            book.update_or_create_student(student.id, first_name=student.first_name,
                                          last_name=student.last_name, email=student.email, **known)
    return added, updated


def name_from_collect(root: Path, names: dict[str, str]) -> int:
    """Give the students of an LMS zip (``make collect``) the names the zip holds, where the gradebook has none
    yet (a roster's names win); returns how many were named."""
    from nbgrader.api import MissingEntry

    named = 0
    with open_gradebook(Path(root) / "gradebook.db") as book:
        for student_id, name in sorted(names.items()):
            try:
                known = book.find_student(student_id)
                if known.first_name or known.last_name:
                    continue
            except MissingEntry:
                pass
            first, last = split_name(name)
            book.update_or_create_student(student_id, first_name=first, last_name=last or None)
            named += 1
    return named


def _normal(cell: str) -> str:
    return " ".join(cell.strip().lower().replace("\ufeff", "").split())
