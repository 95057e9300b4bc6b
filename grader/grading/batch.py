"""``make autograde``: a class graded the night before marks are due, where one broken submission must not stop it.

Each student is graded by an nbgrader process of its own (``--jobs N`` at a time, forked from a server that has
nbgrader loaded: ``grader.grading.nbgrader_process``), against a private copy of the gradebook merged back in one
transaction (``grader.course.gradebook``), from a plain-file copy of the submission (``grader.grading.plain_copies``), with one
``grader.isolation.sandbox`` kernel per notebook, which imports that notebook's stage of translab
(``grader.isolation.kernel_stages``), and a checker beside it, each forked from a zygote of its own that has torch loaded
(``grader.isolation.zygote``).  A notebook nbgrader cannot run scores 0 and is flagged for the instructor,
listed at the end and in ``autograded/autograde_report.csv``, and the exit code stays 0.  It is 1 only when the
grading machinery fails (configuration, kernel, database), which no student can cause: a known-good notebook
(the canary) tells the two apart.

Why one file: the batch's setup (``GradingSession``, which a cluster worker keeps between tasks), each student's
grading and the canary pass the same ``StudentJob`` and ``StudentResult`` around; split, each part would import
the others.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from translab.contract import ASSIGNMENT

from grader.course import GradingError, known_clean
from grader.course.gradebook import (add_submission, flagged_notebooks, gradebook_has_assignment, gradebook_notebooks,
                                     has_submission, merge_student, sqlite_copy, zero_and_flag)
from grader.grading import phases
from grader.grading.nbgrader_process import (check_config, fork_server, nbgrader, nbgrader_env, preloads_checks,
                                             run_nbgrader)
from grader.grading.preflight import preflight
from grader.grading.plain_copies import copy_plain_files
from grader.isolation.student_sandbox import BatchSandbox, StudentSandbox

REPORT_NAME = "autograde_report.csv"
CANARY = "translab-canary-check"  # the known-good submission that tells a broken machine from a broken student
STUDENT_BUDGET = 600.0   # wall-clock seconds for one student: every notebook and every retry
LEFTOVERS_GRACE = 15.0   # seconds for a student's killed processes to be gone before they count as leftovers


def ensure_assignment(root: Path) -> None:
    if not gradebook_has_assignment(root):
        # The gradebook holds the tests (hidden ones included) that autograde puts back; build it
        # from the solutions without touching the committed student notebooks.
        with tempfile.TemporaryDirectory() as scratch:
            nbgrader(root, "generate_assignment", ASSIGNMENT, "--force",
                      f"--CourseDirectory.release_directory={scratch}")


def autograde(root: Path, jobs: int = 1, student_ids: list[str] | None = None, extra_args: tuple[str, ...] = (),
              sandbox: bool = True, student_timeout: float = STUDENT_BUDGET) -> "BatchReport":
    """Grade every submission (or only these students'), ``jobs`` students at a time (see ``grade_batch``)."""
    student_ids, _ = preflight(root, student_ids)
    # started first, with the preload this batch wants: its imports (1 s) overlap the zygote's, and
    # generate_assignment, when the gradebook is new, is forked from it too
    fork_server(checker_imports=preloads_checks(student_ids, sandbox))
    ensure_assignment(root)
    return grade_batch(root, student_ids, jobs=jobs, extra_args=extra_args, sandbox=sandbox, student_timeout=student_timeout)


@dataclass
class StudentResult:
    student: str
    seconds: float = 0.0
    failed_notebooks: list[str] = field(default_factory=list)  # nbgrader could not run them: 0 points, flagged
    flagged: list[str] = field(default_factory=list)  # every notebook flagged for the instructor, and why
    refused: list[str] = field(default_factory=list)  # submitted entries that are not plain files: never read
    launch_failures: list[str] = field(default_factory=list)  # kernel starts the launcher reported as failed
    leftovers: list[str] = field(default_factory=list)  # what the student's uid still had after the student
    infrastructure: str = ""  # set when the failure is not the student's (decided by the canary, never by output)
    budget_spent: bool = False
    sandbox_modes: list[str] = field(default_factory=list)  # how isolated its kernels ran (launch records)
    uid: int | None = None
    log: Path | None = None
    phases: dict[str, float] = field(default_factory=dict)  # where its seconds went (grader.grading.phases)
    notebook_phases: list[dict] = field(default_factory=list)

    @property
    def suspicious(self) -> bool:
        """Something failed that might be the machine's doing: the canary decides."""
        return bool(self.failed_notebooks or self.launch_failures)

    @property
    def status(self) -> str:
        if self.infrastructure:
            return "infrastructure error"
        return "graded" if not self.failed_notebooks else "graded, notebooks failed: " + " ".join(self.failed_notebooks)


@dataclass
class BatchReport:
    results: list[StudentResult]
    seconds: float
    jobs: int  # students at a time: --jobs, or the cluster's worker threads
    cluster: str = ""  # the scheduler's address, where the batch graded on a cluster
    setup: float = 0.0  # seconds before the first student could start: the sandbox's walls, the zygotes, the stages

    @property
    def infrastructure(self) -> list[StudentResult]:
        return [r for r in self.results if r.infrastructure]

    @property
    def timed(self) -> dict[str, tuple[dict[str, float], list[dict]]]:
        """Each timed student's phases and its notebooks' (``grader.grading.phases``)."""
        return {r.student: (r.phases, r.notebook_phases) for r in self.results if r.phases}


@dataclass
class StudentJob:
    """Everything one student's grading needs; built by ``grade_batch``."""
    root: Path
    student: str
    db: Path
    plain_copies: Path  # the students' plain files, what nbgrader grades (CourseDirectory.submitted_directory)
    sandbox: StudentSandbox
    args: list[str]   # nbgrader's options: the sandbox's, then the caller's
    budget: float
    phases_file: Path  # where the student's nbgrader process times its notebooks (grader.grading.phases)


def _grade_student(job: StudentJob) -> StudentResult:
    """Grade one student into ``job.db``.  If nbgrader fails on the submission as a whole (one unreadable
    notebook fails them all), grade each submitted notebook on its own, so only the broken ones lose.  The
    verdict comes from exit codes, the gradebook and the launcher's records, never from what nbgrader or a
    kernel printed: a student decides what that says."""
    root, student, db = job.root, job.student, job.db
    log = root / "autograded" / student / "autograde.log"
    result = StudentResult(student, log=log, uid=job.sandbox.uid)
    start = time.perf_counter()
    deadline = start + job.budget
    result.refused = copy_plain_files(root / "submitted" / student / ASSIGNMENT, job.plain_copies / student / ASSIGNMENT,
                                      top=root / "submitted")
    copied_at = time.perf_counter()
    base = ["autograde", ASSIGNMENT, f"--student={student}", "--force", f"--CourseDirectory.db_url=sqlite:///{db}",
            f"--CourseDirectory.submitted_directory={job.plain_copies}",
            f"--GuardedExecute.phases_file={job.phases_file}",
            f"--SanitizeStudentContent.known_clean_folder={known_clean.folder_for(root)}", *job.args]
    outputs = []
    in_nbgrader = 0.0

    env = nbgrader_env(job.sandbox.env)

    def run(*more: str) -> bool:
        nonlocal in_nbgrader
        left = deadline - time.perf_counter()
        if left <= 0:
            result.budget_spent = True
            return False
        started = time.perf_counter()
        returncode, output = run_nbgrader(root, base + list(more), env=env, timeout=left)
        in_nbgrader += time.perf_counter() - started
        job.sandbox.kill_leftovers()
        if returncode == -signal.SIGKILL and time.perf_counter() >= deadline:
            result.budget_spent = True
        outputs.append(f"$ nbgrader {' '.join(base[:3] + list(more))}\n{output}")
        return returncode == 0

    known = gradebook_notebooks(db)
    copied = sorted(p.stem for p in (job.plain_copies / student / ASSIGNMENT).glob("*.ipynb") if p.stem in known)
    refused_notebooks = sorted({Path(entry.split(":")[0]).stem for entry in result.refused} & set(known))
    if not run():
        failed = [name for name in copied if not run(f"--notebook={name}")]
        if not copied and not refused_notebooks:  # nothing nbgrader could open: every notebook scores 0
            failed = sorted(known)
        result.failed_notebooks = failed
    if not has_submission(db, student) and (copied or refused_notebooks or result.failed_notebooks):
        add_submission(db, student)  # nbgrader writes none for a folder it finds no notebook in
    if has_submission(db, student):
        why = (f"its {job.budget:.0f} s time budget ran out" if result.budget_spent
               else "autograding could not run this notebook: see the autograde log")
        for notebooks, reason in ((result.failed_notebooks, why), (refused_notebooks, "refused: not a plain file")):
            if notebooks:
                zero_and_flag(db, student, notebooks, reason)
        result.flagged = flagged_notebooks(db, student)
    launched = job.sandbox.report()
    if launched is not None:
        result.launch_failures, result.sandbox_modes = launched.failures, launched.modes
        outputs.append("launcher records (written outside the kernel's reach):\n"
                       + "\n".join(map(json.dumps, launched.records)))
        outputs.append("kernel stdout/stderr (student-controlled, never interpreted):\n" + launched.output_tail)
    if result.refused:
        outputs.append("refused (not graded, never read):\n" + "\n".join(result.refused))
    shutil.rmtree(job.plain_copies / job.student, ignore_errors=True)
    result.leftovers = job.sandbox.clean_up(LEFTOVERS_GRACE)
    log.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # it quotes submissions: the instructor's only
        handle.write("\n".join(outputs))
    result.seconds = time.perf_counter() - start
    result.notebook_phases = phases.read_notebooks(job.phases_file)
    job.phases_file.unlink(missing_ok=True)
    clean_up = result.seconds - (copied_at - start) - in_nbgrader
    result.phases = phases.student_phases(copied_at - start, in_nbgrader, clean_up, result.notebook_phases)
    return result


class _Canary:
    """Grades a known-good submission (the released first notebook) with the batch's own settings, when a
    student's grading failed, to tell a broken machine (the canary fails too) from a broken submission.  One per
    grading session, so a cluster worker's tasks share it as a batch's students do: a machine found fine stays
    fine for ``ttl`` seconds (for the same settings); one found broken is checked again at the next failure."""

    def __init__(self, root: Path, work: Path, sandbox: StudentSandbox, ttl: float = 300):
        self.root, self.work, self.sandbox, self.ttl = root, work, sandbox, ttl
        self._fine_at: dict[tuple[str, ...], float] = {}  # nbgrader's options -> when the canary last graded with them
        # a worker's grading process grades its threads' tasks at once: one canary at a time (its folder, its
        # uid), and a task that waited reads the verdict the other just found
        self._lock = threading.Lock()

    def failure(self, args: list[str], gradebook: Path) -> str | None:
        """None when the known-good notebook grades with nbgrader's options ``args`` against a copy of ``gradebook``
        (one that holds the assignment); else what failed."""
        with self._lock:
            fine_at = self._fine_at.get(tuple(args))
            if fine_at is not None and time.monotonic() - fine_at < self.ttl:
                return None
            started = time.perf_counter()
            verdict = self._grade(args, gradebook)
            print(f"[autograde] the canary, a known-good notebook graded to tell the machine's failures from a "
                  f"submission's: {verdict or 'graded'} ({time.perf_counter() - started:.0f} s)", flush=True)
            if verdict is None:
                self._fine_at[tuple(args)] = time.monotonic()
            return verdict

    def _grade(self, args: list[str], gradebook: Path) -> str | None:
        notebooks = sorted((self.root / "notebooks" / ASSIGNMENT).glob("*.ipynb")) or \
            sorted((self.root / "solutions" / ASSIGNMENT).glob("*.ipynb"))
        if not notebooks:
            return "no released notebook to check the machine with: run `make release`"
        folder = self.work / "canary"
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "submitted" / CANARY / ASSIGNMENT).mkdir(parents=True)
        shutil.copy(notebooks[0], folder / "submitted" / CANARY / ASSIGNMENT)
        db = folder / "gradebook.db"
        sqlite_copy(gradebook, db)
        status = self.sandbox.status
        if status is not None:
            shutil.rmtree(status, ignore_errors=True)
            os.makedirs(status, mode=0o700)
        returncode, output = run_nbgrader(self.root, [
            "autograde", ASSIGNMENT, f"--student={CANARY}", f"--notebook={notebooks[0].stem}", "--force",
            f"--CourseDirectory.db_url=sqlite:///{db}",
            f"--CourseDirectory.submitted_directory={folder / 'submitted'}",
            f"--CourseDirectory.autograded_directory={folder / 'autograded'}", *args],
            env=nbgrader_env(self.sandbox.env), timeout=300)
        self.sandbox.kill_leftovers()
        launched = self.sandbox.report()
        failed = launched.failures if launched is not None else []
        if returncode == 0 and not failed and has_submission(db, CANARY):
            return None
        detail = "; ".join(failed) or "\n".join(output.strip().splitlines()[-15:])
        return f"nbgrader exit {returncode} on the released {notebooks[0].name}: {detail}"


def grade_batch(root: Path, student_ids: list[str], jobs: int = 1, extra_args: tuple[str, ...] = (), sandbox: bool = True,
                student_timeout: float = STUDENT_BUDGET) -> BatchReport:
    """Grade ``student_ids`` with at most ``jobs`` nbgrader processes at once, merging each into gradebook.db.

    A student whose notebooks nbgrader cannot run still gets a row (those notebooks at 0, flagged); the batch
    goes on.  Only when a known-good notebook fails too (``_Canary``) is the machine at fault: then no new
    student is started and the batch says so.  Each student has ``student_timeout`` seconds of wall-clock time.
    """
    start = time.perf_counter()
    fork_server(checker_imports=preloads_checks(student_ids, sandbox))  # its imports overlap what follows
    with GradingSession(root, sandbox) as session:
        setup = time.perf_counter() - start
        report = session.grade(student_ids, jobs, extra_args, student_timeout)
    report.seconds, report.setup = time.perf_counter() - start, setup
    write_report(root, report)
    return report


class GradingSession:
    """What a batch sets up once for a course folder: a scratch folder, its walls (``BatchSandbox``: a block of
    uids, the zygotes, the cgroups, the sandbox's kernelspec), the per-student gradebooks and plain copies.  ``grade_batch`` opens one per batch; a cluster worker keeps one open
    between its tasks (``grader.grading.result_folders.serve``), so that a task costs only its students, and grades
    the tasks of its threads in it at once, as one batch grades ``--jobs`` students: one pair of zygotes a machine."""

    def __init__(self, root: Path, sandbox: bool = True):
        self.root, self.sandbox = root, sandbox
        self._stack = contextlib.ExitStack()
        self._next = 0  # the index of the next student: its uid, status folder and cgroup are its own
        self._canary: _Canary | None = None  # made at the first reserve(), with an index of its own
        self._indices = threading.Lock()  # tasks graded at once take their indices one after the other

    def __enter__(self) -> "GradingSession":
        stack = self._stack.__enter__()
        try:
            self.work = work = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="translab-autograde-")))
            try:  # first: the zygotes' imports (3 s) overlap what follows; they end before the scratch folder
                self.walls = stack.enter_context(BatchSandbox(self.root, work, nbgrader_env(), self.sandbox))
            except OSError as error:  # the machine, not a student: say so before anyone is graded
                raise GradingError(f"{error}; nothing was graded") from error
            check_config(self.root)  # waits for the fork server's imports, which the first student needs first
            self.walls.release_checkers()
            self.dbs = work / "db"  # the per-student gradebooks: private even to the sandboxed kernels
            self.dbs.mkdir(mode=0o700)
            self.plain_copies = work / "submitted"  # the students' plain files (copy_plain_files): out of kernels' view
            self.plain_copies.mkdir(mode=0o700)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self._stack.__exit__(*exc)

    def room(self) -> int:
        """How many more students this session can grade (each needs an index of the uid block)."""
        return self.walls.capacity - self._next

    def has_room(self, count: int) -> bool:
        """Whether ``reserve(count)`` would succeed (the canary's index counted while it has none)."""
        return count + (self._canary is None) <= self.room()

    def reserve(self, count: int) -> int:
        """The first of ``count`` indices of the uid block, the session's alone from now on (the canary takes one at
        the first call)."""
        with self._indices:
            if not self.has_room(count):
                raise GradingError(f"this grading session has room for {self.room() - (self._canary is None)} more "
                                   f"student(s), not {count}: grade them in a new one")
            if self._canary is None:
                self._canary, self._next = _Canary(self.root, self.work, self.walls.student(self._next)), self._next + 1
            first, self._next = self._next, self._next + count
            return first

    def _student(self, index: int, extra_args: tuple[str, ...]) -> tuple[StudentSandbox, list[str]]:
        """The ``index``-th student's sandbox, and nbgrader's options for it."""
        walls = self.walls.student(index)
        return walls, _nbgrader_options(walls, extra_args)

    def grade(self, student_ids: list[str], jobs: int = 1, extra_args: tuple[str, ...] = (),
              student_timeout: float = STUDENT_BUDGET, first: int | None = None, main_db: Path | None = None
              ) -> BatchReport:
        """Grade ``student_ids`` (see ``grade_batch``) into ``main_db`` (the course's gradebook.db), with the indices
        from ``first`` on (``reserve``: taken now when not given); the report is not written."""
        start = time.perf_counter()
        main_db = main_db or self.root / "gradebook.db"
        if first is None:
            first = self.reserve(len(student_ids))
        canary_args = _nbgrader_options(self._canary.sandbox, extra_args)
        results = []
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {}
            for offset, name in enumerate(student_ids):
                index = first + offset
                db = self.dbs / f"student{index}.db"
                sqlite_copy(main_db, db)
                job = StudentJob(self.root, name, db, self.plain_copies, *self._student(index, extra_args),
                                 student_timeout, self.dbs / f"student{index}.phases")
                futures[pool.submit(_grade_student, job)] = db
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    result = future.result()
                except Exception as error:  # our code or the machine, never a submission: say so, stop
                    result = StudentResult(student_ids[list(futures).index(future)], infrastructure=repr(error))
                if result.suspicious and not result.infrastructure:
                    failure = self._canary.failure(canary_args, main_db)
                    if failure:
                        result.infrastructure = f"a known-good notebook fails to grade too: {failure}"
                results.append(result)
                if not result.infrastructure:
                    merging = time.perf_counter()
                    try:
                        merge_student(main_db, futures[future], result.student)
                        result.phases["merge"] = time.perf_counter() - merging
                    except sqlite3.Error as error:  # rolled back: the gradebook holds the student's old rows
                        result.infrastructure = f"merging into {main_db} failed: {error}"
                    finally:
                        futures[future].unlink(missing_ok=True)
                if result.infrastructure:
                    for pending in futures:
                        pending.cancel()
                print(f"[autograde] {result.student}: {result.status} ({result.seconds:.0f} s, log {result.log})",
                      flush=True)
        return BatchReport(sorted(results, key=lambda r: r.student), time.perf_counter() - start, jobs)


def _nbgrader_options(walls: StudentSandbox, extra_args: tuple[str, ...]) -> list[str]:
    """nbgrader's options for a student in ``walls``: the caller's --Class.trait=value wins over the sandbox's
    (nbgrader rejects a trait given twice)."""
    overridden = {arg.split("=", 1)[0] for arg in extra_args}
    return [arg for arg in walls.args if arg.split("=", 1)[0] not in overridden] + list(extra_args)


REPORT_COLUMNS = ["student_id", "status", "failed_notebooks", "flagged", "refused", "budget_spent", "leftovers", "uid",
                  "seconds", "log"]


def write_report(root: Path, report: BatchReport) -> Path:
    """autograded/autograde_report.csv: this batch's rows, merged into the rows of the students it did not grade
    (a batch of one late student, or of those not graded again, replaces their rows only), by student id."""
    out = root / "autograded" / REPORT_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = {row[0]: row for row in _report_rows(out)}
    for r in report.results:
        rows[r.student] = [r.student, "infrastructure" if r.infrastructure else ("failed" if r.failed_notebooks else "ok"),
                           " ".join(r.failed_notebooks), " ".join(r.flagged), " | ".join(r.refused),
                           "yes" if r.budget_spent else "", " | ".join(r.leftovers), r.uid or "",
                           f"{r.seconds:.1f}", r.log]
    scratch = out.with_name(f".{out.name}.{os.getpid()}")
    with open(scratch, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(REPORT_COLUMNS)
        writer.writerows(rows[student] for student in sorted(rows))
    os.replace(scratch, out)  # whole or not at all: a batch stopped mid-write leaves the old report
    phases.write(root, report.setup, report.timed)
    return out


def _report_rows(path: Path) -> list[list[str]]:
    """The rows of an earlier report, [] when there is none; a report of other columns (an older translab's) is
    kept aside as ``<name>.old`` rather than merged wrongly."""
    try:
        with open(path, newline="", encoding="utf-8") as handle:
            table = list(csv.reader(handle))
    except FileNotFoundError:
        return []
    if not table or table[0] != REPORT_COLUMNS:
        os.replace(path, path.with_name(path.name + ".old"))
        return []
    return [row for row in table[1:] if row and len(row) == len(REPORT_COLUMNS)]



def print_summary(root: Path, report: BatchReport, student_timeout: float) -> int:
    """What the instructor reads after a batch, and the exit code: 1 when the machine, not a student, failed."""
    failed = [r for r in report.results if r.failed_notebooks]
    graded = len(report.results) - len(report.infrastructure)
    where = f"on {report.jobs} worker thread(s) of {report.cluster}" if report.cluster else f"with --jobs {report.jobs}"
    print(f"autograded {graded} student(s) in {report.seconds:.0f} s {where}"
          f"{f', {len(report.infrastructure)} not (below)' if report.infrastructure else ''}; "
          f"report: {root / 'autograded' / REPORT_NAME}")
    if report.timed:
        print(f"  {phases.summary(report.setup, report.timed)} ({root / 'autograded' / phases.PHASES_NAME})")
    for r in failed:
        print(f"  needs a look: {r.student}: nbgrader could not run {', '.join(r.failed_notebooks)} "
              f"(scored 0, flagged; log {r.log})")
    if any("limits only" in r.sandbox_modes for r in report.results):
        print("warning: this machine refuses unprivileged user namespaces, so student code ran with the "
              "resource limits only, with your permissions and network: grade untrusted work as root in a "
              "container or a VM, or allow user namespaces", file=sys.stderr)
    for r in report.results:
        if r.budget_spent:
            print(f"  needs a look: {r.student}: the student's {student_timeout:.0f} s budget ran out")
        if r.refused:
            print(f"  needs a look: {r.student}: refused, not graded and never read: {'; '.join(r.refused)}")
        if set(r.flagged) - set(r.failed_notebooks):
            print(f"  needs a look: {r.student}: flagged {', '.join(sorted(set(r.flagged) - set(r.failed_notebooks)))}"
                  f" (refused, or grading cut short by a dead or hung kernel or the notebook's time budget: "
                  f"the cells and the log say which)")
        if r.leftovers:
            print(f"warning: {r.student}'s sandbox left {len(r.leftovers)} thing(s) behind, removed: "
                  f"{'; '.join(r.leftovers[:5])}", file=sys.stderr)
    # a class in which nobody's notebooks run is the machine's failure, not the students' (one or two
    # students may really all be broken, so not for a rerun of a few)
    if len(report.results) >= 3 and all(r.failed_notebooks for r in report.results):
        print("error: no student's notebooks could be run at all: that looks like the grading machine, not "
              "the students (see the logs); fix it and grade again", file=sys.stderr)
        return 1
    for r in report.infrastructure:
        print(f"error: grading {r.student} failed, not because of the submission: {r.infrastructure}"
              + (f" (log {r.log})" if r.log else ""), file=sys.stderr)
    return 1 if report.infrastructure else 0
