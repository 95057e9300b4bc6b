"""The grading kernel's launcher (grader.isolation.sandbox), run on a stand-in "kernel": a short Python script.

No Jupyter here: the launcher is given ``python -c SCRIPT -f CONNECTION_FILE`` instead of ipykernel, and the
script reports what student code would see.  The course is a small fake one in a temporary folder.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import sys
from pathlib import Path
from typing import NamedTuple

import pytest

from grader.isolation import processes, sandbox
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

STUDENT_UID = sandbox.UID_BASE + sandbox.UID_BLOCK * sandbox.UID_BLOCKS + 7  # outside every batch's block
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="hiding paths and dropping privileges need root")


SCRATCH_OUTSIDE_THE_CHECKOUT = Path("/var/lib/translab-tests")
COURSE_PREFIX = "sbx-"  # short: the kernels' socket paths below it must fit in a Unix socket's 108 bytes  # root's, where the checkout is private to root


def traversable_scratch() -> Path:
    """A folder every user may traverse and that is not in /tmp, for fake courses: the repository's .pytest_cache
    (git-ignored by its own .gitignore) where others may reach the checkout, else a folder of root's under /var/lib
    (a clone in root's home or in a ``mktemp -d`` folder: only root may traverse it, and only root runs these tests
    there, as the sandbox's check is root's; and there too where the checkout's path is too long for a socket)."""
    scratch = REPO_ROOT / ".pytest_cache"
    short_enough = len(str(sandbox.longest_socket_prefix(scratch / (COURSE_PREFIX + "x" * 8) / "work"))) <= \
        sandbox.SOCKET_PATH_MAX - 8  # a checkout deep in the tree (CI's) leaves no room for the kernels' sockets
    if (sandbox.others_can_reach(REPO_ROOT) and short_enough) or os.geteuid() != 0:
        scratch.mkdir(exist_ok=True)
        if not (scratch / ".gitignore").exists():
            (scratch / ".gitignore").write_text("*\n")
        return scratch
    SCRATCH_OUTSIDE_THE_CHECKOUT.mkdir(mode=0o755, parents=True, exist_ok=True)
    os.chmod(SCRATCH_OUTSIDE_THE_CHECKOUT, 0o755)
    assert sandbox.others_can_reach(SCRATCH_OUTSIDE_THE_CHECKOUT), \
        f"{SCRATCH_OUTSIDE_THE_CHECKOUT} must be traversable by every user for the sandbox tests"
    return SCRATCH_OUTSIDE_THE_CHECKOUT


@pytest.fixture
def sandbox_course():
    """A fake course that others may traverse, like a real one: not in pytest's tmp_path (private to root,
    which would make every "cannot read" below pass for the wrong reason) nor anywhere in /tmp (the kernel
    gets a /tmp of its own, so the course would vanish for that reason instead)."""
    tmp_path = Path(tempfile.mkdtemp(prefix=COURSE_PREFIX, dir=traversable_scratch()))
    os.chmod(tmp_path, 0o755)
    try:
        yield build_sandbox_course(tmp_path)
    finally:
        shutil.rmtree(tmp_path)


class SandboxCourse(NamedTuple):
    root: Path  # the fake course
    work: Path  # the batch's scratch folder: the kernelspec, status folder 7, a connection file


def build_sandbox_course(tmp_path: Path) -> SandboxCourse:
    root = tmp_path / "course"
    for folder in ("solutions/transfer_learning", "submitted/alice/transfer_learning",
                   "submitted/bob/transfer_learning", "autograded/alice/transfer_learning",
                   "autograded/bob/transfer_learning"):
        (root / folder).mkdir(parents=True)
    (root / "gradebook.db").write_bytes(b"hidden tests")
    (root / "solutions" / "transfer_learning" / "answer.txt").write_text("the solution")
    (root / "submitted" / "bob" / "transfer_learning" / "bob.txt").write_text("bob's work")
    (root / "exchange" / "translab" / "inbound").mkdir(parents=True)  # nbgrader's exchange, as the local flow keeps it
    (root / "exchange" / "translab" / "inbound" / "bob+transfer_learning+2026").write_text("bob's submission")
    work = tmp_path / "work"
    work.mkdir()
    sandbox.grading_kernel(root, work)  # creates work/homes with the permissions the launcher expects
    sandbox.status_folder(work, 7)
    # as nbgrader writes it with the IPC transport (sandbox.student_args): sockets below the batch folder
    (work / "connection.json").write_text(json.dumps({"key": "secret", "transport": "ipc",
                                                      "ip": str(sandbox.socket_prefix(work, 7))}))
    os.chmod(work / "connection.json", 0o600)
    return SandboxCourse(root, work)


def launch_kernel(sandbox_course, script: str, limits: sandbox.Limits | None = None, timeout: float = 120,
            python: str = sys.executable, as_user: list[str] = (), package: Path = REPO_ROOT,
            zygote: Path | None = None, extra_env: dict | None = None, after=None) -> dict:
    """Run ``script`` as the sandboxed kernel of student alice (the launcher imported from ``package``; with
    ``zygote``, forked by that zygote and run in the forked process); it prints one JSON object.  ``after``
    is called once the launcher has exited, before the batch's cleanup (``kill_leftovers``)."""
    root, work = sandbox_course
    limits = limits or sandbox.Limits()
    command = [*as_user, python, "-m", "grader.isolation.launcher", "--root", str(root), "--work", str(work),
               "--limits", json.dumps(limits.__dict__), *(["--zygote", str(zygote)] if zygote else []),
               "--", python, "-c", script, "-f", str(work / "connection.json")]
    env = {**os.environ, **sandbox.student_env(STUDENT_UID, work / "status" / "7"), "PYTHONPATH": str(package),
           **(extra_env or {})}
    # the probes' own settings reach the kernel in its script: its environment is the sandbox's allow-list
    probes = {name: value for name, value in env.items() if name.startswith("PROBE_")}
    script = f"import os as _os\n_os.environ.update({probes!r})\n" + script
    command[-3] = script
    done = subprocess.run(command, cwd=root / "autograded" / "alice" / "transfer_learning", env=env,
                          capture_output=True, text=True, timeout=timeout)
    if after is not None:
        after()
    sandbox.kill_leftovers(env)
    records = sandbox.launch_records(work / "status" / "7")
    assert done.returncode == 0 and records and records[-1]["ok"], (done.stderr[-3000:], records)
    assert ("launcher" in records[-1]) == (zygote is not None), f"not started as asked (zygote: {zygote}): {records}"
    output = sandbox.kernel_output_tail(work / "status" / "7", limit=10 ** 6)
    assert done.stdout == "", "the kernel's output must go to its file in the status folder, not to nbgrader"
    return json.loads(output.strip().splitlines()[-1])


PROBE = r'''
import json, os, resource, socket, sys
from pathlib import Path
root = Path(os.environ["PROBE_ROOT"])
connection = json.loads(Path(sys.argv[sys.argv.index("-f") + 1]).read_text())
def attempt(action):
    try:
        result = action()
        return "ok" if result is None or type(result) is int else result  # write_text returns a count
    except (OSError, ValueError, ImportError) as error:
        return type(error).__name__
report = {
    "uid": os.getuid(),
    "limits": {name: resource.getrlimit(getattr(resource, name))[0] for name in
               ("RLIMIT_AS", "RLIMIT_CPU", "RLIMIT_FSIZE", "RLIMIT_NPROC", "RLIMIT_CORE")},
    "raise_limit": attempt(lambda: resource.setrlimit(resource.RLIMIT_AS, (resource.RLIM_INFINITY,) * 2)),
    "gradebook": attempt(lambda: (root / "gradebook.db").read_bytes().decode()),
    "write_gradebook": attempt(lambda: (root / "gradebook.db").open("ab").close()),
    "solutions": attempt(lambda: sorted(os.listdir(root / "solutions"))),
    "other_student": attempt(lambda: sorted(os.listdir(root / "autograded" / "bob"))),
    "exchange": attempt(lambda: sorted(os.listdir(root / "exchange"))),
    "write_course": attempt(lambda: (root / "pwned").write_text("x")),
    "write_root_home": attempt(lambda: Path("/root/pwned_by_test_sandbox").write_text("x")),
    "write_tmp": attempt(lambda: Path("/tmp/pwned_by_test_sandbox").write_text("x")),
    "write_home": attempt(lambda: (Path.home() / "notes.txt").write_text("x")),
    "write_own_folder": attempt(lambda: Path("own_output.txt").write_text("x")),
    "write_outside_course": attempt(lambda: Path(os.environ["PROBE_OUTSIDE"]).write_text("pwned")),
    "connection_file": connection["key"],
    "bind_ipc_socket": attempt(lambda: socket.socket(socket.AF_UNIX).bind(connection["ip"] + "-1")),
    "connect_loopback": attempt(lambda: socket.create_connection(("127.0.0.1", int(os.environ["PROBE_PORT"])),
                                                                 timeout=10).close()),
    "import_torch": attempt(lambda: __import__("torch").ones(2).sum().item()),
    "processes": sorted(int(pid) for pid in os.listdir("/proc") if pid.isdigit()),
    # what this process holds open besides its standard streams: nothing of the launcher's or a zygote's
    "open": {fd: link for fd in os.listdir("/proc/self/fd") if int(fd) > 2 for link in [attempt(
        lambda: os.readlink(f"/proc/self/fd/{fd}"))] if link != "FileNotFoundError"},  # listdir's own is gone
}
print(json.dumps(report))
'''


@pytest.fixture(params=["exec", "zygote"])
def launch(request, sandbox_course):
    """``launch_kernel`` on the fake course, the kernel either exec'd by the launcher or forked by the batch's zygote
    (``grader.isolation.zygote``): both must hold it in the same sandbox."""
    if request.param == "exec":
        yield lambda script, limits=None, env=None, after=None: launch_kernel(sandbox_course, script, limits, extra_env=env, after=after)
        return
    from grader.isolation.zygote import Zygote
    with Zygote(sandbox_course.work, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT) as zygote:
        yield lambda script, limits=None, env=None, after=None: launch_kernel(sandbox_course, script, limits, zygote=zygote.path,
                                                                        extra_env=env, after=after)


@pytest.fixture
def probe_env(sandbox_course, monkeypatch):
    """The fake course, and a TCP server on 127.0.0.1 (the instructor's machine) for the kernel to try."""
    monkeypatch.setenv("PROBE_ROOT", str(sandbox_course.root))
    monkeypatch.setenv("PROBE_OUTSIDE", str(sandbox_course.root.parent / "instructor_notes.txt"))
    with socket.create_server(("127.0.0.1", 0)) as server:
        server.listen(8)
        monkeypatch.setenv("PROBE_PORT", str(server.getsockname()[1]))
        socket.create_connection(server.getsockname(), timeout=10).close()  # reachable from outside the sandbox
        yield


def test_limits_are_set_and_cannot_be_raised(launch, probe_env):
    limits = sandbox.Limits(address_space=5 * sandbox.GB, cpu_seconds=300, file_size=2 ** 20, processes=100)
    report = launch(PROBE, limits)
    assert report["limits"]["RLIMIT_AS"] == 5 * sandbox.GB
    assert report["limits"]["RLIMIT_CPU"] == 300
    assert report["limits"]["RLIMIT_FSIZE"] == 2 ** 20
    assert report["limits"]["RLIMIT_CORE"] == 0
    assert report["limits"]["RLIMIT_NPROC"] >= 100
    assert report["raise_limit"] == "ValueError", "student code must not lift its own limits"
    assert report["import_torch"] == 2.0, "torch must work within the default limits"
    assert report["connection_file"] == "secret"
    assert report["bind_ipc_socket"] == "ok", "the kernel must be able to bind its sockets where nbgrader looks"
    assert not report["open"], f"the kernel inherited descriptors: {report['open']}"


@ROOT_ONLY
def test_as_root_the_kernel_cannot_read_or_write_what_it_must_not(sandbox_course, launch, probe_env):
    report = launch(PROBE)
    assert report["uid"] == STUDENT_UID
    assert report["gradebook"] == "FileNotFoundError", "the gradebook must be out of the kernel's view"
    assert (sandbox_course.root / "solutions" / "transfer_learning" / "answer.txt").stat().st_mode & 0o004, \
        "the test is only meaningful if the solutions are world-readable on disk"
    assert report["solutions"] == "FileNotFoundError", report["solutions"]  # off the kernel's allow-list: not there
    assert report["other_student"] in ("FileNotFoundError", "PermissionError", []), report["other_student"]
    assert report["exchange"] == "FileNotFoundError", report["exchange"]  # off the kernel's allow-list: not there
    for key in ("write_gradebook", "write_course", "write_root_home"):  # EROFS is an OSError
        assert report[key] in ("PermissionError", "OSError"), (key, report[key])
    assert report["write_home"] == "ok", "the kernel needs a writable HOME of its own"
    assert report["connect_loopback"] == "OSError", f"no network for student code: {report['connect_loopback']}"
    root, _ = sandbox_course
    assert (root / "gradebook.db").read_bytes() == b"hidden tests"
    assert not (root / "pwned").exists() and not Path("/root/pwned_by_test_sandbox").exists()
    assert report["write_tmp"] == "ok" and not Path("/tmp/pwned_by_test_sandbox").exists(), \
        "the kernel's /tmp must be its own"


# A classmate graded beside this kernel (JOBS=2, a worker's threads) gets its autograded/ folder after this kernel
# started.  The kernel says when it runs; the test then writes that folder, and a file in the kernel's socket folder
# (shared with the test, unlike its /tmp) to say so; the kernel then looks.
LATE_CLASSMATE = r"""
import json, os, sys, time
from pathlib import Path
root = Path(os.environ["PROBE_ROOT"])
connection = json.loads(Path(sys.argv[sys.argv.index("-f") + 1]).read_text())
told = Path(connection["ip"]).parent / "carol-is-there"
print("launched", flush=True)
deadline = time.monotonic() + 60
while not told.exists() and time.monotonic() < deadline:
    time.sleep(0.02)
def attempt(action):
    try:
        return action()
    except OSError as error:
        return type(error).__name__
print(json.dumps({"told": told.exists(), "listed": attempt(lambda: sorted(os.listdir(root / "autograded"))),
                  "carol": attempt(lambda: (root / "autograded" / "carol" / "transfer_learning" / "carol.txt").read_text()),
                  "own": attempt(lambda: sorted(os.listdir(".")))}))
"""


def test_a_classmate_graded_beside_the_kernel_stays_out_of_its_sight(sandbox_course, launch, probe_env):
    """autograded/ is covered whole, the kernel's own folder kept: a folder made there after the kernel started (a
    classmate graded at the same time) is not in its sight either, as the kernel's launch could not name it."""
    root, work = sandbox_course
    late = root / "autograded" / "carol" / "transfer_learning"
    (root / "autograded" / "alice" / "transfer_learning" / "alice.txt").write_text("alice's own")

    def write_when_launched():
        deadline = time.monotonic() + 60
        while "launched" not in sandbox.kernel_output_tail(work / "status" / "7") and time.monotonic() < deadline:
            time.sleep(0.02)
        late.mkdir(parents=True)  # as nbgrader makes it: the umask's 0755, a file 0644
        (late / "carol.txt").write_text("carol's answers")
        (sandbox.socket_prefix(work, 7).parent / "carol-is-there").touch()

    writer = threading.Thread(target=write_when_launched)
    writer.start()
    try:
        report = launch(LATE_CLASSMATE)
    finally:
        writer.join()
        shutil.rmtree(root / "autograded" / "carol", ignore_errors=True)
    assert report["told"], "the test did not reach the kernel"
    if sandbox.launch_records(work / "status" / "7")[-1]["mode"] == "limits only":
        pytest.skip("this machine gives the kernel no mount namespace: it sees the course as the grader does")
    assert report["carol"] in ("FileNotFoundError", "PermissionError"), f"the kernel read a classmate's folder: {report}"
    assert report["listed"] in (["alice"], "PermissionError"), f"the kernel saw its classmates: {report}"
    assert report["own"] == ["alice.txt"], report


def test_memory_bomb_gets_memory_error(sandbox_course):
    script = ("import json\ntry:\n    hog = [bytearray(2**30) for _ in range(40)]\n    result = 'allocated'\n"
              "except MemoryError:\n    result = 'MemoryError'\nprint(json.dumps({'result': result}))\n")
    assert launch_kernel(sandbox_course, script, sandbox.Limits(address_space=3 * sandbox.GB))["result"] == "MemoryError"


@ROOT_ONLY
def test_fork_storm_is_bounded_and_cleaned_up(launch):
    script = ("import json, os, time\nchildren = 0\ntry:\n    for _ in range(5000):\n"
              "        if os.fork() == 0:\n            os.close(1)\n            os.close(2)\n            time.sleep(600)\n            os._exit(0)\n        children += 1\n"
              "except OSError as error:\n    result = type(error).__name__\n"
              "print(json.dumps({'children': children, 'result': result}))\n")
    report = launch(script, sandbox.Limits(processes=64))
    assert report["result"] == "BlockingIOError" and report["children"] <= 64
    for waited in range(50):  # killed processes take a moment to go (the batch waits up to LEFTOVERS_GRACE)
        left = [p for p in sandbox.processes_of(STUDENT_UID) if not p["State"].startswith("Z")]
        if not left:
            break
        time.sleep(0.02)
    assert not left, f"{len(left)} processes of the student's uid survived kill_leftovers"


def test_the_kernel_joins_the_students_cgroup_and_is_killed_with_it(sandbox_course, launch):
    """A busy process in a session of its own, left by the kernel: in the student's group, gone with its kill
    (``kill_leftovers``, which ``launch_kernel`` calls as the batch does)."""
    from grader.isolation import cgroups
    with cgroups.Cgroups(memory=sandbox.Limits.memory, tasks=sandbox.Limits.tasks) as groups:
        if groups.problem:
            pytest.skip(groups.problem)
        env = groups.student(7)
        script = ("import json, os\nif os.fork() == 0:\n    os.setsid()\n    os.close(1)\n    os.close(2)\n"
                  "    while True:\n        pass\n"
                  "print(json.dumps({'cgroup': open('/proc/self/cgroup').read(), 'pid': os.getpid(),"
                  " 'env': sorted(k for k in os.environ if 'CGROUP' in k)}))\n")
        report = launch(script, env=env)
        records = sandbox.launch_records(sandbox_course.work / "status" / "7")
        assert records[-1]["cgroup"] == "joined", records[-1]
        v2 = any(hierarchy.version == 2 for hierarchy, _ in groups.batches)
        used = [line for line in report["cgroup"].splitlines()
                if {"cpu", "memory", "pids"} & set(line.split(":")[1].split(",")) or (v2 and line.startswith("0::"))]
        assert used and all(line.endswith("/student-7/kernel") for line in used), report["cgroup"]
        assert report["env"] == [], "the batch's group folders are not the kernel's business"
        assert cgroups.processes(cgroups.folders_of(env)) == set(), "the detached busy process outlived the kill"


@ROOT_ONLY
def test_as_root_the_kernel_sees_only_its_own_processes(launch):
    """Its /proc shows its uid's processes: not the launcher, the zygote, the instructor's commands or classmates."""
    script = ("import json, os\nuids = set()\nfor pid in filter(str.isdigit, os.listdir('/proc')):\n    try:\n"
              "        uids.add(os.stat(f'/proc/{pid}').st_uid)\n    except OSError:\n        pass\n"
              "print(json.dumps({'uids': sorted(uids), 'init': os.path.exists('/proc/1'), 'me': os.getuid(),"
              " 'cpuinfo': os.path.exists('/proc/cpuinfo')}))\n")
    report = launch(script)
    if tuple(int(part) for part in re.findall(r"\d+", os.uname().release)[:2]) < (5, 8):
        pytest.skip("Linux before 5.8 shares procfs options machine-wide: the kernel keeps the machine's /proc")
    assert report["uids"] == [report["me"]] and not report["init"] and report["cpuinfo"], report


ORPHAN = r'''
import json, os, signal, time
if os.fork() == 0:  # a process left running in a session of its own, as a student hides work from the grader
    os.setsid()
    if os.fork() == 0:
        os.close(1)
        os.close(2)
        time.sleep(600)
    os._exit(0)
os.wait()
time.sleep(0.2)
visible = sorted(int(p) for p in os.listdir("/proc") if p.isdigit())
attempts = {}
for pid in (os.getppid(), 1):  # its init
    try:
        os.kill(pid, signal.SIGTERM)
        attempts[pid] = "sent"
    except OSError as error:
        attempts[pid] = type(error).__name__
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "visible": visible, "signal_init": attempts,
                  "parent_env": os.environ.get("JPY_PARENT_PID")}))
'''


@ROOT_ONLY
def test_the_kernel_is_pid_2_of_its_own_namespace_and_takes_what_it_started_with_it(sandbox_course, launch):
    """Its init (PID 1) in front of it; it sees only its namespace's processes, cannot signal the init, and a
    process it left in a session of its own dies with it, before the batch's cleanup runs."""
    survivors = []
    report = launch(ORPHAN, after=lambda: survivors.extend(
        p for p in sandbox.processes_of(STUDENT_UID) if not p["State"].startswith("Z")))
    record = sandbox.launch_records(sandbox_course.work / "status" / "7")[-1]
    assert record["pid_namespace"] is True and record["pid"] != report["pid"] and "keeper" in record, record
    assert report["pid"] == 2 and report["ppid"] == 1, report
    # the kernel, and its orphan where /proc shows it (not dumpable, as the kernel is, it may not): init is hidden
    assert report["visible"] in ([2], [2, 4]), f"the kernel and its orphan only (init is root's, hidden): {report}"
    assert report["signal_init"] == {"1": "PermissionError"}, report
    assert report["parent_env"] is None
    assert survivors == [], f"{len(survivors)} processes outlived the kernel's namespace: {survivors}"


NOBODY = 65534
# The launcher needs only the standard library: as an ordinary user it runs on the system's Python, since
# this machine's interpreter may live in root's home, out of an ordinary user's reach.
SYSTEM_PYTHON = shutil.which("python3", path="/usr/bin:/bin")


@pytest.fixture
def repository_in_home(monkeypatch):
    """The usual layout of an instructor who is not root: the repository cloned into their HOME (so the
    package, the venv and the course are inside one another), here under /tmp, which the kernel also gets a
    private copy of.  The package is copied there so that the launcher runs from inside it."""
    top = Path(tempfile.mkdtemp(prefix="translab-test-home-", dir="/tmp"))
    os.chmod(top, 0o755)
    try:
        package = top / "home" / "translab"
        for name in ("translab", "grader"):
            shutil.copytree(REPO_ROOT / name, package / name,
                            ignore=shutil.ignore_patterns("__pycache__", "tests", "references"))
        root, work = build_sandbox_course(package)
        monkeypatch.setenv("HOME", str(top / "home"))
        monkeypatch.setenv("PROBE_ROOT", str(root))
        monkeypatch.setenv("PROBE_OUTSIDE", str(top / "home" / "instructor_notes.txt"))
        yield (root, work), package, top / "home"
    finally:
        shutil.rmtree(top)


@pytest.fixture(params=["course_beside_the_repository", "repository_in_home_under_tmp"])
def ordinary_layout(request, sandbox_course, probe_env):
    """(the fake course, package, the instructor's folder outside the course) in each layout."""
    if request.param == "course_beside_the_repository":
        return sandbox_course, REPO_ROOT, sandbox_course.root.parent
    return request.getfixturevalue("repository_in_home")


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("setpriv") or not SYSTEM_PYTHON,
                    reason="needs root (to become an ordinary user), setpriv and /usr/bin/python3")
def test_as_an_ordinary_user_the_kernel_sees_a_read_only_course_without_network(ordinary_layout):
    """The instructor is an ordinary user (uid 65534 here) who owns the course: nothing stops student code
    but the user namespace, in which everything is read-only except the kernel's folder and its HOME."""
    sandbox_course, package, mine = ordinary_layout
    root, work = sandbox_course
    outside = mine / "instructor_notes.txt"
    outside.write_text("mine")
    if not sandbox.others_can_reach(mine) or not os.access(SYSTEM_PYTHON, os.X_OK):
        pytest.skip(f"{mine} is not reachable by an ordinary user here")
    if not sandbox.others_can_reach(package):  # a checkout private to root: the other layout copies it out
        pytest.skip(f"the checkout {package} is private to root, so an ordinary user cannot run its grader")
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run([*as_nobody, SYSTEM_PYTHON, "-c", "import ctypes, sys; "
                            f"sys.exit(ctypes.CDLL(None).unshare({processes.CLONE_NEWUSER}) != 0)"])
    if probe.returncode != 0:
        pytest.skip("this machine refuses unprivileged user namespaces (the launcher then applies the limits only)")
    for path in [mine, *mine.rglob("*")]:
        os.chown(path, NOBODY, NOBODY, follow_symlinks=False)
    report = launch_kernel(sandbox_course, PROBE, python=SYSTEM_PYTHON, as_user=as_nobody, package=package)
    if report["uid"] != NOBODY:
        pytest.fail(f"the kernel ran as {report['uid']}")
    assert report["gradebook"] == "FileNotFoundError", "the gradebook must be out of the kernel's view"
    assert report["solutions"] == "FileNotFoundError", report["solutions"]  # off the kernel's allow-list: not there
    assert report["other_student"] in ("FileNotFoundError", "PermissionError", []), report["other_student"]
    assert report["exchange"] == "FileNotFoundError", report["exchange"]  # off the kernel's allow-list: not there
    for key in ("write_gradebook", "write_course"):  # EROFS: the instructor's own files, or (a course under /tmp,
        # whose folders reappear in the kernel's private /tmp) a write into that private tmpfs, never on disk (below)
        assert report[key] in ("PermissionError", "OSError") or Path("/tmp") in root.parents, (key, report[key])
    # the instructor's file outside the course: the write fails, or (a HOME under /tmp) lands in the kernel's
    # private /tmp, never on disk (checked below)
    assert report["write_outside_course"] in ("PermissionError", "OSError") or Path("/tmp") in mine.parents, \
        report["write_outside_course"]
    assert report["write_own_folder"] in ("PermissionError", "OSError"), "the kernel's folder is read-only (as root)"
    assert report["write_home"] == "ok" and report["write_tmp"] == "ok"
    assert report["bind_ipc_socket"] == "ok"
    assert report["connect_loopback"] == "OSError", f"no network for student code: {report['connect_loopback']}"
    assert (root / "gradebook.db").read_bytes() == b"hidden tests" and outside.read_text() == "mine"
    assert not (root / "pwned").exists() and not Path("/tmp/pwned_by_test_sandbox").exists()
    assert not (root / "autograded" / "alice" / "transfer_learning" / "own_output.txt").exists()
    record = sandbox.launch_records(work / "status" / "7")[-1]
    assert record["pid_namespace"] and report["processes"] == [2], (record, report["processes"])  # init: hidden


LEAVE_BEHIND = r'''
import ctypes, json, os
from pathlib import Path
libc = ctypes.CDLL(None, use_errno=True)
IPC_CREAT = 0o1000
def attempt(action):
    try:
        return action()
    except OSError as error:
        return type(error).__name__ + ":" + (os.strerror(error.errno) if error.errno else "")
def fill(folder):
    """Write 1 MB chunks into folder until the write fails or 400 MB are written."""
    written = 0
    try:
        with open(Path(folder) / "fill.bin", "wb") as handle:
            while written < 400:
                handle.write(b"x" * 2 ** 20)
                handle.flush()
                written += 1
    except OSError as error:
        return {"written_mb": written, "error": type(error).__name__}
    return {"written_mb": written, "error": None}
segment = libc.shmget(0x7a11ab, 2 ** 20, IPC_CREAT | 0o666)
print(json.dumps({
    "shm": segment,
    "run_lock": attempt(lambda: Path("/run/lock/translab-student").write_text("x")),
    "var_tmp": attempt(lambda: Path("/var/tmp/translab-student").write_text("x") and "ok"),
    "home": fill(Path.home()),
    "tmp": fill("/tmp"),
}))
'''


def test_the_kernel_leaves_nothing_behind_and_cannot_fill_the_disk(sandbox_course, launch):
    """SysV shared memory dies with the kernel's IPC namespace, lock folders are read-only, HOME and /tmp are
    tmpfs of a bounded size (PRIVATE_SIZE), and nothing of the student's uid remains afterwards."""
    report = launch(LEAVE_BEHIND)
    assert report["shm"] >= 0, "the kernel may use shared memory inside its own IPC namespace"
    # /run is covered (not there at all) or, where a machine's is kept, read-only
    assert report["run_lock"].startswith(("OSError", "PermissionError", "FileNotFoundError")), report["run_lock"]
    assert report["var_tmp"] == "ok" and not Path("/var/tmp/translab-student").exists()
    for place in ("home", "tmp"):
        assert report[place]["error"] == "OSError" and report[place]["written_mb"] <= 256, (place, report[place])
    segments = Path("/proc/sysvipc/shm").read_text()
    assert f"{0x7a11ab:d}" not in segments.split(), "a SysV segment outlived the kernel"
    assert not Path("/run/lock/translab-student").exists()
    if os.geteuid() == 0:
        assert sandbox.leftovers(STUDENT_UID, sandbox.world_writable_folders(skip=sandbox_course.work)) == []


@ROOT_ONLY
def test_two_batches_hold_different_uid_blocks():
    with sandbox.UidBlock() as first, sandbox.UidBlock() as second:
        assert first.base != second.base
        assert {first.uid(0), first.uid(sandbox.UID_BLOCK - 1)}.isdisjoint({second.uid(0), second.uid(sandbox.UID_BLOCK - 1)})
        with pytest.raises(ValueError):
            first.uid(sandbox.UID_BLOCK)
    with sandbox.UidBlock() as again:  # released blocks are reused
        assert again.base == first.base


def test_a_failed_start_is_reported_in_the_status_folder_not_in_the_output(sandbox_course):
    """What the batch reads to tell the machine's failures from the students': the launcher's own records."""
    root, work = sandbox_course
    status = work / "status" / "7"
    command = [sys.executable, "-m", "grader.isolation.launcher", "--root", str(root), "--work", str(work), "--",
               "/nonexistent/python", "-f", str(work / "connection.json")]
    done = subprocess.run(command, cwd=root / "autograded" / "alice" / "transfer_learning", capture_output=True,
                          text=True, env={**os.environ, **sandbox.student_env(STUDENT_UID, status)}, timeout=60)
    assert done.returncode == 1
    records = sandbox.launch_records(status)
    assert records[-1]["ok"] is False and records[-1]["stage"] == "exec" and "FileNotFoundError" in records[-1]["error"]


@ROOT_ONLY
def test_leftovers_finds_what_a_uid_left_in_a_world_writable_folder(tmp_path):
    shared = Path(tempfile.mkdtemp(prefix="translab-test-shared-", dir="/tmp"))
    try:
        os.chmod(shared, 0o1777)
        (shared / "left.txt").write_text("x")
        os.chown(shared / "left.txt", STUDENT_UID, STUDENT_UID)
        folders = sandbox.world_writable_folders()
        assert shared in folders
        assert sandbox.leftovers(STUDENT_UID, folders) == [str(shared / "left.txt")]
    finally:
        shutil.rmtree(shared)


FONTS = r'''
import json, os
from pathlib import Path
folder = Path(os.environ["MPLCONFIGDIR"])
copy = folder / "fontlist-v0.0.0.json"
(folder / "written").write_text("its own to write")
print(json.dumps({"text": copy.read_text(), "owner": copy.stat().st_uid, "uid": os.getuid(),
                  "in_home": folder.parent == Path(os.environ["HOME"])}))
'''


def test_the_kernel_starts_with_a_copy_of_the_batchs_font_list(sandbox_course, launch):
    """matplotlib's list of the machine's fonts, which the batch's zygote keeps (``zygote.seed_font_lists``): each
    kernel gets a copy of its own in its private HOME, so that its first plot does not list the fonts again."""
    fonts = sandbox_course.work / "zygote" / "matplotlib"
    fonts.mkdir(parents=True, exist_ok=True)
    (fonts / "fontlist-v0.0.0.json").write_text('{"_version": "test"}')
    report = launch(FONTS)
    assert report["text"] == '{"_version": "test"}' and report["owner"] == report["uid"] and report["in_home"], report


def test_a_kernel_gets_the_allow_listed_part_of_the_batchs_environment():
    """Issue 47: paths, locale and thread counts pass; a hub's token, a cloud key, the course secret and the
    launcher's own settings never reach the kernel."""
    from grader.isolation.kernel_environment import kernel_environment, launcher_environment
    from grader.course.variants import SECRET_ENV
    batch = {"PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1", "JUPYTERHUB_API_TOKEN": "t",
             "AWS_SECRET_ACCESS_KEY": "k", SECRET_ENV: "s", "TRANSLAB_SANDBOX_UID": "200000", "HOME": "/root"}
    assert kernel_environment(batch) == {"PATH": "/usr/bin", "LC_ALL": "C.UTF-8", "OMP_NUM_THREADS": "1"}
    assert launcher_environment(batch) == {**kernel_environment(batch), "TRANSLAB_SANDBOX_UID": "200000"}


def test_a_batch_whose_kernels_would_import_another_translab_refuses_to_grade(tmp_path, monkeypatch):
    """A course graded with a venv whose editable install points at another checkout: the kernels would import
    that checkout's translab, which the launcher hides, and every answer would score 0 with nothing flagged (the
    bench's course copy did, unnoticed). The batch refuses first and names the folder."""
    from grader.isolation.kernel_environment import kernel_environment
    from grader.isolation.kernel_stages import unstaged_library
    assert unstaged_library(REPO_ROOT, kernel_environment(os.environ)) is None  # the checkout grading itself
    other = tmp_path / "other" / "translab"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(other.parent))
    problem = unstaged_library(REPO_ROOT, kernel_environment(os.environ))
    assert problem and f"translab from {other}" in problem and "score 0" in problem, problem
    with pytest.raises(OSError, match="score 0"):
        sandbox.grading_kernel(REPO_ROOT, tmp_path / "work")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "nothing-here"))
    monkeypatch.setattr(sys, "executable", str(tmp_path / "python"))  # an interpreter that has no translab
    shutil.copy(os.path.realpath(sys.base_prefix + "/bin/python3"), tmp_path / "python")
    problem = unstaged_library(REPO_ROOT, kernel_environment(os.environ))
    assert problem and "no translab at all" in problem, problem


def test_the_refusal_says_what_fixes_it_for_a_course_folder_that_is_no_package(tmp_path, monkeypatch):
    """A course of its own (``make demo-class``'s, a copy for the bench) is a folder of notebooks: ``pip install -e``
    of it installs nothing. The refusal names this grader's checkout, ``make setup`` there and the command that
    grades the course from it, and the other checkout's grader that the interpreter has installed."""
    from grader.isolation.kernel_environment import kernel_environment
    from grader.isolation.kernel_stages import unstaged_library
    course, other = tmp_path / "course", tmp_path / "other"
    course.mkdir()
    (other / "translab").mkdir(parents=True)
    (other / "translab" / "__init__.py").write_text("")
    (other / "grader").mkdir()
    monkeypatch.setenv("PYTHONPATH", str(other))
    problem = unstaged_library(course, kernel_environment(os.environ))
    assert problem and "pip install" not in problem, problem
    assert f"Run `make setup` in {REPO_ROOT}, the checkout of this grader" in problem, problem
    assert f"`.venv/bin/python -m grader --root {course} autograde` in it" in problem, problem
    assert f"--root {course} autograde` in {other}" in problem, problem
    problem = unstaged_library(REPO_ROOT, kernel_environment(os.environ))  # the course is the checkout: its make
    assert f"`make setup` in {REPO_ROOT}" in problem and "then `make autograde` there" in problem, problem


def test_a_worker_s_copy_of_the_course_is_refused_naming_the_course_the_instructor_gave(tmp_path, monkeypatch):
    """Issue 81: on a cluster the batch grades a worker's temporary copy of the course; the refusal names the course
    it was copied from, in the command that fixes it, never the worker's temporary folder."""
    from grader.grading.result_folders import scratch_course
    from grader.isolation.kernel_environment import kernel_environment
    from grader.isolation.kernel_stages import unstaged_library
    course = tmp_path / "course"
    course.mkdir()
    shutil.copy(REPO_ROOT / "nbgrader_config.py", course)
    (tmp_path / "translab-worker-x1").mkdir()
    copy = scratch_course(course, tmp_path / "translab-worker-x1" / "course")
    other = tmp_path / "other" / "translab"
    other.mkdir(parents=True)
    (other / "__init__.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(other.parent))
    problem = unstaged_library(copy, kernel_environment(os.environ))
    assert problem and f"--root {course.resolve()} autograde" in problem, problem
    assert "translab-worker-x1" not in problem, problem


def test_the_launcher_never_imports_a_grader_package_submitted_beside_the_notebook(tmp_path, monkeypatch):
    """The kernelspec's launcher starts as root in the student's folder, before any isolation: a submitted
    grader/isolation/launcher.py (the corpus's ``shadows_the_launcher``) must not be what it runs, even where the
    instructor's PYTHONPATH holds an empty entry (the working folder, whichever process reads it)."""
    from grader.grading.nbgrader_process import nbgrader_env
    from grader.testing import corpus
    submission = tmp_path / "submission"
    for name in corpus.SHADOWED:
        (submission / name).parent.mkdir(parents=True, exist_ok=True)
        (submission / name).write_text("open('shadow-ran', 'w').write(__name__)\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep + os.environ.get("PYTHONPATH", ""))
    env = nbgrader_env()
    assert "" not in env["PYTHONPATH"].split(os.pathsep), env["PYTHONPATH"]
    work = Path(tempfile.mkdtemp(prefix="translab-shadow-"))  # others may traverse /tmp, as the kernels' HOMEs need
    try:
        sandbox.grading_kernel(REPO_ROOT, work)
        spec = json.loads(next(work.glob("jupyter/kernels/*/kernel.json")).read_text())
        launcher = spec["argv"][:spec["argv"].index("--root")]
        done = subprocess.run([*launcher, "--help"], cwd=submission, env=env, capture_output=True, text=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    assert not (submission / "shadow-ran").exists(), "the submission's grader package ran in the launcher"
    assert done.returncode == 0 and "python -m grader.isolation.launcher" in done.stdout, done.stderr[-500:]
    # the test reaches what it means to: with the instructor's PYTHONPATH as it was, -P alone lets the package in
    raw = subprocess.run([*launcher, "--help"], cwd=submission, env={**env, "PYTHONPATH": os.environ["PYTHONPATH"]},
                         capture_output=True, text=True)
    assert (submission / "shadow-ran").exists(), raw.stderr[-500:]
