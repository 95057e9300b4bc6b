"""The next notebook's kernel, started while this notebook runs (issue 53's phase "kernel start").

An nbgrader process grades one student's notebooks in turn, each in a kernel of its own, and a kernel's start (the
launcher, the zygote's fork, the isolation, ipykernel's set-up: about 0.45 s) came between two notebooks while the
second core sat idle.  ``GuardedExecute`` now starts notebook k+1's kernel and checker as soon as notebook k's kernel
is ready; notebook k+1 takes them if they were started for it (its name, its folder) and are still alive, and
starts its own otherwise.  At most one waits at a time; whatever waits when the process ends is killed.

Why this keeps a student's notebooks apart: the waiting kernel runs no student code before its notebook begins, and
by then notebook k's kernel has been killed with everything it started (its PID namespace).  While both live, the
running kernel cannot reach into the waiting one: each has PID, mount, IPC and network namespaces of its own (no
``/proc`` entry of the other, no file of its private HOME or ``/tmp``, no abstract socket), neither is dumpable, and
the key that signs the waiting kernel's messages is only in its private HOME and the instructor's runtime folder.
What the running kernel can reach is the student's socket folder, which both share.  A checker's socket there that is
no longer the checker's (gone, renamed, replaced by one of the student's uid, or no longer listening) is found when the
next notebook begins, and so is a kernel that no longer runs: that notebook starts a kernel and checker of its own.
A waiting kernel whose own sockets were removed or replaced never answers: its notebook waits ``HANDOFF_WAIT``
seconds for it, then starts its own (corpus case ``sabotages_next_kernel``).
"""
from __future__ import annotations

import atexit
import contextlib
import logging
import os
import socket
import stat
import subprocess
from dataclasses import dataclass

from jupyter_client.manager import KernelManager
from nbclient.util import run_sync

KILL_WAIT = 5.0     # s for a killed kernel's process to end (jupyter_client waits as long)
HANDOFF_WAIT = 10.0  # s for a waiting kernel to answer its notebook; a healthy one has had a notebook's time to start


@dataclass
class Waiting:
    """A kernel and its checker, started for ``notebook``, whose kernel runs in ``folder``."""
    notebook: str
    folder: str
    km: KernelManager
    checker: object  # grader.grading.verdicts.Checker or ForkedChecker

    def end(self) -> None:
        end_kernel(self.km)
        try:
            self.checker.stop()
        except Exception:  # noqa: BLE001 - its process ends with this one anyway
            pass


_waiting: Waiting | None = None  # one nbgrader process, one student: at most one kernel waits


def held() -> Waiting | None:
    """The kernel that waits, if any."""
    return _waiting


def keep(waiting: Waiting) -> None:
    """Hold ``waiting`` for its notebook (ending any other that waits)."""
    global _waiting
    discard()
    _waiting = waiting


def take(notebook: str, folder: str, log: logging.Logger) -> Waiting | None:
    """The kernel that waits for ``notebook`` in ``folder``, if one does, runs and has its checker; any other is
    ended (and said so in ``log`` when it was started for this notebook)."""
    global _waiting
    waiting, _waiting = _waiting, None
    if waiting is None:
        return None
    if waiting.notebook != notebook or waiting.folder != folder:
        waiting.end()
        return None
    why = "its kernel ended" if not _alive(waiting.km) else "its checker's socket is not the checker's" \
        if not _listens(waiting.checker) else ""
    if not why:
        return waiting
    log.warning("the kernel started ahead for %s is not used (%s): starting another", notebook, why)
    waiting.end()
    return None


def discard() -> None:
    """End the kernel that waits, if any (the process ends, or the notebooks went another way)."""
    global _waiting
    waiting, _waiting = _waiting, None
    if waiting is not None:
        waiting.end()


atexit.register(discard)  # the nbgrader process runs its exit handlers (grader.grading.nbgrader_process)


def _alive(km: KernelManager) -> bool:
    try:
        return bool(km.has_kernel and run_sync(km.is_alive)())
    except Exception:  # noqa: BLE001 - a kernel we cannot ask is no kernel to grade with
        return False


def _listens(checker) -> bool:
    """Whether the checker's socket is still its own: bound, a socket, the grader's (as root, the student's uid
    owns the folder but could not make a file of root's), and answering a connection (the checker takes one that
    sends nothing for a kernel that broke the protocol, and waits for the next)."""
    try:
        checker.ready()
        found = os.lstat(checker.path)
        if not stat.S_ISSOCK(found.st_mode) or (os.geteuid() == 0 and found.st_uid != 0):
            return False
        with contextlib.closing(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)) as probe:
            probe.settimeout(5)
            probe.connect(str(checker.path))
        return True
    except Exception:  # noqa: BLE001 - gone, refused, or the checker process ended: not the one to grade with
        return False


def end_kernel(km: KernelManager | None, kc=None) -> None:
    """Kill a notebook's kernel (nothing in it needs a clean exit) and close its client.  jupyter_client's kill
    checks for the end every 0.1 s, and a killed kernel has ended within a millisecond: waiting on its process
    first saves about 0.1 s a notebook (issue 53's phase "kernel stop")."""
    try:
        if kc is not None:
            kc.stop_channels()
        if km is not None and km.has_kernel:
            process = getattr(km.provisioner, "process", None)
            if process is not None:
                run_sync(km.provisioner.kill)()
                try:
                    process.wait(timeout=KILL_WAIT)
                except subprocess.TimeoutExpired:  # jupyter_client's own wait below takes over
                    pass
            run_sync(km.shutdown_kernel)(now=True)
    except Exception:  # already gone: the batch ends whatever the student's uid left anyway
        pass
