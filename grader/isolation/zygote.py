"""Grading kernels forked from a warm interpreter, so that a class does not pay a class's imports.

A kernel started as a new Python imports ipykernel and torch before its first cell, matplotlib in it, then what
torch and the lab load lazily (sympy at the first key padding mask outside attention's fast path): the same
CPU-seconds for every student.  So a batch starts one *zygote*, which imports once what grading uses
(``STARTUP``, then ``LATER``) and forks one kernel per launch.  A launch that comes during ``LATER`` is forked
between two of its imports: the batch's first notebook does not wait for what only later ones use.

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
* A batch starts the two as one process (``Zygote(..., checkers=True)``): the kernels' zygote imports ``SHARED``
  (torch, about 2 s of CPU) and then forks the checkers' zygote, which imports the rest of ``CHECKER_PRELOAD``, so that
  torch is imported once per batch, not twice.  The fork goes one way only: the checkers' zygote comes from the
  kernels', never a kernel from the checkers'.  Both sockets are bound before the import, so nobody waits to
  connect; the checkers' environment comes on its own stdin after the fork, never through the kernels' zygote,
  which closes the checkers' streams and socket once it has forked.  The checkers' zygote outlives a kernels'
  zygote that dies (whose launchers then start kernels themselves), and ends with the batch, as every zygote does.

Why one file: its three sides (the batch's ``Zygote``, the launcher's and the nbgrader process's requests, the
zygote's ``serve``) are one protocol: the request and its descriptors, the "listening" and "closed" lines, the
release, the pair's inherited streams; apart, each side would import the others' halves of it.
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import json
import os
import select
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

from grader.isolation.cgroups import join
from grader.isolation.kernel_environment import checker_environment, kernel_environment
from grader.isolation.processes import PR_SET_DEATHSIG_KILL, PR_SET_DUMPABLE, exit_code, pass_on, pass_signals_to, prctl

# What a grading kernel imports before its first cell (ipykernel, the sandbox extension's snapshot), and matplotlib
# for every notebook's first cell (pyplot, which hooks into IPython, is left to the kernel): the batch's first kernel,
# forked before ``LATER``, took 1.4 s to import it itself.  Never translab: a kernel imports its notebook's stage
# (``grader.isolation.kernel_stages``), mounted over the library once the kernel is isolated; a module the zygote
# imported would be the full library's, in every kernel it forks.
STARTUP = ("ipykernel.kernelapp", "ipykernel.ipkernel", "torch", "torch.testing", "numpy.testing", "matplotlib",
           "matplotlib.text", "matplotlib.axes", "matplotlib.figure", "matplotlib.font_manager",
           "matplotlib.backends.backend_agg")
# ...and on the way through the six notebooks as grading runs them, demos left out (held by test_zygote.py); not
# torch._dynamo (1.1 CPU-s), which only the training demos import.  A launch waits for the import under way.
LATER = ("sympy", "torch.fx.experimental.symbolic_shapes", "ipywidgets", "tqdm.auto", "safetensors.torch",
         "tokenizers", "sentencepiece")
# The checkers' zygote: torch and the full library with its checks (it never forks a kernel).
CHECKER_PRELOAD = ("torch", "torch.fx.experimental.symbolic_shapes", "translab.checks", "translab.wire",
                   "translab.model", "translab.attention", "translab.training", "translab.generation", "translab.mlm",
                   "translab.bert", "translab.params")
# What the two zygotes of a pair both need: imported once, by the kernels' zygote, before it forks the checkers'.
SHARED = ("torch",)
MAX_REQUEST = 4 * 1024 ** 2
# A held zygote (the checkers', while the fork server and the kernels' zygote import) waits at most this long to import
HOLD_MAX = 5.0
# What a zygote's children become, by the zygote's role: named, not imported here, so that the zygote imports none
# of its callers (``grader.isolation.launcher``, the checker's ``grader.grading.verdicts``).
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
    """The zygote's matplotlib folder: each kernel's HOME gets its font lists (``grader.isolation.launcher``)."""
    return zygote_folder(work) / "matplotlib"


# ----------------------------------------------------------------- the batch's side

class Zygote:
    """One of the batch's zygotes (a context manager): ``path`` is the socket its requesters connect to: the
    kernelspec's launchers for the kernels' zygote, nbgrader's ``GuardedExecute`` for the checkers'."""

    def __init__(self, work: Path, env: dict, cwd: Path, role: str = "kernel", hold: bool = False,
                 checkers: bool = False):
        """A kernels' zygote imports ``STARTUP`` and ``LATER`` (every notebook's kernel is a new fork, which would
        otherwise import them again), a checkers' one ``CHECKER_PRELOAD``; with ``hold``, once ``release`` is called.
        ``env`` is the batch's: the zygote gets the allow-listed part of it (``grader.isolation.sandbox``), whose memory
        every kernel it forks starts from.  With ``checkers`` (a kernels' zygote), it also forks the checkers'
        zygote, held, once it has imported ``SHARED``: that one is ``self.checkers``."""
        if role not in ROLES or (checkers and role != "kernel"):
            raise ValueError(f"a zygote for {role!r}{' with checkers' if checkers else ''}")
        batch_env = env
        self.path, self.log, env = _prepare(work, env, role)
        self.process: subprocess.Popen | None = None
        # the checkers' environment from the batch's, as a checkers' zygote started alone gets it: not from the
        # kernels' allow-list, which has neither the launcher's settings nor where the references are
        self.checkers = _ForkedCheckers(work, batch_env) if checkers else None
        options = ["--role", role, *(["--hold"] if hold else [])]
        if self.checkers is not None:
            options += ["--checkers", str(self.checkers.path), "--checkers-fds",
                        ",".join(str(fd) for fd in self.checkers.child_fds)]
        try:
            with open(self.log, "wb") as log:
                self.process = subprocess.Popen(
                    [sys.executable, "-m", "grader.isolation.zygote", "--socket", str(self.path), *options],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, env=env, cwd=cwd,
                    pass_fds=self.checkers.child_fds if self.checkers is not None else ())
            self._stdin, self._stdout = self.process.stdin, self.process.stdout
            if self.checkers is not None:
                self.checkers.started()
            self._await_listening(role)
            if self.checkers is not None:
                self.checkers._await_listening("checker")
        except BaseException:
            self.close()
            raise

    def _await_listening(self, role: str) -> None:
        # it listens before it imports: a launcher that comes early waits in the queue instead of missing it
        ready, _, _ = select.select([self._stdout], [], [], START_WAIT)
        if not ready or self._stdout.readline().strip() != b"listening":
            tail = self.log.read_text(errors="replace").strip().splitlines()[-5:] if self.log.exists() else []
            raise OSError(f"the grading {role}s' zygote (grader.isolation.zygote) did not start: " + " | ".join(tail))

    def release(self) -> None:
        with contextlib.suppress(OSError, ValueError):  # a held zygote imports now; an ended one, nothing
            self._stdin.write(b"go\n")
            self._stdin.flush()

    def close(self) -> None:
        """Closing its stdin ends the zygote and every kernel it forked.  Once it says so, its own exit (0.5 s of
        unmapping torch and the rest) is not waited for; a zygote that does not say so in 10 s is killed.  A
        pair's checkers' zygote ends first."""
        if self.checkers is not None:
            self.checkers.close()
        if self.process is None or self.process.poll() is not None:
            return
        self._stdin.close()
        ready, _, _ = select.select([self._stdout], [], [], 10)
        if ready and self._stdout.readline().strip() == b"closed":
            return
        self.process.kill()
        self.process.wait()

    def __enter__(self) -> Zygote:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


START_WAIT = 60.0  # seconds a zygote has to say it listens (it does before any import)


def _prepare(work: Path, env: dict, role: str) -> tuple[Path, Path, dict]:
    """A zygote's socket, log and environment, in its folder (root's or the instructor's alone; outside every
    kernel's view)."""
    folder = zygote_folder(work)
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
    return folder / "socket", folder / "zygote.log", env


class _ForkedCheckers(Zygote):
    """The checkers' zygote of a pair: forked by the kernels' zygote, not started here, so it has no process of
    ours; its stdin, stdout and log are pipes and a file handed to the kernels' zygote at its start (``child_fds``),
    and its environment is the first line on its stdin."""

    def __init__(self, work: Path, env: dict):  # pylint: disable=super-init-not-called - nothing is started here
        self.path, self.log, self._env = _prepare(work, env, "checker")
        self.process, self.checkers = None, None
        stdin_read, stdin_write = os.pipe()
        stdout_read, stdout_write = os.pipe()
        log = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
        self.child_fds = (stdin_read, stdout_write, log)  # its 0, 1 and 2, in the kernels' zygote until it forks
        # unbuffered: a line select() saw is never left in a buffer it cannot see
        self._stdin, self._stdout = os.fdopen(stdin_write, "wb"), os.fdopen(stdout_read, "rb", buffering=0)
        self.pid: int | None = None  # what it says once forked

    def started(self) -> None:
        """The kernels' zygote has its ends: close ours of them, and send the environment."""
        for fd in self.child_fds:
            os.close(fd)
        self.child_fds = ()
        self._stdin.write(json.dumps(self._env).encode() + b"\n")
        self._stdin.flush()

    def close(self) -> None:
        if self._stdout.closed:
            return
        for fd in self.child_fds:  # never handed over: the kernels' zygote did not start
            os.close(fd)
        self.child_fds = ()
        with contextlib.suppress(OSError, ValueError):
            self._stdin.close()
        deadline = time.monotonic() + 10
        while select.select([self._stdout], [], [], max(0.0, deadline - time.monotonic()))[0]:
            line = self._stdout.readline()
            if line.startswith(b"forked "):
                self.pid = int(line.split()[1])
            elif not line or line.strip() == b"closed":
                break  # it said so, or it ended otherwise
        else:  # still running, 10 s after its stdin closed: as a zygote of ours would be, killed
            if self.pid is not None:
                with contextlib.suppress(OSError):
                    os.kill(self.pid, signal.SIGKILL)
        self._stdout.close()


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
          hold: bool = False, checkers: tuple[Path, tuple[int, int, int]] | None = None) -> None:
    """Listen at ``path``, import ``preload`` (with ``hold``, once a line on stdin, a request or ``HOLD_MAX`` seconds
    come), then fork a child of ``role`` for each request, until stdin closes.  ``later`` is imported after
    ``preload``, one module at a time, with the requests that came meanwhile served between two: a batch's first
    kernel, asked for while the zygote still imports what only later notebooks need, does not wait for it.
    With ``checkers`` (a socket path, and the stdin, stdout and stderr of the checkers' zygote), a kernels' zygote
    also listens there, imports ``SHARED`` first, and forks the checkers' zygote (``_fork_checkers``)."""
    prctl(PR_SET_DUMPABLE, 0)
    prctl(*PR_SET_DEATHSIG_KILL)  # the batch gone: so is the zygote
    listener = _listen(path)
    os.write(1, b"listening\n")
    if checkers is not None:
        checker_listener = _listen(checkers[0])
        os.write(checkers[1][1], b"listening\n")
    if hold and not _released(listener):
        return  # the batch is done (or gone) before it needed a child
    if checkers is not None:
        for name in SHARED:
            _preload(name)
        _fork_checkers(checker_listener, checkers[1], listener)
    _serve(listener, preload, role, later)


def _released(listener: socket.socket) -> bool:
    """A held zygote's wait: until a line on stdin, a request or ``HOLD_MAX`` seconds; False when stdin closed first."""
    return not (sys.stdin in select.select([sys.stdin, listener], [], [], HOLD_MAX)[0] and not os.read(0, 1024))


def _listen(path: Path) -> socket.socket:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    os.chmod(path, 0o600)
    listener.listen(128)
    return listener


def _fork_checkers(listener: socket.socket, fds: tuple[int, int, int], kernels_listener: socket.socket) -> None:
    """Fork the checkers' zygote of a pair: its streams ``fds``, its environment the first line on its stdin (read
    in the child only: the kernels' zygote, and every kernel, never holds it), then held as a checkers' zygote is
    until the batch releases it.  Here, its streams and socket are closed: no kernel forked later inherits them."""
    sys.stdout.flush()
    sys.stderr.flush()
    gc.freeze()  # as before a kernel's fork (_fork_child)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the checkers' zygote; test_zygote runs it through Zygote(checkers=True))
        _run_child(lambda: _become_checkers_zygote(listener, fds, kernels_listener))
    for fd in fds:
        os.close(fd)
    listener.close()


def _become_checkers_zygote(listener: socket.socket, fds: tuple[int, int, int],
                            kernels_listener: socket.socket) -> int:
    kernels_listener.close()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
        os.close(fd)
    os.write(1, f"forked {os.getpid()}\n".encode())  # so that the batch can kill it, should it not end
    env = json.loads(_read_line(0) or b"null")
    if not isinstance(env, dict):
        return 1  # the batch ended before it sent one
    os.environ.clear()
    os.environ.update(env)
    # no death signal: its parent is the kernels' zygote, and the checkers outlive a kernels' zygote that died (the
    # launchers then start kernels themselves); the batch's end still ends it, on its stdin
    prctl(PR_SET_DUMPABLE, 0)
    if _released(listener):
        _serve(listener, CHECKER_PRELOAD, "checker")
    return 0


def _run_child(body) -> None:
    """In a forked child: ``body()``, whose result is the child's exit code; what it raises goes on the child's
    stderr.  Never returns: the child exits without the interpreter's teardown."""
    code = 1
    try:
        code = body()
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException:  # noqa: BLE001 - told on the child's stderr, like a process that fails to start
        import traceback  # lazy: only a child that failed needs it
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _read_line(fd: int) -> bytes:
    """One line from ``fd``, read a byte at a time: what follows it (the release) stays for the next read."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line


def _serve(listener: socket.socket, preload: tuple[str, ...], role: str, later: tuple[str, ...] = ()) -> None:
    """``serve`` once listening (and released): import, then fork a child for each request until stdin closes."""
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
    gc.freeze()  # what the zygote holds stays out of the child's collections, which copied all of it (0.3 s)
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the kernel; its tests run it through the launcher)
        _run_child(lambda: _become_child(request, fds, launcher, [listener, *kernels, connection]))
    for fd in fds:
        os.close(fd)
    connection.settimeout(None)
    try:
        connection.sendall(json.dumps({"pid": pid}).encode() + b"\n")
    except OSError:
        pass
    kernels[connection] = pid


def _become_child(request: dict, fds: list[int], launcher: int, inherited: list[socket.socket]) -> int:
    for other in inherited:  # the zygote's listener and its other children's connections: none of this child's
        other.close()
    return _become_checker(request, fds) if "checker" in request else _become_kernel(request, fds, launcher)


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
    parser.add_argument("--checkers", type=Path, help="a kernels' zygote: also fork the checkers' zygote, at this socket")
    parser.add_argument("--checkers-fds", help="its stdin, stdout and stderr: three descriptors this process inherited")
    args = parser.parse_args(argv)
    if args.role == "checker":
        serve(args.socket, CHECKER_PRELOAD, args.role, hold=args.hold)
    else:
        checkers = None
        if args.checkers is not None:
            fds = tuple(int(fd) for fd in (args.checkers_fds or "").split(","))
            if len(fds) != 3:
                parser.error("--checkers needs --checkers-fds STDIN,STDOUT,STDERR")
            checkers = (args.checkers, fds)
        serve(args.socket, STARTUP, args.role, later=LATER, hold=args.hold, checkers=checkers)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # its kernels are gone: no interpreter teardown of torch and the rest (0.3 s the batch waits for)


if __name__ == "__main__":
    main()
