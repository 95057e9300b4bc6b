"""The warm grader: the course's grading process kept between presses of Autograde, on a local Dask cluster.

    python -m grader autograde --warm --student ID     # what make autograde and the formgrader's button do
    python -m grader warm                              # is it running, since when, for which code; --stop ends it

Every batch starts its zygotes and a fork server before a student's first cell (about 10 s, every press of the
formgrader's button).  With ``--warm`` the batch sends its students to a Dask scheduler and one worker on this
machine instead (``grader.grading.cluster``: the same batch, sandbox and merge), started at the first use; the
worker's grading process keeps its zygotes and fork server for the next press.  The worker has a thread per core
and a batch uses ``--jobs`` of them.  The course grades this way by default (``make autograde``, plain ``nbgrader
autograde`` and the formgrader's button); ``WARM=0`` and ``c.BatchAutogradeExporter.warm = False`` start a batch
of its own instead.  As safe as a batch:

- The scheduler and the worker start with the kernels' allow-list of the environment
  (``grader.isolation.kernel_environment``) and the course folder, never with the environment of the press that
  started them (on a hub, the instructor's API token).  A task brings the course secret, as any cluster task does.
- They listen on 127.0.0.1 over TLS, with a certificate made for them in ``.translab_warm/`` (0700): a Dask
  scheduler runs any code its clients send, so another user of the machine must not become one.
- They stop after ``--idle`` seconds with no task and no press connected (Dask's idle timeout, held while a press
  is connected: ``grader.grading.warm_scheduler``; the worker follows its scheduler), and are
  started again rather than reused when what decides grades changed (``result_folders.fingerprint``: the grader's
  and translab's code, the references, the solutions, ``nbgrader_config.py``; and the release): nothing grades
  with code loaded before a change.
"""
from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from translab.contract import ASSIGNMENT, COURSE_ENV, REFERENCES_ENV

from grader.course import GradingError
from grader.grading.certificates import certificates
from grader.grading.cluster import connect, dask_environment
from grader.grading.result_folders import fingerprint
from grader.isolation.kernel_environment import kernel_environment

FOLDER = ".translab_warm"  # in the course folder, the instructor's only (0700)
IDLE_S = 600  # seconds with no task and no press connected before the warm grader stops (--idle S)
START_TIMEOUT_S = 120
HOLD_TIMEOUT_S = 10  # a running grader's scheduler answers on loopback at once, or has just closed


def folder(root: Path) -> Path:
    place = root / FOLDER
    place.mkdir(mode=0o700, exist_ok=True)
    place.chmod(0o700)
    return place


def spec_file(root: Path) -> Path:
    """Where the running grader's address and certificates are (``grader.grading.cluster.connect`` reads it)."""
    return root / FOLDER / "cluster.json"


def code_key(root: Path, course_fingerprint: dict) -> str:
    """What decides grades, as one digest: the course fingerprint (``result_folders.fingerprint``) and the released
    notebooks."""
    digest = hashlib.sha256(course_fingerprint["digest"].encode())
    release = root / "release" / ASSIGNMENT
    for path in sorted(release.rglob("*.ipynb")) if release.is_dir() else []:
        digest.update(str(path.relative_to(release)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def environment(root: Path, idle_s: float) -> dict[str, str]:
    """The warm grader's environment: the kernels' allow-list of this one, the course, Dask's settings."""
    allowed = kernel_environment(os.environ)
    kept = {name: os.environ[name] for name in (REFERENCES_ENV, "HOME") if name in os.environ}
    return {**allowed, **kept, COURSE_ENV: str(root), **dask_environment(),
            "DASK_DISTRIBUTED__SCHEDULER__IDLE_TIMEOUT": f"{idle_s:.0f}s"}


def state(root: Path) -> dict | None:
    """The running warm grader's record (spec file, process groups, code key, start time), or None; None too for
    a record copied with the course folder from another course, whose grader is that course's."""
    path = root / FOLDER / "state.json"
    try:
        found = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if found.get("root") == str(root.resolve()) else None


def _alive(pgid: int, leader: bool = True) -> bool:
    """Whether the process group ``pgid`` still has a process and is ours: led by its Dask process (or, with
    ``leader=False``, by no process left: what remains of it); a pid reused by another group leader is not ours."""
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    try:
        return b"dask" in Path(f"/proc/{pgid}/cmdline").read_bytes()
    except OSError:
        return not leader


def running(root: Path) -> dict | None:
    """The warm grader's record if its scheduler and worker are both still running."""
    found = state(root)
    if found and all(_alive(pgid) for pgid in found["pgids"]):
        return found
    return None


def stop(root: Path) -> bool:
    """End the warm grader (its scheduler's and worker's process groups); True if one was running."""
    found = state(root)
    if not found:
        return False
    was_running = any(_alive(pgid) for pgid in found["pgids"])
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pgid in found["pgids"]:
            if _alive(pgid, leader=False):
                with contextlib.suppress(ProcessLookupError):  # it may end between the check and the signal
                    os.killpg(pgid, sig)
                    os.killpg(pgid, signal.SIGCONT)  # a stopped process acts on SIGTERM only once continued
        deadline = time.monotonic() + 10
        while any(_alive(pgid, leader=False) for pgid in found["pgids"]) and time.monotonic() < deadline:
            time.sleep(0.1)
    (root / FOLDER / "state.json").unlink(missing_ok=True)
    return was_running


@contextlib.contextmanager
def held(root: Path, idle_s: float = IDLE_S, say=print, course_fingerprint: dict | None = None):
    """The spec file of a warm grader running this course's code (the one already running, else a new one; an
    earlier one stopped first if the code, references, solutions, configuration or release changed), held by a
    connection of this press until the block ends: from the moment it is found, the grader cannot reach its idle
    time (``grader.grading.warm_scheduler``) before the batch's tasks reach it.  ``course_fingerprint``: the one the
    press's tasks carry, so that the grader is chosen by the same digest (else taken here)."""
    key = code_key(root, course_fingerprint or fingerprint(root))
    with open(folder(root) / "lock", "w") as lock:  # two presses at once start one grader, not two
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = running(root)
        holder = _hold(found["spec"]) if found and found["key"] == key else None
        if holder:
            say(f"[autograde] the warm grader started at {found['started']} grades (it stops after "
                f"{found['idle_s']:.0f} s without work)")
        elif found and found["key"] != key:
            say("[autograde] the course's code, references, solutions, configuration or release changed since the "
                "warm grader started: starting it again")
        if not holder:  # none, another code's, or one that stopped between the check and the connection
            stop(root)
            holder = _start(root, key, idle_s, say)
    try:  # not ``with holder``: that made it Dask's current client over the batch's own, and the batch's results
        yield str(spec_file(root))  # then came only at whole seconds (a press took 1 s longer)
    finally:
        holder.close()


def _hold(spec: str):
    """A connection to the running grader's scheduler, or None if it closed meanwhile (idle, or stopped)."""
    import dask
    import distributed  # noqa: F401  its defaults into dask.config first, or leaving the block below removes them
    with dask.config.set({"distributed.comm.timeouts.connect": f"{HOLD_TIMEOUT_S}s"}):
        try:
            return connect(spec)
        except GradingError:
            return None


def _start(root: Path, key: str, idle_s: float, say):
    """Start the scheduler and the worker; returns a connection to the scheduler, which holds it (see ``held``)."""
    place = folder(root)
    tls = certificates(place / "certificates", name="warm grader")
    scheduler_file = place / "scheduler.json"
    scheduler_file.unlink(missing_ok=True)
    env = environment(root, idle_s)
    dask = str(Path(sys.executable).parent / "dask")
    security = ["--tls-ca-file", tls["tls_ca_file"], "--tls-cert", tls["tls_client_cert"], "--tls-key",
                tls["tls_client_key"]]
    started = time.monotonic()
    scheduler = _launch(place / "scheduler.log", env, root, dask, "scheduler", "--host", "127.0.0.1", "--port", "0",
                        "--protocol", "tls", "--scheduler-file", str(scheduler_file), "--no-dashboard",
                        "--preload", "grader.grading.warm_scheduler", *security)
    while not scheduler_file.exists():
        if scheduler.poll() is not None or time.monotonic() - started > START_TIMEOUT_S:
            raise GradingError(f"the warm grader's scheduler did not start: see {place / 'scheduler.log'}; "
                               "grade without --warm meanwhile")
        time.sleep(0.1)
    address = json.loads(scheduler_file.read_text(encoding="utf-8"))["address"]
    threads = str(len(os.sched_getaffinity(0)))  # a press's --jobs takes up to this many students at once
    worker = _launch(place / "worker.log", env, root, dask, "worker", address, "--nthreads", threads, "--name", "warm",
                     "--host", "127.0.0.1", "--no-dashboard", "--death-timeout", "30",
                     "--local-directory", str(place / "worker-space"), *security)
    spec = spec_file(root)
    spec.write_text(json.dumps({"address": address, "security": tls}), encoding="utf-8")
    record = {"root": str(root.resolve()), "spec": str(spec), "address": address, "pgids": [scheduler.pid, worker.pid],
              "key": key, "idle_s": idle_s, "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    (place / "state.json").write_text(json.dumps(record), encoding="utf-8")
    client = connect(str(spec))
    try:
        client.wait_for_workers(1, timeout=START_TIMEOUT_S)
    except TimeoutError as error:
        client.close()
        stop(root)
        raise GradingError(f"the warm grader's worker did not start: see {place / 'worker.log'}; grade "
                           "without --warm meanwhile") from error
    say(f"[autograde] started the warm grader at {address} in {time.monotonic() - started:.1f} s (it stops after "
        f"{idle_s:.0f} s without work; python -m grader warm --stop ends it now)")
    return client


def _launch(log_path: Path, env: dict, root: Path, *command: str) -> subprocess.Popen:
    """A process in a session of its own (so that ``stop`` ends it whole), outliving the batch that started it."""
    with open(log_path, "w", encoding="utf-8") as log:
        return subprocess.Popen(list(command), env=env, cwd=root, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
