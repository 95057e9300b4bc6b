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
