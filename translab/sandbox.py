"""The kernel that runs student code during autograding, with limits set by the project.

A student's notebook runs arbitrary Python as the instructor.  ``translab.grading`` therefore starts every
grading kernel through this module (a kernelspec ``translab-sandbox`` written into the batch's scratch folder,
found through ``JUPYTER_PATH``, selected with ``--Execute.kernel_name``), which, before it becomes the
ipykernel process (``exec``, so signals and kills from nbgrader reach the kernel itself):

* sets resource limits, so a memory bomb or a runaway loop costs that student the cell, not the instructor
  the machine: address space (``RLIMIT_AS``), CPU seconds (``RLIMIT_CPU``, a backstop behind nbgrader's
  per-cell timeout), size of any file written (``RLIMIT_FSIZE``), processes/threads (``RLIMIT_NPROC``), no core
  dumps;
* when run as root (a grading server, a container): in a private mount namespace, covers what the student
  must not read (the gradebook with its hidden tests, ``solutions/``, ``submitted/``, other students'
  results, feedback, root's home) and gives the kernel its own /tmp, /var/tmp and /dev/shm; then drops to an
  unprivileged uid of its own (one per student), because root ignores ``RLIMIT_NPROC`` and file permissions.
  That uid can write only its private ``HOME``/``TMPDIR``, so the course, the gradebook and the solutions
  are out of reach, and ``kill_leftovers`` can end everything the student started;
* as root, also no network: the kernel gets a network namespace of its own (no interface but a loopback
  that is down), and talks to nbgrader over ZMQ's IPC transport, Unix sockets in a folder of the batch that
  the kernel's uid owns (``--KernelManager.transport=ipc``, a socket path per student), since TCP on
  127.0.0.1 cannot cross network namespaces;
* as an ordinary user, where the kernel allows unprivileged user namespaces (Debian, Ubuntu and Fedora do
  by default; this is what ``bubblewrap`` builds on, done here with no package to install): a user
  namespace in which the instructor's uid may mount, with mount and network namespaces of its own.  The
  whole filesystem is read-only except the kernel's own folder (autograded/<student>/<assignment>), its
  private HOME and /tmp; the same paths are hidden as for root, and the instructor's home is empty but for
  the interpreter and the course; no network, as for root.  The kernel keeps the instructor's uid, so
  ``RLIMIT_NPROC`` counts the instructor's own processes too and leftovers are not killed by uid;
* as an ordinary user where user namespaces are refused: the limits only, with a warning in the log (file
  permissions are the instructor's own, so student code can read and write whatever the instructor can).

Inside the kernel, ``load_ipython_extension`` puts ``translab.checks`` and the comparison functions back
before every cell, so an answer cell cannot replace the checker.

``make lab`` does not use this kernel.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import resource
import shutil
import signal
import sys
import tempfile
from dataclasses import asdict, dataclass
from pathlib import Path

KERNEL_NAME = "translab-sandbox"
UID_BASE = 200_000  # sandbox uids: unused by any account, one per student of a batch (UID_BASE + index)
GB = 1024 ** 3
SOCKET_PATH_MAX = 100  # sun_path holds 108 bytes; ZMQ's IPC endpoints are "<ip>-<port>"


@dataclass(frozen=True)
class Limits:
    """Per-kernel limits, with room to spare for the solutions (measured: a solution kernel peaks at 2.2 GB
    of address space and 0.85 GB resident).  With --jobs N, N x address_space should fit in the RAM."""
    address_space: int = 6 * GB   # measured: a solution kernel peaks at 2.2 GB virtual (import torch ~1.5 GB)
    cpu_seconds: int = 900        # the whole kernel (one notebook); nbgrader's per-cell timeout acts first
    file_size: int = 512 * 1024 ** 2
    processes: int = 512          # threads count too; per uid, and each student has a uid of its own

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


# ----------------------------------------------------------------- the grading side (translab.grading)

def grading_kernel(root: Path, work: Path, limits: Limits | None = None) -> tuple[dict, list[str]]:
    """Write the sandbox kernelspec under ``work`` and return (env, nbgrader args) that select it."""
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
        "argv": [sys.executable, "-m", "translab.sandbox", "--root", str(root), "--work", str(work),
                 "--limits", json.dumps(asdict(limits)), "--",
                 sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}",
                 "--IPKernelApp.extra_extensions=translab.sandbox"],
        "display_name": "translab grading sandbox",
        "language": "python",
        "metadata": {"debugger": False},
    }
    (kernels / "kernel.json").write_text(json.dumps(spec, indent=1), encoding="utf-8")
    jupyter_path = os.pathsep.join(filter(None, [str(work / "jupyter"), os.environ.get("JUPYTER_PATH")]))
    return {"JUPYTER_PATH": jupyter_path}, [f"--Execute.kernel_name={KERNEL_NAME}", "--KernelManager.transport=ipc"]


def _socket_prefix(work: Path, index: int) -> Path:
    return work / "ipc" / str(index) / "kernel"


def student_env(index: int) -> dict:
    """Per-student environment of its nbgrader process: the uid its kernels drop to when run as root."""
    return {"TRANSLAB_SANDBOX_UID": str(UID_BASE + index)}


def student_args(work: Path, index: int) -> list[str]:
    """Per-student nbgrader options: where its kernels' IPC sockets go (a folder the launcher gives the
    student's uid; an absolute path, since nbgrader and the kernel run in different folders)."""
    return [f"--KernelManager.ip={_socket_prefix(work, index)}"]


def kill_leftovers(env: dict) -> None:
    """Kill whatever a student's kernels left running (a fork storm's sleeping children, daemons).

    The student's uid is its own, so everything running as that uid is the student's: a child that
    becomes the uid and calls ``kill(-1, SIGKILL)`` ends all of it at once, however fast it forks.
    Root only (an ordinary user has no uid of the student's to aim at)."""
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

    This closes "monkeypatch the checker in an answer cell".  It cannot stop an answer that patches at call
    time, from inside the function the test calls (the test and the student share one process): that
    remains a known hole, in grader/expected_scores.csv."""
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


def _private_namespace(network: bool, user: bool) -> bool:
    """Enter a mount namespace of our own, whose mounts never propagate back to the machine's, and with
    ``network`` a network namespace of our own too (nothing to reach: its only interface, lo, is down).

    With ``user`` (an ordinary user), first a user namespace where our own uid, mapped to itself, may mount;
    False where the kernel refuses unprivileged user namespaces.  As root a refusal is an error."""
    uid, gid = os.getuid(), os.getgid()
    flags = CLONE_NEWNS | (CLONE_NEWNET if network else 0) | (CLONE_NEWUSER if user else 0)
    if _c().unshare(flags) != 0:
        if user:
            return False
        raise OSError(ctypes.get_errno(), f"unshare(CLONE_NEWNS{' | CLONE_NEWNET' if network else ''})")
    if user:
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
    _mount("none", "/", None, MS_REC | MS_PRIVATE)
    return True


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
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER = 0x00020000, 0x40000000, 0x10000000
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
    """What a student's kernel must not read: the gradebook (hidden tests, everyone's grades), the
    solutions, other students' submissions, results and feedback."""
    paths = [root / name for name in ("gradebook.db", ".nbgrader.log", "solutions", "submitted", "feedback",
                                      "downloaded", ".git")]
    if (root / "autograded").is_dir():  # the kernel's own folder is in there
        paths += [p for p in (root / "autograded").iterdir() if p.name != student]
    return [p for p in paths if p.exists()]


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
        _mount("tmpfs", str(cover), "tmpfs", MS_NOSUID | MS_NODEV, f"size=256m,mode={mode}")
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


def _private_views(home: Path, sockets: Path | None, course: Path) -> None:
    """Root's home (where pyenv may keep the interpreter), and as an ordinary user that user's home, empty
    except the interpreter, this package and the course, read-only; /tmp, /var/tmp and /dev/shm private to the
    kernel (a world-writable /tmp is the one place outside its HOME an unprivileged uid could leave files for
    the instructor), except the kernel's HOME and sockets."""
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
            keep = [path for path in (home, sockets) if path and shared in path.parents]
            keep += [p for p in needed if shared in p.parents]
            _cover_keeping(shared, keep, mode="1777", writable=True)
    if os.geteuid() != 0:  # the kernel keeps our uid: nothing to reach that we cannot
        return
    blocked = [path for path in needed | {home.parent} | ({sockets.parent} if sockets else set())
               if not _others_can_reach(path)]
    if blocked:
        raise OSError(f"the sandboxed kernel could not reach {blocked}: make them world-readable or grade "
                      "with --no-sandbox")


def _private_home(uid: int, work: Path, connection_file: str) -> tuple[str, Path]:
    """A HOME only ``uid`` can use, with a copy of the connection file (nbgrader's is readable by root only)."""
    home = Path(tempfile.mkdtemp(prefix=f"kernel-{uid}-", dir=work / "homes"))
    private = home / Path(connection_file).name
    shutil.copyfile(connection_file, private)
    if os.geteuid() == 0:
        for path in (home, private):
            os.chown(path, uid, uid)
    os.chmod(home, 0o700)
    return str(private), home


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


def _isolate(args: argparse.Namespace, kernel: list[str], env: dict) -> tuple[list[str], dict]:
    """Isolate this process as far as this machine allows; returns the kernel's command line and environment."""
    cwd = Path.cwd()  # nbgrader starts the kernel in autograded/<student>/<assignment>
    student = cwd.parent.name if cwd.parent.parent.name == "autograded" else None
    empty = args.work / "empty"
    if not empty.exists():
        empty.touch(mode=0o444)
    root = os.geteuid() == 0
    uid = int(env.get("TRANSLAB_SANDBOX_UID", UID_BASE)) if root else os.getuid()
    index = kernel.index("-f") + 1
    sockets = _socket_folder(kernel[index], args.work, uid if root else None)
    private_connection_file, home = _private_home(uid, args.work, kernel[index])
    # no network only where nbgrader reaches the kernel through Unix sockets: over TCP it could not
    if not _private_namespace(network=sockets is not None, user=not root):
        print("[translab.sandbox] this machine refuses unprivileged user namespaces: student code runs with "
              "the limits only, with your permissions and network (grade as root, or allow user namespaces)",
              file=sys.stderr, flush=True)
        return kernel, env
    kernel[index] = private_connection_file
    if not root:
        _read_only_everywhere()
        _writable(cwd)
    _hide(hidden_paths(args.root.resolve(), student), empty)
    _private_views(home, sockets, args.root)
    if root:
        _drop_to(uid)
    else:
        for path in filter(None, (home, sockets)):
            _writable(path)
        os.chdir(cwd)  # the working folder as mounted now, not the directory we started in
    env.update(HOME=str(home), TMPDIR=str(home), MPLCONFIGDIR=str(home / "matplotlib"),
               IPYTHONDIR=str(home / "ipython"), JUPYTER_RUNTIME_DIR=str(home / "runtime"))
    return kernel, env


def launch(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m translab.sandbox")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--limits", default="{}")
    parser.add_argument("kernel", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    kernel = args.kernel[1:] if args.kernel[:1] == ["--"] else args.kernel
    kernel, env = _isolate(args, kernel, {**os.environ, "TRANSLAB_SANDBOX": "1"})
    Limits(**json.loads(args.limits)).apply()
    os.execve(kernel[0], kernel, env)


if __name__ == "__main__":
    try:
        launch(sys.argv[1:])
    except Exception as error:  # before any student code ran: the grading machinery is at fault
        import traceback
        traceback.print_exc()
        print(f"[translab.sandbox] cannot start the grading kernel: {error!r}", file=sys.stderr, flush=True)
        sys.exit(1)
