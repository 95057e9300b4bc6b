"""The instructor's side of the lab, around nbgrader (what the Makefile's grading targets run).

    python -m translab.grading release          # solutions/ -> notebooks/ (nbgrader generate_assignment)
    python -m translab.grading references       # grader/references/*.pt from translab
    python -m translab.grading autograde        # every submission in submitted/ [--jobs N] [--Execute.timeout=S ...]
    python -m translab.grading feedback         # feedback/ as HTML, hidden tests removed
    python -m translab.grading grades           # grades.csv, one row per student
    python -m translab.grading collect FILE.zip # an LMS download -> submitted/<student>/transfer_learning/

Every command is idempotent (nbgrader runs with --force) and exits non-zero when nbgrader reports
an error, including a configuration file that failed to load (nbgrader itself only logs that).
``--root`` points at another course folder (the tests grade a temporary copy of the course).

``autograde`` is the exception, on purpose: a class is graded the night before marks are due, so one broken
submission must not stop it.  Each student is graded by an nbgrader process of its own (``--jobs N`` at a
time, student code in ``translab.sandbox``'s kernel); a notebook nbgrader cannot run scores 0 and is flagged
for the instructor, listed at the end and in ``autograded/autograde_report.csv``, and the exit code stays 0.
It is 1 only when the grading machinery fails (configuration, kernel, database), which no student can cause.
Options of the form ``--Class.trait=value`` after ``autograde`` are passed on to nbgrader.
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path

from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

from .paths import REPO_ROOT

ASSIGNMENT = "transfer_learning"
NOTEBOOK_PATTERN = re.compile(r"(?P<notebook>\d\d_[a-z_]+?)(?:[-_ ]?\(?\d+\)?)?\.ipynb$")
FATAL_LOG_LINES = ("Exception while loading config", "[ERROR]", "[CRITICAL]")


class GradingError(RuntimeError):
    pass


# ----------------------------------------------------------------- nbgrader plugins used by nbgrader_config.py

class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """Feedback preprocessor: a failing hidden test keeps only its error message.

    ``ClearHiddenTests`` removes the hidden source, but an error's traceback quotes the failing line
    of the cell, i.e. the hidden test.  Runs before ``ClearHiddenTests`` (which removes the markers).
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class LMSCollector(FileNameCollectorPlugin):
    """``nbgrader zip_collect`` plugin for the common LMS download layouts.

    * one folder per student (Moodle: ``Jane Doe_12345_assignsubmission_file_/01_mask....ipynb``): the student
      is the folder's participant number, else its name;
    * flat files (Canvas: ``doejane_12345_67890_01_mask....ipynb``, maybe ``-1`` before ``.ipynb`` on a
      resubmission): the student is the part before the first ``_``.

    The notebook is recognised by its ``NN_name`` ending; student ids keep only letters, digits, ``.`` and ``-``.
    """

    def collect(self, submitted_file: str):
        path = Path(submitted_file)
        if path.suffix not in self.valid_ext:
            return None
        parts = path.parts
        if "extracted" in parts:
            parts = parts[len(parts) - parts[::-1].index("extracted"):]
        if parts and parts[0] == "lms" and len(parts) > 1:  # the folder our `collect` unpacks into
            parts = parts[1:]
        match = NOTEBOOK_PATTERN.search(parts[-1])
        if not match:
            self.log.warning("skipped %s: not one of the lab's notebooks", submitted_file)
            return None
        if len(parts) > 1:
            folder = parts[0]
            moodle = re.match(r"^(.+?)_(\d+)_assignsubmission", folder)
            student = moodle.group(2) if moodle else folder
        else:
            student = parts[-1].split("_", 1)[0]
        student = re.sub(r"[^A-Za-z0-9.-]+", "-", student).strip("-")
        if not student:
            self.log.warning("skipped %s: no student id in its name", submitted_file)
            return None
        return {"student_id": student, "file_id": match.group("notebook") + ".ipynb"}


# ----------------------------------------------------------------- running nbgrader

def _nbgrader_env(extra: dict | None = None) -> dict:
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    # One torch thread per grading kernel: measured on 2 cores, a training step in a Jupyter kernel took
    # 3.9 s with PyTorch's default 2 threads while the other core was busy, 0.37 s with one thread.
    # Grading is throughput work (one submission per core), so this is also the faster choice.
    env.setdefault("OMP_NUM_THREADS", "1")
    # nbgrader runs `alembic` (the gradebook's migrations) from PATH: put this venv's bin/ first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    env.update(extra or {})
    return env


def _run_nbgrader(root: Path, args: list[str], env: dict | None = None,
                  timeout: float | None = None) -> tuple[int, str]:
    """(exit code, output) of one nbgrader command; on ``timeout`` the whole process group is killed.

    nbgrader starts each notebook's kernel as its child: killing only nbgrader would leave a student's
    runaway kernel behind, hence a session of its own and ``killpg``.
    """
    command = [sys.executable, "-m", "nbgrader", *args]
    process = subprocess.Popen(command, cwd=root, env=env or _nbgrader_env(), text=True, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output, _ = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        output, _ = process.communicate()
        output += f"\n[translab] [TIMEOUT] killed after {timeout:.0f} s\n"
        return -signal.SIGKILL, output
    finally:
        try:  # a kernel that outlived nbgrader (it detaches from nothing, but be sure) goes too
            os.killpg(process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return process.returncode, output


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
    _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return sorted((root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))


def _has_outputs(path: Path) -> bool:
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    return any(cell.get("outputs") or cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code")


def _gradebook_has_assignment(root: Path) -> bool:
    from nbgrader.api import Gradebook, MissingEntry
    db = root / "gradebook.db"
    if not db.exists():
        return False
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
              sandbox: bool = True, student_timeout: float = 3600) -> "BatchReport":
    """Grade every submission (or one student's), ``jobs`` students at a time (see ``grade_batch``)."""
    names = students(root)
    if not names:
        raise GradingError(f"nothing to grade: put submissions in {root / 'submitted'}/<student>/{ASSIGNMENT}/ "
                           "(or `make collect ZIP=...`)")
    if student is not None:
        if student not in names:
            raise GradingError(f"no submission for {student!r} in {root / 'submitted'}")
        names = [student]
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

# nbgrader lines that mean the grading machinery, not a student's work, is broken: stop the batch.
INFRASTRUCTURE_MARKERS = ("Exception while loading config", "NoSuchKernel", "No assignment with ID",
                          "Kernel died before replying to kernel_info", "[translab.sandbox]",
                          "error accessing the nbgrader database", "database is locked", "sqlalchemy.exc")
REPORT_NAME = "autograde_report.csv"


@dataclass
class StudentResult:
    student: str
    seconds: float = 0.0
    failed_notebooks: list[str] = field(default_factory=list)  # nbgrader could not run them: 0 points, flagged
    infrastructure: str = ""  # set when the failure is not the student's
    log: Path | None = None

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


def _has_submission(db: Path, student: str) -> bool:
    return bool(_query(db, _SUBMISSION.format(db=""), {"student": student, "assignment": ASSIGNMENT}))


def _grade_student(root: Path, student: str, db: Path, log: Path, env: dict, args: list[str],
                   timeout: float) -> StudentResult:
    """Grade one student into ``db``.  If nbgrader fails on the submission as a whole (one unreadable
    notebook fails them all), grade each submitted notebook on its own, so only the broken ones lose."""
    result = StudentResult(student, log=log)
    start = time.perf_counter()
    base = ["autograde", ASSIGNMENT, f"--student={student}", "--force", f"--CourseDirectory.db_url=sqlite:///{db}",
            *args]
    outputs = []

    def run(*more: str) -> bool:
        from .sandbox import kill_leftovers
        returncode, output = _run_nbgrader(root, base + list(more), env=env, timeout=timeout)
        kill_leftovers(env)
        outputs.append(f"$ nbgrader {' '.join(base[:3] + list(more))}\n{output}")
        infrastructure = [line for line in output.splitlines() if any(m in line for m in INFRASTRUCTURE_MARKERS)]
        if infrastructure and not result.infrastructure:
            result.infrastructure = infrastructure[0].strip()
        return returncode == 0 and not _fatal_lines(output)

    if not run():
        known = set(_gradebook_notebooks(db))
        submitted = sorted(p.stem for p in (root / "submitted" / student / ASSIGNMENT).glob("*.ipynb") if p.stem in known)
        failed = [name for name in submitted if not result.infrastructure and not run(f"--notebook={name}")]
        if not submitted:  # nothing nbgrader could open: every notebook of the assignment scores 0
            failed = sorted(known)
        if _has_submission(db, student) and failed:
            _zero_and_flag(db, student, failed, "autograding could not run this notebook: see the autograde log")
        result.failed_notebooks = failed
    if not result.infrastructure and not _has_submission(db, student):
        result.infrastructure = "nbgrader wrote no submission for this student"
    result.seconds = time.perf_counter() - start
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("\n".join(outputs), encoding="utf-8")
    return result


def grade_batch(root: Path, names: list[str], jobs: int = 1, extra_args: tuple[str, ...] = (), sandbox: bool = True,
                student_timeout: float = 3600) -> BatchReport:
    """Grade ``names`` with at most ``jobs`` nbgrader processes at once, merging each into gradebook.db.

    A student whose notebooks nbgrader cannot run still gets a row (those notebooks at 0, flagged); the batch
    goes on.  A failure of the machinery itself (config, kernel, database) stops scheduling new students.
    """
    start = time.perf_counter()
    main_db = root / "gradebook.db"
    results = []
    with tempfile.TemporaryDirectory(prefix="translab-autograde-") as scratch:
        work = Path(scratch)
        dbs = work / "db"  # the per-student gradebooks: private even to the sandboxed kernels
        dbs.mkdir(mode=0o700)
        extra_env, kernel_args = {}, []
        if sandbox:
            from . import sandbox as kernel_sandbox
            extra_env, kernel_args = kernel_sandbox.grading_kernel(root, work)
        # the caller's --Class.trait=value wins over ours (nbgrader rejects a trait given twice)
        overridden = {arg.split("=", 1)[0] for arg in extra_args}

        def options(ours: list[str]) -> list[str]:
            return [arg for arg in ours if arg.split("=", 1)[0] not in overridden] + list(extra_args)
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            futures = {}
            for index, name in enumerate(names):
                db = dbs / f"student{index}.db"
                _sqlite_copy(main_db, db)
                env = _nbgrader_env({**extra_env, **(kernel_sandbox.student_env(index) if sandbox else {})})
                args = options(kernel_args + (kernel_sandbox.student_args(work, index) if sandbox else []))
                log = root / "autograded" / name / "autograde.log"
                futures[pool.submit(_grade_student, root, name, db, log, env, args, student_timeout)] = db
            for future in as_completed(futures):
                if future.cancelled():
                    continue
                try:
                    result = future.result()
                except Exception as error:  # our code or the machine, never a submission: say so, stop
                    result = StudentResult(names[list(futures).index(future)], infrastructure=repr(error))
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
        writer.writerow(["student_id", "status", "failed_notebooks", "seconds", "log"])
        for r in report.results:
            writer.writerow([r.student, "infrastructure" if r.infrastructure else ("failed" if r.failed_notebooks else "ok"),
                             " ".join(r.failed_notebooks), f"{r.seconds:.1f}", r.log])
    return out


def feedback(root: Path) -> list[Path]:
    _nbgrader(root, "generate_feedback", ASSIGNMENT, "--force")
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    leaking = [p for p in pages if "BEGIN HIDDEN TESTS" in p.read_text(encoding="utf-8", errors="replace")]
    if leaking:
        raise GradingError(f"feedback shows hidden tests: {leaking[:3]}; check nbgrader_config.py")
    return pages


def grades(root: Path, out: Path | None = None) -> Path:
    """One row per student: the score of each notebook, the total, the maximum, manual grading left."""
    from nbgrader.api import Gradebook, MissingEntry
    out = Path(out) if out is not None else root / "grades.csv"
    db = root / "gradebook.db"
    if not db.exists():
        raise GradingError("no gradebook.db yet: run `make autograde` first")
    with Gradebook(f"sqlite:///{db}") as gradebook:
        assignment = gradebook.find_assignment(ASSIGNMENT)
        notebooks = sorted(nb.name for nb in assignment.notebooks)
        rows = []
        for student in sorted(s.id for s in gradebook.students):
            try:
                submission = gradebook.find_submission(ASSIGNMENT, student)
            except MissingEntry:
                continue
            row = {"student_id": student}
            for name in notebooks:
                try:
                    row[name] = gradebook.find_submission_notebook(name, ASSIGNMENT, student).score
                except MissingEntry:
                    row[name] = 0.0
            row.update(total=submission.score, max_score=submission.max_score,
                       auto_score=submission.code_score, written_score=submission.written_score,
                       needs_manual_grade=bool(submission.needs_manual_grade))
            rows.append(row)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["student_id", *notebooks, "total", "max_score", "auto_score",
                                                    "written_score", "needs_manual_grade"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out} ({len(rows)} students)")
    return out


def collect(root: Path, archive: Path) -> list[str]:
    archive = Path(archive).resolve()
    if not archive.exists():
        raise GradingError(f"{archive} does not exist")
    downloaded = root / "downloaded" / ASSIGNMENT
    shutil.rmtree(downloaded, ignore_errors=True)
    (downloaded / "archive").mkdir(parents=True)
    shutil.copy(archive, downloaded / "archive" / "lms.zip")
    _nbgrader(root, "zip_collect", ASSIGNMENT, "--force", "--collector=translab.grading.LMSCollector")
    found = students(root)
    print(f"submitted/ now holds {len(found)} student(s): {', '.join(found)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m translab.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the course folder (default: the repository)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    commands.add_parser("references", help="rebuild grader/references/ from translab")
    grade = commands.add_parser("autograde", help="grade every submission in submitted/")
    grade.add_argument("--jobs", type=int, default=1, help="grade N students at a time (the Makefile's JOBS=N)")
    grade.add_argument("--student", help="grade only this student")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="run student code in a plain kernel, without translab.sandbox's limits")
    grade.add_argument("--student-timeout", type=float, default=3600,
                       help="seconds one student's nbgrader run may take before it is killed (default 3600)")
    commands.add_parser("feedback", help="write feedback/ (HTML, hidden tests removed)")
    export = commands.add_parser("grades", help="write grades.csv, one row per student")
    export.add_argument("--out", type=Path)
    zipped = commands.add_parser("collect", help="unpack an LMS zip into submitted/")
    zipped.add_argument("zip", type=Path)
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "autograde":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    bad = [arg for arg in extra if not arg.startswith("--") or "=" not in arg]
    if bad:
        parser.error(f"extra nbgrader options must look like --Class.trait=value: {' '.join(bad)}")
    root = args.root.resolve()
    try:
        if args.command == "release":
            for path in release(root):
                print(f"released {path.relative_to(root)}")
        elif args.command == "references":
            from . import references
            for name, status in references.write_all():
                print(f"{status:9s} grader/references/{name}.pt")
        elif args.command == "autograde":
            report = autograde(root, args.jobs, args.student, tuple(extra), sandbox=not args.no_sandbox,
                               student_timeout=args.student_timeout)
            failed = [r for r in report.results if r.failed_notebooks]
            print(f"autograded {len(report.results)} student(s) in {report.seconds:.0f} s with --jobs {report.jobs}; "
                  f"report: {root / 'autograded' / REPORT_NAME}")
            for r in failed:
                print(f"  needs a look: {r.student}: nbgrader could not run {', '.join(r.failed_notebooks)} "
                      f"(scored 0, flagged; log {r.log})")
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
            for page in feedback(root):
                print(f"feedback {page.relative_to(root)}")
        elif args.command == "grades":
            grades(root, args.out)
        elif args.command == "collect":
            collect(root, args.zip)
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
