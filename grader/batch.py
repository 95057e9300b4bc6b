"""The instructor's side of the lab, around nbgrader (what the Makefile's grading targets run).

    python -m grader release          # solutions/ -> notebooks/ (nbgrader generate_assignment)
    python -m grader references       # grader/references/*.pt from translab (--margins: against other CPUs)
    python -m grader autograde        # every submission in submitted/ [--jobs N] [--Execute.timeout=S ...]
    python -m grader feedback         # feedback/ as HTML, hidden tests removed
    python -m grader grades           # grades.csv, one row per student
    python -m grader collect FILE.zip # an LMS download -> submitted/<student>/transfer_learning/

Every command is idempotent (nbgrader runs with --force) and exits non-zero when nbgrader reports
an error, including a configuration file that failed to load (nbgrader itself only logs that).
``--root`` points at another course folder (the tests grade a temporary copy of the course).

``autograde`` is the exception, on purpose: a class is graded the night before marks are due, so one broken
submission must not stop it.  Each student is graded by an nbgrader process of its own (``--jobs N`` at a
time, forked from a server that has nbgrader loaded), with one ``grader.sandbox`` kernel per student (reset
between notebooks) and a checker, both forked from a zygote that has torch loaded; a notebook nbgrader cannot
run scores 0 and is flagged for the instructor, listed at the end and in ``autograded/autograde_report.csv``,
and the exit code stays 0.  It is 1 only when the grading machinery fails (configuration, kernel, database),
which no student can cause.
Options of the form ``--Class.trait=value`` after ``autograde`` are passed on to nbgrader.
"""
from __future__ import annotations

import argparse
import contextlib
import csv
import json
import os
import shutil
import signal
import sqlite3
import stat
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from .collect import MAX_NOTEBOOK_BYTES as MAX_SUBMITTED_FILE  # one cap on what is collected and graded
from translab.paths import REPO_ROOT

ASSIGNMENT = "transfer_learning"
FATAL_LOG_LINES = ("Exception while loading config", "[ERROR]", "[CRITICAL]")
REPORT_NAME = "autograde_report.csv"
CANARY = "translab-canary-check"  # the known-good submission that tells a broken machine from a broken student
STUDENT_BUDGET = 600.0   # wall-clock seconds for one student: every notebook and every retry
LEFTOVERS_GRACE = 15.0   # seconds for a student's killed processes to be gone before they count as leftovers
CONFIG_TIMEOUT = 120     # seconds for nbgrader_config.py to load before the batch refuses it


class GradingError(RuntimeError):
    pass


# ----------------------------------------------------------------- running nbgrader

def _nbgrader_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    # One torch thread per grading kernel: measured on 2 cores, a training step in a Jupyter kernel took
    # 3.9 s with PyTorch's default 2 threads while the other core was busy, 0.37 s with one thread.
    # Grading is throughput work (one submission per core), so this is also the faster choice.
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PATH"] = with_venv_bin(env.get("PATH", ""))
    env.update(extra or {})
    return env


def with_venv_bin(path: str) -> str:
    """``path`` (a PATH value) with this interpreter's bin/ first: nbgrader runs ``alembic`` (a new gradebook's
    migrations) from PATH, and it must be this venv's."""
    bin_dir = str(Path(sys.executable).parent)
    return path if path.split(os.pathsep)[:1] == [bin_dir] else os.pathsep.join([bin_dir, path])


# What every nbgrader process of a batch imports (nbgrader with its server extensions, nbclient, the config's
# plugins): about 1 CPU-second a student, loaded once in a fork server instead (multiprocessing's forkserver: a
# clean single-threaded process, never the batch's threads), whose children run nbgrader.  Nothing of a student is
# in it: it only imported modules.
WARM_IMPORTS = ["grader.batch", "grader.execution", "grader.verdicts", "grader.sanitize",
                "grader.mathml", "nbgrader.apps.nbgraderapp", "nbgrader.preprocessors", "nbconvert.preprocessors"]
_forks = None


def _preloads_checks(names: list[str], sandbox: bool) -> bool:
    """Whether the fork server also imports the checker's torch and checks (verdicts.CHECKER_IMPORTS, 1.8
    CPU-seconds).  Not for a sandboxed batch: it forks each student's checker from its zygote, which has them
    (verdicts.ForkedChecker).  Without the sandbox, when it forks many students; for one student they would hold
    up its start, and its checker's thread imports them while the kernel starts (verdicts.Checker).  Feedback
    runs no checks."""
    return len(names) > 1 and not sandbox


def _fork_server(checker_imports: bool = False):
    """The multiprocessing context whose fork server holds ``WARM_IMPORTS`` (and ``CHECKER_IMPORTS`` if asked);
    the first call starts the server, which then imports them while the batch goes on with its own preparations."""
    global _forks
    if _forks is None:
        import multiprocessing
        from multiprocessing import forkserver
        context = multiprocessing.get_context("forkserver")
        from .verdicts import CHECKER_IMPORTS
        context.set_forkserver_preload(WARM_IMPORTS + (list(CHECKER_IMPORTS) if checker_imports else []))
        forkserver.ensure_running()
        _forks = context
    return _forks


def _nbgrader_main(args: list[str], env: dict, cwd: str, output: str) -> None:
    """A fork server's child: nbgrader's command line in a session of its own, with the job's environment and
    folder, its output in ``output``; the exit handlers run (they end the kernel kept between notebooks)."""
    import atexit
    os.setsid()
    descriptor = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_NOFOLLOW)
    os.dup2(descriptor, 1)
    os.dup2(descriptor, 2)
    os.close(descriptor)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    if "torch" in sys.modules:  # imported before this environment was set: its threads as the job says
        sys.modules["torch"].set_num_threads(max(1, int(env.get("OMP_NUM_THREADS") or 1)))
    sys.argv = [sys.executable, *args]
    code = 0
    try:
        from nbgrader.apps.nbgraderapp import main
        main()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    finally:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    sys.exit(code)


def _run_nbgrader(root: Path, args: list[str], env: dict | None = None,
                  timeout: float | None = None) -> tuple[int, str]:
    """(exit code, output) of one nbgrader command, run by a child of the fork server; on ``timeout`` its
    whole process group is killed.

    nbgrader starts each notebook's kernel as its child: killing only nbgrader would leave a student's
    runaway kernel behind, hence a session of its own and ``killpg``.
    """
    with tempfile.NamedTemporaryFile(prefix="translab-nbgrader-", suffix=".log", delete=False) as handle:
        output_path = handle.name  # private (0600): it quotes submissions
    process = _fork_server().Process(target=_nbgrader_main, daemon=False,
                                     args=(list(args), dict(env or _nbgrader_env()), str(root), output_path))
    timed_out = False
    try:
        process.start()
        process.join(timeout)
        timed_out = process.is_alive()
        if timed_out:
            process.kill()
            process.join()
    finally:
        try:  # its session: a kernel that outlived nbgrader (it detaches from nothing, but be sure) goes too
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError, TypeError):
            pass
        output = Path(output_path).read_text(encoding="utf-8", errors="replace")
        os.unlink(output_path)
    if timed_out:
        return -signal.SIGKILL, output + f"\n[translab] [TIMEOUT] killed after {timeout:.0f} s\n"
    return process.exitcode, output


def _fatal_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if any(marker in line for marker in FATAL_LOG_LINES)]


def _nbgrader(root: Path, *args: str, check: bool = True) -> str:
    returncode, output = _run_nbgrader(root, list(args))
    sys.stdout.write(output)
    bad = _fatal_lines(output)
    if check and (returncode != 0 or bad):
        raise GradingError(f"`nbgrader {' '.join(args)}` failed (exit {returncode}):\n" + "\n".join(bad[:20]))
    return output


def release(root: Path) -> list[Path]:
    """Regenerate the student notebooks (and the gradebook's copy of the tests) from the solutions."""
    source = root / "solutions" / ASSIGNMENT
    dirty = [p.name for p in sorted(source.glob("*.ipynb")) if _has_outputs(p)]
    if dirty:
        raise GradingError(f"solution notebooks must be committed without outputs: {dirty}. "
                           "Clear them (Edit > Clear Outputs of All Cells, or `jupyter nbconvert --clear-output "
                           "--inplace`) and release again.")
    _check_config(root)  # nbgrader would log the error and release with its defaults (answers and all)
    _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return sorted((root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))


def _has_outputs(path: Path) -> bool:
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    return any(cell.get("outputs") or cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code")


def _gradebook_has_assignment(root: Path) -> bool:
    """Read with sqlite3 first: importing nbgrader's API (SQLAlchemy) here costs the batch 0.7 s before the
    first kernel can start; a gradebook sqlite3 cannot read goes through nbgrader, which migrates or explains."""
    db = root / "gradebook.db"
    if not db.exists():
        return False
    try:
        return bool(_gradebook_notebooks(db))
    except sqlite3.Error:
        pass
    from nbgrader.api import Gradebook, MissingEntry
    with Gradebook(f"sqlite:///{db}") as gradebook:
        try:
            return len(gradebook.find_assignment(ASSIGNMENT).notebooks) > 0
        except MissingEntry:
            return False


def students(root: Path) -> list[str]:
    submitted = root / "submitted"
    return sorted(p.parent.name for p in submitted.glob(f"*/{ASSIGNMENT}") if p.is_dir())


def _ensure_assignment(root: Path) -> None:
    if not _gradebook_has_assignment(root):
        # The gradebook holds the tests (hidden ones included) that autograde puts back; build it
        # from the solutions without touching the committed student notebooks.
        with tempfile.TemporaryDirectory() as scratch:
            _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force",
                      f"--CourseDirectory.release_directory={scratch}")


def autograde(root: Path, jobs: int = 1, student: str | None = None, extra_args: tuple[str, ...] = (),
              sandbox: bool = True, student_timeout: float = STUDENT_BUDGET) -> "BatchReport":
    """Grade every submission (or one student's), ``jobs`` students at a time (see ``grade_batch``)."""
    names = students(root)
    if not names:
        raise GradingError(f"nothing to grade: put submissions in {root / 'submitted'}/<student>/{ASSIGNMENT}/ "
                           "(or `make collect ZIP=...`)")
    if student is not None:
        if student not in names:
            raise GradingError(f"no submission for {student!r} in {root / 'submitted'}")
        names = [student]
    from translab.data import FIX_HINT, missing
    absent = missing()
    if absent:
        raise GradingError(f"the lab's data is not on this machine ({', '.join(map(str, absent[:3]))}"
                           f"{' and more' if len(absent) > 3 else ''}): every student would lose the points of the "
                           f"cells that read it. Nothing was graded: {FIX_HINT}, or point TRANSLAB_DATA_DIR at the "
                           "data folder, and grade again")
    from .variants import SecretMissing, require_secret
    try:  # part 2's stated counts are judged against each student's variant, derived from it
        require_secret(root)
    except SecretMissing as error:
        raise GradingError(f"{error} Nothing was graded.") from error
    # started first, with the preload this batch wants: its imports (1 s) overlap the zygote's, and
    # generate_assignment, when the gradebook is new, is forked from it too
    _fork_server(checker_imports=_preloads_checks(names, sandbox))
    _ensure_assignment(root)
    return grade_batch(root, names, jobs=jobs, extra_args=extra_args, sandbox=sandbox, student_timeout=student_timeout)


# ----------------------------------------------------------------- parallel autograde, one process per student
#
# SQLite allows one writer at a time and nbgrader does not retry a locked database, so N nbgrader processes
# must not share gradebook.db.  Each student is graded by its own `nbgrader autograde --student=X` against a
# private copy of the gradebook (seeded after the assignment is in it); when it finishes, the main thread copies
# that student's rows (student, submission, notebooks, grades, comments) into gradebook.db in one transaction.
# Students never share rows, so the merged gradebook equals what sequential grading writes.  jobs=1 takes the
# same path, so a broken submission is isolated the same way whatever N is.



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
    jobs: int

    @property
    def infrastructure(self) -> list[StudentResult]:
        return [r for r in self.results if r.infrastructure]


# ----------------------------------------------------------------- submissions are plain files

def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                       (stat.S_ISCHR, "a device"), (stat.S_ISBLK, "a device"), (stat.S_ISDIR, "a folder")):
        if test(mode):
            return name
    return "a regular file" if stat.S_ISREG(mode) else "not a regular file"


def stage_submission(source: Path, dest: Path, top: Path | None = None) -> list[str]:
    """Copy the plain files of a submission folder to ``dest`` (what nbgrader then grades); return what was
    refused, with why.

    As root, nbgrader would follow a link in ``submitted/`` to the gradebook, /etc/shadow or a solution and copy
    it where student code reads it.  Here nothing is followed: every path from ``top`` (``submitted/``) down is
    checked with ``lstat``, a file is opened with ``O_NOFOLLOW`` and checked again on its descriptor before a
    byte is read, and links, devices, FIFOs, sockets, hard links and files over ``MAX_SUBMITTED_FILE`` are
    refused, never read."""
    refused: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    top = top or source.parent
    for folder in [source, *source.parents]:  # the student's folder and the assignment's, not links
        if folder == top or top not in folder.parents:
            break
        try:
            mode = os.lstat(folder).st_mode
        except FileNotFoundError:
            return refused
        if not stat.S_ISDIR(mode):
            return [f"{folder.relative_to(top)}: {_kind(mode)}, not a folder"]
    for here, dirs, files in os.walk(source):  # os.walk lists a link to a folder but never enters it
        relative = Path(here).relative_to(source)
        (dest / relative).mkdir(parents=True, exist_ok=True)
        for name in sorted(dirs):
            mode = os.lstat(Path(here) / name).st_mode
            if not stat.S_ISDIR(mode):
                refused.append(f"{relative / name}: {_kind(mode)}")
                dirs.remove(name)
        for name in sorted(files):
            reason = _copy_plain_file(Path(here) / name, dest / relative / name)
            if reason:
                refused.append(f"{relative / name}: {reason}")
    return refused


def _copy_plain_file(path: Path, dest: Path) -> str | None:
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        return _kind(info.st_mode)
    if info.st_nlink > 1:
        return "a hard link (it may be a file from outside the submission)"
    if info.st_size > MAX_SUBMITTED_FILE:
        return f"larger than {MAX_SUBMITTED_FILE // 1024 ** 2} MB"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as error:
        return f"unreadable ({error.strerror})"
    with os.fdopen(fd, "rb") as handle:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != (info.st_dev, info.st_ino):
            return "changed while it was checked"
        with open(dest, "wb") as out:
            shutil.copyfileobj(handle, out)
    os.utime(dest, ns=(info.st_atime_ns, info.st_mtime_ns))
    return None


def _sqlite_copy(source: Path, dest: Path) -> None:
    """A consistent snapshot (the backup API), not a file copy that could catch a half-written page."""
    with sqlite3.connect(source) as src, sqlite3.connect(dest) as dst:
        src.backup(dst)
    src.close()
    dst.close()


_SUBMISSION = ("SELECT sa.id FROM {db}submitted_assignment sa JOIN {db}assignment a ON sa.assignment_id = a.id "
               "WHERE sa.student_id = :student AND a.name = :assignment")
_NOTEBOOKS = "SELECT id FROM {db}submitted_notebook WHERE assignment_id IN (" + _SUBMISSION + ")"


def _merge_student(main_db: Path, student_db: Path, student: str) -> None:
    """Replace the student's rows in ``main_db`` with those of ``student_db``, atomically.

    Both databases come from the same gradebook, so assignment, notebook and cell ids agree and the rows can
    be copied column for column.  Manual grades are carried over as nbgrader left them in the copy.
    """
    keys = {"student": student, "assignment": ASSIGNMENT}
    main, src = _NOTEBOOKS.format(db="main."), _NOTEBOOKS.format(db="src.")
    connection = sqlite3.connect(main_db, timeout=120, isolation_level=None)
    try:
        connection.execute("ATTACH DATABASE ? AS src", (str(student_db),))
        connection.execute("BEGIN IMMEDIATE")
        for table in ("comment", "grade"):
            connection.execute(f"DELETE FROM main.{table} WHERE notebook_id IN ({main})", keys)
        connection.execute(f"DELETE FROM main.submitted_notebook WHERE id IN ({main})", keys)
        connection.execute(f"DELETE FROM main.submitted_assignment WHERE id IN ({_SUBMISSION.format(db='main.')})", keys)
        connection.execute("INSERT OR REPLACE INTO main.student SELECT * FROM src.student WHERE id = :student", keys)
        connection.execute("INSERT INTO main.submitted_assignment SELECT * FROM src.submitted_assignment "
                           f"WHERE id IN ({_SUBMISSION.format(db='src.')})", keys)
        connection.execute(f"INSERT INTO main.submitted_notebook SELECT * FROM src.submitted_notebook WHERE id IN ({src})",
                           keys)
        for table in ("grade", "comment"):
            connection.execute(f"INSERT INTO main.{table} SELECT * FROM src.{table} WHERE notebook_id IN ({src})", keys)
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    finally:
        connection.close()


def _query(db: Path, sql: str, params) -> list[tuple]:
    connection = sqlite3.connect(db)
    try:
        return connection.execute(sql, params).fetchall()
    finally:
        connection.close()


def _gradebook_notebooks(db: Path) -> list[str]:
    rows = _query(db, "SELECT n.name FROM notebook n JOIN assignment a ON n.assignment_id = a.id WHERE a.name = ?",
                  (ASSIGNMENT,))
    return sorted(name for (name,) in rows)


def _zero_and_flag(db: Path, student: str, notebooks: list[str], reason: str) -> None:
    """Notebooks nbgrader could not run: their test cells score 0 (not whatever an earlier run left) and
    the notebook is flagged, so the formgrader shows the instructor where to look."""
    keys = {"student": student, "assignment": ASSIGNMENT}
    connection = sqlite3.connect(db, isolation_level=None)
    try:
        connection.execute("BEGIN IMMEDIATE")
        for name in notebooks:
            ids = (f"SELECT sn.id FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
                   f"WHERE n.name = :notebook AND sn.assignment_id IN ({_SUBMISSION.format(db='')})")
            args = {**keys, "notebook": name}
            connection.execute("UPDATE grade SET auto_score = 0, needs_manual_grade = 1 WHERE notebook_id IN "
                               f"({ids}) AND cell_id IN (SELECT id FROM grade_cells WHERE cell_type = 'code')", args)
            connection.execute(f"UPDATE comment SET auto_comment = :reason WHERE notebook_id IN ({ids})",
                               {**args, "reason": reason})
            connection.execute(f"UPDATE submitted_notebook SET flagged = 1 WHERE id IN ({ids})", args)
        connection.execute("COMMIT")
    finally:
        connection.close()


def _add_submission(db: Path, student: str) -> None:
    """An empty submission (every notebook, every grade unset), as nbgrader would have created it."""
    import warnings
    from nbgrader.api import Gradebook
    with Gradebook(f"sqlite:///{db}") as gradebook, warnings.catch_warnings():
        warnings.simplefilter("ignore")  # SQLAlchemy's "not in session" noise, harmless (nbgrader's own too)
        gradebook.update_or_create_student(student)
        gradebook.add_submission(ASSIGNMENT, student)


def _has_submission(db: Path, student: str) -> bool:
    return bool(_query(db, _SUBMISSION.format(db=""), {"student": student, "assignment": ASSIGNMENT}))


def _flagged_notebooks(db: Path, student: str) -> list[str]:
    rows = _query(db, "SELECT n.name FROM submitted_notebook sn JOIN notebook n ON sn.notebook_id = n.id "
                      f"WHERE sn.flagged = 1 AND sn.assignment_id IN ({_SUBMISSION.format(db='')})",
                  {"student": student, "assignment": ASSIGNMENT})
    return sorted(name for (name,) in rows)


@dataclass
class StudentJob:
    """Everything one student's grading needs; built by ``grade_batch``."""
    root: Path
    student: str
    db: Path
    staged: Path      # the student's plain files, what nbgrader grades (CourseDirectory.submitted_directory)
    status: Path | None  # the launcher's reports for this student
    env: dict
    args: list[str]
    budget: float
    index: int = 0
    uid: int | None = None
    work: Path | None = None
    shared_folders: list[Path] | None = None  # where a uid could leave files (sandbox.world_writable_folders)


def _grade_student(job: StudentJob) -> StudentResult:
    """Grade one student into ``job.db``.  If nbgrader fails on the submission as a whole (one unreadable
    notebook fails them all), grade each submitted notebook on its own, so only the broken ones lose.  The
    verdict comes from exit codes, the gradebook and the launcher's records, never from what nbgrader or a
    kernel printed: a student decides what that says."""
    root, student, db = job.root, job.student, job.db
    log = root / "autograded" / student / "autograde.log"
    result = StudentResult(student, log=log, uid=job.uid)
    start = time.perf_counter()
    deadline = start + job.budget
    result.refused = stage_submission(root / "submitted" / student / ASSIGNMENT, job.staged / student / ASSIGNMENT,
                                      top=root / "submitted")
    base = ["autograde", ASSIGNMENT, f"--student={student}", "--force", f"--CourseDirectory.db_url=sqlite:///{db}",
            f"--CourseDirectory.submitted_directory={job.staged}", *job.args]
    outputs = []

    def run(*more: str) -> bool:
        from .sandbox import kill_leftovers
        left = deadline - time.perf_counter()
        if left <= 0:
            result.budget_spent = True
            return False
        returncode, output = _run_nbgrader(root, base + list(more), env=job.env, timeout=left)
        kill_leftovers(job.env)
        if returncode == -signal.SIGKILL and time.perf_counter() >= deadline:
            result.budget_spent = True
        outputs.append(f"$ nbgrader {' '.join(base[:3] + list(more))}\n{output}")
        return returncode == 0

    known = _gradebook_notebooks(db)
    staged = sorted(p.stem for p in (job.staged / student / ASSIGNMENT).glob("*.ipynb") if p.stem in known)
    refused_notebooks = sorted({Path(entry.split(":")[0]).stem for entry in result.refused} & set(known))
    if not run():
        failed = [name for name in staged if not run(f"--notebook={name}")]
        if not staged and not refused_notebooks:  # nothing nbgrader could open: every notebook scores 0
            failed = sorted(known)
        result.failed_notebooks = failed
    if not _has_submission(db, student) and (staged or refused_notebooks or result.failed_notebooks):
        _add_submission(db, student)  # nbgrader writes none for a folder it finds no notebook in
    if _has_submission(db, student):
        why = (f"its {job.budget:.0f} s time budget ran out" if result.budget_spent
               else "autograding could not run this notebook: see the autograde log")
        for notebooks, reason in ((result.failed_notebooks, why), (refused_notebooks, "refused: not a plain file")):
            if notebooks:
                _zero_and_flag(db, student, notebooks, reason)
        result.flagged = _flagged_notebooks(db, student)
    if job.status is not None:
        from .sandbox import kernel_output_tail, launch_failures, launch_records
        records = launch_records(job.status)
        result.launch_failures = launch_failures(records)
        result.sandbox_modes = sorted({r["mode"] for r in records if r.get("ok") and r.get("mode")})
        outputs.append("launcher records (written outside the kernel's reach):\n" + "\n".join(map(json.dumps, records)))
        outputs.append("kernel stdout/stderr (student-controlled, never interpreted):\n" + kernel_output_tail(job.status))
    if result.refused:
        outputs.append("refused (not graded, never read):\n" + "\n".join(result.refused))
    _clean_up_student(job, result)
    result.seconds = time.perf_counter() - start
    log.parent.mkdir(parents=True, exist_ok=True)
    descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:  # it quotes submissions: the instructor's only
        handle.write("\n".join(outputs))
    return result


def _clean_up_student(job: StudentJob, result: StudentResult) -> None:
    """Remove the student's staged files, sockets and reports, then check that the uid left nothing."""
    from .sandbox import kill_leftovers, leftovers
    kill_leftovers(job.env)
    sockets = job.work / "ipc" / str(job.index) if job.work else None  # sandbox.student_args puts them there
    for folder in (job.staged / job.student, job.status, sockets):
        if folder is not None and folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
    if job.uid is not None:
        # Killed processes take a moment to go: a fork storm's 500, each forked from a kernel that shares the
        # zygote's 1-2 GB of mappings (grader.zygote), take a few seconds to tear down.
        deadline = time.monotonic() + LEFTOVERS_GRACE
        while True:
            result.leftovers = leftovers(job.uid, job.shared_folders)
            if not result.leftovers or time.monotonic() > deadline:
                break
            kill_leftovers(job.env)
            time.sleep(0.1)


def _check_config(root: Path) -> None:
    """nbgrader only logs a configuration file that raises, then grades with its defaults: refuse instead.  The
    file is loaded by a child of the fork server, which has already imported what it imports (1.1 s here)."""
    path = root / "nbgrader_config.py"
    if not path.exists():
        return
    forks = _fork_server()
    reader, writer = forks.Pipe(duplex=False)
    process = forks.Process(target=_load_config, args=(path, writer), daemon=True)
    process.start()
    writer.close()
    try:
        problem = reader.recv() if reader.poll(CONFIG_TIMEOUT) else f"it did not load in {CONFIG_TIMEOUT} s"
    except EOFError:
        problem = "loading it ended the process"
    finally:
        reader.close()
        if process.is_alive():
            process.kill()
        process.join()
    if problem:
        raise GradingError(f"{path} does not load: {problem}; fix it and grade again")


def _load_config(path: Path, writer) -> None:
    """A fork server's child: load ``path`` as nbgrader would; send None, or what went wrong."""
    from traitlets.config.loader import PyFileConfigLoader
    try:
        PyFileConfigLoader(path.name, path=str(path.parent)).load_config()
        writer.send(None)
    except Exception as error:  # noqa: BLE001 - whatever it raises is the instructor's to read
        writer.send(repr(error))


class _Canary:
    """Grades a known-good submission (the released first notebook) with the batch's own settings, when a
    student's grading failed, to tell a broken machine (the canary fails too) from a broken submission.  Its
    verdict is kept for ``ttl`` seconds."""

    def __init__(self, root: Path, work: Path, env: dict, args: list[str], ttl: float = 300):
        self.root, self.work, self.env, self.args, self.ttl = root, work, env, args, ttl
        self.checked_at: float | None = None
        self.verdict: str | None = None

    def failure(self) -> str | None:
        """None when the known-good notebook grades; else what failed."""
        if self.checked_at is not None and time.monotonic() - self.checked_at < self.ttl:
            return self.verdict
        self.verdict, self.checked_at = self._grade(), time.monotonic()
        return self.verdict

    def _grade(self) -> str | None:
        from .sandbox import kill_leftovers, launch_failures, launch_records
        notebooks = sorted((self.root / "notebooks" / ASSIGNMENT).glob("*.ipynb")) or \
            sorted((self.root / "solutions" / ASSIGNMENT).glob("*.ipynb"))
        if not notebooks:
            return "no released notebook to check the machine with: run `make release`"
        folder = self.work / "canary"
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "submitted" / CANARY / ASSIGNMENT).mkdir(parents=True)
        shutil.copy(notebooks[0], folder / "submitted" / CANARY / ASSIGNMENT)
        db = folder / "gradebook.db"
        _sqlite_copy(self.root / "gradebook.db", db)
        status = self.env.get("TRANSLAB_SANDBOX_STATUS")
        if status:
            shutil.rmtree(status, ignore_errors=True)
            os.makedirs(status, mode=0o700)
        returncode, output = _run_nbgrader(self.root, [
            "autograde", ASSIGNMENT, f"--student={CANARY}", f"--notebook={notebooks[0].stem}", "--force",
            f"--CourseDirectory.db_url=sqlite:///{db}",
            f"--CourseDirectory.submitted_directory={folder / 'submitted'}",
            f"--CourseDirectory.autograded_directory={folder / 'autograded'}", *self.args], env=self.env, timeout=300)
        kill_leftovers(self.env)
        failed = launch_failures(launch_records(Path(status))) if status else []
        if returncode == 0 and not failed and _has_submission(db, CANARY):
            return None
        detail = "; ".join(failed) or "\n".join(output.strip().splitlines()[-15:])
        return f"nbgrader exit {returncode} on the released {notebooks[0].name}: {detail}"


def grade_batch(root: Path, names: list[str], jobs: int = 1, extra_args: tuple[str, ...] = (), sandbox: bool = True,
                student_timeout: float = STUDENT_BUDGET) -> BatchReport:
    """Grade ``names`` with at most ``jobs`` nbgrader processes at once, merging each into gradebook.db.

    A student whose notebooks nbgrader cannot run still gets a row (those notebooks at 0, flagged); the batch
    goes on.  Only when a known-good notebook fails too (``_Canary``) is the machine at fault: then no new
    student is started and the batch says so.  Each student has ``student_timeout`` seconds of wall-clock time.
    """
    from . import sandbox as kernel_sandbox
    start = time.perf_counter()
    _fork_server(checker_imports=_preloads_checks(names, sandbox))  # its imports overlap what follows
    main_db = root / "gradebook.db"
    results = []
    with kernel_sandbox.UidBlock() as uids, tempfile.TemporaryDirectory(prefix="translab-autograde-") as scratch, \
            contextlib.ExitStack() as stack:
        work = Path(scratch)
        zygote = None
        if sandbox:  # first: its imports (3 s) overlap what follows; it ends before the scratch folder goes
            from .zygote import Zygote
            try:
                zygote = stack.enter_context(Zygote(work, _nbgrader_env(), root, later=len(names) > 1)).path
            except OSError as error:  # the machine, not a student: say so before anyone is graded
                raise GradingError(f"{error}; nothing was graded") from error
        _check_config(root)
        dbs = work / "db"  # the per-student gradebooks: private even to the sandboxed kernels
        dbs.mkdir(mode=0o700)
        staged = work / "submitted"  # the students' plain files (stage_submission): out of every kernel's view
        staged.mkdir(mode=0o700)
        extra_env, kernel_args = {}, []
        groups = None
        if sandbox:
            extra_env, kernel_args = kernel_sandbox.grading_kernel(root, work, zygote=zygote)
            from .cgroups import Cgroups
            limits = kernel_sandbox.Limits()
            groups = stack.enter_context(Cgroups(limits.memory, limits.tasks))
            print(f"[autograde] a cgroup per student: {groups.problem or groups.mode}", flush=True)
        # the caller's --Class.trait=value wins over ours (nbgrader rejects a trait given twice)
        overridden = {arg.split("=", 1)[0] for arg in extra_args}

        def options(ours: list[str]) -> list[str]:
            return [arg for arg in ours if arg.split("=", 1)[0] not in overridden] + list(extra_args)

        def student_settings(index: int) -> tuple[dict, list[str], Path | None]:
            if not sandbox:  # asked for (--no-sandbox): the nbgrader config refuses it otherwise
                from .execution import UNSANDBOXED
                return _nbgrader_env({UNSANDBOXED: "1"}), options([]), None
            status = kernel_sandbox.status_folder(work, index)
            env = _nbgrader_env({**extra_env, **kernel_sandbox.student_env(uids.uid(index), status, work, index),
                                 **groups.student(index)})
            return env, options(kernel_args + kernel_sandbox.student_args(work, index)), status

        shared_folders = kernel_sandbox.world_writable_folders(skip=work) if sandbox else None
        canary_env, canary_args, _ = student_settings(len(names))
        canary = _Canary(root, work, canary_env, canary_args)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {}
            for index, name in enumerate(names):
                db = dbs / f"student{index}.db"
                _sqlite_copy(main_db, db)
                env, args, status = student_settings(index)
                job = StudentJob(root, name, db, staged, status, env, args, student_timeout, index,
                                 uids.uid(index) if sandbox else None, work, shared_folders)
                futures[pool.submit(_grade_student, job)] = db
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    result = future.result()
                except Exception as error:  # our code or the machine, never a submission: say so, stop
                    result = StudentResult(names[list(futures).index(future)], infrastructure=repr(error))
                if result.suspicious and not result.infrastructure:
                    failure = canary.failure()
                    if failure:
                        result.infrastructure = f"a known-good notebook fails to grade too: {failure}"
                results.append(result)
                if not result.infrastructure:
                    try:
                        _merge_student(main_db, futures[future], result.student)
                    except sqlite3.Error as error:  # rolled back: the gradebook holds the student's old rows
                        result.infrastructure = f"merging into {main_db} failed: {error}"
                if result.infrastructure:
                    for pending in futures:
                        pending.cancel()
                print(f"[autograde] {result.student}: {result.status} ({result.seconds:.0f} s, log {result.log})",
                      flush=True)
    report = BatchReport(sorted(results, key=lambda r: r.student), time.perf_counter() - start, jobs)
    _write_report(root, report)
    return report


def _write_report(root: Path, report: BatchReport) -> Path:
    out = root / "autograded" / REPORT_NAME
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["student_id", "status", "failed_notebooks", "flagged", "refused", "budget_spent",
                         "leftovers", "uid", "seconds", "log"])
        for r in report.results:
            writer.writerow([r.student, "infrastructure" if r.infrastructure else ("failed" if r.failed_notebooks else "ok"),
                             " ".join(r.failed_notebooks), " ".join(r.flagged), " | ".join(r.refused),
                             "yes" if r.budget_spent else "", " | ".join(r.leftovers), r.uid or "",
                             f"{r.seconds:.1f}", r.log])
    return out


def ungraded(root: Path) -> dict[str, list[str]]:
    """{student: ["<notebook>/<grade_id>", ...]} for every student who submitted: the answers still waiting for
    a manual grade (an empty list once all are graded)."""
    from nbgrader.api import Gradebook

    db = root / "gradebook.db"
    if not db.exists():
        raise GradingError("no gradebook.db yet: run `make autograde` first")
    pending: dict[str, list[str]] = {}
    with Gradebook(f"sqlite:///{db}") as gradebook:
        for submission in gradebook.find_assignment(ASSIGNMENT).submissions:
            pending[submission.student.id] = sorted(f"{notebook.name}/{grade.name}" for notebook in submission.notebooks
                                                    for grade in notebook.grades if grade.needs_manual_grade)
    return pending


FEEDBACK_MODES = ("complete", "graded-only", "force")


def feedback(root: Path, mode: str = "complete") -> list[Path]:
    """Feedback pages for the class.  ``complete`` (the default) refuses while any written answer awaits its
    manual grade (nbgrader would release it as 0 without a word); ``graded-only`` releases the students whose
    every answer is graded; ``force`` releases everyone, ungraded answers as 0."""
    if mode not in FEEDBACK_MODES:
        raise ValueError(f"feedback mode {mode!r}; choose one of {FEEDBACK_MODES}")
    everyone = ungraded(root) if mode != "force" else {}
    pending = {student: names for student, names in everyone.items() if names}
    options = []
    if pending and mode == "complete":
        listing = "\n".join(f"  {student}: {', '.join(names)}" for student, names in sorted(pending.items())[:20])
        more = f"\n  ... and {len(pending) - 20} more students" if len(pending) > 20 else ""
        raise GradingError(
            f"{len(pending)} student(s) have answers not graded yet; their feedback would show them as 0:\n"
            f"{listing}{more}\ngrade them in the formgrader (Manual Grading), or release the fully graded students "
            "only with `make feedback ARGS=--graded-only`, or everyone with `make feedback ARGS=--force`")
    if pending:
        if set(everyone) <= set(pending):
            raise GradingError("no student is fully graded yet: grade the written answers in the formgrader first")
        options.append(f"--CourseDirectory.student_id_exclude={','.join(sorted(pending))}")
        print(f"feedback for the fully graded students; left out until graded: {', '.join(sorted(pending))}")
    _nbgrader(root, "generate_feedback", ASSIGNMENT, "--force", *options)
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    leaking = [p for p in pages if "BEGIN HIDDEN TESTS" in p.read_text(encoding="utf-8", errors="replace")]
    if leaking:
        raise GradingError(f"feedback shows hidden tests: {leaking[:3]}; check nbgrader_config.py")
    return pages


def grades(root: Path, out: Path | None = None) -> Path:
    """One row per student: id, name and e-mail (from `make students`), whether they submitted, the score of each
    notebook, the total, the maximum, manual grading left, then one column per graded cell,
    ``<notebook>/<grade_id>`` (empty while a written answer awaits its manual grade).  A student of the roster
    who submitted nothing gets a row of zeros."""
    import nbformat
    from nbgrader.api import Gradebook, MissingEntry

    def task_order(notebook: str, names: list[str]) -> list[str]:
        """The graded cells of a notebook in the source notebook's order (by name for cells it does not have)."""
        order: list[str] = []
        source = root / "solutions" / ASSIGNMENT / f"{notebook}.ipynb"
        try:
            for cell in nbformat.read(source, as_version=4).cells if source.exists() else ():
                grade_id = cell.get("metadata", {}).get("nbgrader", {}).get("grade_id")
                if grade_id in names and grade_id not in order:
                    order.append(grade_id)
        except Exception:  # noqa: BLE001 - an unreadable source only costs the order
            order = []
        return order + sorted(set(names) - set(order))

    out = Path(out) if out is not None else root / "grades.csv"
    db = root / "gradebook.db"
    if not db.exists():
        raise GradingError("no gradebook.db yet: run `make autograde` first")
    with Gradebook(f"sqlite:///{db}") as gradebook:
        assignment = gradebook.find_assignment(ASSIGNMENT)
        notebooks = sorted(nb.name for nb in assignment.notebooks)
        tasks = [(nb.name, cell) for nb in sorted(assignment.notebooks, key=lambda nb: nb.name)
                 for cell in task_order(nb.name, [c.name for c in nb.grade_cells])]
        rows = []
        for person in sorted(gradebook.students, key=lambda s: s.id):
            student = person.id
            row = {"student_id": student, "first_name": person.first_name or "", "last_name": person.last_name or "",
                   "email": person.email or ""}
            try:
                submission = gradebook.find_submission(ASSIGNMENT, student)
            except MissingEntry:  # on the roster (`make students`), nothing submitted: a row of zeros says so
                rows.append({**row, "submitted": False, **{name: 0.0 for name in notebooks}, "total": 0.0,
                             "max_score": assignment.max_score, "auto_score": 0.0, "written_score": 0.0,
                             "needs_manual_grade": False})
                continue
            row["submitted"] = True
            cells = {}
            for name in notebooks:
                try:
                    notebook = gradebook.find_submission_notebook(name, ASSIGNMENT, student)
                except MissingEntry:
                    row[name] = 0.0
                    continue
                row[name] = notebook.score
                cells.update({(name, grade.name): grade.score for grade in notebook.grades})
            row.update(total=submission.score, max_score=submission.max_score,
                       auto_score=submission.code_score, written_score=submission.written_score,
                       needs_manual_grade=bool(submission.needs_manual_grade))
            for name, cell in tasks:
                score = cells.get((name, cell), 0.0)
                row[f"{name}/{cell}"] = "" if score is None else score
            rows.append(row)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["student_id", "first_name", "last_name", "email", "submitted",
                                                    *notebooks, "total", "max_score", "auto_score",
                                                    "written_score", "needs_manual_grade",
                                                    *(f"{name}/{cell}" for name, cell in tasks)])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out} ({len(rows)} students, {len(tasks)} tasks)")
    return out


def collect(root: Path, archive: Path) -> list[str]:
    """Unpack an LMS zip into submitted/ (``grader.collect``); the students collected.

    Unsafe or unreadable entries are skipped and reported, not fatal: one odd file must not stop a class.  An
    error only when the file is no zip or nothing in it could be collected (the wrong file, most likely).
    """
    from . import collect as lms_zip
    try:
        report = lms_zip.collect_zip(root, Path(archive), ASSIGNMENT)
    except lms_zip.CollectError as error:
        raise GradingError(str(error)) from error
    print(report.summary())
    if not report.students:
        raise GradingError(f"nothing could be collected from {archive}: every entry was skipped (see above)")
    if report.names:
        from . import roster
        named = roster.name_from_collect(root, report.names)
        print(f"named {named} student(s) in the gradebook from the zip (students named by a roster keep theirs)")
    return report.students


def course_root(start: Path | None = None) -> Path:
    """The course the commands act on: the nearest folder, from ``start`` (the current one) up, that holds
    ``nbgrader_config.py``, as nbgrader finds its configuration; else the repository this package came from."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "nbgrader_config.py").is_file():
            return folder
    return REPO_ROOT


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=None,
                        help="the course folder (default: the nearest folder from here up that holds "
                             "nbgrader_config.py, else this repository)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    references_command = commands.add_parser("references", help="rebuild grader/references/ from translab")
    references_command.add_argument("--margins", action="store_true",
                                    help="then measure how far each reference moves on another CPU's code paths "
                                         "against its check's tolerance (results/reference_margins.json)")
    grade = commands.add_parser("autograde", help="grade every submission in submitted/")
    grade.add_argument("--jobs", type=int, default=1, help="grade N students at a time (the Makefile's JOBS=N)")
    grade.add_argument("--student", help="grade only this student")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="run student code in a plain kernel, without grader.sandbox's limits")
    grade.add_argument("--student-timeout", type=float, default=STUDENT_BUDGET,
                       help=f"wall-clock seconds for one student, every notebook and retry included, before grading "
                            f"stops and the rest scores 0, flagged (default {STUDENT_BUDGET:.0f}; each notebook also "
                            "has a budget of its own, c.GuardedExecute.notebook_budget)")
    given = commands.add_parser("feedback", help="write feedback/ (HTML, hidden tests removed); refuses while "
                                                 "written answers await a manual grade")
    release_mode = given.add_mutually_exclusive_group()
    release_mode.add_argument("--graded-only", action="store_true",
                              help="release only the students whose every answer is graded")
    release_mode.add_argument("--force", action="store_true",
                              help="release everyone; answers not graded yet show as 0")
    export = commands.add_parser("grades", help="write grades.csv, one row per student")
    export.add_argument("--out", type=Path)
    commands.add_parser("report", help="reports/: per task who passed, the diagnosed misconceptions ranked (CSV, HTML)")
    similar = commands.add_parser("similarity", help="reports/similarity.*: pairs of students whose answers match")
    similar.add_argument("--past", type=Path, help="a past year's submitted/ folder to compare with too")
    zipped = commands.add_parser("collect", help="unpack an LMS zip into submitted/")
    zipped.add_argument("zip", type=Path)
    roster = commands.add_parser("students", help="add the class's names and e-mails from an LMS roster CSV")
    roster.add_argument("roster", type=Path)
    variant = commands.add_parser("variants", help="reports/variants.csv: each student's configuration for part 2's "
                                                   "counts; --student ID: one student's code; --init: the course secret")
    variant.add_argument("--student")
    variant.add_argument("--init", action="store_true", help="create the course secret unless there is one")
    students = commands.add_parser("student-release", help="write what students get (no solutions, no hidden tests)")
    students.add_argument("dest", type=Path)
    students.add_argument("--until", type=int, default=1,
                          help="the part the students start now: its notebook and those before it, translab's reference "
                               "code of the parts before it, stubs for the rest (default 1: no answer at all; "
                               "7: everything, after the last deadline)")
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "autograde":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    bad = [arg for arg in extra if not arg.startswith("--") or "=" not in arg]
    if bad:
        parser.error(f"extra nbgrader options must look like --Class.trait=value: {' '.join(bad)}")
    root = (args.root or course_root()).resolve()
    try:
        if args.command == "release":
            for path in release(root):
                print(f"released {path.relative_to(root)}")
        elif args.command == "references":
            from . import references
            for name, status in references.write_all():
                print(f"{status:9s} grader/references/{name}.pt")
            if args.margins:
                from . import reference_margins
                print(reference_margins.write_table(root / "results" / "reference_margins.json"))
        elif args.command == "autograde":
            report = autograde(root, args.jobs, args.student, tuple(extra), sandbox=not args.no_sandbox,
                               student_timeout=args.student_timeout)
            failed = [r for r in report.results if r.failed_notebooks]
            print(f"autograded {len(report.results)} student(s) in {report.seconds:.0f} s with --jobs {report.jobs}; "
                  f"report: {root / 'autograded' / REPORT_NAME}")
            for r in failed:
                print(f"  needs a look: {r.student}: nbgrader could not run {', '.join(r.failed_notebooks)} "
                      f"(scored 0, flagged; log {r.log})")
            if any("limits only" in r.sandbox_modes for r in report.results):
                print("warning: this machine refuses unprivileged user namespaces, so student code ran with the "
                      "resource limits only, with your permissions and network: grade untrusted work as root in a "
                      "container or a VM, or allow user namespaces", file=sys.stderr)
            for r in report.results:
                if r.budget_spent:
                    print(f"  needs a look: {r.student}: the student's {args.student_timeout:.0f} s budget ran out")
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
            if report.infrastructure:
                for r in report.infrastructure:
                    print(f"error: grading {r.student} failed, not because of the submission: {r.infrastructure} "
                          f"(log {r.log})", file=sys.stderr)
                return 1
        elif args.command == "feedback":
            mode = "graded-only" if args.graded_only else "force" if args.force else "complete"
            for page in feedback(root, mode):
                print(f"feedback {page.relative_to(root)}")
        elif args.command == "grades":
            grades(root, args.out)
        elif args.command == "report":
            from . import report
            try:
                print(report.summary(report.write(root)))
            except FileNotFoundError as error:
                raise GradingError(str(error)) from error
        elif args.command == "similarity":
            from . import similarity
            if args.past is not None and not args.past.is_dir():
                raise GradingError(f"--past {args.past}: no such folder (a past year's submitted/, one folder per "
                                   "student)")
            similarity.main(root, args.past)
        elif args.command == "collect":
            collect(root, args.zip)
        elif args.command == "students":
            from . import roster
            try:
                added, updated = roster.import_roster(root, args.roster)
            except roster.RosterError as error:
                raise GradingError(str(error)) from error
            print(f"roster {args.roster}: {added} student(s) added, {updated} updated in {root / 'gradebook.db'}")
        elif args.command == "variants":
            from . import variants
            try:
                variants.main(root, args.student, args.init)
            except variants.SecretMissing as error:
                raise GradingError(str(error)) from error
        elif args.command == "student-release":
            from . import student_release
            try:
                written = student_release.write(args.dest, root, until=args.until)
            except student_release.ReleaseError as error:
                raise GradingError(str(error)) from error
            from .withheld import LAST_PART
            held = (f"translab's answers to parts {args.until} to {LAST_PART} held back" if args.until <= LAST_PART
                    else "every answer of translab in it")
            print(f"wrote the student release to {args.dest.resolve()}: {len(written)} files, notebooks 1 to "
                  f"{min(args.until, LAST_PART)}, {held}; students run `make setup` then `make lab` there")
            codes = json.loads((args.dest / "variants.json").read_text(encoding="utf-8"))["codes"]
            print(f"  variant codes for {len(codes)} student(s) known now (`make students ROSTER=...` adds a class "
                  "list); a student who joins later gets a code from `make variants STUDENT=id`")
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
