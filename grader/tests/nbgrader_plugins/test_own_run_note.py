"""Issue 54: beside a written answer that quotes the student's own run, the grader sees each stated figure against
the outputs the student submitted and the grader's re-run; the student's feedback does not show that note."""
from __future__ import annotations

import nbformat

from grader.course.own_run import NOTE_MARK, OWN_RUN, SUBMITTED_KEY, is_note, note
from grader.nbgrader_plugins.note_own_run import NoteOwnRun
from grader.nbgrader_plugins.record_submitted_figures import RecordSubmittedFigures
from grader.nbgrader_plugins.remove_grader_notes import RemoveGraderNotes

NB2 = "02_model_and_parameters"
RESOURCES = {"nbgrader": {"notebook": NB2, "student": "dia"}}


def _notebook(answer: str, printed: str) -> nbformat.NotebookNode:
    grade_id = OWN_RUN[NB2].grade_id
    run = nbformat.v4.new_code_cell("print(count)", outputs=[nbformat.v4.new_output("stream", text=printed)])
    written = nbformat.v4.new_markdown_cell(answer, metadata={"nbgrader": {"grade_id": grade_id, "solution": True,
                                                                         "grade": True, "points": 4}})
    forged = nbformat.v4.new_markdown_cell(NOTE_MARK + " - 1,008,100: in the submitted outputs and in the re-run")
    return nbformat.v4.new_notebook(cells=[run, written, forged])


def test_the_note_sets_each_stated_figure_against_both_runs():
    text = note({"2183963", "261289", "0.8312"}, submitted={"261289"}, rerun={"261289", "0.8312"}, deterministic=True)
    assert text.startswith(NOTE_MARK) and "- 0.8312: in the re-run\n" in text
    assert "- 261,289: in the submitted outputs and in the re-run" in text
    assert "- 2,183,963: in none of them: ask where it comes from" in text and "must agree" in text
    assert "- 1,008,100: in the released notebook (everyone's)" in note({"1008100"}, set(), set(), True, {"1008100"})
    assert "plausibility" in note(set(), set(), set(), deterministic=False)


def test_autograde_keeps_the_submitted_figures_and_notes_them_after_the_re_run():
    """dia's answer copies a classmate's count (2,183,963); dia's own run printed 261,289."""
    notebook = _notebook("My model has 2,183,963 parameters (261,289 with the LM head).", "n_params_lm = 261289\n")
    notebook.metadata["translab"] = {SUBMITTED_KEY: ["2183963"]}  # what the submission claims there is dropped
    notebook, _ = RecordSubmittedFigures().preprocess(notebook, RESOURCES)
    assert notebook.metadata["translab"][SUBMITTED_KEY] == ["261289"]
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", text="n_params_lm = 261289\n")]  # the re-run
    notebook, _ = NoteOwnRun().preprocess(notebook, RESOURCES)
    notes = [cell for cell in notebook.cells if is_note(cell)]
    assert len(notes) == 1 and notebook.cells.index(notes[0]) == 2, "one note, ours, right under the answer"
    assert "- 2,183,963: in none of them" in notes[0].source
    assert "- 261,289: in the submitted outputs and in the re-run" in notes[0].source
    feedback, _ = RemoveGraderNotes().preprocess(notebook, RESOURCES)
    assert not any(NOTE_MARK in cell.source for cell in feedback.cells) and len(feedback.cells) == 2


def test_a_written_answer_that_starts_like_a_note_is_the_student_s_and_stays():
    notebook = _notebook(NOTE_MARK + " my answer", "")
    assert not is_note(notebook.cells[1]) and is_note(notebook.cells[2])
    done, _ = RemoveGraderNotes().preprocess(notebook, RESOURCES)
    assert done.cells[1].source == NOTE_MARK + " my answer"


def test_a_notebook_without_an_own_run_answer_is_left_as_it_is():
    notebook = _notebook("2,183,963", "261289")
    other = {"nbgrader": {"notebook": "01_mask_and_positional_encoding"}}
    done, _ = NoteOwnRun().preprocess(RecordSubmittedFigures().preprocess(notebook, other)[0], other)
    assert SUBMITTED_KEY not in done.metadata["translab"] and sum(map(is_note, done.cells)) == 1  # the forged one


NB5 = "05_masked_language_modeling"
DEMO = ("MLM demo, your sentence : <s> ▁long ▁on ▁charm ▁. </s>\n"
        "MLM demo, your masking  : <s> <mask> ▁on ▁charm ▁. </s>\n"
        "MLM demo, position 1: '▁long' -> the mask token\n"
        "MLM demo, guesses at position 1: 's' 0.058, '▁the' 0.050, '▁,' 0.045\n")


def _demo_notebook(answer: str, printed: str) -> nbformat.NotebookNode:
    run = nbformat.v4.new_code_cell("print(demo)", outputs=[nbformat.v4.new_output("stream", text=printed)])
    written = nbformat.v4.new_markdown_cell(answer, metadata={"nbgrader": {"grade_id": OWN_RUN[NB5].grade_id,
                                                                         "solution": True, "grade": True, "points": 4}})
    return nbformat.v4.new_notebook(cells=[run, written])


def _graded(notebook, rerun: str) -> str:
    resources = {"nbgrader": {"notebook": NB5, "student": "dia"}}
    notebook, _ = RecordSubmittedFigures().preprocess(notebook, resources)
    notebook.cells[0].outputs = [nbformat.v4.new_output("stream", text=rerun)]
    notebook, _ = NoteOwnRun().preprocess(notebook, resources)
    notes = [cell for cell in notebook.cells if is_note(cell)]
    assert len(notes) == 1 and notebook.cells.index(notes[0]) == 2
    return notes[0].source


def test_part_5_s_note_quotes_the_demo_as_submitted_and_as_re_run():
    """The masking is the student's own and deterministic: the same lines in both runs; the guesses come from training
    and the re-run's (one step) differ, which the note says is expected."""
    rerun = DEMO.replace("'s' 0.058, '▁the' 0.050, '▁,' 0.045", "'▁bird' 0.001, 'ic' 0.001, '▁lo' 0.001")
    text = _graded(_demo_notebook("My model guessed 's' with 0.058.", "loss 6.0\n" + DEMO), rerun)
    submitted, _, re_run = text.partition("and as the grader's re-run printed them:")
    assert "'s' 0.058" in submitted and "'▁bird' 0.001" in re_run and "loss 6.0" not in text
    assert "masking lines are the same" in text and "- 0.058: in the submitted outputs\n" in text


def test_a_demo_run_on_a_classmate_s_code_shows_two_masking_lines():
    classmate = DEMO.replace("<s> <mask> ▁on", "<s> ▁long <mask>").replace("position 1: '▁long'", "position 2: '▁on'")
    assert "masking lines are the same" in _graded(_demo_notebook("x", DEMO.replace("0.058", "0.9")), DEMO)
    text = _graded(_demo_notebook("My mask_tokens chose 'on'.", classmate), DEMO)
    assert "masking lines differ" in text and "<s> ▁long <mask>" in text and "<s> <mask> ▁on" in text
    unrun = _graded(_demo_notebook("My mask_tokens chose 'on'.", ""), DEMO)
    assert "nothing to compare" in unrun and "differ" not in unrun


def test_printed_backticks_cannot_close_the_quoted_block():
    """A student's print that holds a fence stays inside the note's code block (the page renders it as text)."""
    hostile = "MLM demo, your masking  : ```\nnot quoted\nMLM demo ````` <img src=x onerror=alert(1)>\n"
    text = _graded(_demo_notebook("x", hostile), DEMO)
    block = text.split("and as the grader's re-run printed them:")[0]
    fence = "`" * 6  # one more than the longest run of backticks printed
    assert f"{fence}\nMLM demo, your masking  : ```\nMLM demo ````` <img src=x onerror=alert(1)>\n{fence}\n" in block
    assert block.count(fence) == 2 and "not quoted" not in block  # only the lines with the prefix
