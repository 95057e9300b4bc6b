"""The processes between nbgrader and a student's kernel, and the PID namespace the kernel lives in.

A kernel in a PID namespace of its own cannot see or signal any process outside it (not the launcher, the
zygote, the batch or a classmate's kernel, whatever its uid), and when the namespace's first process ends the
Linux kernel kills everything left in it: no process the student started, detached or not, outlives the kernel.
That first process is not the student's kernel but a small *init* in front of it (as ``docker --init`` puts
tini), because PID 1 has two duties ipykernel does not do: it reaps orphans (else each stays a zombie and
counts against the student's process limit) and it ignores every signal it has no handler for, from inside
the namespace even SIGKILL.  So::

    nbgrader -> launcher [-> zygote's child] = keeper  (outside the namespace: the pid nbgrader and the zygote know)
                                                 -> init   (PID 1: root, or the instructor in a user namespace)
                                                      -> kernel (PID 2: the student's uid)

Each passes the interrupt and termination signals on to the next and exits with the kernel's status; each dies
with its parent (``PR_SET_PDEATHSIG``), and the namespace with its init.
"""
from __future__ import annotations

import ctypes
import os
import signal

SIGNALS_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2)
PR_SET_PDEATHSIG, PR_SET_DUMPABLE = 1, 4
PR_SET_DEATHSIG_KILL = (PR_SET_PDEATHSIG, signal.SIGKILL)  # killed when the parent goes
CLONE_NEWPID = 0x20000000
# mount(2) flags and the namespaces unshare(2) makes (linux/mount.h, linux/sched.h)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
MS_NOEXEC, MS_NOATIME, MS_NODIRATIME, MS_RELATIME, MS_STRICTATIME = 8, 1024, 2048, 1 << 21, 1 << 24
CLONE_NEWNS, CLONE_NEWNET, CLONE_NEWUSER, CLONE_NEWIPC = 0x00020000, 0x40000000, 0x10000000, 0x08000000


def prctl(option: int, value: int) -> None:
    ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def pass_on(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except ProcessLookupError:
        pass


def pass_signals_to(pid: int) -> None:
    """From now on, the interrupt and termination signals this process gets go to ``pid`` instead."""
    for number in SIGNALS_PASSED_ON:  # a wait in progress resumes after each (PEP 475)
        signal.signal(number, lambda received, frame: pass_on(pid, received))


def exit_code(status: int) -> int:
    """A wait status as a shell's exit code: 128 + the signal for a process a signal ended."""
    code = os.waitstatus_to_exitcode(status)
    return code if code >= 0 else 128 - code


def enter_pid_namespace(close: tuple[int, ...] = ()) -> int:
    """Called after ``unshare(CLONE_NEWPID)``: this process stays outside as the keeper, its child becomes the
    namespace's init, and the init's child returns from here, the namespace's PID 2, to become the kernel.
    ``close``: descriptors the keeper and the init must not hold (the launch records).  Returns the pid the
    machine knows the returning process by (read from the /proc mounted outside, before the kernel mounts its
    own)."""
    parent = os.getppid()
    prctl(*PR_SET_DEATHSIG_KILL)  # the keeper goes with the process that started it (the zygote, or nbgrader)
    if os.getppid() != parent:
        os._exit(1)
    child = os.fork()
    if child:
        _stand_beside(child, close, reap_all=False)
    prctl(*PR_SET_DEATHSIG_KILL)  # the keeper gone (its launcher killed): so is the init, and the namespace
    kernel = os.fork()
    if kernel:
        _stand_beside(kernel, close, reap_all=True)
    prctl(*PR_SET_DEATHSIG_KILL)  # the init gone: so is the namespace, and this with it
    return int(os.readlink("/proc/self"))


def _stand_beside(child: int, close: tuple[int, ...], reap_all: bool) -> None:
    """Pass signals on to ``child`` and exit with its status; as the namespace's init (``reap_all``), reap every
    orphan the namespace hands over meanwhile."""
    for fd in close:
        try:
            os.close(fd)
        except OSError:
            pass
    pass_signals_to(child)
    try:
        while True:
            pid, status = os.waitpid(-1 if reap_all else child, 0)
            if pid == child:
                os._exit(exit_code(status))
    finally:  # never back into the caller, whatever went wrong: that would be a second kernel
        os._exit(1)

