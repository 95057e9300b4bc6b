"""Grading through Slurm: a single-node Slurm (Debian's slurm-wlm and munge, which `make setup` installs as root)
started by the test, the Dask workers started as Slurm jobs by dask-jobqueue's SLURMCluster, through
`python -m grader autograde --cluster spec.json`.  Skipped, with the reason, where Slurm is not installed or does
not start (not root, no munge key)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.testing import free_port
from grader.testing.dask_cluster import gradebook_cells

from conftest import run_grader, small_course, venv_env

pytestmark = pytest.mark.slow
CLASS = ["blank_01", "solution_01", "syntax_error"]
DAEMONS = ("munged", "slurmctld", "slurmd", "sbatch", "sinfo")


def _missing() -> str | None:
    absent = [name for name in DAEMONS if not (shutil.which(name) or Path("/usr/sbin", name).exists())]
    if absent:
        return f"Slurm is not installed ({', '.join(absent)} missing): as root, make setup installs slurm-wlm and munge"
    if os.geteuid() != 0:
        return "a single-node Slurm for the test needs root (slurmd starts jobs as their users)"
    if not Path("/etc/munge/munge.key").exists():
        return "munge has no key (/etc/munge/munge.key): reinstall munge, or run mungekey as root"
    return None


def _daemon(name: str) -> str:
    return shutil.which(name) or str(Path("/usr/sbin", name))


SLURM_CONF = """\
ClusterName=translab
SlurmctldHost={host}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={munge}
CredType=cred/munge
SlurmctldPort={ctld_port}
SlurmdPort={d_port}
StateSaveLocation={state}
SlurmdSpoolDir={spool}
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
MpiDefault=none
ReturnToService=2
NodeName={host} CPUs={cpus} RealMemory={memory} State=UNKNOWN
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
"""


@pytest.fixture(scope="module")
def slurm(tmp_path_factory):
    """(environment with SLURM_CONF, folder) of a single-node Slurm running for this module."""
    reason = _missing()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("slurm")
    state, spool, munge = folder / "state", folder / "spool", folder / "munge"
    for path in (state, spool, munge):
        path.mkdir(mode=0o755)
    host = socket.gethostname()
    memory = int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**20 * 0.8)
    conf = folder / "slurm.conf"
    conf.write_text(SLURM_CONF.format(host=host, munge=munge / "munge.socket", ctld_port=free_port(),
                                      d_port=free_port(), state=state, spool=spool, cpus=os.cpu_count(),
                                      memory=memory))
    env = {**venv_env(), "SLURM_CONF": str(conf)}
    started = []
    try:
        started.append(subprocess.Popen([_daemon("munged"), "--foreground", "--force", f"--socket={munge}/munge.socket",
                                         f"--log-file={munge}/munged.log", f"--pid-file={munge}/munged.pid",
                                         f"--seed-file={munge}/munged.seed"],
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT))
        time.sleep(1)
        for daemon in ("slurmctld", "slurmd"):
            started.append(subprocess.Popen([_daemon(daemon), "-D", "-f", str(conf)], env=env,
                                            stdout=open(state / f"{daemon}.out", "w"), stderr=subprocess.STDOUT))
        deadline = time.monotonic() + 60
        while True:
            shown = subprocess.run(["sinfo", "-h", "-o", "%T"], env=env, capture_output=True, text=True)
            if shown.returncode == 0 and "idle" in shown.stdout:
                break
            if time.monotonic() > deadline or any(p.poll() is not None for p in started):
                logs = "".join((state / f"{d}.out").read_text()[-800:] for d in ("slurmctld", "slurmd")
                               if (state / f"{d}.out").exists())
                pytest.skip(f"this machine's Slurm did not start a node in 60 s: {shown.stdout or shown.stderr} {logs}")
            time.sleep(1)
        yield env, folder
    finally:
        subprocess.run(["scancel", "--user", "root"], env=env, capture_output=True)
        for process in reversed(started):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def test_a_class_graded_by_dask_workers_that_slurm_started(slurm, tmp_path):
    """The same cells and flags as `make autograde` of the same class on this machine."""
    env, folder = slurm
    courses = {}
    for name in ("here", "slurm"):
        courses[name] = small_course(tmp_path / name, CLASS)
    run_grader(courses["here"], "autograde")
    spec = tmp_path / "slurm.json"
    spec.write_text(json.dumps({"jobqueue": {
        "kind": "slurm", "workers": 1, "cores": 1, "processes": 1, "memory": "3GB", "queue": "debug",
        "walltime": "00:20:00", "python": sys.executable, "worker_extra_args": ["--nthreads", "1"],
        "job_script_prologue": [f"export TRANSLAB_COURSE={courses['slurm']}", f"export SLURM_CONF={env['SLURM_CONF']}",
                                f"cd {courses['slurm']}"],
        "scheduler_options": {"host": "127.0.0.1"}, "log_directory": str(folder / "jobs"),
        "local_directory": str(tmp_path / "dask")}}))
    done = subprocess.run([sys.executable, "-m", "grader", "--root", str(courses["slurm"]), "autograde", "--cluster",
                           str(spec)], env=env, text=True, capture_output=True, timeout=900)
    said = done.stdout + done.stderr
    assert done.returncode == 0, said[-3000:]
    assert f"autograded {len(CLASS)} student(s)" in said, said[-3000:]
    assert gradebook_cells(courses["slurm"] / "gradebook.db") == gradebook_cells(courses["here"] / "gradebook.db")
    assert list((folder / "jobs").glob("*.out")) or list((folder / "jobs").glob("*.err")), "no Slurm job ran a worker"
