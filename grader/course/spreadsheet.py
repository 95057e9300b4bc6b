"""Cells of the CSV files the course writes for people to open (reports, similarity, interviews): a student's text
that starts like a formula is kept as text, so a spreadsheet never evaluates it."""
from __future__ import annotations


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def defuse_formula(text: str) -> str:
    """A CSV cell a spreadsheet will not evaluate."""
    text = str(text)
    return "'" + text if text[:1] in FORMULA_STARTS else text


def undefused(text: str) -> str:
    """A cell that ``defuse_formula`` wrote, read back as the text it was."""
    return text[1:] if text[:1] == "'" and text[1:2] in FORMULA_STARTS else text
