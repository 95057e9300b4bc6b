"""A student cell that looks, from inside a grading kernel, for what the kernel must not hold (issue 47).

The grader claims that notebook N's kernel holds translab's stage ``UNTIL=N`` and nothing of the instructor's: no
code of the full library's answers of parts N and later, no hidden reference's expected values, no token of the
batch's environment.  ``probe_cell`` writes a cell that checks that claim as an attacker would, from inside:

* every code object it can reach (``gc.get_objects()``, every module in ``sys.modules``, after importing every
  module of the kernel's own ``translab``) is compared by fingerprint (bytecode and constants) with the full
  library's implementations of the parts the stage holds back; with ``files``, so is every code object of every
  readable Python source, bytecode file and notebook on the machine that names one of them;
* every tensor it can reach, by its bytes, with the hidden references' expected outputs;
* with ``memory``, its own memory, its environment and every ``/proc/*/environ`` and ``cmdline`` it can read, with
  stand-in tokens, known to the probe only by a prefix and their digests (so that the probe's own source holds
  none of them).

A positive control (translab's ``contract.tagged``, in every stage) proves each search can find what it looks for.
The cell prints one line, ``MARKER`` and a JSON report; ``grader/tests/isolation/test_kernel_holds_nothing.py`` reads it back.
"""
from __future__ import annotations

import hashlib
import importlib
import inspect
import json
import types

import torch

from grader.course import withheld

MARKER = "translab-kernel-probe:"
TOKEN_PREFIX = "translab-standin-"  # a stand-in token: this prefix and 32 hex digits
CONTROL = "contract:tagged"


def fingerprint(code: types.CodeType) -> str:
    """What a copy of ``code`` shares with it wherever it was loaded from: its name, bytecode, plain constants and
    the names it uses."""
    constants = tuple(c for c in code.co_consts if not isinstance(c, types.CodeType))
    return hashlib.sha256(code.co_name.encode() + code.co_code + repr((constants, code.co_names,
                                                                       code.co_varnames)).encode()).hexdigest()


def _functions(obj):
    obj = inspect.unwrap(obj) if callable(obj) else obj  # torch.no_grad() and functools.wraps wrap the function
    if isinstance(obj, types.FunctionType):
        yield obj
    elif isinstance(obj, type):
        for value in vars(obj).values():
            value = getattr(value, "__func__", value)  # staticmethod, classmethod
            if isinstance(value, property):
                yield from (f for f in (value.fget, value.fset) if f is not None)
            elif callable(value):
                value = inspect.unwrap(value)
                if isinstance(value, types.FunctionType):
                    yield value


def code_fingerprints(stage: int) -> dict[str, str]:
    """{fingerprint: "module:name"} of the full library's answers that stage ``stage`` holds back."""
    found = {}
    for module, names in withheld.withheld(stage).items():
        library = importlib.import_module(f"translab.{module}")
        for name in names:
            for function in _functions(getattr(library, name)):
                found.setdefault(fingerprint(function.__code__), f"{module}:{name}")
    return found


def co_names(stage: int) -> set[str]:
    """The names of the code objects ``code_fingerprints`` and ``control_fingerprints`` stand for."""
    names = {CONTROL.partition(":")[2]}
    for module, held in withheld.withheld(stage).items():
        library = importlib.import_module(f"translab.{module}")
        names |= {function.__code__.co_name for name in held for function in _functions(getattr(library, name))}
    return names


def control_fingerprints() -> dict[str, str]:
    module, _, name = CONTROL.partition(":")
    function = getattr(importlib.import_module(f"translab.{module}"), name)
    return {fingerprint(function.__code__): CONTROL}


def tensor_digest(tensor: torch.Tensor) -> str:
    plain = tensor.detach().to("cpu").contiguous()
    return hashlib.sha256(str(plain.dtype).encode() + repr(tuple(plain.shape)).encode()
                          + plain.view(-1).view(torch.uint8).numpy().tobytes()).hexdigest()


def _tensors(value, path: str):
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{path}/{key}")
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield from _tensors(item, f"{path}/{index}")


def reference_fingerprints(folder) -> dict[str, str]:
    """{digest: path} of the hidden references' expected outputs of 8 values or more."""
    from translab import references
    found = {}
    for name in references.NAMES:
        for path, tensor in _tensors(references.load_from(folder, name).get("hidden"), name):
            if "expected" in path.rsplit("/", 1)[-1] and tensor.numel() >= 8:
                found[tensor_digest(tensor)] = path
    return found


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


PROBE = r'''
import gc, hashlib, importlib, importlib.util, json, marshal, os, pkgutil, sys, types, warnings
warnings.simplefilter("ignore")
import torch
_CODE, _CONTROL, _TENSORS, _TOKENS = {codes!r}, {control!r}, {tensors!r}, {tokens!r}
_PREFIX = "translab-" + "standin-"
_NAMES = sorted({{name.split(":")[1] for name in _CODE.values()}})
_CO_NAMES = {co_names!r}  # the names of the code objects looked for: only those are fingerprinted

{fingerprint}
{tensor_digest}

def _all_codes(code):
    yield code
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            yield from _all_codes(constant)

def _compare(code, where, into):
    for each in _all_codes(code):
        if each.co_name not in _CO_NAMES:
            continue
        key = fingerprint(each)
        if key in _CODE:
            into.setdefault("code", []).append(f"{{_CODE[key]}} in {{where}} ({{each.co_filename}})")
        if key in _CONTROL:
            into.setdefault("control", set()).add(where.split(":")[0])

import translab
for _module in pkgutil.walk_packages(translab.__path__, "translab."):
    try:
        importlib.import_module(_module.name)
    except Exception:
        pass
_report = {{"stage_file": translab.__file__}}
_seen = {{}}
for _obj in gc.get_objects():
    if isinstance(_obj, types.FunctionType):
        _compare(_obj.__code__, "gc", _seen)
    elif isinstance(_obj, types.CodeType):
        _compare(_obj, "gc", _seen)
    elif isinstance(_obj, torch.Tensor) and _obj.numel() >= 8 and _obj.device.type == "cpu":
        try:
            if tensor_digest(_obj) in _TENSORS:
                _seen.setdefault("tensors", []).append(_TENSORS[tensor_digest(_obj)])
        except Exception:
            pass
for _name, _module in list(sys.modules.items()):
    for _value in list(vars(_module).values()) if _module is not None else []:
        for _function in ([_value] if isinstance(_value, types.FunctionType) else
                          [v for v in vars(_value).values() if isinstance(v, types.FunctionType)]
                          if isinstance(_value, type) else []):
            _compare(_function.__code__, f"sys.modules:{{_name}}", _seen)

def _code_in_file(path, data):
    if path.endswith(".pyc"):  # another Python's bytecode cannot run here, and loading it can crash
        return [marshal.loads(data[16:])] if data[:4] == importlib.util.MAGIC_NUMBER else []
    if path.endswith(".ipynb"):
        cells = json.loads(data).get("cells", [])
        sources = ["".join(c.get("source", "")) for c in cells if c.get("cell_type") == "code"]
    else:
        sources = [data.decode("utf-8", "replace")]
    found = []
    for source in sources:
        try:
            found.append(compile(source, path, "exec"))
        except (SyntaxError, ValueError):
            pass
    return found

if {files!r}:
    import sysconfig
    # in the standard library and the folders of installed packages, only what is named translab: an installed
    # copy of the library is a package of that name (reading every file of torch's would take minutes)
    _libraries = {{os.path.realpath(p) for p in sys.path if p.endswith(("site-packages", "dist-packages"))}}
    _libraries |= {{os.path.realpath(sysconfig.get_paths()[k]) for k in ("stdlib", "platstdlib", "purelib", "platlib")}}
    _files = 0
    for _top, _dirs, _names in os.walk("/", onerror=lambda error: None):
        if _top in ("/proc", "/sys", "/dev"):
            _dirs[:] = []
            continue
        if _top in ("/usr", "/usr/local"):  # the system's own programs: only where Python keeps packages
            _dirs[:] = [d for d in _dirs if d in ("lib", "lib64", "local")]
        elif _top in ("/usr/lib", "/usr/lib64", "/usr/local/lib", "/usr/local/lib64"):
            _dirs[:] = [d for d in _dirs if d.startswith("python")]
        if os.path.realpath(_top) in _libraries or os.path.basename(_top) in ("site-packages", "dist-packages"):
            _dirs[:] = [d for d in _dirs if d.startswith("translab")]
            _names = [n for n in _names if n.startswith("translab") or n.endswith(".pth") or "editable" in n]
        for _file in _names:
            if not _file.endswith((".py", ".pyc", ".ipynb")):
                continue
            _path = os.path.join(_top, _file)
            try:
                if os.path.getsize(_path) > 20_000_000:
                    continue
                with open(_path, "rb") as _handle:
                    _data = _handle.read()
            except OSError:
                continue
            _files += 1
            if not any(name.encode() in _data for name in _NAMES + ["tagged"]):
                continue
            try:
                for _code in _code_in_file(_path, _data):
                    _compare(_code, "file:" + _path, _seen)
            except Exception:
                pass
    _report["files_read"] = _files

def _tokens_in(data):
    found, start = [], 0
    while True:
        start = data.find(_PREFIX.encode(), start)
        if start < 0:
            return found
        candidate = data[start:start + len(_PREFIX) + 32]
        if hashlib.sha256(candidate).hexdigest() in _TOKENS:
            found.append(_TOKENS[hashlib.sha256(candidate).hexdigest()])
        start += 1

if {memory!r}:
    _planted = _PREFIX + "c" * 32  # the search's own control: a token it must find in this process's memory
    _where = []
    _where += [("os.environ", t) for t in _tokens_in("\n".join(f"{{k}}={{v}}" for k, v in os.environ.items()).encode())]
    for _path in sorted(__import__("glob").glob("/proc/*/environ")) + sorted(__import__("glob").glob("/proc/*/cmdline")):
        try:
            _where += [(_path, t) for t in _tokens_in(open(_path, "rb").read())]
        except OSError:
            pass
    # its own memory as ctypes reads it (a kernel that is not dumpable may not open /proc/self/mem): the heap, the
    # stack (where the environment a process was started with lies) and every anonymous mapping
    import ctypes
    _regions = 0
    with open("/proc/self/maps") as _maps:
        for _line in _maps:
            _fields = _line.split()
            _low, _high = (int(x, 16) for x in _fields[0].split("-"))
            _name = _fields[5] if len(_fields) > 5 else ""
            if not _fields[1].startswith("r") or _high - _low > 1 << 29 or _name not in ("", "[heap]", "[stack]"):
                continue  # over 512 MB: a reservation (torch's, the allocator's) that holds no string
            _regions += 1
            for _start in range(_low, _high, 1 << 24):  # 16 MB at a time, overlapping by a token's length
                _end = min(_high, _start + (1 << 24) + 64)
                _where += [("memory", t) for t in _tokens_in(ctypes.string_at(_start, _end - _start))]
    _report["tokens"] = sorted(set(f"{{w}}: {{t}}" for w, t in _where))
    _report["memory_regions"] = _regions

_report.update(code=sorted(set(_seen.get("code", []))), control=sorted(_seen.get("control", [])),
               tensors=sorted(set(_seen.get("tensors", []))))
print({marker!r}, json.dumps(_report))
'''


def probe_cell(stage: int, references_folder, tokens: list[str], files: bool = False, memory: bool = False) -> str:
    """The probe's source for notebook ``stage``'s kernel."""
    return PROBE.format(codes=code_fingerprints(stage), control=control_fingerprints(), co_names=co_names(stage),
                        tensors=reference_fingerprints(references_folder),
                        tokens={**{token_digest(t): f"stand-in {i}" for i, t in enumerate(tokens)},
                                token_digest(TOKEN_PREFIX + "c" * 32): "control"},
                        fingerprint=inspect.getsource(fingerprint), tensor_digest=inspect.getsource(tensor_digest),
                        files=files, memory=memory, marker=MARKER)


def report(outputs: list, marker: str = MARKER) -> dict | None:
    """The probe's report among a cell's outputs (the JSON after ``marker``), or None."""
    for output in outputs:
        for line in str(output.get("text", "")).splitlines():
            if line.startswith(marker):
                return json.loads(line[len(marker):])
    return None
