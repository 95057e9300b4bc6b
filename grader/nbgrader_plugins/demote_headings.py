"""Feedback step: the notebook's headings one level down, so that the page's one h1 is its score (the feedback
template's header) and the notebook's title is an h2 below it."""
from __future__ import annotations

import re

from nbgrader.preprocessors import NbGraderPreprocessor

HEADING = re.compile(r"^( {0,3})(#{1,5})(?=[ \t]|$)", re.M)  # an ATX heading; h6 stays h6
FENCE = re.compile(r"^ {0,3}(```|~~~)", re.M)


def demoted(markdown: str) -> str:
    """``markdown`` with each heading outside fenced code one level lower."""
    parts = FENCE.split(markdown)
    out, inside = [], False
    for index, part in enumerate(parts):
        if index % 2 == 1:  # a fence marker
            inside = not inside
            out.append(part)
        else:
            out.append(part if inside else HEADING.sub(r"\1#\2", part))
    return "".join(out)


class DemoteHeadings(NbGraderPreprocessor):
    """Every markdown cell's headings, the student's written answers' included, one level down (WCAG: one h1, headings
    in order).  It changes what is shown, never a score."""

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "markdown":
            cell.source = demoted(cell.source)
        return cell, resources
