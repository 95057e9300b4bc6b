"""Formulas typeset when the formgrader's and the feedback pages are built (grader/mathml.py).

The browser flow (test_browser_flows) shows them drawn offline; here: every formula of the lab converts, hostile
TeX shows as text, and the course's config puts the filter and the macro in nbgrader's way.
"""
import json
import re
import xml.etree.ElementTree as ElementTree

import pytest

from grader.mathml import MATHML, MathMLRenderer, markdown2html, tex_to_mathml
from nbconvert.filters.markdown_mistune import MarkdownWithMath
from translab.paths import REPO_ROOT

FORMULA = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)


def _formulas_of_the_lab() -> list[tuple[str, bool]]:
    found = []
    for path in sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                found += [(block or inline, bool(block)) for block, inline in FORMULA.findall("".join(cell["source"]))]
    return found


def _render(markdown: str) -> str:
    return MarkdownWithMath(renderer=MathMLRenderer(escape=False)).render(markdown)


def test_every_formula_of_the_lab_becomes_mathml():
    formulas = _formulas_of_the_lab()
    assert len(formulas) > 50  # the solutions' prose has about 70
    failed = [tex for tex, display in formulas if tex_to_mathml(tex, display) is None]
    assert not failed, f"formulas that would show as TeX: {failed}"


def test_a_display_formula_is_a_block_of_mathml():
    mathml = tex_to_mathml(r"\frac{pos}{10000^{2i/d}}", display=True)
    root = ElementTree.fromstring(mathml)
    assert root.tag == f"{{{MATHML}}}math" and root.get("display") == "block"
    assert root.find(f".//{{{MATHML}}}mfrac") is not None


@pytest.mark.parametrize("tex", [
    r"\text{<script>alert(1)</script>}",  # latex2mathml copies the tag into <mtext>
    r"\text{<img src=x onerror=alert(1)>}",
    r"\href{javascript:alert(1)}{x}",  # an href attribute
    r"\style{position:fixed;top:0}{x}",  # a style attribute
    r"\color{white}{hidden}",  # colour: white on white
    r"\rule{10cm}{10cm}",  # a black box the size of the page
    r"\hspace{-50em} x",  # a formula moved over its neighbours
])
def test_hostile_tex_shows_as_text(tex):
    assert tex_to_mathml(tex, display=False) is None
    rendered = _render(f"before ${tex}$ after")
    assert "<math" not in rendered and "<script" not in rendered and "<img" not in rendered
    assert "before" in rendered and "after" in rendered


def test_markdown_keeps_prose_code_and_dollars_in_code():
    rendered = _render("The mask $m_{ij}$ is `-inf` above; `cost = $5` stays code.\n\n$$a_{ij} = 1$$")
    assert rendered.count("<math") == 2 and 'display="block"' in rendered
    assert "<code>-inf</code>" in rendered and "<code>cost = $5</code>" in rendered


def test_the_filter_reads_the_cell_attachments():
    image = {"image/png": "iVBORw0KGgo="}
    context = {"cell": {"attachments": {"plot.png": image}}, "resources": {}}
    rendered = markdown2html(context, "$x$ ![plot](attachment:plot.png)")  # jinja passes the template's context
    assert "<math" in rendered and "data:image/png;base64,iVBORw0KGgo=" in rendered


def test_the_course_config_uses_the_filter_and_the_macro():
    from nbconvert.exporters import HTMLExporter
    from traitlets.config.loader import PyFileConfigLoader
    config = PyFileConfigLoader("nbgrader_config.py", path=str(REPO_ROOT)).load_config()
    for template in ("feedback", "formgrade"):
        config.HTMLExporter.template_name = template
        exporter = HTMLExporter(config=config)
        assert exporter.environment.filters["markdown2html"] is markdown2html
        macro = exporter.environment.get_template("mathjax.html.j2")
        assert "grader" in macro.filename and "cdnjs" not in macro.module.mathjax()
