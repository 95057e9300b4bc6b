"""The written answers that quote the student's own run, and the grader's note beside each (issue 54).

Four written questions ask about the student's own run: part 2's counts (deterministic: their configuration),
part 4's curves and part 6's fine-tuning (training runs), and part 5's MLM demo on a sentence of their variant (the
masking deterministic, the guesses from training).  Grading re-runs the notebook, so what the student saw is gone
from the autograded notebook; autograde keeps it first (``RecordSubmittedFigures``, before ClearOutput), and after
the re-run ``NoteOwnRun`` puts a note for the grader under the answer: each figure the answer states, and whether
the submitted outputs and the grader's re-run show it, and for part 5 the demo's lines, submitted and re-run.
``RemoveGraderNotes`` takes the note out of the feedback.  A figure found in neither is worth a question (``make
interviews`` asks it too).
"""
from __future__ import annotations

import re
from typing import NamedTuple

from translab.contract import MLM_DEMO_PREFIX, MLM_GUESSES


class OwnRun(NamedTuple):
    grade_id: str             # the written answer
    deterministic: bool       # its figures: the re-run must show them
    lines: str | None = None  # the output lines that start with it are quoted whole in the note, submitted and re-run


OWN_RUN = {"02_model_and_parameters": OwnRun("written_parameters", True),
           "04_transfer_experiment": OwnRun("written_interpretation", False),
           "05_masked_language_modeling": OwnRun("written_mlm", False, MLM_DEMO_PREFIX),
           "06_transfer_at_scale": OwnRun("written_scale", False)}
SUBMITTED_KEY = "submitted_figures"  # notebook metadata ("translab"): the figures the submitted outputs showed
SUBMITTED_LINES_KEY = "submitted_lines"  # and the quoted lines (``OwnRun.lines``)
MAX_LINES = 40        # quoted from one notebook's outputs
MAX_LINE_CHARS = 300  # of each
TRAINED_LINES = (MLM_GUESSES,)  # quoted lines that come from training; the others must be the same in both runs
NOTE_MARK = "**For the grader, not in the student's feedback.**"
MAX_FIGURES = 5_000  # kept from one notebook's outputs
MAX_STATED = 20      # listed from one answer
# a figure worth comparing: 4 digits or more (thousands separators allowed), or 3 decimals or more
FIGURE = re.compile(r"(?<![\w.])(\d{1,3}(?:[,\u202f\u00a0' _]\d{3})+|\d{4,}|\d+\.\d{3,})(?![\d])")


def figures(text: str) -> set[str]:
    """The figures worth comparing in ``text``, written one way (no separators): 1,008,100 and 1008100 are one."""
    return {re.sub(r"[,\u202f\u00a0' _]", "", found) for found in FIGURE.findall(text)}


def text_of(value) -> str:
    """A notebook's text field as one string (nbformat allows a list of lines)."""
    return "".join(value) if isinstance(value, list) else str(value or "")


def outputs_text(notebook: dict) -> str:
    """The text of a notebook's outputs (streams and plain-text results), read as JSON, capped."""
    parts = []
    for cell in notebook.get("cells", []):
        for output in cell.get("outputs", []) if isinstance(cell, dict) else []:
            if isinstance(output, dict):
                parts.append(text_of(output.get("text")) + text_of((output.get("data") or {}).get("text/plain")))
    return "\n".join(parts)[:1_000_000]


def quoted_lines(text: str, prefix: str | None) -> list[str]:
    """The lines of ``text`` that start with ``prefix`` (none without one), capped."""
    if not prefix:
        return []
    return [line[:MAX_LINE_CHARS] for line in text.splitlines() if line.startswith(prefix)][:MAX_LINES]


def fenced(lines: list[str]) -> str:
    """``lines`` as one markdown code block whose fence no line can close: what a student printed stays text."""
    longest = max((len(run) for line in lines for run in re.findall(r"`+", line)), default=0)
    fence = "`" * max(3, longest + 1)
    return "\n".join([fence, *lines, fence])


def lines_note(submitted: list[str], rerun: list[str]) -> str:
    """Part 5's demo lines as submitted and as re-run, and whether the deterministic one agrees."""
    def masking(lines: list[str]) -> list[str]:
        return [line for line in lines if not line.startswith(TRAINED_LINES)]
    verdict = ("the submitted notebook shows no demo output, so there is nothing to compare: ask whether it ran."
               if not submitted else "the submitted and re-run masking lines are the same."
               if masking(submitted) == masking(rerun) else
               "**the submitted and re-run masking lines differ**: another variant's code or another `mask_tokens` ran "
               "(or, rarely, a random draw of PyTorch's that differs between two machines); ask.")
    return "\n".join([
        "The demo's lines as the student submitted them:", "",
        fenced(submitted) if submitted else "(none: the submitted notebook shows no demo output)", "",
        "and as the grader's re-run printed them:", "",
        fenced(rerun) if rerun else "(none: the re-run printed no demo line)", "",
        "The masking is seeded from the student's variant code and made by their own `mask_tokens`: " + verdict
        + " The guesses come from training, which the re-run shortens or leaves out (a demo no graded cell needs)."])


def shown(figure: str) -> str:
    return f"{int(figure):,}" if figure.isdigit() else figure


def note(stated: set[str], submitted: set[str], rerun: set[str], deterministic: bool, public: set[str] = frozenset(),
         quoted: tuple[list[str], list[str]] | None = None) -> str:
    """The grader's note under an own-run answer: each stated figure against the student's run, the re-run and the
    released notebook (``public``: the figures everyone was given, the worked example's); with ``quoted``, the
    output lines an ``OwnRun`` quotes, as (submitted, re-run)."""
    lines = [NOTE_MARK + " The answer's figures against the outputs the student submitted and the grader's re-run "
             "(the grading budget, on the grading machine):", ""]
    if not stated:
        lines.append("- the answer states no figure of 4 digits or 3 decimals or more.")
    for figure in sorted(stated, key=lambda f: float(f))[:MAX_STATED]:
        where = [name for name, found in (("in the submitted outputs", submitted), ("in the re-run", rerun),
                                          ("in the released notebook (everyone's)", public)) if figure in found]
        lines.append(f"- {shown(figure)}: {' and '.join(where) if where else 'in none of them: ask where it comes from'}")
    lines += ["", "These figures are deterministic: the submitted outputs and the re-run must agree." if deterministic
              else "Training figures: the re-run takes a smaller budget (its training demos may not run at all), so "
                   "judge the submitted ones for plausibility, not equality."]
    if quoted is not None:
        lines += ["", lines_note(*quoted)]
    return "\n".join(lines)


def is_note(cell) -> bool:
    """A grader's note: never a graded cell, whatever its text (a written answer that starts like one stays)."""
    return (cell.get("cell_type") == "markdown" and not (cell.get("metadata") or {}).get("nbgrader")
            and text_of(cell.get("source")).startswith(NOTE_MARK))
