"""Cells students see only after grading (grader.after_grading): out of the release, back in the feedback."""
from __future__ import annotations

import json

import nbformat

from grader.after_grading import NOTE, RemoveAfterGrading, ShowAfterGrading, after_grading
from grader.batch import ASSIGNMENT
from translab.paths import REPO_ROOT


def _markdown(text: str, cid: str, later: bool = False):
    cell = nbformat.v4.new_markdown_cell(text)
    cell["id"] = cid
    if later:
        cell.metadata["translab"] = {"after_grading": True}
    return cell


def _source():
    return nbformat.v4.new_notebook(cells=[
        _markdown("question", "q"), _markdown("answer to the self-check", "a", later=True),
        _markdown("summary", "s", later=True), _markdown("next part", "n")])


def test_the_release_has_no_after_grading_cell_and_the_feedback_puts_each_back_in_place(monkeypatch):
    released, _ = RemoveAfterGrading().preprocess(_source(), {})
    assert [cell.source for cell in released.cells] == ["question", "next part"]
    monkeypatch.setattr(ShowAfterGrading, "_source", lambda self, resources: _source())
    feedback, _ = ShowAfterGrading().preprocess(released, {})
    assert [cell.source for cell in feedback.cells] == [
        "question", NOTE + "answer to the self-check", NOTE + "summary", "next part"]
    edited, _ = RemoveAfterGrading().preprocess(_source(), {})
    edited.cells = [cell for cell in edited.cells if cell["id"] != "q"]  # a student deleted the cell before them
    feedback, _ = ShowAfterGrading().preprocess(edited, {})
    assert [cell.source for cell in feedback.cells] == ["next part", NOTE + "answer to the self-check", NOTE + "summary"]


def test_no_student_notebook_holds_an_after_grading_cell():
    """The summaries that restate a written answer and the self-check answers are not in the student release."""
    found = 0
    for solution in sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        later = [cell.source for cell in nbformat.read(solution, as_version=4).cells if after_grading(cell)]
        released = (REPO_ROOT / "notebooks" / ASSIGNMENT / solution.name).read_text(encoding="utf-8")
        text = " ".join("".join(cell["source"]) for cell in json.loads(released)["cells"])
        assert not [source for source in later if source.strip()[:60] in text], solution.name
        found += len(later)
    assert found >= 6
