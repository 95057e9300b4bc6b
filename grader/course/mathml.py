"""Formulas on the formgrader's and the feedback pages, typeset when the page is built: no MathJax, no CDN.

nbgrader's formgrade and feedback templates load MathJax from a CDN, so offline (a lab room, a firewalled hub,
a feedback file opened on a train) every formula shows as raw ``$...$``, and the page waits on the script.
Here nbconvert's ``markdown2html`` filter is replaced (``c.HTMLExporter.filters`` in ``nbgrader_config.py``) by
one that renders each formula to MathML with ``latex2mathml``; browsers draw MathML themselves (Chromium since
109, Firefox, Safari), so a feedback file is complete on its own.  ``grader/templates/classic/mathjax.html.j2``
replaces nbconvert's ``mathjax()`` macro, so no page asks for the CDN.

Formulas come from students too, and ``latex2mathml`` copies ``\\text{<script>...}`` and ``\\href{...}`` into
its output.  Its MathML is therefore parsed as XML and kept only when every element and attribute is on the
allow-list below; anything else, or TeX it cannot convert, shows as the escaped TeX it was written as.

Rendering is bounded too, since a formula is a program: ``latex2mathml`` expands ``\newcommand`` into as many
copies as the formula calls it, so an 82 KB answer once became a 58.8 MB page built in 126 s.  No macro
definitions (no answer needs one), at most ``MAX_TEX`` characters a formula and ``MAX_MATHML`` of MathML out of it,
and per cell (a written answer) at most ``CELL_MATHML`` characters of MathML and ``CELL_SECONDS`` of converting;
past any bound the TeX shows as text.  The lab's own formulas are far inside them (the test measures it).
"""
from __future__ import annotations

import html
import os
import re
import time
import xml.etree.ElementTree as ElementTree

import nbgrader
from jinja2 import pass_context
from latex2mathml.converter import convert
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath

# nbconvert looks for a template's files in these folders first: ours (the macro), then nbgrader's (the pages).
TEMPLATES = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "templates")
NBGRADER_TEMPLATES = os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates")
MATHML = "http://www.w3.org/1998/Math/MathML"
# MathML Core's presentation elements (what browsers draw), without ``semantics``/``annotation`` (alternative
# content) and ``maction``.
MATHML_TAGS = frozenset({
    "math", "mi", "mn", "mo", "ms", "mspace", "mtext", "menclose", "merror", "mfrac", "mover", "mpadded",
    "mphantom", "mroot", "mrow", "msqrt", "mstyle", "msub", "msubsup", "msup", "mtable", "mtd", "mtr", "munder",
    "munderover", "mmultiscripts", "mprescripts", "none",
})
# Layout attributes only: no href, style, class, id or event handler, no colour or size (white-on-white or
# page-sized text would hide the rest of the page), no voffset (which moves a formula over its neighbours).
MATHML_ATTRIBUTES = frozenset({
    "display", "displaystyle", "scriptlevel", "mathvariant", "stretchy", "fence", "separator", "form",
    "symmetric", "largeop", "movablelimits", "accent", "accentunder", "linethickness", "columnalign", "rowalign",
    "columnlines", "rowlines", "frame", "notation", "columnspan", "rowspan",
    *(LENGTH_ATTRIBUTES := {"width", "height", "depth", "lspace", "rspace", "minsize", "maxsize", "columnspacing",
                            "rowspacing"}),
})
# Lengths stay between a negative thin space and a few ems: spacing, not a way to cover or push away the page.
EM_PER_UNIT = {"em": 1.0, "ex": 0.5, "pt": 0.1, "px": 1 / 16, "mm": 0.28, "": 1.0}
NAMED_SPACES = {"negativethinmathspace": -1 / 6, "thinmathspace": 1 / 6, "mediummathspace": 2 / 9,
                "thickmathspace": 5 / 18}
LENGTH = re.compile(r"(-?\d*\.?\d+)(em|ex|pt|px|mm|)")
LENGTH_RANGE_EM = (-0.5, 4.0)
ElementTree.register_namespace("", MATHML)
MAX_TEX = 1_000  # characters of one formula (the lab's longest: about 150)
MAX_MATHML = 20_000  # characters of MathML from one formula (the lab's largest: about 1,300)
CELL_MATHML = 200_000  # characters of MathML in one cell (the lab's richest cell: about 3,500; all its prose: 21,500)
CELL_SECONDS = 2.0  # of converting in one cell
MACRO_DEFINITION = re.compile(r"\\(?:(?:re)?newcommand|providecommand|newenvironment|renewenvironment|[gex]?def|let"
                              r"|DeclareMathOperator)(?![A-Za-z])")


def _short_lengths(value: str) -> bool:
    """True for one or more lengths (``0.278em``, ``0em 2em``, a named space), each within LENGTH_RANGE_EM."""
    for word in value.split() or [""]:
        match = LENGTH.fullmatch(word)
        ems = NAMED_SPACES.get(word) if match is None else float(match[1]) * EM_PER_UNIT[match[2]]
        if ems is None or not LENGTH_RANGE_EM[0] <= ems <= LENGTH_RANGE_EM[1]:
            return False
    return True


def _allowed(element: ElementTree.Element) -> bool:
    namespace, _, tag = element.tag.rpartition("}")
    return (namespace == "{" + MATHML and tag in MATHML_TAGS
            and all(name in MATHML_ATTRIBUTES and (name not in LENGTH_ATTRIBUTES or _short_lengths(value))
                    for name, value in element.attrib.items())
            and all(_allowed(child) for child in element))


def tex_to_mathml(tex: str, display: bool) -> str | None:
    """The MathML of ``tex`` when it converts to allowed markup only, within the bounds, else None (the caller shows
    the TeX)."""
    if len(tex) > MAX_TEX or MACRO_DEFINITION.search(tex):
        return None
    try:
        mathml = convert(tex, display="block" if display else "inline")
        root = ElementTree.fromstring(mathml)
    except Exception:  # noqa: BLE001 (latex2mathml raises many types on bad TeX; all mean "show the TeX")
        return None
    if len(mathml) > MAX_MATHML or not _allowed(root):
        return None
    root.set("alttext", tex.strip())  # the formula's source, its text alternative (escaped as any attribute value)
    return ElementTree.tostring(root, encoding="unicode", short_empty_elements=True)


class MathMLRenderer(IPythonRenderer):
    """nbconvert's markdown renderer with formulas as MathML instead of delimited TeX left for MathJax; one renderer
    renders one cell, within the cell's bounds (``CELL_MATHML``, ``CELL_SECONDS``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.mathml_left, self.seconds_left = CELL_MATHML, CELL_SECONDS

    def _math(self, tex: str, display: bool, written: str) -> str:
        mathml = None
        if self.mathml_left > 0 and self.seconds_left > 0:
            start = time.process_time()
            mathml = tex_to_mathml(tex, display)
            self.seconds_left -= time.process_time() - start
            self.mathml_left -= len(mathml or "")
        return mathml if mathml and self.mathml_left >= 0 else html.escape(written, quote=False)

    def block_math(self, body: str) -> str:
        return self._math(body, True, f"$${body}$$")

    def inline_math(self, body: str) -> str:
        return self._math(body, False, f"${body}$")

    def latex_environment(self, name: str, body: str) -> str:
        written = f"\\begin{{{name}}}{body}\\end{{{name}}}"
        return self._math(written, True, written)


@pass_context
def markdown2html(context, source: str) -> str:
    """nbconvert's ``HTMLExporter.markdown2html`` (attachments, image paths), formulas as MathML."""
    attachments = context.get("cell", {}).get("attachments", {})
    path = context.get("resources", {}).get("metadata", {}).get("path", "")
    return MarkdownWithMath(renderer=MathMLRenderer(escape=False, attachments=attachments, path=path)).render(source)
