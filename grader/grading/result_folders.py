"""Result folders: a student graded anywhere (a Dask worker, a Slurm job), merged here.

    python -m grader autograde --student ID --results-dir DIR   # graded into DIR/ID, the gradebook untouched
    python -m grader merge DIR...                               # into gradebook.db, one transaction each

A folder holds ``result.json`` (the batch's report of the student, the submission's digest, the course's
fingerprint, the host), ``gradebook.db`` (the assignment and the student's rows) and ``autograded/``.  Grading
happens in a scratch course beside the course's checkout, with ``make autograde``'s batch.  Merging refuses a folder
graded with another version of the course (its fingerprint: ``nbgrader_config.py``, ``solutions/`` and the grader
and translab code that ran), and marks each merged student with the digest of the submission it graded, which is
how ``grader.grading.cluster`` knows whom not to grade again.
"""
from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import pickle
import queue
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import translab
from translab.contract import ASSIGNMENT

from grader.course import GradingError
from grader.course.gradebook import merge_student, sqlite_copy
from grader.course.variants import SECRET_FILE
from grader.grading import batch
from grader.grading.nbgrader_process import fork_server
from grader.grading.plain_copies import copy_plain_files
from grader.grading.preflight import preflight
from grader.isolation import kernel_stages

RESULT = "result.json"
GRADEBOOK = "gradebook.db"
AUTOGRADED = "autograded"
MERGED = ".translab_merged.json"  # in autograded/<student>/: what was merged, and from which submission
# What decides a grade, beside the submission: these must be the same on every machine of a batch (of the
# packages, the files that run or are read while grading: not their READMEs).
FINGERPRINTED = ("nbgrader_config.py", f"solutions/{ASSIGNMENT}")
GRADING_FILES = (".py", ".ipynb", ".j2", ".pt", ".json", ".model")


class CourseMismatch(RuntimeError):
    """A worker holds another version of the course than the batch: it refuses to grade."""


# ---------------------------------------------------------------- what must agree, and what the student sent

def fingerprint(root: Path) -> dict:
    """A digest of the course's configuration and solutions and of the grader and translab code that runs, with
    the commit for the message (empty outside git)."""
    digest = hashlib.sha256()
    files = [root / name for name in FINGERPRINTED]
    # grader's folder from this file: run in a course whose grader/ holds only the .pth, ``grader`` is a namespace
    # package there, without a __file__
    files += [Path(translab.__file__).parent, Path(__file__).resolve().parents[1]]
    for top in files:
        paths = [top] if top.is_file() else sorted(
            p for p in top.rglob("*") if p.is_file() and p.suffix in GRADING_FILES and "__pycache__" not in p.parts
            and "tests" not in p.relative_to(top).parts)
        for path in paths:
            digest.update(str(path.relative_to(top.parent)).encode() + b"\0" + path.read_bytes() + b"\0")
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, timeout=30)
        label = commit.stdout.strip() if commit.returncode == 0 else ""
    except (OSError, subprocess.TimeoutExpired):  # no git where this runs: the digest alone decides
        label = ""
    return {"digest": digest.hexdigest(), "commit": label}


def submission(root: Path, student: str) -> tuple[dict[str, bytes], list[str], str]:
    """(plain files by relative path, refused entries, digest) of a student's submission, read through the same
    plain copies as the batch (a symlink, a device, a fifo is refused, never followed)."""
    with tempfile.TemporaryDirectory() as scratch:
        copied = Path(scratch) / "s"
        refused = copy_plain_files(root / "submitted" / student / ASSIGNMENT, copied, top=root / "submitted")
        files = {str(p.relative_to(copied)): p.read_bytes() for p in sorted(copied.rglob("*")) if p.is_file()}
    digest = hashlib.sha256()
    for name, content in files.items():
        digest.update(name.encode() + b"\0" + hashlib.sha256(content).digest())
    for entry in refused:
        digest.update(b"refused\0" + entry.encode())
    return files, refused, digest.hexdigest()


def student_gradebook(main_db: Path, keep: list[str]) -> bytes:
    """The gradebook a task grades into: the assignment, and of the students only those of ``keep`` (manual
    grades that nbgrader keeps on a regrade survive; the rest of the class's grades stay here)."""
    with tempfile.TemporaryDirectory() as scratch:
        copy = Path(scratch) / GRADEBOOK
        sqlite_copy(main_db, copy)
        connection = sqlite3.connect(copy, isolation_level=None)
        try:
            marks = ", ".join("?" for _ in keep)
            others = f"(SELECT sa.id FROM submitted_assignment sa WHERE sa.student_id NOT IN ({marks}))"
            notebooks = f"(SELECT id FROM submitted_notebook WHERE assignment_id IN {others})"
            connection.execute("BEGIN")
            for table in ("grade", "comment"):
                connection.execute(f"DELETE FROM {table} WHERE notebook_id IN {notebooks}", keep)
            connection.execute(f"DELETE FROM submitted_notebook WHERE id IN {notebooks}", keep)
            connection.execute(f"DELETE FROM submitted_assignment WHERE id IN {others}", keep)
            connection.execute(f"DELETE FROM student WHERE id NOT IN ({marks})", keep)
            connection.execute("COMMIT")
            connection.execute("VACUUM")
        finally:
            connection.close()
        return copy.read_bytes()


def grade_to_folders(course: Path, payload: dict, out: Path) -> list[Path]:
    """Grade ``payload``'s students with the batch of ``make autograde`` (its zygotes for them all), in a scratch
    course beside ``course``, and write a result folder for each, ``out/<student>``: result.json, gradebook.db,
    autograded/."""
    with tempfile.TemporaryDirectory(prefix="translab-task-") as scratch:
        root = scratch_course(course, Path(scratch) / "course")
        student_ids = _load_task(root, payload, root / GRADEBOOK)
        report = batch.grade_batch(root, student_ids, jobs=1, extra_args=tuple(payload["args"]), sandbox=payload["sandbox"],
                                   student_timeout=payload["student_timeout"] or batch.STUDENT_BUDGET)
        return _result_folders(root, report, payload, out, root / GRADEBOOK)


def grade_in_session(session, first: int, payload: dict, out: Path) -> list[Path]:
    """``grade_to_folders`` in ``session`` (a ``grader.grading.batch.GradingSession`` kept between tasks, which other
    tasks may be grading in at the same time), with its indices from ``first`` on.  The task's gradebook is its own,
    in the session's private folder; of the scratch course it touches only its students' folders, and leaves none."""
    gradebook = session.dbs / f"task{first}.db"
    student_ids = [sent["student"] for sent in payload["students"]]
    try:
        _load_task(session.root, payload, gradebook)
        report = session.grade(student_ids, 1, tuple(payload["args"]), payload["student_timeout"] or batch.STUDENT_BUDGET,
                               first=first, main_db=gradebook)
        return _result_folders(session.root, report, payload, out, gradebook)
    finally:
        gradebook.unlink(missing_ok=True)
        for student in student_ids:
            for folder in ("submitted", AUTOGRADED):
                shutil.rmtree(session.root / folder / student, ignore_errors=True)


def scratch_course(course: Path, root: Path) -> Path:
    """A course folder to grade tasks in: ``course``'s configuration, its solutions and notebooks linked."""
    root.mkdir()
    shutil.copy2(course / "nbgrader_config.py", root / "nbgrader_config.py")
    (root / kernel_stages.ORIGIN_FILE).write_text(str(Path(course).resolve()), encoding="utf-8")  # for messages
    for folder in ("solutions", "notebooks"):
        if (course / folder).exists():
            (root / folder).symlink_to((course / folder).resolve(), target_is_directory=True)
    return root


def _load_task(root: Path, payload: dict, gradebook: Path) -> list[str]:
    """Put a task into the scratch course ``root``: its gradebook (at ``gradebook``), the secret, the students'
    files, where an earlier task's for the same students go first."""
    student_ids = [sent["student"] for sent in payload["students"]]
    for student in student_ids:
        if Path(student).name != student or student.startswith("."):
            raise GradingError(f"{student!r} is not a student id")
    for student in student_ids:
        for folder in ("submitted", AUTOGRADED):
            shutil.rmtree(root / folder / student, ignore_errors=True)
    gradebook.write_bytes(payload["gradebook"])
    secret = root / SECRET_FILE
    if not secret.exists() or secret.read_bytes() != payload["secret"]:
        # replaced whole, never rewritten in place: a task grading meanwhile reads the old secret or the new; written
        # first beside the gradebook, where no kernel looks (a name of its own in the course would not be hidden)
        written = gradebook.parent / f"secret.{threading.get_ident()}"
        written.touch(mode=0o600)
        written.write_bytes(payload["secret"])
        os.replace(written, secret)
    for sent in payload["students"]:
        _unpack(root / "submitted" / sent["student"] / ASSIGNMENT, sent)
    return student_ids


def _result_folders(root: Path, report, payload: dict, out: Path, gradebook: Path) -> list[Path]:
    broken = [r for r in report.results if r.infrastructure]
    if broken:
        raise GradingError(f"grading {broken[0].student} on {socket.gethostname()} failed, not because of the "
                           f"submission: {broken[0].infrastructure}")
    student_ids = [sent["student"] for sent in payload["students"]]
    folders = []
    for result, sent in zip(sorted(report.results, key=lambda r: student_ids.index(r.student)), payload["students"]):
        student = sent["student"]
        folder = out / student
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        sqlite_copy(gradebook, folder / GRADEBOOK)
        if (root / AUTOGRADED / student).exists():
            shutil.copytree(root / AUTOGRADED / student, folder / AUTOGRADED, symlinks=True)
        described = {key: (str(value) if isinstance(value, Path) else value)
                     for key, value in dataclasses.asdict(result).items()}
        described["log"] = f"{AUTOGRADED}/{student}/autograde.log"
        (folder / RESULT).write_text(json.dumps({
            "student": student, "fingerprint": payload["fingerprint"], "submission": sent["digest"],
            "host": socket.gethostname(), "result": described}, indent=1), encoding="utf-8")
        folders.append(folder)
    return folders


def _unpack(submitted: Path, sent: dict) -> None:
    """A student's files as the client read them; each refused entry a dangling link, refused again here."""
    submitted.mkdir(parents=True)
    for name, content in sent["files"].items():
        target = submitted / name
        if submitted.resolve() not in target.resolve().parents:
            raise GradingError(f"{name!r} is outside the submission")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
    for entry in sent["refused"]:
        link = submitted / Path(entry.split(":", 1)[0].strip()).name
        if not link.exists() and not link.is_symlink():
            link.symlink_to("/nonexistent/refused-by-the-client")


def serve(course: Path) -> int:
    """``python -m grader.grading.result_folders --serve COURSE``: a cluster worker's grading process (``grader.grading.cluster``), kept
    between its tasks so that its zygotes and one fork server serve every student it grades.  Reads one request a
    line on stdin ({"payload": path, "out": path, "id": any}) and grades each at once with those under way, as
    many as the worker's threads send, in one session; answers one line on stdout for each, in the order they end
    ({"ok": true} or {"error": ...}, with the request's "id"); what grading prints goes to stderr.  Ends when stdin
    does (the worker is gone), or after an error of its own code or the machine, once the tasks under way ended."""
    answers = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # prints, ours and the batch's, go to the log, never into the answers
    said, fatal, requests = threading.Lock(), [], queue.Queue()

    def answer(request: dict, reply: dict) -> None:
        with said:
            answers.write(json.dumps({**({"id": request["id"]} if "id" in request else {}), **reply}) + "\n")

    def handle(request: dict, sessions: _Sessions) -> None:
        try:
            payload = pickle.loads(Path(request["payload"]).read_bytes())
            with sessions.task(payload) as (session, first):
                grade_in_session(session, first, payload, Path(request["out"]))
            answer(request, {"ok": True})
        except GradingError as error:
            answer(request, {"error": str(error)})
        except Exception as error:  # our code or the machine: say so, and end (the worker starts another)
            answer(request, {"error": f"{type(error).__name__}: {error}"})
            fatal.append(error)
            requests.put(None)

    def read() -> None:
        try:
            for line in sys.stdin:
                requests.put(json.loads(line))
        finally:  # stdin closed, or a line that is not a request (the worker's bug): the process ends either way
            requests.put(None)

    threading.Thread(target=read, daemon=True, name="requests").start()
    tasks, under_way = ThreadPoolExecutor(thread_name_prefix="task"), []
    try:
        with tempfile.TemporaryDirectory(prefix="translab-worker-") as scratch, \
                _Sessions(scratch_course(course, Path(scratch) / "course")) as sessions:
            while not fatal:
                request = requests.get()
                if request is None:
                    break
                under_way.append(tasks.submit(handle, request, sessions))
            futures.wait(under_way)
    finally:  # after the session closed: its zygotes die with the thread that started them (PR_SET_PDEATHSIG)
        tasks.shutdown()
    if fatal:
        raise fatal[0]
    return 0


class _Sessions:
    """The grading process's ``GradingSession``, shared by the tasks it grades at once; made again, once no task is
    in it, for a task that needs the other sandbox setting or more of the uid block than it has left."""

    def __init__(self, root: Path):
        self.root = root
        self._stack = contextlib.ExitStack()
        self._changed = threading.Condition()
        self._session = None
        self._tasks = 0
        self._students: set[str] = set()  # those being graded now: a student is graded by one task at a time

    def __enter__(self) -> "_Sessions":
        return self

    def __exit__(self, *exc) -> None:
        self._stack.close()

    @contextlib.contextmanager
    def task(self, payload: dict):
        """(the session, the first of the task's indices) while the task grades."""
        students = {sent["student"] for sent in payload["students"]}
        with self._changed:
            while not self._fits(payload):
                if self._tasks:
                    self._changed.wait()
                    continue
                self._session = None
                self._stack.close()
                fork_server(checker_imports=not payload["sandbox"])
                self._session = self._stack.enter_context(batch.GradingSession(self.root, payload["sandbox"]))
            busy = sorted(self._students & students)
            if busy:
                raise GradingError(f"{busy[0]} is being graded on {socket.gethostname()} by another task: grade a "
                                   "student in one batch at a time")
            session, first = self._session, self._session.reserve(len(payload["students"]))
            self._tasks, self._students = self._tasks + 1, self._students | students
        try:
            yield session, first
        finally:
            with self._changed:
                self._tasks, self._students = self._tasks - 1, self._students - students
                self._changed.notify_all()

    def _fits(self, payload: dict) -> bool:
        session = self._session
        return session is not None and session.sandbox == payload["sandbox"] and \
            session.has_room(len(payload["students"]))


# ---------------------------------------------------------------- merging, here

def merged_mark(root: Path, student: str) -> dict | None:
    try:
        return json.loads((root / AUTOGRADED / student / MERGED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def merge_folder(root: Path, folder: Path, course_fingerprint: dict | None = None) -> dict:
    """Merge one result folder into the course: the gradebook rows in one transaction, then the autograded files,
    then the mark.  Refuses a result graded with another version of the course."""
    described = json.loads((folder / RESULT).read_text(encoding="utf-8"))
    student = described["student"]
    course_fingerprint = course_fingerprint or fingerprint(root)
    if described["fingerprint"]["digest"] != course_fingerprint["digest"]:
        raise GradingError(f"{folder} was graded with another version of the course (commit "
                           f"{described['fingerprint']['commit'] or '?'}) than this one ({course_fingerprint['commit'] or '?'}): "
                           "grade it again here, or merge it into a checkout of that commit")
    if Path(student).name != student:
        raise GradingError(f"{folder}: {student!r} is not a student id")
    merge_student(root / GRADEBOOK, folder / GRADEBOOK, student)
    target = root / AUTOGRADED / student
    if (folder / AUTOGRADED).exists():
        shutil.rmtree(target, ignore_errors=True)
        shutil.copytree(folder / AUTOGRADED, target, symlinks=True)
    target.mkdir(parents=True, exist_ok=True)
    (target / MERGED).write_text(json.dumps({"submission": described["submission"], "course": course_fingerprint["digest"],
                                             "host": described["host"], "merged_at": time.time()}), encoding="utf-8")
    return described


def merge(root: Path, folders: list[Path]) -> list[dict]:
    """``python -m grader merge DIR...``: each DIR a result folder (it holds result.json) or a folder of them."""
    found = []
    for folder in folders:
        if not folder.exists():
            raise GradingError(f"{folder} does not exist")
        found += [folder] if (folder / RESULT).exists() else sorted(p.parent for p in folder.glob(f"*/{RESULT}"))
    if not found:
        raise GradingError(f"no result folders (with {RESULT}) in {', '.join(map(str, folders))}: they are written by "
                           "`python -m grader autograde --student ID --results-dir DIR`")
    course_fingerprint = fingerprint(root)
    return [merge_folder(root, folder, course_fingerprint) for folder in found]


def payload(root: Path, chunk: list[tuple[str, tuple]], course_fingerprint: dict, secret: bytes, extra_args: tuple[str, ...],
             sandbox: bool, student_timeout: float | None) -> dict:
    """What a task carries: the students' files, a gradebook with their rows, what must agree across machines."""
    return {"students": [{"student": name, "files": files, "refused": refused, "digest": digest}
                         for name, (files, refused, digest) in chunk],
            "gradebook": student_gradebook(root / GRADEBOOK, [name for name, _ in chunk]), "secret": secret,
            "fingerprint": course_fingerprint, "args": list(extra_args), "sandbox": sandbox, "student_timeout": student_timeout}


def grade_students_to(root: Path, student_ids: list[str] | None, out: Path, extra_args: tuple[str, ...] = (),
                      sandbox: bool = True, student_timeout: float | None = None) -> list[Path]:
    """``autograde --student ID --results-dir DIR``: result folders for ``merge``, the gradebook untouched (one
    job of a Slurm array, a Kubernetes Job: the course's checkout is where it runs)."""
    if not student_ids:
        raise GradingError("--results-dir grades the students named with --student (one or more)")
    student_ids, secret = preflight(root, student_ids)
    batch.ensure_assignment(root)
    chunk = [(name, submission(root, name)) for name in student_ids]
    given = payload(root, chunk, fingerprint(root), secret, extra_args, sandbox, student_timeout)
    return grade_to_folders(root, given, out)


if __name__ == "__main__":
    if sys.argv[1:2] != ["--serve"] or len(sys.argv) != 3:
        sys.exit("usage: python -m grader.grading.result_folders --serve COURSE (a cluster worker starts it: grader.grading.cluster)")
    sys.exit(serve(Path(sys.argv[2])))
