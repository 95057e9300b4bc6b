"""Student HTML never runs in the instructor's browser.

The formgrader's Manual Grading page and the feedback HTML render a student's markdown cells and cell outputs
as live HTML, under the instructor's Jupyter session: a ``<script>`` or an ``onerror=`` there can call the
Jupyter REST API (write files, open terminals).  ``SanitizeStudentContent`` cleans a notebook before any of
them renders it (``nbgrader_config.py`` runs it at the end of autograding and again before feedback):

* markdown cells (and ``text/markdown`` outputs) are rendered by nbconvert's own markdown renderer, the one
  the formgrader uses, and the HTML checked against an allow-list (bleach, through nbconvert's
  ``SanitizeHTML``).  A cell with nothing to remove keeps its source untouched, so prose, ``<`` and ``>`` in
  backticks and LaTeX read exactly as written; a cell with something to remove is replaced by its cleaned
  rendering, one HTML block that renders to the same page minus what was removed (disallowed tags show as
  inert text, so the grader sees what was tried);
* outputs keep only ``text/plain``, ``text/latex``, ``image/png``, ``image/jpeg`` and cleaned ``text/html``
  (tables, basic formatting); scripts, SVG, widget views, JSON and every other type are dropped, with a
  ``text/plain`` note when nothing else is left; stream and error outputs are plain text already;
* an image's metadata keeps ``width`` and ``height`` only as positive numbers (nbconvert's classic template writes
  them unquoted), ``unconfined`` as a boolean and ``alt`` as text; a cell's ``alt`` only as text;
* execution counts are the grader's, 1, 2, 3 ... in the order the cells ran (``renumber``): the kernel chooses
  them, and the pages print them;
* the notebook's widget state (``metadata.widgets``) is dropped.

Kept markup is an allow-list: formatting, lists, headings, tables, code (pygments' classes only), links to
http(s)/mailto/#anchors and to the lab's notebooks by bare name (followed only when clicked), images only
inline as ``data:image/png`` or ``data:image/jpeg``: nothing on a page fetches a URL a student chose.
No ``style`` attribute or element, no ``id`` but nbconvert's heading anchors (and none that nbgrader's pages
use), no event handlers, iframes, objects, forms, SVG or MathML.  (Formulas written as TeX stay TeX here; the
pages typeset them as MathML when they are built, through their own allow-list: ``grader/course/mathml.py``.)
"""
from __future__ import annotations

import hashlib
import html
import json
import re
from pathlib import Path
from urllib.parse import urlsplit

import bleach
import mistune
import nbconvert
import pygments
import tinycss2
from bleach.css_sanitizer import CSSSanitizer
from nbconvert.filters.markdown_mistune import IPythonRenderer, MarkdownWithMath
from nbconvert.preprocessors.sanitize import SanitizeHTML  # not re-exported by nbconvert.preprocessors in 7.17
from pygments.token import STANDARD_TYPES
from traitlets import Bool, Set, Unicode, default

from grader.course.known_clean import KnownClean

HEADINGS = frozenset({"h1", "h2", "h3", "h4", "h5", "h6"})
KEPT_TAGS = HEADINGS | {
    "a", "abbr", "b", "blockquote", "br", "caption", "code", "dd", "del", "div", "dl", "dt", "em", "hr", "i",
    "img", "ins", "kbd", "li", "ol", "p", "pre", "q", "s", "samp", "small", "span", "strong", "sub", "sup",
    "table", "tbody", "td", "tfoot", "th", "thead", "tr", "u", "ul", "var",
}
KEPT_IMAGE_TYPES = ("image/png", "image/jpeg")
# Classes only where nbconvert's own rendering puts them: highlighted code, heading anchors, pandas tables;
# anything else could borrow the page's CSS (bootstrap's hidden, navbar-fixed-top ...) to hide or overlay text.
KEPT_CLASSES = {
    "span": frozenset(STANDARD_TYPES.values()) - {""},
    "div": frozenset({"highlight"}),
    "a": frozenset({"anchor-link"}),
    "table": frozenset({"dataframe"}),
}
KEPT_ATTRIBUTES = {
    "a": {"href", "title"},
    "abbr": {"title"},
    "img": {"src", "alt", "title", "width", "height"},
    "table": {"border"},
    "td": {"colspan", "rowspan", "align"},
    "th": {"colspan", "rowspan", "align"},
    **{heading: {"id"} for heading in HEADINGS},
}
LINK_SCHEMES = frozenset({"http", "https", "mailto"})
DATA_IMAGE_PREFIXES = ("data:image/png;", "data:image/jpeg;")  # what matplotlib draws; it loads nothing
LAB_NOTEBOOK = re.compile(r"\d\d_[a-z0-9_]+\.ipynb")  # the notebooks' links to the previous and next part
# Ids of nbgrader's own page elements; the formgrader's script finds a cell's score box by its grade_id
# ($("#" + grade_id)), so a student heading with that id, earlier on the page, would take the box's place.
PAGE_IDS = frozenset({"notebook", "notebook-container", "statusmessage", "toc", "top"})


# This module's code and the versions of what renders and cleans: a source found clean is known clean only as long
# as none of them changed (grader.course.known_clean).
_CODE_VERSION = hashlib.sha256(json.dumps([Path(__file__).read_text(encoding="utf-8"), bleach.__version__,
                                           mistune.__version__, nbconvert.__version__, pygments.__version__,
                                           tinycss2.__version__]).encode()).hexdigest()


def _is_safe_link(url: str) -> bool:
    """A link the grader may follow by clicking: the web, mail, an anchor of the page, or another notebook of the lab
    (a bare file name: relative to the page, it reaches nothing but a missing page)."""
    url = html.unescape(url).strip()
    return url.startswith("#") or urlsplit(url).scheme.lower() in LINK_SCHEMES or bool(LAB_NOTEBOOK.fullmatch(url))


def _is_safe_image(src: str) -> bool:
    """An image that loads nothing but itself: embedded PNG or JPEG.  Any URL, a relative one too, would be fetched
    by the instructor's browser as the page renders: a tracking pixel that tells the student when and from where
    the grading happened, or a GET with the instructor's cookies (``/formgrader/submissions/<id>/x``)."""
    return html.unescape(src).strip().lower().startswith(DATA_IMAGE_PREFIXES)


def kept_attribute(tag: str, name: str, value: str) -> bool:
    """bleach's attribute filter: the allow-list above, with URLs and classes checked by value (bleach passes
    values with their character references undecoded: they are decoded here, as a browser would)."""
    if name == "class":
        return bool(value.split()) and set(value.split()) <= KEPT_CLASSES.get(tag, frozenset())
    if name not in KEPT_ATTRIBUTES.get(tag, ()):
        return False
    if name == "href":
        return _is_safe_link(value)
    if name == "src":
        return _is_safe_image(value)
    return True


MAX_IMAGE_SIDE = 10_000  # pixels: a figure's width or height in any notebook of the lab is far below
MAX_ALT = 2_000  # characters of an image's text alternative: a figure's summary is one sentence or a few


def image_metadata(metadata: dict) -> dict:
    """What an image's metadata may say, each value by its type: ``width`` and ``height`` as positive numbers
    (nbconvert's templates write them unquoted: ``width=1 onerror=...`` would be an attribute of its own),
    ``unconfined`` as a boolean, ``alt`` as text (escaped where written)."""
    kept = {}
    for side in ("width", "height"):
        value = metadata.get(side)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value <= MAX_IMAGE_SIDE:
            kept[side] = int(value) if float(value).is_integer() else round(float(value), 2)
    if isinstance(metadata.get("unconfined"), bool):
        kept["unconfined"] = metadata["unconfined"]
    if isinstance(metadata.get("alt"), str):
        kept["alt"] = metadata["alt"][:MAX_ALT]
    return kept


def renumber(notebook) -> None:
    """Execution counts 1, 2, 3 ... in the order the code cells ran, whatever the kernel answered: the count is the
    kernel's to choose, and the pages print it beside each cell (a channel for what the kernel read)."""
    count = 0
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        ran = cell.get("execution_count") is not None
        count += ran
        cell.execution_count = count if ran else None
        for output in cell.get("outputs", []):
            if output.get("output_type") == "execute_result":
                output.execution_count = count if ran else None


def nbgrader_ids(notebook) -> frozenset[str]:
    """The element ids nbgrader's formgrade and feedback pages give the notebook's graded cells, and their own."""
    grade_ids = {cell.metadata.get("nbgrader", {}).get("grade_id") for cell in notebook.cells} - {None}
    return PAGE_IDS | {f"{prefix}{grade_id}{suffix}" for grade_id in grade_ids
                       for prefix, suffix in (("", ""), ("", "-comment"), ("", "_extra_credit"), ("comment-", ""))}


# Characters of one markdown cell (or markdown output) that the pages render.  Rendering and cleaning grow faster than
# the text: a 1 MB markdown table in a written answer took 217 s to grade, twice, outside the student's cgroup, and held
# up the class's feedback (issue 48); an honest answer is a few kB.
MAX_RENDERED = 64 * 1024


def _preformatted(text: str) -> str:
    """``text`` as one block of escaped preformatted text (on one line: a blank line would end the block)."""
    return "<pre>" + html.escape(text).replace("\r", "").replace("\n", "&#10;") + "</pre>"


def render_markdown(source: str, attachments: dict | None = None) -> str:
    """Markdown to HTML as nbconvert's HTMLExporter (hence the formgrader and the feedback) renders it."""
    return MarkdownWithMath(renderer=IPythonRenderer(escape=False, attachments=attachments or {})).render(source)


def _parsed(cleaner: bleach.Cleaner, markup: str) -> list[tuple]:
    """The tokens ``cleaner``'s parser makes of ``markup``, entities left as written, runs of text merged."""
    tokens: list[tuple] = []
    for token in cleaner.walker(cleaner.parser.parseFragment(markup)):
        if token["type"] in ("Characters", "SpaceCharacters"):
            if tokens and tokens[-1][0] == "text":
                tokens[-1] = ("text", tokens[-1][1] + token["data"])
            else:
                tokens.append(("text", token["data"]))
        else:
            tokens.append((token["type"], token.get("namespace"), token.get("name"), repr(token.get("data"))))
    return tokens


class SanitizeStudentContent(SanitizeHTML):
    """Preprocessor: nbconvert's ``SanitizeHTML`` with a strict allow-list, markdown kept readable, output
    types and metadata filtered, widget state dropped (see the module's docstring)."""

    # nbconvert preprocessors are off by default; nbgrader registers the classes in its lists without enabling
    enabled = Bool(True).tag(config=True)

    @default("tags")
    def _kept_tags(self):
        return sorted(KEPT_TAGS)

    @default("attributes")
    def _kept_attributes(self):
        return kept_attribute

    @default("safe_output_keys")
    def _kept_output_types(self):
        return {"text/plain", "text/latex", *KEPT_IMAGE_TYPES}

    @default("sanitized_output_types")
    def _cleaned_output_types(self):
        return {"text/html"}

    markdown_output_types = Set({"text/markdown"}, help="Output types cleaned like markdown cells").tag(config=True)
    known_clean_folder = Unicode("", help=(
        "A folder of the course's, the instructor's alone, where the markdown cells found clean are remembered (by "
        "hash, grader.course.known_clean) for the next submissions: the instructions every submission carries are "
        "rendered once, not once a student.  Empty: nothing is remembered.")).tag(config=True)

    def preprocess(self, nb, resources):
        nb.metadata.pop("widgets", None)  # widget state: rendered by the widget manager's scripts
        renumber(nb)
        self.taken_ids = nbgrader_ids(nb)
        self._known = KnownClean(Path(self.known_clean_folder) if self.known_clean_folder else None,
                                 self._cleanliness_key())
        try:
            return super().preprocess(nb, resources)
        finally:
            self._known.save()

    def _cleanliness_key(self) -> str:
        """What besides a source decides whether it is clean: this module, the libraries that render and clean,
        the allow-lists as configured and the ids the notebook's graded cells take."""
        attributes = getattr(self.attributes, "__qualname__", None) or repr(self.attributes)
        return json.dumps([_CODE_VERSION, sorted(self.tags), attributes, sorted(self.styles), self.strip,
                           self.strip_comments, sorted(self.taken_ids)])

    def preprocess_cell(self, cell, resources, cell_index):
        comment = cell.metadata.get("nbgrader", {}).get("comment")
        if comment:  # the grader's comment, put there by GetGrades: rendered as markdown by the feedback template
            cell.metadata.nbgrader.comment = self.clean_markdown(comment)
        if "alt" in cell.metadata and not isinstance(cell.metadata.alt, str):  # a cell's alt: the images' fallback
            del cell.metadata["alt"]
        if cell.cell_type != "markdown":
            return super().preprocess_cell(cell, resources, cell_index)
        attachments = {name: {mime: bundle[mime] for mime in KEPT_IMAGE_TYPES if mime in bundle}
                       for name, bundle in cell.get("attachments", {}).items()}
        attachments = {name: bundle for name, bundle in attachments.items() if bundle}
        if "attachments" in cell:
            cell.attachments = attachments
        if not attachments and cell.source in self._known:
            return cell, resources  # found clean before, in this notebook's sanitizing of another submission
        cleaned = self.clean_markdown(cell.source, attachments)
        if not attachments and cleaned == cell.source:
            self._known.add(cleaned)
        cell.source = cleaned
        return cell, resources

    def sanitize_code_outputs(self, outputs):
        for output in outputs:
            if output.output_type not in ("display_data", "execute_result"):
                continue  # stream and error outputs are plain text, escaped by every renderer
            markdown = {mime: output.data.pop(mime) for mime in self.markdown_output_types if mime in output.data}
            dropped = sorted(set(output.data) - self.safe_output_keys - self.sanitized_output_types)
            super().sanitize_code_outputs([output])
            output.data.update({mime: self.clean_markdown(text) for mime, text in markdown.items()})
            output.metadata = {mime: image_metadata(output.metadata[mime])
                               for mime in KEPT_IMAGE_TYPES if isinstance(output.metadata.get(mime), dict)}
            output.metadata = {mime: kept for mime, kept in output.metadata.items() if kept}
            if dropped and not output.data:
                output.data["text/plain"] = f"[output removed by the grader's sanitizer: {', '.join(dropped)}]"
        return outputs

    taken_ids: frozenset[str] = PAGE_IDS  # and the notebook's grade_ids, once preprocess has seen it
    _known = KnownClean(None, "")  # the sources found clean (preprocess reads them for the notebook's taken_ids)

    def _kept_attribute(self, tag: str, name: str, value: str) -> bool:
        return self.attributes(tag, name, value) and not (name == "id" and html.unescape(value) in self.taken_ids)

    def cleaner(self) -> bleach.Cleaner:
        """bleach with this preprocessor's allow-lists; ``data:`` URLs reach ``kept_attribute``, which admits
        only images."""
        return bleach.Cleaner(tags=self.tags, attributes=self._kept_attribute, protocols=LINK_SCHEMES | {"data"},
                              strip=self.strip, strip_comments=self.strip_comments,
                              css_sanitizer=CSSSanitizer(allowed_css_properties=self.styles))

    def sanitize_html_tags(self, html_str):
        return self.cleaner().clean(html_str)

    def is_clean(self, html_text: str) -> bool:
        """True when the allow-list removes nothing: the markup parses (as bleach's html5lib parses it, like a
        browser) to the same elements, attributes and text as its cleaned copy.  Any tag bleach refuses parses
        as text holding a literal ``<``, which a cleaned copy never holds, so it always makes a difference."""
        cleaner = self.cleaner()
        cleaned = cleaner.clean(html_text)
        # the same text parses the same: the two parses only decide when bleach wrote the markup another way
        # (all 133 markdown cells of the solutions come back unchanged: 0.25 s a student, issue 53)
        return cleaned == html_text or _parsed(cleaner, html_text) == _parsed(cleaner, cleaned)

    def clean_markdown(self, source: str, attachments: dict | None = None) -> str:
        """The source itself when its rendering is clean; else one HTML block holding the cleaned rendering
        (on one line: a blank line would end the block); else, should that still not render clean, the
        source as escaped preformatted text (also when it does not render at all, e.g. a missing attachment,
        which would otherwise break the formgrader's page).  A source over ``MAX_RENDERED`` characters is never
        rendered: its beginning shows as escaped text, with a note."""
        if len(source) > MAX_RENDERED:
            return _preformatted(f"[This answer is {len(source):,} characters long, over the {MAX_RENDERED:,} a page "
                                 f"renders: its first {MAX_RENDERED:,} are shown as plain text. The whole answer is in "
                                 f"the submitted notebook.]\n\n" + source[:MAX_RENDERED])
        as_text = _preformatted(source)
        try:
            rendered = render_markdown(source, attachments)
        except Exception:  # noqa: BLE001 (whatever the renderer chokes on, the escaped text is safe)
            return as_text
        if self.is_clean(rendered):
            return source
        one_line = self.sanitize_html_tags(rendered).replace("\r", "").replace("\n", "&#10;")
        block = f"<div>{one_line}</div>"
        return block if self.is_clean(render_markdown(block)) else as_text
