"""Issue 50: answers written the ways outside code writes them (``grader.testing.outside``), at the check level.

Every verdict must be right (right answers pass both checks, wrong ones fail the hidden one), and what each check
says must be what ``results/outside_corpus.json`` records: a mistake named there stays named, and one the checks
learn to name is recorded by rerunning ``make outside-corpus`` (so the table the note quotes is the checks' own)."""
from __future__ import annotations

import csv
import json
from collections import Counter

import pytest

from grader.testing import outside
from grader.testing.outside.__main__ import RESULTS, measure, named_exactly, summarise

ANSWERS = outside.answers()
RECORDED = {(row["graded"], row["name"]): row for row in json.loads(RESULTS.read_text(encoding="utf-8"))["answers"]}


# The graded answers whose corpus issue 82 has brought to its size: at least 8 answers, a third of them with two or
# more mistakes at once.  The others keep issue 50's 6 until their turn comes (the closing note says which).
GROWN = {"base", "accuracy", "transfer", "greedy", "mlm_masking", "bert_count", "heads"}


def test_each_graded_answer_has_six_answers_two_of_them_right():
    counts = Counter(answer.graded for answer in ANSWERS)
    right = Counter(answer.graded for answer in ANSWERS if not answer.mistakes)
    assert set(counts) == set(outside.GRADED)
    assert all(counts[graded] >= 6 and right[graded] >= 2 for graded in outside.GRADED), (counts, right)


def test_the_grown_graded_answers_have_eight_answers_a_third_with_several_mistakes():
    several = Counter(answer.graded for answer in ANSWERS if len(answer.mistakes) > 1)
    counts = Counter(answer.graded for answer in ANSWERS)
    assert GROWN <= set(outside.GRADED)
    assert all(counts[graded] >= 8 and 3 * several[graded] >= counts[graded] for graded in GROWN), (counts, several)


def test_named_means_exactly_the_listed_keys():
    """An answer with two mistakes whose checks name one of them, or name a third, is not named."""
    from grader.testing.outside.answer import Answer
    two = Answer("accuracy", "two", "", "", ("accuracy.count", "accuracy.no_eval")).mistakes
    assert two == {"accuracy.count", "accuracy.no_eval"}
    assert Answer("accuracy", "one", "", "", "accuracy.count").mistakes == {"accuracy.count"}
    assert Answer("accuracy", "right", "", "", None).mistakes == frozenset()
    assert named_exactly(two, [two, frozenset({"accuracy.count"})])  # the visible check sees one, the hidden both
    assert not named_exactly(two, [frozenset({"accuracy.count"})] * 2)  # one never named
    assert not named_exactly(two, [two | {"accuracy.rounded"}])  # a claim not listed
    assert not named_exactly(two, [])  # nothing failed


def test_the_recorded_table_is_the_table_of_the_recorded_answers():
    recorded = json.loads(RESULTS.read_text(encoding="utf-8"))
    assert set(RECORDED) == {(answer.graded, answer.name) for answer in ANSWERS}, "run make outside-corpus"
    assert recorded["summary"] == summarise(recorded["answers"])


@pytest.mark.parametrize("answer", ANSWERS, ids=[f"{a.graded}-{a.name}" for a in ANSWERS])
def test_each_outside_answer_gets_a_fair_verdict_and_the_recorded_diagnosis(answer):
    row = measure(answer)
    if not answer.mistakes:
        assert row["verdict_right"], f"a right answer is failed: {row['visible']} {row['hidden']}"
    else:
        assert row["verdict_right"], f"a wrong answer ({sorted(answer.mistakes)}) passes: {row['visible']} {row['hidden']}"
        hidden = outside.run(answer, "hidden", outside.support_for(answer)).message
        assert "tensor(" not in hidden, f"the hidden check shows its tensors:\n{hidden}"
    recorded = RECORDED[(answer.graded, answer.name)]
    for split in outside.SPLITS:
        assert row[split]["keys"] == recorded[split]["keys"], \
            f"the {split} check now says {row[split]['keys']}, the table {recorded[split]['keys']}: " \
            "run make outside-corpus and commit results/outside_corpus.json"
    assert row["named"] == recorded["named"]


def test_the_recorded_class_grading_covers_every_answer_and_found_no_fault():
    """``make corpus``'s figures are of today's corpus: every answer graded as a submission, scored as at the check
    level, each named mistake's hidden diagnosis on the page, no raw error in a test cell."""
    from grader.testing.outside import end_to_end
    recorded = json.loads(end_to_end.RESULTS.read_text(encoding="utf-8"))
    assert {(row["graded"], row["name"]) for row in recorded["answers"]} == set(RECORDED), "run make corpus"
    assert recorded["summary"] == end_to_end.summarise(recorded["answers"])
    faults = [row for row in recorded["answers"] if not row["same_verdicts"] or row["raw_error_in_tests"]
              or row["diagnosis_on_page"] is not (True if RECORDED[(row["graded"], row["name"])]["named"] else None)]
    assert faults == [], faults


VALIDATED = 2  # students whose notebook nbgrader's Validate also runs (each runs the whole notebook: seconds)


@pytest.mark.slow
def test_part_1s_outside_answers_through_autograde_validate_and_the_feedback(tmp_path):
    """Part 1's outside answers as submissions (``end_to_end``: student i answers with the i-th answer to each cell)
    graded by the course: every test cell's score is the verdict the check-level table gives, each named mistake's
    hidden check reaches the feedback page with its diagnosis and no test cell shows a raw error, and Validate
    reports what the visible checks say; the class is ``make demo-class``'s, whose grades and report it reads too.
    ``make corpus`` does the same for parts 1 to 6."""
    from nbgrader.validator import Validator

    from grader.testing import demo_class
    from grader.testing.outside import end_to_end
    from translab.contract import ASSIGNMENT
    made = demo_class.make_demo_class(tmp_path / "course")  # `make demo-class`: this class, graded as a course is
    course, chosen = made["course"], made["students"]
    rows = end_to_end.judge(course, 1, chosen, RECORDED)
    assert len(rows) == sum(answer.graded in end_to_end.CELLS and outside.GRADED[answer.graded][0] == 1
                            for answer in ANSWERS)
    for row in rows:
        where = f"{row['student']}, {row['graded']}/{row['name']}"
        assert row["same_verdicts"], f"{where}: scored {row['scores']}, not the check-level verdicts"
        assert row["diagnosis_on_page"] is (True if row["named_at_check_level"] else None), \
            f"{where}: the feedback does not show the hidden check's diagnosis"
        assert not row["raw_error_in_tests"], f"{where}: a test cell shows a raw error, not a check's message"
    notebook = end_to_end.NOTEBOOKS[1]
    for sid in list(chosen)[:VALIDATED]:
        failed = [failure for failure in
                  Validator().validate(str(course / "submitted" / sid / ASSIGNMENT / f"{notebook}.ipynb"))["failed"]
                  if "CheckFailed" in failure.get("raw_error", "")]  # not the written answer, left blank here
        wrong = {graded for graded, answer in chosen[sid].items()
                 if answer.mistakes and not answer.visible_passes}
        assert len(failed) == len(wrong), (sid, wrong, [f.get("raw_error", "")[:200] for f in failed])
    # what `make demo-class` tells a newcomer to open: a row per student, the ranked misconceptions, a page each
    with open(made["grades"], newline="", encoding="utf-8") as handle:
        grades = {row["student_id"]: row for row in csv.DictReader(handle)}
    assert set(grades) == set(chosen) and len({row["total"] for row in grades.values()}) > 1
    report = made["report"].read_text(encoding="utf-8")
    assert "mask." in report and "attention." in report  # diagnosis keys of notebook 01, ranked
    assert {page.relative_to(course).parts[1] for page in made["feedback"]} == set(chosen)
    from test_demo_class import unopened
    assert unopened(demo_class.what_to_open(made), chosen) == [], demo_class.what_to_open(made)
    with pytest.raises(FileExistsError):
        demo_class.make_demo_class(course)
