"""One answer of the outside-style corpus and what a fair grader concludes of it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    graded: str            # a key of GRADED
    name: str              # short, unique within its graded answer
    style: str             # where this way of writing it is common outside
    source: str            # the answer cell (with whatever helpers the same cell defines)
    mistake: str | tuple[str, ...] | None  # what a fair grader names (diagnosis keys, written before the messages)
    visible_passes: bool = False  # a wrong answer the visible case cannot catch (the hidden one must)

    @property
    def mistakes(self) -> frozenset[str]:
        """Every mistake the answer makes, each a diagnosis key; empty: the answer is right."""
        if self.mistake is None:
            return frozenset()
        return frozenset((self.mistake,) if isinstance(self.mistake, str) else self.mistake)
