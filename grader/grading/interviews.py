"""Who to ask about their own code, and what (``make interviews``): the evidence that a student understood the work
they submitted, where a detector's score is none.

Picked: a seeded sample of the class (its size the instructor's; the seed comes from the course secret, so the
students cannot work it out), and those the submissions point to:

* a notebook whose saved outputs show a configuration other than the one derived from the student's id;
* the top pairs of ``make similarity`` (``grader.grading.similarity``), and an answer that matches translab's own code;
* a figure in a written answer that none of the student's outputs or counts shows, and a classmate's do.

Each picked student gets one page, ``reports/interviews/<student>.html``: why they were picked, and three or four
questions, each quoting one line of their own answer cells (``grader.grading.interview_questions``) with what a
good reply mentions.  ``reports/interviews.csv`` lists them, with the points and comment the instructor fills in
and ``make interviews RECORD=reports/interviews.csv`` records (``grader.course.code_interview``).  Everything
a submission holds is the student's data: read as JSON (never run), escaped in HTML, defused in CSV.
"""
from __future__ import annotations

import csv
import hashlib
import hmac
import html
import random
import re
from dataclasses import dataclass, field
from pathlib import Path

from translab import variants as lab_variants
from translab.contract import ASSIGNMENT

from grader.course import GradingError, read_notebook_json, students
from grader.course.own_run import figures, outputs_text, shown, text_of
from grader.course.spreadsheet import defuse_formula
from grader.course.variants import mismatch, require_secret, rows, variant_in_outputs
from grader.grading import similarity
from grader.grading.interview_questions import FALLBACK, PROBES, Probe

QUESTIONS = 4            # per student: at most one per answer cell
TOP_PAIRS = 3            # the similarity report's pairs whose students are picked ...
SIMILAR = 0.5            # ... when at least this share of their answers match
FOLDER = "interviews"    # under reports/
TABLE = "interviews.csv"
MARKERS = re.compile(r"#+\s*(BEGIN|END) SOLUTION|raise NotImplementedError|^\s*(pass|\.\.\.)\s*$")


@dataclass
class Question:
    task: str
    line_number: int      # in the student's answer cell, from 1
    line: str             # quoted from it
    probe: Probe


@dataclass
class Pick:
    student: str
    reasons: list[str] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def _notebooks(root: Path, student: str) -> list[tuple[str, dict]]:
    """(notebook stem, notebook) of each readable submitted notebook; an unreadable one is left out."""
    found = []
    for path in sorted((root / "submitted" / student / ASSIGNMENT).glob("*.ipynb")):
        notebook = read_notebook_json(path)
        if notebook is not None:
            found.append((path.stem, notebook))
    return found


def _written_answers(notebook: dict) -> list[str]:
    """The student's written answers: markdown cells nbgrader marks as a solution."""
    return [text_of(cell.get("source")) for cell in notebook["cells"] if isinstance(cell, dict)
            and cell.get("cell_type") == "markdown" and ((cell.get("metadata") or {}).get("nbgrader") or {}).get("solution")]


def own_lines(answer: str, stub: str) -> list[tuple[int, str]]:
    """(line number, line) of what the student wrote in an answer cell: not the released stub's lines, the
    solution markers, blank lines or comments."""
    given = {line.strip() for line in stub.splitlines()}
    return [(number, line.rstrip()) for number, line in enumerate(answer.splitlines(), 1)
            if line.strip() and not line.strip().startswith("#") and line.strip() not in given
            and not MARKERS.search(line)]


def questions_for(answers: dict[str, str], stubs: dict[str, str], rng: random.Random,
                  first: tuple[str, ...] = ()) -> list[Question]:
    """Up to ``QUESTIONS`` questions, one per answer cell that holds the student's own code: the tasks in ``first``
    (those a flag names) before the others, in ``rng``'s order; each the first probe of its task that finds one of
    the student's lines, else the fallback on their longest line."""
    tasks = [task for task in answers if own_lines(answers[task], stubs.get(task, ""))]
    rng.shuffle(tasks)
    tasks.sort(key=lambda task: task not in first)
    asked = []
    for task in tasks[:QUESTIONS]:
        lines = own_lines(answers[task], stubs.get(task, ""))
        found = next(((probe, number, line) for probe in PROBES if probe.task == task
                      for number, line in lines if re.search(probe.pattern, line)), None)
        if found is None:
            number, line = max(lines, key=lambda item: (len(item[1].strip()), -item[0]))
            found = (FALLBACK, number, line)
        probe, number, line = found
        asked.append(Question(task, number, line, probe))
    return asked


def interview_seed(root: Path) -> int:
    """The sample's seed: from the course secret, so it is the same on every run and unknown to the students."""
    digest = hmac.new(require_secret(root), b"translab-interviews-v1", hashlib.sha256).digest()
    return int.from_bytes(digest[:8], "big")


def _configuration_reasons(root: Path, class_ids: list[str], notebooks: dict[str, list]) -> dict[str, list[str]]:
    secret = require_secret(root)
    found: dict[str, list[str]] = {}
    for student in class_ids:
        derived = lab_variants.derive_code(secret, student)
        for stem, notebook in notebooks[student]:
            why = mismatch(variant_in_outputs(notebook), derived)
            if why:
                found.setdefault(student, []).append(f"{stem}: {why}")
    return found


def _similarity_reasons(root: Path) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for rank, pair in enumerate(similarity.compare(root)[:TOP_PAIRS], 1):
        if pair.score < SIMILAR:
            continue
        matched = sorted({match.task for match in pair.matches})
        tasks = ", ".join(matched[:4]) + (f" and {len(matched) - 4} more" if len(matched) > 4 else "")
        for me, other in ((pair.a, pair.b), (pair.b, pair.a)):
            if not similarity.is_extra(me):
                found.setdefault(me, []).append(f"make similarity, pair {rank}: {pair.score:.0%} of their answers "
                                                f"match {other}'s ({tasks})")
    return found


def _borrowed_figures(root: Path, class_ids: list[str], notebooks: dict[str, list]) -> dict[str, list[str]]:
    """A figure in a written answer that is none of the student's own (outputs, part 2's counts) and is a
    classmate's; figures the released notebooks show everyone are left out."""
    public = set()
    for path in similarity.released_notebooks(root):
        public |= figures(path.read_text(encoding="utf-8", errors="replace"))
    table = {row["student"]: row for row in rows(class_ids, root)}
    counts = {student: {str(value) for value in row.values() if isinstance(value, int)} for student, row in table.items()}
    own = {student: figures("\n".join(outputs_text(notebook) for _, notebook in notebooks[student]))
           | counts.get(student, set()) for student in class_ids}
    found: dict[str, list[str]] = {}
    for student in class_ids:
        mine = table.get(student, {})
        for stem, notebook in notebooks[student]:
            for figure in sorted(figures("\n".join(_written_answers(notebook))) - own[student] - public):
                whose = sorted(other for other in class_ids if other != student and figure in own[other])
                if not whose:
                    continue
                theirs = (f" (their own counts: {mine['n_params_lm']:,} with the LM head, "
                          f"{mine['n_params_classifier']:,} with the classifier)"
                          if any(figure in counts.get(other, ()) for other in whose) and mine else "")
                others = ", ".join(whose[:3]) + (" and others" if len(whose) > 3 else "")
                found.setdefault(student, []).append(f"{stem}: a written answer states {shown(figure)}, which none of their "
                                                     f"outputs or counts shows{theirs}; it is in the work of {others}")
    return found


def pick(root: Path, sample: int, seed: int | None = None) -> list[Pick]:
    """The students to interview, each with why, in the class's order."""
    class_ids = students(root)
    if not class_ids:
        raise GradingError(f"nothing to pick from: no submissions in {root / 'submitted'} (run `make collect` first)")
    if sample < 0:
        raise GradingError(f"--sample {sample}: give how many students to pick at random (0 or more)")
    seed = interview_seed(root) if seed is None else seed
    reasons: dict[str, list[str]] = {}
    for student in random.Random(seed).sample(class_ids, min(sample, len(class_ids))):
        reasons.setdefault(student, []).append("picked at random (the course's seeded sample)")
    notebooks = {student: _notebooks(root, student) for student in class_ids}
    for found in (_configuration_reasons(root, class_ids, notebooks), _similarity_reasons(root),
                  _borrowed_figures(root, class_ids, notebooks)):
        for student, why in found.items():
            reasons.setdefault(student, []).extend(why)
    stubs = similarity.released_stubs(root)
    picks = []
    for student in sorted(reasons):
        answers = {f"{stem}/{grade_id}": source for stem, notebook in notebooks[student]
                   for grade_id, source in similarity.answer_cells_of(notebook).items()}
        flagged = tuple(task for task in answers if any(task in why for why in reasons[student]))
        picks.append(Pick(student, reasons[student],
                          questions_for(answers, stubs, random.Random(f"{seed}:{student}"), first=flagged)))
    return picks


def page_name(student: str) -> str:
    """A file name for the student's page: their id where it is a plain one, else a digest of it."""
    if re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,99}", student):
        return f"{student}.html"
    return f"student-{hashlib.sha256(student.encode()).hexdigest()[:16]}.html"


STYLE = ("body{font-family:sans-serif;margin:2em;max-width:60em;line-height:1.5;color:#1a1a1a}"
         "pre{background:#f4f4f4;padding:.5em;overflow:auto;white-space:pre-wrap}"
         ".good{border-left:4px solid #1b5e20;padding-left:.75em}a{color:#0b57d0}")


def _page(title: str, body: str) -> str:
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
            "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body><main><h1>{html.escape(title)}</h1>{body}</main></body></html>")


def _prose(text: str) -> str:
    """Escaped, with `code` in backticks shown as code."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", html.escape(text))


def student_page(chosen: Pick) -> str:
    reasons = "".join(f"<li>{html.escape(why)}</li>" for why in chosen.reasons)
    asked = []
    for number, question in enumerate(chosen.questions, 1):
        asked.append(
            f"<section><h2>Question {number}: {html.escape(question.task)}</h2>"
            f"<p>Their line {question.line_number}:</p><pre><code>{html.escape(question.line)}</code></pre>"
            f"<p><strong>Ask:</strong> {_prose(question.probe.question)}</p>"
            f"<p class='good'><strong>A good reply mentions:</strong> {_prose(question.probe.good_reply)}</p>"
            "</section>")
    none = "" if asked else "<p>No answer cell holds code of their own: ask them to walk you through any notebook.</p>"
    return _page(f"Code interview: {chosen.student}",
                 "<p>Five minutes with the student's own notebooks open. Ask each question about the quoted line; "
                 "a reply is evidence of understanding, a wrong one is a reason to talk, never a verdict.</p>"
                 f"<h2>Why this student</h2><ul>{reasons}</ul>" + "".join(asked) + none)


def index_page(picks: list[Pick]) -> str:
    items = "".join(f"<li><a href='{html.escape(page_name(p.student))}'>{html.escape(p.student)}</a>: "
                    f"{html.escape('; '.join(p.reasons))}</li>" for p in picks)
    return _page("Code interviews", f"<p>{len(picks)} students to interview.</p><ul>{items}</ul>")


def write(root: Path, picks: list[Pick]) -> tuple[Path, Path]:
    folder = root / "reports" / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.html"):
        old.unlink()
    for chosen in picks:
        (folder / page_name(chosen.student)).write_text(student_page(chosen), encoding="utf-8")
    (folder / "index.html").write_text(index_page(picks), encoding="utf-8")
    table = root / "reports" / TABLE
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student", "page", "reasons", "points", "comment"])  # the last two: RECORD reads them
        for chosen in picks:
            writer.writerow([defuse_formula(chosen.student), f"{FOLDER}/{page_name(chosen.student)}",
                             defuse_formula("; ".join(chosen.reasons)), "", ""])
    return table, folder / "index.html"


def main(root: Path, sample: int, seed: int | None = None) -> int:
    picks = pick(root, sample, seed)
    table, index = write(root, picks)
    print(f"interviews: {len(picks)} of {len(students(root))} students: {index}, {table}")
    for chosen in picks:
        print(f"  {chosen.student}: {'; '.join(chosen.reasons)}")
    return 0
