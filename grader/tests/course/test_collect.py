"""``collect`` (grader.course.lms_zip through ``python -m grader collect``) on hostile and unlucky LMS zips.

Each test builds a zip in a fake course (``solutions/transfer_learning/`` holds empty notebooks named like the
real ones) and checks what lands in ``submitted/``, what the report says and that nothing lands anywhere else.
"""
from __future__ import annotations

import csv
import json
import os
import stat
import struct
import time
import zipfile
from datetime import datetime, timezone
from pathlib import Path

import pytest

from grader.course import lms_zip
from grader import cli
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

LAB = sorted(path.stem for path in (REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))
MASK, MODEL, PRETRAIN, TRANSFER, MLM, *_ = LAB
WHEN = (2026, 11, 20, 14, 3, 0)
REGULAR = stat.S_IFREG | 0o644


def notebook(tag: str) -> bytes:
    return json.dumps({"cells": [], "metadata": {"tag": tag}, "nbformat": 4, "nbformat_minor": 5}).encode()


def entry(name: str, data: bytes | None = None, when: tuple = WHEN, mode: int = REGULAR,
          method: int = zipfile.ZIP_DEFLATED, extra: bytes = b"") -> tuple[zipfile.ZipInfo, bytes]:
    """A zip entry; its data defaults to a notebook tagged with its own name."""
    info = zipfile.ZipInfo(name, date_time=when)
    info.external_attr = mode << 16
    info.compress_type = method
    info.extra = extra
    return info, notebook(name) if data is None else data


def make_zip(path: Path, entries: list[tuple[zipfile.ZipInfo, bytes]]) -> Path:
    with zipfile.ZipFile(path, "w") as handle:
        for info, data in entries:
            handle.writestr(info, data)
    return path


def patch_central_header(archive: Path, name: str, offset: int, fmt: str, value: int) -> None:
    """Overwrite one field of ``name``'s central-directory record (what zipfile believes about the entry)."""
    data = bytearray(archive.read_bytes())
    start = 0
    while (start := data.find(b"PK\x01\x02", start)) >= 0:
        length = struct.unpack_from("<H", data, start + 28)[0]
        if data[start + 46:start + 46 + length].decode() == name:
            struct.pack_into(fmt, data, start + offset, value)
            archive.write_bytes(bytes(data))
            return
        start += 4
    raise AssertionError(f"{name} not in {archive}")


@pytest.fixture
def course(tmp_path: Path) -> Path:
    """A course root inside tmp_path, so that anything written above it is still seen by ``tree``."""
    root = tmp_path / "course"
    (root / "solutions" / ASSIGNMENT).mkdir(parents=True)
    for stem in LAB:
        (root / "solutions" / ASSIGNMENT / f"{stem}.ipynb").write_bytes(notebook("solution"))
    return root


def tree(top: Path) -> dict[str, bytes | str]:
    """Every file and symlink below ``top`` (links not followed): path -> content, or the link's target."""
    found: dict[str, bytes | str] = {}
    for folder, folders, files in os.walk(top):
        for name in files + [d for d in folders if os.path.islink(os.path.join(folder, d))]:
            path = Path(folder, name)
            found[str(path.relative_to(top))] = os.readlink(path) if path.is_symlink() else path.read_bytes()
    return found


def run_collect(root: Path, archive: Path, capsys) -> tuple[int, str, list[dict]]:
    """(exit code, printed output, report rows) of ``python -m grader collect``, run in-process."""
    code = cli.main(["--root", str(root), "collect", str(archive)])
    printed = capsys.readouterr()
    report = root / "downloaded" / ASSIGNMENT / "collect_report.csv"
    rows = list(csv.DictReader(report.open(encoding="utf-8"))) if report.exists() else []
    return code, printed.out + printed.err, rows


def submitted(root: Path) -> dict[str, dict[str, str]]:
    """{student: {notebook: the tag of the zip entry it came from}} for every notebook file (not link) in submitted/."""
    result: dict[str, dict[str, str]] = {}
    for name, content in tree(root / "submitted").items():
        parts = Path(name).parts
        if len(parts) == 3 and parts[1] == ASSIGNMENT and parts[2].endswith(".ipynb") and isinstance(content, bytes):
            result.setdefault(parts[0], {})[parts[2].removesuffix(".ipynb")] = json.loads(content)["metadata"]["tag"]
    return result


def reasons(rows: list[dict], action: str = "skipped") -> dict[str, str]:
    """{entry: reason} of the report's rows with ``action`` (entries without the quote that keeps "-rf" text)."""
    return {row["entry"].removeprefix("'"): row["reason"] for row in rows if row["action"] == action}


def test_moodle_canvas_and_plain_folder_layouts_give_the_right_students(course, tmp_path, capsys):
    layouts = {  # student: (notebook, entry)
        "12345": (MASK, f"Jane Doe_12345_assignsubmission_file_/{MASK}.ipynb"),  # Moodle, in folders
        "23456": (MODEL, f"John Roe_23456_assignsubmission_file_{MODEL}.ipynb"),  # Moodle, flat
        "doejane": (PRETRAIN, f"doejane_4711_9001_{PRETRAIN}.ipynb"),             # Canvas
        "smithj": (MASK, f"smithj_LATE_4712_9002_{MASK}.ipynb"),                  # Canvas, late
        "brownk": (MODEL, f"brownk_late_4713_9003_{MODEL}.ipynb"),                # Canvas, late, other spelling
        "alice": (TRANSFER, f"alice/{TRANSFER}.ipynb"),                           # a folder per student
    }
    archive = make_zip(tmp_path / "class.zip", [entry(name) for _, name in layouts.values()])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {student: {nb: name} for student, (nb, name) in layouts.items()}
    assert {(row["student_id"], row["action"]) for row in rows} == {(student, "collected") for student in layouts}
    assert "collected 6 notebook(s) of 6 student(s)" in output


def test_a_moodle_zip_names_its_students_in_the_gradebook_but_never_with_markup(course, tmp_path, capsys):
    from nbgrader.api import Gradebook
    from grader.course import roster
    (course / "gradebook.db").unlink(missing_ok=True)
    roster.import_roster(course, _roster(tmp_path, "id,first_name,last_name\n34567,Rosa,Roster\n"))
    archive = make_zip(tmp_path / "moodle.zip", [
        entry(f"Jane van Doe_12345_assignsubmission_file_/{MASK}.ipynb"),
        entry(f"Zoë O'Brien-Ng_23456_assignsubmission_file_{MODEL}.ipynb"),
        entry(f"<img src=x onerror=alert(1)>_45678_assignsubmission_file_{MASK}.ipynb"),
        entry(f"Other Name_34567_assignsubmission_file_{MASK}.ipynb"),  # the roster's name stays
        entry(f"doejane_4711_9001_{PRETRAIN}.ipynb"),  # Canvas writes no name
    ])
    code, output, _ = run_collect(course, archive, capsys)
    assert code == 0, output
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        names = {s.id: (s.first_name, s.last_name) for s in gradebook.students}
    assert names["12345"] == ("Jane van", "Doe") and names["23456"] == ("Zoë", "O'Brien-Ng")
    assert names["34567"] == ("Rosa", "Roster")
    assert "45678" not in names and "doejane" not in names
    assert "names not used" in output and "45678" in output


def _roster(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "roster.csv"
    path.write_text(text, encoding="utf-8")
    return path


def test_unsafe_names_are_skipped_and_nothing_is_written_outside_submitted(course, tmp_path, capsys):
    unsafe = {
        "../evil.ipynb": "'..'",
        f"../../{MASK}.ipynb": "'..'",
        f"alice/../../{MASK}.ipynb": "'..'",
        "/abs/01_x.ipynb": "absolute",
        f"/tmp/alice/{MASK}.ipynb": "absolute",
        f"C:/Users/alice/{MASK}.ipynb": "absolute",
        f"..\\..\\alice\\{MASK}.ipynb": "backslash",
        f"alice\\..\\{MODEL}.ipynb": "backslash",
        f"bob/{MASK}\x1b[2J.ipynb": "control characters",
        f".._{MASK}.ipynb": "invalid student id '..'",  # flat: the student part is '..'
    }
    archive = make_zip(tmp_path / "class.zip", [entry(name) for name in unsafe] + [entry(f"alice/{MASK}.ipynb")])
    before = tree(tmp_path)
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"alice": {MASK: f"alice/{MASK}.ipynb"}}
    new = set(tree(tmp_path)) - set(before)
    outside = [path for path in new if not path.startswith("course/submitted/")]
    assert outside == [f"course/downloaded/{ASSIGNMENT}/collect_report.csv"]
    skipped = reasons(rows)
    assert set(skipped) == {lms_zip.shown_name(name) for name in unsafe}
    for name, why in unsafe.items():
        assert why in skipped[lms_zip.shown_name(name)], (name, skipped[lms_zip.shown_name(name)])
    assert "\x1b" not in output and "\\x1b[2J" in output  # the name is shown escaped, not sent to the terminal


def test_symlinks_devices_and_fifos_in_the_zip_are_never_created(course, tmp_path, capsys):
    archive = make_zip(tmp_path / "class.zip", [
        entry(f"mallory/{MASK}.ipynb", b"../../../../../etc/passwd", mode=stat.S_IFLNK | 0o777),
        entry(f"mallory/{MODEL}.ipynb", b"", mode=stat.S_IFIFO | 0o644),
        entry(f"mallory/{PRETRAIN}.ipynb", b"", mode=stat.S_IFCHR | 0o644),
        entry(f"mallory/{TRANSFER}.ipynb"),
    ])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"mallory": {TRANSFER: f"mallory/{TRANSFER}.ipynb"}}
    assert not [path for path in (course / "submitted").rglob("*") if path.is_symlink() or not
                (path.is_file() or path.is_dir())]
    skipped = reasons(rows)
    assert skipped[f"mallory/{MASK}.ipynb"] == "a symbolic link"
    assert skipped[f"mallory/{MODEL}.ipynb"].startswith("not a regular file")
    assert skipped[f"mallory/{PRETRAIN}.ipynb"].startswith("not a regular file")


def test_invalid_student_ids_are_reported_not_renamed(course, tmp_path, capsys):
    valid = ["j.doe-2_x", "_x", "a" * 64, "12345"]
    invalid = ["Jane Doe", "-rf", ".hidden", "a" * 65, "jöe", "x;rm"]
    names = [f"{student}/{MASK}.ipynb" for student in valid + invalid]
    archive = make_zip(tmp_path / "class.zip", [entry(name) for name in names])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert sorted(submitted(course)) == sorted(valid)
    assert sorted(path.name for path in (course / "submitted").iterdir()) == sorted(valid)
    skipped = reasons(rows)
    assert sorted(skipped) == sorted(f"{student}/{MASK}.ipynb" for student in invalid)
    assert all(reason.startswith("invalid student id") for reason in skipped.values()), skipped


def test_a_canvas_resubmission_keeps_the_highest_copy_number(course, tmp_path, capsys):
    plain, first, second = (f"doejane_4711_9001_{MASK}{suffix}.ipynb" for suffix in ("", "-1", "-2"))
    archive = make_zip(tmp_path / "class.zip", [  # the copy numbers win over the zip times, which say the opposite
        entry(second, when=(2026, 11, 20, 10, 0, 0)),
        entry(plain, when=(2026, 11, 20, 12, 0, 0)),
        entry(first, when=(2026, 11, 20, 11, 0, 0)),
    ])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"doejane": {MASK: second}}
    dropped = reasons(rows, "dropped")
    assert sorted(dropped) == sorted([plain, first])
    assert all(f"kept {second}, a higher copy number" in why for why in dropped.values()), dropped
    assert reasons(rows, "collected") == {second: "latest of 3 copies"}
    assert "resubmissions: dropped 2" in output and f"dropped {plain}" in output


def test_without_copy_numbers_the_latest_zip_time_wins(course, tmp_path, capsys):
    older, newer = f"Jane Doe_12345_assignsubmission_file_/{MASK}.ipynb", f"Jane Doe_12345_assignsubmission_file_{MASK}.ipynb"
    archive = make_zip(tmp_path / "class.zip", [entry(newer, when=(2026, 11, 20, 9, 0, 0)),
                                                entry(older, when=(2026, 11, 19, 9, 0, 0))])  # newer first
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"12345": {MASK: newer}}
    assert reasons(rows, "dropped") == {older: f"older copy: kept {newer}, a later zip time"}


@pytest.fixture
def utc_plus_one(monkeypatch):
    """This machine's local time one hour ahead of UTC (a POSIX TZ string: needs no tz database)."""
    monkeypatch.setenv("TZ", "XXX-1")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def test_timestamp_txt_holds_the_latest_kept_zip_time_as_nbgrader_reads_it(course, tmp_path, capsys, utc_plus_one):
    exact = int(datetime(2026, 12, 1, 8, 30, 15, tzinfo=timezone.utc).timestamp())
    archive = make_zip(tmp_path / "class.zip", [
        entry(f"alice/{MASK}.ipynb", when=(2026, 11, 20, 14, 3, 0)),  # local times, UTC+1
        entry(f"alice/{MODEL}.ipynb", when=(2026, 11, 20, 15, 30, 0)),
        entry(f"alice/{MODEL}-1.ipynb", when=(2026, 11, 21, 9, 0, 0)),
        # the extended-timestamp field (flag 1: modification time) is exact UTC and wins over the DOS time
        entry(f"bob/{MASK}.ipynb", when=(2030, 1, 1, 0, 0, 0), extra=struct.pack("<HHBI", 0x5455, 5, 1, exact)),
    ])
    patch_central_header(archive, f"alice/{MODEL}-1.ipynb", 16, "<I", 0)  # wrong CRC: the later copy is unreadable
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    alice, bob = (course / "submitted" / student / ASSIGNMENT for student in ("alice", "bob"))
    assert (alice / "timestamp.txt").read_text() == "2026-11-20 14:30:00.000000 UTC\n"
    assert (bob / "timestamp.txt").read_text() == "2026-12-01 08:30:15.000000 UTC\n"
    from nbgrader.coursedir import CourseDirectory
    assert CourseDirectory().get_existing_timestamp(str(alice)) == datetime(2026, 11, 20, 14, 30)
    assert submitted(course)["alice"][MODEL] == f"alice/{MODEL}.ipynb"  # the readable older copy was used
    assert reasons(rows)[f"alice/{MODEL}-1.ipynb"].startswith("cannot be read: BadZipFile")


def test_an_existing_student_folder_is_updated_notebook_by_notebook(course, tmp_path, capsys):
    for student, stamp in (("alice", "2027-01-01 00:00:00.000000 UTC"), ("bob", "2020-01-01 00:00:00")):
        folder = course / "submitted" / student / ASSIGNMENT
        folder.mkdir(parents=True)
        (folder / f"{MASK}.ipynb").write_bytes(notebook("old"))
        (folder / f"{MLM}.ipynb").write_bytes(notebook("kept"))
        (folder / "timestamp.txt").write_text(stamp)
    archive = make_zip(tmp_path / "class.zip", [entry(f"alice/{MASK}.ipynb"), entry(f"bob/{MASK}.ipynb")])
    code, output, _ = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {student: {MASK: f"{student}/{MASK}.ipynb", MLM: "kept"} for student in ("alice", "bob")}
    stamps = {student: (course / "submitted" / student / ASSIGNMENT / "timestamp.txt").read_text()
              for student in ("alice", "bob")}
    expected_bob = datetime(*WHEN).astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f UTC\n")
    assert stamps == {"alice": "2027-01-01 00:00:00.000000 UTC\n", "bob": expected_bob}  # the later one stays
    leftovers = [path.name for path in (course / "submitted").rglob(".*")]
    assert not leftovers, leftovers  # no temporary file left behind


def test_symlinks_already_in_submitted_are_not_followed(course, tmp_path, capsys):
    outside = tmp_path / "outside"
    (outside / ASSIGNMENT).mkdir(parents=True)
    (outside / "secret.ipynb").write_text("do not overwrite")
    (course / "submitted" / "frank" / ASSIGNMENT).mkdir(parents=True)
    (course / "submitted" / "gina").mkdir()
    (course / "submitted" / "eve").symlink_to(outside)                                        # a student folder
    (course / "submitted" / "gina" / ASSIGNMENT).symlink_to(outside / ASSIGNMENT)              # the assignment folder
    (course / "submitted" / "frank" / ASSIGNMENT / f"{MASK}.ipynb").symlink_to(outside / "secret.ipynb")  # a notebook
    archive = make_zip(tmp_path / "class.zip", [entry(f"eve/{MASK}.ipynb"), entry(f"gina/{MASK}.ipynb"),
                                                entry(f"frank/{MASK}.ipynb"), entry(f"frank/{MODEL}.ipynb")])
    before = tree(outside)
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert tree(outside) == before
    assert submitted(course) == {"frank": {MODEL: f"frank/{MODEL}.ipynb"}}
    skipped = reasons(rows)
    assert skipped == {
        f"eve/{MASK}.ipynb": "not written: submitted/eve: a symbolic link, not followed",
        f"gina/{MASK}.ipynb": f"not written: submitted/gina/{ASSIGNMENT}: a symbolic link, not followed",
        f"frank/{MASK}.ipynb": f"not written: submitted/frank/{ASSIGNMENT}/{MASK}.ipynb: a symbolic link, not followed",
    }


def test_damaged_encrypted_and_oddly_compressed_entries_are_skipped(course, tmp_path, capsys):
    archive = make_zip(tmp_path / "class.zip", [
        entry(f"doejane_4711_9001_{MASK}.ipynb", when=(2026, 11, 20, 9, 0, 0)),
        entry(f"doejane_4711_9001_{MASK}-1.ipynb", notebook("CORRUPTME"), method=zipfile.ZIP_STORED),
        entry(f"bob/{MASK}.ipynb", method=zipfile.ZIP_STORED),
        entry(f"carol/{MASK}.ipynb", b"{" + b" " * 10_000_000 + b"}"),  # its header will claim 100 bytes
        entry(f"dave/{MASK}.ipynb"),
        entry(f"erin/{MASK}.ipynb", method=zipfile.ZIP_BZIP2),
        entry(f"fay/{MASK}.ipynb"),
    ])
    data = archive.read_bytes()
    assert data.count(b"CORRUPTME") == 1
    archive.write_bytes(data.replace(b"CORRUPTME", b"CORRUPTED"))       # the data no longer matches its CRC
    patch_central_header(archive, f"bob/{MASK}.ipynb", 10, "<H", 98)     # PPMd: zipfile cannot decompress it
    patch_central_header(archive, f"carol/{MASK}.ipynb", 24, "<I", 100)  # a lying uncompressed size
    patch_central_header(archive, f"dave/{MASK}.ipynb", 8, "<H", 0x1)    # encrypted
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"doejane": {MASK: f"doejane_4711_9001_{MASK}.ipynb"}, "fay": {MASK: f"fay/{MASK}.ipynb"}}
    skipped = reasons(rows)
    assert skipped[f"doejane_4711_9001_{MASK}-1.ipynb"].startswith("cannot be read: BadZipFile: Bad CRC-32")
    assert skipped[f"bob/{MASK}.ipynb"] == "compression method 98 not accepted (only stored and deflate)"
    assert skipped[f"carol/{MASK}.ipynb"].startswith("cannot be read: BadZipFile")
    assert skipped[f"dave/{MASK}.ipynb"] == "encrypted"
    assert skipped[f"erin/{MASK}.ipynb"].startswith("compression method 12 not accepted")


def test_entries_over_the_size_cap_are_skipped(course, tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(lms_zip, "MAX_NOTEBOOK_BYTES", 1000)
    archive = make_zip(tmp_path / "class.zip", [entry(f"alice/{MASK}.ipynb", b" " * 1001),
                                                entry(f"alice/{MODEL}.ipynb", b" " * 1000)])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert sorted(path.name for path in (course / "submitted" / "alice" / ASSIGNMENT).glob("*.ipynb")) == [f"{MODEL}.ipynb"]
    assert reasons(rows) == {f"alice/{MASK}.ipynb": "1001 bytes uncompressed, over the 1000 bytes a notebook may have"}


def test_files_that_are_not_lab_notebooks_are_skipped_and_folder_entries_ignored(course, tmp_path, capsys):
    ignored = ["alice/06_extra.ipynb", "alice/notes.txt", f"alice/{MASK}.ipynb.bak", f"alice/{MASK.upper()}.ipynb"]
    archive = make_zip(tmp_path / "class.zip", [
        *(entry(name) for name in ignored),
        entry(f"__MACOSX/._doejane_1_2_{MASK}.ipynb", b"\x00\x05\x16\x07"),
        entry(f"{MASK}.ipynb"),
        entry(f"class/alice/{MASK}.ipynb"),
        entry("alice/", b"", mode=stat.S_IFDIR | 0o755),
        entry(f"alice/{MODEL} (2).ipynb"),
    ])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"alice": {MODEL: f"alice/{MODEL} (2).ipynb"}}
    skipped = reasons(rows)
    assert {name: skipped[name] for name in ignored} == {name: "not one of the lab's notebooks" for name in ignored}
    assert skipped[f"__MACOSX/._doejane_1_2_{MASK}.ipynb"].startswith("hidden file")
    assert skipped[f"{MASK}.ipynb"].startswith("no student in the name")
    assert skipped[f"class/alice/{MASK}.ipynb"].startswith("nested folders")
    assert "alice/" not in {row["entry"] for row in rows}


@pytest.mark.parametrize("make, message", [
    (lambda path: path.write_text("student,grade\nalice,1\n"), "is not a zip file"),
    (lambda path: path.write_bytes(b"PK\x03\x04" + b"\0" * 100), "is not a zip file"),
    (lambda path: None, "does not exist"),
    (lambda path: path.mkdir(), "is a folder, not a zip"),
])
def test_a_missing_file_or_not_a_zip_is_a_clear_error_and_writes_nothing(course, tmp_path, capsys, make, message):
    archive = tmp_path / "download.zip"
    make(archive)
    before = tree(course)
    code, output, _ = run_collect(course, archive, capsys)
    assert code == 1
    assert message in output and "Download" in output, output
    assert tree(course) == before and not (course / "submitted").exists() and not (course / "downloaded").exists()


def test_a_zip_with_nothing_collectable_exits_1_and_still_writes_the_report(course, tmp_path, capsys):
    archive = make_zip(tmp_path / "class.zip", [entry("../evil.ipynb"), entry("alice/readme.txt")])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 1
    assert "nothing could be collected" in output
    assert [(row["entry"], row["action"]) for row in rows] == [("../evil.ipynb", "skipped"), ("alice/readme.txt", "skipped")]
    assert not (course / "submitted").exists()


def test_the_report_has_one_row_per_entry_and_cannot_become_a_spreadsheet_formula(course, tmp_path, capsys):
    formula = f"=HYPERLINK(\"http:__x\")/{MASK}.ipynb"
    archive = make_zip(tmp_path / "class.zip", [entry(formula), entry(f"alice/{MASK}.ipynb")])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    report = course / "downloaded" / ASSIGNMENT / "collect_report.csv"
    header = report.read_text(encoding="utf-8").splitlines()[0]
    assert header == "entry,student_id,notebook,action,reason,zip_time"
    assert [row["entry"] for row in rows] == ["'" + formula, f"alice/{MASK}.ipynb"]
    assert rows[0]["student_id"] == "'" + formula.split("/")[0] and rows[0]["action"] == "skipped"
    assert rows[1]["student_id"] == "alice" and rows[1]["notebook"] == MASK and rows[1]["action"] == "collected"
    assert rows[1]["zip_time"].endswith(" UTC")
    assert f"report: {report}" in output


def test_a_display_name_that_imitates_moodle_cannot_take_a_classmates_id(course, tmp_path, capsys):
    """Eve (1002) names herself "Eve_1001_assignsubmission_file_": her folder is still hers, 1001's is 1001's."""
    eve = f"Eve_1001_assignsubmission_file__1002_assignsubmission_file_/{MASK}.ipynb"
    real = f"Real Person_1001_assignsubmission_file_/{MASK}.ipynb"
    archive = make_zip(tmp_path / "moodle.zip", [entry(eve), entry(real)])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"1001": {MASK: real}, "1002": {MASK: eve}}
    assert {(row["student_id"], row["action"]) for row in rows} == {("1001", "collected"), ("1002", "collected")}


def test_a_flat_name_with_two_moodle_markers_is_skipped_not_guessed(course, tmp_path, capsys):
    forged = f"Eve_1002_assignsubmission_file_{MASK}_1001_assignsubmission_file_{MASK}.ipynb"
    honest = f"Real Person_1001_assignsubmission_file_{MODEL}.ipynb"
    archive = make_zip(tmp_path / "moodle.zip", [entry(forged), entry(honest)])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"1001": {MODEL: honest}}
    assert "2 Moodle participant markers" in reasons(rows)[forged]


def test_two_names_claiming_one_id_collect_neither_and_report_both(course, tmp_path, capsys):
    claims = [f"Real Person_1001_assignsubmission_file_/{MASK}.ipynb",
              f"Impostor_1001_assignsubmission_file_{MODEL}.ipynb"]
    honest = f"Other Student_1003_assignsubmission_file_/{MASK}.ipynb"
    archive = make_zip(tmp_path / "moodle.zip", [entry(name) for name in [*claims, honest]])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"1003": {MASK: honest}}
    skipped = reasons(rows)
    assert all(name in skipped and "conflict" in skipped[name] and "Impostor" in skipped[name] for name in claims)


def test_two_canvas_namesakes_are_never_one_student(course, tmp_path, capsys):
    """Issue 48: two Canvas users whose sortable names give one login (namesakes, or one renamed after a
    classmate).  Without a roster that tells them apart neither is collected; one user's copy number never
    outranks the other's upload."""
    wrong = f"doejane_4799_9100_{MASK}-3.ipynb"  # the classmate's, with a higher copy number
    right = f"doejane_4711_9001_{MASK}.ipynb"
    archive = make_zip(tmp_path / "canvas.zip", [entry(right), entry(wrong)])
    code, output, rows = run_collect(course, archive, capsys)
    assert submitted(course) == {}
    skipped = reasons(rows)
    assert all("2 Canvas users (4711, 4799) under the login doejane" in skipped[name] for name in (right, wrong))
    assert not reasons(rows, "dropped"), "one user's copy replaced the other's"


def test_canvas_namesakes_known_to_the_roster_are_each_graded_on_their_own(course, tmp_path, capsys):
    from grader.course.gradebook import open_gradebook
    with open_gradebook(course / "gradebook.db") as gradebook:
        gradebook.update_or_create_student("jdoe1", first_name="Jane", last_name="Doe", lms_user_id="4711")
        gradebook.update_or_create_student("jdoe2", first_name="Jane", last_name="Doe", lms_user_id="4799")
    mine, mine_later = f"doejane_4711_9001_{MASK}.ipynb", f"doejane_4711_9002_{MODEL}.ipynb"
    theirs = f"doejane_4799_9100_{MASK}-3.ipynb"
    archive = make_zip(tmp_path / "canvas.zip", [entry(mine), entry(theirs), entry(mine_later)])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"jdoe1": {MASK: mine, MODEL: mine_later}, "jdoe2": {MASK: theirs}}
    assert not reasons(rows, "dropped") and not reasons(rows)


def test_one_name_in_two_unicode_spellings_is_one_student(course, tmp_path, capsys):
    """Issue 48: macOS writes names decomposed (NFD); the same participant's name composed (NFC) elsewhere in the
    zip is the same person, not an impersonation."""
    import unicodedata
    name = "José Núñez"
    composed, decomposed = unicodedata.normalize("NFC", name), unicodedata.normalize("NFD", name)
    assert composed != decomposed
    files = [f"{composed}_2001_assignsubmission_file_/{MASK}.ipynb", f"{decomposed}_2001_assignsubmission_file_{MODEL}.ipynb"]
    archive = make_zip(tmp_path / "moodle.zip", [entry(name) for name in files])
    code, output, rows = run_collect(course, archive, capsys)
    assert code == 0, output
    assert submitted(course) == {"2001": {MASK: files[0], MODEL: files[1]}}
