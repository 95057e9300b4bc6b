"""The wire between a student's kernel and the grader's checker: how a test cell's verdict leaves the kernel.

While nbgrader grades, the grader runs a checker outside the student's process (``grader.grading.verdicts``) and gives
the kernel the path of its Unix socket in ``TRANSLAB_CHECKER``.  A test cell's ``checks.check_x(answer)`` then
does not judge anything in the kernel: it connects, names the check, and serves.  The checker runs the same
check (``translab.checks``, the visible feedback students see in the lab) against the grader's references,
hidden split included; every time the check needs the student's code it asks the kernel to run it
(``call``/``getattr``/``put``), and the kernel answers with plain data.  The verdict is recorded by the checker,
and the test cell's score comes from that record, not from what the kernel printed or raised.

Two codecs, one per direction of trust:

* checker -> kernel (inputs, reference models, generators): pickle.  The kernel trusts the grader.
* kernel -> checker (whatever the student's code returned): ``encode``/``decode``, JSON plus raw buffers, never
  pickle.  Tensors arrive as plain ``torch.Tensor`` built from their bytes (a tensor subclass, its
  ``__torch_function__`` and any patched comparison stay in the kernel); numbers, strings, lists, tuples and
  dicts as themselves; anything else as a ``Handle``, a proxy whose attributes and calls go back to the kernel.

Outside grading (``make lab``, Validate) nothing here runs: the checks judge in the kernel, where the student
works.

Why one file: both ends of the protocol (the kernel's request and what the checker answers) must change together,
and this is the one module the kernel and the checker share.
"""
from __future__ import annotations

import contextvars
import io
import json
import os
import pickle
import socket
import struct
import sys
import types
from typing import Any, Callable, NamedTuple

import torch

from translab.contract import CheckFailed
from translab.hidden_words import HIDDEN_ERROR_NOTE, composed_failure  # noqa: F401 - the checks read the note here
from translab.paths import CHECKER_ENV as ENV  # the checker's socket, set by the grader in the kernel's environment
MAX_HEADER = 16 * 1024 ** 2
MAX_BUFFERS = 1024 ** 3  # the converted MiniLM checkpoint is 90 MB
# What decoding one message may copy on top of what was received: tensors the kernel sent on the same bytes are
# copied apart, so a message of many nodes on one buffer once made the checker hold 3.76 GiB for 64 MiB sent.
MAX_COPIES = 1024 ** 3
MAX_ITEMS = 100_000  # items of an iterator the kernel materialises for the checker

_DTYPES = {str(d): d for d in (torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
                               torch.complex128, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
                               torch.bool)}
# classes the checker may stand for a handle's class (isinstance) when they are already imported there
_CLASS_ROOTS = ("torch", "translab", "builtins", "collections", "numpy")
# exceptions from the kernel re-raised as themselves in the checker (the checks catch some of them)
_EXCEPTIONS = {e.__name__: e for e in (RuntimeError, TypeError, ValueError, AttributeError, KeyError, IndexError,
                                       AssertionError, NotImplementedError, ZeroDivisionError)}


class WireError(ConnectionError):
    """The other side broke the protocol, closed the connection or sent too much."""


# ----------------------------------------------------------------- framing

def send(sock: socket.socket, header: dict, buffers: list[bytes] = ()) -> None:
    head = json.dumps({**header, "buffers": [len(b) for b in buffers]}).encode()
    sock.sendall(struct.pack("!I", len(head)) + head)
    for buffer in buffers:
        sock.sendall(buffer)


def _exactly(sock: socket.socket, size: int) -> bytearray:
    """``size`` bytes, read into one buffer (tensors are then built on it: no join, no copy)."""
    data = bytearray(size)
    view, got = memoryview(data), 0
    while got < size:
        count = sock.recv_into(view[got:], min(size - got, 1 << 22))
        if not count:
            raise WireError("the other side closed the connection")
        got += count
    return data


def recv(sock: socket.socket) -> tuple[dict, list[bytes]]:
    (size,) = struct.unpack("!I", _exactly(sock, 4))
    if size > MAX_HEADER:
        raise WireError(f"a message header of {size} bytes")
    try:
        header = json.loads(_exactly(sock, size))
        sizes = [int(s) for s in header.pop("buffers")]
    except (ValueError, KeyError, TypeError, AttributeError) as error:
        raise WireError(f"an unreadable message: {error}") from None
    if not isinstance(header, dict) or any(s < 0 for s in sizes) or sum(sizes) > MAX_BUFFERS:
        raise WireError("a malformed or oversized message")
    return header, Received(_exactly(sock, s) for s in sizes)


class Received(list):
    """A message's buffers, with what decoding them may still copy (``MAX_COPIES``)."""

    copies_left = MAX_COPIES

    def charge(self, size: int) -> None:
        self.copies_left -= size
        if self.copies_left < 0:
            raise WireError(f"a message that decodes to over {MAX_COPIES} bytes of copies (its tensors share buffers)")


# ----------------------------------------------------------------- kernel -> checker: plain data only

def _qualified(cls: type) -> str:
    return f"{getattr(cls, '__module__', '?')}:{getattr(cls, '__qualname__', '?')}"


class _Encoder:
    """Turns what the student's code returned into JSON and buffers; the objects that are not plain data stay
    in the kernel (``objects``) and travel as handles."""

    def __init__(self, objects: dict[int, Any]):
        self.objects, self.buffers = objects, []

    def handle(self, value) -> dict:
        key = id(value)
        self.objects[key] = value
        cls = type(value)
        try:
            mro = [_qualified(c) for c in cls.__mro__]
        except Exception:  # noqa: BLE001 - an odd metaclass: a handle of unknown class
            mro = []
        return {"t": "handle", "id": key, "type": getattr(cls, "__name__", "object"),
                "module": str(getattr(cls, "__module__", "")), "mro": mro, "callable": callable(value)}

    def buffer(self, data: bytes) -> int:
        self.buffers.append(data)
        return len(self.buffers) - 1

    def tensor(self, value: torch.Tensor) -> dict:
        with torch._C.DisableTorchFunctionSubclass():  # a subclass cannot choose what its bytes look like
            plain = torch.Tensor.detach(value)
            fields = {"t": "tensor", "dtype": str(plain.dtype), "shape": list(plain.shape),
                      "requires_grad": bool(value.requires_grad), "ptr": int(plain.data_ptr()) if plain.layout ==
                      torch.strided and plain.device.type == "cpu" else 0}
            if plain.device.type != "cpu" or plain.layout != torch.strided or fields["dtype"] not in _DTYPES:
                return {**fields, "device": plain.device.type, "readable": False}
            flat = plain.contiguous().reshape(-1)
            data = memoryview(flat.view(torch.uint8).numpy()) if flat.numel() else b""  # sent as they are
        return {**fields, "buf": self.buffer(data)}

    def encode(self, value, depth: int = 0):
        if depth > 32:
            return self.handle(value)
        kind = type(value)
        if value is None or kind in (bool, int, str):
            return value
        if kind is float:
            return value if value == value and abs(value) != float("inf") else {"t": "float", "v": repr(value)}
        if kind in (list, tuple):
            return {"t": kind.__name__, "v": [self.encode(v, depth + 1) for v in value]}
        if kind is torch.Size:
            return {"t": "size", "v": [int(v) for v in value]}
        if isinstance(value, tuple) and hasattr(kind, "_fields"):  # a namedtuple (translab's Batch): its items
            return {"t": "tuple", "v": [self.encode(v, depth + 1) for v in tuple.__iter__(value)]}
        if isinstance(value, dict) and kind.__module__ in ("builtins", "collections"):
            return {"t": "dict", "v": [[self.encode(k, depth + 1), self.encode(v, depth + 1)]
                                       for k, v in dict.items(value)]}
        if isinstance(value, torch.Tensor):
            return self.tensor(value)
        if isinstance(value, torch.dtype):
            return {"t": "dtype", "v": str(value)}
        if kind.__module__ == "numpy":
            import numpy
            if isinstance(value, numpy.ndarray) and value.dtype.kind in "biufc":
                return {"t": "ndarray", "dtype": value.dtype.str, "shape": list(value.shape),
                        "buf": self.buffer(numpy.ascontiguousarray(value).tobytes())}
            if isinstance(value, numpy.generic) and value.dtype.kind in "biufc":
                return {"t": "npscalar", "dtype": value.dtype.str, "buf": self.buffer(value.tobytes())}
        if isinstance(value, (types.GeneratorType, map, filter, zip, enumerate)) or kind.__name__.endswith("iterator"):
            items = []
            for item in value:
                if len(items) >= MAX_ITEMS:
                    break
                items.append(self.encode(item, depth + 1))
            return {"t": "list", "v": items}
        return self.handle(value)


def encode(value, objects: dict[int, Any]) -> tuple[Any, list[bytes]]:
    encoder = _Encoder(objects)
    tree = encoder.encode(value)
    return tree, encoder.buffers


def _decode_tensor(node: dict, buffers: list[bytes]) -> torch.Tensor:
    dtype = _DTYPES.get(node.get("dtype"))
    shape = [int(s) for s in node.get("shape", [])]
    if dtype is None or any(s < 0 for s in shape):
        raise WireError(f"a tensor of dtype {node.get('dtype')!r} and shape {shape}")
    if not node.get("readable", True):  # on another device, sparse, ...: its shape and dtype, no values
        tensor = torch.empty(shape, dtype=dtype, device="meta")
    else:
        data = buffers[int(node["buf"])]
        numel = 1
        for s in shape:
            numel *= s
        if len(data) != numel * torch.empty((), dtype=dtype).element_size():
            raise WireError("a tensor whose bytes do not match its shape")
        tensor = (torch.frombuffer(_own(buffers, int(node["buf"])), dtype=torch.uint8).view(dtype).reshape(shape)
                  if numel else torch.empty(shape, dtype=dtype))
        if node.get("requires_grad") and (tensor.is_floating_point() or tensor.is_complex()):
            tensor.requires_grad_(True)
    tensor._kernel_ptr = int(node.get("ptr", 0))
    return tensor


def _own(buffers: list, index: int) -> bytearray:
    """The received buffer ``index`` for one tensor to be built on: itself the first time, a copy after (two
    tensors the kernel sent on the same bytes must not alias here)."""
    data = buffers[index]
    if type(data) is bytearray:
        buffers[index] = memoryview(data).toreadonly()
        return data
    _charge(buffers, len(data))
    return bytearray(data)


def _charge(buffers: list, size: int) -> None:
    if isinstance(buffers, Received):
        buffers.charge(size)


def decode(node, buffers: list[bytes], session: "Session | None" = None):
    """The checker's copy of what the kernel sent: plain values, tensors built from bytes, handles."""
    if node is None or type(node) in (bool, int, float, str):
        return node
    if type(node) is not dict:
        raise WireError(f"an unexpected {type(node).__name__} in a message")
    kind = node.get("t")
    if kind in ("list", "tuple", "size"):
        items = [decode(v, buffers, session) for v in node["v"]]
        return {"list": list, "tuple": tuple, "size": torch.Size}[kind](items)
    if kind == "dict":
        return {decode(k, buffers, session): decode(v, buffers, session) for k, v in node["v"]}
    if kind == "float":
        return float(node["v"]) if node["v"] in ("nan", "inf", "-inf") else 0.0
    if kind == "tensor":
        return _decode_tensor(node, buffers)
    if kind == "dtype":
        if node["v"] not in _DTYPES:
            raise WireError(f"an unknown dtype {node['v']!r}")
        return _DTYPES[node["v"]]
    if kind in ("ndarray", "npscalar"):
        import numpy
        dtype = numpy.dtype(str(node["dtype"]))
        if dtype.kind not in "biufc":
            raise WireError(f"a numpy array of dtype {dtype}")
        if kind == "npscalar":
            return numpy.frombuffer(buffers[int(node["buf"])], dtype=dtype)[0]
        array = numpy.frombuffer(buffers[int(node["buf"])], dtype=dtype).reshape(node["shape"])
        _charge(buffers, array.nbytes)
        return array.copy()
    if kind == "handle":
        if session is None:
            raise WireError("a handle outside a session")
        return Handle(session, int(node["id"]), node)
    raise WireError(f"an unknown kind {kind!r}")


def kernel_pointer(tensor: torch.Tensor) -> int:
    """Where a tensor's storage was in the kernel (to tell shared weights from copies), or here."""
    return getattr(tensor, "_kernel_ptr", 0) or tensor.data_ptr()


# ----------------------------------------------------------------- checker -> kernel: pickle (the kernel trusts it)

def _generator(state: torch.Tensor) -> torch.Generator:
    generator = torch.Generator()
    generator.set_state(state)
    return generator


FAST_TENSOR_BYTES = 1 << 10  # a tensor of this size or more travels as its raw bytes (see _Pickler)


def _tensor_from_bytes(data: bytearray, dtype: str, shape: list[int], requires_grad: bool) -> torch.Tensor:
    tensor = torch.frombuffer(data, dtype=torch.uint8).view(_DTYPES[dtype]).reshape(shape)
    return tensor.requires_grad_(True) if requires_grad else tensor


class _Pickler(pickle.Pickler):
    def persistent_id(self, obj):
        return ("handle", obj._id) if type(obj) is Handle else None

    def reducer_override(self, obj):
        if type(obj) is torch.Generator:
            return _generator, (obj.get_state(),)
        if type(obj) is torch.Tensor and owns_its_storage(obj):
            # torch pickles a tensor's storage through torch.save, one zip archive each: 0.25 s to pack and
            # 0.3 s to unpack the 90 MB MiniLM checkpoint, sent to the kernel three times a submission.  A plain,
            # contiguous tensor that is the whole of its storage is its bytes, out of band (``pack``): sent from
            # its own memory, received into the buffer the kernel's tensor is built on.  Tiny ones, views and
            # subclasses keep torch's own way, which keeps strides and storage shared between tensors.
            data = obj.detach().view(-1).view(torch.uint8).numpy()
            return _tensor_from_bytes, (pickle.PickleBuffer(data), str(obj.dtype), list(obj.shape),
                                        obj.requires_grad)
        return NotImplemented


def owns_its_storage(tensor: torch.Tensor) -> bool:
    if (tensor.device.type != "cpu" or tensor.layout != torch.strided or str(tensor.dtype) not in _DTYPES
            or not tensor.is_contiguous() or tensor.storage_offset() != 0 or tensor.grad_fn is not None
            or tensor.is_conj() or tensor.is_neg()):
        return False
    size = tensor.numel() * tensor.element_size()
    return size >= FAST_TENSOR_BYTES and tensor.untyped_storage().nbytes() == size


class _Unpickler(pickle.Unpickler):
    def __init__(self, data: bytes, objects: dict[int, Any], buffers: list = ()):
        super().__init__(io.BytesIO(data), buffers=buffers)
        self.objects = objects

    def persistent_load(self, pid):
        return self.objects[pid[1]]


def pack(value) -> list:
    """``value`` as wire buffers: the pickle stream, then the raw bytes of its large tensors out of band (sent
    from the tensors' own memory, received into the buffers the kernel's tensors are built on)."""
    buffer, raw = io.BytesIO(), []
    _Pickler(buffer, protocol=5, buffer_callback=raw.append).dump(value)
    return [buffer.getbuffer(), *(b.raw() for b in raw)]


def unpack(buffers: list, objects: dict[int, Any]):
    """``pack``'s value from the buffers received (bytearrays: tensors are built on them without a copy)."""
    return _Unpickler(buffers[0], objects, [b if type(b) is bytearray else bytearray(b) for b in buffers[1:]]).load()


# ----------------------------------------------------------------- the checker's side of a session

_SESSION: contextvars.ContextVar["Session | None"] = contextvars.ContextVar("translab_wire_session", default=None)
_FORBIDDEN: contextvars.ContextVar[tuple[str, ...]] = contextvars.ContextVar("translab_wire_forbidden", default=())


def remote(value) -> bool:
    return type(value) is Handle


def forbidding(names: list[str]):
    """Record (in the checker) what the kernel must switch off while it runs the next calls."""
    return _FORBIDDEN.set(_FORBIDDEN.get() + tuple(names))


def stop_forbidding(token) -> None:
    _FORBIDDEN.reset(token)


# What a failure the kernel reports may be called, in a hidden check (``Session``): the check's own label, then one of
# these, the error's type and its line; never text the kernel chose.
class Session:
    """One check, run by the checker, talking to the kernel that asked for it.  In a ``hidden`` check, what the
    kernel reports of a failure is composed here (``composed_failure``): a message the answer wrote could quote the
    hidden inputs into the student's feedback."""

    def __init__(self, sock: socket.socket, hidden: bool = False):
        self.sock = sock
        self.hidden = hidden
        self._findings: list[tuple[str, str]] = []

    def take_findings(self) -> list[tuple[str, str]]:
        """What the kernel's last calls kept to report beside the verdict (``WithFindings``), in the checker's
        words where the check is hidden."""
        found, self._findings = self._findings, []
        return found

    def request(self, op: str, target: "Handle | None" = None, payload=None, **fields):
        buffers = pack(payload) if payload is not None else []
        send(self.sock, {"op": op, "target": target._id if target is not None else None, **fields}, buffers)
        header, buffers = recv(self.sock)
        kind = header.get("op")
        if kind == "result":
            for text, key in [f for f in header.get("findings") or [] if type(f) is list and len(f) == 2][:8]:
                self._findings.append(composed_failure(fields.get("what"), {"key": key}) if self.hidden else
                                      (str(text)[:2000], str(key)[:200]))
            return decode(header.get("value"), buffers, self)
        if kind == "fail":  # a checked call failed in the kernel: its message, as the check would raise it
            if self.hidden:
                raise CheckFailed(*composed_failure(fields.get("what"), header))
            raise CheckFailed(str(header.get("message", ""))[:4000], str(header.get("key", ""))[:200])
        if kind == "raise":
            error = _EXCEPTIONS.get(str(header.get("type")), RuntimeError)
            if self.hidden:
                raise error(composed_failure(fields.get("what"), {**header, "key": "raised"})[0])
            raise error(str(header.get("message", ""))[:2000])
        raise WireError(f"an unexpected answer {kind!r}")

    def call(self, target: "Handle", args: tuple, kwargs: dict, what: str | None = None):
        return self.request("call", target, (args, kwargs), grad=torch.is_grad_enabled(),
                            forbid=list(_FORBIDDEN.get()), what=what)

    def put(self, value) -> "Handle":
        return self.request("put", payload=value)


def session() -> "Session | None":
    return _SESSION.get()


def enter(value: "Session | None"):
    return _SESSION.set(value)


def leave(token) -> None:
    _SESSION.reset(token)


def share(value):
    """``value`` moved into the kernel, as a handle (so the check sees what the student's code does to it), when a
    session is running; ``value`` itself otherwise."""
    current = _SESSION.get()
    return current.put(value) if current is not None else value


class Handle:
    """An object that lives in the student's kernel: attributes and calls are asked of the kernel; ``isinstance``
    sees the nearest class of its kind that the checker itself has imported (torch's, translab's)."""

    __slots__ = ("_session", "_id", "_info")

    def __init__(self, session: Session, key: int, info: dict):
        object.__setattr__(self, "_session", session)
        object.__setattr__(self, "_id", key)
        object.__setattr__(self, "_info", info)

    def __getattr__(self, name: str):
        if name.startswith("__"):
            raise AttributeError(name)
        return self._session.request("getattr", self, name=name)

    def __setattr__(self, name, value):
        raise AttributeError("objects of the student's kernel are read-only here")

    def __call__(self, *args, **kwargs):
        return self._session.call(self, args, kwargs)

    @property
    def __class__(self):  # noqa: D401 - what isinstance() consults after type()
        for entry in self._info.get("mro", []):
            module, _, qualname = str(entry).partition(":")
            if module.split(".")[0] not in _CLASS_ROOTS or module not in sys.modules:
                continue
            found = sys.modules[module]
            for part in qualname.split("."):
                found = getattr(found, part, None)
            if isinstance(found, type) and found is not object:
                return found
        return Handle

    @property
    def type_name(self) -> str:
        return str(self._info.get("type", "object"))

    @property
    def type_module(self) -> str:
        return str(self._info.get("module", ""))

    def __repr__(self) -> str:
        return f"<{self.type_name} in the student's kernel>"

    def __bool__(self) -> bool:
        return True


def type_name(value) -> str:
    return value.type_name if type(value) is Handle else type(value).__name__


def type_module(value) -> str:
    return value.type_module if type(value) is Handle else (type(value).__module__ or "")


# ----------------------------------------------------------------- the kernel's side of a session

def student_frame(error: BaseException | None):
    """The innermost frame of ``error``'s traceback in the student's own code (not translab, torch or the standard
    library), or None."""
    import sysconfig
    import traceback
    if error is None:
        return None
    # translab's own folder (this file's) and torch's
    skip = tuple(os.path.dirname(path) + os.sep for path in (__file__, torch.__file__)) + tuple(
        {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if not frame.filename.startswith(skip) and frame.lineno:
            return frame
    return None


def student_line(error: BaseException | None) -> int | None:
    frame = student_frame(error)
    return frame.lineno if frame is not None else None


# What the grading kernel's guard (grader.isolation.kernel_guard) had to put back before a cell: the names of the
# channel an answer replaced.  Sent with the next check (and then forgotten), so the grader flags the notebook; the
# checks ran through the real channel, and score as graded.
PUT_BACK: list[str] = []
PUT_BACK_SHOWN = 20


def grading() -> bool:
    """In a grading kernel with a checker to talk to (and not in the checker itself)."""
    return bool(os.environ.get(ENV)) and _SESSION.get() is None


class Refused(Exception):
    """The checker does not grade this call (it is not in a graded test cell): the check runs here."""


def _resolve(name: str):
    import importlib
    module, _, qualname = name.partition(":")
    found = importlib.import_module(module)
    for part in qualname.split("."):
        found = getattr(found, part)
    return found


class WithFindings(NamedTuple):
    """A call's value and what the check keeps to report beside its verdict: sent with the value."""
    value: Any
    findings: list


def serve(check: str, args: tuple, kwargs: dict, split: str, kernel_call: Callable) -> dict:
    """Ask the checker to run ``check`` on the student's objects and answer its requests until it is done;
    returns the checker's verdict ``{"passed", "output", "message", "key"}``.  Raises ``Refused`` when the
    checker does not grade this call.  ``kernel_call(target, what, args, kwargs, forbidden)`` makes each call the
    checker asks for (``translab.checks.harness._kernel_call``: the checks' own, passed in so that this transport
    imports no check)."""
    objects: dict[int, Any] = {}
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(os.environ[ENV])
        except OSError as error:
            raise WireError(f"the grader's checker cannot be reached ({error})") from None
        tree, buffers = encode({"args": list(args), "kwargs": dict(kwargs)}, objects)
        put_back = [str(name)[:120] for name in PUT_BACK[-PUT_BACK_SHOWN:]]
        PUT_BACK.clear()  # told once: the cells after it are flagged only for what is put back before them
        send(sock, {"op": "begin", "check": check, "split": split, "part": kwargs.get("part"), "value": tree,
                    "put_back": put_back}, buffers)
        while True:
            header, buffers = recv(sock)
            op = header.get("op")
            if op == "refused":
                raise Refused(str(header.get("reason", "")))
            if op == "end":
                return header
            try:
                target = objects[header["target"]] if header.get("target") is not None else None
                if op == "getattr":
                    value = getattr(target, str(header["name"]))
                elif op == "put":
                    value = unpack(buffers, objects)
                elif op == "call":
                    call_args, call_kwargs = unpack(buffers, objects)
                    targets = [_resolve(name) for name in header.get("forbid", [])]
                    what = str(header["what"]) if header.get("what") is not None else None
                    with torch.set_grad_enabled(bool(header.get("grad", True))):
                        value = kernel_call(target, what, call_args, call_kwargs, targets)
                else:
                    raise WireError(f"an unknown request {op!r}")
            except CheckFailed as failed:
                cause = failed.__context__
                send(sock, {"op": "fail", "message": failed.message, "key": failed.key,
                            "type": type(cause).__name__ if cause is not None else None, "line": student_line(cause)})
                continue
            except Exception as error:  # noqa: BLE001 - the student's code raised: the check decides what it means
                send(sock, {"op": "raise", "type": type(error).__name__, "message": str(error)[:2000],
                            "line": student_line(error)})
                continue
            extra = {}
            if type(value) is WithFindings:  # what the check keeps to report beside its verdict (a warning)
                extra = {"findings": [[str(text)[:2000], str(key)[:200]] for text, key in value.findings[:8]]}
                value = value.value
            tree, buffers = encode(value, objects)
            send(sock, {"op": "result", "value": tree, **extra}, buffers)
    finally:
        sock.close()
