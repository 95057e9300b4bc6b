"""The kernel that runs student code during autograding, with limits set by the project.

A student's notebook runs arbitrary Python as the instructor.  ``grader.batch`` therefore starts every
grading kernel through this module (a kernelspec ``translab-sandbox`` written into the batch's scratch folder,
found through ``JUPYTER_PATH``, selected with ``--Execute.kernel_name``), which, before it becomes the
ipykernel process (``exec``, so signals and kills from nbgrader reach the kernel itself; or, in a batch, in a
process forked by the batch's ``grader.zygote``, whose launcher stays and passes signals and kills on):

* joins the student's cgroup (``grader.cgroups``: equal CPU shares, memory and task limits, one kill for
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

Inside the kernel, ``load_ipython_extension`` puts ``translab.checks`` and the comparison functions back
before every cell, so that a test cell's feedback comes from the real check; the verdict itself is decided outside
the kernel (``grader.verdicts``).

``make lab`` does not use this kernel.
"""
from __future__ import annotations

import argparse
import ctypes
import fcntl
import json
import os
import re
import resource
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

from translab.contract import CHECKER_DIR_ENV, SANDBOX_STATUS_ENV

from .zygote import FONT_LISTS, font_list_folder, zygote_folder
from .processes import CLONE_NEWPID, PR_SET_DEATHSIG_KILL, PR_SET_DUMPABLE, enter_pid_namespace, prctl

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
    # the student's cgroup (grader.cgroups): its kernels, their children and its checker together
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


# ----------------------------------------------------------------- the grading side (grader.batch)

def grading_kernel(root: Path, work: Path, limits: Limits | None = None,
                   zygote: Path | None = None) -> tuple[dict, list[str]]:
    """Write the sandbox kernelspec under ``work`` and return (env, nbgrader args) that select it; with ``zygote``
    (the socket of the batch's ``grader.zygote``) its kernels are forked from there."""
    limits = limits or Limits()
    if os.geteuid() == 0 and not _others_can_reach(work.resolve().parent):
        raise OSError(f"{work.parent} is private to root: the sandboxed kernels keep their HOME below it; "
                      "point TMPDIR at a folder others may traverse (/tmp)")
    if len(str(_socket_prefix(work, 999))) > SOCKET_PATH_MAX - 8:
        raise OSError(f"{work} is too long a path for the kernels' Unix sockets ({SOCKET_PATH_MAX} bytes at most): "
                      "point TMPDIR at a short folder (/tmp)")
    kernels = work / "jupyter" / "kernels" / KERNEL_NAME
    kernels.mkdir(parents=True, exist_ok=True)
    (work / "homes").mkdir(exist_ok=True)
    for folder in (work, work / "homes"):  # a dropped uid may reach its own HOME below, list nothing
        os.chmod(folder, 0o711)
    spec = {
        "argv": [sys.executable, "-m", "grader.sandbox", "--root", str(root), "--work", str(work),
                 "--limits", json.dumps(asdict(limits)), *(["--zygote", str(zygote)] if zygote else []), "--",
                 sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.extra_extensions=grader.sandbox"],
        "display_name": "translab grading sandbox",
        "language": "python",
        "metadata": {"debugger": False},
    }
    (kernels / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    jupyter_path = os.pathsep.join(filter(None, [str(work / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    args = [f"--Execute.kernel_name={KERNEL_NAME}", "--KernelManager.transport=ipc"]
    return {"JUPYTER_PATH": jupyter_path}, args + ([f"--GuardedExecute.zygote={zygote}"] if zygote else [])


def _socket_prefix(work: Path, index: int) -> Path:
    return work / "ipc" / str(index) / "kernel"


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
    checker (``grader.verdicts``) puts its socket: beside the kernel's own, the one folder of the batch that a
    sandboxed kernel can reach."""
    env = {"TRANSLAB_SANDBOX_UID": str(uid)} if uid is not None else {}
    if status is not None:
        env[SANDBOX_STATUS_ENV] = str(status)
    if work is not None:
        env[CHECKER_DIR_ENV] = str(_socket_prefix(work, index).parent)
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
    return [f"--KernelManager.ip={_socket_prefix(work, index)}"]


def kill_leftovers(env: dict) -> None:
    """Kill whatever a student's kernels left running (a fork storm's sleeping children, daemons, busy processes
    in sessions of their own): everything in the student's cgroup (``grader.cgroups``), then everything of its uid.

    The student's uid is its own, so everything running as that uid is the student's: a child that
    becomes the uid and calls ``kill(-1, SIGKILL)`` ends all of it at once, however fast it forks.
    Root only (an ordinary user has no uid of the student's to aim at)."""
    from .cgroups import folders_of, kill
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


# ----------------------------------------------------------------- inside the kernel: the checks stay the checks

GUARDED = {"torch": ("allclose", "equal", "isclose"), "torch.testing": ("assert_close",),
           "numpy.testing": ("assert_allclose", "assert_array_equal", "assert_equal")}


def load_ipython_extension(ip) -> None:
    """Before every cell, put back what an answer cell may have replaced to pass the tests: every attribute
    of ``translab.checks`` (and the notebook's ``checks`` name), the comparison functions of torch and
    numpy.testing, and the builtins.  Snapshot taken when the kernel starts, before any student code.

    The verdicts do not depend on it: they are decided outside the kernel (``grader.verdicts``), and a check the
    answer replaced simply never reports (0).  It keeps the feedback useful: a test cell after such an answer
    still runs the real check and shows why the answer fails."""
    import builtins
    import importlib

    from translab import checks
    modules = {name: importlib.import_module(name) for name in GUARDED}
    pristine = [(checks, dict(vars(checks)))]
    pristine += [(modules[name], {attr: getattr(modules[name], attr) for attr in attrs}) for name, attrs in GUARDED.items()]
    pristine.append((builtins, dict(vars(builtins))))

    def restore(*_):
        for module, attributes in pristine:
            for name, value in attributes.items():
                if getattr(module, name, None) is not value:
                    setattr(module, name, value)
        for name in [name for name in vars(checks) if name not in pristine[0][1]]:
            delattr(checks, name)
        if "checks" in ip.user_ns:
            ip.user_ns["checks"] = checks

    ip.events.register("pre_run_cell", restore)


# ----------------------------------------------------------------- the kernel side (the launcher)

_libc = None
# The mount namespace this process started in (the machine's, or the container's).  Compared with
# /proc/self/ns/mnt rather than PID 1's: reading /proc/1/ns/mnt is refused on some machines (a VM's
# init, a hardened kernel), and a namespace different from our own starting one is all the guard needs.
_STARTING_NAMESPACE = os.readlink("/proc/self/ns/mnt") if os.path.exists("/proc/self/ns/mnt") else None


def _c() -> ctypes.CDLL:
    """The C library, for unshare(2) and mount(2), loaded once."""
    global _libc
    _libc = _libc or ctypes.CDLL(None, use_errno=True)
    return _libc


def _private_namespace(network: bool, user: bool) -> tuple[bool, bool]:
    """Enter a mount namespace of our own, whose mounts never propagate back to the machine's, an IPC namespace
    (SysV shared memory, semaphores and message queues die with the kernel instead of outliving the batch), a
    PID namespace for our children (``grader.processes``), and with ``network`` a network namespace of our own
    too (nothing to reach: its only interface, lo, is down).  Returns whether it did, and whether the PID
    namespace was among them (a machine may refuse it alone: the kernel then runs without one, as it says).

    With ``user`` (an ordinary user), first a user namespace where our own uid, mapped to itself, may mount;
    (False, False) where the kernel refuses unprivileged user namespaces.  As root a refusal is an error."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | CLONE_NEWIPC | (CLONE_NEWNET if network else 0) | (CLONE_NEWUSER if user else 0)
    pid_namespace = _c().unshare(flags | CLONE_NEWPID) == 0
    if not pid_namespace and _c().unshare(flags) != 0:
        if user:
            return False, False
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNS | CLONE_NEWIPC{' | CLONE_NEWNET' if network else ''})")
    if user:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    return True, pid_namespace


def _in_private_namespace() -> bool:
    return _STARTING_NAMESPACE is not None and os.readlink("/proc/self/ns/mnt") != _STARTING_NAMESPACE


def _mount(source: str, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    """mount(2), refused outside a private namespace: covering /tmp or /root of the whole machine (what a
    mistake here would do) hides them from every process on it, the instructor's included."""
    if not _in_private_namespace():
        raise OSError(f"refusing to mount on {target} outside a private mount namespace")
    if _c().mount(source.encode(), target.encode(), fstype.encode() if fstype else None, flags,
                   data.encode() if data else None) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"mount {source} on {target}: {os.strerror(errno)}")


MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MS_NOEXEC, MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 8, 1024, 2048, 1 << 21, 1 << 24
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWIPC = 0x00020000, 0x40000000, 0x10000000, 0x08000000
# a mount's options as /proc/self/mountinfo shows them; inside a user namespace a remount must keep them
_MOUNT_OPTIONS = {"nosuid": MS_NOSUID, "nodev": MS_NODEV, "noexec": MS_NOEXEC, "noatime": MS_NOATIME,
                  "nodiratime": MS_NODIRATIME, "relatime": MS_RELATIME, "strictatime": MS_STRICTATIME}


def _mount_flags() -> dict[str, int]:
    """Every mount point of this namespace, with the flags a remount of it must keep."""
    flags = {}
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        fields = line.split()
        target = re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), fields[4])  # \040 is a space
        flags[target] = sum(_MOUNT_OPTIONS.get(option, 0) for option in fields[5].split(","))
    return flags


def _read_only_everywhere() -> None:
    """Every mount read-only (our uid's own files included), in our private namespace."""
    for target, flags in _mount_flags().items():
        _mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _writable(path: Path) -> None:
    """``path`` writable again below a read-only mount: a bind mount of its own, remounted read-write (allowed:
    the read-only flag was set in our namespace, not inherited from the machine's)."""
    _mount(str(path), str(path), None, MS_BIND)
    _mount("none", str(path), None, MS_REMOUNT | MS_BIND | _mount_flags().get(str(path), 0))


def hidden_paths(root: Path, student: str | None) -> list[Path]:
    """What a student's kernel must not read: the gradebook (hidden tests, everyone's grades), the course
    secret (everyone's variant), the solutions, the checks' references (the checker outside the kernel reads them), other students'
    submissions, results and feedback, and nbgrader's exchange."""
    from translab.paths import GRADER_DIR, LAB_HOME, REPO_ROOT, exchange_root
    from .variants import SECRET_FILE  # every student's code
    paths = [root / name for name in ("gradebook.db", ".nbgrader.log", "solutions", "submitted", "feedback",
                                      "downloaded", ".git", "grader/references", "references", SECRET_FILE)]
    paths.append(exchange_root(root))  # everyone's submissions and feedback on their way (a hub's shared folder)
    # and the references next to the translab the kernel imports (the course's own, or an installed checkout's),
    # or in the folder TRANSLAB_HOME names
    paths += [GRADER_DIR / "references", REPO_ROOT / "references", LAB_HOME / "grader" / "references",
              LAB_HOME / "references"]
    if (root / "autograded").is_dir():  # the kernel's own folder is in there
        paths += [p for p in (root / "autograded").iterdir() if p.name != student]
    return sorted({p.resolve() for p in paths if p.exists()})


def _hide(paths: list[Path], empty: Path) -> None:
    """Cover each path by an empty read-only tmpfs (folders) or an empty read-only file (not /dev/null: a
    device stays writable on a read-only mount), in the kernel's private namespace: nothing on disk changes."""
    for path in paths:
        if path.is_dir():
            _mount("tmpfs", str(path), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=000")
        else:  # reads see an empty file, writes fail (EROFS)
            _mount(str(empty), str(path), None, MS_BIND)
            _mount("none", str(path), None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _others_can_reach(path: Path) -> bool:
    return all(os.stat(p).st_mode & 0o001 for p in [path, *path.parents])


def _cover_keeping(cover: Path, keep: list[Path], mode: str = "755", writable: bool = False) -> None:
    """Cover ``cover`` with an empty tmpfs in which only ``keep`` reappear (bind mounts through file
    descriptors opened before the cover, so they need no staging folder outside it).  A path inside another
    kept path comes with it (the bind is recursive); binding it again would make the folders between the two
    unwritable, or hide the inner one, as when the venv, the course and the batch folder are in the repository."""
    keep = [path for path in sorted(set(keep)) if not any(other in path.parents for other in keep)]
    fds = [os.open(path, os.O_PATH) for path in keep]
    try:
        _mount("tmpfs", str(cover), "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_SIZE},mode={mode}")
        for fd, path in zip(fds, keep):
            path.mkdir(parents=True, exist_ok=True)
            for parent in path.relative_to(cover).parents:
                if parent != Path("."):
                    os.chmod(cover / parent, 0o755)
            _mount(f"/proc/self/fd/{fd}", str(path), None, MS_BIND | MS_REC)
    finally:
        for fd in fds:
            os.close(fd)
    if not writable:
        _mount("none", str(cover), None, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV)


def _own_proc(pid_namespace: bool) -> None:
    """A /proc of its own.  In its own PID namespace it lists only the namespace's processes (the kernel, what it
    started, and its init, which ``hidepid=invisible`` hides from the student's uid as root).  Without one, as
    root on Linux 5.8 or later, where each mount of procfs is an instance with options of its own, ``hidepid``
    alone shows the kernel its own uid's processes: not the instructor's commands, nor the classmates' kernels
    (before 5.8 the option would change the machine's /proc too).  As an ordinary user the mount may be refused
    (a /proc partly covered, as in a container): the kernel then keeps the /proc it has."""
    version = tuple(int(part) for part in re.findall(r"\d+", os.uname().release)[:2])
    root = os.geteuid() == 0
    if not pid_namespace and not (root and version >= (5, 8)):
        return
    try:
        _mount("proc", "/proc", "proc", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, "hidepid=invisible")
    except OSError:
        if root:
            raise


def _private_views(home: Path, sockets: Path | None, course: Path, cwd: Path) -> None:
    """Root's home (where pyenv may keep the interpreter), and as an ordinary user that user's home, empty
    except the interpreter, this package and the course, read-only; /tmp, /var/tmp and /dev/shm private to the
    kernel (a world-writable /tmp is the one place outside its HOME an unprivileged uid could leave files for
    the instructor), except the kernel's HOME, sockets and working folder."""
    needed = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve(), Path(__file__).resolve().parents[1]}
    homes = {Path(os.path.expanduser("~root")).resolve()}
    if os.geteuid() != 0:
        needed.add(course.resolve())
        homes.add(Path(os.path.expanduser("~")).resolve())
    for private_home in sorted(homes):
        covered = os.geteuid() != 0 or not _others_can_reach(private_home)
        if covered and private_home.is_dir() and not any(p == private_home or p in private_home.parents for p in needed):
            _cover_keeping(private_home, [p for p in needed if private_home in p.parents])
    for shared in (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm")):
        if shared.is_dir():
            keep = [path for path in (home, sockets, cwd) if path and shared in path.parents]
            keep += [p for p in needed if shared in p.parents]
            _cover_keeping(shared, keep, mode="1777", writable=True)
    if os.geteuid() != 0:  # the kernel keeps our uid: nothing to reach that we cannot
        return
    blocked = [path for path in needed | {home.parent} | ({sockets.parent} if sockets else set())
               if not _others_can_reach(path)]
    if blocked:
        raise OSError(f"the sandboxed kernel could not reach {blocked}: make them world-readable or grade "
                      "with --no-sandbox")


def _new_home(uid: int, work: Path) -> Path:
    """An empty folder for the kernel's HOME: a mount point for the size-limited tmpfs it gets (``_own_home``)."""
    home = Path(tempfile.mkdtemp(prefix=f"kernel-{uid}-", dir=work / "homes"))
    os.chmod(home, 0o700)
    return home


def _own_home(home: Path, uid: int, connection_file: str, connection: bytes, fonts: dict[str, bytes]) -> str:
    """Mount the kernel's HOME (a tmpfs of ``PRIVATE_SIZE`` that only ``uid`` can use, gone with the kernel) and
    put a copy of the connection file in it (nbgrader's is readable by the instructor only, and by now hidden),
    and one of matplotlib's font lists (``fonts``), so that the kernel's first plot does not list the machine's
    fonts again (0.2 s)."""
    _mount("tmpfs", str(home), "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_SIZE},mode=700,uid={uid},gid={uid}")
    private = home / Path(connection_file).name
    copies = {private: connection, **{home / "matplotlib" / name: data for name, data in fonts.items()}}
    for path, data in copies.items():
        path.parent.mkdir(mode=0o700, exist_ok=True)
        path.write_bytes(data)
        os.chmod(path, 0o600)
        if os.geteuid() == 0:
            os.chown(path.parent, uid, uid)
            os.chown(path, uid, uid)
    return str(private)


def _socket_folder(connection_file: str, work: Path, uid: int | None) -> Path | None:
    """With the IPC transport: the folder of the kernel's sockets, created for (and, as root, owned by) the
    student's uid, which binds them there.  None with TCP."""
    connection = json.loads(Path(connection_file).read_text())
    if connection.get("transport") != "ipc":
        return None
    folder = Path(connection["ip"]).parent
    if work.resolve() not in folder.resolve().parents:
        raise OSError(f"the kernel's IPC sockets ({connection['ip']}) must be below the batch folder {work}")
    folder.mkdir(parents=True, exist_ok=True)
    if uid is not None:
        os.chown(folder, uid, uid)
        os.chmod(folder, 0o700)
        os.chmod(folder.parent, 0o711)
    return folder


def _drop_to(uid: int) -> None:
    os.setgroups([])
    os.setgid(uid)
    os.setuid(uid)


def _isolate(args: argparse.Namespace, kernel: list[str], env: dict, status: _Status) -> tuple[list[str], dict, str, str]:
    """Isolate this process as far as this machine allows; returns the kernel's command line and environment,
    the mode reached (``root``, ``user namespace`` or ``limits only``), and whether it joined the student's cgroup
    (``joined``, or why not).  In a PID namespace, what returns is the namespace's PID 2 (``grader.processes``);
    ``status`` learns its pid and whether it has a namespace."""
    cwd = Path.cwd()  # nbgrader starts the kernel in autograded/<student>/<assignment>
    student = cwd.parent.name if cwd.parent.parent.name == "autograded" else None
    empty = args.work / "empty"
    if not empty.exists():
        empty.touch(mode=0o444)
    root = os.geteuid() == 0
    uid = int(env.get("TRANSLAB_SANDBOX_UID", UID_BASE)) if root else os.getuid()
    from . import cgroups
    group = cgroups.join(env)  # first: its children inherit it, and /sys/fs/cgroup is read-only below
    for name in (cgroups.ENV, cgroups.PROBLEM_ENV):
        env.pop(name, None)
    index = kernel.index("-f") + 1
    sockets = _socket_folder(kernel[index], args.work, uid if root else None)
    connection = Path(kernel[index]).read_bytes()  # nbgrader's runtime folder may be hidden below (root's home)
    fonts = {path.name: path.read_bytes() for path in font_list_folder(args.work).glob(FONT_LISTS)}
    # no network only where nbgrader reaches the kernel through Unix sockets: over TCP it could not
    private, status.pid_namespace = _private_namespace(network=sockets is not None, user=not root)
    if not private:
        return kernel, env, "limits only", group
    if status.pid_namespace:
        status.keeper = os.getpid()
        status.pid = enter_pid_namespace(close=status.descriptors())
        # ipykernel's parent poller would take PID 1, the kernel's parent in here, for init adopting an orphan
        # and exit: the init, which dies with the launcher and takes the namespace with it, does that job
        env.pop("JPY_PARENT_PID", None)
    home = _new_home(uid, args.work)
    # Everything read-only (root's files and the instructor's alike: no world-writable lock folder or spool
    # to leave things in), the secrets hidden, then the few places the kernel writes: its sockets, and private
    # tmpfs of a bounded size for HOME, /tmp, /var/tmp and /dev/shm, which vanish with the kernel.
    _read_only_everywhere()
    _own_proc(status.pid_namespace)
    # and the batch's zygote, whose socket forks kernels (grader.zygote), wherever the batch folder is
    _hide(hidden_paths(args.root.resolve(), student) + [p for p in [zygote_folder(args.work.resolve())] if p.exists()], empty)
    _private_views(home, sockets, args.root, cwd)
    if sockets is not None:
        _writable(sockets)
    kernel[index] = _own_home(home, uid, kernel[index], connection, fonts)
    os.chdir(cwd)  # the working folder as mounted now, not the directory we started in
    if root:
        _drop_to(uid)
    env.update(HOME=str(home), TMPDIR=str(home), MPLCONFIGDIR=str(home / "matplotlib"),
               IPYTHONDIR=str(home / "ipython"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    return kernel, env, "root" if root else "user namespace", group


class _Status:
    """The launcher's report to the batch (``launch_records``), written through descriptors opened before any
    isolation (the folder is out of the kernel's reach, the descriptors are closed on exec), and the file that
    becomes the kernel's stdout and stderr, so nothing a kernel prints reaches nbgrader's log."""

    def __init__(self, folder: str | None):
        self.records = self.output = None
        self.pid, self.keeper, self.pid_namespace = os.getpid(), None, False  # the kernel's, as the machine knows it
        if folder:
            path = Path(folder)
            flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC | os.O_NOFOLLOW
            self.records = os.open(path / LAUNCH_RECORDS, flags, 0o600)
            self.output = os.open(path / f"kernel-{os.getpid()}.out", flags, 0o600)

    def write(self, **record) -> None:
        if self.records is not None:
            keeper = {"keeper": self.keeper} if self.keeper is not None else {}
            record = {"pid": self.pid, **keeper, "pid_namespace": self.pid_namespace, **record}
            os.write(self.records, (json.dumps(record) + "\n").encode())
        elif not record.get("ok"):
            print(f"[grader.sandbox] {record}", file=sys.stderr, flush=True)

    def become_kernel_output(self) -> None:
        if self.output is not None:
            for fd in (1, 2):
                os.dup2(self.output, fd)  # dup2's copy is inheritable: the kernel's stdout and stderr

    def descriptors(self) -> tuple[int, ...]:
        return tuple(fd for fd in (self.records, self.output) if fd is not None)

    def close(self) -> None:
        """Before a kernel runs in this very process (no exec to close them): it must not write records."""
        for fd in (self.records, self.output):
            if fd is not None:
                os.close(fd)
        self.records = self.output = None


def _runs_here(kernel: list[str]) -> bool:
    """Whether ``kernel`` is this interpreter with ``-m module`` or ``-c code``, which a zygote's child can run
    without exec'ing a new one."""
    return (len(kernel) >= 3 and kernel[1] in ("-m", "-c")
            and os.path.realpath(kernel[0]) == os.path.realpath(sys.executable))


def _run_here(kernel: list[str], env: dict, pid_namespace: bool) -> None:
    """Run ``python -m module ...`` or ``python -c code ...`` in this process, as that command would: its
    environment, ``sys.argv``, the working folder first on ``sys.path``, a fresh ``__main__``."""
    import runpy
    import types
    prctl(PR_SET_DUMPABLE, 1)  # as exec leaves a process (dropping to the student's uid cleared it)
    # The zygote gone (its batch killed), the kernel goes too: an exec'd kernel's ipykernel polls for its parent,
    # a forked one's does not (it read JPY_PARENT_PID when the zygote imported it).  Set after the uid change,
    # which clears it; a zygote that died before then has left this process to init (in a PID namespace, the
    # parent is the namespace's init, whose end kills this anyway).
    prctl(*PR_SET_DEATHSIG_KILL)
    if os.getppid() == 1 and not pid_namespace:
        os._exit(1)
    os.environ.clear()
    os.environ.update(env)
    flag, target, rest = kernel[1], kernel[2], kernel[3:]
    if flag == "-c":
        sys.path[0], sys.argv = "", ["-c", *rest]
        main = types.ModuleType("__main__")
        sys.modules["__main__"] = main
        exec(compile(target, "<string>", "exec"), main.__dict__)  # noqa: S102 - the kernel's command, as python -c
    else:
        sys.path[0], sys.argv = os.getcwd(), [target, *rest]
        runpy.run_module(target, run_name="__main__", alter_sys=True)


def launch(argv: list[str], launcher: int | None = None) -> None:
    """The kernelspec's command: isolate this process, then become the kernel.  With ``--zygote``, ask the batch's
    zygote to do that in a child it forks (``grader.zygote.run_through``) and stay beside it; the child calls this
    with ``launcher``, the pid of the process it serves, and runs the kernel in itself rather than exec it."""
    parser = argparse.ArgumentParser(prog="python -m grader.sandbox")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--limits", default="{}")
    parser.add_argument("--zygote", type=Path)
    parser.add_argument("kernel", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    kernel = args.kernel[1:] if args.kernel[:1] == ["--"] else args.kernel
    if args.zygote is not None and launcher is None:
        from .zygote import run_through
        here = ["--root", str(args.root), "--work", str(args.work), "--limits", args.limits, "--", *kernel]
        code = run_through(args.zygote, here)
        if code is not None:
            sys.exit(code)
        # no zygote answered: start the kernel here, as without one
    env = {**os.environ, "TRANSLAB_SANDBOX": "1"}
    status = _Status(env.pop(SANDBOX_STATUS_ENV, None))
    stage = "isolating"
    in_process = launcher is not None and _runs_here(kernel)
    try:
        kernel, env, mode, group = _isolate(args, kernel, env, status)
        stage = "limits"
        Limits(**json.loads(args.limits)).apply()
        status.write(ok=True, mode=mode, cgroup=group, **({"launcher": launcher} if launcher is not None else {}))
        status.become_kernel_output()
        stage = "exec"
        if not in_process:
            os.execve(kernel[0], kernel, env)
        status.close()
    except Exception as error:  # before any student code ran
        import traceback
        status.write(ok=False, stage=stage, error=repr(error),
                     errno=getattr(error, "errno", None), traceback=traceback.format_exc()[-3000:])
        sys.exit(1)
    _run_here(kernel, env, status.pid_namespace)  # the zygote's child: the kernel, in this process, until it ends


if __name__ == "__main__":
    launch(sys.argv[1:])
