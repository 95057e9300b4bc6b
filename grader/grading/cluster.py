"""Grading past one machine: the students in tasks of a few on the workers of a Dask cluster, merged here.

    python -m grader autograde --cluster tcp://127.0.0.1:8786     # or tls://host:8786, or a cluster spec (JSON)

A task carries what is the student's (the submission's plain files) and what must agree across machines (a
gradebook holding the assignment and that student's own rows, the course secret, the fingerprint of the code,
solutions and configuration that decide grades).  The worker holds the rest of the course: a checkout at the same
commit with its data, in its working folder or ``TRANSLAB_COURSE``.  A worker whose course has another fingerprint
refuses the task, and the batch stops.  The worker grades the students with the same batch as ``make autograde``
(sandbox, checker, canary) in a scratch course, in a grading process it keeps between tasks (``GradingServer``),
and returns each student's result folder (``grader.grading.result_folders``) as data; here each is merged in one transaction
(``grader.course.gradebook.merge_student``), then marked merged with the digest of the submission it graded
(``autograded/<student>/.translab_merged.json``).

So a batch killed at any point (client, scheduler, worker) loses nothing merged, and running it again grades only
the students not merged or whose submission changed (``--force``: everyone).  A lost scheduler takes the tasks it
held with it: the batch stops at once and names the students not graded.  A student whose worker dies is
retried on another worker by the scheduler (``distributed.scheduler.allowed-failures``: 2, set where the scheduler
starts); after that the student scores 0, flagged, and the batch goes on.

A Dask scheduler runs any Python a client sends it, as the user running its workers: that is the instructor's
machine and the course secret.  So ``tcp://`` is accepted on a loopback address only; anything else must be
``tls://`` with certificates (Dask's security configuration), in a spec file.

Why one file: the client's side (tasks sent, results merged) and the worker's (``remote_task``, which Dask sends by
name, and the grading process it keeps) are the two ends of one exchange, and change together.
"""
from __future__ import annotations

import asyncio
import dataclasses
import functools
import hashlib
import ipaddress
import itertools
import json
import logging
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlparse

from translab.contract import COURSE_ENV

from grader.course import GradingError, course_root, students
from grader.course.gradebook import add_submission, gradebook_notebooks, has_submission, zero_and_flag
from grader.grading.batch import BatchReport, StudentResult, ensure_assignment, write_report
from grader.grading.preflight import preflight, require_data
from grader.grading.result_folders import (GRADEBOOK, CourseMismatch, fingerprint, merge_folder,
                                           merged_mark, payload, submission)

ALLOWED_FAILURES = 2  # retries after a worker died with the student: the scheduler's allowed-failures
SENT = "student(s) sent to"  # the batch's line once its students are on their way (make bench times a press to it)
# Dask's own upkeep, relaxed where grading needs none of it, for the workers and the scheduler: the statistical
# profiler samples every thread each 10 ms, the nanny reads its worker's memory each 100 ms, the system monitor
# each 0.5 s, the event loop ticks each 20 ms: CPU taken from the students' kernels (``make bench`` measures what
# is left).  A worker's memory is still watched (each second): the students' kernels are processes of their own,
# limited by the sandbox, not by Dask.
DASK_SETTINGS = {"distributed.worker.profile.enabled": False, "distributed.worker.memory.monitor-interval": "1s",
                 "distributed.admin.system-monitor.interval": "2s", "distributed.admin.tick.interval": "200ms",
                 "distributed.scheduler.allowed-failures": ALLOWED_FAILURES}


def dask_environment() -> dict[str, str]:
    """``DASK_SETTINGS`` as the environment variables that give them to a ``dask scheduler`` or ``dask worker``
    (Dask reads ``DASK_A__B__C`` as ``a.b.c``), for the shell, a Slurm job's prologue or a pod's ``env``."""
    return {"DASK_" + key.upper().replace(".", "__").replace("-", "_"): str(value)
            for key, value in DASK_SETTINGS.items()}

def remote_task(task: dict) -> dict[str, dict[str, bytes]]:
    """What a Dask worker runs: check the course, grade, return each student's result folder as data."""
    course = Path(os.environ.get(COURSE_ENV) or course_root()).resolve()
    here = fingerprint(course)
    if here["digest"] != task["fingerprint"]["digest"]:
        raise CourseMismatch(
            f"the worker on {socket.gethostname()} holds another version of the course in {course} (commit "
            f"{here['commit'] or '?'}, fingerprint {here['digest'][:12]}) than the batch (commit "
            f"{task['fingerprint']['commit'] or '?'}, {task['fingerprint']['digest'][:12]}): check out the "
            f"batch's commit there (or point {COURSE_ENV} at such a checkout) and restart the worker")
    require_data(f"the worker {socket.gethostname()}")
    with tempfile.TemporaryDirectory(prefix="translab-result-") as scratch:
        given = Path(scratch) / "payload.pickle"
        given.touch(mode=0o600)
        given.write_bytes(pickle.dumps(task))
        grading_server(course, here["digest"]).grade(given, Path(scratch) / "out")
        results = {}
        for sent in task["students"]:
            folder = Path(scratch) / "out" / sent["student"]
            results[sent["student"]] = {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*")
                                        if path.is_file() and not path.is_symlink()}
        return results


class GradingServer:
    """A worker's grading process (``python -m grader.grading.result_folders --serve``), kept between its tasks: its zygotes and
    one fork server for every student the worker grades, not one per task (2.2 to 2.7 s of each task here).  A process
    of its own, because a Dask worker is a daemon process, which may not start the batch's helpers; and whatever
    happens to a student's grading cannot take the worker down.  It ends with the worker (its stdin closes).

    The worker's threads (``dask worker --nthreads N``) send their tasks to it at once, and it grades them in one
    session, as a batch grades ``--jobs N`` students: one pair of zygotes for the machine, whose kernels share
    the pages of their imports (two batches side by side, two pairs, graded a student 8% slower here)."""

    def __init__(self, course: Path, digest: str = ""):
        self.course, self.digest = course, digest  # the course's fingerprint when it started: the code it runs
        # what the batch prints, read when the process ends too early: a file without a name, so that nothing is
        # left behind however the worker ends (a Slurm job's SIGTERM, a lost machine)
        self.log = tempfile.TemporaryFile(prefix="translab-grading-log-")
        # Dask's nanny sets MALLOC_TRIM_THRESHOLD_ for its worker's memory (distributed.nanny.pre-spawn-environ):
        # inherited by the kernels, it made a right submission's grading 10% slower (9.1 s against 10.0 s here)
        env = {name: value for name, value in os.environ.items() if name != "MALLOC_TRIM_THRESHOLD_"}
        self.process = subprocess.Popen([sys.executable, "-m", "grader.grading.result_folders", "--serve", str(course)],
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, cwd=course,
                                        env=env)
        self._asking = threading.Lock()  # one request written at a time
        self._answers: dict[int, dict] = {}  # a request's number -> its answer, read by one thread for all
        self._answered = threading.Condition()
        self._ended = False
        self._numbers = itertools.count()
        threading.Thread(target=self._read_answers, daemon=True, name="grading-answers").start()

    def alive(self) -> bool:
        return self.process.poll() is None

    def grade(self, given: Path, out: Path) -> None:
        number = next(self._numbers)
        try:
            with self._asking:
                self.process.stdin.write((json.dumps({"payload": str(given), "out": str(out), "id": number}) + "\n"
                                          ).encode())
                self.process.stdin.flush()
        except OSError:  # it is gone: its stdout ends too, and the answer says how
            pass
        with self._answered:
            self._answered.wait_for(lambda: number in self._answers or self._ended)
            answer = self._answers.pop(number, None)
        if answer is None:
            answer = {"error": f"the grading process on {socket.gethostname()} ended (exit {self.process.wait()}): "
                               + " | ".join(self._said().strip().splitlines()[-3:])}
        if "error" in answer:
            raise GradingError(answer["error"])

    def _read_answers(self) -> None:
        for line in self.process.stdout:
            try:
                answer = json.loads(line)
                number = answer.pop("id")
            except (ValueError, KeyError, AttributeError, TypeError):  # not an answer: no request waits on it
                continue
            with self._answered:
                self._answers[number] = answer
                self._answered.notify_all()
        with self._answered:
            self._ended = True
            self._answered.notify_all()

    def close(self) -> None:
        try:
            self.process.stdin.close()
            self.process.wait(timeout=60)
        except (OSError, subprocess.TimeoutExpired):
            self.process.kill()
        self.log.close()

    def _said(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")


GRADING_SERVERS: dict[Path, GradingServer] = {}
_STARTING = threading.Lock()  # the worker's threads ask for the grading process at once: one starts it


def grading_server(course: Path, digest: str) -> GradingServer:
    """This worker's grading process for ``course``, started at its first task; again if it ended, or if the
    course changed on disk since (it would grade with the code it loaded then)."""
    with _STARTING:
        server = GRADING_SERVERS.get(course)
        if server is None or not server.alive() or server.digest != digest:
            if server is not None:
                server.close()
            server = GRADING_SERVERS[course] = GradingServer(course, digest)
        return server


# ---------------------------------------------------------------- the batch on a cluster

def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(socket.gethostbyname(host)).is_loopback
    except (OSError, ValueError):
        return False


def connect(cluster: str):
    """A Dask client for ``cluster``: an address, or a JSON spec file {"address", "security": {tls_ca_file,
    tls_client_cert, tls_client_key}} or {"jobqueue": {"kind": "slurm", ...SLURMCluster options, "workers": N}}
    or {"kubernetes": {...KubeCluster options, "workers": N}}."""
    try:
        from distributed import Client
        from distributed.security import Security
    except ImportError as error:
        raise GradingError("grading on a cluster needs Dask: pip install '.[distributed]' (make setup installs it)") from error
    spec: dict = {"address": cluster}
    if Path(cluster).is_file():
        spec = json.loads(Path(cluster).read_text(encoding="utf-8"))
    if "jobqueue" in spec or "kubernetes" in spec:
        return Client(_launch(spec))
    address = str(spec.get("address", ""))
    scheme, host = urlparse(address).scheme, urlparse(address).hostname or ""
    options = {}
    if scheme == "tls":
        tls = spec.get("security") or {}
        if not all(tls.get(key) for key in ("tls_ca_file", "tls_client_cert", "tls_client_key")):
            raise GradingError(f"{address}: a tls:// scheduler needs a spec file with security.tls_ca_file, "
                               "tls_client_cert and tls_client_key")
        options["security"] = Security(require_encryption=True, **tls)
    if scheme == "tls" or (scheme == "tcp" and _is_loopback(host)):
        try:  # Dask's own connect timeout (distributed.comm.timeouts.connect) decides how long to try
            return Client(address, **options)
        except (OSError, TimeoutError) as error:
            raise GradingError(f"no Dask scheduler answered at {address} ({type(error).__name__}: {error}): is it "
                               "running there, and (tls://) were its certificates signed by the same authority as "
                               "the spec file's? Nothing was graded") from error
    raise GradingError(f"refusing {address!r}: a Dask scheduler runs any code its clients send, as the user of its "
                       "workers (the course secret, every submission). Use tcp:// on 127.0.0.1 only, or tls:// with "
                       "certificates in a spec file (grader/docs/cluster.md)")


def _launch(spec: dict):
    """A cluster whose scheduler runs here and whose workers are batch jobs (dask-jobqueue) or pods
    (dask-kubernetes).  The scheduler gets the batch's retry rule; a jobqueue scheduler that listens beyond
    loopback uses TLS with temporary certificates, shared with the workers through ``shared_temp_directory``."""
    import dask
    dask.config.set(DASK_SETTINGS)  # a jobqueue scheduler runs here (a Kubernetes one: dask-cluster.yaml's env)
    if "jobqueue" in spec:
        options = dict(spec["jobqueue"])
        options["job_script_prologue"] = [*options.get("job_script_prologue", []),
                                          *(f"export {name}={value}" for name, value in dask_environment().items())]
        kind, workers = options.pop("kind", "slurm"), options.pop("workers", 1)
        if not _is_loopback((options.get("scheduler_options") or {}).get("host", "")):
            options.setdefault("security", True)
        import dask_jobqueue
        cluster = getattr(dask_jobqueue, f"{kind.upper()}Cluster")(**options)
    else:
        options = dict(spec["kubernetes"])
        workers = options.pop("workers", 1)
        from dask_kubernetes.operator import KubeCluster
        cluster = KubeCluster(**options)
    cluster.scale(workers)
    return cluster


def autograde_on_cluster(root: Path, cluster: str, student_ids: list[str] | None = None, force: bool = False,
                         extra_args: tuple[str, ...] = (), sandbox: bool = True, student_timeout: float | None = None,
                         say=None, jobs: int | None = None, course_fingerprint: dict | None = None):
    """Grade on a Dask cluster; returns ``grader.grading.batch``'s report, so the summary and exit code are the same.
    ``jobs``: at most this many tasks on the workers at once (the warm grader's ``--jobs``; else all its threads)."""
    from concurrent.futures import CancelledError  # Dask's FutureCancelledError is one

    from distributed import as_completed
    from distributed.comm.core import CommClosedError
    from distributed.scheduler import KilledWorker

    say = say or functools.partial(print, flush=True)
    started = time.perf_counter()
    student_ids, secret = preflight(root, student_ids, data_here=False)  # each worker checks its own data (grade_remote)
    ensure_assignment(root)
    course_fingerprint = course_fingerprint or fingerprint(root)  # a warm press's: it chose the grader by it
    _ReconnectNoise.quiet()
    pending, skipped, refused_by = _still_to_grade(root, student_ids, course_fingerprint, force)
    client = connect(cluster)
    address = getattr(client.scheduler, "address", None) or cluster
    results, futures, workers, lost = [], {}, 0, []
    try:
        if skipped:
            say(f"[autograde] {len(skipped)} student(s) already merged with this submission and course, not graded "
                f"again (--force grades them): {', '.join(skipped[:10])}{' ...' if len(skipped) > 10 else ''}")
        workers, chunks = _in_tasks(client, pending, jobs)
        finished = as_completed()

        def send(chunk: list) -> None:
            given = payload(root, chunk, course_fingerprint, secret, extra_args, sandbox, student_timeout)
            future = client.submit(remote_task, given, key=task_key(chunk), pure=False)
            futures[future] = [name for name, _ in chunk]
            finished.add(future)

        unsent = chunks[workers:] if jobs else []  # with jobs: sent one by one as tasks end
        for chunk in chunks[:workers] if jobs else chunks:
            send(chunk)
        say(f"[autograde] {len(pending)} {SENT} {address} ({workers} worker thread(s) now, in {_tasks(chunks)})")
        stop = None
        for future in finished:
            chunk = futures[future]
            try:
                returned = future.result()
            except (CancelledError, CommClosedError):
                # not cancelled by us: the scheduler was lost, and with it what it held (Dask says so either by
                # cancelling the future or, when the loss comes while it fetches a result, by a closed connection)
                if stop is None:
                    lost += chunk
            except KilledWorker:
                for name in chunk:
                    results.append(worker_died(root, name))
                    say(f"[autograde] {name}: its worker died {ALLOWED_FAILURES + 1} times: 0, flagged")
            except Exception as error:  # our code, the machine or a mismatched worker: stop, as the batch does
                results += [StudentResult(name, infrastructure=f"{type(error).__name__}: {error}") for name in chunk]
                stop = error
                for other in futures:
                    other.cancel()
            else:
                future.release()  # merged: the scheduler may forget it (a lost worker then costs no regrading)
                for name in chunk:
                    result, host = _merge_returned(root, name, returned[name], course_fingerprint)
                    result.refused = refused_by[name]
                    results.append(result)
                    say(f"[autograde] {name}: {result.status} on {host} ({result.seconds:.0f} s)")
            if unsent and stop is None and not lost:  # one ended: with jobs, the next is sent
                send(unsent.pop(0))
        lost += [name for chunk in unsent for name, _ in chunk] if stop is None else []
        if lost:
            results += [StudentResult(name, infrastructure="the connection to the cluster's scheduler was lost before "
                                      "this student was graded") for name in lost]
            say(f"[autograde] stopped: the connection to the cluster's scheduler was lost with {len(lost)} student(s) "
                "not graded; what was merged is kept: run the same command again for the others")
        elif stop is not None:
            say(f"[autograde] stopped: {stop}")
    finally:
        client.close()
    report = BatchReport(sorted(results, key=lambda r: r.student), time.perf_counter() - started, jobs=workers,
                         cluster=address)
    write_report(root, report)  # the rows of the students not graded again (skipped) stay
    return report


def _in_tasks(client, pending: list, jobs: int | None) -> tuple[int, list[list]]:
    """(students at a time, ``pending`` cut in tasks in the order sent): the workers' threads (a worker grades its
    threads' tasks at once: GradingServer), at most ``jobs``."""
    workers = sum(max(1, int(worker.get("nthreads") or 1))
                  for worker in client.scheduler_info().get("workers", {}).values())
    workers = min(workers, jobs) if jobs else workers
    sizes = chunk_sizes(len(pending), workers)
    return workers, [pending[start:start + size] for start, size in zip(itertools.accumulate(sizes, initial=0), sizes)]


def _still_to_grade(root: Path, student_ids: list[str], course_fingerprint: dict, force: bool
                    ) -> tuple[list[tuple[str, tuple]], list[str], dict[str, list]]:
    """(the students to send with their submissions, those already merged with this submission and course, what
    each submission refused): a student graded and merged before is not graded again unless ``force``."""
    pending, skipped, refused_by = [], [], {}
    for name in student_ids:
        sent = submission(root, name)
        refused_by[name] = sent[1]  # as read here: the worker sees each refused entry as a dangling link
        mark = merged_mark(root, name)
        if not force and mark and mark.get("submission") == sent[2] and mark.get("course") == course_fingerprint["digest"]:
            skipped.append(name)
        else:
            pending.append((name, sent))
    return pending, skipped, refused_by


def _tasks(chunks: list[list]) -> str:
    sizes = [len(chunk) for chunk in chunks]
    return (f"{len(sizes)} task(s)" if len(set(sizes)) < 2 else
            f"{len(sizes)} tasks of {sizes[0]} student(s) down to {sizes[-1]}")


class _ReconnectNoise(logging.Filter):
    """When the scheduler is gone, the batch says so and closes its client; Dask then logs that it could not
    reconnect (after its whole timeout, it says, though the close cut it short) and, possibly after ``close``
    returns, the traceback of the cancelled attempt (``distributed.utils.log_errors``): noise under our own
    message in the instructor's terminal, so dropped for the batch's process."""

    @classmethod
    def quiet(cls) -> None:
        reconnects = logging.getLogger("distributed.client")
        if not any(isinstance(known, cls) for known in reconnects.filters):
            reconnects.addFilter(cls())

    def filter(self, record: logging.LogRecord) -> bool:
        kind = record.exc_info[0] if record.exc_info else None
        return not (kind and issubclass(kind, asyncio.CancelledError)) and \
            not str(record.msg).startswith("Failed to reconnect to scheduler")


def task_key(chunk: list[tuple[str, tuple]]) -> str:
    """The task's name on the scheduler: its students and what each submitted.  Dask takes two tasks of one name
    for one, so the names are part of it (two students may hand in the same files: a copy, a blank notebook)."""
    named = "".join(f"{name}\0{sent[2]}\0" for name, sent in chunk)
    return "translab-grade-" + hashlib.sha256(named.encode()).hexdigest()[:24]


CHUNK_MAX = 8  # students per task at most: a lost worker costs at most this many students graded again


def chunk_sizes(students: int, workers: int) -> list[int]:
    """Students per task, in the order sent: a share of what is left (guided scheduling), so tasks are few while
    the class is large and single students at the end, where one worker would otherwise finish long after the
    others (a student may take 1 s or the whole budget: a timeout, a fork storm)."""
    sizes, left = [], students
    while left > 0:
        sizes.append(max(1, min(CHUNK_MAX, left, -(-left // (2 * max(1, workers))))))
        left -= sizes[-1]
    return sizes


def _merge_returned(root: Path, name: str, files: dict[str, bytes], course_fingerprint: dict):
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch) / name
        for relative, content in files.items():
            target = folder / relative
            if folder.resolve() not in target.resolve().parents:
                raise GradingError(f"a worker returned {relative!r}, outside the result folder")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content)
        described = merge_folder(root, folder, course_fingerprint)
    kept = {f.name for f in dataclasses.fields(StudentResult)}
    result = StudentResult(**{key: value for key, value in described["result"].items() if key in kept})
    result.log = root / described["result"]["log"]
    return result, described["host"]


def worker_died(root: Path, student: str):
    """The scheduler gave up on the student's task (its workers died after ``ALLOWED_FAILURES`` retries): every
    notebook at 0, flagged with the reason, as the batch does with notebooks nbgrader cannot run."""
    db = root / GRADEBOOK
    if not has_submission(db, student):
        add_submission(db, student)
    notebooks = gradebook_notebooks(db)
    zero_and_flag(db, student, notebooks, f"its grading worker died {ALLOWED_FAILURES + 1} times (a machine lost, or "
                  "a submission that kills workers): look at it, then grade it again (--student)")
    return StudentResult(student, failed_notebooks=notebooks, flagged=notebooks)


if __name__ == "__main__":
    if sys.argv[1:] != ["--env"]:
        sys.exit("usage: eval \"$(python -m grader.grading.cluster --env)\" before `dask scheduler` and `dask worker`")
    print("\n".join(f"export {name}={value}" for name, value in dask_environment().items()))
