"""Which parts' reference code this copy of translab holds: a staged student release holds back the answers of the
parts still open (the instructor's ``make student-release UNTIL=N``), each replaced by a stub that raises
``NotReleased``."""
from __future__ import annotations

import contextvars

# In the grader's checker (full library), what the kernel it serves holds back: that kernel imports a stage
# (``grader.isolation.kernel_stages``), so a check that would hand it translab's own object must hand it a stand-in instead.
_HELD_IN_KERNEL: contextvars.ContextVar[frozenset] = contextvars.ContextVar("translab_held_in_kernel",
                                                                            default=frozenset())


class NotReleased(RuntimeError):
    """translab's own implementation of an answer that is still to be written: it comes with a later release."""

    def __init__(self, name: str, part: int):
        self.name, self.part = name, part
        super().__init__(
            f"{name} is translab's answer to part {part}, which is still open in this release of the lab: it comes "
            f"with the release that follows part {part}'s deadline. Until then, use your own (from notebook "
            f"0{part}); if a notebook of a later part needs it, that part is not released yet.")


def withheld(obj) -> bool:
    """Whether ``obj`` (a function or class of translab) is such a stub."""
    return getattr(obj, "__withheld__", None) is not None


def held_in_kernel(obj) -> bool:
    """Whether the student's kernel lacks ``obj``: a stub here, or, in the checker, held back from the kernel it
    serves (``holding_back``).  A check hands the kernel a stand-in for such an object, never the object."""
    module = str(getattr(obj, "__module__", "")).removeprefix("translab.")
    return withheld(obj) or f"{module}:{getattr(obj, '__qualname__', '')}" in _HELD_IN_KERNEL.get()


def holding_back(names) -> contextvars.Token:
    """In the checker: the kernel holds back ``names`` (``module:name``, as ``grader.course.withheld`` lists them)."""
    return _HELD_IN_KERNEL.set(frozenset(names))


def stop_holding_back(token: contextvars.Token) -> None:
    _HELD_IN_KERNEL.reset(token)
