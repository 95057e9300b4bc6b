"""Issue 50: answers written the ways outside code writes them (``grader.testing.outside``), at the check level.

Every verdict must be right (right answers pass both checks, wrong ones fail the hidden one), and what each check
says must be what ``results/outside_corpus.json`` records: a mistake named there stays named, and one the checks
learn to name is recorded by rerunning ``make outside-corpus`` (so the table the note quotes is the checks' own)."""
from __future__ import annotations

import json
from collections import Counter

import pytest

from grader.testing import outside
from grader.testing.outside.__main__ import RESULTS, measure, summarise

ANSWERS = outside.answers()
RECORDED = {(row["graded"], row["name"]): row for row in json.loads(RESULTS.read_text(encoding="utf-8"))["answers"]}


def test_each_graded_answer_has_six_answers_two_of_them_right():
    counts = Counter(answer.graded for answer in ANSWERS)
    right = Counter(answer.graded for answer in ANSWERS if answer.mistake is None)
    assert set(counts) == set(outside.GRADED)
    assert all(counts[graded] >= 6 and right[graded] >= 2 for graded in outside.GRADED), (counts, right)


def test_the_recorded_table_is_the_table_of_the_recorded_answers():
    recorded = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert set(RECORDED) == {(answer.graded, answer.name) for answer in ANSWERS}, "run make outside-corpus"
    assert recorded["summary"] == summarise(recorded["answers"])


@pytest.mark.parametrize("answer", ANSWERS, ids=[f"{a.graded}-{a.name}" for a in ANSWERS])
def test_each_outside_answer_gets_a_fair_verdict_and_the_recorded_diagnosis(answer):
    row = measure(answer)
    if answer.mistake is None:
        assert row["verdict_right"], f"a right answer is failed: {row['visible']} {row['hidden']}"
    else:
        assert row["verdict_right"], f"a wrong answer ({answer.mistake}) passes: {row['visible']} {row['hidden']}"
        hidden = outside.run(answer, "hidden", outside.support_for(answer)).message
        assert "tensor(" not in hidden, f"the hidden check shows its tensors:\n{hidden}"
    recorded = RECORDED[(answer.graded, answer.name)]
    for split in outside.SPLITS:
        assert row[split]["keys"] == recorded[split]["keys"], \
            f"the {split} check now says {row[split]['keys']}, the table {recorded[split]['keys']}: " \
            "run make outside-corpus and commit results/outside_corpus.json"
    assert row["named"] == recorded["named"]


NOTEBOOK = "01_mask_and_positional_encoding"
ANSWER_CELLS = {"mask_answer": "mask", "pe_answer": "encoding", "attention_answer": "attention",
                "mha_answer": "multi_head"}
VALIDATED = 2  # students whose notebook nbgrader's Validate also runs (each runs the whole notebook: seconds)


@pytest.mark.slow
def test_part_1s_outside_answers_through_autograde_validate_and_the_feedback(tmp_path):
    """Part 1's outside answers as submissions (student i answers with the i-th answer to each cell) graded by the
    course: every test cell's score is the verdict the check-level table gives, each named mistake's hidden check
    reaches the feedback page with its diagnosis and without the exception's text, and Validate reports what the
    visible checks say."""
    import nbformat
    from nbgrader.validator import Validator

    from conftest import cell_scores, page_text, run_grader, small_course
    from translab.contract import ASSIGNMENT
    course = small_course(tmp_path / "course")
    by_cell = {cell: [a for a in ANSWERS if a.graded == graded] for cell, graded in ANSWER_CELLS.items()}
    chosen = {}
    for i in range(max(len(answers) for answers in by_cell.values())):
        notebook = nbformat.read(course / "notebooks" / ASSIGNMENT / f"{NOTEBOOK}.ipynb", as_version=4)
        student = chosen.setdefault(f"outside{i:02d}", {})
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in by_cell:
                answer = by_cell[grade_id][i % len(by_cell[grade_id])]
                cell.source, student[grade_id] = answer.source.strip() + "\n", answer
        folder = course / "submitted" / f"outside{i:02d}" / ASSIGNMENT
        folder.mkdir(parents=True)
        nbformat.write(notebook, folder / f"{NOTEBOOK}.ipynb")
    run_grader(course, "autograde")
    run_grader(course, "feedback", "--force")
    for sid, answers in chosen.items():
        scores = cell_scores(course, sid)
        page = page_text(course / "feedback" / sid / ASSIGNMENT / f"{NOTEBOOK}.html")
        for grade_id, answer in answers.items():
            family = grade_id.removesuffix("_answer")
            (visible, top, _), (hidden, _, _) = scores[(NOTEBOOK, f"{family}_visible")], scores[(NOTEBOOK, f"{family}_hidden")]
            where = f"{sid}, {answer.graded}/{answer.name}"
            if answer.mistake is None:
                assert visible == hidden == top, f"{where}: a right answer lost points ({visible}, {hidden})"
                continue
            assert hidden == 0 and (visible == 0 or answer.visible_passes), f"{where}: scored {visible}, {hidden}"
            if RECORDED[(answer.graded, answer.name)]["named"]:
                said = RECORDED[(answer.graded, answer.name)]["hidden"]["first_line"]
                assert said in page, f"{where}: the feedback does not show the hidden check's diagnosis {said!r}"
        assert "Traceback (most recent call last)" not in page, f"{sid}: a raw traceback in the feedback"
    for sid in list(chosen)[:VALIDATED]:
        failed = [failure for failure in
                  Validator().validate(str(course / "submitted" / sid / ASSIGNMENT / f"{NOTEBOOK}.ipynb"))["failed"]
                  if "CheckFailed" in failure.get("raw_error", "")]  # not the written answer, left blank here
        wrong = {grade_id.removesuffix("_answer") for grade_id, answer in chosen[sid].items()
                 if answer.mistake is not None and not answer.visible_passes}
        assert len(failed) == len(wrong), (sid, wrong, [f.get("raw_error", "")[:200] for f in failed])
