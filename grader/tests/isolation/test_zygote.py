"""The batch's kernel zygote (grader.isolation.zygote): what reaches the launcher reaches the kernel it forked, and no
kernel outlives its launcher or the batch.  The sandbox itself is tested both ways in test_sandbox."""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader.grading.verdicts import ForkedChecker
from grader.isolation import sandbox
from grader.tests.isolation.test_sandbox import STUDENT_UID, launch_kernel, sandbox_course  # noqa: F401 - the fixture
from grader.isolation.zygote import Zygote
from translab.contract import REFERENCES_ENV
from translab.paths import REPO_ROOT

from conftest import still_running

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

WAITS = """\
import json, os, signal, sys, time
def interrupted(number, frame):
    print(json.dumps({"signal": number}), flush=True)
    sys.exit(0)
signal.signal(signal.SIGINT, interrupted)
print(json.dumps({"waiting": os.getpid()}), flush=True)
time.sleep(600)
"""


@pytest.fixture
def zygote(sandbox_course):  # noqa: F811 - pytest's fixture, imported above
    with Zygote(sandbox_course.work, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT) as started:
        yield started


def _start(sandbox_course, zygote: Path, code: str = WAITS) -> tuple[subprocess.Popen, int]:  # noqa: F811
    """The launcher of a kernel that waits, in the background, and the pid of that kernel once it waits."""
    root, work = sandbox_course
    command = [sys.executable, "-m", "grader.isolation.launcher", "--root", str(root), "--work", str(work),
               "--zygote", str(zygote), "--", sys.executable, "-c", code, "-f", str(work / "connection.json")]
    env = {**os.environ, **sandbox.student_env(STUDENT_UID, work / "status" / "7"), "PYTHONPATH": str(REPO_ROOT)}
    launcher = subprocess.Popen(command, cwd=root / "autograded" / "alice" / "transfer_learning", env=env,
                                start_new_session=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if '"waiting"' in sandbox.kernel_output_tail(work / "status" / "7"):
            record = sandbox.launch_records(work / "status" / "7")[-1]
            assert record["ok"] and record["launcher"] == launcher.pid, record
            return launcher, record["pid"]
        time.sleep(0.05)
    launcher.kill()
    raise AssertionError(f"the kernel never started: {sandbox.launch_records(work / 'status' / '7')}")


def process_gone(pid: int, within: float = 10) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not still_running({pid}):
            return True
        time.sleep(0.05)
    return False


def test_an_interrupt_sent_to_the_launcher_reaches_the_kernel(sandbox_course, zygote):  # noqa: F811
    launcher, kernel = _start(sandbox_course, zygote.path)
    assert kernel != launcher.pid, "the kernel is the zygote's child, not the launcher itself"
    os.killpg(launcher.pid, signal.SIGINT)  # what jupyter_client does to interrupt a kernel
    assert launcher.wait(30) == 0, "the launcher exits with its kernel's status"
    assert json.dumps({"signal": int(signal.SIGINT)}) in sandbox.kernel_output_tail(sandbox_course.work / "status" / "7")
    assert process_gone(kernel)


def test_a_kernel_s_collections_leave_alone_what_the_zygote_imported(sandbox_course, zygote):  # noqa: F811
    """Frozen before the fork (gc.freeze): a forked kernel's first full collection walked torch's objects and so
    copied their pages, 0.3 s of the batch's first kernel's start."""
    launcher, _ = _start(sandbox_course, zygote.path, "import gc, json\n"
                         "print(json.dumps({'frozen': gc.get_freeze_count()}), flush=True)\n" + WAITS)
    os.killpg(launcher.pid, signal.SIGKILL)
    launcher.wait(30)
    output = sandbox.kernel_output_tail(sandbox_course.work / "status" / "7")
    frozen = json.loads(next(line for line in output.splitlines() if '"frozen"' in line))["frozen"]
    assert frozen > 100_000, f"{frozen} objects frozen: the zygote's imports are left to the kernel's collections"


def test_a_killed_launcher_takes_its_kernel_with_it(sandbox_course, zygote):  # noqa: F811
    launcher, kernel = _start(sandbox_course, zygote.path)
    os.killpg(launcher.pid, signal.SIGKILL)  # nbgrader's shutdown_kernel(now=True), or its own death
    launcher.wait(30)
    assert process_gone(kernel), "the kernel outlived its launcher"


def open_files(pid: int) -> list[str]:
    """What ``pid`` holds open.  The zygote may still be importing ``LATER`` modules: a file it closes between the
    listing and the readlink is skipped, not an error (CI once met one)."""
    opened = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            opened.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:
            continue
    return opened


def test_the_kernels_end_with_the_zygote_and_it_holds_nothing_of_the_course(sandbox_course, zygote):  # noqa: F811
    launcher, kernel = _start(sandbox_course, zygote.path)
    opened = open_files(zygote.process.pid)
    assert not [path for path in opened if str(sandbox_course.root) in path or str(REPO_ROOT / "grader" / "references") in path], \
        opened
    zygote.close()
    assert process_gone(kernel), "a kernel outlived the batch's zygote"
    launcher.wait(30)


def test_a_kernel_dies_with_a_killed_zygote(sandbox_course, zygote):  # noqa: F811
    launcher, kernel = _start(sandbox_course, zygote.path)
    zygote.process.kill()  # what follows when the batch itself is killed (the zygote's PDEATHSIG)
    zygote.process.wait()
    assert process_gone(kernel), "a kernel outlived its killed zygote"
    launcher.wait(30)


def test_without_a_zygote_the_launcher_starts_the_kernel_itself(sandbox_course):  # noqa: F811
    report = launch_kernel(sandbox_course, "import json, os; print(json.dumps({'pid': os.getpid()}))")  # no --zygote: exec'd
    missing = sandbox_course.work / "zygote" / "socket"
    root, work = sandbox_course
    command = [sys.executable, "-m", "grader.isolation.launcher", "--root", str(root), "--work", str(work), "--zygote",
               str(missing), "--", sys.executable, "-c", "print('{}')", "-f", str(work / "connection.json")]
    env = {**os.environ, **sandbox.student_env(STUDENT_UID, work / "status" / "7"), "PYTHONPATH": str(REPO_ROOT)}
    done = subprocess.run(command, cwd=root / "autograded" / "alice" / "transfer_learning", env=env, timeout=120)
    sandbox.kill_leftovers(env)
    record = sandbox.launch_records(work / "status" / "7")[-1]
    assert done.returncode == 0 and record["ok"] and "launcher" not in record, record
    assert report["pid"] != record["pid"]


def test_a_zygote_that_cannot_start_says_why(tmp_path):
    work = tmp_path / ("w" * 120)  # too long a path for a Unix socket: bind fails before anything is imported
    work.mkdir()
    with pytest.raises(OSError, match="zygote.*did not start.*too long"):
        Zygote(work, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT)


ASKS_FOR_A_CHECKER = """\
import json, os, socket, sys
from pathlib import Path
from grader.isolation.zygote import fork_checker
os.setgroups([])
os.setgid({uid})
os.setuid({uid})
ours, theirs = socket.socketpair()
fork_checker(Path(sys.argv[1]), "/tmp", "checker", theirs, {{}})
theirs.close()
ours.settimeout(30)
ours.sendall(json.dumps({{"op": "ready"}}).encode() + b"\\n")
try:
    answer = ours.recv(100)
except ConnectionResetError:  # the zygote closed the checker's end unread
    answer = b""
print("refused" if answer == b"" else "forked", flush=True)
"""


def _ask_for_a_checker(zygote: Zygote, uid: int) -> str:
    for folder in {zygote.path.parent, zygote.path.parent.parent}:
        if folder.name in ("zygote", "checker"):
            os.chmod(folder, 0o711)
    os.chmod(zygote.path, 0o666)
    done = subprocess.run([sys.executable, "-c", ASKS_FOR_A_CHECKER.format(uid=uid), str(zygote.path)],
                          env={**os.environ, "PYTHONPATH": str(REPO_ROOT)}, cwd="/", capture_output=True, text=True,
                          timeout=120)
    return done.stdout.strip() or done.stderr[-2000:]


@pytest.mark.skipif(os.geteuid() != 0, reason="a student's uid is another uid only when the batch runs as root")
def test_a_student_uid_that_reached_the_zygote_would_get_no_checker(sandbox_course):  # noqa: F811
    """A checker is not sandboxed: only the batch's own uid may have one forked.  The socket is the batch's alone
    and hidden from every kernel; here it is opened up, to show the zygote's own refusal."""
    with Zygote(sandbox_course.work, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT, role="checker") as checkers:
        assert _ask_for_a_checker(checkers, STUDENT_UID) == "refused"
        assert "refused a launch: a checker asked for by uid" in checkers.log.read_text()


def test_the_kernels_zygote_forks_no_checker_and_holds_no_translab(sandbox_course, zygote):  # noqa: F811
    """The kernels' zygote never has the full library a checker needs, so it forks none, whoever asks."""
    assert _ask_for_a_checker(zygote, os.geteuid()) == "refused"
    assert "refused a launch: a request for a checker at the kernels' zygote" in zygote.log.read_text()
    package = f"{REPO_ROOT / 'translab'}/"  # the package's path: the checkout's folder may itself be named translab
    mapped = Path(f"/proc/{zygote.process.pid}/maps").read_text()
    assert package not in mapped and "/translab/checks/" not in mapped, "the zygote mapped a file of translab"


def _mapped(zygote: Zygote, library: str) -> bool:
    return _mapped_by(zygote.process.pid, library)


def _mapped_by(pid: int, library: str) -> bool:
    return library in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("hold", [False, True])
def test_a_held_zygote_imports_nothing_until_its_batch_releases_it(sandbox_course, hold):  # noqa: F811
    """The checkers' zygote waits while the batch's fork server and the kernels' zygote import (issue 53's "batch
    setup"); unheld, it has torch's library mapped within the same 2 s."""
    with Zygote(sandbox_course.work, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT, role="checker",
                hold=hold) as checkers:
        deadline = time.monotonic() + 2
        while time.monotonic() < deadline and not _mapped(checkers, "libtorch"):
            time.sleep(0.05)
        assert _mapped(checkers, "libtorch") is not hold
        checkers.release()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and not _mapped(checkers, "libtorch"):
            time.sleep(0.1)
        assert _mapped(checkers, "libtorch"), "the released zygote never imported torch"


def _links(pid: int) -> set[str]:
    """What the open descriptors of ``pid`` are: "pipe:[inode]", "socket:[inode]", paths."""
    links = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            links.add(os.readlink(fd))
    return links


@contextlib.contextmanager
def _pair(sandbox_course, folder: Path, env: dict | None = None):  # noqa: F811
    """A pair as a batch starts it, released, once its checkers' zygote forked a checker (in ``folder``): yields
    the pair and the checkers' zygote's pid."""
    env = env or {**os.environ, "PYTHONPATH": str(REPO_ROOT)}
    with Zygote(sandbox_course.work, env, REPO_ROOT, checkers=True) as kernels:
        kernels.checkers.release()
        _fork_a_checker(kernels.checkers, folder)
        parent = kernels.process.pid
        (checkers,) = [int(pid) for pid in Path(f"/proc/{parent}/task/{parent}/children").read_text().split()]
        yield kernels, checkers


def _fork_a_checker(zygote: Zygote, folder: Path) -> None:
    checker = ForkedChecker(zygote.path, folder)
    checker.ready()  # forked, and its socket bound: CheckerGone otherwise
    checker.stop()


def test_a_pair_forks_its_checkers_zygote_and_keeps_nothing_of_it(sandbox_course, tmp_path):  # noqa: F811
    """``Zygote(checkers=True)``, as a batch starts them: the kernels' zygote imports torch, then forks the checkers'
    zygote, which forks checkers; the kernels' zygote still forks none, and keeps none of the checkers' streams,
    socket or environment (a name only the checkers' environment has); closing the pair ends both."""
    references = str(tmp_path / "the-checkers-references")
    env = {**os.environ, "PYTHONPATH": str(REPO_ROOT), REFERENCES_ENV: references}
    with _pair(sandbox_course, tmp_path / "ipc", env) as (kernels, checkers):
        assert _ask_for_a_checker(kernels, os.geteuid()) == "refused"
        parent = kernels.process.pid
        assert _mapped_by(checkers, "libtorch")
        theirs = {link for link in _links(checkers) if link.startswith(("pipe:", "socket:"))}
        assert theirs and not theirs & _links(parent), "the kernels' zygote kept a stream or socket of the checkers'"
        assert references not in Path(f"/proc/{parent}/environ").read_text(errors="replace")
        assert kernels.checkers._env[REFERENCES_ENV] == references  # what its stdin carried: the checkers' own
        assert "refused" not in kernels.checkers.log.read_text()
    assert process_gone(checkers), "the checkers' zygote outlived its pair"


def test_a_pairs_checkers_outlive_its_kernels_zygote_but_not_the_batch(sandbox_course, tmp_path):  # noqa: F811
    """A kernels' zygote that dies (the launchers then start kernels themselves) leaves the checkers' zygote it forked
    serving; the batch's end (its stdin closed) still ends it."""
    with _pair(sandbox_course, tmp_path / "first") as (kernels, checkers):
        kernels.process.kill()
        kernels.process.wait()
        _fork_a_checker(kernels.checkers, tmp_path / "after")
        assert not process_gone(checkers, within=0.5)
    assert process_gone(checkers), "the checkers' zygote outlived its batch"


def test_a_pairs_checkers_zygote_that_does_not_end_is_killed(sandbox_course, tmp_path):  # noqa: F811
    """As the batch kills a zygote of its own that does not say it closed within 10 s, so it kills the pair's
    checkers' zygote, whose pid it told on its stdout."""
    with _pair(sandbox_course, tmp_path / "ipc") as (kernels, checkers):
        os.kill(checkers, signal.SIGSTOP)  # it will not read its stdin's end
    assert kernels.checkers.pid == checkers
    assert process_gone(checkers), "the stopped checkers' zygote outlived its batch"


HELD_MODULES = "import json, sys\nprint(json.dumps(sorted(sys.modules)))"


def test_every_module_the_zygote_imports_is_one_that_grading_uses(monkeypatch):
    """``STARTUP`` is CPU the kernels' zygote spends before the first notebook, ``LATER`` while the first notebooks
    run (on 2 cores, beside them): each of their modules must be one that a kernel of a graded run imports, each
    solution notebook run as grading runs it (its demos left out, ``grader.course.demos``, at the grading budget), or
    one the sandbox's snapshot takes (``grader.isolation.kernel_guard.GUARDED``; this plain kernel has no sandbox).
    torch._dynamo, which only the training demos' optimiser steps import, cost a single submission 1.1 CPU-seconds
    there for nothing."""
    import nbformat
    from nbclient import NotebookClient
    from grader.course.demos import left_out
    from grader.isolation.kernel_guard import GUARDED
    from grader.isolation.zygote import LATER, STARTUP
    from translab import variants
    from translab.contract import ASSIGNMENT, GRADING_ENV
    monkeypatch.setenv(GRADING_ENV, "autograde")
    monkeypatch.setenv(variants.VARIANT_ENV, variants.derive_code(b"translab-tests", "student"))
    folder = REPO_ROOT / "solutions" / ASSIGNMENT
    used: set[str] = set()
    for path in sorted(folder.glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        demos = left_out(notebook.cells)
        notebook.cells = [cell for index, cell in enumerate(notebook.cells) if index not in demos]
        notebook.cells.append(nbformat.v4.new_code_cell(HELD_MODULES))
        NotebookClient(notebook, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}}).execute()
        used |= set(json.loads("".join(output.get("text", "") for output in notebook.cells[-1].outputs)))
    unused = [name for name in STARTUP + LATER if name not in used | set(GUARDED)]
    assert unused == [], "preloaded, and imported by no graded notebook"
