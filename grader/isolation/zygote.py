"""Grading kernels forked from a warm interpreter, so that a class does not pay a class's imports.

A kernel started as a new Python imports ipykernel, torch and the checks (1.7 s before the first cell), then,
during the notebooks, what torch and the lab load lazily: matplotlib (0.4 s), ``torch._dynamo`` at the first
optimiser step (0.85 s), sympy at the first key padding mask outside attention's fast path (0.4 s): the same 3.4
CPU-seconds for every student.  So a batch starts one *zygote*: a process that imports all of that once
(``STARTUP`` and ``LATER``) and then forks one kernel per launch.  A launch that comes while it still imports
``LATER`` is forked between two of those imports: the batch's first notebook does not wait for what only later ones
use.

* It holds nothing but imported modules: no submission, reference, gradebook or hidden test ever enters it (it
  reads no file of the course), and it is not dumpable, so no process of the instructor's uid can read its memory.
* The kernelspec's launcher (``python -m grader.isolation.launcher --zygote SOCKET ...``, which nbgrader starts) connects,
  sends its command line, environment, folder and standard streams, and gets the kernel's pid back.
* The forked child does what the launcher did before ``exec`` (``launcher.launch``: limits, namespaces, views, the
  student's uid) and then runs ipykernel in the same process instead of exec'ing a new interpreter.
* The launcher stays, as the process nbgrader knows: it passes the interrupt and termination signals on to the
  kernel and exits with the kernel's status.  When the launcher dies (killed by nbgrader, or with it), the zygote
  kills the kernel; when the batch ends (it closes the zygote's stdin), the zygote kills every kernel it forked,
  and a kernel whose zygote is killed dies with it.
* Where no zygote answers, the launcher starts the kernel itself, as a new Python.
* Each notebook's checker is forked from a second zygote of the batch, the checkers' (``--role checker``,
  ``fork_checker``, ``verdicts.ForkedChecker``), which has torch, the full library and the checks imported: the
  nbgrader process then never imports them, and the kernels' zygote never holds the full library (issue 47).  A
  zygote forks one kind of child only.  The checker runs as the batch does, never as a student; it stays
  undumpable, and dies with its nbgrader process or with its zygote.
"""
from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
from pathlib import Path

from grader.isolation.cgroups import join
from grader.isolation.kernel_environment import checker_environment, kernel_environment
from grader.isolation.processes import PR_SET_DEATHSIG_KILL, PR_SET_DUMPABLE, exit_code, pass_on, pass_signals_to, prctl

# What a grading kernel imports before its first cell (ipykernel, and the sandbox extension's snapshot)...  Never
# translab: a kernel imports its notebook's stage (``grader.isolation.kernel_stages``), which is mounted over the library once
# the kernel is isolated, and a module the zygote imported would be the full library's, in every kernel it forks.
STARTUP = ("ipykernel.kernelapp", "ipykernel.ipkernel", "torch", "torch.testing", "numpy.testing")
# ...and on the way through the six notebooks (measured: the modules a kernel holds after the solutions, less those
# it starts with).  matplotlib's pyplot and inline backend are left to the kernel: on import they hook themselves
# into the running IPython (17 ms), which the zygote does not have.
LATER = ("torch._dynamo", "torch.fx.experimental.symbolic_shapes", "matplotlib", "matplotlib.figure",
         "matplotlib.font_manager", "matplotlib.backends.backend_agg", "ipywidgets", "tqdm.auto", "safetensors.torch",
         "tokenizers", "sentencepiece")
# The checkers' zygote: torch and the full library with its checks (the checker judges with translab's references).
# No kernel is ever forked from it.
CHECKER_PRELOAD = ("torch", "torch.fx.experimental.symbolic_shapes", "translab.checks", "translab.wire",
                   "translab.model", "translab.attention", "translab.training", "translab.generation", "translab.mlm",
                   "translab.bert", "translab.params")
MAX_REQUEST = 4 * 1024 ** 2
# A held zygote (the checkers', while the fork server and the kernels' zygote import) waits at most this long to import
HOLD_MAX = 5.0
# What a zygote's children become, by the zygote's role: named, not imported here, so that the zygote imports none
# of its callers (``grader.isolation.launcher``, the checker's ``grader.grading.verdicts``).  A zygote forks one kind only: the
# kernels' never has the checker's library, the checkers' never forks a kernel.
TARGETS = {"kernel": "grader.isolation.launcher:launch", "checker": "grader.grading.verdicts:serve_forked"}
ROLES = ("kernel", "checker")


def _target(kind: str):
    module, _, name = TARGETS[kind].partition(":")
    return getattr(importlib.import_module(module), name)


FONT_LISTS = "fontlist-v*.json"  # matplotlib's cache of the machine's fonts (font_manager), one per version


def zygote_folder(work: Path) -> Path:
    """The batch's zygote keeps its socket, log and matplotlib folder here (``grader.isolation.zygote``): root's or the
    instructor's alone, and hidden from every kernel (``grader.isolation.launcher``)."""
    return work / "zygote"


def font_list_folder(work: Path) -> Path:
    """The zygote's matplotlib folder: its font lists are copied into each kernel's HOME
    (``grader.isolation.launcher``)."""
    return zygote_folder(work) / "matplotlib"


# ----------------------------------------------------------------- the batch's side

class Zygote:
    """One of the batch's zygotes (a context manager): ``path`` is the socket its requesters connect to: the
    kernelspec's launchers for the kernels' zygote, nbgrader's ``GuardedExecute`` for the checkers'."""

    def __init__(self, work: Path, env: dict, cwd: Path, role: str = "kernel", hold: bool = False):
        """A kernels' zygote imports ``STARTUP`` and ``LATER`` (every notebook's kernel is a new fork, which would
        otherwise import them again), a checkers' one ``CHECKER_PRELOAD``; with ``hold``, once ``release`` is called.
        ``env`` is the batch's: the zygote gets the allow-listed part of it (``grader.isolation.sandbox``), whose memory
        every kernel it forks starts from."""
        if role not in ROLES:
            raise ValueError(f"a zygote for {role!r}")
        folder = zygote_folder(work)  # root's or the instructor's alone; outside every kernel's view
        folder.mkdir(mode=0o700, exist_ok=True)
        if role == "checker":
            folder = folder / "checker"
            folder.mkdir(mode=0o700, exist_ok=True)
            env = checker_environment(env)
        else:
            fonts = font_list_folder(work)
            seed_font_lists(fonts, env)
            # not JPY_PARENT_PID (a batch started from a notebook): ipykernel reads it on import, and the kernels the
            # zygote forks would take their parent, the init of their PID namespace, for init adopting an orphan
            env = {**{name: value for name, value in kernel_environment(env).items() if name != "JPY_PARENT_PID"},
                   "MPLCONFIGDIR": str(fonts),
                   # as ipykernel sets it before a kernel imports matplotlib, which the zygote does for the kernels
                   "MPLBACKEND": env.get("MPLBACKEND") or "module://matplotlib_inline.backend_inline"}
        self.path = folder / "socket"
        self.log = folder / "zygote.log"
        options = ["--role", role, *(["--hold"] if hold else [])]
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([sys.executable, "-m", "grader.isolation.zygote", "--socket", str(self.path),
                                             *options], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log,
                                            env=env, cwd=cwd)
        # it listens before it imports: a launcher that comes early waits in the queue instead of missing it
        line = self.process.stdout.readline()
        if line.strip() != b"listening":
            self.close()
            tail = self.log.read_text(errors="replace").strip().splitlines()[-5:]
            raise OSError(f"the grading {role}s' zygote (grader.isolation.zygote) did not start: " + " | ".join(tail))

    def release(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a held zygote imports now; an ended one, nothing
            self.process.stdin.write(b"go\n")
            self.process.stdin.flush()

    def close(self) -> None:
        """Closing its stdin ends the zygote and every kernel it forked.  Once it says so, its own exit (0.5 s of
        unmapping torch and the rest) is not waited for."""
        if self.process.poll() is None:
            self.process.stdin.close()
            ready, _, _ = select.select([self.process.stdout], [], [], 10)
            if ready and self.process.stdout.readline().strip() == b"closed":
                return
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def seed_font_lists(folder: Path, env: dict) -> None:
    """Copy matplotlib's font lists from the instructor's own cache (where matplotlib keeps it: $MPLCONFIGDIR, else
    $XDG_CACHE_HOME/matplotlib or ~/.cache/matplotlib) into the zygote's, which each sandboxed kernel's HOME gets a
    copy of (``sandbox._own_home``).  Without one, each kernel lists the fonts itself."""
    cache = env.get("MPLCONFIGDIR") or Path(env.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "matplotlib"
    folder.mkdir(mode=0o700, exist_ok=True)
    for path in Path(cache).glob(FONT_LISTS):
        try:
            (folder / path.name).write_bytes(path.read_bytes())
        except OSError:
            pass


# ----------------------------------------------------------------- the launcher's side

def _send(path: Path, request: dict, fds: list[int]) -> socket.socket:
    """Send the zygote at ``path`` a request with the three descriptors its child is to hold; the connection
    stays open as long as the child should live.  OSError when no zygote listens."""
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.connect(str(path))
        data = json.dumps(request).encode()
        socket.send_fds(connection, [struct.pack("!I", len(data))], fds)
        connection.sendall(data)
    except BaseException:
        connection.close()
        raise
    return connection


def run_through(path: Path, argv: list[str], env: dict) -> int | None:
    """Have the zygote at ``path`` start the kernel of ``argv`` (``launcher.launch``'s arguments) with ``env`` (the
    launcher's allow-listed environment); stay beside it, passing signals on, and return its exit code.  None when
    no zygote answers: start the kernel here instead."""
    prctl(*PR_SET_DEATHSIG_KILL)  # nbgrader gone: this goes, and the zygote then ends the kernel
    try:
        connection = _send(path, {"argv": argv, "env": env, "cwd": os.getcwd()}, [0, 1, 2])
    except OSError:
        return None
    try:
        reader = connection.makefile("rb")
        pid = json.loads(reader.readline() or b"{}").get("pid")
    except (OSError, ValueError):
        pid = None
    if not isinstance(pid, int):
        connection.close()
        return None
    pass_signals_to(pid)
    try:
        return int(json.loads(reader.readline())["exit"])
    except (ValueError, KeyError, TypeError):
        return 1  # the zygote went, and its kernels with it


def fork_checker(path: Path, folder: str, name: str, control: socket.socket, env: dict) -> socket.socket:
    """Ask the checkers' zygote at ``path`` to fork a checker (``grader.grading.verdicts.ForkedChecker``) with ``env`` that
    serves the socket ``name`` in ``folder`` and obeys ``control``, its output going where this process's does; not
    waited for (the zygote may still be importing).  Returns the connection to the zygote, which kills the checker
    when it closes (this process ended, or stopped the checker).  OSError when no zygote listens; one that refuses closes ``control``'s
    other end, which the checker's first answer then finds."""
    return _send(path, {"checker": folder, "name": name, "env": env, "cwd": os.getcwd()}, [control.fileno(), 1, 2])


# ----------------------------------------------------------------- the zygote

def serve(path: Path, preload: tuple[str, ...], role: str = "kernel", later: tuple[str, ...] = (),
          hold: bool = False) -> None:
    """Listen at ``path``, import ``preload`` (with ``hold``, once a line on stdin, a request or ``HOLD_MAX`` seconds
    come), then fork a child of ``role`` for each request, until stdin closes.  ``later`` is imported after
    ``preload``, one module at a time, with the requests that came meanwhile served between two: a batch's first
    kernel, asked for while the zygote still imports what only later notebooks need, does not wait for it."""
    prctl(PR_SET_DUMPABLE, 0)
    prctl(*PR_SET_DEATHSIG_KILL)  # the batch gone: so is the zygote
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(128)
    os.write(1, b"listening\n")
    if hold and sys.stdin in select.select([sys.stdin, listener], [], [], HOLD_MAX)[0] and not os.read(0, 1024):
        return  # the batch is done (or gone) before it needed a child
    for name in preload:
        _preload(name)
    importlib.import_module(TARGETS[role].partition(":")[0])  # what the children become, loaded once
    sys.stdout.flush()
    sys.stderr.flush()
    kernels: dict[socket.socket, int] = {}  # a requester's connection -> the pid of its kernel (or checker)
    for name in later:
        while select.select([listener], [], [], 0)[0]:
            _fork_child(listener, kernels, role)
        _preload(name)
    while True:
        readable, _, _ = select.select([listener, sys.stdin, *kernels], [], [], 0.2)
        if sys.stdin in readable and not os.read(sys.stdin.fileno(), 1024):
            break  # the batch is done (or gone)
        for connection in readable:
            if connection is listener:
                _fork_child(listener, kernels, role)
            elif connection in kernels:  # a launcher says nothing after its request: this is its end
                _end(kernels, connection)
        _reap(kernels)
    for connection in list(kernels):
        _end(kernels, connection)
    _reap(kernels)
    os.write(1, b"closed\n")


def _preload(name: str) -> None:
    try:
        importlib.import_module(name)
    except Exception as error:  # noqa: BLE001 - a module this lab does not have: the kernel imports it itself
        print(f"[zygote] not preloaded: {name}: {error!r}", file=sys.stderr, flush=True)


def _fork_child(listener: socket.socket, kernels: dict, role: str) -> None:
    """Accept one request and fork its child: a kernel for a launcher (the kernels' zygote), or a checker for an
    nbgrader process (the checkers')."""
    connection, _ = listener.accept()
    fds: list[int] = []
    try:
        connection.settimeout(10)
        header, fds, _, _ = socket.recv_fds(connection, 4, 3)
        if len(header) != 4 or len(fds) != 3:
            raise ValueError("a launcher sent no request")
        (size,) = struct.unpack("!I", header)
        if size > MAX_REQUEST:
            raise ValueError(f"a request of {size} bytes")
        with connection.makefile("rb") as reader:
            data = reader.read(size)
        if len(data) != size:
            raise ValueError("a launcher closed its request half-way")
        request = json.loads(data)
        launcher, uid, _ = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
        if ("checker" in request) != (role == "checker"):
            raise ValueError(f"a request for a {'checker' if 'checker' in request else 'kernel'} at the {role}s' zygote")
        if "checker" in request and (not isinstance(request["checker"], str) or uid != os.geteuid()):
            # a checker is not sandboxed: only the batch's own processes may ask for one (the socket is theirs
            # alone and hidden from every kernel; this holds even if it were not)
            raise ValueError(f"a checker asked for by uid {uid}, or without its folder")
    except (OSError, ValueError) as error:
        print(f"[zygote] refused a launch: {error}", file=sys.stderr, flush=True)
        for fd in fds:  # what came with a request we refuse is not kept open
            os.close(fd)
        connection.close()
        return
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the kernel; its tests run it through the launcher)
        code = 1
        try:
            for other in (listener, *kernels):
                other.close()
            connection.close()
            code = _become_checker(request, fds) if "checker" in request else _become_kernel(request, fds, launcher)
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except BaseException:  # noqa: BLE001 - told on the kernel's stderr, like a kernel that fails to start
            import traceback
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    for fd in fds:
        os.close(fd)
    connection.settimeout(None)
    try:
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass
    kernels[connection] = pid


def _fresh_process(request: dict) -> None:
    """In a forked child: a session of its own, the requester's folder and environment, and a fresh process's
    random state (each child its own draws, as a new interpreter would have)."""
    os.setsid()  # a session of its own, as nbgrader starts a kernel
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    import random
    random.seed()
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()


def _become_kernel(request: dict, fds: list[int], launcher: int) -> int:
    """In the forked child: the launcher's streams, folder and environment, a fresh process's random state, then
    ``launcher.launch`` as the launcher would have run it, which runs the kernel here."""
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    _fresh_process(request)  # not dumpable, as the zygote (grader.isolation.launcher makes it so again where it must be)
    _target("kernel")(list(request["argv"]), launcher=launcher)
    return 0


def _become_checker(request: dict, fds: list[int]) -> int:
    """In the forked child: the checker of one nbgrader process (``verdicts.serve_forked``), torch and the checks
    already imported.  ``fds``: its control socket, then the requester's stdout and stderr.  It stays undumpable
    (it reads the hidden references) and dies with the zygote."""
    control, out, err = fds
    for target, fd in ((1, out), (2, err)):
        os.dup2(fd, target)
        os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)  # not the batch's pipe, whose end ends the zygote
    os.dup2(null, 0)
    os.close(null)
    _fresh_process(request)
    prctl(*PR_SET_DEATHSIG_KILL)
    try:  # with the student's kernels: it shares their CPU share and memory limit, and goes with their kill
        join(os.environ, "checker")
    except OSError as error:
        print(f"[checker] not in the student's cgroup: {error}", file=sys.stderr, flush=True)
    if "torch" in sys.modules:  # imported before this environment was set: its threads as the job says
        sys.modules["torch"].set_num_threads(max(1, int(os.environ.get("OMP_NUM_THREADS") or 1)))
    _target("checker")(socket.socket(fileno=control), request["checker"], str(request["name"]))
    return 0


def _end(kernels: dict, connection: socket.socket) -> None:
    """Kill the kernel of a launcher that is gone (or of a batch that ended), and forget it."""
    pid = kernels.pop(connection)
    try:
        os.killpg(pid, signal.SIGKILL)  # the kernel is its session's leader: its children go too
    except (ProcessLookupError, PermissionError):
        pass
    pass_on(pid, signal.SIGKILL)  # killed before it had its own session
    connection.close()


def _reap(kernels: dict) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        for connection, kernel in list(kernels.items()):
            if kernel == pid:
                try:
                    connection.sendall(json.dumps({"exit": exit_code(status)}).encode() + b"\n")
                except OSError:
                    pass
                kernels.pop(connection)
                connection.close()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m grader.isolation.zygote")
    parser.add_argument("--socket", type=Path, required=True)
    parser.add_argument("--role", choices=ROLES, default="kernel", help="fork kernels, or checkers")
    parser.add_argument("--hold", action="store_true", help="import once a line on stdin, a request or HOLD_MAX s come")
    args = parser.parse_args(argv)
    if args.role == "checker":
        serve(args.socket, CHECKER_PRELOAD, args.role, hold=args.hold)
    else:
        serve(args.socket, STARTUP, args.role, later=LATER, hold=args.hold)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # its kernels are gone: no interpreter teardown of torch and the rest (0.3 s the batch waits for)


if __name__ == "__main__":
    main()
