"""The written answers that quote the student's own run, and the grader's note beside each (issue 54).

Three written questions ask for the student's own figures: part 2's counts (deterministic: their configuration),
part 4's curves and part 6's fine-tuning (training runs).  Grading re-runs the notebook, so the figures the
student saw are gone from the autograded notebook; autograde keeps them first (``RecordSubmittedFigures``, before
ClearOutput), and after the re-run ``NoteOwnRun`` puts a note for the grader under the answer: each figure the
answer states, and whether the submitted outputs and the grader's re-run show it.  ``RemoveGraderNotes`` takes the
note out of the feedback.  A figure found in neither is worth a question (``make interviews`` asks it too).
"""
from __future__ import annotations

import re

# notebook -> (the written answer's grade_id, whether its figures are deterministic: the re-run must show them)
OWN_RUN = {"02_model_and_parameters": ("written_parameters", True),
           "04_transfer_experiment": ("written_interpretation", False),
           "06_transfer_at_scale": ("written_scale", False)}
SUBMITTED_KEY = "submitted_figures"  # notebook metadata ("translab"): the figures the submitted outputs showed
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


def shown(figure: str) -> str:
    return f"{int(figure):,}" if figure.isdigit() else figure


def note(stated: set[str], submitted: set[str], rerun: set[str], deterministic: bool, public: set[str] = frozenset()) \
        -> str:
    """The grader's note under an own-run answer: each stated figure against the student's run, the re-run and the
    released notebook (``public``: the figures everyone was given, the worked example's)."""
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
    return "\n".join(lines)


def is_note(cell) -> bool:
    """A grader's note: never a graded cell, whatever its text (a written answer that starts like one stays)."""
    return (cell.get("cell_type") == "markdown" and not (cell.get("metadata") or {}).get("nbgrader")
            and text_of(cell.get("source")).startswith(NOTE_MARK))
