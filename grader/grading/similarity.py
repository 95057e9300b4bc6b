"""Who may have copied whom: every pair of students' answers, task by task, fingerprinted as MOSS does
(``make similarity``, after the submissions are in ``submitted/``).

nbgrader, otter and PrairieLearn compare nothing (nbgrader#1837); instructors extract code cells and run MOSS by
hand.  Here each answer cell (an nbgrader solution cell, by its ``grade_id``) of each student is tokenised and
winnowed by copydetect (PyPI, MOSS's algorithm: names become V, F and O, strings S, comments and layout vanish, so
renamed variables and moved statements still match); the released stub of that cell is boilerplate, and so is any
fingerprint that half the class shares (independent right answers to a short task).  A pair's score is the share
of their answers' code that matches, summed over tasks and weighed by length, so a one-line task cannot drown the
list.  Each student is also compared with translab's own implementation of each task (``REFERENCE``), and with
a past year's ``submitted/`` when given (``--past``).

Writes, under ``reports/`` of the course:

* ``similarity.csv``   one row per pair and task, pairs ranked by their score;
* ``similarity.html``  the ranked pairs, each task's two answers side by side with the matching spans marked:
                       every character from a submission escaped, no script.

A submission is the student's data: parsed as JSON (never run), capped in size, escaped in HTML, defused in CSV.
"""
from __future__ import annotations

import csv
import html
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

from translab.contract import ASSIGNMENT

from grader.course import read_notebook_json
from grader.course.spreadsheet import defuse_formula
from grader.course.withheld import IMPLEMENTS, definitions

NOISE = 25       # matches shorter than this many filtered characters are noise (copydetect's noise threshold)
GUARANTEE = 30   # matches this long are always found (its guarantee threshold: the winnowing window follows)
TOP_PAIRS = 30   # pairs shown side by side in the HTML page


@dataclass
class Answer:
    student: str
    task: str           # "<notebook>/<grade_id>"
    source: str
    fingerprint: object = None


@dataclass
class Match:
    task: str
    a: str
    b: str
    overlap: int          # matching characters of the filtered code (a's side)
    similarity: tuple     # share of each answer's fingerprinted code that matches
    length: int           # the shorter answer's fingerprinted length
    spans: tuple          # (a's slices, b's slices) in the original sources
    sources: tuple        # (a's answer, b's answer), as submitted


@dataclass
class Pair:
    a: str
    b: str
    matches: list = field(default_factory=list)

    @property
    def score(self) -> float:
        """The share of the pair's answers that matches, each task weighed by its length."""
        total = sum(m.length for m in self.matches)
        return sum(min(m.overlap, m.length) for m in self.matches) / total if total else 0.0


def answer_cells_of(notebook: dict | None) -> dict[str, str]:
    """grade_id -> source of each answer cell (an nbgrader solution code cell) of a notebook read as JSON."""
    cells = {}
    for cell in (notebook or {}).get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = (cell.get("metadata") or {}).get("nbgrader") or {}
        if meta.get("solution") and isinstance(meta.get("grade_id"), str):
            source = cell.get("source", "")
            cells[meta["grade_id"]] = "".join(source) if isinstance(source, list) else str(source)
    return cells


def answer_cells(path: Path) -> dict[str, str]:
    """grade_id -> source of each answer cell of a notebook (empty when unreadable: the report goes on)."""
    return answer_cells_of(read_notebook_json(path))


def released_notebooks(root: Path) -> list[Path]:
    """What every student was given: the course's release, else the repository's student notebooks."""
    return sorted((root / "release" / ASSIGNMENT).glob("*.ipynb")) or sorted(
        (root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))


def released_stubs(root: Path) -> dict[str, str]:
    """task -> the released stub of each answer cell."""
    stubs = {}
    for path in released_notebooks(root):
        for grade_id, source in answer_cells(path).items():
            stubs[f"{path.stem}/{grade_id}"] = source
    return stubs


def _answers(folder: Path, prefix: str = "") -> list[Answer]:
    found = []
    for student in sorted(p for p in folder.iterdir() if p.is_dir()) if folder.is_dir() else []:
        for path in sorted((student / ASSIGNMENT).glob("*.ipynb")):
            for grade_id, source in answer_cells(path).items():
                found.append(Answer(prefix + student.name, f"{path.stem}/{grade_id}", source))
    return found


REFERENCE = "translab (its own code)"  # the pseudo-student whose answers are translab's implementation of each task


def reference_answers(root: Path) -> list[Answer]:
    """translab's own implementation of each task (``grader.course.withheld.IMPLEMENTS``), from the course's copy: an
    answer that matches it was copied from the library (a released stage, or a classmate's checkout)."""
    import ast
    found, modules = [], {}
    for task, names in IMPLEMENTS.items():
        parts = []
        for entry in names:
            module, name = entry.split(":")
            path = root / "translab" / f"{module}.py"
            if not path.is_file():
                continue
            if module not in modules:
                text = path.read_text(encoding="utf-8")
                modules[module] = (text, definitions(ast.parse(text)))
            text, defined = modules[module]
            if name in defined:
                parts.append(ast.get_source_segment(text, defined[name]))
        if parts:
            found.append(Answer(REFERENCE, task, "\n\n".join(parts) + "\n"))
    return found


def is_extra(student: str) -> bool:
    """Compared with each student, never counted as one: a past year's, translab's own code."""
    return student.startswith("past:") or student == REFERENCE


def _stable_kgram_hashes(string: str, k: int):
    """copydetect hashes k-grams with Python's ``hash()``, salted anew in every process (PYTHONHASHSEED): which
    k-grams winnowing keeps, and so a pair's score, changed from one run to the next (a reordered copy scored 0.48
    to 0.75).  An unkeyed 64-bit BLAKE2b digest makes the same class give the same report on every run."""
    import hashlib
    import numpy as np
    return np.array([int.from_bytes(hashlib.blake2b(string[offset:offset + k].encode("utf-8", "surrogatepass"),
                                                    digest_size=8).digest(), "little", signed=True)
                     for offset in range(len(string) - k + 1)], dtype=np.int64)


def _fingerprint(source: str, boilerplate):
    import copydetect.utils
    from copydetect import CodeFingerprint
    copydetect.utils.hashed_kgrams = _stable_kgram_hashes  # its fingerprinting looks the name up in its module
    return CodeFingerprint("answer.py", NOISE, GUARANTEE - NOISE + 1, boilerplate=boilerplate, fp=io.StringIO(source),
                           language="python")


def compare(root: Path, past: Path | None = None, common_share: float = 0.5) -> list[Pair]:
    """Every pair of students (and each student with ``past``), ranked by score, highest first."""
    import numpy as np
    from copydetect import compare_files
    answers = _answers(root / "submitted")
    past_answers = (_answers(past, "past:") if past else []) + reference_answers(root)
    stubs = released_stubs(root)
    by_task: dict[str, list[Answer]] = {}
    for answer in answers + past_answers:
        by_task.setdefault(answer.task, []).append(answer)
    students = {a.student for a in answers}
    common = max(5, int(common_share * len(students)))  # a fingerprint this many share is the task's, not a copy
    pairs: dict[tuple, Pair] = {}
    for task, group in sorted(by_task.items()):
        stub = _fingerprint(stubs.get(task, ""), None).hashes if task in stubs else set()
        for answer in group:
            answer.fingerprint = _fingerprint(answer.source, np.array(sorted(stub), dtype=np.int64))
        counts: dict[int, int] = {}
        for answer in group:
            if not is_extra(answer.student):
                for value in answer.fingerprint.hashes:
                    counts[value] = counts.get(value, 0) + 1
        shared = np.array(sorted(stub | {h for h, n in counts.items() if n >= common}), dtype=np.int64)
        if len(shared) > len(stub):
            for answer in group:
                answer.fingerprint = _fingerprint(answer.source, shared)
        for i, first in enumerate(group):
            for second in group[i + 1:]:
                if is_extra(first.student) and is_extra(second.student):
                    continue
                if not first.fingerprint.hashes or not second.fingerprint.hashes:
                    continue
                overlap, similarity, spans = compare_files(first.fingerprint, second.fingerprint)
                if overlap <= 0:
                    continue
                a, b = sorted((first, second), key=lambda answer: answer.student)
                if a is not first:
                    similarity, spans = similarity[::-1], spans[::-1]
                length = int(min(first.fingerprint.token_coverage, second.fingerprint.token_coverage))
                pair = pairs.setdefault((a.student, b.student), Pair(a.student, b.student))
                pair.matches.append(Match(task, a.student, b.student, int(overlap), tuple(float(s) for s in similarity),
                                          length, spans, (a.source, b.source)))
    # pairs with nothing in common still have a score of 0: only those with a match are listed
    return sorted(pairs.values(), key=lambda pair: (-pair.score, pair.a, pair.b))


def write(root: Path, pairs: list[Pair], seconds: float) -> tuple[Path, Path]:
    folder = root / "reports"
    folder.mkdir(exist_ok=True)
    table = folder / "similarity.csv"
    with open(table, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rank", "student_a", "student_b", "pair_score", "task", "similarity_a", "similarity_b",
                         "matching_characters"])
        for rank, pair in enumerate(pairs, 1):
            for match in sorted(pair.matches, key=lambda m: -max(m.similarity)):
                writer.writerow([rank, defuse_formula(pair.a), defuse_formula(pair.b), f"{pair.score:.3f}", match.task,
                                 f"{match.similarity[0]:.3f}", f"{match.similarity[1]:.3f}", match.overlap])
    page = folder / "similarity.html"
    page.write_text(_html(pairs, seconds), encoding="utf-8")
    return table, page


def _marked(source: str, slices) -> str:
    from copydetect.utils import highlight_overlap
    import numpy as np
    spans = np.asarray(slices)
    if spans.size == 0:
        return html.escape(source)
    text, _ = highlight_overlap(source, spans, '<mark>', '</mark>', escape_html=True)
    return text


def _html(pairs: list[Pair], seconds: float) -> str:
    rows = "".join(f"<tr><td>{rank}</td><td>{html.escape(p.a)}</td><td>{html.escape(p.b)}</td><td>{p.score:.0%}</td>"
                   f"<td>{html.escape(', '.join(sorted({m.task for m in p.matches})))}</td></tr>"
                   for rank, p in enumerate(pairs, 1))
    sections = []
    for rank, pair in enumerate(pairs[:TOP_PAIRS], 1):
        blocks = []
        for match in sorted(pair.matches, key=lambda m: -max(m.similarity)):
            left, right = match.sources
            blocks.append(f"<h3>{html.escape(match.task)}: {match.similarity[0]:.0%} / {match.similarity[1]:.0%}</h3>"
                          f"<div class='side'><pre>{_marked(left, match.spans[0])}</pre>"
                          f"<pre>{_marked(right, match.spans[1])}</pre></div>")
        sections.append(f"<h2 id='pair-{rank}'>{rank}. {html.escape(pair.a)} and {html.escape(pair.b)}: "
                        f"{pair.score:.0%} of their answers match</h2>" + "".join(blocks))
    return (
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>"
        "<meta http-equiv='Content-Security-Policy' content=\"default-src 'none'; style-src 'unsafe-inline'\">"
        "<title>Similar answers</title><style>body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
        "td,th{border:1px solid #767676;padding:2px 8px;overflow-wrap:anywhere}.side{display:flex;flex-wrap:wrap;gap:1em}"
        ".side pre{flex:1 1 20em;min-width:0;background:#f6f6f6;padding:.5em;white-space:pre-wrap;overflow-wrap:anywhere}"
        "mark{background:#ffd54f}</style></head><body><main>"
        f"<h1>Similar answers</h1><p>{len(pairs)} pairs with matching code, ranked by the share of their answers that "
        f"match (each task weighed by its length; the released stub and code half the class shares left out). "
        f"Computed in {seconds:.1f} s. A match is a reason to look, not a verdict.</p>"
        f"<table><tr><th>rank</th><th>student</th><th>student</th><th>match</th><th>tasks</th></tr>{rows}</table>"
        + "".join(sections) + "</main></body></html>")


def main(root: Path, past: Path | None = None) -> int:
    start = time.perf_counter()
    pairs = compare(root, past)
    seconds = time.perf_counter() - start
    table, page = write(root, pairs, seconds)
    students = len({p.name for p in (root / "submitted").iterdir() if p.is_dir()}) if (root / "submitted").is_dir() else 0
    print(f"similarity: {students} students, {len(pairs)} pairs with matching code, in {seconds:.1f} s: {table}, {page}")
    for pair in pairs[:5]:
        print(f"  {pair.score:.0%}  {pair.a}  {pair.b}  ({', '.join(sorted({m.task for m in pair.matches}))})")
    return 0
