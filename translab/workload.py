"""How long a student should expect to spend on each notebook: the course's estimate of the working time (reading,
writing the answers and the written question), core and optional, in one place.

The machine's share is measured, not estimated: each training cell prints its time before it starts
(``translab.budget``), and the README's bench table gives each notebook's (``results/bench.json``).  The notebooks'
headers and the README state these minutes; tests/test_project.py checks them against this table.
"""
from __future__ import annotations

from typing import NamedTuple


class Work(NamedTuple):
    core: int        # minutes: the graded cells and the written question
    optional: int    # minutes: the self-check and trying the demos with other values
    optional_what: str


WORK = {
    "01": Work(75, 15, "the self-checks; the $\\sqrt{d}$ demo with other widths"),
    "02": Work(90, 15, "the self-check; the tiny examples with other sizes"),
    "03": Work(85, 20, "the self-check; the attention maps of other sentences; sampling from your own prompts at other settings"),
    "04": Work(60, 20, "the self-check; a second seed of the fine-tuning run"),
    "05": Work(60, 15, "the self-check; guessing other masked words"),
    "06": Work(120, 20, "the self-check; the attention maps of other sentences"),
}
TRAINS = ("03", "04", "05", "06")  # the notebooks with a training cell, which prints its measured time first
WEEK = 10 * 60  # minutes: a course's week of work for a lab, which the core and optional parts together stay within


def header(part: str) -> str:
    """The line at the top of notebook ``part`` that says how long to expect."""
    work = WORK[part]
    machine = (" Training cells print how long they take before they start." if part in TRAINS
               else " Every cell runs in seconds.")
    return (f"**Time.** Expect about {work.core} minutes of work, plus about {work.optional} optional "
            f"({work.optional_what}).{machine}")
