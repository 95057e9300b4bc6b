"""The markdown the sanitizer found clean, remembered for the next submissions (grader.course.known_clean): the next
submission's instructions are not rendered again, a hostile cell is cleaned every time, a source clean in one
notebook is not taken for clean in another whose graded cells take its ids, and a folder or file that anybody else
could have written is not trusted."""
from __future__ import annotations

import copy
import os

import nbformat
import pytest
from nbformat.v4 import new_markdown_cell, new_notebook

from grader.course import known_clean
from grader.course.known_clean import KnownClean
from grader.isolation.sandbox import hidden_paths
from grader.nbgrader_plugins import sanitize_student_content
from grader.nbgrader_plugins.sanitize_student_content import SanitizeStudentContent
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

HOSTILE = 'My answer. <img src="x" onerror="window.__pwned = 1">'
TAKEN_HEADING = '<h2 id="mask_visible">My heading</h2>'  # notebook 01's graded cell takes this id


@pytest.fixture
def renders(monkeypatch) -> list[str]:
    """The sources the sanitizer renders, in order."""
    rendered: list[str] = []
    render = sanitize_student_content.render_markdown

    def counting(source, attachments=None):
        rendered.append(source)
        return render(source, attachments)

    monkeypatch.setattr(sanitize_student_content, "render_markdown", counting)
    return rendered


def _notebook_01() -> nbformat.NotebookNode:
    return nbformat.read(REPO_ROOT / "solutions" / ASSIGNMENT / "01_mask_and_positional_encoding.ipynb", as_version=4)


def _sanitized(notebook, folder) -> list[str]:
    notebook = copy.deepcopy(notebook)
    SanitizeStudentContent(known_clean_folder=str(folder)).preprocess(notebook, {})
    return [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]


def _private(folder):
    folder.mkdir(mode=0o700)
    return folder


def test_the_next_submission_renders_only_what_was_not_found_clean(tmp_path, renders):
    notebook = _notebook_01()
    notebook.cells.append(new_markdown_cell(HOSTILE))
    folder = tmp_path / known_clean.FOLDER_NAME
    first = _sanitized(notebook, folder)
    clean = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"][:-1]
    assert first[:-1] == clean and "onerror" not in first[-1]
    assert len(renders) > len(clean)
    renders.clear()
    assert _sanitized(notebook, folder) == first  # the same cleaning, now without rendering what was clean
    assert renders and all("onerror" in source for source in renders[:1]) and not set(renders) & set(clean)
    assert len(list(folder.iterdir())) == 1 and os.stat(folder).st_mode & 0o777 == 0o700


def test_a_source_clean_in_one_notebook_is_cleaned_where_its_id_is_taken(tmp_path):
    folder = tmp_path / known_clean.FOLDER_NAME
    alone = new_notebook(cells=[new_markdown_cell(TAKEN_HEADING)])
    assert _sanitized(alone, folder) == [TAKEN_HEADING]  # no graded cell takes the id there: clean, remembered
    notebook = _notebook_01()
    notebook.cells.append(new_markdown_cell(TAKEN_HEADING))
    assert 'id="mask_visible"' not in _sanitized(notebook, folder)[-1]


def _planted(folder, notebook, source: str) -> None:
    """What a writer of ``folder`` could plant: ``source`` as known clean for ``notebook``."""
    sanitizer = SanitizeStudentContent()
    sanitizer.taken_ids = sanitize_student_content.nbgrader_ids(notebook)
    known = KnownClean(folder, sanitizer._cleanliness_key())
    known.add(source)
    known.save()


def test_a_planted_hash_counts_only_in_a_folder_and_file_of_the_instructor_alone(tmp_path):
    notebook = new_notebook(cells=[new_markdown_cell(HOSTILE)])
    trusted = _private(tmp_path / "trusted")
    _planted(trusted, notebook, HOSTILE)
    assert _sanitized(notebook, trusted) == [HOSTILE]  # the mechanism: only the folder's owner can plant a hash

    shared = _private(tmp_path / "shared")
    _planted(shared, notebook, HOSTILE)
    os.chmod(shared, 0o755)  # others may read it: not the instructor's alone
    assert "onerror" not in _sanitized(notebook, shared)[0]

    group_writable = _private(tmp_path / "group-writable")
    _planted(group_writable, notebook, HOSTILE)
    for path in group_writable.iterdir():
        os.chmod(path, 0o660)
    assert "onerror" not in _sanitized(notebook, group_writable)[0]

    linked = _private(tmp_path / "linked")
    _planted(trusted, notebook, HOSTILE)
    for path in trusted.iterdir():
        (linked / path.name).symlink_to(path)
    assert "onerror" not in _sanitized(notebook, linked)[0]


@pytest.mark.skipif(os.geteuid() != 0, reason="a file of another uid can be made only as root")
def test_a_file_of_another_uid_is_not_trusted(tmp_path):
    notebook = new_notebook(cells=[new_markdown_cell(HOSTILE)])
    folder = _private(tmp_path / "folder")
    _planted(folder, notebook, HOSTILE)
    for path in folder.iterdir():
        os.chown(path, 12345, 12345)
    assert "onerror" not in _sanitized(notebook, folder)[0]


def test_lines_that_are_not_hashes_are_ignored_and_the_folder_is_hidden_from_kernels(tmp_path):
    folder = _private(tmp_path / known_clean.FOLDER_NAME)
    known = KnownClean(folder, "key")
    known.add("clean source")
    known.save()
    (path,) = folder.iterdir()
    with open(path, "a", encoding="ascii") as handle:
        handle.write("not a hash\n" + "g" * 64 + "\n")
    again = KnownClean(folder, "key")
    assert "clean source" in again and len(again.known) == 1
    assert "clean source" not in KnownClean(folder, "another key")
    assert folder.resolve() in hidden_paths(tmp_path)


def test_a_full_file_is_not_read_and_starts_again(tmp_path, monkeypatch):
    folder = _private(tmp_path / known_clean.FOLDER_NAME)
    monkeypatch.setattr(known_clean, "MAX_HASHES", 2)
    first = KnownClean(folder, "key")
    for source in ("one", "two", "three"):
        first.add(source)
    first.save()
    full = KnownClean(folder, "key")
    assert "one" not in full  # three hashes: over the cap, not read
    full.add("four")
    full.save()
    assert {source for source in ("one", "four") if source in KnownClean(folder, "key")} == {"four"}
