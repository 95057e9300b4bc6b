"""The launcher: the kernelspec's command, which isolates its own process before it becomes the grading kernel.

``grader.isolation.sandbox`` decides the policy (limits, what is hidden, the uid, the status folder) on the batch's side;
this module applies it, in the process that is about to run student code, before any of it runs: the student's
cgroup, mount, IPC, network and PID namespaces, read-only mounts with the course's private parts covered,
private tmpfs for HOME and the temporary folders, the drop to the student's uid, the resource limits, then the
kernel itself (``exec``, or in a child the batch's ``grader.isolation.zygote`` forked).  Each step reports to the
student's status folder through descriptors opened before any isolation.

Why one file: the steps run in one process, in the order this file gives them, before any student code (the
notebook's stage of translab mounted before the course's private folders are covered, the uid dropped last); split,
that order would be spread over modules that each look safe alone.
"""
from __future__ import annotations

import argparse
import ctypes
import importlib.util
import json
import os
import re
import sys
import tempfile
from pathlib import Path

from translab.contract import SANDBOX_STATUS_ENV
from translab.paths import LAB_HOME, cache_dir, data_dir

from grader.isolation import cgroups, kernel_guard, kernel_stages  # noqa: F401 - kernel_guard: the kernel's extension, in its view (grader_files)
from grader.isolation.kernel_environment import kernel_environment, launcher_environment
from grader.isolation.processes import (CLONE_NEWIPC, CLONE_NEWNET, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWUSER, MS_BIND,
                                        MS_NOATIME, MS_NODEV, MS_NODIRATIME, MS_NOEXEC, MS_NOSUID, MS_PRIVATE,
                                        MS_RDONLY, MS_REC, MS_RELATIME, MS_REMOUNT, MS_STRICTATIME,
                                        PR_SET_DEATHSIG_KILL, PR_SET_DUMPABLE, enter_pid_namespace, prctl)
from grader.isolation.sandbox import LAUNCH_RECORDS, PRIVATE_SIZE, UID_BASE, Limits, hidden_paths, others_can_reach
from grader.isolation.zygote import FONT_LISTS, font_list_folder, run_through, zygote_folder

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
    PID namespace for our children (``grader.isolation.processes``), and with ``network`` a network namespace of our own
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
    if user:  # our /proc files our own for as long as it takes to write the maps, then not dumpable again
        prctl(PR_SET_DUMPABLE, 1)
        Path("/proc/self/setgroups").write_text("deny")
        Path("/proc/self/uid_map").write_text(f"{uid} {uid} 1")
        Path("/proc/self/gid_map").write_text(f"{gid} {gid} 1")
        prctl(PR_SET_DUMPABLE, 0)
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


def _stage_over_library(work: Path, stage: str | None, root: Path) -> None:
    """The notebook's stage of translab (``grader.isolation.kernel_stages``) over every full copy the kernel could import,
    read-only: the kernel sees the library a student of that week had, at the paths it imports from."""
    source = kernel_stages.library(work, int(stage) if stage and stage.isdigit() else 1)
    if not (source / "__init__.py").is_file():
        raise OSError(f"the batch's stage of translab is missing ({source})")
    for target in kernel_stages.library_folders(root):
        _mount(str(source), str(target), None, MS_BIND)
        _mount("none", str(target), None, MS_REMOUNT | MS_BIND | MS_RDONLY | _mount_flags().get(str(target), 0))


def _read_only_everywhere() -> None:
    """Every mount read-only (our uid's own files included), in our private namespace."""
    for target, flags in _mount_flags().items():
        _mount("none", target, None, MS_REMOUNT | MS_BIND | MS_RDONLY | flags)


def _writable(path: Path) -> None:
    """``path`` writable again below a read-only mount: a bind mount of its own, remounted read-write (allowed:
    the read-only flag was set in our namespace, not inherited from the machine's)."""
    _mount(str(path), str(path), None, MS_BIND)
    _mount("none", str(path), None, MS_REMOUNT | MS_BIND | _mount_flags().get(str(path), 0))


def _hide(paths: list[Path], empty: Path) -> None:
    """Cover each path by an empty read-only tmpfs (folders) or an empty read-only file (not /dev/null: a
    device stays writable on a read-only mount), in the kernel's private namespace: nothing on disk changes."""
    for path in paths:
        if path.is_dir():
            _mount("tmpfs", str(path), "tmpfs", MS_RDONLY | MS_NOSUID | MS_NODEV, "size=4k,mode=000")
        else:  # reads see an empty file, writes fail (EROFS)
            _mount(str(empty), str(path), None, MS_BIND)
            _mount("none", str(path), None, MS_REMOUNT | MS_BIND | MS_RDONLY)


def _cover_keeping(cover: Path, keep: list[Path], mode: str = "755", writable: bool = False) -> None:
    """Cover ``cover`` with an empty tmpfs in which only ``keep`` reappear (bind mounts through file
    descriptors opened before the cover, so they need no staging folder outside it).  A path inside another
    kept path comes with it (the bind is recursive); binding it again would make the folders between the two
    unwritable, or hide the inner one, as when the venv, the course and the batch folder are in the repository."""
    keep = [path for path in sorted(set(keep)) if not any(other in path.parents for other in keep)]
    fds = [os.open(path, os.O_PATH) for path in keep]
    files = {path for path in keep if path.is_file()}  # a file kept alone: its mount point is a file too
    try:
        _mount("tmpfs", str(cover), "tmpfs", MS_NOSUID | MS_NODEV, f"size={PRIVATE_SIZE},mode={mode}")
        for fd, path in zip(fds, keep):
            if path in files:
                path.parent.mkdir(parents=True, exist_ok=True)
                path.touch()
            else:
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


def _autograded_view(root: Path, cwd: Path) -> None:
    """The course's autograded/ covered whole, only the kernel's own folder (``cwd``) kept: the classmates graded
    before it, beside it (``JOBS=2``, a worker's threads: their folders appear after this kernel started) and after
    it are out of its sight, their answers and their hidden tests with them."""
    autograded, own = root / "autograded", cwd.resolve()
    if autograded.is_dir():
        _cover_keeping(autograded, [own] if autograded in own.parents else [])


# what of the kernel's working folder (nbgrader's copy of the submission) it does not see: the notebooks, the one it
# runs and the others, graded or not (the next notebook's kernel starts while this one runs), and their checkpoints
NOT_IN_OWN_FOLDER = ("*.ipynb", ".ipynb_checkpoints")


def _own_folder_view(cwd: Path) -> None:
    """The kernel's working folder with the student's other files only (``NOT_IN_OWN_FOLDER`` covered): the
    kernel gets its notebook's cells from nbgrader, never from a file, and no notebook's copy in this folder."""
    keep = [entry for entry in cwd.iterdir() if not any(entry.match(pattern) for pattern in NOT_IN_OWN_FOLDER)]
    _cover_keeping(cwd, keep)


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


# what a kernel sees of the machine as it is: the system's programs, libraries and settings, and the kernel API files
SYSTEM_FOLDERS = {"bin", "sbin", "lib", "lib32", "lib64", "libx32", "usr", "etc", "dev", "proc", "sys"}
SHARED_FOLDERS = (Path("/tmp"), Path("/var/tmp"), Path("/dev/shm"))


def _mapped_folders() -> set[Path]:
    """The folders of every file this process has mapped: the interpreter's and its libraries' (torch's, and
    wherever a Nix or Homebrew Python keeps the ones it links), which the kernel forked from it needs too."""
    found = set()
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith("/") and not fields[5].endswith(" (deleted)"):
            found.add(Path(fields[5]).parent)
    return {folder for folder in found if len(folder.parts) > 1 and folder.parts[1] not in SYSTEM_FOLDERS}


# The grader's modules a kernel imports: the extension ``grader.isolation.kernel_guard``, and with it this package and
# what it imports (grader.course.withheld names what the stages hold back).  A zygote's launcher has imported more
# (the course's variants, the gradebook): none of those is the kernel's.
KERNEL_GRADER_MODULES = ("grader", "grader.moved", "grader.course", "grader.course.withheld", "grader.isolation")


def grader_files() -> set[Path]:
    """The grader's own files a kernel imports (``KERNEL_GRADER_MODULES`` and the modules of ``grader.isolation``),
    each with its bytecode.  Nothing else of the grader (its tests, testing tools and references hold answers, the
    course's code reads the gradebook) is in the kernel's view."""
    found = set()
    for name, module in list(sys.modules.items()):
        if name not in KERNEL_GRADER_MODULES and not name.startswith("grader.isolation."):
            continue
        source = Path(getattr(module, "__file__", None) or "/").resolve()
        if source.suffix == ".py":
            found.add(source)
            cached = Path(importlib.util.cache_from_source(str(source)))
            if cached.is_file():
                found.add(cached)
    return found


def lab_files(root: Path) -> set[Path]:
    """What of the lab a kernel reads: the folders its translab is imported from (each covered by the notebook's
    stage), the tokenizer and checkpoint (``artifacts/``), the measured figures (``results/``), the data and the
    downloads' cache."""
    return {*kernel_stages.library_folders(root), LAB_HOME / "artifacts", LAB_HOME / "results", data_dir(), cache_dir()}


def kernel_allow_list(home: Path, sockets: Path | None, root: Path, cwd: Path) -> set[Path]:
    """Every path a grading kernel sees outside the system's folders (``SYSTEM_FOLDERS``), with all below it: the
    interpreter and its libraries, the grader's files it imports, the lab's files, its HOME, its sockets and its
    working folder.  Each path as named and as resolved (a data folder that is a link keeps both)."""
    needed = {Path(sys.base_prefix), Path(sys.prefix), *_mapped_folders(), *grader_files(), *lab_files(root)}
    needed = {path.absolute() for path in needed if path.exists()} | {path.resolve() for path in needed if path.exists()}
    return needed | {p for p in (home, sockets, cwd) if p}


def _private_views(home: Path, sockets: Path | None, root: Path, cwd: Path, unreadable: Path) -> None:
    """Every top folder of the machine but the system's (``SYSTEM_FOLDERS``) covered by an empty read-only tmpfs
    in which only what the kernel needs reappears (``kernel_allow_list``): not the course, not the checkout, only
    the paths of them named there.  Other checkouts and courses, the course's gradebook, reports, grades and
    classmates' results, last year's submissions, other users' homes, /srv, /opt, /var and /run (a hub's database,
    Jupyter servers' runtime files) are then unreachable without anyone having to name them.  /tmp, /var/tmp and
    /dev/shm are private to the kernel and writable (a world-writable /tmp is the one place outside its HOME an
    unprivileged uid could leave files for the instructor)."""
    interpreter = {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()}
    needed = kernel_allow_list(home, sockets, root, cwd)
    shared = [path for path in SHARED_FOLDERS if path.is_dir()]
    # the files at the top of the machine (a container's description, an installer left there): none is the kernel's,
    # each covered by a file its uid cannot open
    _hide([top for top in Path("/").iterdir() if top.is_file() and not top.is_symlink()], unreadable)
    for top in sorted(Path("/").iterdir()):
        if top.name in SYSTEM_FOLDERS or top in shared or top.is_symlink() or not top.is_dir():
            continue
        if top not in needed:
            _cover_keeping(top, [p for p in needed | set(shared) if top in p.parents])  # /var/tmp: covered below
    for folder in SHARED_FOLDERS:
        if folder.is_dir():
            _cover_keeping(folder, [p for p in needed if folder in p.parents], mode="1777", writable=True)
    if os.geteuid() != 0:  # the kernel keeps our uid: nothing to reach that we cannot
        return
    blocked = [path for path in interpreter | {home.parent} | ({sockets.parent} if sockets else set())
               if not others_can_reach(path)]
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


def _isolate(args: argparse.Namespace, kernel: list[str], settings: dict, env: dict,
             status: _Status) -> tuple[list[str], dict, str, str]:
    """Isolate this process as far as this machine allows, by the batch's ``settings`` (the launcher's environment:
    uid, cgroup, stage); returns the kernel's command line and environment (``env``, the allow-listed one, with its
    private folders),
    the mode reached (``root``, ``user namespace`` or ``limits only``), and whether it joined the student's cgroup
    (``joined``, or why not).  In a PID namespace, what returns is the namespace's PID 2 (``grader.isolation.processes``);
    ``status`` learns its pid and whether it has a namespace."""
    cwd = Path.cwd()  # nbgrader starts the kernel in autograded/<student>/<assignment>
    empty, unreadable = args.work / "empty", args.work / "unreadable"
    for path, mode in ((empty, 0o444), (unreadable, 0o000)):
        if not path.exists():
            path.touch(mode=mode)
    root = os.geteuid() == 0
    uid = int(settings.get("TRANSLAB_SANDBOX_UID", UID_BASE)) if root else os.getuid()
    group = cgroups.join(settings)  # first: its children inherit it, and /sys/fs/cgroup is read-only below
    stage = settings.get(kernel_stages.STAGE_ENV)
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
    _stage_over_library(args.work.resolve(), stage, args.root)
    _own_proc(status.pid_namespace)
    # and the batch's zygotes, whose sockets fork kernels and checkers (grader.isolation.zygote), and the stages of translab,
    # wherever the batch folder is
    private = [zygote_folder(args.work.resolve()), kernel_stages.stages_folder(args.work.resolve())]
    _hide(hidden_paths(args.root.resolve()) + [p for p in private if p.exists()], empty)
    _autograded_view(args.root.resolve(), cwd)
    _own_folder_view(cwd)
    _private_views(home, sockets, args.root, cwd, unreadable)
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
            print(f"[grader.isolation.sandbox] {record}", file=sys.stderr, flush=True)

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
    import importlib
    import runpy
    import types
    # Not dumpable (the uid change cleared it, and it stays so): no other process of the student's uid reads this
    # one's memory or /proc files.  And none of translab as the zygote's imports left it (the launcher's contract
    # and paths): the kernel imports the stage mounted over it.
    for name in [name for name in sys.modules if name == "translab" or name.startswith("translab.")]:
        del sys.modules[name]
    sys.path_importer_cache.clear()
    importlib.invalidate_caches()
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
    zygote to do that in a child it forks (``grader.isolation.zygote.run_through``) and stay beside it; the child calls this
    with ``launcher``, the pid of the process it serves, and runs the kernel in itself rather than exec it."""
    parser = argparse.ArgumentParser(prog="python -m grader.isolation.launcher")
    parser.add_argument("--root", type=Path, required=True)
    parser.add_argument("--work", type=Path, required=True)
    parser.add_argument("--limits", default="{}")
    parser.add_argument("--zygote", type=Path)
    parser.add_argument("kernel", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    kernel = args.kernel[1:] if args.kernel[:1] == ["--"] else args.kernel
    if args.zygote is not None and launcher is None:
        here = ["--root", str(args.root), "--work", str(args.work), "--limits", args.limits, "--", *kernel]
        code = run_through(args.zygote, here, launcher_environment(os.environ))
        if code is not None:
            sys.exit(code)
        # no zygote answered: start the kernel here, as without one
    settings = dict(os.environ)
    env = {**kernel_environment(settings), "TRANSLAB_SANDBOX": "1"}  # never the batch's whole environment
    status = _Status(settings.get(SANDBOX_STATUS_ENV))
    stage = "isolating"
    in_process = launcher is not None and _runs_here(kernel)
    try:
        kernel, env, mode, group = _isolate(args, kernel, settings, env, status)
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
