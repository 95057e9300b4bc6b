"""The sandbox as a batch holds it, so that the batch needs nothing else of ``grader.isolation``.

``BatchSandbox`` is what a batch sets up once: a block of uids, the kernels' and the checkers' zygotes, the
kernelspec and the stages of translab, a cgroup per student, and the folders a uid could leave files in.
``StudentSandbox`` is one student's share, which the batch asks for three things: the environment and nbgrader
options that select it, to kill what is left after each nbgrader run, and at the end what the launcher reported and
what the uid left.  With ``enabled=False`` (``--no-sandbox``) both keep their shape and do nothing.
"""
from __future__ import annotations

import contextlib
import shutil
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from translab.contract import UNSANDBOXED_ENV

from grader.isolation import sandbox
from grader.isolation.cgroups import Cgroups
from grader.isolation.zygote import Zygote


@dataclass
class LaunchReport:
    """What the launcher wrote, outside the kernel's reach, about each kernel start of one student."""
    records: list[dict] = field(default_factory=list)
    output_tail: str = ""  # what the kernels printed: student-controlled, shown, never interpreted

    @property
    def failures(self) -> list[str]:
        return sandbox.launch_failures(self.records)

    @property
    def modes(self) -> list[str]:
        """How isolated its kernels ran (``limits only`` where user namespaces are refused)."""
        return sorted({r["mode"] for r in self.records if r.get("ok") and r.get("mode")})


@dataclass
class StudentSandbox:
    env: dict  # what the student's nbgrader process adds to its environment: uid, cgroup, status and checker folders
    args: list[str]  # nbgrader options that select the sandbox's kernel (and where its sockets go)
    status: Path | None = None  # the launcher's reports; None without the sandbox
    sockets: Path | None = None
    uid: int | None = None  # root's batches: the student's own uid
    # where a uid could leave files (``sandbox.world_writable_folders``), walked while the batch goes on
    shared_folders: Future | None = None

    def kill_leftovers(self) -> None:
        """End what the student's kernels left running (after every nbgrader run: a hung kernel's children)."""
        sandbox.kill_leftovers(self.env)

    def report(self) -> LaunchReport | None:
        if self.status is None:
            return None
        return LaunchReport(sandbox.launch_records(self.status), sandbox.kernel_output_tail(self.status))

    def clean_up(self, grace: float) -> list[str]:
        """Remove the student's sockets and reports, and return what its uid still has after ``grace`` seconds
        of killing (a fork storm's 500 processes, each forked from a kernel that shares the zygote's 1-2 GB of
        mappings, take a few seconds to go)."""
        self.kill_leftovers()
        for folder in (self.status, self.sockets):
            if folder is not None and folder.exists():
                shutil.rmtree(folder, ignore_errors=True)
        if self.uid is None:
            return []
        deadline = time.monotonic() + grace
        while True:
            left = sandbox.leftovers(self.uid, self.shared_folders.result() if self.shared_folders else None)
            if not left or time.monotonic() > deadline:
                return left
            self.kill_leftovers()
            time.sleep(0.1)


class BatchSandbox:
    """One batch's walls, set up in ``work`` (the batch's scratch folder) for the course at ``root``;
    ``base_env`` is the environment the zygotes start with (nbgrader's)."""

    def __init__(self, root: Path, work: Path, base_env: dict, enabled: bool = True):
        self.root, self.work, self.base_env, self.enabled = root, work, base_env, enabled
        self._stack = contextlib.ExitStack()
        self.env: dict = {}
        self.args: list[str] = []
        self.groups: Cgroups | None = None
        self.shared_folders: Future | None = None
        self._checkers: Zygote | None = None

    def __enter__(self) -> "BatchSandbox":
        stack = self._stack.__enter__()
        try:
            self.uids = stack.enter_context(sandbox.UidBlock())
            if self.enabled:
                self._start()
        except BaseException:
            self._stack.close()
            raise
        return self

    def _start(self) -> None:
        stack = self._stack
        # the kernels' zygote (no translab: each kernel imports its notebook's stage), with what the notebooks import
        # later too (grader.isolation.zygote's LATER), and the checkers', which it forks once torch is imported, held
        # until the batch's own imports are done (``release_checkers``: the first test cell needs it last).  First,
        # so that their imports (3 s) overlap what follows; they end before the scratch folder
        kernels = stack.enter_context(Zygote(self.work, self.base_env, self.root, checkers=True))
        zygote, self._checkers = kernels.path, kernels.checkers
        checkers = self._checkers.path
        self.env, self.args = sandbox.grading_kernel(self.root, self.work, zygote=zygote, checkers=checkers)
        limits = sandbox.Limits()
        self.groups = stack.enter_context(Cgroups(limits.memory, limits.tasks))
        print(f"[autograde] a cgroup per student: {self.groups.problem or self.groups.mode}", flush=True)
        # a walk of /tmp and the like (0.2-0.4 s on a machine whose /tmp holds much), needed after the first student
        walker = stack.enter_context(ThreadPoolExecutor(max_workers=1, thread_name_prefix="translab-shared-folders"))
        self.shared_folders = walker.submit(sandbox.world_writable_folders, skip=self.work)

    def __exit__(self, *exc) -> None:
        self._stack.__exit__(*exc)

    def release_checkers(self) -> None:
        """Let the checkers' zygote import (``grader.isolation.zygote.HOLD_MAX`` seconds after it started, at the latest)."""
        if self._checkers is not None:
            self._checkers.release()

    @property
    def capacity(self) -> int:
        """How many students (the canary included) one batch can grade: each has an index of the uid block."""
        return sandbox.UID_BLOCK - 1

    def student(self, index: int) -> StudentSandbox:
        """The walls of the batch's ``index``-th student: a uid, a status folder and a cgroup of its own."""
        if not self.enabled:  # asked for (--no-sandbox): the nbgrader config refuses it otherwise
            return StudentSandbox({UNSANDBOXED_ENV: "1"}, [])
        status = sandbox.status_folder(self.work, index)
        uid = self.uids.uid(index)
        env = {**self.env, **sandbox.student_env(uid, status, self.work, index), **self.groups.student(index)}
        return StudentSandbox(env, self.args + sandbox.student_args(self.work, index), status,
                              sandbox.socket_prefix(self.work, index).parent, uid, self.shared_folders)
