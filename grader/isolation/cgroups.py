"""A control group per student: equal CPU shares, a memory and a task limit, and one kill for everything.

Per-process limits (``sandbox.Limits``) cannot stop a student who starts many processes, each under every limit:
400 busy processes in sessions of their own once took a classmate's kernel past nbgrader's per-cell timeout.  A
batch therefore makes a group of its own (``translab-<pid>``, below the batch's own group in each hierarchy), and
in it one group per student, which that student's kernels, everything they fork and its checker join
(``join``, before any student code runs).  Student groups have equal CPU weights, so a student with 400 processes
has the CPU share of one; ``memory`` and ``tasks`` (``sandbox.Limits``) bound what the group holds at once; and
``kill`` ends every process in the group, however it detached itself.

cgroup v2 is used where it has the controllers (a delegated group: ``systemd-run --scope -p Delegate=yes``, or
a container that owns its cgroup), and otherwise the v1 hierarchies that do (a "hybrid" machine), with the v2
group, when one exists, still used for ``cgroup.kill``.  Where none can be written (an ordinary user without
delegation) the batch says why (``Cgroups.problem``), every launch record repeats it, and the per-process limits
apply alone.  Anchors: PrairieLearn's grader containers (0.9 CPU, 2 GiB, 1,024 PIDs), otter's Docker containers.
"""
from __future__ import annotations

import errno
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("cpu", "memory", "pids")
ENV = "TRANSLAB_SANDBOX_CGROUPS"  # the student's group folders (os.pathsep-separated), set by the batch
PROBLEM_ENV = "TRANSLAB_SANDBOX_CGROUP_PROBLEM"  # why there are none
KILL_SECONDS = 10.0
LEAVES = ("kernel", "checker")  # the two groups in each student's: who joins which (``join``)


@dataclass(frozen=True)
class Hierarchy:
    """One mounted cgroup hierarchy, and where this process is in it."""
    version: int           # 1 or 2
    own: Path              # this process's group, as a folder
    controllers: tuple     # the controllers among CONTROLLERS that limits are set through here


def _hierarchies() -> list[Hierarchy]:
    """The hierarchies mounted here, with this process's group in each (/proc/self/mountinfo, /proc/self/cgroup)."""
    memberships = {}
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        number, names, path = line.split(":", 2)
        memberships[frozenset(names.split(",")) if names else "v2"] = path
    found = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        before, after = line.split(" - ", 1)
        fields, (fstype, _, options) = before.split(), after.split()[:3]
        mount_root, mount_point = fields[3], fields[4]
        if fstype == "cgroup2":
            path = memberships.get("v2")
            names = set(CONTROLLERS)
        elif fstype == "cgroup":
            names = set(options.split(","))
            path = next((p for key, p in memberships.items() if key != "v2" and key <= names), None)
        else:
            continue
        if path is None or not (path + "/").startswith(mount_root.rstrip("/") + "/"):
            continue  # a mount of another group's subtree: not ours to use
        own = Path(mount_point) / os.path.relpath(path, mount_root)
        if fstype == "cgroup2":
            available = set(_read(own / "cgroup.controllers").split())
            found.append(Hierarchy(2, own, tuple(c for c in CONTROLLERS if c in available)))
        else:
            found.append(Hierarchy(1, own, tuple(c for c in CONTROLLERS if c in names)))
    return found


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def _write(path: Path, value: str) -> None:
    with open(path, "w") as handle:
        handle.write(value)


class Cgroups:
    """The batch's groups: ``with Cgroups(limits) as groups``, then ``groups.student(index)`` for each student's
    environment, ``kill(folders_of(env))`` after each nbgrader run; on exit everything is killed and removed."""

    def __init__(self, memory: int, tasks: int):
        self.memory, self.tasks = memory, tasks
        self.batches: list[tuple[Hierarchy, Path]] = []  # (hierarchy, the batch's folder in it)
        self.problem: str | None = None
        self._students: dict[int, list[Path]] = {}

    def __enter__(self) -> "Cgroups":
        try:
            self._make_batch_groups()
        except OSError as error:
            self._remove_all()
            self.batches = []
            self.problem = (f"no cgroup per student ({error}); each kernel has the per-process limits only: grade "
                            "as root, or in a delegated cgroup (systemd-run --user --scope -p Delegate=yes)")
        return self

    def _make_batch_groups(self) -> None:
        hierarchies = _hierarchies()
        v2 = next((h for h in hierarchies if h.version == 2), None)
        chosen: list[Hierarchy] = []
        if v2 is not None and set(v2.controllers) == set(CONTROLLERS):
            chosen.append(v2)
        else:
            by_controller = {c: h for h in hierarchies if h.version == 1 for c in h.controllers}
            missing = [c for c in CONTROLLERS if c not in by_controller]
            if missing:
                raise OSError(errno.ENOENT, f"no cgroup hierarchy has the {', '.join(missing)} controller")
            chosen += list(dict.fromkeys(by_controller[c] for c in CONTROLLERS))
            if v2 is not None:  # membership and cgroup.kill (Linux 5.14) only
                chosen.append(Hierarchy(2, v2.own, ()))
        for hierarchy in chosen:
            _remove_stale(hierarchy.own)
            folder = hierarchy.own / f"translab-{os.getpid()}"
            if hierarchy.version == 2 and hierarchy.controllers:
                _enable(hierarchy.own, hierarchy.controllers)
            folder.mkdir(mode=0o755)
            self.batches.append((hierarchy, folder))
            if hierarchy.version == 2 and hierarchy.controllers:
                _enable(folder, hierarchy.controllers)

    def __exit__(self, *_) -> None:
        self._remove_all()

    def _remove_all(self) -> None:
        for index in list(self._students):
            self.kill(index)
            for folder in self._students.pop(index):
                _rmdir(folder)
        for _, folder in self.batches:
            _rmdir(folder)

    @property
    def mode(self) -> str:
        """How the groups are made, for the batch's log: ``cgroup v2``, ``cgroup v1 (+v2 for kill)``, or none."""
        if not self.batches:
            return "none"
        versions = {h.version for h, _ in self.batches if h.controllers}
        return "cgroup v2" if versions == {2} else "cgroup v1" + (
            " (+v2 for kill)" if any(h.version == 2 for h, _ in self.batches) else "")

    def student(self, index: int) -> dict:
        """The environment that puts a student's kernels and checker in a group of their own (``join``): the
        student's limits on ``student-<index>``, and in it one leaf for its kernels and one for its checker, with
        equal weights, so that the student's own busy processes cannot starve the checker that grades them."""
        if not self.batches:
            return {PROBLEM_ENV: self.problem or "no cgroups"}
        folders = []
        for hierarchy, batch in self.batches:
            folder = batch / f"student-{index}"
            folder.mkdir(mode=0o755, exist_ok=True)
            folders.append(folder)
            self._students[index] = folders
            for controller in hierarchy.controllers:
                for name, value in self._settings(hierarchy.version, controller):
                    if name != "memory.swap.max" or (folder / name).exists():  # no swap accounting: no swap file
                        _write(folder / name, value)
            if hierarchy.version == 2 and "cpu" in hierarchy.controllers:
                _enable(folder, ("cpu",))
            for leaf in LEAVES:
                (folder / leaf).mkdir(mode=0o755, exist_ok=True)
        return {ENV: os.pathsep.join(map(str, folders))}

    def _settings(self, version: int, controller: str) -> list[tuple[str, str]]:
        if controller == "cpu":  # the same weight for every student: the default, written so it is known
            return [("cpu.weight", "100")] if version == 2 else [("cpu.shares", "1024")]
        if controller == "memory":
            return [("memory.max", str(self.memory)), ("memory.swap.max", "0")] if version == 2 else \
                [("memory.limit_in_bytes", str(self.memory))]
        return [("pids.max", str(self.tasks))]

    def kill(self, index: int) -> list[int]:
        return kill(self._students.get(index, []))


def folders_of(env) -> list[Path]:
    """A student's group folders, as the batch named them in its environment."""
    return [Path(folder) for folder in (env.get(ENV) or "").split(os.pathsep) if folder]


def processes(folders: list[Path]) -> set[int]:
    """The pids in a student's group and its leaves (any hierarchy)."""
    return {int(pid) for folder in folders for group in (folder, *(folder / leaf for leaf in LEAVES))
            for pid in _read(group / "cgroup.procs").split()}


def kill(folders: list[Path], timeout: float = KILL_SECONDS) -> list[int]:
    """Kill everything in a student's group; returns the pids still there after ``timeout`` (none, unless the
    machine is failing)."""
    for folder in folders:
        if (folder / "cgroup.kill").exists():
            try:
                _write(folder / "cgroup.kill", "1")  # atomic: a fork storm cannot outrun it
            except OSError:
                pass
    deadline = time.monotonic() + timeout
    while True:
        left = processes(folders)
        if not left or time.monotonic() > deadline:
            return sorted(left)
        for pid in left:  # v1: one by one until none is left (pids.max bounds how many there can be)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.02)


def join(env, leaf: str = "kernel", pid: int = 0) -> str:
    """Put ``pid`` (0: this process) into the ``leaf`` of the student's group the batch named in ``env``, before
    any student code runs (as root, before dropping to the student's uid; its children inherit it).  Returns what
    happened, for the launch record: ``joined`` or why not."""
    folders = folders_of(env)
    if not folders:
        return env.get(PROBLEM_ENV) or "no cgroup named by the batch"
    for folder in folders:
        _write(folder / leaf / "cgroup.procs", str(pid or os.getpid()))
    return "joined"


def _enable(folder: Path, controllers) -> None:
    """Enable ``controllers`` for the children of a v2 group (refused while it has processes of its own)."""
    enabled = set(_read(folder / "cgroup.subtree_control").split())
    wanted = [c for c in controllers if c not in enabled]
    if wanted:
        _write(folder / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))


def _rmdir(folder: Path, tries: int = 50) -> None:
    """Remove a group once its killed processes are reaped (EBUSY until then)."""
    for child in [p for p in folder.glob("*") if p.is_dir()] if folder.is_dir() else []:
        _rmdir(child, tries)
    for _ in range(tries):
        try:
            folder.rmdir()
            return
        except FileNotFoundError:
            return
        except OSError as error:
            if error.errno != errno.EBUSY:
                return
            time.sleep(0.02)


def _remove_stale(own: Path) -> None:
    """The empty groups of batches that ended without removing theirs (killed): a group's name has its pid."""
    for folder in own.glob("translab-*"):
        pid = folder.name.split("-", 1)[1]
        if pid.isdigit() and not Path(f"/proc/{pid}").exists():
            _rmdir(folder, tries=1)
