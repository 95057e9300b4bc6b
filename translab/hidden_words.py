"""A hidden check's words: what its message may say of what the kernel sent, composed by the checker.

A hidden test's inputs reach the student's code, so anything the answer chose (an error's text, a class's name, a
string it returned) could carry them into the feedback.  A message about a hidden check therefore holds only the
checker's own words: the kind of failure, a type's name where the checker knows the type, a line number it
formats itself.
"""
from __future__ import annotations

import builtins
import sys

from .contract import WATCH_TAMPERED_KEY

_FAILURE_KINDS = {"not_written": "is not written yet (it raises NotImplementedError)",
                  "calls_translab": "calls translab's or PyTorch's own implementation of the exercise, switched off "
                                    "while it is graded",
                  WATCH_TAMPERED_KEY: "switched off what watches PyTorch's calls while it is graded (the grader "
                                      "flags this notebook for the instructor)",
                  "stderr_warning": "wrote a warning to stderr", "raised": "raised {type}",
                  "mutates_input": "changed a tensor it was given, in place (compute a new tensor instead)"}


def known_type_name(name, module, default: str) -> str:
    """A type's name as a hidden check may print it: the checker's own word for it, never the kernel's.  A class of
    Python's builtins, of torch or of numpy keeps its name (the checker can look it up); any other class is the
    student's to name (``class Size17``) and so could carry a hidden input: ``default`` instead."""
    name, module = str(name or ""), str(module or "")
    top = module.split(".")[0]
    if top == "builtins" and isinstance(getattr(builtins, name, None), type):
        return name
    if top in ("torch", "numpy") and name.isidentifier() and isinstance(_attribute(module, name), type):
        return f"{top}.{name}"
    return default


def _attribute(module: str, name: str):
    """``module.name`` where the checker has imported ``module`` already (a name the kernel chose imports nothing)."""
    return getattr(sys.modules.get(module), name, None)


HIDDEN_ERROR_NOTE = " (a hidden test shows the kind of error and its line, not its message)"


def composed_failure(what, header: dict) -> tuple[str, str]:
    """(message, key) of a failure the kernel reported in a hidden check, composed here: the label the checker
    gave the call, the kind of failure, the error's type and its line in the student's code."""
    keys = [key for key in str(header.get("key") or "").split()[:8] if key in _FAILURE_KINDS] or ["raised"]
    kinds = [_FAILURE_KINDS[key].format(type=known_type_name(header.get("type"), "builtins", "an error of its own class"))
             for key in dict.fromkeys(keys)]
    line = header.get("line")
    where = f" at line {line} of your code" if type(line) is int and 0 < line < 10 ** 6 else ""
    also = "".join(f"; it also {kind}" for kind in kinds[1:])  # every finding the kernel kept (a warning beside)
    return f"{what or 'your code'} {kinds[0]}{where}{also}{HIDDEN_ERROR_NOTE}.", " ".join(dict.fromkeys(keys))
