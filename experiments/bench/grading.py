"""How long grading takes: one submission against its floor, a class of 100 with ``--jobs N``, what the sandbox
adds, ``make similarity`` on the class and a term on a real JupyterHub, each on a temporary copy of the course
(``python -m grader``, as an instructor runs it), or null with the reason when that cannot be done."""
from __future__ import annotations

import compileall
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from translab.contract import ASSIGNMENT, DATA_DIR_ENV
from translab.paths import REPO_ROOT

from grader.course import with_venv_bin
from grader.course.demos import is_graded, needed
from grader.course.gradebook import cell_scores
from grader.grading import phases, warm_grader
from grader.grading.batch import REPORT_NAME
from grader.grading.cluster import SENT
from grader.testing import corpus, hub
from grader.testing.dask_cluster import LocalCluster, gradebook_cells

from .imports import NBGRADER_COMMAND, ZYGOTE_STARTUP, import_seconds
from .notebooks import as_a_student, nbgrader_execution
from .tables import GOALS

COURSE_IGNORE = shutil.ignore_patterns(".venv", ".git", "data", "submitted", "autograded", "feedback", "gradebook.db",
                                       "__pycache__", "*.egg-info", "results", ".pytest_cache", ".translab_stages")


def course_copy(dest: Path) -> dict:
    """A copy of the course at ``dest`` (no data, no grading folders); returns the env that grades it."""
    shutil.copytree(REPO_ROOT, dest, ignore=COURSE_IGNORE, symlinks=True)
    # compiled, as an instructor's course is from its second run on: where PYTHONDONTWRITEBYTECODE is set (this
    # machine's shells set it) every process of every run would compile grader and translab again (0.1 s)
    for package in ("grader", "translab"):
        compileall.compile_dir(dest / package, quiet=2)
    # the copy's own translab, for the kernels too: the venv's editable install maps it to this checkout, which
    # the sandbox hides from a batch graded from the copy (``grader.isolation.kernel_stages.unstaged_library``)
    path = os.pathsep.join(filter(None, [str(dest), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path, DATA_DIR_ENV: str(Path(os.environ.get(DATA_DIR_ENV, REPO_ROOT / "data")))}


def _grading_ready() -> str | None:
    """Why grading cannot be measured here, or None."""
    missing = [name for name in ("nbgrader_config.py", "solutions", "grader") if not (REPO_ROOT / name).exists()]
    return f"course files missing: {', '.join(missing)}" if missing else None


def timed_autograde(course: Path, env: dict, jobs: int, timeout: float, *options: str,
               keep_gradebook: bool = False, by_nbgrader: bool = False) -> tuple[float | None, str]:
    """Wall time of ``grader.grading.batch autograde --jobs N [options]`` on the course from an empty gradebook (or the
    one a previous run left, with ``keep_gradebook``), or (None, reason).  ``by_nbgrader``: plain ``nbgrader
    autograde --force`` instead, whose exporter hands the submissions to the batch in its own process."""
    seconds, _, reason = timed_and_sent(course, env, jobs, timeout, *options, keep_gradebook=keep_gradebook,
                                        by_nbgrader=by_nbgrader)
    return seconds, reason


def timed_and_sent(course: Path, env: dict, jobs: int, timeout: float, *options: str, keep_gradebook: bool = False,
                   by_nbgrader: bool = False) -> tuple[float | None, float | None, str]:
    """``timed_autograde``'s time and reason, with the seconds until the batch said it had sent its students to a
    cluster (``grader.grading.cluster.SENT``; None if it sent none): on the warm grader, what a press spends before
    any grading (its process's start, its imports, the check, the connection), and after it the grading."""
    for leftover in ("autograded", "feedback") if keep_gradebook else ("gradebook.db", "autograded", "feedback"):
        path = course / leftover
        shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)
    command = (["-m", "nbgrader", "autograde", ASSIGNMENT, "--force", f"--BatchAutogradeExporter.jobs={jobs}"]
               if by_nbgrader else ["-m", "grader", "autograde", "--jobs", str(jobs)])
    code, seconds, lines = run_timestamped([sys.executable, *command, *options], course,
                                           {**env, "PATH": with_venv_bin(env.get("PATH", ""))}, timeout)
    if code != 0:
        tail = [line for _, line in lines if line.strip()][-3:]
        return None, None, f"autograde exited {code}: {' | '.join(tail)}"
    short = short_of_full_marks(course)
    if short:  # a time for grading that failed is no time for grading
        return None, None, f"the complete solutions did not get full marks: {short}"
    sent = next((at for at, line in lines if SENT in line), None)
    return round(seconds, 1), (None if sent is None else round(sent, 2)), ""


def run_timestamped(argv: list[str], cwd: Path, env: dict, timeout: float) -> tuple[int, float, list[tuple[float, str]]]:
    """Run ``argv`` with its output and errors in one stream: (exit code, wall seconds, each line with the seconds at
    which it came).  Killed past ``timeout``, raising ``subprocess.TimeoutExpired`` as ``subprocess.run`` does."""
    lines: list[tuple[float, str]] = []
    start = time.perf_counter()
    with subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          bufsize=1) as process:
        def read() -> None:
            for line in process.stdout:
                lines.append((time.perf_counter() - start, line.rstrip("\n")))

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            raise
        seconds = time.perf_counter() - start
        reader.join()  # the warm grader a press starts writes to its own log, not into this stream
    return code, seconds, lines


def phases_of(course: Path) -> dict:
    """The last batch's phases (``grader.grading.phases``) summed over its students, its setup first."""
    return phases.read_totals(course / "autograded" / phases.PHASES_NAME)


def short_of_full_marks(course: Path) -> str:
    """The students whose submission is the solutions but whose checks did not all pass ('' if none)."""
    solutions = {path.name: path.read_bytes() for path in (course / "solutions" / ASSIGNMENT).glob("*.ipynb")}
    short = []
    for folder in sorted((course / "submitted").glob(f"*/{ASSIGNMENT}")):
        if {path.name: path.read_bytes() for path in folder.glob("*.ipynb")} != solutions:
            continue
        scores = cell_scores(course, folder.parent.name).values()
        got, of = (sum(score for score, maximum, code in scores if code), sum(maximum for _, maximum, code in scores if code))
        if got < of:
            short.append(f"{folder.parent.name} {got:g}/{of:g}")
    return ", ".join(short)


SETTLE_S = 2  # before each timed run: the last one's processes (a zygote unmapping torch, a kernel) have exited
WARM_ROUNDS = 5  # on the warm grader: a press by each path, then a floor run (``warm_runs``)


def autograde_time(timeout: float = 1800, repeats: int = 3) -> dict:
    """Wall time of ``python -m grader autograde`` on one submission (the solutions), in a temporary copy of
    the course: ``first_run_s`` from an empty gradebook (it also records the assignment), then ``repeats`` times
    with the gradebook ready, as every later submission is graded, whose median is ``seconds`` (one run on a
    shared VM was seen 1.5x off); plus the floor (median of as many) and their ratio.  Each run of the
    submission is followed by one of the floor, so that both see the same minutes of a VM whose speed drifts
    (the same code measured 2.1 and 2.8 an hour apart when they ran in two blocks); plain ``nbgrader autograde``
    after each, and nbgrader's import timed alone (``imports``).  Null with a reason if it cannot run."""
    reason = _grading_ready()
    if reason:
        return {"seconds": None, "reason": reason}
    runs, floors, by_nbgrader, split, nbgrader_imports = [], [], [], [], []
    with class_course(students=1, full_every=1) as (course, env, _):
        first, reason = timed_autograde(course, env, 1, timeout)
        if first is None:
            return {"seconds": None, "reason": reason}
        for _ in range(repeats):
            time.sleep(SETTLE_S)
            seconds, reason = timed_autograde(course, env, 1, timeout, keep_gradebook=True)
            if seconds is None:
                return {"seconds": None, "reason": reason}
            runs.append(seconds)
            split.append(phases_of(course))
            time.sleep(SETTLE_S)
            floors.append(grading_floor())
            time.sleep(SETTLE_S)
            by_nbgrader.append(timed_autograde(course, env, 1, timeout, "--BatchAutogradeExporter.warm=False",
                                               keep_gradebook=True, by_nbgrader=True)[0])
            nbgrader_imports.append(import_seconds(NBGRADER_COMMAND, env, course))  # what plain nbgrader adds
        warm = warm_runs(course, env, timeout, WARM_ROUNDS)
    time.sleep(SETTLE_S)
    batch = within_batch(timeout)
    measured = [f for f in floors if f.get("seconds")] or floors[:1]
    floor = sorted(measured, key=lambda f: f.get("seconds") or 0)[len(measured) // 2]
    floor["runs_s"] = [f["seconds"] for f in measured]
    seconds = statistics.median(runs)
    paired = [round(run / f["seconds"], 2) for run, f in zip(runs, floors) if f.get("seconds")]
    return {"seconds": seconds, "runs_s": runs, "first_run_s": first, "floor": floor,
            "ratio_to_floor": round(seconds / floor["seconds"], 2) if floor.get("seconds") else None,
            "paired_ratios": paired, "goal_s": GOALS["one_submission_s"],
            "phases": split[sorted(range(len(runs)), key=runs.__getitem__)[len(runs) // 2]],
            "nbgrader_autograde_s": statistics.median(by_nbgrader) if None not in by_nbgrader else None,
            "nbgrader_autograde_runs_s": by_nbgrader, "warm": warm, "within_batch": batch,
            "nbgrader_import_s": statistics.median(nbgrader_imports) if None not in nbgrader_imports else None,
            "nbgrader_import_runs_s": nbgrader_imports,
            "submission": "the solution notebooks, one student", "command": "python -m grader autograde"}


def within_batch(timeout: float, students: int = 4, rounds: int = 3) -> dict:
    """The batch's first submission (its setup included) against the median of the next (issue 53: at most 1.1x):
    ``students`` complete submissions at ``JOBS=1``, gradebook ready, in ``rounds`` batches, the median ratio's shown
    (one batch gave 1.18, another 1.37); the zygote's imports alone; the same batch on the running warm grader."""
    with class_course(students, full_every=1) as (course, env, _):
        batches = []
        for keep in (False, *[True] * rounds):  # the first records the assignment
            seconds, reason = timed_autograde(course, env, 1, timeout, keep_gradebook=keep)
            if seconds is None:
                return {"students": students, "reason": reason}
            batches += [{"batch_s": seconds, **_first_and_next(course)}] if keep else []
            time.sleep(SETTLE_S)
        ratios = [measured["first_to_next"] for measured in batches]
        alone = [import_seconds(ZYGOTE_STARTUP, env, course) for _ in range(3)]  # what the first kernel waits for
        result = {"students": students, "command": "python -m grader autograde --jobs 1", "first_to_next_runs": ratios,
                  **sorted(batches, key=lambda one: one["first_to_next"])[(rounds - 1) // 2], "zygote_imports_runs_s": alone,
                  "zygote_imports_s": statistics.median(alone) if None not in alone else None}
        try:
            for _ in range(2):  # the first starts the warm grader; the second finds it running
                seconds, reason = timed_autograde(course, env, 1, timeout, "--warm", keep_gradebook=True)
                if seconds is None:
                    break
                time.sleep(SETTLE_S)
        finally:
            warm_grader.stop(course)
        result["warm"] = ({"batch_s": seconds, **_first_and_next(course), "command": "python -m grader autograde "
                           "--jobs 1 --warm, the warm grader running"} if seconds is not None else {"reason": reason})
    return result


def _first_and_next(course: Path) -> dict:
    """The last batch's first submission, its setup included, against the median of the next (the batch's report)."""
    own = seconds_by_student(course)
    setup = phases_of(course).get(phases.SETUP, 0.0)
    order = sorted(own)  # the batch takes them in this order (grader.course.students)
    first, later = setup + own[order[0]], statistics.median(own[name] for name in order[1:])
    return {"setup_s": setup, "student_s": [own[name] for name in order], "first_s": round(first, 1),
            "next_s": round(later, 1), "first_to_next": round(first / later, 2)}


def warm_runs(course: Path, env: dict, timeout: float, repeats: int) -> dict:
    """The same submission on the course's warm grader (``grader.grading.warm_grader``): the press that starts it,
    then ``repeats`` rounds of presses that find it, by ``python -m grader autograde --warm`` (``make autograde``)
    then by plain ``nbgrader autograde``, both the course's default, then the floor: each round's ratios are kept
    (the two presses differ by about a second, and one run's noise on this VM is as large: three pairs gave 1.09x
    and 1.19x an hour apart), and each press's seconds until it had sent its student, which split the press into
    its own start and the grading (``timed_and_sent``)."""
    presses, by_nbgrader, floors = [], [], []  # each press's (seconds, seconds until its student was sent, reason)
    try:
        time.sleep(SETTLE_S)
        start, _, reason = timed_and_sent(course, env, 1, timeout, "--warm", keep_gradebook=True)
        for _ in range(repeats if start is not None else 0):
            time.sleep(SETTLE_S)
            presses.append(timed_and_sent(course, env, 1, timeout, "--warm", keep_gradebook=True))
            time.sleep(SETTLE_S)
            by_nbgrader.append(timed_and_sent(course, env, 1, timeout, "--BatchAutogradeExporter.warm=True",
                                              keep_gradebook=True, by_nbgrader=True))
            time.sleep(SETTLE_S)
            floors.append(grading_floor().get("seconds"))
    finally:
        warm_grader.stop(course)
    runs, plain = [press[0] for press in presses], [press[0] for press in by_nbgrader]
    if start is None or None in runs + plain:
        return {"seconds": None, "reason": reason or "a warm run failed"}
    sent, plain_sent = [press[1] for press in presses], [press[1] for press in by_nbgrader]
    measured = [(run, floor) for run, floor in zip(runs, floors) if floor]
    return {"start_s": start, "seconds": statistics.median(runs), "runs_s": runs,
            "nbgrader_autograde_s": statistics.median(plain), "nbgrader_autograde_runs_s": plain,
            "nbgrader_paired_ratios": [round(by / project, 2) for project, by in zip(runs, plain)],
            "sent_runs_s": sent, "nbgrader_sent_runs_s": plain_sent,
            "floor_runs_s": floors, "ratio_to_floor": round(statistics.median(runs) / statistics.median(
                floor for _, floor in measured), 2) if measured else None,
            "floor_paired_ratios": [round(run / floor, 2) for run, floor in measured],
            "command": "python -m grader autograde --warm"}


def graded_and_needed(cells) -> list:
    """The answer and test cells of a notebook, with the cells that define a name they use (transitively):
    what grading must run, without the demos, plots and training runs around it."""
    code = [cell for cell in cells if cell.cell_type == "code"]
    return [cell for cell, run in zip(code, needed(code, [is_graded(cell) for cell in code])) if run]


def grading_floor(timeout: float = 600) -> dict:
    """What grading one submission cannot go below: one kernel started once, then each solution notebook's
    answer and test cells, with only the cells they need (``graded_and_needed``), in that one kernel, at the
    grading budget, checks judged in the kernel."""
    import nbformat
    from nbclient import NotebookClient

    as_a_student()
    folder = REPO_ROOT / "solutions" / ASSIGNMENT
    cells = [cell for path in sorted(folder.glob("*.ipynb"))
             for cell in graded_and_needed(nbformat.read(path, as_version=4).cells)]
    for index, cell in enumerate(cells):
        cell.id = f"floor-{index}"  # cells of six notebooks: their own ids repeat
    notebook = nbformat.v4.new_notebook(cells=cells)
    try:
        with nbgrader_execution("autograde"):
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
    return [case for case in corpus.CASES if case not in corpus.SPEND_BUDGET]  # those cost their budget each


def class_cases(students: int, full_every: int = 3) -> list[str]:
    """What student ``i`` of ``build_class``'s class submitted: ``complete_solutions`` or a corpus case."""
    cases = _class_cases()
    return ["complete_solutions" if index % full_every == 0 else cases[(index - index // full_every - 1) % len(cases)]
            for index in range(students)]


def seconds_by_case(course: Path, students: int, full_every: int = 3) -> dict:
    """From the batch's report: the seconds each kind of submission took to grade, summed over the class (where
    a class's time goes), most first."""
    kind = {f"student{index:03d}": case for index, case in enumerate(class_cases(students, full_every))}
    totals: dict[str, float] = {}
    for student, seconds in seconds_by_student(course).items():
        case = kind.get(student, "other")
        totals[case] = round(totals.get(case, 0.0) + seconds, 1)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def seconds_by_student(course: Path) -> dict[str, float]:
    """Each student's seconds in the last batch's report."""
    import csv
    with open(course / "autograded" / REPORT_NAME, encoding="utf-8") as handle:
        return {row["student_id"]: float(row["seconds"] or 0) for row in csv.DictReader(handle)}


@contextmanager
def class_course(students: int, full_every: int):
    """(course, env, mix): a temporary copy of the course whose submitted/ holds ``build_class``'s class."""
    with tempfile.TemporaryDirectory(prefix="translab-bench-") as tmp:
        course = Path(tmp) / "course"
        env = course_copy(course)
        yield course, env, build_class(course / "submitted", course, students, full_every)


def similarity_time(students: int, full_every: int = 3) -> dict:
    """``make similarity`` on ``build_class``'s class: every pair of students' answers compared, the CSV and the
    page written (no grading needed: it reads submitted/)."""
    import subprocess
    with class_course(students, full_every) as (course, env, mix):
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


def class_autograde(students: int, jobs: list[int], timeout: float = 4 * 3600, workers: int = 1,
                    rounds: int = 2, threads: int = 2) -> dict:
    """Wall time of grading a class of ``students`` (complete solutions mixed with the corpus) with each
    ``--jobs`` value, each from an empty gradebook, sandboxed as ``make autograde`` grades; then on a Dask
    cluster of ``workers`` local worker processes (0: not) of ``threads`` threads each.  ``rounds`` times in turn (local, cluster, local,
    cluster): this machine's speed drifts by 15% or more between runs, so the cluster is judged by each round's
    ratio to the local run just before it, not by two runs apart."""
    reason = _grading_ready()
    if reason:
        return {"students": students, "reason": reason}
    result = {"students": students, "command": "python -m grader autograde --jobs N", "rounds": rounds, "runs": {}}
    measured: dict[str, list] = {}
    with class_course(students, full_every=3) as (course, env, result["mix"]):
        for _ in range(max(1, rounds)):
            for count in jobs:
                seconds, reason = timed_autograde(course, env, count, timeout)
                measured.setdefault(f"jobs_{count}", []).append(
                    {"seconds": seconds, "student_seconds_by_case": seconds_by_case(course, students)}
                    if seconds is not None else {"seconds": None, "reason": reason})
            if not workers or measured[f"jobs_{jobs[-1]}"][-1]["seconds"] is None:
                continue
            measured.setdefault("cluster", []).append(_class_on_cluster(course, env, students, workers, timeout,
                                                                        threads))
    for name, runs in measured.items():
        summary = median_run(runs, students)
        if name == "cluster":
            local = [run["seconds"] for run in measured[f"jobs_{jobs[-1]}"] if run["seconds"] is not None]
            summary["paired_ratios"] = [round(run["seconds"] / before, 3)
                                        for run, before in zip(runs, local) if run["seconds"] is not None]
            summary["same_gradebook"] = all(run.get("same_gradebook") for run in runs)
            result["cluster"] = summary
        else:
            result["runs"][name] = summary
    return result


def median_run(runs: list[dict], students: int) -> dict:
    """One entry of the bench for a command run several times: the median run's figures, every run's time."""
    timed = sorted((run for run in runs if run["seconds"] is not None), key=lambda run: run["seconds"])
    if not timed:
        return runs[-1]
    median = dict(timed[(len(timed) - 1) // 2])
    median["runs_s"] = [run["seconds"] for run in runs]
    median["per_student_s"] = round(median["seconds"] / students, 1)
    return median


def _class_on_cluster(course: Path, env: dict, students: int, workers: int, timeout: float, threads: int = 1) -> dict:
    """The same class again, from an empty gradebook, through a Dask scheduler and ``workers`` worker processes of
    ``threads`` threads on this machine (``grader.grading.cluster``), against the gradebook the last ``--jobs`` run
    left; and what a class of 1,000 would take on more worker threads, from the measured cost of a student on one."""
    local = gradebook_cells(course / "gradebook.db")
    with tempfile.TemporaryDirectory(prefix="translab-dask-") as logs, \
            LocalCluster(course, workers, env={**env, "PATH": with_venv_bin(env.get("PATH", ""))}, logs=Path(logs),
                         threads=threads) as cluster:
        before = cluster.dask_cpu_seconds()
        seconds, reason = timed_autograde(course, env, 0, timeout, "--cluster", cluster.address, "--force")
        dask_cpu = cluster.dask_cpu_seconds() - before
    if seconds is None:
        return {"workers": workers, "threads": threads, "seconds": None, "reason": reason}
    worker_s = seconds * workers * threads / students  # one student's cost to one worker thread, start-up included
    return {"workers": workers, "threads": threads, "command": "python -m grader autograde --cluster tcp://127.0.0.1:PORT --force",
            "seconds": seconds, "same_gradebook": gradebook_cells(course / "gradebook.db") == local,
            "student_seconds_by_case": seconds_by_case(course, students),
            "dask_cpu_s": round(dask_cpu, 1), "dask_cpu_share": round(dask_cpu / (seconds * (os.cpu_count() or 1)), 3),
            "worker_seconds_per_student": round(worker_s, 2),
            "projection_1000_students_min": {str(n): round(1000 * worker_s / n / 60, 1) for n in (2, 8, 32, 128)}}


def isolation_overhead(students: int = 2, rounds: int = 2, timeout: float = 3600) -> dict:
    """What the sandbox costs a submission: the same ``students`` complete submissions graded with --jobs 1,
    sandboxed (as ``make autograde``) and with ``--no-sandbox`` (plain nbgrader kernels), alternately for
    ``rounds`` rounds (a difference of a few seconds a minute is within run-to-run noise: the rounds show it)."""
    reason = _grading_ready()
    if reason:
        return {"students": students, "reason": reason}
    runs = {"sandboxed": [], "no_sandbox": []}
    with class_course(students, full_every=1) as (course, env, _):
        for _ in range(rounds):
            for name, options in (("sandboxed", ()), ("no_sandbox", ("--no-sandbox",))):
                seconds, reason = timed_autograde(course, env, 1, timeout, *options)
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


def hub_cycle(students: int) -> dict:
    """A term on a real JupyterHub for a simulated class, step by step (grader.testing.hub)."""
    reason = _grading_ready() or hub.missing()
    if reason:
        return {"students": students, "reason": reason}
    return hub.measure_cycle(students)
