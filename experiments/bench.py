"""Speed of the lab (``make bench``): is our training loop as fast as bare PyTorch, and how long
does grading one submission, and a class, take?

    python -m experiments.bench                        # -> results/bench.json
    python -m experiments.bench --quick --out /tmp/b   # reduced run (what `make test` does)

Throughput is measured on the pretraining workload (the checkpoint's architecture, batches of
32 x 64 real tokens): ``training.train_steps`` against a minimal loop written inline below, on
identical copies of the model and optimizer and the same batches, in alternating rounds (the
median round counts) so that a noisy neighbour hurts both alike.  Then fp32 against bf16
autocast.  The autograde time is measured with ``grader.batch`` on a temporary copy of the
course, or recorded as null with the reason when that cannot be done.
"""
from __future__ import annotations

import argparse
import compileall
import copy
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager, nullcontext
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from translab import data
from translab.contract import ASSIGNMENT, DATA_DIR_ENV, GRADING_ENV
from translab.data import PAD_ID
from translab.datasets import Batch, TokenStream
from translab.model import ModelConfig, build_language_model
from translab.paths import REPO_ROOT, RESULTS_DIR
from translab.training import fast_bf16_available, set_seed, train_steps

SCHEMA_VERSION = 1
# issue 16's targets on a 2-core machine: what the grader README's tables judge the measured figures by
GOALS = {"one_submission_s": 20, "ratio_to_floor": 2, "class_jobs_2_s": 12 * 60, "lab_student_s": 4 * 60}
README = REPO_ROOT / "grader" / "README.md"  # the page of how grading works, with the measured tables
README_BEGIN, README_END = "<!-- bench tables: python -m experiments.bench --readme -->", "<!-- end of bench tables -->"
HUB_BEGIN, HUB_END = "<!-- hub table: python -m experiments.bench --readme -->", "<!-- end of hub table -->"
# what each step of a term on the hub is, in the order the cycle runs them (grader.testing.hub.cycle)
HUB_STEPS = {"generate": "instructor: `python -m grader release` (nbgrader generate_assignment)",
             "student_release": "the student release students' kernels read (`TRANSLAB_HOME`)",
             "start_servers": "every user's server started (first login)",
             "release": "instructor: Release (formgrader)", "fetch": "students: Fetch (Assignments panel)",
             "work": "students: answers saved (contents API)", "submit": "students: Submit (Assignments panel)",
             "collect": "instructor: Collect (formgrader)",
             "autograde": "instructor: `python -m grader autograde --jobs 2` (sandboxed)",
             "manual_grading": "instructor: written answers graded (formgrader)",
             "feedback": "instructor: `python -m grader feedback`",
             "release_feedback": "instructor: Release feedback (formgrader)",
             "fetch_feedback": "students: Fetch feedback (Assignments panel)"}
ARCHITECTURE = {"nhid": ModelConfig.nhid, "nlayers": ModelConfig.nlayers, "nhead": ModelConfig.nhead,
                "dropout": ModelConfig.dropout}  # the shipped checkpoint's shape


def bare_loop(model: nn.Module, batches: list[Batch], optimizer: torch.optim.Optimizer, clip: float,
              bf16: bool) -> list[float]:
    """The reference: the fewest lines that train the same model on the same batches."""
    model.train()
    losses = []
    for batch in batches:
        optimizer.zero_grad(set_to_none=True)
        with torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else nullcontext():
            logits = model(batch.inputs)
        loss = nn.functional.cross_entropy(logits.reshape(-1, logits.size(-1)).float(),
                                           batch.targets.reshape(-1), ignore_index=PAD_ID)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), clip)
        optimizer.step()
        losses.append(loss.item())
    return losses


def make_batches(count: int, batch_size: int, seq_len: int, seed: int = 0) -> list[Batch]:
    tokenizer = data.load_tokenizer()
    stream = TokenStream(tokenizer, data.load_reviews()[:300])
    generator = torch.Generator().manual_seed(seed)
    return [stream.random_batch(batch_size, seq_len, generator) for _ in range(count)]


def _timed(loop, model, batches, optimizer, bf16: bool) -> float:
    """Tokens per second of one pass of ``loop``."""
    tokens = sum(b.inputs.numel() for b in batches)
    start = time.perf_counter()
    loop(model, batches, optimizer, bf16)
    return tokens / (time.perf_counter() - start)


def throughput(steps: int, rounds: int, warmup: int, batch_size: int, seq_len: int, bf16: bool,
               progress: bool = True) -> dict:
    """Median tokens/s of the translab loop and the bare loop over alternating rounds."""
    set_seed(0)
    ntoken = data.load_tokenizer().get_piece_size()
    models = {"translab": build_language_model(ModelConfig(ntoken=ntoken, **ARCHITECTURE))}
    models["bare"] = copy.deepcopy(models["translab"])
    optimizers = {k: torch.optim.AdamW(m.parameters(), lr=1e-4, weight_decay=0.01) for k, m in models.items()}
    loops = {
        "translab": lambda m, b, o, bf: train_steps(m, b, o, None, clip=1.0, bf16=bf, progress=False),
        "bare": lambda m, b, o, bf: bare_loop(m, b, o, clip=1.0, bf16=bf),
    }
    batches = make_batches(steps, batch_size, seq_len)
    for name in loops:  # warm up allocators and kernels, untimed
        loops[name](models[name], batches[:warmup], optimizers[name], bf16)
    measured: dict[str, list[float]] = {name: [] for name in loops}
    label = "bf16" if bf16 else "fp32"
    for round_ in tqdm(range(rounds), desc=f"throughput {label}", disable=not progress, leave=False):
        order = list(loops) if round_ % 2 == 0 else list(reversed(loops))
        for name in order:
            measured[name].append(_timed(loops[name], models[name], batches, optimizers[name], bf16))
    result = {name: {"tokens_per_s": statistics.median(v), "rounds": v} for name, v in measured.items()}
    result["ratio"] = result["translab"]["tokens_per_s"] / result["bare"]["tokens_per_s"]
    return result


COURSE_IGNORE = shutil.ignore_patterns(".venv", ".git", "data", "submitted", "autograded", "feedback", "gradebook.db",
                                       "__pycache__", "*.egg-info", "results", ".pytest_cache")


def course_copy(dest: Path) -> dict:
    """A copy of the course at ``dest`` (no data, no grading folders); returns the env that grades it."""
    shutil.copytree(REPO_ROOT, dest, ignore=COURSE_IGNORE, symlinks=True)
    # compiled, as an instructor's course is from its second run on: where PYTHONDONTWRITEBYTECODE is set (this
    # machine's shells set it) every process of every run would compile grader and translab again (0.1 s)
    for package in ("grader", "translab"):
        compileall.compile_dir(dest / package, quiet=2)
    return {**os.environ, DATA_DIR_ENV: str(Path(os.environ.get(DATA_DIR_ENV, REPO_ROOT / "data")))}


def _grading_ready() -> str | None:
    """Why grading cannot be measured here, or None."""
    if not (REPO_ROOT / "grader" / "batch.py").exists():
        return "grader/batch.py does not exist yet"
    missing = [name for name in ("nbgrader_config.py", "solutions", "grader") if not (REPO_ROOT / name).exists()]
    return f"course files missing: {', '.join(missing)}" if missing else None


def _autograde(course: Path, env: dict, jobs: int, timeout: float, *options: str,
               keep_gradebook: bool = False) -> tuple[float | None, str]:
    """Wall time of ``grader.batch autograde --jobs N [options]`` on the course from an empty gradebook (or the
    one a previous run left, with ``keep_gradebook``), or (None, reason)."""
    for leftover in ("autograded", "feedback") if keep_gradebook else ("gradebook.db", "autograded", "feedback"):
        path = course / leftover
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "grader", "autograde", "--jobs", str(jobs), *options],
                          cwd=course, env=env, capture_output=True, text=True, timeout=timeout)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        return None, f"autograde exited {done.returncode}: {' | '.join(tail)}"
    return round(seconds, 1), ""


SETTLE_S = 2  # before each timed run: the last one's processes (a zygote unmapping torch, a kernel) have exited


def autograde_time(timeout: float = 1800, repeats: int = 3) -> dict:
    """Wall time of ``python -m grader autograde`` on one submission (the solutions), in a temporary copy of
    the course: ``first_run_s`` from an empty gradebook (it also records the assignment), then ``repeats`` times
    with the gradebook ready, as every later submission is graded, whose median is ``seconds`` (one run on a
    shared VM was seen 1.5x off); plus the floor (median of as many) and their ratio.  Each run of the
    submission is followed by one of the floor, so that both see the same minutes of a VM whose speed drifts
    (the same code measured 2.1 and 2.8 an hour apart when they ran in two blocks).  Null with a reason if it
    cannot run."""
    reason = _grading_ready()
    if reason:
        return {"seconds": None, "reason": reason}
    runs, floors = [], []
    with _class_course(students=1, full_every=1) as (course, env, _):
        first, reason = _autograde(course, env, 1, timeout)
        if first is None:
            return {"seconds": None, "reason": reason}
        for _ in range(repeats):
            time.sleep(SETTLE_S)
            seconds, reason = _autograde(course, env, 1, timeout, keep_gradebook=True)
            if seconds is None:
                return {"seconds": None, "reason": reason}
            runs.append(seconds)
            time.sleep(SETTLE_S)
            floors.append(grading_floor())
    measured = [f for f in floors if f.get("seconds")] or floors[:1]
    floor = sorted(measured, key=lambda f: f.get("seconds") or 0)[len(measured) // 2]
    floor["runs_s"] = [f["seconds"] for f in measured]
    seconds = statistics.median(runs)
    paired = [round(run / f["seconds"], 2) for run, f in zip(runs, floors) if f.get("seconds")]
    return {"seconds": seconds, "runs_s": runs, "first_run_s": first, "floor": floor,
            "ratio_to_floor": round(seconds / floor["seconds"], 2) if floor.get("seconds") else None,
            "paired_ratios": paired, "goal_s": GOALS["one_submission_s"],
            "submission": "the solution notebooks, one student", "command": "python -m grader autograde"}


@contextmanager
def _nbgrader_execution(value: str | None):
    """NBGRADER_EXECUTION set to ``value`` (unset for None) inside the block, as it was after: the kernels
    started inside inherit it, so the notebooks run at the budget nbgrader would give them."""
    saved = os.environ.pop(GRADING_ENV, None)
    if value is not None:
        os.environ[GRADING_ENV] = value
    try:
        yield
    finally:
        os.environ.pop(GRADING_ENV, None)
        if saved is not None:
            os.environ[GRADING_ENV] = saved


def graded_and_needed(cells) -> list:
    """The answer and test cells of a notebook, with the cells that define a name they use (transitively):
    what grading must run, without the demos, plots and training runs around it."""
    from grader.demos import is_graded, needed
    code = [cell for cell in cells if cell.cell_type == "code"]
    return [cell for cell, run in zip(code, needed(code, [is_graded(cell) for cell in code])) if run]


def _as_a_student() -> None:
    """The kernels this process starts get a student's own configuration for part 2's counts, as the grader or the
    release's table gives one (``translab.variants``)."""
    from translab import variants
    os.environ.setdefault(variants.VARIANT_ENV, variants.derive_code(b"translab-bench", "student"))


def grading_floor(timeout: float = 600) -> dict:
    """What grading one submission cannot go below: one kernel started once, then each solution notebook's
    answer and test cells, with only the cells they need (``graded_and_needed``), in that one kernel, at the
    grading budget, checks judged in the kernel."""
    import nbformat
    from nbclient import NotebookClient

    _as_a_student()
    folder = REPO_ROOT / "solutions" / ASSIGNMENT
    cells = [cell for path in sorted(folder.glob("*.ipynb"))
             for cell in graded_and_needed(nbformat.read(path, as_version=4).cells)]
    for index, cell in enumerate(cells):
        cell.id = f"floor-{index}"  # cells of six notebooks: their own ids repeat
    notebook = nbformat.v4.new_notebook(cells=cells)
    try:
        with _nbgrader_execution("autograde"):
            start = time.perf_counter()
            client = NotebookClient(notebook, timeout=timeout, kernel_name="python3", shutdown_kernel="immediate",
                                    resources={"metadata": {"path": str(folder)}})
            with client.setup_kernel():
                started = time.perf_counter()
                for index, cell in enumerate(notebook.cells):
                    client.execute_cell(cell, index)
            ran = time.perf_counter()
    except Exception as error:  # a failing cell is a finding, not a crash of the bench
        return {"seconds": None, "reason": f"{type(error).__name__}: {str(error)[:300]}"}
    return {"seconds": round(ran - start, 1), "kernel_start_s": round(started - start, 1),
            "cells_s": round(ran - started, 1), "cells": len(cells),
            "what": "one kernel; every notebook's answer and test cells and the cells they need"}


def build_class(submitted: Path, course: Path, students: int, full_every: int = 3) -> dict:
    """``students`` submissions: every ``full_every``-th the complete solutions (every notebook),
    the others the corpus of broken and hostile cases in turn (``grader.testing.corpus``).  Returns the mix."""
    from grader.testing import corpus
    mix = {"complete_solutions": 0, **{case: 0 for case in _class_cases()}}
    for index, case in enumerate(class_cases(students, full_every)):
        folder = submitted / f"student{index:03d}" / ASSIGNMENT
        if case == "complete_solutions":
            shutil.copytree(course / "solutions" / ASSIGNMENT, folder)
        else:
            corpus.build_case(case, folder, course)
        mix[case] += 1
    return mix


def _class_cases() -> list[str]:
    from grader.testing import corpus
    return [case for case in corpus.CASES if case not in corpus.SPEND_BUDGET]  # those cost their budget each


def class_cases(students: int, full_every: int = 3) -> list[str]:
    """What student ``i`` of ``build_class``'s class submitted: ``complete_solutions`` or a corpus case."""
    cases = _class_cases()
    return ["complete_solutions" if index % full_every == 0 else cases[(index - index // full_every - 1) % len(cases)]
            for index in range(students)]


def seconds_by_case(course: Path, students: int, full_every: int = 3) -> dict:
    """From the batch's report: the seconds each kind of submission took to grade, summed over the class (where
    a class's time goes), most first."""
    import csv

    from grader.batch import REPORT_NAME
    kind = {f"student{index:03d}": case for index, case in enumerate(class_cases(students, full_every))}
    totals: dict[str, float] = {}
    with open(course / "autograded" / REPORT_NAME, encoding="utf-8") as handle:
        for row in csv.DictReader(handle):
            case = kind.get(row["student_id"], "other")
            totals[case] = round(totals.get(case, 0.0) + float(row["seconds"] or 0), 1)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


@contextmanager
def _class_course(students: int, full_every: int):
    """(course, env, mix): a temporary copy of the course whose submitted/ holds ``build_class``'s class."""
    with tempfile.TemporaryDirectory(prefix="translab-bench-") as tmp:
        course = Path(tmp) / "course"
        env = course_copy(course)
        yield course, env, build_class(course / "submitted", course, students, full_every)


def similarity_time(students: int, full_every: int = 3) -> dict:
    """``make similarity`` on ``build_class``'s class: every pair of students' answers compared, the CSV and the
    page written (no grading needed: it reads submitted/)."""
    import subprocess
    with _class_course(students, full_every) as (course, env, mix):
        started = time.time()
        done = subprocess.run([sys.executable, "-m", "grader", "--root", str(course), "similarity"], env=env,
                              capture_output=True, text=True)
        seconds = time.time() - started
        if done.returncode != 0:
            raise RuntimeError(f"make similarity failed: {done.stderr[-2000:]}")
        import csv
        with open(course / "reports" / "similarity.csv", newline="", encoding="utf-8") as handle:
            pairs = len({(row["student_a"], row["student_b"]) for row in csv.DictReader(handle)})
        page = (course / "reports" / "similarity.html").stat().st_size
    return {"students": students, "seconds": round(seconds, 1), "pairs_with_matches": pairs,
            "page_bytes": page, "mix": mix}


def class_autograde(students: int, jobs: list[int], timeout: float = 4 * 3600) -> dict:
    """Wall time of grading a class of ``students`` (complete solutions mixed with the corpus) with each
    ``--jobs`` value, each from an empty gradebook, sandboxed as ``make autograde`` grades."""
    reason = _grading_ready()
    if reason:
        return {"students": students, "reason": reason}
    result = {"students": students, "command": "python -m grader autograde --jobs N", "runs": {}}
    with _class_course(students, full_every=3) as (course, env, result["mix"]):
        for count in jobs:
            seconds, reason = _autograde(course, env, count, timeout)
            result["runs"][f"jobs_{count}"] = ({"seconds": seconds, "per_student_s": round(seconds / students, 1),
                                                "student_seconds_by_case": seconds_by_case(course, students)}
                                               if seconds is not None else {"seconds": None, "reason": reason})
    return result


def isolation_overhead(students: int = 2, rounds: int = 2, timeout: float = 3600) -> dict:
    """What the sandbox costs a submission: the same ``students`` complete submissions graded with --jobs 1,
    sandboxed (as ``make autograde``) and with ``--no-sandbox`` (plain nbgrader kernels), alternately for
    ``rounds`` rounds (a difference of a few seconds a minute is within run-to-run noise: the rounds show it)."""
    reason = _grading_ready()
    if reason:
        return {"students": students, "reason": reason}
    runs = {"sandboxed": [], "no_sandbox": []}
    with _class_course(students, full_every=1) as (course, env, _):
        for _ in range(rounds):
            for name, options in (("sandboxed", ()), ("no_sandbox", ("--no-sandbox",))):
                seconds, reason = _autograde(course, env, 1, timeout, *options)
                if seconds is None:
                    return {"students": students, "reason": f"{name}: {reason}"}
                runs[name].append(seconds)
    sandboxed, plain = statistics.median(runs["sandboxed"]), statistics.median(runs["no_sandbox"])
    return {"students": students, "rounds": rounds, "submission": "the solution notebooks", "jobs": 1,
            "seconds": runs, "overhead_per_submission_s": round((sandboxed - plain) / students, 1),
            "overhead_ratio": round(sandboxed / plain, 3),
            "isolation": ("rlimits; mount, IPC and network namespaces (IPC transport); read-only filesystem, "
                          "hidden paths, 256 MB tmpfs for HOME and /tmp; a uid per student, checked for leftovers"
                          if os.geteuid() == 0 else
                          "rlimits; a user namespace with mount, IPC and network namespaces: read-only filesystem, "
                          "hidden paths, tmpfs HOME and /tmp, no network (where the machine allows user "
                          "namespaces; rlimits only where it refuses them)")}


ESTIMATE = re.compile(r"""budget\.estimate\(\s*["'](\d\d)["']\s*,\s*["']([^"']+)["']\s*\)""")


def training_cells(notebook) -> dict:
    """{cell name: seconds} of an executed notebook's training cells (those calling ``budget.estimate``), from
    nbclient's timing record: what ``Budget.estimate`` prints before the cell runs."""
    from datetime import datetime
    found = {}
    for cell in notebook.cells:
        match = ESTIMATE.search(cell.source) if cell.cell_type == "code" else None
        timing = cell.metadata.get("execution", {})
        if match and "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            began, ended = (datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                            for k in ("iopub.execute_input", "shell.execute_reply"))
            found[match.group(2)] = round((ended - began).total_seconds(), 1)
    return found


def notebook_times(timeout: float = 3600) -> dict:
    """Wall time of each solution notebook run top to bottom in a fresh kernel, at the student budget and
    at the grading budget (``NBGRADER_EXECUTION`` set, as nbgrader sets it); null with the error if one fails."""
    import nbformat
    from nbclient import NotebookClient

    _as_a_student()
    times = {}
    for path in sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        times[path.stem] = {}
        for budget, value in (("student_s", None), ("nbgrader_s", "autograde")):
            notebook = nbformat.read(path, as_version=4)
            with tempfile.TemporaryDirectory(prefix="translab-bench-nb-") as tmp, _nbgrader_execution(value):
                start = time.perf_counter()
                try:
                    NotebookClient(notebook, timeout=timeout, kernel_name="python3", record_timing=True,
                                   resources={"metadata": {"path": tmp}}).execute()
                    times[path.stem][budget] = round(time.perf_counter() - start, 1)
                    times[path.stem].setdefault("cells", {})[budget.removesuffix("_s")] = training_cells(notebook)
                except Exception as error:  # a failing notebook is a finding, not a crash of the bench
                    times[path.stem][budget] = None
                    times[path.stem][budget.replace("_s", "_error")] = f"{type(error).__name__}: {str(error)[:300]}"
    return times


def _seconds(value) -> str:
    return "not measured" if value is None else f"{value:,.1f} s"


def readme_tables(result: dict) -> str:
    """The README's tables of grading and notebook times, rendered from a bench.json (the README quotes no
    figure of its own: ``--readme`` rewrites these from the file, and a test checks they agree)."""
    auto, floor = result.get("autograde") or {}, (result.get("autograde") or {}).get("floor") or {}
    runs = (result.get("class_autograde") or {}).get("runs") or {}
    mix = (result.get("class_autograde") or {}).get("mix") or {}
    overhead = result.get("isolation_overhead") or {}

    def judged(value, goal, shown=None):
        return "" if value is None else f"{'met' if value <= goal else 'not met'} (at most {shown or goal})"

    repeats = len(auto.get("runs_s") or [])
    rows = [("one complete submission, gradebook ready" + (f" (median of {repeats})" if repeats > 1 else ""),
             _seconds(auto.get("seconds")), judged(auto.get("seconds"), GOALS["one_submission_s"], "20 s")),
            ("the first submission (empty gradebook)", _seconds(auto.get("first_run_s")), ""),
            (f"its floor: one kernel, the {floor.get('cells', '?')} answer and test cells and the cells they read",
             _seconds(floor.get("seconds")), ""),
            ("ratio to the floor (medians)" + (" and each run's to the floor run after it"
                                               if auto.get("paired_ratios") else ""),
             "not measured" if auto.get("ratio_to_floor") is None else f"{auto['ratio_to_floor']:.2f}"
             + (f" ({', '.join(f'{r:.2f}' for r in auto['paired_ratios'])})" if auto.get("paired_ratios") else ""),
             judged(auto.get("ratio_to_floor"), GOALS["ratio_to_floor"]))]
    students = (result.get("class_autograde") or {}).get("students")
    complete = mix.get("complete_solutions")
    for jobs in ("jobs_1", "jobs_2"):
        if jobs in runs:
            seconds = runs[jobs].get("seconds")
            rows.append((f"a class of {students} ({complete} complete, the rest corpus cases), "
                         f"`JOBS={jobs[-1]}`", "not measured" if seconds is None else
                         f"{seconds:,.0f} s ({seconds / 60:.1f} min)",
                         judged(seconds, GOALS["class_jobs_2_s"], "12 min") if jobs == "jobs_2" else ""))
    if overhead.get("overhead_per_submission_s") is not None:
        rows.append(("what the sandbox adds to a submission (median of "
                     f"{overhead.get('rounds')} rounds)", f"{overhead['overhead_per_submission_s']:.1f} s", ""))
    lines = ["| grading, measured by `make bench` | time | goal |", "| --- | ---: | --- |"]
    lines += [f"| {what} | {value} | {goal} |" for what, value, goal in rows]
    notebooks = {name: row for name, row in (result.get("notebooks") or {}).items() if isinstance(row, dict)}
    if notebooks:
        lines += ["", "| notebook | student budget | grading budget (`NBGRADER_EXECUTION`) |", "| --- | ---: | ---: |"]
        lines += [f"| {name} | {_seconds(row.get('student_s'))} | {_seconds(row.get('nbgrader_s'))} |"
                  for name, row in sorted(notebooks.items())]
        student = [row.get("student_s") for row in notebooks.values()]
        grading = [row.get("nbgrader_s") for row in notebooks.values()]
        total_student = None if None in student else sum(student)
        lines.append(f"| the whole lab, student budget {judged(total_student, GOALS['lab_student_s'], '4 min')} | "
                     f"{_seconds(total_student)} | {_seconds(None if None in grading else sum(grading))} |")
    measured = result.get("autograde_measured") or {}
    lines += ["", f"From `results/bench.json` ({result.get('cpu_count', '?')} cores; "
              f"`{(result.get('command') or 'python -m experiments.bench').strip()}`"
              + (f", one submission again by `{measured['command']}`" if measured else "") + ")."]
    return "\n".join(lines)


def hub_table(result: dict) -> str:
    """The README's table of a term on the course hub, step by step, rendered from a bench.json."""
    cycle = result.get("hub_cycle") or {}
    if not cycle.get("seconds"):
        return f"Not measured: {cycle.get('reason', 'run `python -m experiments.bench --only-hub`')}."
    mix = ", ".join(f"{count} {kind}" for kind, count in (cycle.get("mix") or {}).items())
    lines = [f"| step, a class of {cycle['students']} ({mix}) | time |", "| --- | ---: |"]
    lines += [f"| {HUB_STEPS.get(step, step)} | {'under 0.1 s' if seconds < 0.05 else _seconds(seconds)} |"
              for step, seconds in cycle["seconds"].items()]
    lines += [f"| the whole term | {_seconds(cycle.get('total_s'))} |", "",
              f"From `results/bench.json` ({result.get('cpu_count', '?')} cores; `python -m grader.testing.hub cycle` "
              "as `make bench` runs it)."]
    return "\n".join(lines)


def _fill(text: str, begin_mark: str, end_mark: str, body: str) -> str | None:
    begin, end = text.find(begin_mark), text.find(end_mark)
    if begin < 0 or end < begin:
        return None
    return text[:begin + len(begin_mark)] + "\n" + body + "\n" + text[end:]


def update_readme(result: dict, readme: Path = README) -> bool:
    """Rewrite the README's bench tables (grading, and a term on the hub) from ``result``; False if the README
    has no place for them."""
    text = _fill(readme.read_text(encoding="utf-8"), README_BEGIN, README_END, readme_tables(result))
    if text is None:
        return False
    text = _fill(text, HUB_BEGIN, HUB_END, hub_table(result)) or text
    readme.write_text(text, encoding="utf-8")
    return True


def hub_cycle(students: int) -> dict:
    """A term on a real JupyterHub for a simulated class, step by step (grader.testing.hub)."""
    from grader.testing import hub
    reason = _grading_ready() or hub.missing()
    if reason:
        return {"students": students, "reason": reason}
    return hub.measure_cycle(students, jobs=2)


def _replace_section(out: Path, section: str, measure, flag: str | None = None) -> None:
    """Measure one section of bench.json and write it into the existing file (the others kept as they were),
    with how and where it was measured under ``<section>_measured``."""
    path = out / "bench.json"
    result = json.loads(path.read_text()) if path.exists() else {"schema_version": SCHEMA_VERSION}
    started = time.time()
    result[section] = measure()
    result[f"{section}_measured"] = {"command": f"python -m experiments.bench --only-{flag or section}",
                                     "cpu_count": os.cpu_count(), "wall_time_s": round(time.time() - started, 1)}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result[section], indent=1))
    if out.resolve() == RESULTS_DIR.resolve():
        update_readme(result)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="few steps, no autograde (for tests)")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory for bench.json")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0 = PyTorch's default)")
    parser.add_argument("--no-autograde", action="store_true")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--no-notebooks", action="store_true", help="skip timing the solution notebooks")
    parser.add_argument("--class-size", type=int, default=100,
                        help="students in the class-grading measurement (0 skips it; at 100: 25 min measured with --jobs 2, 47 with --jobs 1)")
    parser.add_argument("--class-jobs", type=int, nargs="+", default=[2],
                        help="--jobs values to time the class with (2: the goal is set for 2 cores)")
    parser.add_argument("--overhead-students", type=int, default=2,
                        help="complete submissions graded with and without the sandbox, twice (0 skips it; about 8 min at 2)")
    parser.add_argument("--only-notebooks", action="store_true",
                        help="time the solution notebooks only (student and grading budgets, training cells one by "
                             "one) and replace that section of an existing bench.json (249 s measured on 2 cores)")
    parser.add_argument("--only-autograde", action="store_true",
                        help="time one submission (and the floor) only and replace that section of an existing "
                             "bench.json (about 2 min)")
    parser.add_argument("--only-class", action="store_true",
                        help="time the class only (--class-size, --class-jobs) and replace that section")
    parser.add_argument("--only-similarity", action="store_true",
                        help="time make similarity on the class (--class-size) only and replace that section")
    parser.add_argument("--hub-students", type=int, default=10,
                        help="a simulated class taken through a term on a real JupyterHub (0 skips it; about 3 min at 10)")
    parser.add_argument("--only-hub", action="store_true",
                        help="time the term on the hub only (--hub-students) and replace that section")
    parser.add_argument("--readme", action="store_true",
                        help="rewrite the README's bench tables from results/bench.json (measures nothing)")
    args = parser.parse_args(argv)
    if args.readme:
        return 0 if update_readme(json.loads((RESULTS_DIR / "bench.json").read_text())) else 1
    if args.only_class:
        _replace_section(args.out, "class_autograde", lambda: class_autograde(args.class_size, args.class_jobs), flag="class")
        return 0
    if args.only_similarity:
        _replace_section(args.out, "similarity", lambda: similarity_time(args.class_size))
        return 0
    if args.only_hub:
        _replace_section(args.out, "hub_cycle", lambda: hub_cycle(args.hub_students), flag="hub")
        return 0
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.only_autograde:
        _replace_section(args.out, "autograde", autograde_time)
        return 0
    if args.only_notebooks:
        _replace_section(args.out, "notebooks", notebook_times)
        return 0
    steps, rounds, warmup = (4, 3, 2) if args.quick else (20, 7, 5)
    batch_size, seq_len = 32, 64
    started = time.time()
    result = {
        "schema_version": SCHEMA_VERSION, "quick": args.quick,
        "command": "python -m experiments.bench " + " ".join(argv if argv is not None else sys.argv[1:]),
        "torch": str(torch.__version__), "threads": torch.get_num_threads(), "cpu_count": os.cpu_count(),
        "workload": {"model": {"ntoken": data.load_tokenizer().get_piece_size(), **ARCHITECTURE},
                     "batch_size": batch_size, "seq_len": seq_len, "steps_per_round": steps,
                     "rounds": rounds, "optimizer": "AdamW", "clip": 1.0, "progress_bar": False},
    }
    fp32 = throughput(steps, rounds, warmup, batch_size, seq_len, bf16=False, progress=not args.no_progress)
    # Without native bf16 (AVX512-BF16, AMX) PyTorch emulates it, about 10x slower: a few steps show that.
    native_bf16 = fast_bf16_available()
    bf16_steps, bf16_rounds, bf16_warmup = (steps, rounds, warmup) if native_bf16 else (min(steps, 3), 3, 1)
    bf16 = throughput(bf16_steps, bf16_rounds, bf16_warmup, batch_size, seq_len, bf16=True,
                      progress=not args.no_progress)
    bf16["steps_per_round"], bf16["native_bf16"] = bf16_steps, native_bf16
    result["fp32"], result["bf16"] = fp32, bf16
    result["loop_ratio"] = fp32["ratio"]
    result["loop_ratio_target"] = 0.95
    result["loop_ratio_met"] = fp32["ratio"] >= 0.95
    result["bf16_speedup"] = bf16["translab"]["tokens_per_s"] / fp32["translab"]["tokens_per_s"]
    if args.quick or args.no_autograde:
        result["autograde"] = {"seconds": None, "reason": "skipped (--quick or --no-autograde)"}
    else:
        result["autograde"] = autograde_time()
    if args.quick or args.no_notebooks:
        result["notebooks"] = {"reason": "skipped (--quick or --no-notebooks)"}
    else:
        result["notebooks"] = notebook_times()
    if args.quick or args.no_autograde or args.overhead_students <= 0:
        result["isolation_overhead"] = {"reason": "skipped (--quick, --no-autograde or --overhead-students 0)"}
    else:
        result["isolation_overhead"] = isolation_overhead(args.overhead_students)
    if args.quick or args.no_autograde or args.class_size <= 0:
        result["class_autograde"] = {"students": 0, "reason": "skipped (--quick, --no-autograde or --class-size 0)"}
    else:
        result["class_autograde"] = class_autograde(args.class_size, args.class_jobs)
    if args.quick or args.no_autograde or args.hub_students <= 0:
        result["hub_cycle"] = {"students": 0, "reason": "skipped (--quick, --no-autograde or --hub-students 0)"}
    else:
        result["hub_cycle"] = hub_cycle(args.hub_students)
    result["wall_time_s"] = round(time.time() - started, 1)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "bench.json").write_text(json.dumps(result, indent=2) + "\n")
    if args.out.resolve() == RESULTS_DIR.resolve():
        update_readme(result)
    print(f"translab loop {fp32['translab']['tokens_per_s']:,.0f} tok/s vs bare {fp32['bare']['tokens_per_s']:,.0f}"
          f" (ratio {fp32['ratio']:.3f}); bf16 {bf16['translab']['tokens_per_s']:,.0f} tok/s "
          f"(x{result['bf16_speedup']:.2f}, ratio {bf16['ratio']:.3f}); autograde: {result['autograde']}; "
          f"class: {result['class_autograde']}")
    print(f"wrote {args.out / 'bench.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
