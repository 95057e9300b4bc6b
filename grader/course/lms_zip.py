"""An LMS download (a zip) -> ``submitted/<student>/<assignment>/``, entry by entry, trusting nothing in it.

It replaces nbgrader's ``zip_collect``, which stops the whole class at the first odd entry (``../``, an absolute
path, a Canvas resubmission) and writes wherever a flat name such as ``.._01_....ipynb`` points.  Here each
entry is judged on its own; one that is unsafe or unreadable is skipped and reported, the others are collected.

Rules:

* Layouts.  A folder per student: Moodle's ``Jane Doe_12345_assignsubmission_file_/01_x.ipynb`` -> ``12345``
  (the participant number: the last marker of the folder's name, the part Moodle writes after the display name a
  student may choose), any other ``alice/01_x.ipynb`` -> ``alice``.  Flat files: Moodle's
  ``Jane Doe_12345_assignsubmission_file_01_x.ipynb`` -> ``12345`` (a name with two such markers is skipped: the
  student chose both the display name before and the file name after); Canvas's
  ``doejane[_LATE|_late]_12345_67890_01_x.ipynb`` -> the student whose ``lms_user_id`` in the gradebook is Canvas's
  user id ``12345`` (``make students ROSTER=...`` with Canvas's gradebook export keeps them), else ``doejane``, the
  login Canvas writes from the sortable name, which two students may share.  Deeper
  folders (except inside a Moodle folder), hidden files (macOS's ``._x``) and names without a student: skipped.
* Notebooks.  Only the lab's own (the ``NN_name.ipynb`` in ``solutions/<assignment>/``), maybe followed by a
  copy number: Canvas's ``-1``, ``-2`` on a resubmission, or a browser's `` (1)``.
* Student ids (``STUDENT_ID``): 1 to 64 ASCII letters, digits, ``.``, ``_``, ``-``, not starting with ``.``
  or ``-``.  Any other id is reported and its entries skipped, never renamed: a made-up id could merge two
  students or grade one under a name nobody recognises.  Moodle's participant numbers and Canvas's logins pass.
* Impersonation.  Files of one student id under two display names (a folder named to look like a classmate's),
  or of two Canvas users under one login (namesakes, or a student renamed after a classmate) that the roster does
  not tell apart: none is collected, all are reported as a conflict; no submission replaces another student's,
  and copy numbers never compete across users.  Names are compared in Unicode's NFC form (macOS writes NFD).
* Resubmissions.  Of several files for one notebook of one student the latest is kept: the highest copy
  number, then the latest zip time, then the later entry in the zip; if it cannot be read, the next one.
* Never collected: absolute paths, ``..``, backslashes or control characters in a name; symlinks, devices and
  anything else that is not a regular file; encrypted entries and compression methods other than stored and
  deflate (every LMS uses deflate; ``zipfile`` inflates bzip2 and lzma chunks with no output limit); entries
  over ``MAX_NOTEBOOK_BYTES``, counted while decompressing and not taken from the header; damaged entries.
* Writing.  No symlink below ``submitted/`` is followed: each folder is opened with ``O_NOFOLLOW`` relative to
  its parent, and a notebook goes to a temporary file in its folder, then is renamed over the old one.  Other
  notebooks already in a student's folder stay.
* ``timestamp.txt`` (what nbgrader's late penalties read) gets the latest zip time of the student's notebooks,
  or keeps the one already there if that is later, in the format of nbgrader's exchange.  A zip's DOS times
  carry no zone: they are read as this machine's local time, as ``unzip`` does, unless the entry has the
  extended-timestamp field (exact UTC).

Everything done or skipped goes to ``downloaded/<assignment>/collect_report.csv`` and ``CollectReport.summary``.

Why one file: the rules above and the parser that applies them, entry by entry; each rule is a few lines of
code read beside its paragraph.
"""
from __future__ import annotations

import contextlib
import csv
import errno
import os
import re
import secrets
import stat
import struct
import unicodedata
import zipfile
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

MAX_NOTEBOOK_BYTES = 100 * 2**20
STUDENT_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,63}")
NOTEBOOK_PATTERN = re.compile(r"(?:^|_)(?P<notebook>\d\d_[a-z0-9_]+?)(?P<copy>-\d+|_\d+| ?\(\d+\))?\.ipynb$")
# Moodle's participant marker.  A folder's name ends with it (the part Moodle writes), so the last one is Moodle's
# whatever the display name before it holds; a flat file's name has the student's display name before it and the
# student's own file name after it, so only a name with exactly one marker says whose it is.
MOODLE_MARKER = re.compile(r"_(?P<student>\d+)_assignsubmission_[a-z]+_")
MOODLE_FOLDER = re.compile(r"^(?P<name>.+)_(?P<student>\d+)_assignsubmission_[a-z]+_$")
# Canvas's flat file: the login (from the sortable name), [LATE], the user id, the submission id, the file's name
CANVAS_FILE = re.compile(r"^(?P<login>[^_]+)(?:_(?:LATE|late))?_(?P<user>\d+)_(?P<submission>\d+)_(?P<file>.+)$")
# A person's name as a formgrader page may show it: letters (any script, with their accents), spaces, and the
# apostrophes, hyphens and full stops of names; nothing a browser could read as markup.  An LMS lets students
# choose their display name, so anything else is not used.
PERSON_NAME = re.compile(r"(?:[^\W\d_]|[ '\u2019.\-])+")
MAX_NAME = 100
ACCEPTED_COMPRESSION = frozenset({zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED})  # see the module docstring
EXTENDED_TIMESTAMP = 0x5455
TIMESTAMP_FORMAT = "%Y-%m-%d %H:%M:%S.%f UTC"  # nbgrader's Exchange.timestamp_format, in UTC
REPORT_NAME = "collect_report.csv"
REPORT_COLUMNS = ("entry", "student_id", "notebook", "action", "reason", "zip_time")
COLLECTED, DROPPED, SKIPPED = "collected", "dropped", "skipped"
NOT_FOLLOWED = "a symbolic link, not followed"


class CollectError(RuntimeError):
    """The archive as a whole cannot be collected (missing, not a zip, no lab notebooks to match)."""


class Skip(Exception):
    """One entry is not collected, for the reason given."""

    def __init__(self, reason: str, student: str = "", notebook: str = ""):
        super().__init__(reason)
        self.student, self.notebook = student, notebook


@dataclass(frozen=True)
class Candidate:
    """An entry that passed every check that does not need its data."""
    index: int  # position in the zip, the last tie-break
    info: zipfile.ZipInfo
    student: str
    notebook: str
    copy: int  # the LMS's copy number: 0 for none, 1 for "-1", ...
    zip_time: datetime | None
    name: str | None = None  # the student's full name, where the LMS writes it (Moodle)
    lms_user: str | None = None  # Canvas's user id, where the LMS writes one

    @property
    def order(self) -> tuple:
        return self.copy, self.zip_time or datetime.min.replace(tzinfo=timezone.utc), self.index


@dataclass
class ReportRow:
    entry: str
    student_id: str
    notebook: str
    action: str
    reason: str = ""
    zip_time: str = ""


@dataclass
class CollectReport:
    archive: Path
    csv_path: Path | None = None
    rows: list[ReportRow] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)  # student id -> full name, where the zip had a usable one
    unusable_names: dict[str, str] = field(default_factory=dict)  # ... and where it had one we do not show

    def add(self, entry: str, action: str, reason: str = "", student: str = "", notebook: str = "",
            when: datetime | None = None) -> None:
        self.rows.append(ReportRow(entry, student, notebook, action, reason, _format_time(when)))

    def _with(self, action: str) -> list[ReportRow]:
        return [row for row in self.rows if row.action == action]

    @property
    def students(self) -> list[str]:
        return sorted({row.student_id for row in self._with(COLLECTED)})

    def summary(self) -> str:
        collected, dropped, skipped = self._with(COLLECTED), self._with(DROPPED), self._with(SKIPPED)
        lines = [f"collected {len(collected)} notebook(s) of {len(self.students)} student(s) from {self.archive.name}: "
                 + ", ".join(self.students)]
        if dropped:
            lines.append(f"resubmissions: dropped {len(dropped)} older cop(ies):")
            lines += [f"  {shown_name(row.student_id)} {row.notebook}: dropped {shown_name(row.entry)} ({shown_name(row.reason)})"
                      for row in dropped]
        if skipped:
            lines.append(f"skipped {len(skipped)} entr(ies):")
            lines += [f"  {shown_name(row.entry) or '(no entry)'}: {shown_name(row.reason)}" for row in skipped]
        if self.names:
            lines.append(f"names of {len(self.names)} student(s) read from the zip")
        if self.unusable_names:
            lines.append("names not used (only letters, spaces and ' - . are shown in the formgrader): "
                         + ", ".join(f"{shown_name(student)} ({shown_name(name)[:60]!r})"
                                     for student, name in sorted(self.unusable_names.items())))
        if self.csv_path:
            lines.append(f"report: {self.csv_path}")
        return "\n".join(lines)

    def write_csv(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "w", newline="", encoding="utf-8") as handle:
            writer = csv.writer(handle)
            writer.writerow(REPORT_COLUMNS)
            for row in self.rows:
                writer.writerow([_spreadsheet_safe(getattr(row, column)) for column in REPORT_COLUMNS])
        self.csv_path = path


# ----------------------------------------------------------------- judging one entry

def _name_parts(name: str) -> list[str]:
    """The entry's folders and file name; Skip if the name could point anywhere but below the zip's root."""
    if "\\" in name:
        raise Skip("backslash in the name (a Windows path, or '..' in disguise)")
    if name.startswith("/") or re.match(r"[A-Za-z]:", name):
        raise Skip("absolute path")
    if not name.isprintable():
        raise Skip("control characters in the name")
    parts = [part for part in name.split("/") if part not in ("", ".")]
    if ".." in parts:
        raise Skip("'..' in the path")
    if not parts:
        raise Skip("no file name")
    return parts


def _student_and_file(parts: list[str]) -> tuple[str, str, str | None, str | None]:
    """(student id as the LMS wrote it, the part of the name that should be a notebook, the student's name if
    the LMS wrote one, Canvas's user id if it wrote one)."""
    if len(parts) > 1 and (folder := MOODLE_FOLDER.match(parts[0])):  # in folders: the last marker, Moodle's
        return folder["student"], parts[-1], folder["name"], None
    markers = list(MOODLE_MARKER.finditer(parts[0])) if len(parts) == 1 else []
    if len(markers) > 1:
        raise Skip(f"{len(markers)} Moodle participant markers (_<number>_assignsubmission_) in one file name: the "
                   "display name or the file name a student chose imitates Moodle's, so whose it is cannot be told; "
                   "download the zip with a folder per student (Moodle's default), or collect this file by hand")
    if markers:  # flat: the display name, Moodle's marker, the student's file name
        marker = markers[0]
        return marker["student"], parts[0][marker.end():], parts[0][:marker.start()], None
    if len(parts) == 2:
        return parts[0], parts[1], None, None
    if len(parts) == 1:
        if NOTEBOOK_PATTERN.match(parts[0]):
            raise Skip("no student in the name: expected a folder per student or an LMS file name "
                       "such as doejane_12345_67890_01_....ipynb")
        if canvas := CANVAS_FILE.match(parts[0]):
            return canvas["login"], canvas["file"], None, canvas["user"]
        student, _, rest = parts[0].partition("_")  # the login, then the file's name
        return student, rest, None, None
    raise Skip("nested folders: expected <student folder>/<notebook> or an LMS's flat file name")


def _candidate(index: int, info: zipfile.ZipInfo, lab_notebooks: set[str],
               canvas_users: dict[str, str] | None = None) -> Candidate | None:
    """The entry as a submission, None for a folder entry (nothing is created from those), or Skip.
    ``canvas_users``: the gradebook's students by Canvas user id (``canvas_users``)."""
    if info.is_dir():
        return None
    parts = _name_parts(info.filename)
    mode = info.external_attr >> 16
    if stat.S_IFMT(mode) and not stat.S_ISREG(mode):
        raise Skip("a symbolic link" if stat.S_ISLNK(mode) else f"not a regular file (type {stat.S_IFMT(mode):o})")
    student, file_name, name, lms_user = _student_and_file(parts)
    student = (canvas_users or {}).get(lms_user, student) if lms_user else student
    if not STUDENT_ID.fullmatch(student):
        raise Skip(f"invalid student id {student!r}: ids are 1 to 64 letters, digits, '.', '_' or '-', "
                   "not starting with '.' or '-'", student=student)
    if file_name.startswith("."):
        raise Skip("hidden file (macOS metadata?), not a notebook", student=student)
    match = NOTEBOOK_PATTERN.search(file_name)
    if not match or match["notebook"] not in lab_notebooks:
        raise Skip("not one of the lab's notebooks", student=student)
    notebook = match["notebook"]
    if info.flag_bits & 0x1:
        raise Skip("encrypted", student, notebook)
    if info.compress_type not in ACCEPTED_COMPRESSION:
        raise Skip(f"compression method {info.compress_type} not accepted (only stored and deflate)", student, notebook)
    if info.file_size > MAX_NOTEBOOK_BYTES:
        raise Skip(f"{info.file_size} bytes uncompressed, over the {MAX_NOTEBOOK_BYTES} bytes a notebook may have",
                   student, notebook)
    copy = int(re.sub(r"\D", "", match["copy"] or "") or 0)
    return Candidate(index, info, student, notebook, copy, zip_time(info), name, lms_user)


def zip_time(info: zipfile.ZipInfo) -> datetime | None:
    """When the LMS stored the entry, in UTC (see the module's docstring); None if the zip's date is invalid."""
    extra = info.extra
    try:
        while len(extra) >= 4:
            kind, size = struct.unpack("<HH", extra[:4])
            data, extra = extra[4:4 + size], extra[4 + size:]
            if kind == EXTENDED_TIMESTAMP and len(data) >= 5 and data[0] & 1:  # flag bit 0: modification time
                return datetime.fromtimestamp(struct.unpack("<I", data[1:5])[0], timezone.utc)
        return datetime(*info.date_time).astimezone(timezone.utc)
    except (ValueError, OverflowError, OSError):
        return None


def _read(zipped: zipfile.ZipFile, candidate: Candidate) -> bytes:
    """The entry's data, never more than MAX_NOTEBOOK_BYTES + 1 bytes of it in memory; Skip if unreadable."""
    try:
        with zipped.open(candidate.info) as stream:
            data = stream.read(MAX_NOTEBOOK_BYTES + 1)
    except Exception as error:  # whatever a damaged entry raises (BadZipFile, zlib.error, EOFError, ...)
        raise Skip(f"cannot be read: {type(error).__name__}: {error}", candidate.student, candidate.notebook)
    if len(data) > MAX_NOTEBOOK_BYTES:
        raise Skip(f"decompresses to over the {MAX_NOTEBOOK_BYTES} bytes a notebook may have", candidate.student,
                   candidate.notebook)
    return data


def _why_later(kept: Candidate, other: Candidate) -> str:
    if kept.copy != other.copy:
        return f"kept {kept.info.filename}, a higher copy number ({kept.copy} > {other.copy})"
    if kept.zip_time != other.zip_time:
        return f"kept {kept.info.filename}, a later zip time"
    return f"kept {kept.info.filename}, later in the zip"


# ----------------------------------------------------------------- writing below submitted/ without following links

def _open_below(top_fd: int, names: list[str]) -> int:
    """The folder ``top/names[0]/names[1]/...``, each created if missing and opened without following a symlink.

    OSError names the first one that is a symlink or not a folder (relative to ``top``).
    """
    fd = top_fd
    for depth, name in enumerate(names):
        try:
            with contextlib.suppress(FileExistsError):
                os.mkdir(name, dir_fd=fd)
            inner = os.open(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW, dir_fd=fd)
        except OSError as error:
            raise OSError(error.errno, _refusal(error, fd, name), "/".join(names[:depth + 1])) from error
        finally:
            if fd != top_fd:
                os.close(fd)
        fd = inner
    return fd


def _refusal(error: OSError, parent_fd: int, name: str) -> str:
    """Why ``name`` could not be opened as a folder (O_DIRECTORY | O_NOFOLLOW on a symlink says only ENOTDIR)."""
    with contextlib.suppress(OSError):
        if stat.S_ISLNK(os.lstat(name, dir_fd=parent_fd).st_mode):
            return NOT_FOLLOWED
    return "not a folder" if error.errno == errno.ENOTDIR else error.strerror


def _replace_file(folder_fd: int, name: str, data: bytes) -> None:
    """Put ``data`` in ``name`` atomically (temporary file, then rename), refusing to replace a symlink."""
    with contextlib.suppress(FileNotFoundError):
        if stat.S_ISLNK(os.lstat(name, dir_fd=folder_fd).st_mode):
            raise OSError(errno.ELOOP, NOT_FOLLOWED, name)
    temporary = f".{name}.{secrets.token_hex(6)}.part"
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644, dir_fd=folder_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.rename(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary, dir_fd=folder_fd)
        raise


def _later_timestamp(folder_fd: int, new: datetime) -> datetime:
    """``new``, or the timestamp.txt already in the folder if that is later (its other notebooks came then)."""
    try:
        fd = os.open("timestamp.txt", os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=folder_fd)
    except OSError:
        return new
    with os.fdopen(fd, encoding="utf-8", errors="replace") as handle:
        text = handle.read(200).strip()
    from nbgrader.utils import parse_utc  # slow to import; needed only when a student is collected again
    try:
        existing = parse_utc(text).replace(tzinfo=timezone.utc)
    except (ValueError, OverflowError, TypeError):
        return new
    return max(new, existing)


def _format_time(when: datetime | None) -> str:
    return when.astimezone(timezone.utc).strftime(TIMESTAMP_FORMAT) if when else ""


def _write_student(submitted_fd: int, assignment: str, student: str, kept: list[tuple[Candidate, bytes, str]],
                   report: CollectReport) -> None:
    """Write one student's kept notebooks and timestamp.txt; a refusal is reported for each notebook."""
    folder = f"submitted/{student}/{assignment}"
    try:
        folder_fd = _open_below(submitted_fd, [student, assignment])
    except OSError as error:
        for candidate, _, _ in kept:
            report.add(candidate.info.filename, SKIPPED, f"not written: submitted/{error.filename}: {error.strerror}",
                       student, candidate.notebook, candidate.zip_time)
        return
    try:
        times = []
        for candidate, data, reason in kept:
            try:
                _replace_file(folder_fd, f"{candidate.notebook}.ipynb", data)
            except OSError as error:
                report.add(candidate.info.filename, SKIPPED, f"not written: {folder}/{candidate.notebook}.ipynb: "
                           f"{error.strerror or error}", student, candidate.notebook, candidate.zip_time)
                continue
            report.add(candidate.info.filename, COLLECTED, reason, student, candidate.notebook, candidate.zip_time)
            times += [candidate.zip_time] if candidate.zip_time else []
        if times:
            try:
                timestamp = _later_timestamp(folder_fd, max(times))
                _replace_file(folder_fd, "timestamp.txt", (_format_time(timestamp) + "\n").encode())
            except OSError as error:
                report.add("", SKIPPED, f"not written: {folder}/timestamp.txt: {error.strerror or error}", student)
    finally:
        os.close(folder_fd)


# ----------------------------------------------------------------- the whole archive

def _open_archive(archive: Path) -> zipfile.ZipFile:
    how = ("pass the zip downloaded from the LMS (Moodle: Download all submissions; Canvas: Download Submissions), "
           "e.g. make collect ZIP=~/Downloads/submissions.zip")
    if not archive.exists():
        raise CollectError(f"{archive} does not exist: {how}")
    if archive.is_dir():
        raise CollectError(f"{archive} is a folder, not a zip: {how}; or copy notebooks by hand into "
                           "submitted/<student>/<assignment>/")
    try:
        return zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError) as error:
        raise CollectError(f"{archive} is not a zip file, or a damaged one ({error}): {how}")


def collect_zip(root: Path, archive: Path, assignment: str) -> CollectReport:
    """Collect the safe, readable entries of ``archive`` into ``root/submitted``; report the rest.

    Raises CollectError, before writing anything, when the archive cannot be opened as a zip.
    """
    archive = Path(archive)
    lab_notebooks = {path.stem for path in (root / "solutions" / assignment).glob("*.ipynb")}
    if not lab_notebooks:
        raise CollectError(f"no notebooks in {root / 'solutions' / assignment} to recognise submissions by: "
                           "is --root the course folder?")
    report = CollectReport(archive)
    users = canvas_users(root)
    with _open_archive(archive) as zipped:
        copies: dict[str, dict[str, list[Candidate]]] = defaultdict(lambda: defaultdict(list))
        for index, info in enumerate(zipped.infolist()):
            try:
                candidate = _candidate(index, info, lab_notebooks, users)
            except Skip as skip:
                report.add(info.filename, SKIPPED, str(skip), skip.student, skip.notebook, zip_time(info))
                continue
            if candidate:
                copies[candidate.student][candidate.notebook].append(candidate)
                _note_name(report, candidate)
        for student in _claimed_by_several(copies):
            claims = [c for notebooks in copies.pop(student).values() for c in notebooks]
            names = sorted({shown_name(_same_form(c.name)) for c in claims})
            users = sorted({c.lms_user for c in claims if c.lms_user})
            why = (f"{len(users)} Canvas users ({', '.join(users)}) under the login {student}: namesakes, or one renamed "
                   "after a classmate; none is collected; map each Canvas user id to its student (make students "
                   "ROSTER=... with Canvas's gradebook export) and collect again" if len(users) > 1 else
                   f"{len(names)} differently named folders or files claim student id {student} ({'; '.join(names)}): "
                   "none is collected, as one of them may be impersonating the other; check the LMS and collect the "
                   "right one by hand")
            for claim in claims:
                report.add(claim.info.filename, SKIPPED, f"conflict: {why}", student, claim.notebook, claim.zip_time)
            report.names.pop(student, None)
            report.unusable_names.pop(student, None)
        if copies:
            submitted = root / "submitted"
            try:
                submitted.mkdir(parents=True, exist_ok=True)
                submitted_fd = os.open(submitted, os.O_RDONLY | os.O_DIRECTORY)
            except OSError as error:
                raise CollectError(f"cannot write into {submitted}: {error}") from error
            try:
                for student in sorted(copies):
                    kept = [latest for notebook in sorted(copies[student])
                            if (latest := _latest_readable(zipped, copies[student][notebook], report))]
                    if kept:
                        _write_student(submitted_fd, assignment, student, kept, report)
            finally:
                os.close(submitted_fd)
    report.write_csv(root / "downloaded" / assignment / REPORT_NAME)
    return report


def _same_form(name: str | None) -> str:
    """A name as one person's: Unicode's composed form (macOS writes names decomposed), single spaces."""
    return " ".join(unicodedata.normalize("NFC", name or "").split())


def _claimed_by_several(copies: dict[str, dict[str, list[Candidate]]]) -> list[str]:
    """Students whose entries carry more than one display name or Canvas user: an LMS writes one name per
    participant, so two are one student's files plus files that claim to be theirs (or a namesake's)."""
    return sorted(student for student, notebooks in copies.items()
                  if len({(_same_form(c.name), c.lms_user) for cs in notebooks.values() for c in cs}) > 1)


def canvas_users(root: Path) -> dict[str, str]:
    """{Canvas user id: student id} of the gradebook's students (nbgrader's ``lms_user_id``), read-only; empty where
    there is no gradebook yet."""
    import sqlite3
    path = root / "gradebook.db"
    if not path.is_file():
        return {}
    try:
        with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as db:
            rows = db.execute("SELECT id, lms_user_id FROM student WHERE lms_user_id IS NOT NULL").fetchall()
    except sqlite3.Error:
        return {}
    return {str(user): str(student) for student, user in rows if str(user).strip()}


def _note_name(report: CollectReport, candidate: Candidate) -> None:
    name = _same_form(candidate.name)
    if not name:
        return
    if PERSON_NAME.fullmatch(name) and len(name) <= MAX_NAME:
        report.names[candidate.student] = name
    else:
        report.unusable_names[candidate.student] = name


def split_name(name: str) -> tuple[str, str]:
    """(first name, last name) of a full name as an LMS writes it: the last word is the last name."""
    first, _, last = name.rpartition(" ")
    return (first, last) if first else (name, "")


def _latest_readable(zipped: zipfile.ZipFile, copies: list[Candidate],
                     report: CollectReport) -> tuple[Candidate, bytes, str] | None:
    """(the latest copy that can be read, its data, why it was kept); the others are reported dropped or skipped."""
    kept: tuple[Candidate, bytes, str] | None = None
    for candidate in sorted(copies, key=lambda c: c.order, reverse=True):
        if kept is None:
            try:
                data = _read(zipped, candidate)
            except Skip as skip:
                report.add(candidate.info.filename, SKIPPED, str(skip), candidate.student, candidate.notebook,
                           candidate.zip_time)
                continue
            kept = candidate, data, f"latest of {len(copies)} copies" if len(copies) > 1 else ""
        else:
            report.add(candidate.info.filename, DROPPED, f"older copy: {_why_later(kept[0], candidate)}",
                       candidate.student, candidate.notebook, candidate.zip_time)
    return kept


# ----------------------------------------------------------------- showing names an LMS or a student chose

def shown_name(text: str) -> str:
    """``text`` with control characters escaped, so a file name cannot rewrite the instructor's terminal."""
    return "".join(char if char.isprintable() else char.encode("unicode_escape").decode("ascii") for char in text)


def _spreadsheet_safe(text: str) -> str:
    """A CSV cell a spreadsheet shows as text: a leading ``=``, ``+``, ``-`` or ``@`` would make it a formula."""
    text = shown_name(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@") else text
