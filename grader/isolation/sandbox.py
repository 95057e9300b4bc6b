"""The kernel that runs student code during autograding, with limits set by the project.

A student's notebook runs arbitrary Python as the instructor.  ``grader.grading.batch`` therefore starts every
grading kernel through a launcher (``grader.isolation.launcher``: a kernelspec ``translab-sandbox`` written into the batch's
scratch folder, found through ``JUPYTER_PATH``, selected with ``--Execute.kernel_name``), which, before it becomes the
ipykernel process (``exec``, so signals and kills from nbgrader reach the kernel itself; or, in a batch, in a
process forked by the batch's ``grader.isolation.zygote``, whose launcher stays and passes signals and kills on):

* joins the student's cgroup (``grader.isolation.cgroups``: equal CPU shares, memory and task limits, one kill for
  everything the student started), where the machine has them;
* sets resource limits, so a memory bomb or a runaway loop costs that student the cell, not the instructor
  the machine: address space (``RLIMIT_AS``), CPU seconds (``RLIMIT_CPU``, a backstop behind nbgrader's
  per-cell timeout), size of any file written (``RLIMIT_FSIZE``), processes/threads (``RLIMIT_NPROC``), no core
  dumps;
* enters namespaces of its own: mount (nothing it mounts is seen outside), IPC (SysV shared memory,
  semaphores and queues die with the kernel) and, with nbgrader's IPC transport, network (no interface but a
  loopback that is down: neither the internet nor the instructor's services on 127.0.0.1; nbgrader reaches
  the kernel through Unix sockets in a folder of the batch);
* in there, makes every mount read-only (no world-writable lock folder or spool to leave files in), covers
  what the student must not read (the gradebook with its hidden tests, ``solutions/``, ``submitted/``, other
  students' results, feedback, ``.git``; root's home, and an ordinary user's home but for the interpreter and
  the course), and gives the kernel tmpfs of ``PRIVATE_SIZE`` each for HOME, /tmp, /var/tmp and /dev/shm:
  writable, bounded, and gone with the kernel;
* as root (a grading server, a container), then drops to an unprivileged uid of the batch's block
  (``UidBlock``: one uid per student, never shared with another batch on the machine), because root ignores
  ``RLIMIT_NPROC`` and file permissions; ``kill_leftovers`` ends everything that uid started and ``leftovers``
  checks that nothing of it remains;
* as an ordinary user, the same happens in a user namespace (Debian, Ubuntu and Fedora allow them by default;
  this is what ``bubblewrap`` builds on, done here with no package to install); the kernel keeps the
  instructor's uid, so ``RLIMIT_NPROC`` counts the instructor's own processes too and leftovers cannot be told
  apart by uid.  Where user namespaces are refused, only the limits apply (the launch record says so);
* reports how the start went in the student's status folder (``launch_records``), through descriptors opened
  before any isolation, and makes a file there the kernel's stdout and stderr: the batch decides from those
  records and exit codes, never from text a kernel printed.

Inside the kernel, ``grader.isolation.kernel_guard`` puts ``translab.checks`` and the comparison functions back
before every cell, so that a test cell's feedback comes from the real check; the verdict itself is decided outside
the kernel (``grader.grading.verdicts``).

This module is the policy and the batch's side of it (the kernelspec, the uids, the limits, what is hidden, the
launch records and what a student left behind) and the extension inside the kernel; ``grader.isolation.launcher`` applies the
policy in the launcher's own process.  ``make lab`` does not use this kernel.
"""
from __future__ import annotations

import fcntl
import json
import os
import resource
import signal
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from translab.contract import CHECKER_DIR_ENV, CHECKER_SOCKET_NAMES, SANDBOX_STATUS_ENV
from translab.paths import GRADER_DIR, LAB_HOME, PACKAGE_DIR, REPO_ROOT, exchange_root

from grader.isolation import kernel_stages
from grader.isolation.cgroups import folders_of, kill
from grader.isolation.kernel_environment import kernel_environment


KERNEL_NAME = "translab-sandbox"
UID_BASE = 200_000  # sandbox uids: unused by any account; a batch holds a block of them, one uid per student
UID_BLOCK, UID_BLOCKS = 10_000, 100
UID_LOCKS = Path("/run/translab")  # root's: one lock file per block, held by the batch that uses it
GB = 1024 ** 3
PRIVATE_SIZE = "256m"  # each private tmpfs of the kernel (HOME, /tmp, /var/tmp, /dev/shm): what it can write
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes; ZMQ's IPC endpoints are "<ip>-<port>"


@dataclass(frozen=True)
class Limits:
    """Per-kernel limits, with room to spare for the solutions (measured: a solution kernel peaks at 2.2 GB
    of address space and 0.85 GB resident).  With --jobs N, N x address_space should fit in the RAM."""
    address_space: int = 6 * GB   # measured: a solution kernel peaks at 2.2 GB virtual (import torch ~1.5 GB)
    cpu_seconds: int = 900        # the whole kernel (one notebook); nbgrader's per-cell timeout acts first
    file_size: int = 512 * 1024 ** 2
    processes: int = 512          # threads count too; per uid, and each student has a uid of its own
    # the student's cgroup (grader.isolation.cgroups): its kernels, their children and its checker together
    # Above address_space, so that one process that allocates too much gets a MemoryError from RLIMIT_AS first (the
    # student loses the cell, as corpus case memory_bomb) instead of the group's OOM kill (the whole notebook): this
    # bounds the sum of the student's processes (a solution kernel peaks at 0.85 GB resident, its checker 0.27 GB).
    memory: int = 8 * GB
    tasks: int = 1024             # pids.max, as PrairieLearn's grader containers

    def apply(self) -> None:
        # RLIMIT_NPROC counts every task of the uid: an ordinary user's own processes come on top
        processes = self.processes + (_tasks_of(os.getuid()) if os.getuid() != 0 else 0)
        for name, value in (("RLIMIT_AS", self.address_space), ("RLIMIT_CPU", self.cpu_seconds),
                            ("RLIMIT_FSIZE", self.file_size), ("RLIMIT_NPROC", processes),
                            ("RLIMIT_CORE", 0)):
            limit = getattr(resource, name)
            _, hard = resource.getrlimit(limit)
            value = value if hard == resource.RLIM_INFINITY else min(value, hard)
            # the hard limit too: student code must not raise its own soft limit back
            resource.setrlimit(limit, (value, value))


def processes_of(uid: int) -> list[dict]:
    """The processes whose real uid is ``uid``, as their /proc status fields (zombies included)."""
    found = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(line.split(":", 1) for line in status.read_text().splitlines() if ":" in line)
        except OSError:  # it ended meanwhile
            continue
        if fields.get("Uid", "").split()[:1] == [str(uid)]:
            found.append({key: value.strip() for key, value in fields.items()})
    return found


def _tasks_of(uid: int) -> int:
    return sum(int(fields.get("Threads") or 1) for fields in processes_of(uid))


# ----------------------------------------------------------------- the grading side (grader.grading.batch)

def grading_kernel(root: Path, work: Path, limits: Limits | None = None, zygote: Path | None = None,
                   checkers: Path | None = None) -> tuple[dict, list[str]]:
    """Write the sandbox kernelspec under ``work``, and the stages of translab its kernels import
    (``grader.isolation.kernel_stages``), and return (env, nbgrader args) that select it; with ``zygote`` (the socket of the
    batch's kernels' ``grader.isolation.zygote``) its kernels are forked from there, and with ``checkers`` (the checkers'
    zygote) each notebook's checker."""
    limits = limits or Limits()
    problem = kernel_stages.unstaged_library(root, kernel_environment(os.environ))
    if problem:
        raise OSError(problem)
    if os.geteuid() == 0 and not others_can_reach(work.resolve().parent):
        raise OSError(f"{work.parent} is private to root: the sandboxed kernels keep their HOME below it; "
                      "point TMPDIR at a folder others may traverse (/tmp)")
    if len(str(longest_socket_prefix(work))) > SOCKET_PATH_MAX - 8:
        raise OSError(f"{work} is too long a path for the kernels' Unix sockets ({SOCKET_PATH_MAX} bytes at most): "
                      "point TMPDIR at a short folder (/tmp)")
    kernel_stages.build(PACKAGE_DIR, work, cache=kernel_stages.cache_folder(root))
    kernels = work / "jupyter" / "kernels" / KERNEL_NAME
    kernels.mkdir(parents=True, exist_ok=True)
    (work / "homes").mkdir(exist_ok=True)
    for folder in (work, work / "homes"):  # a dropped uid may reach its own HOME below, list nothing
        os.chmod(folder, 0o711)
    spec = {
        # -P: the launcher starts as root in the student's submission folder, which -m would put first on sys.path
        # (a student's grader/isolation/launcher.py would run instead of ours); PYTHONPATH is absolute
        # (grader.grading.nbgrader_process.absolute_path_list)
        "argv": [sys.executable, "-P", "-m", "grader.isolation.launcher", "--root", str(root), "--work", str(work),
                 "--limits", json.dumps(asdict(limits)), *(["--zygote", str(zygote)] if zygote else []), "--",
                 sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.extra_extensions=grader.isolation.kernel_guard"],
        "display_name": "translab grading sandbox",
        "language": "python",
        "metadata": {"debugger": False},
    }
    (kernels / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    jupyter_path = os.pathsep.join(filter(None, [str(work / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    args = [f"--Execute.kernel_name={KERNEL_NAME}", "--KernelManager.transport=ipc"]
    return {"JUPYTER_PATH": jupyter_path}, args + ([f"--GuardedExecute.zygote={checkers}"] if checkers else [])


KERNEL_SOCKETS = "kernel"  # the prefix of a kernel's IPC sockets, in its checker's folder


def socket_prefix(work: Path, index: int) -> Path:
    return work / "ipc" / str(index) / KERNEL_SOCKETS


def longest_socket_prefix(work: Path) -> Path:
    """The longest prefix a kernel's sockets get: in the folder of a checker (``CHECKER_SOCKET_NAMES``) below a
    student's (``student_env``), the batch's thousandth student's."""
    return socket_prefix(work, 999).parent / max(CHECKER_SOCKET_NAMES, key=len) / KERNEL_SOCKETS


class UidBlock:
    """The sandbox uids of one batch: a block of ``UID_BLOCK`` uids held (``flock``) for the batch's lifetime.

    Two batches on one machine (two courses) then never share a uid, so one batch's ``kill_leftovers`` cannot
    kill the other's kernels; a crashed batch releases its block with its last file descriptor.  An ordinary
    user's kernels keep that user's uid: no block is needed."""

    def __init__(self):
        self.base: int | None = None
        self._lock = None

    def __enter__(self) -> "UidBlock":
        if os.geteuid() != 0:
            return self
        UID_LOCKS.mkdir(mode=0o700, parents=True, exist_ok=True)
        for block in range(UID_BLOCKS):
            lock = open(UID_LOCKS / f"uids-{block}.lock", "a")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            self._lock, self.base = lock, UID_BASE + block * UID_BLOCK
            return self
        raise OSError(f"all {UID_BLOCKS} blocks of sandbox uids are held by other batches ({UID_LOCKS})")

    def __exit__(self, *_) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None

    def uid(self, index: int) -> int | None:
        if self.base is None:
            return None
        if not 0 <= index < UID_BLOCK:
            raise ValueError(f"a batch grades at most {UID_BLOCK} students (index {index})")
        return self.base + index


def student_env(uid: int | None, status: Path | None = None, work: Path | None = None, index: int = 0) -> dict:
    """Per-student environment of its nbgrader process: the uid its kernels drop to when run as root, the
    folder where the launcher reports how each kernel start went (``launch_records``), and where the grader's
    checker (``grader.grading.verdicts``) puts its socket: beside the kernel's own, the one folder of the batch that a
    sandboxed kernel can reach."""
    env = {"TRANSLAB_SANDBOX_UID": str(uid)} if uid is not None else {}
    if status is not None:
        env[SANDBOX_STATUS_ENV] = str(status)
    if work is not None:
        env[CHECKER_DIR_ENV] = str(socket_prefix(work, index).parent)
    return env


def status_folder(work: Path, index: int) -> Path:
    """The launcher's reports for one student: a folder no kernel can write (0700, the instructor's; outside
    every kernel's view of the filesystem), so that nothing student code prints can pass for one."""
    folder = work / "status" / str(index)
    folder.mkdir(parents=True, exist_ok=True)
    os.chmod(folder.parent, 0o700)
    os.chmod(folder, 0o700)
    return folder


LAUNCH_RECORDS = "launch.jsonl"


def launch_records(status: Path) -> list[dict]:
    """What the launcher wrote for each kernel start: ``{"pid", "ok", "mode", "error"}``."""
    path = status / LAUNCH_RECORDS
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            records.append({"ok": False, "error": f"unreadable launch record {line[:200]!r}"})
    return records


def launch_failures(records: list[dict]) -> list[str]:
    """The kernel starts that failed, as ``stage: error``."""
    return [f"{r.get('stage')}: {r.get('error')}" for r in records if not r.get("ok")]


def kernel_output_tail(status: Path, limit: int = 4096) -> str:
    """The end of what the kernels wrote to their stdout/stderr (student-controlled text: shown, never parsed)."""
    parts = []
    for path in sorted(status.glob("kernel-*.out")):
        with open(path, "rb") as handle:
            handle.seek(max(0, path.stat().st_size - limit))
            parts.append(f"--- {path.name} (last {limit} bytes at most)\n" + handle.read().decode(errors="replace"))
    return "\n".join(parts)


SHARED_FOLDERS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"), Path("/run/lock"))


def world_writable_folders(roots=SHARED_FOLDERS, skip: Path | None = None) -> list[Path]:
    """The folders below ``roots`` where any uid may create files: the only places (outside folders it owns,
    which would have to be created in one of these) a student's uid could leave a file.  One walk per batch, so
    that ``leftovers`` need not walk /tmp for each student.  The walk does not enter a folder that others may
    not search (no o+x): a student's uid, with a group of its own, cannot reach anything below it (4.8 s saved
    with pytest's and tempfile's private folders, 730,000 entries, in /tmp)."""
    found = []
    for root in roots:
        for top, dirs, _ in os.walk(root, onerror=lambda error: None):
            if skip is not None and Path(top) == skip:
                dirs[:] = []
                continue
            try:
                mode = os.lstat(top).st_mode
            except OSError:
                dirs[:] = []
                continue
            if mode & 0o002:
                found.append(Path(top))
            if not mode & 0o001:
                dirs[:] = []
    return found


def leftovers(uid: int, folders: list[Path] | None = None) -> list[str]:
    """What a student's uid still has on this machine after its kernels ended: processes (zombies aside), SysV
    IPC objects, and files in the world-writable ``folders`` (and in any folder of its own found there).  Root
    only (an ordinary user's kernels keep that user's uid); the kernels run in namespaces of their own, so this
    should always be empty: the batch checks it."""
    if os.geteuid() != 0:
        return []
    found = [f"process {p['Pid']} ({p.get('Name', '?')})" for p in processes_of(uid) if not p["State"].startswith("Z")]
    for kind in ("shm", "msg", "sem"):
        table = Path("/proc/sysvipc") / kind
        if not table.exists():
            continue
        lines = table.read_text().splitlines()
        columns = lines[0].split() if lines else []
        for line in lines[1:]:
            row = dict(zip(columns, line.split()))
            if str(uid) in (row.get("uid"), row.get("cuid")):
                found.append(f"SysV {kind} {row.get('key', '?')}")
    for folder in (world_writable_folders() if folders is None else folders):
        try:
            entries = list(os.scandir(folder))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.stat(follow_symlinks=False).st_uid == uid:
                    found.append(entry.path)
            except OSError:
                continue
    return found


def student_args(work: Path, index: int) -> list[str]:
    """Per-student nbgrader options: where its kernels' IPC sockets go (a folder the launcher gives the
    student's uid; an absolute path, since nbgrader and the kernel run in different folders)."""
    return [f"--KernelManager.ip={socket_prefix(work, index)}"]


def kill_leftovers(env: dict) -> None:
    """Kill whatever a student's kernels left running (a fork storm's sleeping children, daemons, busy processes
    in sessions of their own): everything in the student's cgroup (``grader.isolation.cgroups``), then everything of its uid.

    The student's uid is its own, so everything running as that uid is the student's: a child that
    becomes the uid and calls ``kill(-1, SIGKILL)`` ends all of it at once, however fast it forks.
    Root only (an ordinary user has no uid of the student's to aim at)."""
    kill(folders_of(env))  # the student's group: everything in it, whatever uid or session it took
    uid = env.get("TRANSLAB_SANDBOX_UID")
    if not uid or os.geteuid() != 0:
        return
    for _ in range(3):
        pid = os.fork()
        if pid == 0:  # pragma: no cover (the child)
            try:
                os.setgroups([])
                os.setgid(int(uid))
                os.setuid(int(uid))
                os.kill(-1, signal.SIGKILL)
            except OSError:
                pass
            os._exit(0)
        os.waitpid(pid, 0)


def hidden_paths(root: Path) -> list[Path]:
    """What a student's kernel must not read: the gradebook (hidden tests, everyone's grades), the course
    secret (everyone's variant), the solutions, the checks' references (the checker outside the kernel reads them), the
    submissions and feedback, nbgrader's exchange, the checkout's tests and experiments, and the cached
    stages of translab (every part's answers) and the markdown found clean (grader.course.known_clean).  Not the
    classmates' autograded/ folders: one graded at the same time gets its folder after this list is made, so the
    launcher covers autograded/ whole, keeping the kernel's own (its ``_autograded_view``)."""
    from grader.course.variants import SECRET_FILE  # lazy: keeps hashlib and sqlite3 out of every kernel's launcher
    from grader.course.known_clean import FOLDER_NAME as KNOWN_CLEAN  # lazy: likewise (hashlib)
    private = ("gradebook.db", ".nbgrader.log", "solutions", "submitted", "feedback", "downloaded", ".git",
               "grader/references", "references", SECRET_FILE, kernel_stages.CACHE_NAME, KNOWN_CLEAN,
               # what a checkout holds beside the library that no kernel needs: its tests, experiments and the
               # grader's test tooling hold copies of answers (found by grader/tests/isolation/test_kernel_holds_nothing.py)
               "tests", "experiments", "grader/testing", "grader/tests")
    # the course's, and the checkout's that the kernel imports from, where the course is elsewhere
    paths = [folder / name for folder in {root, REPO_ROOT} for name in private]
    paths.append(exchange_root(root))  # everyone's submissions and feedback on their way (a hub's shared folder)
    # and the references next to the translab the kernel imports (the course's own, or an installed checkout's),
    # or in the folder TRANSLAB_HOME names
    paths += [GRADER_DIR / "references", REPO_ROOT / "references", LAB_HOME / "grader" / "references",
              LAB_HOME / "references"]
    return sorted({p.resolve() for p in paths if p.exists()})


def others_can_reach(path: Path) -> bool:
    """Whether every user can reach ``path`` (search permission on it and every folder above it)."""
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])
