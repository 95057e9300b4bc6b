"""Student HTML never runs in the instructor's browser (sanitize_student_content.py), in a real browser.

The corpus case ``script_injection`` (notebook 01 right; its written answer and the outputs of its code carry
``<script>``, ``<img onerror>``, SVG with script and ``javascript:`` links, each setting ``window.__pwned`` and
``document.title`` and PUTting a file into the course root through the Jupyter REST API, and markup that fetches a
URL of the student's choosing by itself: images, srcset, CSS, ``<link>``, ``<base>``...) is autograded and its
feedback generated in a temporary course.  A Jupyter server runs on that course (nbgrader's formgrader finds it
there), and headless Chromium, logged in with the server's token as an instructor is, opens the Manual Grading
page and the feedback HTML.  Each page must show the student's answer and plots, and nothing of the payload may
run: no marker set, no request to the REST API or to a URL the submission names (every request the page makes
is recorded), no file in the course root.  A control serves the unsanitized
answer from the server's origin and must see all three happen, so these checks can fail; so can the unit
tests (no browser), which find the payload live in nbconvert's HTML of the raw notebook and gone after the
sanitizer.

Chromium is Debian's (``make browser``); without it the browser tests skip, except under CI (``CI=true``).
"""
from __future__ import annotations

import copy
import os
import re
import secrets
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlsplit

import nbformat
import pytest
from nbconvert.exporters import HTMLExporter
from nbformat.v4 import new_output

from grader.testing import corpus
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT
from grader.nbgrader_plugins.sanitize_student_content import SanitizeStudentContent, render_markdown

from conftest import run_grader, page_of, small_course, submission_id
from grader.testing import free_port

CASE = "script_injection"
NB1 = corpus.NB1
MARKDOWN_VECTORS = {"md_script", "md_img_onerror", "md_svg", "md_svg_script", "md_javascript_link"}
PNG_1X1 = ("iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg==")
slow = pytest.mark.slow


# ------------------------------------------------------------------ no browser: nbconvert's HTML, raw and sanitized

class LivePayload(HTMLParser):
    """What of the payload an HTML page would run: attributes and scripts holding ``__pwned``, ``javascript:``
    URLs, SVG, widget state.  Escaped text is data here, as in a browser, so it does not count."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.found: list[str] = []
        self._in_script = self._in_style = False
        self.feed(html)
        self.close()

    def handle_starttag(self, tag, attrs):
        self._in_script, self._in_style = tag == "script", tag == "style"
        if tag == "svg":
            self.found.append("<svg>")
        for name, value in attrs:
            if corpus.CHOSEN_URL_MARK in (value or "") and (tag, name) != ("a", "href"):  # a link waits for a click
                self.found.append(f"<{tag} {name}=chosen URL>")
            if "__pwned" in (value or "") or (value or "").strip().lower().startswith("javascript:"):
                self.found.append(f"<{tag} {name}=...>")
            if tag == "script" and name == "type" and "widget" in (value or ""):
                self.found.append(f"<script type={value}>")

    def handle_endtag(self, tag):
        if tag in ("script", "style"):
            self._in_script = self._in_style = False

    def handle_data(self, data):
        if self._in_script and "__pwned" in data:
            self.found.append("<script>__pwned...</script>")
        if self._in_style and corpus.CHOSEN_URL_MARK in data:
            self.found.append("<style>chosen URL</style>")


def _case_notebook(folder: Path) -> nbformat.NotebookNode:
    """The case's notebook 01 as a renderer gets it: the hostile written answer, the outputs its code displays
    (attached here without running it, with a plot and widget state), as nbgrader would have stored them."""
    corpus.build(folder, REPO_ROOT, [CASE])
    notebook = nbformat.read(folder / CASE / ASSIGNMENT / f"{NB1}.ipynb", as_version=4)
    _cell(notebook, "mask_answer").outputs = [
        new_output("display_data", data={"text/html": corpus.INJECTED_HTML_OUTPUT, "text/plain": "<HTML>"}),
        new_output("display_data", data={"image/svg+xml": corpus.injected_svg("out_svg"), "text/plain": "<SVG>"}),
        new_output("display_data", data={"application/javascript": corpus.injected_js("out_javascript")}),
        new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "m"}}),
        new_output("display_data", data={"image/png": PNG_1X1, "text/plain": "<Figure>"}),
        *[new_output("display_data", data=data, metadata=metadata)
          for data, metadata in corpus.INJECTED_IMAGE_METADATA.values()],
    ]
    notebook.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}}}
    return notebook


def _cell(notebook, grade_id: str):
    return next(cell for cell in notebook.cells if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def _html(notebook) -> str:
    return HTMLExporter(template_name="classic").from_notebook_node(notebook)[0]


@pytest.mark.filterwarnings("ignore:Your element with mimetype")  # nbconvert, on the raw widget view
def test_the_payload_is_live_in_nbconvert_html_and_gone_after_the_sanitizer(tmp_path):
    raw = _case_notebook(tmp_path)
    live = LivePayload(_html(raw)).found
    for construct in ("<script>__pwned...</script>", "<img onerror=...>", "<svg>", "<a href=...>",
                      "<script type=application/vnd.jupyter.widget-state+json>", "<img src=chosen URL>",
                      "<img srcset=chosen URL>", "<div style=chosen URL>", "<link href=chosen URL>",
                      "<base href=chosen URL>",
                      "<meta content=chosen URL>", "<style>chosen URL</style>",
                      "<table background=chosen URL>", "<video poster=chosen URL>"):
        assert construct in live, f"the raw notebook's HTML should carry {construct} live: the test proves nothing"

    cleaned, _ = SanitizeStudentContent().preprocess(copy.deepcopy(raw), {})
    html = _html(cleaned)
    assert LivePayload(html).found == []
    assert corpus.INJECTED_TEXT in html and 'src="data:image/png;base64,' in html  # the answer and the plot stay
    assert "<th>j &lt;= i</th>" in html and "widget-state" not in html
    answer = render_markdown(_cell(cleaned, "written_mask_pe").source)
    assert "<code>j &lt;= i</code>" in answer and "&amp;" not in answer  # reads "j <= i", not a visible "&lt;"


def test_image_metadata_is_kept_as_numbers_and_text_only(tmp_path):
    """Issue 81: nbconvert writes width= and height= unquoted, so a value the kernel chose became an event handler of
    its own; each is kept only as a positive number, alt only as text, and the page then holds no handler."""
    raw = _case_notebook(tmp_path)
    images = [output for output in _cell(raw, "mask_answer").outputs if output.metadata]
    live = LivePayload(_html(raw)).found
    assert "<img onload=...>" in live, "the raw page should run the width's handler: the test proves nothing"
    cleaned, _ = SanitizeStudentContent().preprocess(copy.deepcopy(raw), {})
    assert LivePayload(_html(cleaned)).found == []
    kept = [output.metadata for output in _cell(cleaned, "mask_answer").outputs if output.metadata]
    assert len(images) == 2 and kept == []  # a width of text, an alt of a number, a height of text: all dropped
    fair = new_output("display_data", data={"image/png": PNG_1X1}, metadata={"image/png": {
        "width": 640, "height": 480.5, "unconfined": True, "alt": "a figure", "onload": "x"}})
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("plot()", outputs=[fair])])
    cleaned, _ = SanitizeStudentContent().preprocess(notebook, {})
    assert cleaned.cells[0].outputs[0].metadata == {"image/png": {"width": 640, "height": 480.5, "unconfined": True,
                                                                  "alt": "a figure"}}
    for bad in ("640", -1, 0, True, float("nan"), 10 ** 9, [1], {"a": 1}):
        output = new_output("display_data", data={"image/png": PNG_1X1}, metadata={"image/png": {"width": bad}})
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("plot()", outputs=[output])])
        cleaned, _ = SanitizeStudentContent().preprocess(notebook, {})
        assert cleaned.cells[0].outputs[0].metadata == {}, bad


def test_execution_counts_are_the_graders_not_the_kernels():
    """Issue 81: the count beside each cell is the kernel's to choose (``get_ipython().execution_count = ...``) and
    the pages print it; the sanitizer numbers the cells that ran 1, 2, 3 ..., their results with them."""
    cells = [nbformat.v4.new_code_cell("a", execution_count=corpus.CHOSEN_EXECUTION_COUNT),
             nbformat.v4.new_markdown_cell("text"),
             nbformat.v4.new_code_cell("b", execution_count=None),
             nbformat.v4.new_code_cell("c", execution_count=5, outputs=[
                 new_output("execute_result", data={"text/plain": "1"}, execution_count=99)])]
    cleaned, _ = SanitizeStudentContent().preprocess(nbformat.v4.new_notebook(cells=cells), {})
    counts = [cell.get("execution_count") for cell in cleaned.cells]
    assert counts == [1, None, None, 2] and cleaned.cells[3].outputs[0].execution_count == 2
    assert str(corpus.CHOSEN_EXECUTION_COUNT) not in _html(cleaned)


def test_fair_answers_keep_their_markdown_untouched():
    """Every markdown cell of the solutions (prose, LaTeX, `<`/`>` in code spans) is rendered clean, so kept."""
    for path in sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        notebook = nbformat.read(path, as_version=4)
        before = [cell.source for cell in notebook.cells if cell.cell_type == "markdown"]
        SanitizeStudentContent().preprocess(notebook, {})
        assert [cell.source for cell in notebook.cells if cell.cell_type == "markdown"] == before, path.name


def test_the_course_config_sanitizes_after_autograding_and_before_feedback():
    from nbgrader.preprocessors import ClearHiddenTests
    from grader.nbgrader_plugins.check_cell_metadata_precompiled import CheckCellMetadataPrecompiled
    from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    autograde = list(config.Autograde.autograde_preprocessors)
    assert autograde.index(SanitizeStudentContent) > autograde.index(CheckCellMetadataPrecompiled)
    feedback = list(config.GenerateFeedback.preprocessors)
    assert feedback.index(ClearHiddenTests) < feedback.index(SanitizeStudentContent) < feedback.index(
        CSSHTMLHeaderPreprocessor)
    assert SanitizeStudentContent().enabled  # nbgrader registers classes without enabling them


# ------------------------------------------------------------------------------------------- in Chromium

@pytest.fixture(scope="module")
def injected_course(chromium, tmp_path_factory) -> Path:
    """A temporary course in which the case is autograded (sanitizer included) and its feedback generated; after
    the Chromium check, so that a machine without a browser skips before grading."""
    root = small_course(tmp_path_factory.mktemp("injected_course"), [CASE])
    # a plot of the student's own (the notebook's plots are demos, which grading leaves out: grader.course.demos), before
    # the first hidden test, so that the feedback shows it too
    path = root / "submitted" / CASE / ASSIGNMENT / f"{NB1}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    after = next(index for index, cell in enumerate(notebook.cells)
                 if cell.metadata.get("nbgrader", {}).get("grade_id") == "mask_answer")
    notebook.cells.insert(after + 1, nbformat.v4.new_code_cell(
        "plots.plot_mask(generate_square_subsequent_mask(8))\nplt.show()"))
    nbformat.write(notebook, path)
    run_grader(root, "autograde")
    run_grader(root, "feedback", "--force")  # written answers stay ungraded here: test_feedback_waits_for_manual_grades
    return root


@dataclass
class Jupyter:
    url: str
    token: str
    root: Path


@pytest.fixture(scope="module")
def jupyter(injected_course, tmp_path_factory):
    """A Jupyter server started at the course root (nbgrader's formgrader reads nbgrader_config.py from there) on
    127.0.0.1, a free port and a random token, with private config and runtime folders; stopped, its whole
    process group, at the end."""
    private = tmp_path_factory.mktemp("jupyter")
    port, token = free_port(), secrets.token_hex(16)
    command = [str(Path(sys.executable).parent / "jupyter-server"), "--no-browser", "--ip=127.0.0.1", f"--port={port}",
               "--port-retries=0", f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={injected_course}"]
    if os.geteuid() == 0:
        command.append("--allow-root")
    env = {**os.environ, "JUPYTER_CONFIG_DIR": str(private / "config"), "JUPYTER_RUNTIME_DIR": str(private / "runtime")}
    log = private / "server.log"
    with open(log, "wb") as output:
        server = subprocess.Popen(command, cwd=injected_course, env=env, stdout=output, stderr=subprocess.STDOUT,
                                  start_new_session=True)
    try:
        url = f"http://127.0.0.1:{port}"
        _wait_until_up(server, f"{url}/api/status", token, log)
        yield Jupyter(url, token, injected_course)
    finally:
        _stop(server)


def _wait_until_up(server: subprocess.Popen, status_url: str, token: str, log: Path, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"the Jupyter server exited ({server.returncode}):\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(urllib.request.Request(status_url, headers={"Authorization": f"token {token}"}),
                                        timeout=2):
                return
        except OSError:
            time.sleep(0.3)
    pytest.fail(f"the Jupyter server did not answer in {seconds:.0f} s:\n{log.read_text()[-3000:]}")


def _stop(server: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
            server.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


@contextmanager
def instructor_page(browser, jupyter: Jupyter, name: str):
    """A page logged in as the instructor logs in (the server's login form, the token as password), and the
    requests made after the login; a failing step leaves a screenshot (``page_of``)."""
    with page_of(browser, name) as page:
        page.goto(f"{jupyter.url}/login?next=%2Fformgrader")
        page.fill("input[name=password]", jupyter.token)
        page.click("[type=submit]")
        page.wait_for_url(re.compile(r"/formgrader/"))
        requests: list = []
        page.context.on("request", lambda request: requests.append(request))  # a bound method cannot be a handler
        yield page, requests


PAGE_STATE = """() => ({
    marker: window.__pwned === undefined ? null : String(window.__pwned),
    title: document.title,
    attributes: [...document.querySelectorAll('*')].flatMap(element => [...element.attributes]
        .filter(attribute => attribute.value.includes('__pwned'))
        .map(attribute => element.tagName + ' ' + attribute.name)),
    scripts: [...document.scripts].filter(script => script.textContent.includes('__pwned')).length,
    plots: [...document.querySelectorAll('img[src^="data:image/png"]')].map(image => image.naturalWidth),
})"""


def _api_requests(requests) -> list[str]:
    """Requests to the Jupyter REST API (contents, kernels, sessions, terminals), not the formgrader's own."""
    return [f"{r.method} {r.url}" for r in requests if urlsplit(r.url).path.startswith(("/api/", "/terminals"))]


def _written(root: Path) -> set[str]:
    return {path.name for path in root.glob(corpus.INJECTED_FILE.format(vector="*"))}


def _click_the_links(page) -> None:
    """The javascript: vectors run only when clicked: click every link the student labelled."""
    for link in page.locator("a", has_text="my sources").all():
        link.click(timeout=5000)
    page.wait_for_timeout(700)  # time for a handler or a fetch that did start to finish


def _plots(root: Path, before_hidden_tests: bool) -> int:
    """The plots of the case's autograded notebook 01: all of them (what the instructor sees), or those of the cells
    before its first hidden test (what the feedback shows: grader.nbgrader_plugins.clear_outputs_after_hidden_tests)."""
    notebook = nbformat.read(root / "autograded" / CASE / ASSIGNMENT / f"{NB1}.ipynb", as_version=4)
    count = 0
    for cell in notebook.cells:
        if before_hidden_tests and "BEGIN HIDDEN TESTS" in cell.source:
            break
        count += sum("image/png" in output.get("data", {}) for output in cell.get("outputs", []))
    return count


def _assert_shows_the_submission(page, state: dict, plots: int) -> None:
    text = page.inner_text("body")
    assert corpus.INJECTED_TEXT in text, "the written answer is not on the page"
    assert "where j <= i and -inf where j > i" in text, "the answer's code spans do not read as written"
    assert f"{corpus.INJECTED_TEXT}, as a table" in text and page.locator("th", has_text="j <= i").count(), \
        "the HTML output (text and table) is not on the page"
    rendered = "\n".join(page.locator(".text_cell_render, .output_html").all_inner_texts())  # not the code
    assert "&lt;" not in rendered and "&amp;" not in rendered, "escaped markup shows as text"
    assert plots >= 1 and len(state["plots"]) == plots and min(state["plots"]) > 0, \
        f"the plots are not shown: {state['plots']} ({plots} expected)"
    assert f"[{str(corpus.CHOSEN_EXECUTION_COUNT)[:7]}" not in text, "a prompt shows the execution count the kernel chose"


def _chosen_requests(requests) -> list[str]:
    """Requests to a URL the submission chose (each of the case's vectors names one: ``corpus.chosen_urls``)."""
    return [f"{r.method} {r.url}" for r in requests if corpus.CHOSEN_URL_MARK in r.url]


def _assert_nothing_ran(state: dict, requests, root: Path) -> None:
    assert not _chosen_requests(requests), f"the page fetched URLs the student chose: {_chosen_requests(requests)}"
    assert state["marker"] is None and state["title"] != "pwned", f"a payload ran: {state}"
    assert not state["attributes"] and not state["scripts"], f"payload left live in the page: {state}"
    assert not _api_requests(requests), f"the page called the REST API: {_api_requests(requests)}"
    assert not _written(root), f"the page wrote {_written(root)} into the course root"


@slow
def test_the_manual_grading_page_shows_the_answer_and_runs_none_of_it(jupyter, browser, tmp_path):
    with instructor_page(browser, jupyter, "manual_grading") as (page, requests):
        page.goto(f"{jupyter.url}/formgrader/submissions/{submission_id(jupyter.root, CASE, NB1)}/")
        page.wait_for_load_state("networkidle")
        _click_the_links(page)
        state = page.evaluate(PAGE_STATE)
        assert page.locator("input.score#written_mask_pe").count() == 1, "not the Manual Grading form"
        _assert_shows_the_submission(page, state, _plots(jupyter.root, before_hidden_tests=False))
        _assert_nothing_ran(state, requests, jupyter.root)


@slow
def test_the_feedback_page_shows_the_answer_and_runs_none_of_it(jupyter, browser, tmp_path):
    feedback = jupyter.root / "feedback" / CASE / ASSIGNMENT / f"{NB1}.html"
    with instructor_page(browser, jupyter, "feedback") as (page, requests):
        page.goto(feedback.as_uri())
        page.wait_for_load_state("networkidle")
        _click_the_links(page)
        state = page.evaluate(PAGE_STATE)
        assert "Written answer" in page.inner_text("nav"), "not the feedback page (grader/templates/feedback)"
        _assert_shows_the_submission(page, state, _plots(jupyter.root, before_hidden_tests=True))
        _assert_nothing_ran(state, requests, jupyter.root)


@slow
def test_the_checks_see_an_unsanitized_answer_run(jupyter, browser, tmp_path):
    """The control: the submitted notebook rendered by nbconvert without the sanitizer, served from the server's
    origin as the formgrader served it, sets the markers, calls the REST API and writes a file per vector."""
    raw = _html(nbformat.read(jupyter.root / "submitted" / CASE / ASSIGNMENT / f"{NB1}.ipynb", as_version=4))
    probe = f"{jupyter.url}/formgrader/unsanitized-probe"
    expected = {corpus.INJECTED_FILE.format(vector=vector) for vector in MARKDOWN_VECTORS}
    try:
        with instructor_page(browser, jupyter, "control") as (page, requests):
            page.route(probe, lambda route: route.fulfill(status=200, content_type="text/html", body=raw))
            page.goto(probe)
            _click_the_links(page)
            deadline = time.monotonic() + 15
            while _written(jupyter.root) != expected and time.monotonic() < deadline:
                page.wait_for_timeout(200)
            state = page.evaluate(PAGE_STATE)
            assert state["marker"] == "1" and state["title"] == "pwned", state
            assert _api_requests(requests), "no REST API call seen"
            fetched = " ".join(_chosen_requests(requests))
            for vector in ("img_src", "img_relative", "img_srcset", "style_url", "link_stylesheet", "video_poster"):
                assert f"{corpus.CHOSEN_URL_MARK}-md-{vector}" in fetched, f"{vector} fetched nothing: {fetched}"
            assert _written(jupyter.root) == expected, "the REST API did not write what the vectors asked for"
    finally:
        for name in _written(jupyter.root):
            (jupyter.root / name).unlink()


@pytest.mark.parametrize("src, kept", [
    ("data:image/png;base64,iVBORw0KGgo=", True), ("DATA:image/jpeg;base64,/9j/", True),
    ("data:image/gif;base64,R0lGOD", False), ("data:image/svg+xml,<svg/>", False), ("x", False),
    ("plot.png", False), ("/formgrader/submissions/1/x", False), ("https://tracker.example/p.png", False),
    ("//tracker.example/p.png", False), ("&#100;ata:image/gif;base64,R0lGOD", False),
])
def test_images_are_only_inline_png_or_jpeg(src, kept):
    from grader.nbgrader_plugins.sanitize_student_content import kept_attribute
    assert kept_attribute("img", "src", src) is kept


@pytest.mark.parametrize("href, kept", [
    ("02_model_and_parameters.ipynb", True), ("https://pytorch.org", True), ("#summary", True),
    ("../gradebook.db", False), ("/api/contents/x", False), ("02_model.ipynb/../../api", False),
    ("javascript:alert(1)", False), ("JaVaScRiPt&#58;alert(1)", False),
])
def test_links_to_the_labs_notebooks_stay_and_other_relative_links_go(href, kept):
    from grader.nbgrader_plugins.sanitize_student_content import kept_attribute
    assert kept_attribute("a", "href", href) is kept
