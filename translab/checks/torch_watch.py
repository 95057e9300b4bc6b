"""What a student's call does inside PyTorch: the builtins it runs (watched where PyTorch dispatches them, for the
exercises that write them) and the tensors it was handed (compared after the call: none is the answer's to write).

``harness.forbid`` switches translab's own functions off by swapping their code.  PyTorch's builtins (scaled
dot-product attention, multi-head attention, a transformer layer) are C functions with no code to swap, and an answer
reaches them by any name: ``F.scaled_dot_product_attention``, ``torch._C._nn.scaled_dot_product_attention``,
``torch.ops.aten._scaled_dot_product_flash_attention_for_cpu``, an ``nn.MultiheadAttention`` built by hand.  Two
observers see them whatever the name, each where the other is blind:

- a ``TorchFunctionMode``, which refuses the call as it is made (a Python function such as
  ``F.multi_head_attention_forward`` has no operator of its own: only this sees it);
- PyTorch's RecordFunction observer in C++ (the legacy profiler: no output, about 60 microseconds a call), which
  records every aten operator whatever Python mode is on, off or popped, and ``torch.ops.aten`` called directly.

Each is checked at the end of the call: the mode must still be on top of its stack, the profiler still running
since the watch started it (its start event's time inside the window of our start), RecordFunction still on (a
marker we record must appear).  An answer that pops the mode is seen by the profiler; one that stops, restarts or
silences the profiler, by the mode and by those checks, and then the watch fails with ``TAMPERED_KEY``, which the
grader flags for the instructor.  Both observers are PyTorch's per-thread ones: what an answer runs in a thread of
its own is not seen (the output is still graded by its values)."""
from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import time
from dataclasses import dataclass
from typing import Callable

import torch
from torch.overrides import TorchFunctionMode

from translab.contract import WATCH_TAMPERED_KEY as TAMPERED_KEY  # the grader flags it (guarded_execute._tampering)
from translab.contract import CheckFailed
REFUSED = "switched off while this test runs"  # in every refusal: how call_student tells it from other errors
_MARK = "translab-torch-watch-end"  # recorded last: RecordFunction is still on


def refusal(kind: str, name: str, module: str = "translab") -> str:
    owner = "PyTorch's" if module.split(".")[0] == "torch" else "translab's"
    return (f"this answer {kind} {owner} own {name}. The exercise is to write it yourself: that version is "
            f"{REFUSED}.")


@dataclass(frozen=True)
class Builtin:
    """One of PyTorch's implementations: the functions the mode refuses and the aten operators the profiler must
    not record while the student's call runs."""
    name: str
    functions: tuple = ()
    operators: frozenset = frozenset()


_SDPA_OPERATORS = frozenset({
    "aten::scaled_dot_product_attention", "aten::_scaled_dot_product_attention_math",
    "aten::_scaled_dot_product_flash_attention_for_cpu", "aten::_scaled_dot_product_flash_attention",
    "aten::_scaled_dot_product_efficient_attention", "aten::_scaled_dot_product_cudnn_attention",
    "aten::_scaled_dot_product_fused_attention_overrideable", "aten::_fused_sdp_choice",
    "aten::_scaled_dot_product_attention_math_for_mps"})


@functools.cache
def _known_builtins() -> dict:
    """PyTorch's implementations an exercise may forbid, each with what stands for it at dispatch (made once: the
    table is the same for every check)."""
    from torch import nn
    from torch.nn import functional
    attention = Builtin("multi_head_attention_forward", (functional.multi_head_attention_forward,
                                                         torch._native_multi_head_attention),
                        frozenset({"aten::_native_multi_head_attention"}))
    return {
        functional.scaled_dot_product_attention: Builtin("scaled_dot_product_attention",
                                                         (functional.scaled_dot_product_attention,), _SDPA_OPERATORS),
        functional.multi_head_attention_forward: attention,
        nn.MultiheadAttention: attention,
        nn.TransformerEncoderLayer: Builtin("TransformerEncoderLayer", (torch._transformer_encoder_layer_fwd,),
                                            frozenset({"aten::_transformer_encoder_layer_fwd"})),
        nn.TransformerDecoderLayer: Builtin("TransformerDecoderLayer"),
    }


def builtin_of(target) -> Builtin | None:
    """The ``Builtin`` a forbidden target stands for, or None for one of translab's own (``forbid`` swaps those)."""
    try:
        return _known_builtins().get(target)
    except TypeError:  # an unhashable target
        return None


_WATCHED: contextvars.ContextVar[tuple[Builtin, ...]] = contextvars.ContextVar("translab_torch_watch", default=())


@contextlib.contextmanager
def watched(builtins: list[Builtin]):
    """While the block runs, the student's calls it makes (``watching``) are watched for ``builtins``."""
    token = _WATCHED.set(_WATCHED.get() + tuple(builtins))
    try:
        yield
    finally:
        _WATCHED.reset(token)


class _Refuser(TorchFunctionMode):
    def __init__(self, refused: dict):
        super().__init__()
        self.refused, self.seen = refused, []

    def __torch_function__(self, func, types, args=(), kwargs=None):
        try:
            name = self.refused.get(func)
        except TypeError:
            name = None
        if name is not None:
            self.seen.append(name)
            raise AssertionError(refusal("calls", name, "torch"))
        return func(*args, **(kwargs or {}))


def _profiler_config():
    """The legacy profiler's settings: CPU operators, no shapes, memory or stacks (the cheapest record)."""
    from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig
    return ProfilerConfig(ProfilerState.CPU, False, False, False, False, False, _ExperimentalConfig())


_CONFIG = _profiler_config()  # made once, at import: the kernel's guard puts back any global that changes


class _Recorder:
    """The C++ observer: the legacy profiler, started here and read back at the end."""

    def __init__(self):
        self.started = not torch.autograd._profiler_enabled()  # a student's own profile of a visible check: mode only
        if self.started:
            low = time.time_ns() // 1000 - 1
            torch._C._autograd._enable_profiler_legacy(_CONFIG)
            self.window = (low, time.time_ns() // 1000 + 1)

    def finish(self) -> tuple[set[str], str]:
        """(the operators recorded, why the record cannot be trusted or "")."""
        if not self.started:
            return set(), ""
        if not torch.autograd._profiler_enabled():
            return set(), "PyTorch's profiler, which the grader started around the call, was stopped"
        with torch.autograd.profiler.record_function(_MARK):
            pass
        try:
            threads = torch._C._autograd._disable_profiler_legacy()
        except RuntimeError:
            return set(), "PyTorch's profiler, which the grader started around the call, was replaced"
        names, starts = set(), []
        for events in threads:
            for event in events:
                names.add(event.name())
                if event.name() == "__start_profile":
                    starts.append(event.start_us())
        low, high = self.window
        if not starts or not all(low <= start <= high for start in starts):
            return names, "PyTorch's profiler, which the grader started around the call, was restarted"
        if _MARK not in names:
            return names, "PyTorch's RecordFunction observer was switched off"
        return names, ""


def _unwind(mode: _Refuser, depth: int) -> str:
    """Take the mode off its stack as we put it there; why it was not there, or ""."""
    from torch.overrides import _get_current_function_mode_stack
    stack = _get_current_function_mode_stack()
    on_top = len(stack) == depth + 1 and stack[-1] is mode
    while torch._C._len_torch_function_stack() > depth:
        torch._C._pop_torch_function_stack()
    return "" if on_top else "the grader's watch of PyTorch's calls (a TorchFunctionMode) was popped or replaced"


@contextlib.contextmanager
def watching():
    """Around one call of the student's code: refuse and record the builtins ``watched`` names; afterwards fail
    for one that ran (``REFUSED`` in the message) or for a watch switched off (``TAMPERED_KEY``)."""
    watched_now = _WATCHED.get()
    if not watched_now:
        yield
        return
    refused = {function: b.name for b in watched_now for function in b.functions}
    operators = {operator: b.name for b in watched_now for operator in b.operators}
    mode, depth = _Refuser(refused), torch._C._len_torch_function_stack()
    recorder = _Recorder()
    torch._C._push_on_torch_function_stack(mode)
    raised = None
    try:
        yield
    except BaseException as error:  # noqa: BLE001 - decided below, once the observers are read
        raised = error
    finally:
        moved = _unwind(mode, depth)
        recorded, stopped = recorder.finish()
    ran = " and ".join(sorted({operators[name] for name in recorded if name in operators} | set(mode.seen)))
    if moved or stopped:
        raise CheckFailed(f"the answer switched off what watches it: {moved or stopped}" +
                          (f", and called PyTorch's own {ran}" if ran else "") +
                          ". The grader flags this notebook for the instructor.", TAMPERED_KEY) from raised
    if ran:  # refused as it was made (the mode), or seen run (the profiler: the mode was dodged)
        raise AssertionError(refusal("calls", ran, "torch")) from raised
    if raised is not None:
        raise raised


# ----------------------------------------------------------------- what the call was handed

PARAMETERS_COMPARED = 4_000_000  # a module called with at most this many parameter values has them compared too


def tensors_given(function: Callable, args: tuple, kwargs: dict) -> list[tuple[str, torch.Tensor]]:
    """The tensors a call hands the answer, by the name of their parameter where the signature gives one, inside
    ``*args``, lists, tuples and dicts too; a module called has its own parameters compared as well (a forward is
    not the place to train)."""
    try:
        signature = inspect.signature(function)
        bound = signature.bind_partial(*args, **kwargs).arguments
        named = {}
        for name, value in bound.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                named.update({f"argument {len(named) + i + 1}": item for i, item in enumerate(value)})
            elif kind is inspect.Parameter.VAR_KEYWORD:
                named.update(value)
            else:
                named[name] = value
    except (TypeError, ValueError):
        named = {**{f"argument {i + 1}": value for i, value in enumerate(args)}, **kwargs}
    found: list[tuple[str, torch.Tensor]] = []
    for name, value in named.items():
        _gather_tensors(name, value, found, depth=0)
    if isinstance(function, torch.nn.Module):
        found += _module_parameters(function)
    return found


def _gather_tensors(name: str, value, found: list, depth: int) -> None:
    if isinstance(value, torch.Tensor):
        found.append((name, value))
    elif depth < 3 and isinstance(value, (list, tuple)):
        for i, item in enumerate(value[:64]):
            _gather_tensors(f"{name}[{i}]", item, found, depth + 1)
    elif depth < 3 and isinstance(value, dict):
        for key, item in list(value.items())[:64]:
            _gather_tensors(f"{name}[{key!r}]", item, found, depth + 1)


def held_tensors(module, limit: int = 10_000):
    """(dotted name, tensor) for every parameter ``module`` holds, read from what ``nn.Module`` stores (each
    submodule's ``_parameters`` and ``_modules``), not from what it reports; at most ``limit`` modules visited."""
    stack, visited = [("", module)], 0
    while stack and visited < limit:
        (prefix, current), visited = stack.pop(), visited + 1
        for leaf, tensor in dict(current._parameters).items():
            if isinstance(tensor, torch.Tensor):
                yield f"{prefix}{leaf}", tensor
        stack.extend((f"{prefix}{name}.", child) for name, child in dict(current._modules).items() if child is not None)


def _module_parameters(module) -> list[tuple[str, torch.Tensor]]:
    """The parameters ``module`` holds, by name (``held_tensors``); none past ``PARAMETERS_COMPARED`` values (a
    pretrained encoder's copy would cost more than the check)."""
    found = [(f"parameter {name}", tensor) for name, tensor in held_tensors(module)]
    return found if sum(tensor.numel() for _, tensor in found) <= PARAMETERS_COMPARED else []
