"""The checks that the notebooks' test cells run, with feedback that teaches.

Each ``check_*`` takes the student's function or class, runs it on small inputs and compares
the result with reference tensors computed from translab (``grader/references``, built by
``make references``).  On failure it raises ``CheckFailed`` (an ``AssertionError``) whose message
says what was expected, what was found and the likely misconception; on success it prints one
line starting with ``ok``.  ``split="hidden"`` runs the same check on sizes, hyperparameters
and seeds that the notebook never shows; its messages say what is wrong without those inputs or
the expected values.  The likely misconception is diagnosed (``translab.diagnosis``: a wrong
parameter count by structure, mistakes that give identical numbers named together) and carries a
stable key for ``make report``.  ``@_checked`` checks never crash on an odd answer: whatever the
checker cannot compare becomes a ``CheckFailed`` that says so.

While the student's code runs, translab's own implementation of the same thing is switched off
(``forbid``): an answer that calls it, under any name, fails with a message saying so.
"""
from __future__ import annotations

import contextlib
import contextvars
import math
import warnings
from typing import Callable, NoReturn

import torch
from torch import nn

from . import references
from .data import BOS_ID, EOS_ID, MASK_ID, PAD_ID

__all__ = ["CheckFailed", "forbid", "check_mask", "check_attention_demo", "check_positional_encoding",
           "check_transformer_model", "check_heads", "check_model", "check_parameter_formula",
           "check_stated_counts", "check_lm_targets", "check_lm_loss", "check_greedy", "check_accuracy",
           "check_transfer", "check_masking", "check_mlm_loss", "check_bert_base", "check_weight_mapping",
           "check_bert_parameter_count", "check_bert_classifier"]


class CheckFailed(AssertionError):
    """A test cell's check failed; the message explains why.

    ``str(error)`` (nbgrader's ``evalue``) is the message and, when the check named the misconception, a last line
    ``[diagnosis: key ...]`` (``translab.diagnosis``; ``grader.report`` counts them).  In a notebook the error
    renders as its message alone (IPython's ``_render_traceback_``): JupyterLab, nbgrader's Validate dialog and the
    feedback show what was expected, what was found and the likely mistake, no traceback from inside the checker and
    no file path.  nbgrader still records an error output, so the cell scores 0."""

    def __init__(self, message: str = "", key: str = ""):
        self.message, self.key = str(message), str(key)
        super().__init__(self.message + (f"\n[diagnosis: {self.key}]" if self.key else ""))

    def _render_traceback_(self) -> list[str]:
        first, *rest = self.message.splitlines() or [""]
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {first}", *rest]


# "visible" or "hidden": the split of the check that is running (set by ``_checked``).  A hidden check's message
# says what is wrong without the hidden inputs or the expected values.
_SPLIT = contextvars.ContextVar("translab_check_split", default="visible")


def _hidden() -> bool:
    return _SPLIT.get() == "hidden"


def _fail(what: str, expected=None, found=None, hint: str | None = None, *, key: str = "",
          keep: bool = False) -> NoReturn:
    """Raise ``CheckFailed``.  In a hidden check the expected and found lines are left out unless ``keep`` (they
    hold nothing of the hidden inputs); ``key`` names the misconception for the report."""
    lines = [what]
    if keep or not _hidden():
        if expected is not None:
            lines.append(f"  expected: {expected}")
        if found is not None:
            lines.append(f"  found:    {found}")
    if hint:
        lines.append(f"  likely:   {hint}")
    raise CheckFailed("\n".join(lines), key)


def _ok(message: str) -> None:
    print(f"ok  {message}")


def _short(value, limit: int = 300) -> str:
    try:
        if isinstance(value, torch.Tensor):
            text = str(value.detach()) if value.numel() <= 36 else f"tensor of shape {tuple(value.shape)}"
        else:
            text = repr(value)
    except Exception:  # noqa: BLE001 - an odd object must not break the message about it
        text = f"a {type(value).__name__}"
    return text if len(text) <= limit else text[:limit] + " ..."


def _kind(value) -> str:
    """What a value is, in a few words: ``numpy.ndarray of shape (5, 5)``, ``list``, ``float64 tensor``."""
    if isinstance(value, torch.Tensor):
        return f"a {str(value.dtype).replace('torch.', '')} tensor of shape {tuple(value.shape)} on {value.device}"
    module = type(value).__module__
    name = type(value).__name__ if module in ("builtins", None) else f"{module.split('.')[0]}.{type(value).__name__}"
    shape = getattr(value, "shape", None)
    return f"{name} of shape {tuple(shape)}" if isinstance(shape, tuple) else name


def _require_tensor(value, what: str, verb: str = "return") -> torch.Tensor:
    """``value`` if it is a CPU tensor; else a failure that says what it is and how to make it a tensor."""
    if not isinstance(value, torch.Tensor):
        module = type(value).__module__ or ""
        hint = ("convert it with torch.from_numpy(array), or build it with torch functions from the start"
                if module.startswith("numpy") else
                "build it with torch functions (torch.zeros, torch.full, torch.tensor(...) of the list)"
                if isinstance(value, (list, tuple)) else
                "return the tensor itself" if value is not None else "the function returns nothing: add a return")
        _fail(f"{what} must {verb} a torch.Tensor.", "a torch.Tensor", _kind(value), hint, key="wrong_type", keep=True)
    if value.device.type != "cpu":
        _fail(f"{what} {verb}s a tensor on the {value.device.type} device.", "a tensor on the CPU",
              str(value.device), "the tests run on the CPU: do not move tensors with .to(device) / .cuda() inside "
              "the answer, or create them on the device of the input", key="wrong_device", keep=True)
    if value.is_complex():
        _fail(f"{what} {verb}s a complex tensor.", "real numbers", str(value.dtype), key="wrong_dtype", keep=True)
    return value


def _same(found, expected: torch.Tensor, atol: float = 1e-5) -> bool:
    """``found`` is a tensor of ``expected``'s shape and values, whatever its float dtype (compared in float64)."""
    if not isinstance(found, torch.Tensor) or tuple(found.shape) != tuple(expected.shape):
        return False
    if found.device.type == "meta" or found.is_complex():
        return False
    try:
        return bool(torch.allclose(found.detach().to("cpu", torch.float64), expected.to(torch.float64), atol=atol))
    except Exception:  # noqa: BLE001 - an odd tensor is simply not the same
        return False


def _equal(found, expected: torch.Tensor) -> bool:
    """``found`` is a tensor equal to ``expected`` element for element (after a cast to its dtype)."""
    if not isinstance(found, torch.Tensor) or tuple(found.shape) != tuple(expected.shape) or found.device.type == "meta":
        return False
    try:
        return bool(torch.equal(found.detach().to("cpu", expected.dtype), expected))
    except Exception:  # noqa: BLE001
        return False


def _number(value, what: str, whole: bool = False):
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
        found = f"the string {value!r}" if isinstance(value, str) else f"{_kind(value)}: {_short(value, 80)}"
        _fail(f"{what} is not a number.", "an int" if whole else "a number", found, hint,
              key="count.not_a_number" if whole else "wrong_type", keep=True)
    if not math.isfinite(value):
        _fail(f"{what} is {value}.", "a finite number", value, key="wrong_type", keep=True)
    if whole:
        if value != int(value):
            _fail(f"{what} is not a whole number.", "an int", value, "a count of parameters is a whole number: check "
                  "for a / that should be a // or a factor that should not be there", key="count.not_a_number", keep=True)
        return int(value)
    return float(value)


def _twins(labels: list[str], why: str = "") -> str:
    """Mistakes that give identical numbers, stated together (``why``: the identity behind it)."""
    if len(labels) == 1:
        return labels[0]
    return ", equivalently ".join(labels) + f" (identical numbers{', since ' + why if why else ''}: the check cannot " \
        "tell these apart)"


def _checked(check: Callable) -> Callable:
    """A check as the test cells call it: records its split for ``_fail``, and turns anything unexpected that
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
            return check(*args, **kwargs)
        except CheckFailed:
            raise
        except AssertionError as error:  # raised by the answer outside _call (e.g. while a class is built)
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

def _raising_code(name: str):
    message = (f"this answer calls translab's own {name}. The exercise is to write it yourself: "
               f"translab's version is switched off while this test runs.")
    namespace: dict = {}
    exec(f"def _forbidden(*args, **kwargs):\n    raise AssertionError({message!r})\n", namespace)
    return namespace["_forbidden"].__code__


def _innermost(function):
    while hasattr(function, "__wrapped__"):
        function = function.__wrapped__
    return function


@contextlib.contextmanager
def forbid(*targets):
    """Make translab's functions and classes raise while the block runs, whatever name they were
    imported under: a function's code object and a class's ``__init__``/``forward`` are swapped
    (on the shared object itself) and restored afterwards."""
    saved = []
    try:
        for target in targets:
            if isinstance(target, type):
                for attr in ("__init__", "forward"):
                    if attr in vars(target):
                        saved.append((target, attr, vars(target)[attr]))
                        message = (f"this answer uses translab's own {target.__name__}. The exercise is to "
                                   f"write it yourself: translab's version is switched off while this test runs.")

                        def raiser(self, *args, _message=message, **kwargs):
                            raise AssertionError(_message)
                        setattr(target, attr, raiser)
            else:
                function = _innermost(target)
                saved.append((function, "__code__", function.__code__))
                function.__code__ = _raising_code(getattr(function, "__qualname__", "function"))
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)


@contextlib.contextmanager
def _no_warnings(what: str):
    """Turn a warning from the student's code into a clear failure (in nbgrader, stderr scores 0)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        hint = ("nn.TransformerEncoderLayer needs batch_first=True (our tensors are (batch, seq, features)), "
                "and nn.TransformerEncoder enable_nested_tensor=False"
                if "nested" in str(warning.message) or "batch_first" in str(warning.message) else
                "PyTorch wants the attention mask and the padding mask of the same type: "
                "keep the given lines that convert the padding mask"
                if "mismatched" in str(warning.message) else None)
        _fail(f"{what} printed a warning to stderr; under nbgrader any stderr output scores the cell 0.",
              found=f"{warning.category.__name__}: {warning.message}", hint=hint, key="stderr_warning", keep=True)


def _where(error: BaseException) -> str:
    """`` at line N of your code: <source line>`` for the innermost frame of the student's own code (not translab,
    torch or the standard library), without its file path."""
    import os
    import sysconfig
    import traceback
    skip = tuple(os.path.dirname(p) + os.sep for p in (__file__, torch.__file__)) + tuple(
        {sysconfig.get_paths()[k] for k in ("stdlib", "purelib", "platlib")})
    for frame in reversed(traceback.extract_tb(error.__traceback__)):
        if not frame.filename.startswith(skip) and frame.lineno:
            line = (frame.line or "").strip()
            return f" at line {frame.lineno} of your code" + (f" ({line[:120]})" if line else "")
    return ""


def _call(what: str, function: Callable, *args, **kwargs):
    try:
        with _no_warnings(what):
            return function(*args, **kwargs)
    except CheckFailed:
        raise
    except NotImplementedError:
        _fail(f"{what} is not written yet (it raises NotImplementedError).",
              hint="replace `raise NotImplementedError()` in the answer cell with your code, then run that cell",
              key="not_written")
    except AssertionError as error:
        if "translab's own" in str(error):  # forbid()'s message: the answer calls translab's implementation
            _fail(f"{what}: {error}", key="calls_translab")
        _fail(f"{what} failed an assertion{_where(error)}: {str(error)[:300]}", key="raised")
    except Exception as error:
        _fail(f"{what} raised {type(error).__name__}{_where(error)}: {str(error)[:400]}", key="raised")


def _model_module():
    from . import model
    return model


# ----------------------------------------------------------------- notebook 01

def _forbid_mask():
    return forbid(_model_module().generate_square_subsequent_mask, nn.Transformer.generate_square_subsequent_mask)


def _mask_in_encoder(mask: torch.Tensor) -> tuple[bool, bool]:
    """(NaN in eval() under no_grad, NaN in train()): a small nn.TransformerEncoder run with ``mask``, so that the
    message states what this torch version really does with it."""
    size = mask.size(0)
    with torch.random.fork_rng(devices=[]), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)
        encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        x = torch.randn(2, size, 8)
        encoder.eval()
        with torch.no_grad():
            in_eval = bool(torch.isnan(encoder(x, mask=mask)).any())
        encoder.train()
        with torch.no_grad():
            in_train = bool(torch.isnan(encoder(x, mask=mask)).any())
    return in_eval, in_train


def _ones_mask_hint(mask: torch.Tensor) -> str:
    adds = ("the mask then *adds* 1 to the allowed scores instead of blocking the future: nn.TransformerEncoder adds "
            "a float mask to the attention scores before the softmax, so allowed positions need 0 and the future "
            "-inf (exp(-inf) = 0); a 'keep' mask of 1s is the convention of other libraries, not of this one")
    try:
        in_eval, in_train = _mask_in_encoder(mask)
    except Exception:  # noqa: BLE001 - the demonstration is a bonus; the reason below holds anyway
        in_eval = in_train = False
    version = torch.__version__.split("+")[0]
    if in_eval and not in_train:
        return (f"in eval() (under torch.no_grad(), as when a model is evaluated) nn.TransformerEncoder's fast path "
                f"returns NaN with this mask on torch {version}; in train() it happens to run, but " + adds)
    if in_eval:
        return f"nn.TransformerEncoder returns NaN with this mask on torch {version}; and " + adds
    return adds[0].upper() + adds[1:]


@_checked
def check_mask(generate_square_subsequent_mask: Callable[[int], torch.Tensor], split: str = "visible") -> None:
    visible = split == "visible"
    expected_all = references.load("mask")[split]
    for size, expected in expected_all.items():
        size = int(size)
        name = f"the mask for sz={size}" if visible else "the mask for a hidden size"
        call = f"generate_square_subsequent_mask({size})" if visible else "generate_square_subsequent_mask on a hidden size"
        with _forbid_mask():
            mask = _call(call, generate_square_subsequent_mask, size)
        _require_tensor(mask, call)
        if tuple(mask.shape) != (size, size):
            _fail(f"{name} has the wrong shape.", (size, size), tuple(mask.shape),
                  "the mask is square: one row per query position, one column per key position", key="wrong_shape")
        if mask.dtype == torch.bool:
            _fail(f"{name} is boolean.", "a float mask of 0 and -inf", mask.dtype,
                  "this lab uses an additive mask: it is added to the attention scores before the softmax",
                  key="mask.boolean", keep=True)
        if not mask.is_floating_point():
            _fail(f"{name} holds integers.", "float32 with 0 and -inf", mask.dtype,
                  "integers cannot hold -inf; build it with torch.full(..., float('-inf')) or masked_fill",
                  key="mask.integer", keep=True)
        mask = mask.detach().to(torch.float32)
        lower = torch.tril(torch.ones(size, size, dtype=torch.bool))
        values = set(mask.unique().tolist())
        if values <= {0.0, 1.0} and bool((mask[lower] == 1).all()):
            _fail(f"{name} has 1 on and below the diagonal" + (" and 0 above" if size > 1 else "") +
                  ": a mask of 1s.", "0 on and below the diagonal, -inf above", _short(mask),
                  _ones_mask_hint(mask), key="mask.ones")
        if values <= {0.0, 1.0} and size > 1:
            _fail(f"{name} holds only 0 and 1.", "0 on and below the diagonal, -inf above", _short(mask),
                  "the mask is added to the scores before the softmax: blocked positions need -inf, not 1",
                  key="mask.zero_one")
        if bool(torch.isinf(mask.diagonal()).any()):
            _fail(f"the diagonal of {name} is -inf.", "0 on the diagonal", _short(mask),
                  "each position must attend to itself (else the first row is all -inf and the softmax gives NaN); "
                  "start the blocked part one above the diagonal: torch.triu(..., diagonal=1)",
                  key="mask.diagonal_blocked")
        if size > 1 and bool(torch.isinf(mask[~lower.T]).all()) and not bool(torch.isinf(mask[~lower]).any()):
            _fail(f"{name} blocks the past instead of the future.", "-inf ABOVE the diagonal", _short(mask),
                  "row i is the query, column j the key: position i may look at j <= i; use triu, not tril",
                  key="mask.blocks_past")
        if bool((mask[lower] != 0).any()):
            _fail(f"{name} is not 0 on and below the diagonal.", "0 where j <= i", _short(mask),
                  "allowed positions must leave the scores unchanged: add 0", key="mask.nonzero_allowed")
        above = mask[~lower]
        if above.numel() and not bool(torch.isneginf(above).all()):
            _fail(f"{name} is not -inf above the diagonal.", "-inf where j > i", _short(mask),
                  "a large negative number is close but not exact; use float('-inf') so the future gets weight exactly 0",
                  key="mask.finite_negative")
        if not torch.equal(mask, expected):
            _fail(f"{name} differs from the reference.", _short(expected), _short(mask))
        weights = torch.softmax(torch.randn(size, size) + mask, dim=-1)
        if not bool((weights[~lower] == 0).all()) or not torch.allclose(weights.sum(-1), torch.ones(size)):
            _fail("softmax(scores + mask) does not give exactly 0 above the diagonal.")
    sizes = "for sz = " + ", ".join(str(s) for s in expected_all) if visible else f"on {len(expected_all)} hidden sizes"
    _ok(f"causal mask {sizes}: 0 on and below the diagonal, -inf above, future weights exactly 0 after softmax")


@_checked
def check_attention_demo(weights: torch.Tensor) -> None:
    """The notebook's demo: attention weights computed with the mask are 0 above the diagonal."""
    weights = _require_tensor(weights, "the demo's attention weights", verb="be")
    size = weights.size(-1)
    upper = torch.triu(torch.ones(size, size, dtype=torch.bool), diagonal=1)
    if not bool((weights[..., upper] == 0).all()):
        _fail("attention weights above the diagonal are not exactly 0.", "0", _short(weights))
    _ok("every weight above the diagonal is exactly 0 and every row sums to 1")


def _pe_table(max_len: int, d_model: int, base: float = 10000.0, exponent_halved: bool = False,
              swapped: bool = False, halves: bool = False, first_position: int = 0) -> torch.Tensor:
    position = torch.arange(first_position, first_position + max_len, dtype=torch.float32).unsqueeze(1)
    two_i = torch.arange(0, d_model, 2).float()
    div = torch.exp((two_i / 2 if exponent_halved else two_i) * (-math.log(base) / d_model))
    even, odd = (torch.cos, torch.sin) if swapped else (torch.sin, torch.cos)
    table = torch.zeros(max_len, d_model)
    if halves:
        table[:, : len(div)] = even(position * div)
        table[:, len(div):] = odd(position * div[: d_model - len(div)])
    else:
        table[:, 0::2] = even(position * div)
        table[:, 1::2] = odd(position * div[: d_model // 2])
    return table


def _pe_variants(table: torch.Tensor, d_model: int, max_len: int) -> dict:
    """{key: (what a student reads, table)} of the usual positional-encoding mistakes.  Numerically identical
    ones (base 100 with 2i/d_model is 10000 with i/d_model) are all listed: the check states them together."""
    return {
        "pe.sin_cos_swapped": ("sin and cos swapped (cos on even dimensions)", _pe_table(max_len, d_model, swapped=True)),
        "pe.base_100": ("base 100 instead of 10000", _pe_table(max_len, d_model, base=100.0)),
        "pe.exponent_i": ("an exponent of i/d_model instead of 2i/d_model",
                          _pe_table(max_len, d_model, exponent_halved=True)),
        "pe.halves": ("sin in the first half of the dimensions and cos in the second, instead of interleaved (sin on "
                      "even dimensions, cos on odd ones)", _pe_table(max_len, d_model, halves=True)),
        "pe.positions_from_1": ("positions counted from 1 instead of 0 (the first row must be sin(0) = 0, cos(0) = 1)",
                                _pe_table(max_len, d_model, first_position=1)),
    }


@_checked
def check_positional_encoding(PositionalEncoding: type, split: str = "visible") -> None:
    model_module = _model_module()
    visible = split == "visible"
    cases = references.load("positional_encoding")[split]
    for case in cases:
        d_model, max_len, x, expected = case["d_model"], case["max_len"], case["x"], case["expected"]
        label = (f"PositionalEncoding(d_model={d_model}, dropout=0.0, max_len={max_len})" if visible
                 else "PositionalEncoding on a hidden d_model and max_len")
        with forbid(model_module.PositionalEncoding, model_module.sinusoidal_table):
            module = _call(label, PositionalEncoding, d_model, dropout=0.0, max_len=max_len)
            if not isinstance(module, nn.Module):
                _fail(f"{label} is not an nn.Module.", "an instance of a subclass of nn.Module", _kind(module),
                      "keep `class PositionalEncoding(nn.Module)` and call super().__init__() first",
                      key="wrong_type", keep=True)
            trainable = [name for name, p in module.named_parameters()]
            if trainable:
                _fail("the positional encoding has trainable parameters.", "no parameters (a fixed buffer)",
                      f"parameters {trainable}",
                      "the sinusoidal table is fixed, not learned: store it with self.register_buffer('pe', ...), "
                      "not nn.Parameter (a buffer moves with .to(device) and is never updated by the optimizer)",
                      key="pe.trainable", keep=True)
            module.eval()
            out = _call(f"{label}.forward(x)", module, x.clone())
        _require_tensor(out, f"{label}.forward(x)")
        if out.shape != x.shape:
            _fail(f"{label} returns the wrong shape for a (batch, seq, d_model) input.", tuple(x.shape),
                  tuple(out.shape), "inputs are batch-first (batch, seq, d_model): add pe[:seq_len] where "
                  "seq_len = x.size(1), broadcast over the batch", key="wrong_shape")
        if out.dtype != x.dtype:
            buffers = [f"{name} ({str(b.dtype).replace('torch.', '')})" for name, b in module.named_buffers()
                       if b.is_floating_point() and b.dtype != x.dtype]
            values = "the values are right" if _same(out, expected) else "the values differ too"
            _fail(f"{label} returns {str(out.dtype).replace('torch.', '')} for a float32 input"
                  + (f": its buffer {', '.join(buffers)} is not float32." if buffers else "."),
                  "float32, like the input", f"{str(out.dtype).replace('torch.', '')} ({values})",
                  "adding a float64 table turns every output float64, and the encoder's float32 weights then refuse "
                  "it (\"expected m1 and m2 to have the same dtype, but got: double != float\"); build the table in "
                  "float32 (torch.arange(..., dtype=torch.float32), torch.zeros(max_len, d_model)), not from numpy or "
                  "with dtype=torch.float64, or .float() it before register_buffer", key="pe.dtype", keep=True)
        if _same(out, expected):
            continue
        added = (out.detach() - x).to(torch.float32)
        table = case["table"][: x.size(1)]
        if _same(added[0], added[-1]):
            variants = {key: (text, variant[: x.size(1)]) for key, (text, variant) in
                        _pe_variants(case["table"], d_model, max_len).items()}
            matches = [key for key, (text, variant) in variants.items()
                       if not _same(variant, table) and _same(added[0], variant)]
            if matches:
                name = "the positional encoding" + (f" (d_model={d_model})" if visible else "")
                why = "100^(2i/d_model) = 10000^(i/d_model)" if {"pe.base_100", "pe.exponent_i"} <= set(matches) else ""
                _fail(f"{name} uses {_twins([variants[k][0] for k in matches], why)}.",
                      "pe[pos, 2i] = sin(pos / 10000^(2i/d_model)), pe[pos, 2i+1] = cos(pos / 10000^(2i/d_model))",
                      _short(added[0]), "dimensions 2i and 2i+1 share the angle pos / 10000^(2i/d_model): div_term = "
                      "exp(arange(0, d_model, 2) * (-ln(10000) / d_model)), sin on the even dimensions, cos on the "
                      "odd ones, positions from 0", key="|".join(matches))
            if _same(added[0], table.flip(0)) or (added.size(1) == added.size(2) and _same(added[0].T, table)):
                _fail("the positional encoding rows are in the wrong order or transposed.", _short(table),
                      _short(added[0]), "row pos of the table is the encoding of position pos: pe[:seq_len], "
                      "added to x of shape (batch, seq, d_model)", key="pe.rows_order")
        if _same(out, x * case["table"][: x.size(1)]):
            _fail("the positional encoding multiplies the input.", "x + pe[:seq_len]", "x * pe[:seq_len]",
                  "the encoding is ADDED to the token embeddings", key="pe.multiplied", keep=True)
        _fail(f"{label}: the output differs from x + pe[:seq_len].",
              f"x + table, e.g. table[1, :4] = {table[1, :4].tolist() if table.size(0) > 1 else table[0, :4].tolist()}",
              f"out - x at position 1: {added[0, 1 if added.size(1) > 1 else 0, :4].tolist()}",
              "pe[pos, 2i] = sin(pos * exp(-2i * ln(10000) / d_model)), odd dimensions the cos of the same angle; "
              "check the dropout is applied after the addition and that eval() turns it off")
    sizes = ", ".join(f"d_model={c['d_model']}" for c in cases) if visible else f"{len(cases)} hidden sizes"
    _ok(f"positional encoding ({sizes}): fixed sinusoids added to batch-first inputs, no trainable parameters")


# ----------------------------------------------------------------- notebook 02

def _load_state(module: nn.Module, state: dict, what: str) -> None:
    if not isinstance(module, nn.Module):
        _fail(f"{what} is not an nn.Module.", "an instance of a subclass of nn.Module", _kind(module),
              "keep the skeleton's `class ...(nn.Module)` and call super().__init__() first", key="wrong_type", keep=True)
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as error:
        own = sorted(module.state_dict().keys())
        says = "" if _hidden() else (f" PyTorch says: {str(error).splitlines()[0]} "
                                     + " ".join(str(error).splitlines()[1:3]))
        _fail(f"{what}: the reference weights do not fit your module.",
              f"parameters {sorted(state.keys())[:8]} ...", f"{own[:8]} ...",
              "keep the attribute names and layer types of the skeleton (encoder, pos_encoder, transformer_encoder, "
              f"decoder) and the sizes asked for.{says}", key="model.load_state")


def _forbid_models():
    m = _model_module()
    return forbid(m.TransformerModel, m.LanguageModelHead, m.ClassificationHead, m.Model, m.last_token_states,
                  m.build_language_model, m.build_classifier)


def _variant_matches(found, case: dict, variants: dict, expected, compare=_same) -> list[str]:
    """Keys of ``variants`` ({key: text}) whose stored output in ``case`` ``found`` equals; variants that equal the
    right answer on this case cannot be told from it and are left out."""
    return [key for key in variants if key in case and not compare(case[key], expected) and compare(found, case[key])]


@_checked
def check_transformer_model(TransformerModel: type, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("transformer")[split]
    for case in cases:
        cfg = case["config"]
        label = (f"TransformerModel(ntoken={cfg['ntoken']}, nhead={cfg['nhead']}, nhid={cfg['nhid']}, "
                 f"nlayers={cfg['nlayers']})" if visible else "TransformerModel on a hidden configuration")
        with _forbid_models():
            model = _call(label, TransformerModel, cfg["ntoken"], cfg["nhead"], cfg["nhid"], cfg["nlayers"], dropout=0.1)
            _load_state(model, case["state_dict"], label)
            model.eval()
            with torch.no_grad():
                out = _call(f"{label}.forward(src, src_mask, src_key_padding_mask)", model, case["src"],
                            case["causal"], case["padding"])
                out_plain = _call(f"{label}.forward(src)", model, case["src"])
        expected = case["expected"]
        _require_tensor(out, f"{label}.forward(src, src_mask, src_key_padding_mask)")
        if out.shape != expected.shape:
            _fail(f"{label} returns the wrong shape" + (f" for src of shape {tuple(case['src'].shape)}." if visible else "."),
                  tuple(expected.shape), tuple(out.shape), "the base returns (batch, seq, nhid) contextual vectors; "
                  "build the encoder layer with batch_first=True and do not apply a head inside the base",
                  key="wrong_shape")
        if not _same(out, expected):
            real = ~case["padding"]
            diagnoses = {
                "no_scale": "the embeddings are not multiplied by sqrt(nhid) before adding the positions",
                "no_positions": "the positional encoding is not applied (self.pos_encoder)",
                "no_causal_mask": "src_mask is not passed to the encoder: mask=src_mask",
                "no_padding_mask": "src_key_padding_mask is not passed to the encoder",
            }
            matches = _variant_matches(out, case, diagnoses, expected)
            if not matches and _same(out[real], expected[real]):
                matches = ["no_padding_mask"]
            if matches:
                hint = _twins([diagnoses[k] for k in matches])
                _fail(f"{label}: output differs from the reference.", "the reference output", f"the output when {hint}",
                      hint, key="|".join(f"model.{k}" for k in matches), keep=True)
            if bool(torch.isnan(out).any()):
                _fail(f"{label}: the output holds NaN.", hint="a row of the attention mask that is all -inf gives NaN "
                      "(softmax of nothing); pass the masks as given, do not invert the padding mask")
            _fail(f"{label}: output differs from the reference.", f"{_short(expected[0, 0, :4])} at [0, 0, :4]",
                  f"{_short(out[0, 0, :4])}", "embedding * sqrt(nhid) -> positional encoding -> encoder(mask, padding mask)")
        if not _same(out_plain, case["expected_no_masks"]):
            _fail(f"{label}: forward(src) without masks differs from the reference.",
                  hint="both masks are optional (default None); pass them through unchanged", key="model.masks_not_optional")
    _ok(f"TransformerModel on {len(cases)} {'' if visible else 'hidden '}configuration(s): reference outputs with and "
        "without masks")


@_checked
def check_heads(LanguageModelHead: type, ClassificationHead: type, split: str = "visible") -> None:
    visible = split == "visible"
    cases = references.load("heads")[split]
    for case in cases:
        cfg = case["config"]
        hidden, padding = case["hidden"], case["padding"]
        lm_label = f"LanguageModelHead(nhid={cfg['nhid']}, ntoken={cfg['ntoken']})" if visible else \
            "LanguageModelHead on a hidden configuration"
        cls_label = f"ClassificationHead(nhid={cfg['nhid']}, nclasses={cfg['nclasses']})" if visible else \
            "ClassificationHead on a hidden configuration"
        with _forbid_models():
            lm = _call(lm_label, LanguageModelHead, cfg["nhid"], cfg["ntoken"])
            _load_state(lm, case["lm_state"], "LanguageModelHead")
            cls = _call(cls_label, ClassificationHead, cfg["nhid"], cfg["nclasses"])
            _load_state(cls, case["cls_state"], "ClassificationHead")
            with torch.no_grad():
                lm_out = _call("LanguageModelHead.forward(hidden)", lm, hidden)
                cls_out = _call("ClassificationHead.forward(hidden, src_key_padding_mask)", cls, hidden, padding)
        _require_tensor(lm_out, "LanguageModelHead.forward(hidden)")
        if lm_out.shape != case["lm_expected"].shape:
            _fail("LanguageModelHead returns the wrong shape.", f"{tuple(case['lm_expected'].shape)} = (batch, seq, ntoken)",
                  tuple(lm_out.shape), "the LM head scores every vocabulary token at every position", key="wrong_shape")
        if not _same(lm_out, case["lm_expected"]):
            if _same(lm_out, case["lm_expected"].softmax(-1)) or _same(lm_out, case["lm_expected"].log_softmax(-1)):
                _fail("LanguageModelHead applies a softmax.", "raw logits", "probabilities",
                      "CrossEntropyLoss applies log-softmax itself: the head returns raw scores (logits)",
                      key="heads.lm_softmax", keep=True)
            _fail("LanguageModelHead output differs from the reference.", hint="one nn.Linear(nhid, ntoken) named decoder")
        expected = case["cls_expected"]
        _require_tensor(cls_out, "ClassificationHead.forward(hidden, src_key_padding_mask)")
        if cls_out.shape != expected.shape:
            _fail("ClassificationHead returns the wrong shape.", f"{tuple(expected.shape)} = (batch, nclasses)",
                  tuple(cls_out.shape), "one prediction per sentence: pick one position per sequence before the "
                  "linear layer", key="wrong_shape")
        if not _same(cls_out, expected):
            readings = {
                "cls_last_position": ("ClassificationHead reads the last position, hidden[:, -1], which is padding for "
                                      "shorter sentences.", "the state at position -1 for every sentence",
                                      "with right padding, sentence b ends at position (~padding[b]).sum() - 1; use the "
                                      "padding mask to find it (the original lab had this bug: short reviews were "
                                      "classified from padding)", "heads.last_position"),
                "cls_first_position": ("ClassificationHead reads the first position.", "position 0",
                                       "with a causal mask, position 0 has only seen the first token; the last real "
                                       "token has seen them all", "heads.first_position"),
                "cls_mean": ("ClassificationHead averages over all positions, padding included.",
                             "the mean over the sequence", "read the state of each sentence's last non-padding token",
                             "heads.mean"),
            }
            matches = _variant_matches(cls_out, case, readings, expected)
            if matches:
                what, found, hint, key = readings[matches[0]]
                if len(matches) > 1:
                    what = _twins([readings[k][0].rstrip(".") for k in matches]) + "."
                _fail(what, "the state at each sentence's last real token", found, hint,
                      key="|".join(readings[k][3] for k in matches), keep=True)
            _fail("ClassificationHead output differs from the reference.", _short(expected), _short(cls_out))
        with _forbid_models(), torch.no_grad():
            no_mask = _call("ClassificationHead.forward(hidden) without a padding mask", cls, hidden)
        if not _same(no_mask, case["cls_no_padding_mask"]):
            _fail("ClassificationHead without a padding mask should read the last position.",
                  hint="src_key_padding_mask=None means no padding: every sequence ends at position -1",
                  key="heads.no_padding_mask_default")
    _ok(f"LM head and classification head on {len(cases)} {'' if visible else 'hidden '}configuration(s); the "
        "classifier reads each sentence's last real token, never padding")


@_checked
def check_model(Model: type, split: str = "visible") -> None:
    m = _model_module()
    cases = references.load("model")[split]
    for case in cases:
        cfg = case["config"]
        base = m.TransformerModel.from_config(m.ModelConfig.pick(cfg, dropout=0.1))
        head = m.LanguageModelHead(cfg["nhid"], cfg["ntoken"])
        base.load_state_dict(case["base_state"])
        head.load_state_dict(case["head_state"])
        with forbid(m.Model, m.build_language_model, m.build_classifier):
            model = _call("Model(base, head)", Model, base, head)
            if not isinstance(model, nn.Module):
                _fail("Model(base, head) is not an nn.Module.", "an instance of a subclass of nn.Module", _kind(model),
                      "keep `class Model(nn.Module)` and call super().__init__() first", key="wrong_type", keep=True)
            trainable = sum(p.numel() for p in model.parameters())
            expected_count = sum(p.numel() for p in base.parameters()) + sum(p.numel() for p in head.parameters())
            if trainable != expected_count:
                _fail("Model(base, head) does not register the base and the head as submodules.",
                      f"{expected_count} parameters", f"{trainable}",
                      "assign them as attributes (self.base = base; self.head = head) after super().__init__()",
                      key="model.not_registered")
            model.eval()
            with torch.no_grad():
                causal = _call("model(src, src_key_padding_mask)", model, case["src"], case["padding"])
                bidirectional = _call("model(src, src_key_padding_mask, causal=False)", model, case["src"],
                                      case["padding"], causal=False)
                plain = _call("model(src)", model, case["src"])
        _require_tensor(causal, "model(src, src_key_padding_mask)")
        if causal.shape != case["causal_expected"].shape:
            _fail("Model returns the wrong shape.", tuple(case["causal_expected"].shape), tuple(causal.shape),
                  key="wrong_shape")
        if not _same(causal, case["causal_expected"]):
            if _same(causal, case["bidirectional_expected"]):
                _fail("Model(src) is not causal.", "a square subsequent mask when causal=True", "no mask",
                      "build the mask with generate_square_subsequent_mask(src.size(1)) and pass it as src_mask",
                      key="model.not_causal", keep=True)
            _fail("Model output differs from the reference.",
                  hint="hidden = base(src, src_mask, src_key_padding_mask); return head(hidden, src_key_padding_mask)")
        if not _same(bidirectional, case["bidirectional_expected"]):
            _fail("Model(..., causal=False) still masks the future.", hint="causal=False means src_mask=None",
                  key="model.causal_false_masks")
        if not _same(plain, case["causal_no_padding"]):
            _fail("Model(src) without a padding mask differs from the reference.", key="model.masks_not_optional")
    _ok(f"Model joins base and head on {len(cases)} configuration(s); causal by default, bidirectional with causal=False")


def _count_recipe() -> str:
    from .params import TERMS
    names = {"attention": "attention", "feed_forward": "feed-forward", "layer_norm": "two LayerNorms"}
    layer = "; ".join(f"{names[c]} " + " + ".join(t.formula.replace(" per layer", "") for t in TERMS
                                                   if t.per_layer and t.component == c) for c in names)
    return (f"count the embedding (ntoken*nhid); per layer: {layer}; then the head nhid*outputs + outputs (outputs = "
            "ntoken for the LM head, nclasses for a classifier); the positional encoding has none")


def _probe_counts(count_parameters: Callable) -> tuple[list[dict], list[float]]:
    """The student's count at ``diagnosis.PROBES``, where it runs and returns a number (translab's formula off)."""
    from . import diagnosis, params
    configs, values = [], []
    with forbid(*params.FORMULA_FUNCTIONS), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for cfg in diagnosis.PROBES:
            try:
                value = _number(count_parameters(**cfg), "count_parameters")
            except Exception:  # noqa: BLE001 - a probe the answer cannot handle is left out
                continue
            configs.append(cfg)
            values.append(value)
    return configs, values


def _count_at(count_parameters: Callable) -> Callable:
    from . import params

    def count(cfg):
        try:
            with forbid(*params.FORMULA_FUNCTIONS), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return _number(count_parameters(**cfg), "count_parameters")
        except Exception:  # noqa: BLE001
            return None
    return count


def _explain(configs: list[dict], values: list[float]) -> tuple[str, str]:
    from . import diagnosis
    explanations, total = diagnosis.explain_counts(configs, values, limit=4)
    return diagnosis.describe_explanations(explanations, total)


def _diagnose_formula(count_parameters: Callable, cfg: dict, value: int) -> tuple[str, str]:
    """(hint, keys) for a wrong count_parameters: the combination of mistakes that gives exactly its numbers at the
    failing configuration and at ``diagnosis.PROBES``; else whether it depends on nhead and where the error lies."""
    from . import diagnosis
    configs, values = _probe_counts(count_parameters)
    hint, keys = _explain(configs + [cfg], values + [value])
    if hint:
        return hint, keys
    family = [(c, v) for c, v in zip(configs, values) if c in diagnosis.NHEAD_PROBES]
    if len({round(v, 6) for _, v in family}) > 1:
        right = diagnosis.right_count(family[0][0])
        shown = ", ".join(f"nhead={c['nhead']}: {v:,.0f}" for c, v in family)
        base = ", ".join(f"{k}={v}" for k, v in family[0][0].items() if k != "nhead")
        return (f"your count changes with nhead alone ({base}: {shown}; the right count is {right:,} for every "
                f"nhead): {diagnosis.WHY_NHEAD}", "count.depends_on_nhead")
    variables = diagnosis.error_dependence(_count_at(count_parameters))
    recipe = _count_recipe()
    if variables is None:
        return recipe, "count.unexplained"
    return f"{diagnosis.locate_text(variables)}. {recipe[0].upper()}{recipe[1:]}", "count.unexplained"


@_checked
def check_parameter_formula(count_parameters: Callable, split: str = "visible") -> None:
    from . import params
    visible = split == "visible"
    cases = references.load("parameters")[split]
    for case in cases:
        cfg = case["config"]
        head = "the LM head" if cfg["nclasses"] is None else f"{cfg['nclasses']} classes"
        what = (f"count_parameters for ntoken={cfg['ntoken']}, nhid={cfg['nhid']}, nlayers={cfg['nlayers']}, "
                f"nhead={cfg['nhead']}, dim_feedforward={cfg['dim_feedforward']} with {head}" if visible
                else "count_parameters on a hidden configuration")
        with forbid(*params.FORMULA_FUNCTIONS):
            found = _call(f"count_parameters(**{cfg})" if visible else what, count_parameters, **cfg)
        value = _number(found, what, whole=True)
        expected = case["expected"]
        if value == expected:
            continue
        hint, keys = _diagnose_formula(count_parameters, cfg, value)
        _fail(f"{what} is off by {value - expected:+,}." if visible else
              f"{what} is wrong (other ntoken, nhid, nlayers, nhead, dim_feedforward or head than the notebook's).",
              f"{expected:,}", f"{value:,}", hint, key=keys)
    _ok(f"parameter formula right on {len(cases)} {'' if visible else 'hidden '}configuration(s)")


@_checked
def check_stated_counts(n_params_lm, n_params_classifier) -> None:
    lm_case, cls_case = references.load("parameters")["visible"]
    cfg = lm_case["config"]
    shown = (f"ntoken={cfg['ntoken']}, nhid={cfg['nhid']}, nlayers={cfg['nlayers']}, nhead={cfg['nhead']}, "
             f"dim_feedforward={cfg['dim_feedforward']}")
    numbers = [("n_params_lm", _number(n_params_lm, "n_params_lm", whole=True), lm_case),
               ("n_params_classifier", _number(n_params_classifier, "n_params_classifier", whole=True), cls_case)]
    wrong = [(name, value, case) for name, value, case in numbers if value != case["expected"]]
    if wrong:
        configs, values = [case["config"] for _, _, case in wrong], [value for _, value, _ in wrong]
        hint, keys = _explain(configs, values)
        if hint:
            from . import diagnosis
            bigger, _ = diagnosis.explain_counts(configs, values, limit=12, slack=1)
            fewest = min(len(e) for e in bigger)
            others = [e for e in bigger if len(e) > fewest]
            if others or "equivalently" in hint:
                also = diagnosis.describe_explanations(others[:1], 1)[0]
                hint += ("; but at one size several mistakes give the same numbers" +
                         (f" (for instance also: {also})" if also else "") + ": check_parameter_formula, which "
                         "tries your formula at other sizes too, tells them apart")
        if not hint and len(wrong) == 2:  # no common explanation: each number on its own
            parts = [(name, *_explain([case["config"]], [value])) for name, value, case in wrong]
            hint = "; ".join(f"{name}: {text}" for name, text, _ in parts if text)
            keys = " ".join(dict.fromkeys(k for _, _, key in parts for k in key.split() if k))
        heads = {"n_params_lm": "the LM head", "n_params_classifier": "2 classes"}
        _fail(" and ".join(f"{name} ({heads[name]}) is off by {value - case['expected']:+,}" for name, value, case in wrong)
              + f" (base: {shown}).",
              " and ".join(f"{case['expected']:,}" for _, _, case in wrong),
              " and ".join(f"{value:,}" for _, value, _ in wrong),
              hint or _count_recipe(), key=keys or "count.unexplained")
    _ok(f"{lm_case['expected']:,} parameters with the LM head, {cls_case['expected']:,} with 2 classes")


# ----------------------------------------------------------------- notebook 03

@_checked
def check_lm_targets(make_lm_targets: Callable, split: str = "visible") -> None:
    from . import datasets
    visible = split == "visible"
    case = references.load("lm_targets")[split]
    ids = case["ids"]
    with forbid(datasets.make_lm_targets):
        result = _call("make_lm_targets(ids)", make_lm_targets, ids.clone())
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        _fail("make_lm_targets must return a pair (inputs, targets).", "(inputs, targets)", _kind(result),
              key="wrong_type", keep=True)
    inputs, targets = result
    expected_shape = (ids.size(0), ids.size(1) - 1)
    for name, tensor in (("inputs", inputs), ("targets", targets)):
        _require_tensor(tensor, f"make_lm_targets's {name}")
        if tuple(tensor.shape) != expected_shape:
            _fail(f"{name} has the wrong shape" + (f" for ids of shape {tuple(ids.shape)}." if visible else "."),
                  expected_shape, tuple(tensor.shape), "both drop one token: the inputs lose the last, the targets the first",
                  key="wrong_shape")
    if torch.equal(inputs, targets):
        _fail("targets equal inputs: the model would learn to copy its input.", "targets = the NEXT token",
              hint="shift by one: inputs = ids[:, :-1], targets = ids[:, 1:]", key="targets.copy", keep=True)
    if torch.equal(inputs, case["targets"]) and torch.equal(targets, case["inputs"]):
        _fail("inputs and targets are swapped: the model would predict the previous token.",
              "inputs = ids[:, :-1], targets = ids[:, 1:]", "inputs = ids[:, 1:], targets = ids[:, :-1]",
              key="targets.swapped", keep=True)
    if not (torch.equal(inputs, case["inputs"]) and torch.equal(targets, case["targets"])):
        _fail("inputs/targets differ from the reference.", f"inputs {_short(case['inputs'])}, targets {_short(case['targets'])}",
              f"inputs {_short(inputs)}, targets {_short(targets)}", "the target at position t is the input at t + 1")
    _ok(f"LM targets for ids of shape {tuple(ids.shape) if visible else '(hidden)'}: the target at t is the token at t + 1")


@_checked
def check_lm_loss(lm_loss: Callable, split: str = "visible") -> None:
    case = references.load("lm_loss")[split]
    logits = case["logits"].clone().requires_grad_(True)
    with forbid(*_loss_forbidden()):
        loss = _call("lm_loss(logits, targets)", lm_loss, logits, case["targets"].clone())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        _fail("lm_loss must return a scalar tensor.", "a 0-dim tensor (the mean over real tokens)",
              _kind(loss), "return the loss tensor itself, not loss.item(): backward() needs it",
              key="loss.not_scalar", keep=True)
    if not loss.requires_grad:
        _fail("the loss is detached from the logits: no gradient can flow.",
              hint="do not wrap the loss in torch.no_grad() or call .detach()/.item()", key="loss.detached")
    expected = case["expected"]
    if not _same(loss, expected):
        value = float(loss.detach().double())
        mistakes = {
            "softmax_first": "softmax was applied before CrossEntropyLoss. It expects raw logits and applies "
                             "log-softmax itself; a softmax first squashes the loss into a narrow range and the gradients vanish",
            "padding_counted": "padding positions are counted. Use CrossEntropyLoss(ignore_index=PAD_ID)",
            "sum": "the loss is summed; use the mean over real (non-padding) tokens (the default reduction)",
        }
        matches = _variant_matches(loss, case, mistakes, expected)
        if matches:
            _fail("lm_loss(logits, targets) differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
                  _twins([mistakes[k] for k in matches]), key="|".join(f"loss.{k}" for k in matches))
        _fail("lm_loss(logits, targets) differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
              "flatten logits to (batch*seq, vocab) and targets to (batch*seq,), then "
              "nn.CrossEntropyLoss(ignore_index=PAD_ID) on the raw logits")
    _ok(f"LM loss {loss.item():.4f}: cross-entropy on raw logits, padding ignored")


def _loss_forbidden():
    from . import training
    return (training.batch_loss,)


def _token_list(found, what: str) -> list[int]:
    """A list of ints from a list / tuple / tensor / numpy array of token ids; a message otherwise."""
    if isinstance(found, torch.Tensor) or type(found).__module__ == "numpy":
        found = found.tolist()
    if not isinstance(found, (list, tuple)):
        _fail(f"{what} must return a list of token ids.", "a list of ints", _kind(found), key="wrong_type", keep=True)
    out = []
    for token in found:
        if isinstance(token, (list, tuple)):
            _fail(f"{what} returns a nested list.", "a flat list of new token ids", _short(found, 120),
                  "return the new ids as a flat list, e.g. [12, 7, 3]", key="wrong_shape", keep=True)
        try:
            out.append(_number(token, f"{what}: each token id", whole=True))
        except CheckFailed:
            _fail(f"{what} must return a list of token ids.", "a list of ints", _short(found, 120), key="wrong_type",
                  keep=True)
    return out


@_checked
def check_greedy(greedy_generate_ids: Callable, split: str = "visible") -> None:
    from . import generation
    m = _model_module()
    visible = split == "visible"
    case = references.load("greedy")[split]
    cfg = case["config"]
    model = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.5))
    model.load_state_dict(case["state_dict"])
    for item in case["cases"]:
        prompt = list(item["prompt"])
        call = (f"greedy_generate_ids(model, {prompt}, max_new_tokens={item['max_new_tokens']}, eos_id={item['eos_id']})"
                if visible else "greedy_generate_ids on a hidden model and prompt")
        model.train()  # the answer must switch dropout off itself
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            found = _call(call, greedy_generate_ids, model, list(prompt), item["max_new_tokens"], item["eos_id"])
        found = _token_list(found, "greedy_generate_ids")
        expected = list(item["expected"])
        if found == expected:
            continue
        what = (f"greedy generation from prompt {prompt} (eos_id={item['eos_id']})" if visible
                else "greedy generation on a hidden model and prompt")
        if found[: len(prompt)] == prompt and found[len(prompt):] == expected:
            _fail(f"{what} returns the prompt too.", expected, found, "return only the NEW tokens",
                  key="greedy.returns_prompt")
        if found[: len(expected)] == expected and len(found) > len(expected):
            if found[len(expected)] == item["eos_id"]:
                _fail(f"{what} includes the end token.", expected, found,
                      "stop when eos is predicted, without appending it", key="greedy.includes_eos")
            _fail(f"{what} does not stop at the end token.", expected, found,
                  "stop as soon as the predicted token is eos_id (and do not append it)", key="greedy.no_stop")
        with forbid(generation.greedy_generate_ids, generation.greedy_generate):
            again = _call("greedy_generate_ids (second call)", greedy_generate_ids, model.train(), list(prompt),
                          item["max_new_tokens"], item["eos_id"])
        if _token_list(again, "greedy_generate_ids") != found:
            _fail(f"{what} is not deterministic.", expected, found,
                  "call model.eval() first: in training mode dropout changes the logits at every call",
                  key="greedy.no_eval")
        _fail(f"{what} differs from the reference.", expected, found,
              "at each step run the model on the whole sequence so far, take logits[0, -1].argmax() (the last "
              "position predicts the next token), append it and repeat")
    _ok(f"greedy generation matches the reference on {len(case['cases'])} prompts, stopping at eos")


# ----------------------------------------------------------------- notebook 04

def _classifier(case: dict):
    m = _model_module()
    cfg = case["config"]
    model = m.build_classifier(m.ModelConfig.pick(cfg, dropout=0.5), cfg["nclasses"])
    model.load_state_dict(case["state_dict"])
    return model


@_checked
def check_accuracy(evaluate_accuracy: Callable, split: str = "visible") -> None:
    from . import training
    from .datasets import Batch
    case = references.load("accuracy")[split]
    model = _classifier(case).train()
    batches = [Batch(b["inputs"], b["padding_mask"], b["targets"]) for b in case["batches"]]
    total = sum(len(b.targets) for b in batches)
    with forbid(training.evaluate_accuracy, training.predict):
        found = _call("evaluate_accuracy(model, batches)", evaluate_accuracy, model, batches)
    value = _number(found, "evaluate_accuracy(model, batches)")
    expected = case["expected"]
    if math.isclose(value, expected, abs_tol=1e-6):
        _ok(f"accuracy {value:.4f} over {total} sentences in {len(batches)} batches of different lengths")
        return
    if math.isclose(value, expected * total, abs_tol=1e-4):
        _fail("evaluate_accuracy returns a count.", f"{expected:.4f}", value, "divide by the number of sentences",
              key="accuracy.count")
    if math.isclose(value, expected * 100, abs_tol=1e-4):
        _fail("evaluate_accuracy returns a percentage.", f"{expected:.4f}", value, "return a fraction in [0, 1]",
              key="accuracy.percentage")
    if math.isclose(value, case["no_padding_mask"], abs_tol=1e-6):
        _fail("evaluate_accuracy ignores the padding mask.", f"{expected:.4f}", f"{value:.4f}",
              "call model(batch.inputs, batch.padding_mask): without it the classifier reads padding "
              "and attends to it", key="accuracy.no_padding_mask")
    with forbid(training.evaluate_accuracy, training.predict):
        again = _call("evaluate_accuracy (second call)", evaluate_accuracy, model.train(), batches)
    again = _number(again, "evaluate_accuracy (second call)")
    if not math.isclose(again, value, abs_tol=1e-9):
        _fail("evaluate_accuracy gives a different answer each call.", f"{expected:.4f}", f"{value:.4f} then {again:.4f}",
              "call model.eval() (dropout off) and use torch.no_grad()", key="accuracy.no_eval")
    _fail("evaluate_accuracy differs from the reference.", f"{expected:.4f}", f"{value:.4f}",
          "accuracy = mean over ALL sentences of (argmax of the logits == label); weight batches by their size")


@_checked
def check_transfer(transfer: Callable, split: str = "visible") -> None:
    m = _model_module()
    visible = split == "visible"
    case = references.load("transfer")[split]
    cfg, nclasses = case["config"], case["nclasses"]
    lm = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.1))
    lm.load_state_dict(case["state_dict"])
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    call = f"transfer(pretrained_lm, nclasses={nclasses})" if visible else "transfer on a hidden pretrained model"
    with forbid(m.build_classifier):
        clf = _call(call, transfer, lm, nclasses)
    if not isinstance(clf, nn.Module):
        _fail("transfer must return a model (an nn.Module).", "Model(base, ClassificationHead(...))", _kind(clf),
              key="wrong_type", keep=True)
    changed = [k for k, v in lm.state_dict().items() if k not in before or not torch.equal(v, before[k])]
    if changed or not isinstance(lm.head, m.LanguageModelHead):
        _fail("transfer changed the pretrained language model.", "the pretrained LM left intact",
              f"changes in {changed[:3] or ['lm.head']}",
              "build a new Model around a copy of lm.base and a new head; do not assign to lm.head",
              key="transfer.changes_lm", keep=True)
    clf.eval()
    lm.eval()
    with torch.no_grad():
        out = _call("classifier(src, src_key_padding_mask)", clf, case["src"], case["padding"])
    _require_tensor(out, "classifier(src, src_key_padding_mask)")
    if tuple(out.shape) != (case["src"].size(0), nclasses):
        _fail("the classifier returns the wrong shape.", (case["src"].size(0), nclasses), tuple(out.shape),
              "the new head is ClassificationHead(nhid, nclasses), one prediction per sentence", key="wrong_shape")
    base = getattr(clf, "base", None)
    if not isinstance(base, nn.Module):
        _fail("the classifier has no .base.", hint="return Model(base, head)", key="transfer.not_pretrained")
    base_state = base.state_dict()
    lm_base = lm.base.state_dict()
    if base_state.keys() != lm_base.keys() or not all(_equal(base_state[k], lm_base[k]) for k in lm_base):
        _fail("the classifier's base does not hold the pretrained weights.", "the pretrained base's weights",
              "other weights", "the point of transfer is to start from the pretrained base: copy lm.base, "
              "do not build a new TransformerModel", key="transfer.not_pretrained", keep=True)
    shared = {p.data_ptr() for p in lm.parameters()} & {p.data_ptr() for p in clf.parameters()}
    if shared:
        _fail("the classifier shares its weights with the pretrained LM.", "an independent copy of the base",
              f"{len(shared)} shared tensors", "fine-tuning would change the pretrained LM too (and the next "
              "experiment would start from a fine-tuned base); use copy.deepcopy(lm.base)",
              key="transfer.shared_weights", keep=True)
    head = getattr(clf, "head", None)
    if not isinstance(head, nn.Module) or isinstance(head, m.LanguageModelHead):
        _fail("the classifier keeps the language-model head.", "a fresh ClassificationHead",
              type(head).__name__, "the LM head predicts the next token among ntoken; classification needs a new head",
              key="transfer.keeps_lm_head", keep=True)
    with torch.no_grad():
        hidden = lm.base(case["src"], m.generate_square_subsequent_mask(case["src"].size(1)), case["padding"])
        reference_out = _call("the classifier's head(hidden, src_key_padding_mask)", head, hidden, case["padding"])
    if not _same(out, reference_out):
        _fail("the classifier's output is not head(base(src)) with the causal and padding masks.",
              hint="return Model(base, head): its forward applies both masks")
    trainable = sum(p.numel() for p in clf.parameters() if p.requires_grad)
    if trainable != sum(p.numel() for p in clf.parameters()):
        _fail("some parameters are frozen.", "every parameter trainable (we fine-tune the whole model)",
              f"{trainable} trainable", key="transfer.frozen")
    _ok(f"transfer: pretrained base copied ({sum(p.numel() for p in base.parameters()):,} weights), fresh "
        f"{f'{nclasses}-class ' if visible else ''}head, pretrained LM untouched")


# ----------------------------------------------------------------- notebook 05

MASKING_CASES = {
    "visible": dict(vocab_size=1000, shape=(128, 64), mlm_probability=0.15, seeds=(0, 1)),
    "hidden": dict(vocab_size=300, shape=(96, 81), mlm_probability=0.25, seeds=(1234, 77)),
}
SPECIAL = (PAD_ID, 1, BOS_ID, EOS_ID, MASK_ID)


def _masking_batch(vocab_size: int, shape: tuple, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 99)
    ids = torch.randint(5, vocab_size, shape, generator=g)
    lengths = torch.randint(shape[1] // 3, shape[1] + 1, (shape[0],), generator=g)
    for row, length in enumerate(lengths.tolist()):
        ids[row, 0] = BOS_ID
        ids[row, length - 1] = EOS_ID
        ids[row, length:] = PAD_ID
    ids[::7, 3] = 1  # an UNK now and then
    return ids


def _run_masking(mask_tokens, ids, vocab_size, seed, probability):
    from . import mlm
    generator = torch.Generator().manual_seed(seed)
    original = ids.clone()
    call = (f"mask_tokens(ids, vocab_size={vocab_size}, generator, mlm_probability={probability})" if not _hidden()
            else "mask_tokens on a hidden batch")
    with forbid(mlm.mask_tokens):
        result = _call(call, mask_tokens, ids, vocab_size, generator, probability)
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        _fail("mask_tokens must return a pair (inputs, labels).", "(inputs, labels)", _kind(result),
              key="wrong_type", keep=True)
    inputs, labels = result
    if not torch.equal(ids, original):
        _fail("mask_tokens modified ids in place.", "ids unchanged", "ids changed",
              "start from inputs = ids.clone(); the original ids are needed for the labels", key="masking.in_place",
              keep=True)
    for name, tensor in (("inputs", inputs), ("labels", labels)):
        _require_tensor(tensor, f"mask_tokens's {name}")
        if tensor.shape != ids.shape:
            _fail(f"{name} has the wrong shape.", tuple(ids.shape), tuple(tensor.shape), key="wrong_shape")
        if tensor.dtype != torch.long:
            _fail(f"{name} must hold token ids (torch.long).", "torch.long", tensor.dtype,
                  "token ids are integers: keep ids' dtype (ids.clone(), torch.full_like(ids, PAD_ID), "
                  "torch.randint)", key="wrong_dtype", keep=True)
    return inputs, labels


@_checked
def check_masking(mask_tokens: Callable, part: str = "structure", split: str = "visible") -> None:
    """``part``: "structure" (labels, special tokens, reproducibility) or "rates" (15 % / 80-10-10)."""
    case = MASKING_CASES[split]
    vocab_size, probability = case["vocab_size"], case["mlm_probability"]
    ids = _masking_batch(vocab_size, case["shape"], case["seeds"][0])
    inputs, labels = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][0], probability)
    special = torch.isin(ids, torch.tensor(SPECIAL))
    chosen = labels != PAD_ID
    if part == "structure":
        if bool((chosen & special).any()):
            _fail("special tokens were chosen for prediction.", "labels = PAD_ID at PAD, UNK, BOS, EOS and MASK",
                  f"{int((chosen & special).sum())} special positions with a label",
                  "only real tokens are chosen: set their probability to 0 before sampling", key="masking.special_chosen")
        if bool((inputs[special] != ids[special]).any()):
            _fail("special tokens were changed in the inputs.", "PAD, BOS, EOS unchanged",
                  f"{int((inputs[special] != ids[special]).sum())} changed", "padding and sentence markers are never masked",
                  key="masking.special_changed")
        if bool(chosen.all()) or bool((labels == ids).all()):
            _fail("every position has a label.", "labels only at the chosen ~15 % (PAD_ID elsewhere, ignored by the loss)",
                  "labels everywhere", "the model is only scored on the tokens it could not see",
                  key="masking.labels_everywhere", keep=True)
        if not torch.equal(labels[chosen], ids[chosen]):
            _fail("labels at the chosen positions are not the original tokens.", "labels[chosen] == ids[chosen]",
                  _short(labels[chosen][:10]), "the label is what the model must recover: the token before masking",
                  key="masking.wrong_labels")
        if bool((inputs[~chosen] != ids[~chosen]).any()):
            changed = int((inputs[~chosen] != ids[~chosen]).sum())
            _fail("tokens that were not chosen were changed.", "inputs == ids wherever labels == PAD_ID",
                  f"{changed} unlabeled positions changed",
                  "the 80/10/10 split applies only to the chosen tokens; draw it, then AND it with the chosen mask",
                  key="masking.unchosen_changed")
        if not bool((inputs >= 0).all() and (inputs < vocab_size).all()):
            _fail("inputs hold ids outside the vocabulary.", f"0 <= id < {vocab_size}",
                  f"min {int(inputs.min())}, max {int(inputs.max())}", "draw random ids with torch.randint(low, "
                  "vocab_size, ...): the upper bound is excluded", key="masking.out_of_vocabulary")
        inputs_again, labels_again = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][0], probability)
        if not (torch.equal(inputs_again, inputs) and torch.equal(labels_again, labels)):
            _fail("the same generator seed gives different masks.", "reproducible masking",
                  hint="pass generator=generator to every torch.rand / torch.bernoulli / torch.randint call",
                  key="masking.no_generator")
        other_inputs, other_labels = _run_masking(mask_tokens, ids, vocab_size, case["seeds"][1], probability)
        if torch.equal(other_labels, labels):
            _fail("another seed gives the same choice of tokens.", "a fresh random choice per call",
                  hint="draw the choice with the generator, do not hard-code positions", key="masking.fixed_choice")
        _ok(f"masking structure: labels only at chosen real tokens (original ids), specials untouched, "
            "reproducible with the generator")
        return
    regular = ~special
    rate = float(chosen.sum()) / float(regular.sum())
    if abs(rate - probability) > 0.02:
        base_rate = float(chosen.sum()) / float(ids.numel())
        hint = ("the rate is computed over all positions or padding counted" if abs(base_rate - probability) < 0.02
                else "choose each real token with probability mlm_probability (torch.bernoulli) ")
        _fail(f"{rate:.1%} of the real tokens were chosen.", f"{probability:.0%} (+-2 %)", f"{rate:.1%}", hint,
              key="masking.rate")
    n = int(chosen.sum())
    if n == 0:
        _fail("no token was chosen.", hint="choose each real token with probability mlm_probability", key="masking.rate")
    masked = float((inputs[chosen] == MASK_ID).sum()) / n
    random_ = float(((inputs[chosen] != MASK_ID) & (inputs[chosen] != ids[chosen])).sum()) / n
    kept = float((inputs[chosen] == ids[chosen]).sum()) / n
    found = f"{masked:.0%} mask, {random_:.0%} random, {kept:.0%} unchanged"
    if abs(masked - 0.8) > 0.06 or abs(random_ - 0.1) > 0.05 or abs(kept - 0.1) > 0.05:
        hint, key = "of the CHOSEN tokens: 80 % -> MASK_ID, 10 % -> a random token, 10 % left as they are", "masking.split"
        if masked > 0.95:
            hint = "every chosen token became MASK_ID; BERT replaces only 80 % (the model must also handle real tokens)"
            key = "masking.all_masked"
        elif abs(masked - 0.8) < 0.06 and random_ < 0.07:
            hint = "the random 10 % is missing: half of the chosen tokens that are not masked get a random id"
            key = "masking.no_random"
        elif abs(random_ - 0.2) < 0.05:
            hint, key = "the remaining 20 % all became random; half of them must stay unchanged", "masking.random_20"
        _fail("the 80/10/10 split of the chosen tokens is off.", "80% mask, 10% random, 10% unchanged", found, hint,
              key=key, keep=True)
    random_positions = chosen & (inputs != MASK_ID) & (inputs != ids)
    if bool(random_positions.any()) and len(inputs[random_positions].unique()) < 10:
        _fail("the random replacements use few distinct tokens.", "ids drawn uniformly from the vocabulary",
              f"{len(inputs[random_positions].unique())} distinct ids", "use torch.randint(low, vocab_size, ...)",
              key="masking.few_random_ids")
    _ok(f"masking rates: {rate:.1%} of real tokens chosen; of those {found}" if not _hidden() else
        "masking rates on a hidden batch and probability: the share of chosen tokens and the 80/10/10 split are right")


@_checked
def check_mlm_loss(mlm_loss: Callable, split: str = "visible") -> None:
    from . import mlm
    m = _model_module()
    case = references.load("mlm_loss")[split]
    cfg = case["config"]
    model = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.1))
    model.load_state_dict(case["state_dict"])
    model.eval()
    with forbid(mlm.mlm_loss):
        loss = _call("mlm_loss(model, inputs, labels, padding_mask)", mlm_loss, model, case["inputs"].clone(),
                     case["labels"].clone(), case["padding"].clone())
    if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
        _fail("mlm_loss must return a scalar tensor.", "a 0-dim tensor", _kind(loss), key="loss.not_scalar", keep=True)
    if not loss.requires_grad:
        _fail("the MLM loss carries no gradient.", hint="do not use torch.no_grad() or .item() inside mlm_loss",
              key="mlm.detached")
    expected = case["expected"]
    value = float(loss.detach().double())
    if _same(loss, expected):
        _ok(f"MLM loss {value:.4f}: bidirectional encoder, loss only on the chosen tokens")
        return
    mistakes = {"causal": "a masked LM reads both sides of the blank: call the model with causal=False (no square mask)",
                "all_positions": "only the chosen positions have labels; the others hold PAD_ID and must be ignored"}
    whats = {"causal": "the MLM loss uses the causal mask.", "all_positions": "the loss is computed at every position."}
    matches = _variant_matches(loss, case, mistakes, expected)
    if matches:
        _fail(_twins([whats[k].rstrip(".") for k in matches]) + ".", f"{expected.item():.4f}", f"{value:.4f}",
              _twins([mistakes[k] for k in matches]), key="|".join(f"mlm.{k}" for k in matches))
    _fail("the MLM loss differs from the reference.", f"{expected.item():.4f}", f"{value:.4f}",
          "logits = model(inputs, padding_mask, causal=False); CrossEntropyLoss(ignore_index=PAD_ID) on the "
          "flattened logits and labels")



# ----------------------------------------------------------------- notebook 06

def _bert_module():
    from . import bert
    return bert


def _forbid_bert():
    b = _bert_module()
    return forbid(b.BertEncoder, b.BertClassifier, b.load_minilm, b.mean_pool, b.embed, b.convert_checkpoint,
                  b.weight_mapping, b.load_pretrained_weights, b.count_parameters_formula)


def _forbid_pooling():
    """The classifier's check runs translab's encoder inside the answer: only the pooling and the classifier are off."""
    b = _bert_module()
    return forbid(b.BertClassifier, b.mean_pool, b.embed)


def _close(a: torch.Tensor, b: torch.Tensor, atol: float = 1e-5) -> bool:
    return a.shape == b.shape and bool(torch.allclose(a.float(), b.float(), atol=atol, rtol=1e-4))


def _config_text(fields: dict) -> str:
    return "BertConfig(" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")" if fields else "BertConfig()"


def _layer_pattern(name: str) -> str:
    import re
    return re.sub(r"\.(layers?)\.\d+\.", r".\1.*.", name)


def _names(names, limit: int = 4, counts: bool = True) -> str:
    """Parameter names, one pattern per kind: ``encoder.layers.*.norm1.weight (6 layers)`` (``counts=False``: without
    the number of layers, which a hidden configuration keeps to itself)."""
    groups: dict = {}
    for name in names:
        groups.setdefault(_layer_pattern(name), []).append(name)
    parts = [pattern + (f" ({len(members)} layers)" if "*" in pattern and counts else "")
             for pattern, members in groups.items()]
    return ", ".join(parts[:limit]) + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


_BERT_ATTRIBUTES = ("keep the attribute names of the skeleton (word_embeddings, position_embeddings, "
                    "token_type_embeddings, embedding_norm, dropout, encoder): the weights are loaded by name")


def _load_bert_state(module: nn.Module, state: dict, what: str, classifier: bool = False, visible: bool = True) -> None:
    own = module.state_dict()
    missing = [k for k in state if k not in own]
    unexpected = [k for k in own if k not in state]
    resized = [k for k in state if k in own and tuple(own[k].shape) != tuple(state[k].shape)]
    if not (missing or unexpected or resized):
        module.load_state_dict(state, strict=True)
        return
    prefix = "encoder." if classifier else ""
    if classifier and any(k.startswith("head.") for k in missing):
        hint = "name the new linear layer self.head (nn.Linear(hidden_size, nclasses)) and keep self.encoder as given"
    elif any(k.startswith(prefix + "token_type_embeddings") for k in missing):
        hint = ("BERT adds a token-type (segment) embedding: self.token_type_embeddings = "
                "nn.Embedding(config.type_vocab_size, config.hidden_size)")
    elif any(k.startswith(prefix + "position_embeddings") for k in missing):
        hint = ("BERT learns its positions: self.position_embeddings = nn.Embedding(config.max_position_embeddings, "
                "config.hidden_size), not part 1's fixed sinusoids")
    elif any(k.startswith(prefix + "embedding_norm") for k in missing):
        hint = "BERT normalises the summed embeddings: self.embedding_norm = nn.LayerNorm(hidden_size, eps=config.layer_norm_eps)"
    elif any(k.startswith(prefix + "encoder.layers") for k in missing + unexpected):
        hint = ("the layers: self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(...), "
                "config.num_hidden_layers, enable_nested_tensor=False), one layer per config.num_hidden_layers")
    elif resized:
        hint = ("every size comes from config: vocab_size, hidden_size, intermediate_size (the layer's "
                "dim_feedforward), max_position_embeddings, type_vocab_size")
    else:
        hint = ("keep self.encoder (the encoder given) and the new layer as self.head" if classifier
                else _BERT_ATTRIBUTES)
    sizes = ", ".join(f"{k} {tuple(own[k].shape)} instead of {tuple(state[k].shape)}" if visible else k
                      for k in resized[:2])
    found = "; ".join(part for part in (
        missing and f"missing {_names(missing, counts=visible)}",
        unexpected and f"unexpected {_names(unexpected, counts=visible)}", resized and f"wrong sizes for {sizes}")
        if part)
    _fail(f"{what}: the reference weights do not fit your module.", "the parameters of BERT's encoder, by name", found, hint)


_BERT_BASE_MISTAKES = {  # variant in the references -> (what the output looks like, hint)
    "scaled": ("embeddings scaled by sqrt(hidden_size)",
               "the word embeddings are multiplied by sqrt(hidden_size), as in part 2. BERT does not scale them: it "
               "learned their size, and the embedding LayerNorm sets the scale anyway"),
    "no_embedding_norm": ("no embedding LayerNorm", "the embedding LayerNorm is not applied: "
                          "x = embedding_norm(word + position + token type), then dropout, then the encoder"),
    "no_positions": ("no position embeddings", "the position embeddings are not added: "
                     "position_embeddings(torch.arange(seq_len)), one learned vector per position"),
    "no_token_types": ("no token-type embeddings", "the token-type embeddings are not added: "
                       "token_type_embeddings(token_type_ids)"),
    "types_ignored": ("token_type_ids ignored", "token_type_ids is ignored: use it when it is given "
                      "(all zeros only when it is None)"),
    "relu": ("ReLU layers", "the feed-forward uses ReLU, PyTorch's default; BERT uses GELU: activation=\"gelu\""),
    "tanh_gelu": ("tanh-approximated GELU", "BERT uses the exact (erf) GELU: activation=\"gelu\""),
    "pre_ln": ("pre-LN layers", "the layers normalise first (norm_first=True); BERT is post-LN, PyTorch's default "
               "norm_first=False: x = norm1(x + attention(x)), then x = norm2(x + feed_forward(x))"),
    "no_padding_mask": ("no padding mask", "padding_mask is not passed to the encoder: "
                        "src_key_padding_mask=padding_mask"),
}


@_checked
def check_bert_base(BertBase: type, split: str = "visible") -> None:
    """BertBase(config) loads the reference encoder's weights by name and computes the same outputs."""
    b = _bert_module()
    cases = references.load("bert_base")[split]
    visible = split == "visible"
    for case in cases:
        config = b.BertConfig(**case["config"])
        label = f"BertBase({_config_text(case['config'])})" if visible else "BertBase on a hidden configuration"
        with _forbid_bert():
            model = _call(label, BertBase, config)
        if not isinstance(model, nn.Module):
            _fail(f"{label} must build an nn.Module.", "an nn.Module", type(model).__name__)
        _load_bert_state(model, case["state_dict"], label, visible=visible)
        eps = sorted({module.eps for module in model.modules() if isinstance(module, nn.LayerNorm)})
        if eps != [config.layer_norm_eps]:
            _fail(f"{label}: the LayerNorms do not use config.layer_norm_eps.",
                  f"eps={config.layer_norm_eps:g} everywhere" if visible else "eps=config.layer_norm_eps everywhere",
                  f"eps {', '.join(f'{e:g}' for e in eps)}" if visible else None,
                  "BERT's LayerNorms use eps=1e-12 (config.layer_norm_eps), PyTorch's default is 1e-5: pass "
                  "layer_norm_eps=config.layer_norm_eps to the encoder layer and eps=config.layer_norm_eps to "
                  "the embedding LayerNorm")
        model.eval()
        with _forbid_bert(), torch.no_grad():
            out = _call(f"{label}.forward(input_ids, padding_mask, token_type_ids)", model, case["ids"],
                        case["padding"], case["types"])
            plain = _call(f"{label}.forward(input_ids)", model, case["ids"])
        expected, real = case["expected"], ~case["padding"]
        for found, what in ((out, "forward(input_ids, padding_mask, token_type_ids)"), (plain, "forward(input_ids)")):
            if not isinstance(found, torch.Tensor) or found.shape != expected.shape:
                _fail(f"{label}: {what} returns the wrong shape for input_ids of shape {tuple(case['ids'].shape)}.",
                      f"{tuple(expected.shape)} = (batch, seq, hidden_size)",
                      tuple(found.shape) if isinstance(found, torch.Tensor) else type(found).__name__,
                      "batch-first: nn.TransformerEncoderLayer(..., batch_first=True); return the encoder's output "
                      "(one vector per token), no pooling inside the base")
        if not _close(out[real], expected[real]):
            if bool(torch.isnan(out[real]).any()):
                _fail(f"{label}: the output holds NaN.", hint="padding_mask is True at padding (PyTorch's "
                      "src_key_padding_mask); Hugging Face's attention_mask is the opposite (1 = real token): "
                      "do not invert it")
            for key, (looks_like, hint) in _BERT_BASE_MISTAKES.items():
                variant = case[key]
                if not _close(variant[real], expected[real]) and _close(out[real], variant[real]):
                    _fail(f"{label}: the output differs from the reference.", "the reference encoder's output",
                          f"the output of an encoder with {looks_like}", hint)
            _fail(f"{label}: the output differs from the reference.",
                  _short(expected[0, 0, :4]) + " at [0, 0, :4]" if visible else None,
                  _short(out[0, 0, :4]) if visible else None,
                  "embedding_norm(word + position + token type) -> dropout -> post-LN encoder layers with GELU, "
                  "padding mask passed as src_key_padding_mask")
        if not _close(plain, case["expected_no_masks"]):
            _fail(f"{label}: forward(input_ids) without the optional arguments differs from the reference.",
                  hint="padding_mask=None means no padding, token_type_ids=None means every token type is 0")
    what = "the configuration shown" if visible else f"{len(cases)} hidden configurations"
    _ok(f"BertBase on {what}: BERT's weights load by name, outputs equal the reference encoder's "
        "(learned positions and token types, embedding LayerNorm, post-LN GELU layers, padding mask)")


# --- the weight mapping

_QKV = ("query", "key", "value")


def _checkpoint_case(case: dict):
    """(config, checkpoint under the checkpoint's names) of one case of the mapping check."""
    b = _bert_module()
    if case["checkpoint"] is None:
        return b.load_checkpoint()
    return b.BertConfig(**case["config"]), case["checkpoint"]


def _provenance(tensor: torch.Tensor, checkpoint: dict) -> str | None:
    """The checkpoint tensor that ``tensor`` is a copy of, if any."""
    for key, value in checkpoint.items():
        if value.shape == tensor.shape and value.dtype.is_floating_point and torch.equal(value, tensor.to(value.dtype)):
            return key
    return None


def _mapping_value_mistake(name: str, found: torch.Tensor, right: dict, checkpoint: dict, mapping: dict):
    """(kind, hint) for a tensor of the right shape and the wrong values."""
    sources = mapping[name]
    if "in_proj" in name:
        chunks = found.chunk(3)
        parts = [checkpoint[key] for key in sources]
        order = []
        for chunk in chunks:
            match = [i for i, part in enumerate(parts) if part.shape == chunk.shape and torch.equal(part, chunk.to(part.dtype))]
            order.append(match[0] if match else None)
        if None not in order and order != [0, 1, 2]:
            packed = ", ".join(_QKV[i] for i in order)
            return (f"in_proj packed as ({packed})",
                    f"query, key and value are packed in the order ({packed}). PyTorch cuts in_proj_weight into "
                    "q, k, v in that order: rows 0..d-1 are the query, d..2d-1 the key, 2d..3d-1 the value; stack "
                    "torch.cat([query, key, value], dim=0), the biases in the same order")
        if found.dim() == 2 and all(part.dim() == 2 and torch.equal(chunk, part.T.to(chunk.dtype))
                                    for chunk, part in zip(chunks, parts)):
            return ("transposed", "the query, key and value matrices are transposed. nn.Linear keeps its weight as "
                                  "(out_features, in_features), and so does the checkpoint: copy them as they are")
    if ".norm1." in name or ".norm2." in name:
        other = name.replace(".norm1.", ".norm#.").replace(".norm2.", ".norm1.").replace(".norm#.", ".norm2.")
        if torch.equal(found.to(right[other].dtype), right[other]):
            return ("the two LayerNorms swapped",
                    "norm1 and norm2 are swapped. Post-LN: norm1 normalises x + attention(x), i.e. the checkpoint's "
                    "attention.output.LayerNorm; norm2 normalises x + feed_forward(x), i.e. its output.LayerNorm")
    if found.dim() == 2 and found.shape[0] == found.shape[1] and torch.equal(found.T.to(right[name].dtype), right[name]):
        return ("transposed", "a weight matrix is transposed. nn.Linear keeps its weight as (out_features, "
                              "in_features), and so does the checkpoint: copy it as it is, no .T")
    if name.endswith("bias") and not bool(found.any()):
        return ("a bias left at zero", "a bias is all zeros, as if it was never copied: every Linear of the "
                                       "checkpoint has a bias (in_proj_bias packs query.bias, key.bias, value.bias)")
    if "norm" in name and name.endswith("weight") and bool((found == 1).all()):
        return ("a LayerNorm left at its initial value", "a LayerNorm weight is all ones, as if it was never "
                "copied: copy the checkpoint's LayerNorm.weight and LayerNorm.bias (BERT's gamma and beta)")
    origin = _provenance(found, checkpoint)
    if origin is not None:
        return (f"{_layer_pattern(name)} holds {_layer_pattern(origin)}", _confusion_hint(name, origin, sources))
    return ("values differ", "the values differ from the checkpoint's: copy the tensors unchanged (no scaling, "
                             "no re-initialisation)")


def _confusion_hint(name: str, origin: str, sources) -> str:
    import re
    layer_found = re.search(r"\.layers?\.(\d+)\.", origin)
    layer_wanted = re.search(r"\.layers?\.(\d+)\.", name)
    if layer_found and layer_wanted and layer_found.group(1) != layer_wanted.group(1) and \
            _layer_pattern(origin) == _layer_pattern(sources[0]):
        return "a tensor of another layer: layer i of the checkpoint (encoder.layer.i) goes to encoder.layers.i"
    if "attention.output.dense" in origin or ("output.dense" in origin and "out_proj" in name):
        return ("attention.output.dense is the attention's output projection (self_attn.out_proj); output.dense "
                "is the feed-forward's second Linear (linear2)")
    if "intermediate.dense" in origin or ("output.dense" in origin and "linear1" in name):
        return ("intermediate.dense is the feed-forward's first Linear (hidden -> intermediate: linear1), "
                "output.dense its second (linear2)")
    if "LayerNorm" in origin:
        return ("a LayerNorm from the wrong place: embedding_norm is embeddings.LayerNorm; in each layer norm1 "
                "follows attention (attention.output.LayerNorm) and norm2 the feed-forward (output.LayerNorm)")
    return f"{_layer_pattern(name)} is filled from the wrong checkpoint tensor"


def _mapping_shape_hint(name: str, found: torch.Tensor, wanted: torch.Tensor, checkpoint: dict, sources) -> str:
    origin = _provenance(found, checkpoint)
    if origin is not None and origin not in sources:
        return _confusion_hint(name, origin, sources)
    if "in_proj" in name and found.dim() == 2 and tuple(found.shape) == tuple(wanted.shape[::-1]):
        return ("query, key and value are stacked along dim=1, or the stack is transposed: in_proj_weight is "
                "(3 * hidden_size, hidden_size), torch.cat([query, key, value], dim=0)")
    if found.dim() == 2 and tuple(found.shape) == tuple(wanted.shape[::-1]):
        return ("a transposed weight. nn.Linear keeps its weight as (out_features, in_features), and so does the "
                "checkpoint: copy it as it is, no .T")
    if "in_proj" in name and found.shape[0] * 3 == wanted.shape[0]:
        return "in_proj packs all three of query, key and value, stacked along dim 0 (3 * hidden_size rows)"
    return "each parameter of BertBase has the shape of the checkpoint tensor(s) it comes from"


def _mapping_keys_hint(missing: list[str], unexpected: list[str]) -> str:
    ignored = [k for k in unexpected if k.startswith("pooler.") or k == "embeddings.position_ids"]
    if any(k.startswith(("embeddings.", "encoder.layer.")) for k in unexpected if k not in ignored):
        return ("the keys are BertBase's parameter names (those of BertBase(config).state_dict()), not the "
                "checkpoint's: e.g. encoder.layer.0.attention.output.dense.weight goes to "
                "encoder.layers.0.self_attn.out_proj.weight")
    if ignored:
        return ("leave out the pooler (BertBase has none: we average the tokens) and embeddings.position_ids "
                "(a constant buffer 0, 1, 2, ..., not a weight)")
    if any(part in k for k in unexpected for part in ("query", "key", "value", "q_proj", "k_proj", "v_proj")):
        return ("nn.MultiheadAttention has no separate query, key and value weights: stack them into "
                "self_attn.in_proj_weight, and their biases into self_attn.in_proj_bias")
    if any(k.endswith("in_proj_bias") for k in missing):
        return ("in_proj_bias is missing: the query, key and value biases are packed into it like the weights, "
                "in the same order")
    if any(k.endswith(".bias") and "norm" not in k for k in missing):
        return "a bias is missing: every Linear (out_proj, linear1, linear2) has a weight and a bias"
    if any("norm" in k for k in missing):
        return ("a LayerNorm is missing: embedding_norm from embeddings.LayerNorm, and in every layer norm1 and "
                "norm2 from the layer's two LayerNorms, a weight and a bias each")
    if any(".layers." in k for k in missing + unexpected):
        return "one set of keys per layer: loop over range(config.num_hidden_layers), not a fixed count"
    return "exactly one entry per parameter of BertBase(config).state_dict()"


def _check_mapping_case(convert_checkpoint: Callable, case: dict, what: str, visible: bool):
    """The student's state dict for one case, after checking its keys, shapes, values and outputs."""
    from collections.abc import Mapping
    b = _bert_module()
    config, checkpoint = _checkpoint_case(case)
    mapping = b.weight_mapping(config)
    right = b.convert_checkpoint(checkpoint, config)
    reference = b.BertEncoder(config).eval()
    given = {key: value.clone() for key, value in checkpoint.items()}
    with _forbid_bert():
        try:
            with _no_warnings(what):
                found = convert_checkpoint(given, config)
        except CheckFailed:
            raise
        except AssertionError as error:
            if "translab's own" in str(error):  # forbid()'s message: the answer calls translab's implementation
                _fail(f"{what}: {error}", key="calls_translab")
            _fail(f"{what} failed an assertion: {str(error)[:300]}", key="raised")
        except NotImplementedError:
            _fail(f"{what} is not written yet (it raises NotImplementedError).",
                  hint="replace `raise NotImplementedError()` in the answer cell with your code, then run that cell",
                  key="not_written")
        except KeyError as error:
            _fail(f"{what} raised KeyError" + (f": {error}" if visible else " (a key this checkpoint does not have)"),
                  hint="read only the checkpoint's own keys (print them); loop "
                  "over range(config.num_hidden_layers), not a fixed number of layers")
        except Exception as error:
            _fail(f"{what} raised {type(error).__name__}: {error}")
    if not isinstance(found, Mapping) or not all(isinstance(v, torch.Tensor) for v in found.values()):
        _fail(f"{what} must return a dict {{parameter name of BertBase: tensor}}.", "a dict of tensors",
              type(found).__name__ if not isinstance(found, Mapping) else "a dict with values that are not tensors",
              "build a new dict; BertBase(config).load_state_dict(it) must accept it")
    missing = [k for k in right if k not in found]
    unexpected = [k for k in found if k not in right]
    if missing or unexpected:
        _fail(f"{what}: the keys are not BertBase's parameter names.",
              f"the {len(right)} names of BertBase(config).state_dict()" if visible else "BertBase's names",
              "; ".join(p for p in (missing and f"missing {_names(missing, counts=visible)}",
                                    unexpected and f"unexpected {_names(unexpected, counts=visible)}") if p),
              _mapping_keys_hint(missing, unexpected))
    resized = [k for k in right if tuple(found[k].shape) != tuple(right[k].shape)]
    if resized:
        name = resized[0]
        _fail(f"{what}: tensors of the wrong shape: {_names(resized, counts=visible)}.",
              f"{name} {tuple(right[name].shape)}" if visible else None,
              f"{tuple(found[name].shape)}" if visible else None,
              _mapping_shape_hint(name, found[name], right[name], checkpoint, mapping[name]))
    wrong = [k for k in right if not torch.equal(found[k].to(right[k].dtype), right[k])]
    if wrong:
        kinds: dict = {}
        for name in wrong:
            kind, hint = _mapping_value_mistake(name, found[name], right, checkpoint, mapping)
            kinds.setdefault((kind, hint), []).append(name)
        (kind, hint), names = max(kinds.items(), key=lambda item: len(item[1]))
        others = " (and other tensors wrong otherwise)" if len(names) < len(wrong) else ""
        _fail(f"{what}: tensors hold the wrong values: {_names(names, counts=visible)}{others}.",
              "each parameter filled from its checkpoint tensor(s)", kind, hint)
    reference.load_state_dict(dict(found), strict=True)
    real = ~case["padding"]
    with torch.no_grad():
        out = reference(case["ids"], case["padding"], case["types"])
    if not _close(out[real], case["expected"][real], atol=1e-4):
        _fail(f"{what}: the encoder loaded with your tensors does not reproduce the reference outputs.",
              hint="every tensor must be copied unchanged, in float32")
    return config, found, out, case


@_checked
def check_weight_mapping(convert_checkpoint: Callable, split: str = "visible", BertBase: type | None = None) -> None:
    """convert_checkpoint(checkpoint, config) -> BertBase's state dict: loaded into the reference encoder, the real
    all-MiniLM-L6-v2 reproduces the reference outputs on sentences (hidden: other sentences, and a small
    checkpoint of another shape).  With ``BertBase``, also says (not graded) whether your base computes the same."""
    visible = split == "visible"
    cases = references.load("bert_mapping")[split]
    results = []
    for case in cases:
        real = case["checkpoint"] is None
        what = ("convert_checkpoint(checkpoint, config) on all-MiniLM-L6-v2" + ("" if visible else ", hidden sentences")
                if real else "convert_checkpoint on another (hidden) checkpoint")
        results.append(_check_mapping_case(convert_checkpoint, case, what, visible))
    config, found, out, case = results[0]
    sentences = int(case["ids"].size(0))
    message = (f"weight mapping: all {len(found)} tensors of all-MiniLM-L6-v2 in place (query, key, value packed in "
               f"order); the reference encoder loaded with them reproduces its outputs on {sentences} "
               + ("sentences" if visible else "hidden sentences") + (" and on another checkpoint" if len(cases) > 1 else ""))
    if BertBase is not None:
        try:
            with _forbid_bert():
                model = _call("BertBase(config)", BertBase, config)
                model.load_state_dict(dict(found), strict=True)
                model.eval()
                with torch.no_grad():
                    mine = _call("BertBase.forward", model, case["ids"], case["padding"], case["types"])
            same = _close(mine[~case["padding"]], out[~case["padding"]], atol=1e-4)
            note = ("your BertBase, loaded with the same tensors, computes the same outputs" if same else
                    "not graded here: your BertBase loads these tensors but computes other outputs (see its check)")
        except Exception as error:  # noqa: BLE001 - the base is graded by its own check
            note = f"not graded here: your BertBase could not load or run them ({str(error).splitlines()[0][:120]})"
        message += f"\n    {note}"
    _ok(message)


# --- the parameter count

_BERT_COUNT_MISTAKES = {
    "pooler_flipped": "the pooler is counted when pooler=False or left out when pooler=True: it is one Linear "
                      "(hidden_size x hidden_size and its bias), added only when pooler=True",
    "no_biases": "biases are missing: every Linear has one (in-projection 3d, out-projection d, feed-forward "
                 "intermediate_size + d, the pooler d)",
    "no_layer_norms": "the two LayerNorms of each layer are missing (a weight and a bias of hidden_size each: 4d per layer)",
    "one_layer_norm": "one LayerNorm per layer; there are two (after attention and after the feed-forward)",
    "no_embedding_norm": "the embedding LayerNorm (a weight and a bias of hidden_size: 2d) is missing",
    "no_position_embeddings": "the position table is missing: BERT learns its positions, "
                              "max_position_embeddings x hidden_size parameters (part 1's sinusoids had none)",
    "no_token_types": "the token-type table (type_vocab_size x hidden_size) is missing",
    "position_ids_counted": "embeddings.position_ids is counted: a constant buffer of the checkpoint "
                            "(0 .. max_position_embeddings - 1), not a parameter",
    "feed_forward_of_width_d": "the feed-forward is counted with width hidden_size, as in part 2; BERT's is "
                               "intermediate_size wide",
    "attention_times_heads": "the attention is multiplied by the number of heads; the heads split hidden_size into "
                             "slices, the projections stay hidden_size x hidden_size",
    "qkv_once": "one projection counted instead of three (query, key and value each have d*d + d)",
    "no_out_projection": "the attention's output projection (d*d + d per layer) is missing",
    "one_layer": "only one layer counted; multiply by num_hidden_layers",
}


@_checked
def check_bert_parameter_count(count_bert_parameters: Callable, split: str = "visible") -> None:
    """count_bert_parameters(config, pooler=False) by formula: all-MiniLM-L6-v2 (visible), other shapes (hidden)."""
    from . import params
    b = _bert_module()
    visible = split == "visible"
    cases = references.load("bert_parameters")[split]
    for case in cases:
        config, pooler, expected = b.BertConfig(**case["config"]), case["pooler"], case["expected"]
        call = f"count_bert_parameters(config, pooler={pooler})"
        with forbid(b.count_parameters_formula, params.count_trainable_parameters):
            found = _call(call, count_bert_parameters, config, pooler=pooler)
        try:
            value = int(found)
        except (TypeError, ValueError):
            _fail(f"{call} is not a number.", "an int", _short(found))
        if value == expected and float(found) == expected:
            continue
        hints = [hint for key, hint in _BERT_COUNT_MISTAKES.items()
                 if case[key] != expected and value == case[key]]
        hint = " -- or: ".join(hints) if hints else (
            "embeddings (vocab_size + max_position_embeddings + type_vocab_size) * d + 2d; per layer "
            "3(d*d + d) + (d*d + d) + (d*f + f) + (f*d + d) + 4d; the pooler d*d + d only when pooler=True")
        if visible:
            _fail(f"{call} for all-MiniLM-L6-v2 is off by {value - expected:+,}.", f"{expected:,}", f"{value:,}", hint)
        _fail(f"{call} is wrong on a hidden configuration.", hint=hint)
    if visible:
        without, with_pooler = (case["expected"] for case in cases)
        _ok(f"all-MiniLM-L6-v2: {without:,} parameters without the pooler, {with_pooler:,} with it")
    else:
        _ok(f"parameter formula right on {len(cases) // 2} hidden configurations, with and without the pooler")


# --- the classifier

_BERT_POOLING_MISTAKES = {  # variant in the references -> (what the logits look like, hint)
    "mean_with_padding": ("the mean over every position, padding included",
                          "average the real tokens only (padding_mask is True at padding): "
                          "(hidden * keep).sum(1) / keep.sum(1) with keep = ~padding_mask"),
    "last_real_token": ("each sentence's last real token", "that is part 4's readout, right for a causal model. "
                        "This encoder is bidirectional: every token has seen the whole sentence, and the mean over "
                        "the real tokens is the summary it was trained to give"),
    "first_token": ("the first token ([CLS]) alone", "average the real tokens instead: this checkpoint was trained "
                    "with mean-pooled sentence vectors (and the pooler over [CLS] is not loaded)"),
    "last_position": ("the last position", "that is padding for every shorter sentence; average the real tokens"),
    "sum": ("the sum over the real tokens", "divide by the number of real tokens: a mean does not grow with length"),
    "max": ("the maximum over the real tokens", "average the real tokens instead"),
    "no_padding_mask": ("an encoder run without the padding mask", "pass padding_mask to the encoder too, or its "
                        "attention reads padding: self.encoder(input_ids, padding_mask, token_type_ids)"),
    "types_ignored": ("an encoder run without the token types", "pass token_type_ids on to the encoder"),
}


@_checked
def check_bert_classifier(BertClassifier: type, split: str = "visible") -> None:
    """BertClassifier(encoder, nclasses): a fresh head over the mean of the real tokens' vectors."""
    b = _bert_module()
    visible = split == "visible"
    cases = references.load("bert_classifier")[split]
    for case in cases:
        config, nclasses = b.BertConfig(**case["config"]), case["nclasses"]
        encoder = b.BertEncoder(config)
        encoder.load_state_dict(case["encoder_state"])
        label = f"BertClassifier(encoder, nclasses={nclasses})" if visible else "BertClassifier on a hidden configuration"
        with _forbid_pooling():
            model = _call(label, BertClassifier, encoder, nclasses)
        if not isinstance(model, nn.Module):
            _fail(f"{label} must build an nn.Module.", "an nn.Module", type(model).__name__)
        state = {**{f"encoder.{k}": v for k, v in case["encoder_state"].items()},
                 **{f"head.{k}": v for k, v in case["head_state"].items()}}
        _load_bert_state(model, state, label, classifier=True, visible=visible)
        frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
        if frozen:
            _fail(f"{label}: some parameters are frozen.", "every parameter trainable (we fine-tune the whole model)",
                  _names(frozen))
        model.eval()
        with _forbid_pooling(), torch.no_grad():
            out = _call(f"{label}.forward(input_ids, padding_mask, token_type_ids)", model, case["ids"],
                        case["padding"], case["types"])
            plain = _call(f"{label}.forward(input_ids)", model, case["ids"])
        expected = case["expected"]
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
            _fail(f"{label} returns the wrong shape.", f"{tuple(expected.shape)} = (batch, nclasses)",
                  tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__,
                  "one vector per sentence (the mean over its real tokens), then the head")
        if not _close(out, expected):
            for key, (looks_like, hint) in _BERT_POOLING_MISTAKES.items():
                if not _close(case[key], expected) and _close(out, case[key]):
                    _fail(f"{label}: the logits differ from the reference.",
                          "the head applied to the mean of the real tokens' vectors",
                          f"the head applied to {looks_like}", hint)
            _fail(f"{label}: the logits differ from the reference.", _short(expected) if visible else None,
                  _short(out) if visible else None,
                  "hidden = encoder(input_ids, padding_mask, token_type_ids); average hidden over the real tokens "
                  "(padding_mask False); return head(that mean)")
        if not _close(plain, case["expected_no_masks"]):
            _fail(f"{label}: forward(input_ids) without a padding mask differs from the reference.",
                  hint="padding_mask=None means no padding: average every position")
    _ok(f"BertClassifier on {len(cases)} {'configuration' if visible else 'hidden configuration'}"
        f"{'s' if len(cases) > 1 else ''}: a fresh head on the mean of the real tokens, never padding")
