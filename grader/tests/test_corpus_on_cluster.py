"""Corpus cases graded on a real Dask cluster (a scheduler and two workers, processes of their own on 127.0.0.1):
one worker killed mid-batch, then a batch whose client and scheduler are killed; each case held to the scores and
flags of ``grader/testing/expected_scores.csv``, the table ``test_corpus.py`` holds ``make autograde``'s batch to.

These classes leave out the cases that spend a time budget and grade with the lab's budgets, so this file runs
beside the others in ``make test`` (the corpus itself, whose budgets are tight, runs alone after them)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from grader.grading.result_folders import merged_mark
from grader.testing import corpus
from grader.testing.dask_cluster import LocalCluster

from conftest import venv_env
from corpus_course import assert_graded_as_the_table_says, batch_report, corpus_course

pytestmark = pytest.mark.slow

# A mixed class: right, blank and broken work, and hostile code where a worker's grading process kept between tasks
# could carry one student over to the next (what is left behind, the zygote they share), links to the gradebook
# and /etc/shadow, a faked infrastructure error.  Seven, in six tasks on 2 workers.
CLUSTER_CLASS = ["blank_01", "fake_infrastructure_error", "invalid_json", "leave_behind", "reach_zygote",
                 "solution_01", "symlinks"]
# Quick students for a batch interrupted twice: its client killed, then its scheduler.
INTERRUPTED_CLASS = ["blank_01", "invalid_json", "solution_01", "syntax_error", "tests_deleted"]


def test_the_classes_spend_no_budget():
    assert not set(CLUSTER_CLASS + INTERRUPTED_CLASS) & corpus.SPEND_BUDGET


def _batch(cluster: LocalCluster, root) -> list[str]:
    return [sys.executable, "-m", "grader", "--root", str(root), "autograde", "--cluster", cluster.address]


def _until_merged(command: list[str], then, timeout: float = 600) -> tuple[subprocess.Popen, str, int | None]:
    """Run the batch; call ``then(batch)`` as soon as it has merged a student; (the process, what it said, how many
    lines it had said by then)."""
    batch = subprocess.Popen(command, env=venv_env(), text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines, at = [], None
    for line in batch.stdout:
        lines.append(line)
        if at is None and ": graded" in line:
            then(batch)
            at = len(lines)
    batch.wait(timeout=timeout)
    return batch, "".join(lines), at


@pytest.fixture(scope="module")
def by_cluster(tmp_path_factory):
    """The class graded through the cluster; one worker is killed (its whole process group) as soon as the first
    student is merged; then the same command again."""
    root = tmp_path_factory.mktemp("cluster")
    corpus_course(root, CLUSTER_CLASS)
    with LocalCluster(root, workers=2, env=venv_env()) as cluster:
        command = _batch(cluster, root)
        batch, said, killed = _until_merged(command, lambda _: cluster.kill(0), timeout=900)
        again = subprocess.run(command, env=venv_env(), text=True, capture_output=True, timeout=600)
    return root, batch.returncode, said, killed, again


def test_a_class_graded_on_a_dask_cluster_is_graded_fairly_with_a_worker_killed(by_cluster):
    """Every student graded once and merged, the one in the killed worker's hands retried on the other; the scores
    and flags of the table, hostile cases included."""
    root, returncode, said, killed, _ = by_cluster
    assert returncode == 0, said[-3000:]
    assert killed is not None and killed < len(said.splitlines()), "the worker must die mid-batch: " + said[-2000:]
    assert f"{len(CLUSTER_CLASS)} student(s) sent" in said and f"autograded {len(CLUSTER_CLASS)} student(s)" in said
    assert sorted(batch_report(root)) == CLUSTER_CLASS
    assert_graded_as_the_table_says(root, CLUSTER_CLASS)
    written = [str(p) for p in [root / "pwned_by_student", *corpus.OUTSIDE_TARGETS] if p.exists()]
    assert not written, f"student code wrote {written}"


def test_the_cluster_batch_run_again_grades_only_what_changed(by_cluster):
    root, _, _, _, again = by_cluster
    said = again.stdout + again.stderr
    assert again.returncode == 0, said[-2000:]
    assert f"{len(CLUSTER_CLASS)} student(s) already merged" in said and "0 student(s) sent" in said, said[-2000:]


@pytest.fixture(scope="module")
def interrupted(tmp_path_factory):
    """A class graded on a Dask cluster whose client is SIGKILLed after its first merge; run again, with the
    scheduler's whole process group SIGKILLed after its first merge; run a third time on a new cluster, of one
    worker with two threads (``dask worker --nthreads 2``), whose grading process grades two tasks at once."""
    root = tmp_path_factory.mktemp("interrupted")
    corpus_course(root, INTERRUPTED_CLASS)
    marks = []
    with LocalCluster(root, workers=2, env=venv_env()) as cluster:
        command = _batch(cluster, root)
        client, _, _ = _until_merged(command, lambda batch: batch.kill())
        marks.append({name for name in INTERRUPTED_CLASS if merged_mark(root, name)})
        started = time.monotonic()
        scheduler_lost, said, _ = _until_merged(command, lambda _: cluster.kill_scheduler())
        lost_after = time.monotonic() - started
        marks.append({name for name in INTERRUPTED_CLASS if merged_mark(root, name)})
    with LocalCluster(root, workers=1, threads=2, env=venv_env()) as cluster:
        last = subprocess.run(_batch(cluster, root), env=venv_env(), text=True, capture_output=True, timeout=600)
    return root, client.returncode, marks, scheduler_lost.returncode, said, lost_after, last


def test_a_batch_killed_twice_keeps_what_it_merged_and_finishes_when_run_again(interrupted):
    """Nothing merged is lost when the client dies or the scheduler does; the run after grades only the rest, and
    every student ends with the scores and flags of the table."""
    root, client_code, marks, lost_code, said, lost_after, last = interrupted
    assert client_code == -9 and marks[0], "the client must die after a merge"
    assert marks[0] <= marks[1] and len(marks[1]) < len(INTERRUPTED_CLASS), marks
    assert lost_code == 1 and "connection to the cluster's scheduler was lost" in said, said[-3000:]
    assert lost_after < 300, f"the batch took {lost_after:.0f} s to notice its scheduler was gone"
    assert "CancelledError" not in said and "Failed to reconnect" not in said, \
        f"Dask's own noise about the lost scheduler reached the terminal: {said[-3000:]}"
    finished = last.stdout + last.stderr
    assert last.returncode == 0, finished[-3000:]
    assert f"{len(marks[1])} student(s) already merged" in finished, finished[-3000:]
    assert f"{len(INTERRUPTED_CLASS) - len(marks[1])} student(s) sent" in finished, finished[-3000:]
    assert " on 2 worker thread(s) of tcp://127.0.0.1:" in finished and "--jobs" not in finished, finished[-3000:]
    assert_graded_as_the_table_says(root, INTERRUPTED_CLASS)
