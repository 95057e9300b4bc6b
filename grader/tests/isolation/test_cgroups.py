"""A cgroup per student (grader.isolation.cgroups): made and removed by the batch, limits that hold, equal CPU shares.

Each test runs real processes in real groups of this machine; where the machine has no cgroups a batch can write,
they skip with the reason the batch would log (and the batch grades with the per-process limits alone)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.isolation import cgroups
from translab.paths import REPO_ROOT

MB = 1024 ** 2
JOIN = "import os\nfrom grader.isolation.cgroups import join\njoin(os.environ)\n"


@pytest.fixture
def groups():
    with cgroups.Cgroups(memory=256 * MB, tasks=32) as made:
        if made.problem:
            pytest.skip(made.problem)
        yield made
    for _, folder in made.batches:
        assert not folder.exists(), f"{folder} outlived its batch"


def _python(code: str, env: dict, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", JOIN + code], env={**os.environ, **env, "PYTHONPATH": str(REPO_ROOT)},
                            **kwargs)


def test_each_student_has_a_group_with_the_limits(groups):
    env = groups.student(3)
    folders = cgroups.folders_of(env)
    assert folders and all(folder.name == "student-3" and folder.is_dir() for folder in folders)
    settings = {name: (folder / name).read_text().strip() for folder in folders for name in
                ("memory.max", "memory.limit_in_bytes", "pids.max", "cpu.weight", "cpu.shares")
                if (folder / name).exists()}
    assert settings.get("memory.max", settings.get("memory.limit_in_bytes")) == str(256 * MB), settings
    assert settings["pids.max"] == "32"
    assert settings.get("cpu.weight", settings.get("cpu.shares")) in ("100", "1024"), settings


def test_a_detached_process_is_in_the_group_and_killed_with_it(groups):
    env = groups.student(0)
    code = ("import sys, time\nif os.fork() == 0:\n    os.setsid()\n    if os.fork() == 0:\n"
            "        print(os.getpid(), flush=True)\n        time.sleep(600)\n    os._exit(0)\ntime.sleep(600)\n")
    process = _python(code, env, stdout=subprocess.PIPE, text=True)
    detached = int(process.stdout.readline())
    assert {process.pid, detached} <= cgroups.processes(cgroups.folders_of(env))
    assert cgroups.kill(cgroups.folders_of(env)) == []
    process.wait(timeout=10)
    assert process.returncode == -9
    assert not Path(f"/proc/{detached}").exists() or "Z" in Path(f"/proc/{detached}/stat").read_text().split()[2]


def test_memory_beyond_the_limit_kills_the_process(groups):
    env = groups.student(1)
    process = _python("hog = b'x' * (512 * 1024 ** 2)\nprint('allocated', flush=True)\n", env,
                      stdout=subprocess.PIPE, text=True)
    out, _ = process.communicate(timeout=60)
    assert process.returncode == -9 and "allocated" not in out, (process.returncode, out)


def test_tasks_beyond_the_limit_are_refused(groups):
    env = groups.student(2)
    code = ("import time\nchildren = 0\ntry:\n    for _ in range(100):\n        if os.fork() == 0:\n"
            "            time.sleep(600)\n        children += 1\nexcept OSError as error:\n"
            "    print(type(error).__name__, children, flush=True)\n")
    process = _python(code, env, stdout=subprocess.PIPE, text=True)
    out = process.stdout.readline()  # its sleeping children hold the pipe open: one line, then the kill
    cgroups.kill(cgroups.folders_of(env))
    process.wait(timeout=10)
    name, children = out.split()
    assert name == "BlockingIOError" and int(children) < 32, out


def test_a_student_with_many_busy_processes_gets_the_cpu_share_of_one(groups):
    """Eight busy processes in one student's group and one in a classmate's, all on one CPU: the classmate gets
    about half of it (equal weights), not a ninth (equal processes)."""
    cpu = min(os.sched_getaffinity(0))
    busy = f"os.sched_setaffinity(0, {{{cpu}}})\nprint(flush=True)\nwhile True:\n    pass\n"
    attacker, classmate = groups.student(0), groups.student(1)
    processes = [_python(busy, attacker, stdout=subprocess.PIPE) for _ in range(8)]
    processes.append(_python(busy, classmate, stdout=subprocess.PIPE))
    try:
        for process in processes:
            process.stdout.readline()  # joined and pinned
        start = [_cpu_seconds(p.pid) for p in processes]
        time.sleep(3)
        used = [_cpu_seconds(p.pid) - before for p, before in zip(processes, start)]
    finally:
        for env in (attacker, classmate):
            cgroups.kill(cgroups.folders_of(env))
        for process in processes:
            process.wait(timeout=10)
    share = used[-1] / sum(used)
    assert share > 0.35, f"the classmate got {share:.0%} of the CPU (one process in nine: 11%)"


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_where_no_group_can_be_made_the_problem_is_said(monkeypatch):
    monkeypatch.setattr(cgroups, "_hierarchies", lambda: [])
    with cgroups.Cgroups(memory=256 * MB, tasks=32) as made:
        assert made.batches == [] and made.mode == "none"
        assert "no cgroup hierarchy has the cpu, memory, pids controller" in made.problem
        env = made.student(0)
    assert cgroups.join(env) == made.problem
    assert cgroups.folders_of(env) == [] and cgroups.kill([]) == []
