"""One answer of the outside-style corpus and what a fair grader concludes of it."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Answer:
    graded: str            # a key of GRADED
    name: str              # short, unique within its graded answer
    style: str             # where this way of writing it is common outside
    source: str            # the answer cell (with whatever helpers the same cell defines)
    mistake: str | None    # the misconception a fair grader names; None: the answer is right
    visible_passes: bool = False  # a wrong answer the visible case cannot catch (the hidden one must)
