"""``python -m grader.testing.outside.end_to_end`` (``make corpus``): the outside corpus graded as a class.

The check-level table (``python -m grader.testing.outside``) runs each answer beside its check in this process; here
the same answers are submissions, graded as an instructor grades them: a released course, ``python -m grader
autograde`` (the sandboxed kernels, the checks judged outside the student's process) and ``feedback``.  Student i of
a notebook answers every graded cell of it with the i-th outside answer to that cell; an answer whose check builds the
student's answer to another cell (the weight mapping builds the student's BertBase) goes to a student whose other cell
is right, as at the check level (so does a sampler, which draws from the student's next_token_probs).

For every answer it records whether each test cell's score is the check-level verdict, whether the hidden check's
diagnosis (its first line) is on the student's feedback page, and whether a test cell shows an error other than a
check's message (a raw traceback); the figures
go to ``results/outside_corpus_end_to_end.json``.  ``grader/tests/test_outside_corpus.py`` runs part 1 this way in
``make test``.
"""
from __future__ import annotations

import argparse
import html
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import nbformat

from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

from . import GRADED, Answer, diagnosis_keys, answers
from .__main__ import RESULTS as CHECK_LEVEL

RESULTS = REPO_ROOT / "results" / "outside_corpus_end_to_end.json"
NOTEBOOKS = {1: "01_mask_and_positional_encoding", 2: "02_model_and_parameters", 3: "03_pretraining_and_generation",
             4: "04_transfer_experiment", 5: "05_masked_language_modeling", 6: "06_transfer_at_scale"}
# graded answer -> (its answer cell, its visible test cells, its hidden test cells), by grade_id
CELLS = {
    "mask": ("mask_answer", ["mask_visible"], ["mask_hidden"]),
    "encoding": ("pe_answer", ["pe_visible"], ["pe_hidden"]),
    "attention": ("attention_answer", ["attention_visible"], ["attention_hidden"]),
    "multi_head": ("mha_answer", ["mha_visible"], ["mha_hidden"]),
    "base": ("transformer_answer", ["transformer_visible"], ["transformer_hidden"]),
    "heads": ("heads_answer", ["heads_visible"], ["heads_hidden"]),
    "pieces": ("pieces_answer", ["pieces_visible"], ["pieces_hidden"]),
    "lm_targets": ("targets_answer", ["targets_visible"], ["targets_hidden"]),
    "lm_loss": ("loss_answer", ["loss_visible"], ["loss_hidden"]),
    "greedy": ("greedy_answer", ["greedy_visible"], ["greedy_hidden"]),
    "decoding": ("decoding_answer", ["decoding_visible"], ["decoding_hidden"]),
    "sampling": ("sampling_answer", ["sampling_visible"], ["sampling_hidden"]),
    "accuracy": ("accuracy_answer", ["accuracy_visible"], ["accuracy_hidden"]),
    "transfer": ("transfer_answer", ["transfer_visible"], ["transfer_hidden"]),
    "mlm_masking": ("masking_answer", ["masking_structure", "masking_rates"], ["masking_hidden"]),
    "mlm_loss": ("mlm_loss_answer", ["mlm_loss_visible"], ["mlm_loss_hidden"]),
    "bert_base": ("bert_base_answer", ["bert_base_visible"], ["bert_base_hidden"]),
    "weight_mapping": ("mapping_answer", ["mapping_visible"], ["mapping_hidden"]),
    "bert_count": ("bert_count_answer", ["bert_count_visible"], ["bert_count_hidden"]),
    "classifier": ("classifier_answer", ["classifier_visible"], ["classifier_hidden"]),
}
# A check that builds the student's answer to another cell: the answer goes to a student whose other cell is right.
NEEDS_RIGHT = {"weight_mapping": "bert_base", "sampling": "decoding"}
TEST_SECRET = "translab-tests: the secret of the temporary courses"  # a temporary course's, as the tests use


def class_of(part: int) -> dict[str, dict[str, Answer]]:
    """{student id: {graded answer: the answer that student submits}} for one notebook."""
    by_graded = {graded: [a for a in answers() if a.graded == graded]
                 for graded, (where, _) in GRADED.items() if where == part}
    students: dict[str, dict[str, Answer]] = {}
    size = max(len(found) for found in by_graded.values())
    for i in range(size):
        chosen = students.setdefault(f"outside{part}x{i:02d}", {})
        for graded, found in by_graded.items():
            if i < len(found):
                chosen[graded] = found[i]
    for graded, other in NEEDS_RIGHT.items():
        for i, (sid, chosen) in enumerate(list(students.items())):
            if graded in chosen and other in chosen and chosen[other].mistake is not None:
                students[f"outside{part}y{i:02d}"] = {graded: chosen.pop(graded)}
    return students


def submit(course: Path, part: int) -> dict[str, dict[str, Answer]]:
    """Each student's notebook of ``part`` as released, their answers pasted into its answer cells, into
    ``submitted/``; the weight mapping's own students get the check level's right BertBase beside it."""
    from . import support_for
    chosen = class_of(part)
    notebook_name = NOTEBOOKS[part]
    for sid, answered in chosen.items():
        notebook = nbformat.read(course / "notebooks" / ASSIGNMENT / f"{notebook_name}.ipynb", as_version=4)
        sources = {CELLS[graded][0]: answer.source.strip() + "\n" for graded, answer in answered.items()}
        for graded, other in NEEDS_RIGHT.items():
            if graded in answered and other not in answered:
                sources[CELLS[other][0]] = support_for(answered[graded]).strip() + "\n"
        for cell in notebook.cells:
            grade_id = cell.metadata.get("nbgrader", {}).get("grade_id")
            if grade_id in sources:
                cell.source = sources.pop(grade_id)
        if sources:
            raise LookupError(f"{notebook_name} has no cells {sorted(sources)}: update CELLS")
        folder = course / "submitted" / sid / ASSIGNMENT
        folder.mkdir(parents=True, exist_ok=True)
        nbformat.write(notebook, folder / f"{notebook_name}.ipynb")
    return chosen


def page_text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8"))) if page.exists() else ""


def test_cell_errors(notebook: Path) -> dict[str, list]:
    """{grade_id: the error outputs of its cell} of an autograded notebook's graded cells."""
    document = nbformat.read(notebook, as_version=4)
    return {cell.metadata["nbgrader"]["grade_id"]: [output for output in cell.get("outputs", [])
                                                    if output.output_type == "error"]
            for cell in document.cells if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("grade_id")}


def is_raw(error) -> bool:
    """An error other than a check's message (a check that fails shows CheckFailed and its message only; a given cell
    that the student's wrong answer breaks shows their own traceback, as in their notebook, and is not a test cell)."""
    return error.ename != "CheckFailed" or "Traceback (most recent call last)" in "\n".join(error.traceback)


def judge(course: Path, part: int, chosen: dict[str, dict[str, Answer]], recorded: dict) -> list[dict]:
    """One row per answer: the check level's verdicts (``recorded``: the rows of ``results/outside_corpus.json``)
    against the gradebook's scores, the autograded test cells and the feedback page."""
    from grader.course.gradebook import cell_scores
    notebook_name = NOTEBOOKS[part]
    rows = []
    for sid, answered in chosen.items():
        scores = cell_scores(course, sid)
        page = page_text(course / "feedback" / sid / ASSIGNMENT / f"{notebook_name}.html")
        errors = test_cell_errors(course / "autograded" / sid / ASSIGNMENT / f"{notebook_name}.ipynb")
        for graded, answer in answered.items():
            _, visible_cells, hidden_cells = CELLS[graded]
            full = {cell: scores[(notebook_name, cell)][0] == scores[(notebook_name, cell)][1]
                    for cell in visible_cells + hidden_cells}
            check_level = recorded[(graded, answer.name)]
            graded_as = {"visible": all(full[cell] for cell in visible_cells),
                         "hidden": all(full[cell] for cell in hidden_cells)}
            hidden = [error for cell in hidden_cells for error in errors[cell]]
            # what the hidden check said in grading (the checker composes it there): the check level's diagnosis, and
            # its first line on the student's page
            shown = bool(hidden) and all(
                diagnosis_keys(error.evalue) == set(check_level["hidden"]["keys"])
                and error.evalue.splitlines()[0].strip() in page for error in hidden)
            rows.append({
                "graded": graded, "name": answer.name, "student": sid, "mistakes": sorted(answer.mistakes),
                "scores": {cell: scores[(notebook_name, cell)][0] for cell in full},
                "same_verdicts": all(graded_as[split] == check_level[split]["passed"] for split in graded_as),
                "named_at_check_level": check_level["named"],
                # a named mistake's hidden diagnosis must reach the student; ``None`` where there is none to show
                "diagnosis_on_page": shown if check_level["named"] else None,
                "raw_error_in_tests": any(is_raw(error) for cell in full for error in errors[cell]),
            })
    return rows


def summarise(rows: list[dict]) -> dict:
    table = {}
    for graded in [g for g in GRADED if any(row["graded"] == g for row in rows)] + ["all"]:
        mine = [row for row in rows if graded in ("all", row["graded"])]
        named = [row for row in mine if row["named_at_check_level"]]
        table[graded] = {"answers": len(mine), "same_verdicts": sum(row["same_verdicts"] for row in mine),
                         "named": len(named), "diagnosis_on_page": sum(bool(row["diagnosis_on_page"]) for row in named),
                         "raw_error_in_tests": sum(row["raw_error_in_tests"] for row in mine)}
    return table


def recorded_rows() -> dict:
    rows = json.loads(CHECK_LEVEL.read_text(encoding="utf-8"))["answers"]
    return {(row["graded"], row["name"]): row for row in rows}


def grader_command(course: Path, *args: str) -> None:
    """``python -m grader --root course ARGS``, or a RuntimeError with what it said."""
    done = subprocess.run([sys.executable, "-m", "grader", "--root", str(course), *args], capture_output=True,
                          text=True)
    if done.returncode != 0:
        raise RuntimeError(f"python -m grader {' '.join(args)} failed:\n{(done.stdout + done.stderr)[-4000:]}")


def released_course(root: Path) -> Path:
    """A course at ``root`` with the repository's solutions released (what ``python -m grader release`` writes)."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    shutil.copytree(REPO_ROOT / "solutions", root / "solutions")
    grader_command(root, "release")
    return root


def grade_class(course: Path, parts: list[int]) -> tuple[list[dict], dict]:
    """Submit ``parts``' classes into ``course`` (released), autograde and feedback: (rows, seconds per phase)."""
    chosen = {part: submit(course, part) for part in parts}
    seconds = {}
    for phase, args in (("autograde", ("autograde",)), ("feedback", ("feedback", "--force"))):
        started = time.perf_counter()
        grader_command(course, *args)
        seconds[phase] = round(time.perf_counter() - started, 1)
    recorded = recorded_rows()
    rows = [row for part in parts for row in judge(course, part, chosen[part], recorded)]
    seconds["students"] = sum(len(students) for students in chosen.values())
    return rows, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.testing.outside.end_to_end",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--parts", type=int, nargs="+", default=list(NOTEBOOKS), choices=list(NOTEBOOKS))
    parser.add_argument("--output", type=Path, default=RESULTS, help="where the figures go (default: %(default)s)")
    parser.add_argument("--keep", type=Path, help="grade in this new folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    from grader.course.variants import SECRET_ENV
    os.environ.setdefault(SECRET_ENV, TEST_SECRET)
    with tempfile.TemporaryDirectory(prefix="translab-outside-") as tmp:
        course = released_course(args.keep or Path(tmp) / "course")
        rows, seconds = grade_class(course, args.parts)
    table = summarise(rows)
    print(f"{'graded answer':16} {'answers':>7} {'same verdicts':>13} {'named':>5} {'on the page':>11} "
          f"{'raw errors':>10}")
    for graded, entry in table.items():
        print(f"{graded:16} {entry['answers']:7} {entry['same_verdicts']:13} {entry['named']:5} "
              f"{entry['diagnosis_on_page']:11} {entry['raw_error_in_tests']:10}")
    print(f"{seconds['students']} students: autograde {seconds['autograde']} s, feedback {seconds['feedback']} s")
    document = {"what": "the outside-style corpus (grader/testing/outside) graded as a class: each answer's test cells "
                        "scored by `python -m grader autograde` against the check-level verdicts of "
                        "results/outside_corpus.json, and each named mistake's hidden diagnosis on the feedback page",
                "command": "python -m grader.testing.outside.end_to_end", "parts": args.parts, "seconds": seconds,
                "summary": table, "answers": rows}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output}")
    failed = table["all"]["answers"] - table["all"]["same_verdicts"] + table["all"]["raw_error_in_tests"] + (
        table["all"]["named"] - table["all"]["diagnosis_on_page"])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
