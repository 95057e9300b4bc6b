"""copy_plain_files (grader.grading.plain_copies): what nbgrader grades is a copy of the submission's plain files only."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

from grader.grading.plain_copies import MAX_SUBMITTED_FILE, copy_plain_files


@pytest.fixture
def submitted(tmp_path):
    """submitted/eve/transfer_learning/ with a notebook, a data file in a subfolder, and a secret outside."""
    folder = tmp_path / "submitted" / "eve" / "transfer_learning"
    (folder / "data").mkdir(parents=True)
    (folder / "01_mask.ipynb").write_text("{}")
    (folder / "data" / "words.txt").write_text("hello")
    secret = tmp_path / "gradebook.db"
    secret.write_text("hidden tests")
    return tmp_path, folder, secret


def _stage(tmp_path: Path, folder: Path) -> tuple[list[str], Path]:
    dest = tmp_path / "copied" / "eve" / "transfer_learning"
    return copy_plain_files(folder, dest, top=tmp_path / "submitted"), dest


def _tree(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): p.read_text() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_plain_files_are_copied_with_their_folders(submitted):
    tmp_path, folder, _ = submitted
    refused, dest = _stage(tmp_path, folder)
    assert refused == []
    assert _tree(dest) == {"01_mask.ipynb": "{}", "data/words.txt": "hello"}
    assert os.stat(dest / "01_mask.ipynb").st_mtime_ns == os.stat(folder / "01_mask.ipynb").st_mtime_ns


def test_links_fifos_and_hard_links_are_refused_and_never_read(submitted):
    tmp_path, folder, secret = submitted
    os.symlink(secret, folder / "02_model.ipynb")
    os.symlink(secret.parent, folder / "course")  # a link to a folder is not entered
    os.mkfifo(folder / "pipe")  # opening it for reading would block: it must not be opened
    os.link(secret, folder / "grades.db")
    refused, dest = _stage(tmp_path, folder)
    assert sorted(refused) == ["02_model.ipynb: a symbolic link", "course: a symbolic link",
                               "grades.db: a hard link (it may be a file from outside the submission)",
                               "pipe: a FIFO"]
    assert _tree(dest) == {"01_mask.ipynb": "{}", "data/words.txt": "hello"}
    assert "hidden tests" not in "".join(_tree(dest).values())


def test_a_student_folder_that_is_a_link_is_refused_whole(submitted):
    tmp_path, folder, secret = submitted
    (tmp_path / "submitted" / "mallory").symlink_to(folder.parent)
    refused, dest = _stage(tmp_path, tmp_path / "submitted" / "mallory" / "transfer_learning")
    assert refused == ["mallory: a symbolic link, not a folder"]
    assert _tree(dest) == {}


def test_an_oversized_file_is_refused(submitted):
    tmp_path, folder, _ = submitted
    with open(folder / "huge.bin", "wb") as handle:
        handle.truncate(MAX_SUBMITTED_FILE + 1)  # sparse: no disk used
    refused, dest = _stage(tmp_path, folder)
    assert refused == [f"huge.bin: larger than {MAX_SUBMITTED_FILE // 1024 ** 2} MB"]
    assert not (dest / "huge.bin").exists()
