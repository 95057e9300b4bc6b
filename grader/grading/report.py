"""What the class got wrong: per task, how many students passed, and the misconceptions the checks diagnosed,
ranked by how many students made them (``make report``, after ``make autograde``).

Reads the gradebook (scores per graded cell) and the autograded notebooks: a failing test cell's error output is
a ``CheckFailed`` whose value ends with ``[diagnosis: key ...]`` (``translab.checks``, keys described in
``translab.diagnosis``); keys joined by ``|`` are explanations that give identical numbers and count as one.
Writes, under ``reports/`` of the course:

* ``tasks.csv``          one row per autograded test cell: notebook, task, points, students, passed, failed,
                         not_submitted (the notebook never handed in: not a failure of the task), pass_rate (of
                         those who handed it in), diagnosed (failures with a diagnosis), top_misconception;
* ``misconceptions.csv`` one row per misconception: rank, kind, key, description, students, tasks, example (the
                         first line of one student's message);
* ``report.html``        the same as one page with two plots (PNG inside the page): no script, every piece of text
                         that comes from a submission escaped; and where the last batch's seconds went
                         (``grader.grading.phases``).

Everything in an autograded notebook is the student's data: it is parsed as JSON (never executed or rendered),
keys must look like keys, and text is escaped (HTML) or defused (CSV formulas).
"""
from __future__ import annotations

import base64
import csv
import html
import io
import re
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from translab.contract import ASSIGNMENT, untagged
from translab.diagnosis import NOT_MISCONCEPTIONS, describe, is_valid_key
from translab.plots import PALETTE

from grader.course import read_notebook_json
from grader.course.gradebook import open_gradebook
from grader.course.spreadsheet import defuse_formula

from .phases import PHASES_NAME, SETUP, read_students, read_totals

NO_DIAGNOSIS = "(no diagnosis)"
NOT_RUN = "(no output: not run)"
NOT_READ = "(no graded copy to read)"


@dataclass
class Task:
    notebook: str
    name: str
    points: float
    scores: dict = field(default_factory=dict)          # student -> score
    causes: dict = field(default_factory=dict)          # student -> [misconception keys]
    missing: set = field(default_factory=set)           # students who never handed this notebook in

    @property
    def passed(self) -> list[str]:
        return sorted(s for s, score in self.scores.items() if score is not None and score >= self.points)

    @property
    def not_submitted(self) -> list[str]:
        """Scored 0 by nbgrader ("No submitted file"), but nothing to re-teach: kept apart from ``failed``."""
        return sorted(s for s in self.scores if s in self.missing and s not in self.passed)

    @property
    def failed(self) -> list[str]:
        return sorted(s for s in self.scores if s not in self.passed and s not in self.missing)

    @property
    def pass_rate(self) -> float | None:
        """Of the students who handed the notebook in."""
        handed_in = len(self.scores) - len(self.not_submitted)
        return len(self.passed) / handed_in if handed_in else None


@dataclass
class Misconception:
    key: str
    description: str
    students: set = field(default_factory=set)
    tasks: set = field(default_factory=set)
    example: str = ""

    @property
    def kind(self) -> str:
        """"misconception" (what a student got wrong), or "other": why a check could not judge (not written, an
        error, calls translab, not run, no graded copy, a check without a diagnosis)."""
        return "other" if is_other(self.key) else "misconception"


def is_other(key: str) -> bool:
    return key.startswith(("(", "error")) or key in NOT_MISCONCEPTIONS


def causes_of(output: dict) -> tuple[list[str], str]:
    """(misconception keys, first line of the message) of one error output of a test cell."""
    ename = str(output.get("ename", ""))[:80]
    evalue = str(output.get("evalue", ""))[:20000]
    first = (evalue.strip().splitlines() or [""])[0][:200]
    if ename != "CheckFailed":
        label = f"error: {ename}" if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_.]{0,79}", ename) else "error"
        return [label], first
    _, key = untagged(evalue)
    if not key:
        return [NO_DIAGNOSIS], first
    keys = [k for k in key.split() if is_valid_key(k)]
    return keys or [NO_DIAGNOSIS], first


def _test_cell_outputs(notebook: dict) -> dict:
    """{grade_id: outputs} of the autograded code test cells of a notebook (JSON as stored)."""
    out = {}
    for cell in notebook.get("cells", []):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        meta = cell.get("metadata", {}).get("nbgrader", {}) if isinstance(cell.get("metadata"), dict) else {}
        if isinstance(meta, dict) and meta.get("grade") and isinstance(meta.get("grade_id"), str):
            outputs = cell.get("outputs", [])
            out[meta["grade_id"]] = [o for o in outputs if isinstance(o, dict)] if isinstance(outputs, list) else []
    return out


def collect(root: Path) -> tuple[list[Task], dict[str, Misconception]]:
    """Tasks (autograded test cells) with each student's score and diagnosed misconceptions."""
    from nbgrader.api import MissingEntry

    db = root / "gradebook.db"
    if not db.exists():
        raise FileNotFoundError("no gradebook.db yet: run `make autograde` first")
    tasks: dict[tuple[str, str], Task] = {}
    with open_gradebook(db) as gradebook:
        assignment = gradebook.find_assignment(ASSIGNMENT)
        for notebook in sorted(assignment.notebooks, key=lambda nb: nb.name):
            for cell in notebook.grade_cells:
                if cell.cell_type == "code":
                    tasks[(notebook.name, cell.name)] = Task(notebook.name, cell.name, float(cell.max_score))
        students = sorted(s.id for s in gradebook.students)
        for student in students:
            try:
                gradebook.find_submission(ASSIGNMENT, student)
            except MissingEntry:
                continue
            for (notebook, name), task in tasks.items():
                try:
                    task.scores[student] = gradebook.find_grade(name, notebook, ASSIGNMENT, student).score
                except MissingEntry:
                    task.scores[student] = 0.0
    misconceptions: dict[str, Misconception] = {}
    for notebook in sorted({nb for nb, _ in tasks}):
        for student in sorted({s for t in tasks.values() for s in t.scores}):
            safe = re.fullmatch(r"[A-Za-z0-9_.@+-]{1,128}", student) and student not in (".", "..")
            graded_copy = root / "autograded" / student / ASSIGNMENT / f"{notebook}.ipynb"
            document = read_notebook_json(graded_copy) if safe else None
            outputs = _test_cell_outputs(document) if document else {}
            handed_in = not safe or graded_copy.exists() or (
                root / "submitted" / student / ASSIGNMENT / f"{notebook}.ipynb").exists()
            for (nb, name), task in tasks.items():
                if nb == notebook and not handed_in:
                    task.missing.add(student)
                if nb != notebook or student not in task.failed:
                    continue
                errors = [o for o in outputs.get(name, []) if o.get("output_type") == "error"]
                keys, example = [NOT_RUN if document else NOT_READ], ""
                if errors:
                    keys, example = causes_of(errors[-1])
                task.causes[student] = keys
                for key in keys:
                    entry = misconceptions.setdefault(key, Misconception(key, _describe(key)))
                    entry.students.add(student)
                    entry.tasks.add(f"{notebook}/{name}")
                    entry.example = entry.example or example
    return list(tasks.values()), misconceptions


def _describe(key: str) -> str:
    if key == NO_DIAGNOSIS:
        return "failed a check that names no specific misconception (see the feedback)"
    if key == NOT_RUN:
        return "the test cell has no output: not run (a kernel that died, a time budget spent)"
    if key == NOT_READ:
        return "no autograded copy of the handed-in notebook could be read (not graded, or not a notebook)"
    if key.startswith("error"):
        return "the test cell raised an error before the check could run (e.g. a name the answer cell never defined)"
    return describe(key) or "(a key this version of translab does not know)"


def ranked(misconceptions: dict[str, Misconception]) -> list[Misconception]:
    """Misconceptions by the number of students who made them (most first), then the other reasons for failing."""
    return sorted(misconceptions.values(), key=lambda m: (m.kind != "misconception", -len(m.students), m.key))


# a task's bar, left to right: (legend, the Task's list of those students, how it is drawn); each part is told
# apart by its hatch as well as its colour
TASK_BARS = (("passed", "passed", {"color": PALETTE[0]}),
             ("failed", "failed", {"color": PALETTE[1], "hatch": "//", "edgecolor": "white"}),
             ("not submitted", "not_submitted",
              {"color": "white", "hatch": "..", "edgecolor": PALETTE[4], "linewidth": 0.8}))


def _plot(tasks: list[Task], top: list[Misconception]) -> tuple[str, str]:
    """Two horizontal bar charts as a PNG in base64, per task who passed, failed and never handed the notebook in,
    and students per misconception, and what they show in words (the image's alt): each part of a task's bar is
    hatched differently as well as coloured, so that the categories never differ by colour alone."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows_tasks, rows_mis = max(len(tasks), 1), max(len(top), 1)
    figure, (left, right) = plt.subplots(1, 2, figsize=(13, 0.28 * max(rows_tasks, rows_mis) + 1.6))
    names = [f"{t.notebook[:2]} {t.name}" for t in tasks]
    start = [0] * len(tasks)
    for label, students, style in TASK_BARS:
        counts = [len(getattr(t, students)) for t in tasks]
        left.barh(names, counts, left=start, label=label, **style)
        start = [a + b for a, b in zip(start, counts)]
    left.invert_yaxis()
    left.set_xlabel("students")
    left.set_title("per task")
    left.legend(loc="lower right", fontsize=8)
    labels = [(m.description if len(m.description) <= 48 else m.description[:45] + "...") for m in top]
    right.barh(labels or ["(none)"], [len(m.students) for m in top] or [0], color=PALETTE[2])
    right.invert_yaxis()
    right.set_xlabel("students")
    right.set_title("diagnosed misconceptions")
    for axis in (left, right):
        axis.tick_params(axis="y", labelsize=8)
        axis.xaxis.get_major_locator().set_params(integer=True)
    figure.tight_layout()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=90)
    plt.close(figure)
    hardest = max(tasks, key=lambda t: len(t.failed), default=None)
    words = (f"Bar charts: students who passed (plain bars), failed (hatched //) and did not hand the notebook in "
             f"(dotted outline) each of {len(tasks)} tasks")
    if hardest is not None and hardest.failed:
        words += f" (most failed: {hardest.notebook[:2]} {hardest.name}, {len(hardest.failed)} of {len(hardest.scores)})"
    missing = {t.notebook: len(t.not_submitted) for t in tasks if t.not_submitted}
    if missing:
        words += "; not handed in: " + ", ".join(f"notebook {nb[:2]} by {n}" for nb, n in sorted(missing.items()))
    words += f"; students per diagnosed misconception ({len(top)} shown"
    words += f", the most common: {top[0].description}, {len(top[0].students)} students)" if top else ")"
    return base64.b64encode(buffer.getvalue()).decode("ascii"), words + ". The tables below give every number."


def similar_section(folder: Path, shown: int = 10) -> str:
    """The most similar pairs from ``make similarity`` (reports/similarity.csv), when it has run."""
    table = folder / "similarity.csv"
    if not table.exists():
        return ("<h2>Similar answers</h2><p>Not computed yet: <code>make similarity</code> compares every pair of "
                "students' answers (reports/similarity.html).</p>")
    with open(table, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    pairs = list(dict.fromkeys((r["rank"], r["student_a"], r["student_b"], r["pair_score"]) for r in rows))[:shown]
    body = "".join(f"<tr><td>{html.escape(rank)}</td><td>{html.escape(a)}</td><td>{html.escape(b)}</td>"
                   f"<td>{html.escape(score)}</td></tr>" for rank, a, b, score in pairs)
    return (f"<h2>Similar answers</h2><p>The {len(pairs)} pairs whose answers match most (make similarity; side by "
            "side in similarity.html, beside this page). A match is a reason to look, not a verdict.</p>"
            f"<table><tr><th>rank</th><th>student</th><th>student</th><th>share that matches</th></tr>{body}</table>")


def phases_section(root: Path) -> str:
    """Where the last batch's seconds went (``autograded/autograde_phases.csv``, ``grader.grading.phases``): its
    setup and each phase summed over its students, largest first."""
    path = root / "autograded" / PHASES_NAME
    if not path.is_file():
        return ("<h2>Where the grading time went</h2><p>Not recorded: <code>make autograde</code> writes "
                f"autograded/{PHASES_NAME} (a batch graded on a cluster or the warm grader times each student in "
                "autograded/autograde_report.csv only).</p>")
    summed, students = read_totals(path), read_students(path)
    total = sum(summed.values()) or 1.0
    order = [SETUP] + sorted((name for name in summed if name != SETUP), key=lambda name: -summed[name])
    rows = "".join(f"<tr><td>{html.escape(name)}</td><td>{summed.get(name, 0.0):,.1f} s</td>"
                   f"<td>{summed.get(name, 0.0) / total:.0%}</td></tr>" for name in order)
    return (f"<h2>Where the grading time went</h2><p>The last batch ({len(students)} student(s), "
            f"autograded/{PHASES_NAME}): its setup once, then each phase summed over its students.</p>"
            f"<table><tr><th>phase</th><th>time</th><th>share</th></tr>{rows}"
            f"<tr><td>all</td><td>{sum(summed.values()):,.1f} s</td><td>100%</td></tr></table>")


def _html(tasks: list[Task], misconceptions: list[Misconception], students: int, similar: str = "",
          timing: str = "") -> str:
    e = html.escape
    task_rows = "\n".join(
        f"<tr><td>{e(t.notebook)}</td><td>{e(t.name)}</td><td>{len(t.passed)}</td><td>{len(t.failed)}</td>"
        f"<td>{len(t.not_submitted)}</td><td>{_top(t)}</td></tr>" for t in tasks)
    real = [m for m in misconceptions if m.kind == "misconception"]
    other = [m for m in misconceptions if m.kind != "misconception"]
    mis_rows = "\n".join(
        f"<tr><td>{i}</td><td>{len(m.students)}</td><td>{e(m.description)}</td><td><code>{e(m.key)}</code></td>"
        f"<td>{e(', '.join(sorted(m.tasks)))}</td><td>{e(m.example)}</td></tr>" for i, m in enumerate(real, 1))
    other_rows = "\n".join(
        f"<tr><td>{len(m.students)}</td><td>{e(m.description)}</td><td><code>{e(m.key)}</code></td>"
        f"<td>{e(', '.join(sorted(m.tasks)))}</td></tr>" for m in other)
    image, image_text = _plot(tasks, real[:20])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src data:; style-src 'unsafe-inline'">
<title>translab: what to re-teach</title>
<style>body{{font-family:sans-serif;margin:2em;max-width:80em}}table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:.25em .5em;text-align:left;vertical-align:top;overflow-wrap:anywhere}}th{{background:#eee}}
img{{max-width:100%;height:auto}}</style>
</head><body><main>
<h1>{e(ASSIGNMENT)}: what the class got wrong</h1>
<p>{students} students graded. Misconceptions are counted once per student, ranked by how many students made
them; the checks name them in each failing test's message (translab.diagnosis). A notebook a student never handed
in counts as not submitted, not as failed. Text quoted from submissions is escaped.</p>
<img alt="{e(image_text)}" src="data:image/png;base64,{image}">
<h2>Misconceptions, most common first</h2>
<table><tr><th>rank</th><th>students</th><th>misconception</th><th>key</th><th>tasks</th><th>example message</th></tr>
{mis_rows}
</table>
<h2>Failures that name no misconception</h2>
<table><tr><th>students</th><th>reason</th><th>key</th><th>tasks</th></tr>
{other_rows}
</table>
<h2>Tasks</h2>
<table><tr><th>notebook</th><th>task</th><th>passed</th><th>failed</th><th>not submitted</th>
<th>most common misconception</th></tr>
{task_rows}
</table>
{similar}
{timing}
</main></body></html>
"""


def _top(task: Task) -> str:
    counts: dict[str, int] = defaultdict(int)
    for keys in task.causes.values():
        for key in keys:
            counts[key] += 1
    if not counts:
        return ""
    key, n = min(counts.items(), key=lambda item: (-item[1], item[0]))
    return f"{html.escape(_describe(key))} ({n})"


def write(root: Path, out_dir: Path | None = None) -> list[Path]:
    """Write reports/tasks.csv, reports/misconceptions.csv and reports/report.html; the paths."""
    root = Path(root)
    out_dir = Path(out_dir) if out_dir is not None else root / "reports"
    tasks, misconceptions = collect(root)
    order = ranked(misconceptions)
    out_dir.mkdir(parents=True, exist_ok=True)
    students = len({s for t in tasks for s in t.scores})
    with open(out_dir / "tasks.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["notebook", "task", "points", "students", "passed", "failed", "not_submitted", "pass_rate",
                         "diagnosed", "top_misconception"])
        for t in tasks:
            diagnosed = sum(1 for keys in t.causes.values() if not all(is_other(k) for k in keys))
            counts: dict[str, int] = defaultdict(int)
            for keys in t.causes.values():
                for key in keys:
                    counts[key] += 1
            top = min(counts.items(), key=lambda item: (-item[1], item[0]))[0] if counts else ""
            writer.writerow([t.notebook, t.name, t.points, len(t.scores), len(t.passed), len(t.failed),
                             len(t.not_submitted), "" if t.pass_rate is None else f"{t.pass_rate:.2f}", diagnosed,
                             defuse_formula(top)])
    with open(out_dir / "misconceptions.csv", "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["rank", "kind", "key", "description", "students", "tasks", "example"])
        for i, m in enumerate(order, 1):
            writer.writerow([i if m.kind == "misconception" else "", m.kind, defuse_formula(m.key), defuse_formula(m.description),
                             len(m.students), " ".join(sorted(m.tasks)), defuse_formula(m.example)])
    (out_dir / "report.html").write_text(_html(tasks, order, students, similar_section(out_dir), phases_section(root)),
                                         encoding="utf-8")
    return [out_dir / "tasks.csv", out_dir / "misconceptions.csv", out_dir / "report.html"]


def summary(paths: list[Path]) -> str:
    with open(paths[1], newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    top = "; ".join(f"{r['students']} x {r['description']}" for r in rows[:3] if r["kind"] == "misconception")
    return f"wrote {', '.join(str(p) for p in paths)}" + (f"\nmost common: {top}" if top else "")
