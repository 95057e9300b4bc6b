"""Cells students see only after grading (grader.course.after_grading): out of the release, back in the feedback."""
from __future__ import annotations

import copy
import json

import nbformat

from grader.course.after_grading import AWAITING_GRADE, MODEL_ANSWER, NOTE, after_grading, written_answer
from grader.nbgrader_plugins.remove_after_grading import RemoveAfterGrading
from grader.nbgrader_plugins.show_after_grading import ShowAfterGrading
from translab.contract import ASSIGNMENT
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


def _written(text: str, cid: str):
    cell = _markdown(text, cid)
    cell.metadata["nbgrader"] = {"grade": True, "solution": True, "grade_id": cid, "points": 4, "locked": False,
                                 "schema_version": 3, "task": False}
    return cell


def test_the_feedback_shows_the_model_answer_below_the_students_own(monkeypatch):
    solution = nbformat.v4.new_notebook(cells=[
        _markdown("question", "q"), _written("### BEGIN SOLUTION\nThe mask hides the future.\n### END SOLUTION", "w"),
        _markdown("next part", "n")])
    submitted = nbformat.v4.new_notebook(cells=[
        _markdown("question", "q"), _written("my own answer", "w"), _markdown("next part", "n")])
    monkeypatch.setattr(ShowAfterGrading, "_source", lambda self, resources: solution)
    feedback, _ = ShowAfterGrading().preprocess(copy.deepcopy(submitted), {})
    assert [cell.source for cell in feedback.cells] == [
        "question", "my own answer", MODEL_ANSWER + "The mask hides the future.", "next part"]
    # feedback forced out before the answer's grade: the model answer waits for it
    monkeypatch.setattr(ShowAfterGrading, "_awaiting_grade", lambda self, resources: {"w"})
    feedback, _ = ShowAfterGrading().preprocess(copy.deepcopy(submitted), {})
    assert [cell.source for cell in feedback.cells] == ["question", "my own answer", AWAITING_GRADE, "next part"]


def test_no_student_notebook_holds_a_model_answer():
    """Each written answer cell of the release holds nbgrader's placeholder, not a line of the model answer."""
    written = 0
    for solution in sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        released = nbformat.read(REPO_ROOT / "notebooks" / ASSIGNMENT / solution.name, as_version=4)
        text = " ".join(cell.source for cell in released.cells)
        for cell in nbformat.read(solution, as_version=4).cells:
            if written_answer(cell):
                written += 1
                lines = [line for line in cell.source.splitlines() if len(line) > 40 and "SOLUTION" not in line]
                assert lines and not [line for line in lines if line in text], (solution.name, cell.metadata)
    assert written == 8
