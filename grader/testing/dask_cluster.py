"""A real Dask cluster on this machine for the tests and the bench: a scheduler and workers, each a process of its
own (its own process group, so it can be killed whole, as a lost machine is), over TCP on 127.0.0.1, or over TLS
between two hosts made of network namespaces (``grader.testing.hosts``)."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

from . import free_port

from translab.contract import COURSE_ENV

from grader.grading.cluster import dask_environment


class LocalCluster:
    """``with LocalCluster(course, workers=2, env=...) as cluster:`` ``cluster.address``; ``cluster.kill(0)``.

    With ``hosts`` (``grader.testing.hosts.TwoHosts``) and ``tls`` (its ``certificates``), the scheduler runs on
    the first host and the workers on the second, over TLS between them; ``cluster.spec`` is the spec file a
    client on the first host gives ``--cluster``."""

    def __init__(self, course: Path, workers: int = 2, env: dict | None = None, logs: Path | None = None,
                 hosts=None, tls: dict | None = None, threads: int = 1):
        assert not hosts or tls, "between hosts, TLS (grader.grading.cluster refuses plain TCP beyond loopback)"
        self.course, self.count, self.logs, self.hosts, self.tls = Path(course), workers, Path(logs or course), hosts, tls
        self.threads = threads  # each worker's: the tasks its grading process grades at once
        self.env = {**(env or os.environ), COURSE_ENV: str(self.course), **dask_environment()}
        self.processes: list[subprocess.Popen] = []
        self.port = free_port()
        self.hosts_addresses = hosts.addresses if hosts else ("127.0.0.1", "127.0.0.1")
        self.address = f"{'tls' if tls else 'tcp'}://{self.hosts_addresses[0]}:{self.port}"
        self.spec = self.logs / "cluster.json"

    def _start(self, name: str, host: int, *args: str) -> subprocess.Popen:
        log = open(self.logs / f"dask-{name}.log", "w")
        tls = ["--tls-ca-file", self.tls["tls_ca_file"], "--tls-cert", self.tls["tls_client_cert"], "--tls-key",
               self.tls["tls_client_key"]] if self.tls else []
        process = subprocess.Popen([*(self.hosts.prefix(host) if self.hosts else []),
                                    str(Path(sys.executable).parent / "dask"), *args, *tls, "--no-dashboard"],
                                   env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                                   cwd=self.course)
        log.close()
        self.processes.append(process)
        return process

    def __enter__(self) -> "LocalCluster":
        self._start("scheduler", 0, "scheduler", "--host", self.hosts_addresses[0], "--port", str(self.port),
                    *(["--protocol", "tls"] if self.tls else []))
        self.workers = [self._start(f"worker{i}", 1, "worker", self.address, "--nthreads", str(self.threads), "--name", f"w{i}",
                                    "--host", self.hosts_addresses[1]) for i in range(self.count)]
        self.spec.write_text(json.dumps({"address": self.address, **({"security": self.tls} if self.tls else {})}))
        # wait from where a client would connect: the scheduler's host
        wait = (f"from grader.grading.cluster import connect\nwith connect({str(self.spec)!r}) as client:\n"
                f"    client.wait_for_workers({self.count}, timeout=120)")
        done = subprocess.run([*(self.hosts.prefix(0) if self.hosts else []), sys.executable, "-c", wait],
                              env=self.env, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            self.__exit__()
            logs = "".join((self.logs / f"dask-{name}.log").read_text(errors="replace")[-1500:]
                           for name in ("scheduler", "worker0"))
            raise RuntimeError(f"the cluster did not start: {done.stderr[-1500:]}\n{logs}")
        return self

    def dask_cpu_seconds(self) -> float:
        """CPU seconds the scheduler, the nannies and their workers have used so far: Dask's own upkeep, not the
        grading processes the workers start (nor anything under those)."""
        import psutil
        total = 0.0
        for process in self.processes:
            try:
                top = psutil.Process(process.pid)
                dask = [top] + [child for child in top.children() if "grader." not in " ".join(child.cmdline())]
                for member in dask:
                    times = member.cpu_times()
                    total += times.user + times.system
            except psutil.Error:  # killed by a test
                continue
        return round(total, 2)

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
