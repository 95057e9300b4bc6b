"""Verdicts decided outside the student's process.

A check that judged inside the kernel that had just run the student's code could have its verdict changed by that
code (patch the checker, read its frames or the hidden references, return a tensor subclass that equals everything,
trace past the failing lines).  So while ``GuardedExecute`` grades,
a ``Checker`` (a thread of the nbgrader process, or in a sandboxed batch a ``ForkedChecker``: the same, in a process
forked from the batch's zygote) listens on a Unix socket whose path the kernel gets in ``TRANSLAB_CHECKER``;
``translab.wire`` describes the protocol.

* Before a graded test cell runs, ``GuardedExecute`` opens a *window* on the checker: the cell's grade_id and
  the checks its source calls (``expected_calls``; the source is the gradebook's, nbgrader puts it back).
* The kernel's ``checks.check_x`` connects and names its check.  The checker accepts it only as the next call
  the cell's source makes, runs that check of ``translab.checks`` itself against the grader's references (the kernel
  never sees a hidden expected value) and asks the kernel to run the student's code when the check needs it.
* It records the verdict, then tells the kernel (which shows the message).  After the cell, ``GuardedExecute``
  replaces the cell's outputs with the record: the check's "ok" lines, and an error when any expected check
  did not pass or never reported.  nbgrader scores that; nothing the kernel printed or raised counts.

What the kernel can still do: return wrong values (it fails), refuse to answer (it fails), and, with code that
rewrites translab inside the kernel, misreport facts the check reads from the student's objects rather than
from values computed on inputs (which parameters are trainable, whether two models share storage, which
function it passes as the answer).  ``suspicious`` flags answers that reach for the tools of such rewrites.

Why one file: the checker in both its forms (a thread of the nbgrader process, a process forked from the
zygote) and the protocol ``GuardedExecute`` speaks to it are one contract, read together.
"""
from __future__ import annotations

import ast
import contextlib
import json
import os
import re
import resource
import shutil
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from translab.contract import CHECKER_SOCKET_NAMES

from grader.course import withheld
from grader.isolation.kernel_environment import checker_environment
from grader.isolation.zygote import fork_checker


# Two checkers of one student may listen at once: a notebook's, and the next notebook's, started with its kernel
# while this one runs (grader.grading.next_kernel); each takes the name the other has not.
SOCKET_NAMES = CHECKER_SOCKET_NAMES
SOCKET_NAME = SOCKET_NAMES[0]


def _socket_path(folder: Path, name: str) -> Path:
    if name not in SOCKET_NAMES:  # a name, never a path
        raise ValueError(f"a checker's socket is named one of {SOCKET_NAMES}, not {name!r}")
    return folder / name


@dataclass(frozen=True)
class Call:
    """One ``checks.check_x(...)`` of a test cell: the check and the keywords that select what it grades."""
    check: str
    split: str = "visible"
    part: str | None = None

    def label(self) -> str:
        extra = "".join(f", {k}={v!r}" for k, v in (("part", self.part), ("split", self.split))
                        if v is not None and not (k == "split" and v == "visible"))
        return f"checks.{self.check}(...{extra})"


def _nodes(source: str) -> list[ast.AST]:
    """Every node of a cell's source; none when it does not parse (such a cell runs and fails on its own)."""
    try:
        return list(ast.walk(ast.parse(source)))
    except SyntaxError:
        return []


def expected_calls(source: str) -> list[Call]:
    """The checks a test cell's source calls, in order (``checks.check_x(..., split=..., part=...)``)."""
    calls = []
    for node in _nodes(source):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr.startswith("check_")
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "checks"):
            keywords = {k.arg: k.value.value for k in node.keywords
                        if k.arg in ("split", "part") and isinstance(k.value, ast.Constant)}
            calls.append(((node.lineno, node.col_offset),
                          Call(node.func.attr, keywords.get("split", "visible"), keywords.get("part"))))
    return [call for _, call in sorted(calls, key=lambda item: item[0])]


@dataclass
class Record:
    """What the checker saw during one test cell."""
    grade_id: str
    expected: list[Call]
    variant: str | None = None  # the student's variant code (translab.variants), derived by the grader
    stage: int | None = None  # the stage of translab the kernel imports (grader.isolation.kernel_stages); None: the full one
    results: list[tuple[Call, bool, list[str], str, str]] = field(default_factory=list)  # call, passed, ok lines, message, key
    refused: list[str] = field(default_factory=list)
    put_back: list[str] = field(default_factory=list)  # what the kernel's guard put back before the cell (wire.PUT_BACK)

    @property
    def passed(self) -> bool:
        return len(self.results) == len(self.expected) and all(passed for _, passed, *_ in self.results)

    def lines(self) -> list[str]:
        return [line for _, _, lines, _, _ in self.results for line in lines]

    def failure(self) -> tuple[str, str]:
        """(message, key) of the first failure, or of the first expected check that never reported."""
        for call, passed, _, message, key in self.results:
            if not passed:
                return message, key
        missing = self.expected[len(self.results):]
        why = ("the test cell's checks did not reach the grader: " + ", ".join(c.label() for c in missing) +
               " never reported a verdict (the cell stopped before it, or the check was replaced)")
        if self.refused:
            why += f"; calls refused: {'; '.join(self.refused[:3])}"
        return why, "no_verdict"


class Checker:
    """The grader's end of the wire for one notebook: a socket, a thread, the records of the test cells."""

    def __init__(self, folder: str | os.PathLike | None = None, name: str = SOCKET_NAME):
        self._own_folder = folder is None
        self.folder = Path(folder) if folder else Path(tempfile.mkdtemp(prefix="translab-checker-"))
        self.folder.mkdir(parents=True, exist_ok=True)
        self.path = _socket_path(self.folder, name)
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        self._server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._server.bind(str(self.path))
        os.chmod(self.path, 0o666)  # a sandboxed kernel runs as another uid
        self._server.listen(8)
        self._lock = threading.Lock()
        self._window: Record | None = None
        self._connection: socket.socket | None = None
        self._idle = threading.Event()  # no check running
        self._idle.set()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="translab-checker", daemon=True)
        self._thread.start()
        self._warming: threading.Thread | None = None

    def ready(self) -> None:
        """Nothing to wait for: the socket is bound."""

    def warm_up(self) -> None:
        """Import the checks and torch (``CHECKER_IMPORTS``, 1.8 s) now, in a thread, unless done: called once the kernel's process is
        started, they load while it boots on another core, not when the first test cell waits (nor, if called
        before, while the kernel is being started)."""
        if self._warming is None:
            self._warming = threading.Thread(target=_load_checks, name="translab-checker-imports", daemon=True)
            self._warming.start()

    # -- the executor's side
    def open(self, grade_id: str, calls: list[Call], variant: str | None = None, stage: int | None = None) -> None:
        with self._lock:
            self._window = Record(grade_id, list(calls), variant, stage)

    def close(self, wait: float = 10.0) -> Record:
        """End the window: a check still running (its kernel interrupted or gone) gets ``wait`` seconds, then its
        connection is cut; the record is what was decided by then."""
        self._idle.wait(wait)
        with self._lock:
            record, self._window = self._window, None
            if self._connection is not None:
                with contextlib.suppress(OSError):
                    self._connection.shutdown(socket.SHUT_RDWR)
        return record

    def stop(self) -> None:
        self._stopping = True
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        self._thread.join(5)
        with contextlib.suppress(OSError):
            self.path.unlink()
        if self._own_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    # -- the thread
    def _serve(self) -> None:
        while not self._stopping:
            try:
                connection, _ = self._server.accept()
            except OSError:
                return
            with connection:
                with self._lock:
                    self._connection = connection
                try:
                    self._session(connection)
                except Exception:  # noqa: BLE001 - a kernel that breaks the protocol gets no verdict
                    pass
                finally:
                    self._idle.set()
                    with self._lock:
                        self._connection = None

    def _session(self, connection: socket.socket) -> None:
        from translab import wire  # lazy: torch (1.2 s); only the checker's process talks to a kernel
        header, buffers = wire.recv(connection)
        if header.get("op") != "begin":
            return
        call = Call(str(header.get("check")), str(header.get("split") or "visible"),
                    None if header.get("part") is None else str(header.get("part")))
        with self._lock:
            record = self._window
            position = len(record.results) if record is not None else 0
            if record is None or position >= len(record.expected) or record.expected[position] != call:
                reason = (f"{call.label()} outside a graded test cell" if record is None else
                          f"{call.label()} is not the next check of test cell {record.grade_id}")
                if record is not None:
                    record.refused.append(reason)
                wire.send(connection, {"op": "refused", "reason": reason})
                return
            self._idle.clear()
            record.put_back = sorted(set(record.put_back) | _put_back(header.get("put_back")))
        passed, lines, message, key = run_check(call, header, buffers, connection, record.variant, record.stage)
        with self._lock:
            if self._window is record:  # still the same cell: the verdict counts
                record.results.append((call, passed, lines, message, key))
            else:
                return
        wire.send(connection, {"op": "end", "passed": passed, "output": lines, "message": message, "key": key})


_DOTTED_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]{0,119}")


def _put_back(names) -> set[str]:
    """The dotted names the kernel says its guard put back; anything else it sent is not text we show."""
    return {name for name in names[:20] if isinstance(name, str) and _DOTTED_NAME.fullmatch(name)} \
        if isinstance(names, list) else set()


def _record_to_json(record: Record) -> dict:
    return {"grade_id": record.grade_id, "variant": record.variant, "stage": record.stage,
            "expected": [[c.check, c.split, c.part] for c in record.expected],
            "results": [[[c.check, c.split, c.part], passed, lines, message, key]
                        for c, passed, lines, message, key in record.results],
            "refused": record.refused, "put_back": record.put_back}


def _record_from_json(data: dict) -> Record:
    return Record(data["grade_id"], [Call(*call) for call in data["expected"]], data.get("variant"),
                  data.get("stage"), [(Call(*call), bool(passed), list(lines), message, key)
                                      for call, passed, lines, message, key in data["results"]],
                  list(data["refused"]), list(data.get("put_back") or []))


class CheckerGone(RuntimeError):
    """The forked checker stopped answering: the machine's fault, not the notebook's (nbgrader fails the notebook
    and the batch asks its canary)."""


class ForkedChecker:
    """A ``Checker`` in a process of its own, forked from the batch's checkers' zygote (``grader.isolation.zygote.fork_checker``),
    which has torch, the full library and the checks imported: the nbgrader process then never imports them (1.8 CPU-seconds a
    student, on a 2-core machine that the kernel and nbgrader already keep busy).  Same interface; each call is
    a line of JSON on a control socket, answered before it returns, so a window is open before its cell runs.
    The checker process ends when it is stopped, when this process ends (the zygote sees the connection close),
    or with the zygote."""

    def __init__(self, zygote: str | os.PathLike, folder: str | os.PathLike, timeout: float = 60.0,
                 name: str = SOCKET_NAME):
        self.folder = Path(folder)
        self.path = _socket_path(self.folder, name)
        self._timeout = timeout
        ours, theirs = socket.socketpair()
        try:
            self._zygote = fork_checker(Path(zygote), str(self.folder), name, theirs, checker_environment(os.environ))
        except BaseException:
            ours.close()
            raise
        finally:
            theirs.close()
        self._control = ours
        self._replies = ours.makefile("rb")
        self._started = False

    def _ask(self, message: dict, wait: float = 0.0) -> dict:
        if not self._started:  # its first answer: forked, its socket bound (a kernel may connect)
            self._started = True
            self._ask({"op": "ready"})
        try:
            self._control.settimeout(self._timeout + wait)
            self._control.sendall(json.dumps(message).encode() + b"\n")
            reply = json.loads(self._replies.readline() or b"null")
        except (OSError, ValueError) as error:
            raise CheckerGone(f"the grader's checker process did not answer {message['op']!r}: {error}") from error
        if not isinstance(reply, dict):
            raise CheckerGone(f"the grader's checker process ended before answering {message['op']!r}")
        return reply

    def ready(self) -> None:
        """Wait until the checker process has bound its socket (CheckerGone if it never does)."""
        self._ask({"op": "ready"})

    def warm_up(self) -> None:
        """Nothing to do: the checker process warms itself up as it starts."""

    def open(self, grade_id: str, calls: list[Call], variant: str | None = None, stage: int | None = None) -> None:
        self._ask({"op": "open", "grade_id": grade_id, "calls": [[c.check, c.split, c.part] for c in calls],
                   "variant": variant, "stage": stage})

    def close(self, wait: float = 10.0) -> Record:
        return _record_from_json(self._ask({"op": "close", "wait": wait}, wait)["record"])

    def stop(self) -> None:
        with contextlib.suppress(CheckerGone):
            if self._started:  # else never used: closing the connection ends it (the zygote kills it)
                self._ask({"op": "stop"})
        for stream in (self._replies, self._control, self._zygote):
            with contextlib.suppress(OSError):
                stream.close()


def serve_forked(control: socket.socket, folder: str, name: str) -> None:
    """The forked checker's life (``grader.isolation.zygote``): a ``Checker`` on ``folder``'s socket ``name``, driven by
    ``control`` until told to stop or until the other end goes."""
    # A kernel's address space at most (what a solution's kernel needs, with room): what the kernel sends is bounded
    # per message (translab.wire), and no message may make the checker take the machine's memory.
    from grader.isolation.sandbox import Limits  # here, in the checker's process: the batch needs no sandbox
    resource.setrlimit(resource.RLIMIT_AS, (Limits.address_space, Limits.address_space))
    checker = Checker(folder, name)
    checker.warm_up()
    replies = control.makefile("rb")
    try:
        for line in replies:
            message = json.loads(line)
            op = message.get("op")
            if op == "open":
                stage = message.get("stage")
                checker.open(str(message["grade_id"]), [Call(*call) for call in message["calls"]],
                             message.get("variant"), stage if isinstance(stage, int) else None)
                reply: dict = {}
            elif op == "close":
                reply = {"record": _record_to_json(checker.close(float(message.get("wait", 10.0))))}
            else:
                reply = {}
            control.sendall(json.dumps({"op": op, **reply}).encode() + b"\n")
            if op == "stop":
                break
    finally:
        checker.stop()


# What the checker imports before the first test cell (``Checker.warm_up``; the batch's fork server when it forks
# many students): the checks with torch, and what torch imports lazily at the first key padding mask a check's
# reference model meets outside its fast path (``torch._check_with``: sympy, 0.4 s).
CHECKER_IMPORTS = ("translab.checks", "translab.wire", "torch.fx.experimental.symbolic_shapes")


def _load_checks() -> None:
    import importlib
    for name in CHECKER_IMPORTS:
        importlib.import_module(name)


def _as_the_cell_calls(check, call: Call, args, kwargs, variant: str | None = None) -> list:
    """The check's positional arguments, with the split and part of the call the test cell's own source makes
    (``call``, from the window) and the student's variant as the grader derived it: what the kernel sends for them
    is ignored, so a kernel that rewrites its request cannot have a hidden test run the visible cases, nor a
    student's numbers be judged against another student's configuration (``""``: the grader has none)."""
    import inspect
    signature = inspect.signature(check)
    parameters = signature.parameters
    bound = signature.bind_partial(*list(args), **dict(kwargs))
    if "split" in parameters:
        bound.arguments["split"] = call.split
    if "part" in parameters:
        bound.arguments["part"] = call.part if call.part is not None else parameters["part"].default
    if "variant" in parameters:
        bound.arguments["variant"] = variant or ""
    bound.apply_defaults()
    return [bound.arguments[name] for name in parameters]


def run_check(call: Call, header: dict, buffers: list[bytes], connection: socket.socket,
              variant: str | None = None, stage: int | None = None) -> tuple[bool, list[str], str, str]:
    """Run ``translab.checks.<call.check>`` here, on the student's objects in the kernel, whose translab is
    ``stage`` (what it holds back, the check hands it no object of): (passed, ok lines, failure message, diagnosis
    key)."""
    from translab import checks, stages, wire  # lazy: torch (1.2 s), for the checker's process alone
    if call.check not in checks.__all__ or not call.check.startswith("check_"):
        return False, [], f"there is no check {call.check}", "checker_error"
    held = [] if stage is None else [f"{module}:{name}" for module, names in withheld.withheld(stage).items()
                                     for name in names]
    held_token = stages.holding_back(held)
    session = wire.Session(connection, hidden=call.split != "visible")
    token = wire.enter(session)
    lines: list[str] = []
    output = checks.capture_output(lines)
    try:
        arguments = wire.decode(header.get("value"), buffers, session)
        check = getattr(checks, call.check)
        check(*_as_the_cell_calls(check, call, arguments["args"], arguments["kwargs"], variant))
        return True, lines, "", ""
    except checks.CheckFailed as failed:
        return False, lines, failed.message, failed.key
    except Exception as error:  # noqa: BLE001 - a lost kernel, a malformed message
        return False, lines, f"the grader could not run {call.label()}: {type(error).__name__}: {str(error)[:300]}", \
            "checker_error"
    finally:
        checks.release_output(output)
        wire.leave(token)
        stages.stop_holding_back(held_token)


# ----------------------------------------------------------------- answers that reach for the tools of a rewrite

_SUSPICIOUS_NAMES = {
    "settrace": "installs a tracer", "setprofile": "installs a profiler", "_getframe": "reads the call stack",
    "f_back": "reads the call stack", "f_locals": "reads another frame's variables", "f_globals": "reads another "
    "frame's globals", "__code__": "replaces a function's code", "__globals__": "reads a function's globals",
    "__torch_function__": "defines a tensor subclass that answers torch's functions",
    "__torch_dispatch__": "defines a tensor subclass that answers torch's operators",
    "get_referrers": "walks the garbage collector", "get_objects": "walks the garbage collector",
    "ctypes": "uses ctypes", "_generate_square_subsequent_mask": "calls PyTorch's private mask helper",
    "wire": "reaches translab.wire", "TRANSLAB_CHECKER": "reaches the checker's socket",
}


# What the checks ask the student's objects about themselves (which parameters and buffers a module has); an answer
# has no reason to redefine or reassign them, and one that does could make a check read a lie.
_INTROSPECTION = frozenset({"parameters", "named_parameters", "buffers", "named_buffers", "state_dict", "modules",
                            "named_modules", "children", "named_children", "__getattribute__", "__dir__"})

# modules whose attributes an answer has no reason to assign (the checks, their references, torch, numpy, builtins)
_GUARDED_MODULES = {"checks", "references", "harness", "wire", "torch", "nn", "F", "np", "numpy", "builtins", "sys",
                    *(f"part{n}" for n in range(1, 7))}


def suspicious(source: str) -> list[str]:
    """Why an answer cell's source looks like an attempt on the grader (flag it for a human; it scores as graded)."""
    found = []
    for node in _nodes(source):
        names = []
        if isinstance(node, ast.Name):
            names.append(node.id)
        elif isinstance(node, ast.Attribute):
            names.append(node.attr)
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in _GUARDED_MODULES and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.append(f"assigns {ast.unparse(node)}")
            if node.attr in _INTROSPECTION and isinstance(node.ctx, (ast.Store, ast.Del)):
                found.append(f"reassigns {node.attr}, which the checks read")
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            modules = [a.name for a in node.names] + ([node.module] if isinstance(node, ast.ImportFrom) and node.module else [])
            names += [m.split(".")[-1] for m in modules]
            if any(m.split(".")[0] == "grader" for m in modules):
                found.append("imports the grader")
            if "references" in names or "translab.references" in modules:
                found.append("imports the checks' references")
        elif isinstance(node, ast.ClassDef):
            found += [f"redefines {item.name}, which the checks read" for item in node.body
                      if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name in _INTROSPECTION]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            names += [n for n in _SUSPICIOUS_NAMES if n in node.value and n.startswith(("_", "TRANSLAB"))]
        found += [_SUSPICIOUS_NAMES[n] for n in names if n in _SUSPICIOUS_NAMES]
    return sorted(set(found))

