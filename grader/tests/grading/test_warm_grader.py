"""The warm grader (grader.grading.warm_grader): started by the first press, found by the next, graded the same;
never with the press's environment, only over its own TLS, started again when the code changes, gone when idle
or stopped, nothing of it left behind."""
from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import signal
import time
from pathlib import Path

import pytest

from distributed import default_client

from grader.grading import warm_grader
from grader.grading.cluster import connect
from translab.contract import ASSIGNMENT

from conftest import press_formgrader_button, run_grader, small_course, still_running, venv_env
from corpus_course import assert_graded_as_the_table_says, batch_report

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

STANDIN = "translab-standin-" + secrets.token_hex(16)  # what a hub's API token would be in the press's environment


def _descendants(pids: list[int]) -> set[int]:
    """``pids`` and every process below them now (take it while they run: an orphan's parent becomes init)."""
    parents = {}
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(status.parent.name)] = int(fields[1])
    found, frontier = set(pids), set(pids)
    while frontier:
        frontier = {pid for pid, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return still_running(found)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    """A course graded twice with --warm (one student a press, as the formgrader's button does), the press's
    environment holding a stand-in token; the warm grader's processes as they were between the presses."""
    root = small_course(tmp_path_factory.mktemp("warm") / "course", ["solution_01", "blank_01", "syntax_error"])
    os.environ["TRANSLAB_STANDIN_TOKEN"] = STANDIN
    try:
        first = run_grader(root, "autograde", "--warm", "--student", "solution_01")
        between = warm_grader.running(root)
        processes = _descendants(between["pgids"]) if between else set()
        environments = {pid: Path(f"/proc/{pid}/environ").read_bytes() for pid in processes}
        second = run_grader(root, "autograde", "--warm", "--student", "blank_01")
        after = warm_grader.running(root)
        yield root, first, second, between, after, processes, environments
    finally:
        os.environ.pop("TRANSLAB_STANDIN_TOKEN", None)
        warm_grader.stop(root)


def test_the_first_press_starts_it_and_the_next_finds_it(warm):
    root, first, second, between, after, processes, _ = warm
    assert "started the warm grader at tls://127.0.0.1:" in first, first[-2000:]
    assert between and after and between["pgids"] == after["pgids"], "the second press started another grader"
    assert "the warm grader started at" in second and "started the warm grader" not in second, second[-2000:]
    assert f"on 1 worker thread(s) of the warm grader ({between['address']})" in second, second[-2000:]
    assert len(processes) >= 4, "a scheduler, a worker (and its nanny) and the grading process it keeps"
    assert_graded_as_the_table_says(root, ["solution_01", "blank_01"])


def test_it_runs_without_the_press_s_environment(warm):
    *_, environments = warm
    assert environments, "no process of the warm grader was read"
    for pid, environ in environments.items():
        assert STANDIN.encode() not in environ, f"the press's environment reached process {pid}"
        assert b"TRANSLAB_COURSE_SECRET" not in environ, f"the course secret's variable reached process {pid}"


def test_it_listens_only_with_its_own_certificate(warm):
    root, _, _, between, *_ = warm
    from distributed import Client
    place = root / warm_grader.FOLDER
    assert place.stat().st_mode & 0o077 == 0, "the warm grader's folder is the instructor's only"
    key = Path(json.loads((place / "cluster.json").read_text())["security"]["tls_client_key"])
    assert key.stat().st_mode & 0o077 == 0, "the certificate's key is the instructor's only"
    plain = between["address"].replace("tls://", "tcp://")
    with pytest.raises((OSError, TimeoutError)):
        Client(plain, timeout=5)


def test_a_batch_takes_jobs_of_its_threads(warm):
    """The worker has a thread per core and a batch grades ``--jobs`` students at once on them: one after the other
    with --jobs 1 (the batch lasts as long as its students together), as many as the cores with --jobs 2."""
    root, *_ = warm
    class_ = ["solution_01", "syntax_error"]
    for jobs in (1, 2):
        students = [arg for name in class_ for arg in ("--student", name)]
        said = run_grader(root, "autograde", "--warm", "--jobs", str(jobs), *students)
        threads = min(jobs, len(os.sched_getaffinity(0)))
        assert f"on {threads} worker thread(s) of the warm grader" in said, said[-2000:]
        assert "started the warm grader" not in said, "a press with other --jobs started another grader"
        assert_graded_as_the_table_says(root, class_)
        if jobs == 1:
            batch_s = float(re.search(r"autograded 2 student\(s\) in (\d+) s", said).group(1))
            # this batch's students: the report keeps the rows of students graded by earlier presses too
            students_s = sum(float(row["seconds"]) for student, row in batch_report(root).items() if student in class_)
            assert batch_s >= students_s - 1, f"--jobs 1 graded at once: {students_s} s of students in {batch_s} s"


def test_a_course_copied_with_its_record_starts_its_own(warm, tmp_path):
    """A course folder copied while its grader runs carries that grader's record: the copy's presses must not
    send their students to, or stop, the grader of the course it was copied from."""
    root, *_ = warm
    copy = tmp_path / "copy"
    (copy / warm_grader.FOLDER).mkdir(parents=True)
    shutil.copy(root / warm_grader.FOLDER / "state.json", copy / warm_grader.FOLDER)
    assert warm_grader.running(root) and warm_grader.state(copy) is None and warm_grader.running(copy) is None
    assert warm_grader.stop(copy) is False and warm_grader.running(root)


@pytest.mark.parametrize("process, sig, student", [("worker", signal.SIGKILL, "solution_01"),
                                                    ("scheduler", signal.SIGSTOP, "blank_01")])
def test_a_broken_grader_is_started_again_not_waited_on(warm, process, sig, student):
    """A worker killed (the OOM killer, an admin) leaves a scheduler with no worker, where a task would wait
    forever; a scheduler that does not answer (stopped here; idle, it closes the same way between a press's check
    and its hold) would cost Dask's 30 s connect timeout: the next press starts a whole new grader at once."""
    root, *_ = warm
    before = warm_grader.running(root)
    processes = _descendants(before["pgids"])
    os.kill(before["pgids"][["scheduler", "worker"].index(process)], sig)
    said = run_grader(root, "autograde", "--warm", "--student", student)
    assert "started the warm grader" in said, said[-2000:]
    assert warm_grader.running(root)["pgids"] != before["pgids"]
    assert not still_running(processes), "what was left of the old grader still runs"
    assert_graded_as_the_table_says(root, [student])


def test_a_changed_configuration_starts_it_again_and_stop_leaves_nothing(warm):
    root, *_ = warm
    before = warm_grader.running(root)
    old = _descendants(before["pgids"])
    config = root / "nbgrader_config.py"
    config.write_text(config.read_text() + "\n# changed after the warm grader started\n")
    said = run_grader(root, "autograde", "--warm", "--student", "syntax_error")
    now = warm_grader.running(root)
    assert "changed since the warm grader started: starting it again" in said, said[-2000:]
    assert now and now["pgids"] != before["pgids"] and now["key"] != before["key"]
    assert not still_running(old), "the warm grader of the old code is still running"
    assert_graded_as_the_table_says(root, ["syntax_error"])
    processes = _descendants(now["pgids"])
    assert "stopped the warm grader" in run_grader(root, "warm", "--stop")
    time.sleep(1)
    assert not still_running(processes), "a process of the warm grader outlived --stop"
    assert "no warm grader is running" in run_grader(root, "warm")


def test_a_press_holds_it_past_its_idle_time_and_then_it_stops_by_itself(tmp_path):
    """Dask's idle time counts only tasks: before the hold, a 3 s --idle outran a slow machine's start and the
    press failed after Dask's 30 s connect timeout (CI, session 54)."""
    root = small_course(tmp_path / "course", ["blank_01"])
    said = []
    try:
        with warm_grader.held(root, 3, say=said.append) as spec:  # a press between finding it and its first task
            batch_client = connect(spec)
            try:  # the batch's own client is the one Dask's helpers (as_completed) use, not the hold's
                assert default_client() is batch_client
            finally:
                batch_client.close()
            time.sleep(8)
            assert warm_grader.running(root), "the warm grader stopped under a connected press"
            pressed = run_grader(root, "autograde", "--warm", "--idle", "3", "--student", "blank_01")
            assert "the warm grader started at" in pressed, pressed[-2000:]
            processes = _descendants(warm_grader.state(root)["pgids"])
        assert any("started the warm grader" in line for line in said), said
        assert len(processes) >= 4, processes
        assert_graded_as_the_table_says(root, ["blank_01"])
        deadline = time.monotonic() + 60
        while still_running(processes) and time.monotonic() < deadline:
            time.sleep(1)
        assert not still_running(processes), "the warm grader outlived its idle time by a minute"
        assert warm_grader.running(root) is None
    finally:
        warm_grader.stop(root)


def test_it_stops_by_itself_when_its_course_folder_is_gone(tmp_path):
    """An instructor deletes a course (or a test or a demo hub its temporary one) with its grader running: the
    grader stops within seconds, not after its ten idle minutes holding 0.6 GB."""
    root = small_course(tmp_path / "course", ["blank_01"])
    with warm_grader.held(root, say=[].append):
        pgids = warm_grader.state(root)["pgids"]
        processes = _descendants(pgids)
    try:
        shutil.rmtree(root)  # its worker's working folder and scratch space with it
        deadline = time.monotonic() + 45
        while still_running(processes) and time.monotonic() < deadline:
            time.sleep(1)
        assert not still_running(processes), "the warm grader outlived its course folder by 45 s"
    finally:
        for pgid in pgids:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)


def test_the_formgrader_button_grades_on_it_by_default(tmp_path):
    root = small_course(tmp_path / "course", ["solution_01"])
    try:
        pressed = press_formgrader_button(root, "autograde", ASSIGNMENT, "solution_01", env=venv_env())
        assert pressed["success"], pressed
        assert "started the warm grader" in pressed["log"], pressed["log"][-2000:]
        assert warm_grader.running(root)
        assert_graded_as_the_table_says(root, ["solution_01"])
    finally:
        warm_grader.stop(root)
