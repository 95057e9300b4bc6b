"""How long a student should expect to spend on each notebook: the course's estimate of the working time (reading,
writing the answers and the written question), core and optional, in one place.

The core minutes follow a stated rule (``core_minutes``), computed from the solution notebook and the bench:
reading the prose at ``PROSE_WPM`` words a minute and the given code at ``CODE_WPM``; each answer cell
``ANSWER_MINUTES`` plus ``LINE_MINUTES`` per line of the reference answer (thinking, writing, a failed check or two);
``WRITTEN_MINUTES`` per point of a written question; the notebook's measured compute at the student budget
(``results/bench.json``); rounded to 5 minutes.  The optional minutes are the course's estimate.  The machine's
share is also printed where it is spent: each training cell prints its time before it starts (``translab.budget``).
The notebooks' headers and the README state these minutes; tests/test_project.py checks them against this table
and the table against the rule.
"""
from __future__ import annotations

from typing import NamedTuple


class Work(NamedTuple):
    core: int        # minutes: the graded cells and the written question
    optional: int    # minutes: the self-check and trying the demos with other values
    optional_what: str


WORK = {
    "01": Work(80, 15, "the self-checks; the $\\sqrt{d}$ demo with other widths"),
    "02": Work(105, 15, "the self-check; the tiny examples with other sizes"),
    "03": Work(100, 20, "the self-check; the attention maps of other sentences; sampling from your own prompts at other settings"),
    "04": Work(70, 20, "the self-check; a second seed of the fine-tuning run"),
    "05": Work(50, 15, "the self-check; guessing other masked words"),
    "06": Work(115, 20, "the self-check; the attention maps of other sentences"),
}
TRAINS = ("03", "04", "05", "06")  # the notebooks with a training cell, which prints its measured time first
WEEK = 10 * 60  # minutes: a course's week of work for a lab, which the core stays within (issue 51); the optional
# parts are for the students who have time left, and may take a week's total past it


PROSE_WPM = 150       # words of markdown a minute: careful reading of technical prose
CODE_WPM = 150        # words of the given code cells a minute
ANSWER_MINUTES = 3    # each answer cell, whatever its length
LINE_MINUTES = 1      # each non-blank line of the reference answer
WRITTEN_MINUTES = 4   # each point of a written question


def core_minutes(notebook: dict, compute_s: float) -> int:
    """The rule above on a solution notebook (as nbformat reads it, or its JSON) and its measured compute (s)."""
    import re

    def words(cell) -> int:
        return len(re.findall(r"\w+", "".join(cell["source"])))

    def grading(cell) -> dict:
        return cell.get("metadata", {}).get("nbgrader", {})
    cells = [cell for cell in notebook["cells"] if not cell.get("metadata", {}).get("translab", {}).get("after_grading")]
    prose = sum(words(cell) for cell in cells if cell["cell_type"] == "markdown" and not grading(cell).get("solution"))
    given = sum(words(cell) for cell in cells if cell["cell_type"] == "code" and not grading(cell).get("solution"))
    answers = [cell for cell in cells if cell["cell_type"] == "code" and grading(cell).get("solution")]
    lines = sum(1 for cell in answers for line in "".join(cell["source"]).splitlines()
                if line.strip() and not line.strip().startswith("###"))
    written = sum(grading(cell).get("points", 0) for cell in cells
                  if cell["cell_type"] == "markdown" and grading(cell).get("solution"))
    minutes = (prose / PROSE_WPM + given / CODE_WPM + ANSWER_MINUTES * len(answers) + LINE_MINUTES * lines
               + WRITTEN_MINUTES * written + compute_s / 60)
    return int(5 * round(minutes / 5))


def header(part: str) -> str:
    """The line at the top of notebook ``part`` that says how long to expect."""
    work = WORK[part]
    machine = (" Training cells print how long they take before they start." if part in TRAINS
               else " Every cell runs in seconds.")
    return (f"**Time.** Expect about {work.core} minutes of work, plus about {work.optional} optional "
            f"({work.optional_what}).{machine}")
