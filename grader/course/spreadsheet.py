"""Cells of the CSV files the course writes for people to open (reports, similarity, interviews): a student's text
that starts like a formula is kept as text, so a spreadsheet never evaluates it."""
from __future__ import annotations


def defuse_formula(text: str) -> str:
    """A CSV cell a spreadsheet will not evaluate."""
    text = str(text)
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text
