"""grader.grading.cluster without a cluster: what must agree across machines, what is refused, results merged elsewhere.
(The class graded on a real Dask scheduler and workers, one of them killed, is in test_corpus_on_cluster.py.)"""
from __future__ import annotations

import contextlib
import json
import pickle
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from grader.grading import cluster, result_folders
from grader.course import GradingError
from grader.testing import corpus
from translab.contract import ASSIGNMENT, COURSE_ENV
from translab.paths import REPO_ROOT

from conftest import cell_scores, run_grader, small_course, still_running, venv_env

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not


def test_only_a_loopback_tcp_scheduler_or_tls_with_certificates_is_accepted(tmp_path):
    for address in ("tcp://10.0.0.5:8786", "tcp://0.0.0.0:8786", "inproc://x"):
        with pytest.raises(GradingError, match="runs any code"):
            cluster.connect(address)
    spec = tmp_path / "cluster.json"
    spec.write_text(json.dumps({"address": "tls://10.0.0.5:8786", "security": {"tls_ca_file": "ca.pem"}}))
    with pytest.raises(GradingError, match="tls_client_cert"):
        cluster.connect(str(spec))


def test_the_fingerprint_follows_the_solutions_and_the_configuration(tmp_path):
    root = tmp_path / "course"
    (root / "solutions").mkdir(parents=True)
    shutil.copytree(REPO_ROOT / "solutions" / ASSIGNMENT, root / "solutions" / ASSIGNMENT)
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    first = result_folders.fingerprint(root)
    assert first == result_folders.fingerprint(root) and len(first["digest"]) == 64
    notebook = next((root / "solutions" / ASSIGNMENT).glob("*.ipynb"))
    notebook.write_text(notebook.read_text().replace("causal", "causal ", 1))
    second = result_folders.fingerprint(root)
    assert second["digest"] != first["digest"]
    (root / "nbgrader_config.py").write_text((root / "nbgrader_config.py").read_text() + "\nc.Execute.timeout = 5\n")
    assert result_folders.fingerprint(root)["digest"] != second["digest"]


def test_the_fingerprint_is_taken_in_a_course_whose_grader_folder_holds_only_the_pth(tmp_path):
    """A course set up for `make` (the Makefile's grader/skip_iri_syntax.pth beside it) makes ``grader`` a namespace
    package for a process started there, without a ``__file__``: the warm grader's first press took the fingerprint
    there and failed."""
    root = tmp_path / "course"
    (root / "grader").mkdir(parents=True)
    shutil.copy(REPO_ROOT / "grader" / "skip_iri_syntax.pth", root / "grader")
    shutil.copy(REPO_ROOT / "nbgrader_config.py", root)
    code = ("import grader, json; from pathlib import Path; from grader.grading.result_folders import fingerprint; "
            "print(json.dumps([grader.__file__, fingerprint(Path('.'))]))")
    done = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, env=venv_env())
    assert done.returncode == 0, done.stderr[-2000:]
    namespace, taken = json.loads(done.stdout)
    assert namespace is None, "grader was a regular package there: this test would not fail without the mend"
    assert taken == result_folders.fingerprint(root), "not the digest taken in the checkout's own process"


def test_a_worker_with_another_course_refuses_before_it_grades(tmp_path, monkeypatch):
    monkeypatch.setenv(COURSE_ENV, str(REPO_ROOT))
    payload = {"students": [{"student": "alice"}], "fingerprint": {"digest": "0" * 64, "commit": "abc1234"}}
    with pytest.raises(result_folders.CourseMismatch, match="abc1234.*check out the batch's commit"):
        cluster.remote_task(payload)


def test_a_task_gradebook_holds_the_assignment_and_only_its_students_rows(tmp_path):
    db = small_course(tmp_path / "course", []) / "gradebook.db"
    from grader.course.gradebook import add_submission
    for student in ("ann", "ben"):
        add_submission(db, student)
    copy = tmp_path / "ann.db"
    copy.write_bytes(result_folders.student_gradebook(db, ["ann"]))
    with sqlite3.connect(copy) as connection:
        assert [row[0] for row in connection.execute("SELECT id FROM student")] == ["ann"]
        assert connection.execute("SELECT COUNT(*) FROM submitted_assignment").fetchone() == (1,)
        assert connection.execute("SELECT COUNT(*) FROM grade_cells").fetchone()[0] > 0, "the assignment's tests"


def test_students_who_hand_in_the_same_files_are_different_tasks():
    """Dask runs two tasks of one key once: two blank submissions must not share a result."""
    same = ({"a.ipynb": b"{}"}, [], "digest")
    keys = {cluster.task_key([(name, same)]) for name in ("ann", "bob")}
    assert len(keys) == 2
    assert cluster.task_key([("ann", same)]) == cluster.task_key([("ann", same)]), "the same task, the same key"
    assert cluster.task_key([("ann", same)]) != cluster.task_key([("ann", ({}, [], "another"))])


@pytest.mark.parametrize("students, workers", [(100, 2), (8, 2), (1, 4), (30, 0), (1000, 32), (40, 4), (0, 3)])
def test_tasks_shrink_to_single_students_at_the_end(students, workers):
    sizes = cluster.chunk_sizes(students, workers)
    assert sum(sizes) == students and all(1 <= size <= cluster.CHUNK_MAX for size in sizes)
    assert sizes == sorted(sizes, reverse=True), "the large tasks first"
    if students >= 2 * max(workers, 1):
        assert sizes[-max(workers, 1):] == [1] * max(workers, 1), "each worker ends on a single student"
    assert len(sizes) < students or students < 4, "not one task per student"


def test_merge_refuses_a_result_of_another_course_and_an_empty_folder(tmp_path):
    folder = tmp_path / "results" / "alice"
    folder.mkdir(parents=True)
    (folder / result_folders.RESULT).write_text(json.dumps({"student": "alice", "fingerprint": {"digest": "1" * 64,
                                                                                           "commit": "old"}}))
    with pytest.raises(GradingError, match="another version of the course"):
        result_folders.merge(REPO_ROOT, [tmp_path / "results"])
    with pytest.raises(GradingError, match="no result folders"):
        (tmp_path / "empty").mkdir()
        result_folders.merge(REPO_ROOT, [tmp_path / "empty"])


def test_a_student_graded_into_a_results_folder_then_merged_scores_as_graded_here(tmp_path):
    """`autograde --student ID --results-dir DIR` (one job of a Slurm array) then `merge DIR` on the course: the
    same cells as grading it here, and the submission is marked merged."""
    here = small_course(tmp_path / "here", ["solution_01"])
    run_grader(here, "autograde")
    there = small_course(tmp_path / "there", ["solution_01"])
    env = venv_env()
    out = tmp_path / "results"
    for command in (["autograde", "--student", "solution_01", "--results-dir", str(out)], ["merge", str(out)]):
        done = subprocess.run([sys.executable, "-m", "grader", "--root", str(there), *command], env=env, text=True,
                              capture_output=True, timeout=600)
        assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    assert "merged solution_01" in done.stdout
    assert cell_scores(there, "solution_01") == cell_scores(here, "solution_01")
    mark = result_folders.merged_mark(there, "solution_01")
    assert mark and mark["submission"] == result_folders.submission(there, "solution_01")[2]
    assert (there / "autograded" / "solution_01" / ASSIGNMENT / f"{corpus.NB1}.ipynb").exists()


def test_a_student_whose_worker_died_three_times_scores_0_flagged(tmp_path):
    """What the batch does when the scheduler gives up on a task (KilledWorker after its retries): the student's
    notebooks at 0, flagged with the reason, and the batch goes on."""
    from grader.course.gradebook import flagged_notebooks
    root = small_course(tmp_path / "course", [])
    result = cluster.worker_died(root, "ghost")
    assert result.flagged == result.failed_notebooks and len(result.flagged) == 6
    assert flagged_notebooks(root / "gradebook.db", "ghost") == sorted(result.flagged)
    with sqlite3.connect(root / "gradebook.db") as connection:
        scores = connection.execute("SELECT g.auto_score FROM grade g JOIN submitted_notebook sn ON g.notebook_id = sn.id "
                                    "JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
                                    "WHERE sa.student_id = 'ghost' AND g.auto_score IS NOT NULL").fetchall()
    assert scores and all(score == 0 for (score,) in scores)


def _zygotes(pid: int) -> set[int]:
    """The pids of the zygotes below process ``pid`` (grader.isolation.zygote)."""
    found, frontier = set(), [pid]
    while frontier:
        parent = frontier.pop()
        # every thread's children: the grading process starts its session in the thread of the task that needs it
        listed = []
        for path in Path(f"/proc/{parent}/task").glob("*/children"):
            with contextlib.suppress(OSError):  # a thread that ended meanwhile
                listed += path.read_text().split()
        for child in listed:
            try:
                command = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"grader.isolation.zygote" in command:
                found.add(int(child))
            frontier.append(int(child))
    return found


def test_a_worker_s_grading_process_grades_task_after_task_with_the_same_zygotes(tmp_path, monkeypatch):
    """What a worker runs (``grader.grading.cluster.GradingServer``): three tasks in one process, the same zygotes for all,
    the same student graded again in the third scoring as in the first, and the process gone with its stdin."""
    from grader.grading.batch import ensure_assignment
    from grader.course.variants import require_secret
    monkeypatch.setenv("PATH", venv_env()["PATH"])  # nbgrader runs alembic from PATH
    root = small_course(tmp_path / "course", ["solution_01", "blank_01"])
    ensure_assignment(root)
    course, secret = result_folders.fingerprint(root), require_secret(root)
    server = cluster.GradingServer(root)
    try:
        zygotes, scores = [], []
        for number, student in enumerate(["solution_01", "blank_01", "solution_01"]):
            given = tmp_path / f"task{number}.pickle"
            given.write_bytes(pickle.dumps(result_folders.payload(root, [(student, result_folders.submission(root, student))],
                                                           course, secret, (), True, None)))
            server.grade(given, tmp_path / f"out{number}")
            scores.append(cell_scores(tmp_path / f"out{number}" / student, student))
            zygotes.append(_zygotes(server.process.pid))
        # the kernels' zygote and the checkers' (grader.isolation.zygote), the same two for every task
        assert len(zygotes[0]) == 2 and zygotes[0] == zygotes[1] == zygotes[2], zygotes
        assert scores[0] == scores[2]
        got = {name: sum(score for score, _, _ in cells.values()) for name, cells in (("solution", scores[0]),
                                                                                     ("blank", scores[1]))}
        assert got["blank"] < got["solution"], got
        server.process.stdin.close()
        assert server.process.wait(timeout=60) == 0
        deadline = time.monotonic() + 30
        while still_running(zygotes[0]) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not still_running(zygotes[0]), "the zygote ends with it"
    finally:
        server.close()


def test_tasks_graded_at_once_each_get_indices_of_their_own_within_the_block(tmp_path):
    """A session's indices (each a uid, a status folder, a cgroup) go to the tasks its threads grade at once: each
    index once, the canary's first, none past the uid block."""
    from types import SimpleNamespace
    from grader.grading.batch import GradingSession
    session = GradingSession(tmp_path)
    session.work, session.walls = tmp_path, SimpleNamespace(capacity=7, student=lambda index: f"sandbox {index}")
    assert session.has_room(6) and not session.has_room(7), "the canary takes one index"
    firsts: list[int] = []
    threads = [threading.Thread(target=lambda: firsts.append(session.reserve(2))) for _ in range(3)]
    [thread.start() for thread in threads]
    [thread.join() for thread in threads]
    assert sorted(firsts) == [1, 3, 5], firsts
    assert not session.has_room(1)
    with pytest.raises(GradingError, match="room for 0 more student"):
        session.reserve(1)


def test_a_worker_s_threads_tasks_are_graded_at_once_in_one_session(tmp_path, monkeypatch):
    """A worker of two threads (``dask worker --nthreads 2``) sends its grading process two tasks at once: it grades
    them side by side with one pair of zygotes, as ``--jobs 2`` grades two students, so a short task sent second
    is answered first; each scores as its work deserves.  Two tasks of the same student at once: one is refused."""
    import nbformat
    from grader.grading.batch import ensure_assignment
    from grader.course.variants import require_secret
    monkeypatch.setenv("PATH", venv_env()["PATH"])  # nbgrader runs alembic from PATH
    root = small_course(tmp_path / "course", ["solution_01", "blank_01"])
    slow = root / "submitted" / "slow_solution_01"  # notebook 01 right, after a cell that waits 12 s
    shutil.copytree(root / "submitted" / "solution_01", slow)
    for path in (slow / ASSIGNMENT).glob("01_*.ipynb"):
        notebook = nbformat.read(path, as_version=4)
        notebook.cells.insert(0, nbformat.v4.new_code_cell("import time\ntime.sleep(12)"))
        nbformat.write(notebook, path)
    ensure_assignment(root)
    course, secret = result_folders.fingerprint(root), require_secret(root)

    def given(student: str, name: str) -> Path:
        path = tmp_path / f"{name}.pickle"
        path.write_bytes(pickle.dumps(result_folders.payload(root, [(student, result_folders.submission(root, student))],
                                                             course, secret, (), True, None)))
        return path

    server = cluster.GradingServer(root)
    ended: dict[str, object] = {}

    def grade(student: str, name: str, delay: float = 0.0) -> None:
        time.sleep(delay)
        try:
            server.grade(given(student, name), tmp_path / name)
            ended[name] = time.monotonic()
        except GradingError as error:
            ended[name] = error

    try:
        pair = [threading.Thread(target=grade, args=("slow_solution_01", "slow")),
                threading.Thread(target=grade, args=("blank_01", "blank", 1.0))]
        [thread.start() for thread in pair]
        [thread.join(timeout=600) for thread in pair]
        assert isinstance(ended["slow"], float) and isinstance(ended["blank"], float), ended
        assert ended["blank"] < ended["slow"], "the second task waited for the first"
        assert len(_zygotes(server.process.pid)) == 2, "one pair of zygotes for both tasks"
        got = {name: sum(score for score, _, _ in cell_scores(tmp_path / name / student, student).values())
               for name, student in (("slow", "slow_solution_01"), ("blank", "blank_01"))}
        assert got["blank"] < got["slow"], got
        twice = [threading.Thread(target=grade, args=("solution_01", f"again{n}")) for n in range(2)]
        [thread.start() for thread in twice]
        [thread.join(timeout=600) for thread in twice]
        refused = [outcome for outcome in (ended["again0"], ended["again1"]) if isinstance(outcome, GradingError)]
        assert len(refused) == 1 and "by another task" in str(refused[0]), ended
    finally:
        server.close()


def test_a_worker_s_tasks_share_the_canary_as_a_batch_s_students_do(tmp_path):
    """A submission nbgrader cannot run makes the batch grade its canary (a known-good notebook) to tell a broken
    machine from a broken submission.  A worker grading task after task asks it once, as one batch of the same
    students does, not once per task (19 tasks for a class of 100 on 2 workers)."""
    from grader.grading.batch import ensure_assignment
    from grader.course.variants import require_secret
    env = venv_env()  # nbgrader runs alembic from PATH
    root = small_course(tmp_path / "course", ["invalid_json", "marker_in_invalid_json"])
    ensure_assignment(root)
    course, secret = result_folders.fingerprint(root), require_secret(root)
    log = tmp_path / "server.log"  # a file, not a pipe: what grading prints never waits for a reader
    with open(log, "w", encoding="utf-8") as said:
        server = subprocess.Popen([sys.executable, "-m", "grader.grading.result_folders", "--serve", str(root)],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=said, cwd=root, env=env,
                                  text=True)
    try:
        for number, student in enumerate(["invalid_json", "marker_in_invalid_json"]):
            given = tmp_path / f"task{number}.pickle"
            given.write_bytes(pickle.dumps(result_folders.payload(root, [(student, result_folders.submission(root, student))],
                                                           course, secret, (), True, None)))
            server.stdin.write(json.dumps({"payload": str(given), "out": str(tmp_path / f"out{number}")}) + "\n")
            server.stdin.flush()
            assert json.loads(server.stdout.readline()) == {"ok": True}
            described = json.loads((tmp_path / f"out{number}" / student / result_folders.RESULT).read_text())["result"]
            assert described["failed_notebooks"] and not described["infrastructure"], described
        server.stdin.close()
        assert server.wait(timeout=60) == 0
    finally:
        server.kill()
    printed = log.read_text(encoding="utf-8")
    canaries = [line for line in printed.splitlines() if line.startswith("[autograde] the canary")]
    assert len(canaries) == 1 and canaries[0].split(": ")[-1].startswith("graded"), canaries or printed[-2000:]


def test_dask_reads_the_grading_settings_from_the_environment_the_module_prints():
    """What an instructor runs before `dask scheduler` and `dask worker`: eval "$(python -m grader.grading.cluster --env)"."""
    read = "import json, dask, distributed; print(json.dumps({key: dask.config.get(key) for key in %r}))" % (
        list(cluster.DASK_SETTINGS),)
    done = subprocess.run(["bash", "-c", f'eval "$({sys.executable} -m grader.grading.cluster --env)" && '
                                         f'{sys.executable} -c "{read}"'], capture_output=True, text=True, timeout=120,
                          cwd=REPO_ROOT, env={k: v for k, v in venv_env().items() if not k.startswith("DASK_")})
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == cluster.DASK_SETTINGS


def test_a_grading_process_that_ended_says_why_and_leaves_no_file_behind(tmp_path, monkeypatch):
    """Its log is a file without a name: a worker ended by its scheduler (Slurm's SIGTERM) or lost leaves nothing
    in the temporary folder, and what the process printed before it ended still reaches the batch."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    (tmp_path / "no-course").mkdir()  # no nbgrader_config.py: its scratch course cannot be made, it ends at once
    server = cluster.GradingServer(tmp_path / "no-course")
    try:
        with pytest.raises(GradingError, match=r"the grading process on .* ended \(exit 1\): .*no-course"):
            server.grade(tmp_path / "task.pickle", tmp_path / "out")
    finally:
        server.close()
    assert list(scratch.iterdir()) == []


def test_a_worker_starts_a_new_grading_process_when_the_course_changed_on_disk(tmp_path):
    """The process kept between tasks runs the code it loaded: a checkout updated under it must not grade with the
    old code while the fingerprint, read from disk, says the new."""
    course = small_course(tmp_path / "course", [])
    first = cluster.grading_server(course, "digest-a")
    try:
        assert cluster.grading_server(course, "digest-a") is first and first.alive()
        second = cluster.grading_server(course, "digest-b")
        assert second is not first and second.alive() and first.process.poll() is not None
        first.process.kill()
        assert cluster.grading_server(course, "digest-b") is second
        second.process.kill()
        second.process.wait(timeout=30)
        third = cluster.grading_server(course, "digest-b")
        assert third is not second and third.alive(), "one that ended is started again"
    finally:
        for server in list(cluster.GRADING_SERVERS.values()):
            server.close()
        cluster.GRADING_SERVERS.clear()
