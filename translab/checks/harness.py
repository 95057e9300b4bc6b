"""The harness every check shares: how a failure reads, how the student's code is called, what it may not use.

``CheckFailed`` renders as its message (what was expected, what was found, the likely misconception) and
carries a diagnosis key for ``make report``; ``checked`` turns whatever the checker cannot compare into such a
message, and in a grading kernel hands the check to the grader's checker (``translab.wire``); ``call_student`` runs the
student's code (in the grader's checker: asks the kernel to), with ``forbid``'s targets switched off.

Why one file: every part's check module imports these pieces, and a failure's message, its key and the refusal of
translab's own code are one protocol that reads best in one place.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import warnings
from typing import Callable, NamedTuple, NoReturn

import torch

from .. import hidden_words, model, references, wire
from ..contract import CheckFailed  # noqa: F401 - the checks raise it; named here for them
from . import torch_watch
from .torch_watch import REFUSED
from .findings import defer, keeping, no_warnings, with_findings  # noqa: F401 - the checks use no_warnings
from ..relations import measured, output_relation


# "visible" or "hidden": the split of the check that is running (set by ``checked``).  A hidden check's message
# says what is wrong without the hidden inputs or the expected values.
_SPLIT = contextvars.ContextVar("translab_check_split", default="visible")


def in_hidden_check() -> bool:
    return _SPLIT.get() == "hidden"


def fail(what: str, expected=None, found=None, hint: str | None = None, *, key: str = "",
         keep: bool = False) -> NoReturn:
    """Raise ``CheckFailed``.  In a hidden check the expected and found lines are left out unless ``keep`` (they
    hold nothing of the hidden inputs); ``key`` names the misconception for the report."""
    lines = [what]
    if keep or not in_hidden_check():
        if expected is not None:
            lines.append(f"  expected: {expected}")
        if found is not None:
            lines.append(f"  found:    {found}")
    if hint:
        lines.append(f"  likely:   {hint}")
    raise CheckFailed("\n".join(lines), key)


# Where a passing check's "ok" line goes: printed in the kernel; a list in the grader's checker (grader.grading.verdicts).
_OUTPUT: contextvars.ContextVar[list | None] = contextvars.ContextVar("translab_check_output", default=None)


def capture_output(lines: list):
    return _OUTPUT.set(lines)


def release_output(token) -> None:
    _OUTPUT.reset(token)


def report_ok(message: str) -> None:
    lines = _OUTPUT.get()
    if lines is None:
        print(f"ok  {message}")
    else:
        lines.append(f"ok  {message}")


def shorten(value, limit: int = 300) -> str:
    """``value`` as a failure may quote it.  In a hidden check only what the checker formats itself: a tensor's or a
    number's values, and for text or an object of the kernel's its kind (``kind_of``), never its own words."""
    if in_hidden_check() and not isinstance(value, (torch.Tensor, int, float, bool, type(None))):
        return kind_of(value)
    try:
        if isinstance(value, torch.Tensor):
            text = str(value.detach()) if value.numel() <= 36 else f"tensor of shape {tuple(value.shape)}"
        else:
            text = repr(value)
    except Exception:  # noqa: BLE001 - an odd object must not break the message about it
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + " ..."


def kind_of(value) -> str:
    """What a value is, in a few words: ``numpy.ndarray of shape (5, 5)``, ``list``, ``float64 tensor``."""
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)} on {value.device}"
    module, name = wire.type_module(value), wire.type_name(value)
    if in_hidden_check():  # the checker's word for the class, never a name the answer chose
        name = hidden_words.known_type_name(name, module, "an object of a class of its own")
        if isinstance(value, (str, list, tuple, dict)) and not wire.remote(value):
            return f"a {name} of length {len(value)}"
    else:
        name = name if module in ("builtins", "") else f"{module.split('.')[0]}.{name}"
    shape = None if wire.remote(value) else getattr(value, "shape", None)
    return f"{name} of shape {tuple(shape)}" if isinstance(shape, tuple) else name


def require_tensor(value, what: str, verb: str = "return") -> torch.Tensor:
    """``value`` if it is a CPU tensor; else a failure that says what it is and how to make it a tensor."""
    if not isinstance(value, torch.Tensor):
        module = wire.type_module(value)
        hint = ("convert it with torch.from_numpy(array), or build it with torch functions from the start"
                if module.startswith("numpy") else
                "build it with torch functions (torch.zeros, torch.full, torch.tensor(...) of the list)"
                if isinstance(value, (list, tuple)) else
                "return the tensor itself" if value is not None else "the function returns nothing: add a return")
        fail(f"{what} must {verb} a torch.Tensor.", "a torch.Tensor", kind_of(value), hint, key="wrong_type", keep=True)
    if value.device.type != "cpu":
        fail(f"{what} {verb}s a tensor on the {value.device.type} device.", "a tensor on the CPU",
             str(value.device), "the tests run on the CPU: do not move tensors with .to(device) / .cuda() inside "
             "the answer, or create them on the device of the input", key="wrong_device", keep=True)
    if value.is_complex():
        fail(f"{what} {verb}s a complex tensor.", "real numbers", str(value.dtype), key="wrong_dtype", keep=True)
    return value


def matches_reference(found, expected: torch.Tensor, tol: references.Tolerance) -> bool:
    """``found`` is a tensor of ``expected``'s shape and values within the reference's tolerance, whatever its float
    dtype (compared in float64; ``translab.references.TOLERANCES``)."""
    if not isinstance(found, torch.Tensor) or tuple(found.shape) != tuple(expected.shape):
        return False
    if found.device.type == "meta" or found.is_complex():
        return False
    try:
        return references.within(found.detach().to("cpu"), expected, tol)
    except Exception:  # noqa: BLE001 - an odd tensor is simply not the same
        return False


def fail_measured(what: str, found, expected: torch.Tensor, tol: references.Tolerance, recipe: str, *,
                  position_axis: int | None = None, names: tuple[str, ...] = (), scales: dict | None = None,
                  why: dict[str, str] | None = None) -> NoReturn:
    """Fail a wrong output with what it measurably is (``translab.relations``): a transformation of the right one
    (softmax, log-softmax, scaled, shifted, transposed, moved; ``why`` adds a reason per key), or else what was
    measured (row sums, correlation, which positions are right) before ``recipe``."""

    def same(a, b):
        return matches_reference(a, b, tol)
    finding = output_relation(found, expected, same, position_axis=position_axis, names=names, scales=scales)
    if finding is not None:
        reason = (why or {}).get(finding.key, "")
        fail(f"{what}: {finding.text}.", hint=reason or recipe, key=finding.key, keep=True)
    seen = measured(found, expected, same, position_axis)
    fail(f"{what}." + (f" {seen[0].upper()}{seen[1:]}." if seen else ""), hint=recipe)


def fail_if_transposed(what: str, found, expected: torch.Tensor, tol: references.Tolerance, names: tuple[str, ...],
                       hint: str) -> None:
    """Before a wrong shape is failed as such: an output that is the right one with its axes in another order is
    named so (``translab.relations``)."""
    fail_if_related(what, found, expected, tol, names, {"output.transposed": hint}, only={"output.transposed"})


def fail_if_related(what: str, found, expected: torch.Tensor, tol: references.Tolerance, names: tuple[str, ...],
                    why: dict[str, str], only: set[str] | None = None) -> None:
    """A wrong output that measurably is a transformation of the right one (``translab.relations``; ``only``: of
    these kinds) is named so, with ``why``'s hint for its key (or the relation alone); otherwise nothing happens and
    the caller goes on."""
    finding = output_relation(found, expected, lambda a, b: matches_reference(a, b, tol), names=names)
    if finding is not None and (only is None or finding.key in only):
        fail(f"{what}: {finding.text}.", hint=why.get(finding.key), key=finding.key, keep=True)


def equal_elementwise(found, expected: torch.Tensor) -> bool:
    """``found`` is a tensor equal to ``expected`` element for element (after a cast to its dtype)."""
    if not isinstance(found, torch.Tensor) or tuple(found.shape) != tuple(expected.shape) or found.device.type == "meta":
        return False
    try:
        return bool(torch.equal(found.detach().to("cpu", expected.dtype), expected))
    except Exception:  # noqa: BLE001
        return False


def as_number(value, what: str, whole: bool = False):
    """A plain int or float from an answer that should be a number: Python and numpy numbers, one-element tensors
    and integral floats (for a count) are accepted; strings, booleans, NaN and the rest get a message."""
    import numbers
    if isinstance(value, torch.Tensor) and value.numel() == 1 and not value.is_complex():
        value = value.item()
    elif type(value).__module__ == "numpy" and hasattr(value, "item") and getattr(value, "size", 1) == 1:
        value = value.item()
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        hint = ("an int, e.g. 1_008_100 (no quotes)" if whole else "a float, e.g. 0.75") if isinstance(value, str) \
            else "return (or assign) the number itself"
        found = (kind_of(value) if in_hidden_check() else f"the string {value!r}") if isinstance(value, str) \
            else f"{kind_of(value)}: {shorten(value, 80)}"
        fail(f"{what} is not a number.", "an int" if whole else "a number", found, hint,
             key="count.not_a_number" if whole else "wrong_type", keep=True)
    if not math.isfinite(value):
        fail(f"{what} is {value}.", "a finite number", value, key="wrong_type", keep=True)
    if whole:
        if value != int(value):
            fail(f"{what} is not a whole number.", "an int", value, "a count of parameters is a whole number: check "
                 "for a / that should be a // or a factor that should not be there", key="count.not_a_number", keep=True)
        return int(value)
    return float(value)


def twin_mistakes(labels: list[str], why: str = "") -> str:
    """Mistakes that give identical numbers, stated together (``why``: the identity behind it)."""
    if len(labels) == 1:
        return labels[0]
    return ", equivalently ".join(labels) + f" (identical numbers{', since ' + why if why else ''}: the check cannot " \
        "tell these apart)"


@contextlib.contextmanager
def full_precision():
    """float32 matrix products in full precision while a check runs, whatever the notebook set: on a GPU runtime
    (Colab's) TF32 would otherwise round them to 10 bits of mantissa, far outside the checks' tolerances.  The
    checks compare on the CPU, where this changes nothing; the settings are put back afterwards."""
    saved = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.get_float32_matmul_precision())
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = saved[:2]
        torch.set_float32_matmul_precision(saved[2])


def checked(check: Callable) -> Callable:
    """A check as the test cells call it: records its split for ``fail``, and turns anything unexpected that
    happens inside the checker (an answer of an odd type, dtype, device or shape that a comparison chokes on)
    into a ``CheckFailed`` that says so, never a traceback from inside translab."""
    import functools
    import inspect
    signature = inspect.signature(check)

    @functools.wraps(check)
    def run(*args, **kwargs):
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as error:
            raise CheckFailed(f"{check.__name__} was called with other arguments than the test cell gives it: {error}"
                              "\n  likely:   the test cell was edited; use the notebook's test cell as it is",
                              "checker_error") from None
        bound.apply_defaults()
        split = bound.arguments.get("split", "visible")
        token = _SPLIT.set("hidden" if split == "hidden" else "visible")
        try:
            if wire.grading():
                try:
                    verdict = wire.serve(check.__name__, args, kwargs, split, _kernel_call)
                except wire.Refused:
                    pass  # not a graded test cell: the check runs here, as in the lab
                else:
                    for line in verdict.get("output") or []:
                        print(line)
                    if not verdict.get("passed"):
                        raise CheckFailed(str(verdict.get("message", "")), str(verdict.get("key", "")))
                    return None
            with keeping() as kept:
                try:
                    with full_precision():
                        result = check(*args, **kwargs)
                except CheckFailed as failed:
                    raise with_findings(failed, kept) from None
            if kept:
                raise with_findings(None, kept)
            return result
        except CheckFailed:
            raise
        except wire.WireError as error:
            raise CheckFailed(f"the grader lost contact with this kernel during the check ({error}).",
                              "checker_error") from None
        except AssertionError as error:  # raised by the answer outside call_student (e.g. while a class is built)
            raise CheckFailed(f"{check.__name__}: your code failed an assertion: {str(error)[:300]}", "raised") from None
        except Exception as error:  # noqa: BLE001 - the checker itself could not cope with this answer
            detail = (str(error).splitlines() or [""])[0][:200]
            raise CheckFailed(
                f"the check could not compare your answer with the reference ({type(error).__name__}: {detail}).\n"
                "  likely:   the answer returns something of an unexpected kind: another type (a numpy array, a list, "
                "a string), dtype (float64, an integer type), device or shape than the exercise asks for; "
                "compare what it returns with the docstring", "checker_error") from None
        finally:
            _SPLIT.reset(token)
    return run


# ----------------------------------------------------------------- running student code

def _raising_code(name: str, module: str = "translab"):
    message = torch_watch.refusal("calls", name, module)
    namespace: dict = {}
    exec(f"def _forbidden(*args, **kwargs):\n    raise AssertionError({message!r})\n", namespace)
    return namespace["_forbidden"].__code__


def _innermost(function):
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return function


def _code_key(code) -> tuple:
    """What a copy of a function's code keeps wherever it is loaded from (another module name, a copied file): its
    name, first line, bytecode and constants.  A student's own function with the same bytecode starts near the top
    of its cell, not dozens of lines in as translab's do, so it is never taken for one."""
    import types
    consts = tuple(_code_key(c) if isinstance(c, types.CodeType) else (type(c).__name__, repr(c)) for c in code.co_consts)
    return code.co_name, code.co_firstlineno, code.co_code, consts


@contextlib.contextmanager
def _refusing_copies(messages: dict[tuple, str]):
    """While the block runs, a call of any function whose code is a copy of a forbidden one (``_code_key``) raises:
    ``forbid`` swaps the code of the objects it is given, and a second copy of translab's module loaded with
    importlib has objects of its own."""
    import sys
    keys: dict = {}

    def profile(frame, event, arg):
        if event == "call":
            code = frame.f_code
            if code not in keys:
                keys[code] = _code_key(code)
            message = messages.get(keys[code])
            if message is not None:
                raise AssertionError(message)

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(before)


@contextlib.contextmanager
def forbid(*targets):
    """Make translab's functions and classes raise while the block runs, whatever name they were
    imported under: a function's code object and a class's ``__init__``/``forward`` are swapped
    (on the shared object itself) and restored afterwards, and a call of a copy of their code (another copy of the
    module) raises too.  In the grader's checker the student's code runs in the kernel: the targets are named
    there instead (``translab.wire``)."""
    if wire.session() is not None:
        names = [f"{t.__module__}:{t.__qualname__}" for t in (_innermost(t) for t in targets)]
        token = wire.forbidding(names)
        try:
            yield
        finally:
            wire.stop_forbidding(token)
        return
    saved, copies = [], {}
    watched = [torch_watch.builtin_of(target) for target in targets]
    try:
        for target, builtin in zip(targets, watched):
            if builtin is not None and not isinstance(target, type):
                continue  # a C function: watched where PyTorch dispatches it (torch_watch), its code not swapped
            if isinstance(target, type):
                for attr in ("__init__", "forward"):
                    if attr in vars(target):
                        saved.append((target, attr, vars(target)[attr]))
                        message = torch_watch.refusal("uses", target.__name__, target.__module__)
                        copies[_code_key(_innermost(vars(target)[attr]).__code__)] = message

                        def raiser(self, *args, _message=message, **kwargs):
                            raise AssertionError(_message)
                        setattr(target, attr, raiser)
            else:
                function = _innermost(target)
                name = getattr(function, "__qualname__", "function")
                saved.append((function, "__code__", function.__code__))
                module = getattr(function, "__module__", "") or ""
                copies[_code_key(function.__code__)] = torch_watch.refusal("calls", name, module)
                function.__code__ = _raising_code(name, module)
        with _refusing_copies(copies), torch_watch.watched([b for b in watched if b is not None]):
            yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


def _where(error: BaseException) -> str:
    """`` at line N of your code: <source line>`` for the innermost frame of the student's own code (not translab,
    torch or the standard library), without its file path."""
    frame = wire.student_frame(error)
    if frame is None:
        return ""
    line = (frame.line or "").strip()
    return f" at line {frame.lineno} of your code" + (f" ({line[:120]})" if line else "")


def refuse_call(what: str, error: AssertionError) -> None:
    """Fail for an answer that called the implementation it is to write: an accusation, so it names the call and
    the student's line it came from (a name the student's code calls may have been bound elsewhere: the line says
    which name)."""
    where = _where(error)
    evidence = f" The call is{where}." if where else ""
    fail(f"{what}: {error}{evidence}", key="calls_translab")


def call_student(what: str, function: Callable, *args, **kwargs):
    """Call the student's ``function``, each failure explained; a tensor it was given and changed in place fails
    too (issue 50: a check hands copies, so an answer that wrote into its caller's tensor went unreported; in a
    model the caller is the layer before, whose output, or autograd's record of it, it overwrites)."""
    if wire.remote(function):  # in the grader's checker: the kernel runs it, with this function's rules
        session = wire.session()
        value = session.call(function, args, kwargs, what=what)
        defer(session.take_findings())
        return value
    given = torch_watch.tensors_given(function, args, kwargs)
    saved = [tensor.detach().clone() for _, tensor in given]
    result = _call_once(what, function, args, kwargs)
    changed = [name for (name, tensor), copy in zip(given, saved)
               if not references.within(tensor.detach(), copy, references.EXACT, equal_nan=True)]
    if changed:  # a finding beside what the check compares next (issue 82), not instead of it
        defer([(f"{what} changed the tensor it was given as {' and '.join(f'`{name}`' for name in changed)} in "
                "place: the caller's tensor is not the answer's to write.\n  likely:   compute a new tensor instead: "
                "`x = x + y`, not `x += y`; `masked_fill`, not `masked_fill_`; or work on a `.clone()`",
                "mutates_input")])
    return result


def _call_once(what: str, function: Callable, args: tuple, kwargs: dict):
    try:
        with no_warnings(what), torch_watch.watching():
            return function(*args, **kwargs)
    except CheckFailed:
        raise
    except NotImplementedError:
        fail(f"{what} is not written yet (it raises NotImplementedError).",
             hint="replace `raise NotImplementedError()` in the answer cell with your code, then run that cell",
             key="not_written")
    except AssertionError as error:
        if REFUSED in str(error):  # forbid()'s message: the answer calls the implementation it is to write
            refuse_call(what, error)
        fail(f"{what} failed an assertion{_where(error)}{error_said(error, 300)}", key="raised")
    except Exception as error:
        nones = _passed_none(function, args, kwargs) if isinstance(error, (TypeError, AttributeError)) else []
        given = " and ".join(f"`{name}=None`" for name in nones)
        fail(f"{what} raised {type(error).__name__}{_where(error)}{error_said(error, 400)}" +
             (f"\n  measured: the call passed {given}, and raised a {type(error).__name__}" if nones else ""),
             hint=f"{given} is allowed: where your code uses {' or '.join(f'`{n}`' for n in nones)}, check "
                  f"`is not None` first{' (no mask: skip the masking step)' if any('mask' in n for n in nones) else ''}"
                  if nones else None, key="raised")


def _passed_none(function: Callable, args: tuple, kwargs: dict) -> list[str]:
    """The parameters this call gave None explicitly (``mask=None``), by name."""
    import inspect
    try:
        bound = inspect.signature(function).bind(*args, **kwargs).arguments
    except (TypeError, ValueError):
        return [name for name, value in kwargs.items() if value is None]
    return [name for name, value in bound.items() if value is None][:3]


def error_said(error: BaseException, limit: int) -> str:
    """What the error says, in a visible check; in a hidden one nothing (it could quote the hidden inputs: sizes,
    values), as the grader's checker composes it (``wire.composed_failure``)."""
    if in_hidden_check():
        return wire.HIDDEN_ERROR_NOTE
    text = str(error)
    if "\n * (" in text:  # PyTorch's list of every signature it accepts: its first line says what was wrong
        text = text.split("\n")[0].rstrip(":") + " (PyTorch's list of the signatures it accepts left out)"
    return f": {text[:limit]}"


def attempt_again(function: Callable, *args, **kwargs):
    """The student's ``function`` called once more on inputs the check chose to tell two causes apart; None when it
    raises (the first call's failure stands).  Through the kernel where the checker runs, as ``call_student``."""
    import io
    try:
        with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if wire.remote(function):
                return wire.session().call(function, args, kwargs, what=None)
            return function(*args, **kwargs)
    except CheckFailed:
        raise
    except Exception:  # noqa: BLE001 - a second failure says nothing new
        return None


def _kernel_call(target, what: str | None, args: tuple, kwargs: dict, forbidden: list):
    """A call the checker asks this kernel for (``wire.serve``): the student's object, translab's ``forbidden``
    implementations switched off, a failure of it explained as ``call_student`` explains it when ``what`` names it."""
    failure = None
    with keeping() as kept:
        try:
            with forbid(*forbidden):
                if what is not None:
                    value = call_student(what, target, *args, **kwargs)
                else:
                    with torch_watch.watching():
                        value = target(*args, **kwargs)
        except CheckFailed as failed:
            failure = failed
    if failure is not None:  # raised here, outside the handler: the error that caused it stays its context
        combined = with_findings(failure, kept)
        combined.__context__ = failure.__context__
        raise combined
    return wire.WithFindings(value, kept) if kept else value


def held_parameters(module, limit: int = 10_000) -> list:
    """Every parameter ``module`` holds, read from what ``nn.Module`` stores (each submodule's ``_parameters`` and
    ``_modules``), not from what it reports: an answer that redefines ``parameters`` or ``named_parameters`` hides
    nothing from a count.  A tensor held in two places counts once."""
    found, seen = [], set()
    for _, tensor in torch_watch.held_tensors(module, limit):
        key = (wire.kernel_pointer(tensor), tuple(tensor.shape))
        if key not in seen:
            seen.add(key)
            found.append(tensor)
    return found


def give_parameters_like(module, state: dict) -> None:
    """Give ``module`` a parameter of the same name and shape for each entry of ``state`` (a reference's state
    dict): a stand-in for a held-back reference (``translab.stages``) then counts, names and loads as it does."""
    from torch import nn
    for name, tensor in state.items():
        *path, leaf = name.split(".")
        owner = module
        for part in path:
            if part not in owner._modules:
                owner.add_module(part, nn.Module())
            owner = owner._modules[part]
        owner.register_parameter(leaf, nn.Parameter(torch.empty_like(tensor)))


def lab_model_module():
    return model



class OutputMistake(NamedTuple):
    """A misconception, in one place: the hint the student reads, what the answer's output then looks like, and
    ``variant(pieces)``, which the grader runs on a reference's inputs to store that output (``grader.references``);
    a check names the mistake when the answer's output equals the stored one."""
    hint: str
    variant: Callable
    looks_like: str = ""
    what: str = ""  # the failure's first line, where a check words it per mistake
    key: str = ""   # the diagnosis key, where it is not <exercise>.<name>


def mistaken_outputs(mistakes: dict[str, OutputMistake], pieces) -> dict:
    """What each mistake outputs on the pieces of one reference case (for the grader's references)."""
    return {name: mistake.variant(pieces) for name, mistake in mistakes.items()}


def variant_matches(found, case: dict, variants: dict, expected, tol: references.Tolerance) -> list[str]:
    """Keys of ``variants`` ({key: text}) whose stored output in ``case`` ``found`` equals; variants that equal the
    right answer on this case cannot be told from it and are left out."""
    return [key for key in variants if key in case and not matches_reference(case[key], expected, tol) and matches_reference(found, case[key], tol)]
