"""Which parts' reference code this copy of translab holds: a staged student release holds back the answers of the
parts still open (the instructor's ``make student-release UNTIL=N``), each replaced by a stub that raises
``NotReleased``."""
from __future__ import annotations


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
