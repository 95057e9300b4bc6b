"""A real Dask cluster on this machine for the tests and the bench: a scheduler and workers, each a process of its
own (its own process group, so it can be killed whole, as a lost machine is), over TCP on 127.0.0.1."""
from __future__ import annotations

import contextlib
import os
import signal
import socket
import sqlite3
import subprocess
import sys
from pathlib import Path

from translab.contract import COURSE_ENV

from ..cluster import ALLOWED_FAILURES


def free_port() -> int:
    """A TCP port on 127.0.0.1 nothing listens on now (for a daemon the caller starts)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class LocalCluster:
    """``with LocalCluster(course, workers=2, env=...) as cluster:`` ``cluster.address``; ``cluster.kill(0)``."""

    def __init__(self, course: Path, workers: int = 2, env: dict | None = None, logs: Path | None = None):
        self.course, self.count, self.logs = Path(course), workers, Path(logs or course)
        self.env = {**(env or os.environ), COURSE_ENV: str(self.course),
                    "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": str(ALLOWED_FAILURES)}
        self.processes: list[subprocess.Popen] = []
        self.port = free_port()
        self.address = f"tcp://127.0.0.1:{self.port}"

    def _start(self, name: str, *args: str) -> subprocess.Popen:
        log = open(self.logs / f"dask-{name}.log", "w")
        process = subprocess.Popen([str(Path(sys.executable).parent / "dask"), *args, "--no-dashboard"], env=self.env,
                                   stdout=log, stderr=subprocess.STDOUT, start_new_session=True, cwd=self.course)
        log.close()
        self.processes.append(process)
        return process

    def __enter__(self) -> "LocalCluster":
        from distributed import Client
        self._start("scheduler", "scheduler", "--host", "127.0.0.1", "--port", str(self.port))
        self.workers = [self._start(f"worker{i}", "worker", self.address, "--nthreads", "1", "--name", f"w{i}",
                                    "--host", "127.0.0.1") for i in range(self.count)]
        with Client(self.address, timeout=60) as client:
            client.wait_for_workers(self.count, timeout=120)
        return self

    def kill(self, index: int) -> None:
        """SIGKILL a worker's whole process group: nanny, worker, the grading it was doing."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.workers[index].pid, signal.SIGKILL)

    def kill_scheduler(self) -> None:
        """SIGKILL the scheduler's process group: what it held is lost (the workers go on, alone)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.processes[0].pid, signal.SIGKILL)

    def __exit__(self, *_) -> None:
        for process in self.processes:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=60)


def gradebook_cells(db: Path) -> dict[str, dict]:
    """{student: {(notebook, grade cell): (auto score, manual score, flagged)}}: what two gradings must agree on."""
    connection = sqlite3.connect(db)
    try:
        rows = connection.execute(
            "SELECT sa.student_id, n.name, gc.name, g.auto_score, g.manual_score, sn.flagged FROM grade g "
            "JOIN submitted_notebook sn ON g.notebook_id = sn.id JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
            "JOIN notebook n ON sn.notebook_id = n.id JOIN base_cell gc ON g.cell_id = gc.id").fetchall()
    finally:
        connection.close()
    cells: dict[str, dict] = {}
    for student, notebook, cell, auto, manual, flagged in rows:
        cells.setdefault(student, {})[(notebook, cell)] = (auto, manual, bool(flagged))
    return cells
