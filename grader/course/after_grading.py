"""Cells students see only after grading: the summaries that restate a written question's answer, the answers
to the ungraded self-check questions, and the model answer of each written question.

A markdown cell of the solutions tagged ``"translab": {"after_grading": true}`` is taken out of the student
notebooks when they are released and put back in each student's feedback, read from the solutions, after the cell
it follows there (``nbgrader_plugins/remove_after_grading.py`` and ``show_after_grading.py`` apply this rule).
The model answer of a written question is the solution of its answer cell (nbgrader's release leaves only "YOUR
ANSWER HERE"); the feedback shows it below the student's own answer, found by ``grade_id``, once that answer
has its grade (feedback forced out earlier says it will come with it).
"""
from __future__ import annotations


KEY = "after_grading"
NOTE = "*Shown after grading.*\n\n"
MODEL_ANSWER = "*Model answer, shown after grading* (your answer is above; the rubric gives the points):\n\n"
# where feedback goes out (``--force``) before a written answer has its grade: the model answer waits for the grade
AWAITING_GRADE = ("*The model answer to this question comes with its grade: your instructor has not graded your "
                  "answer yet.*")


def written_answer(cell) -> bool:
    """A written question's answer cell: markdown, graded, and the student's to write."""
    grading = cell.metadata.get("nbgrader", {})
    return cell.cell_type == "markdown" and bool(grading.get("grade")) and bool(grading.get("solution"))


def model_answer(cell) -> str:
    """The solution's text of a written answer cell, without nbgrader's delimiters."""
    lines = [line for line in cell.source.splitlines() if line.strip() not in ("### BEGIN SOLUTION", "### END SOLUTION")]
    return "\n".join(lines).strip()


def after_grading(cell) -> bool:
    return cell.cell_type == "markdown" and bool(cell.metadata.get("translab", {}).get(KEY))
