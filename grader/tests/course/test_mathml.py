"""Formulas typeset when the formgrader's and the feedback pages are built (grader/course/mathml.py).

The browser flow (test_browser_flows) shows them drawn offline; here: every formula of the lab converts, hostile
TeX shows as text, and the course's config puts the filter and the macro in nbgrader's way.
"""
import json
import re
import xml.etree.ElementTree as ElementTree

import pytest

from grader.course import mathml as mathml_module
from grader.course.mathml import MATHML, MathMLRenderer, markdown2html, tex_to_mathml
from nbconvert.filters.markdown_mistune import MarkdownWithMath
from translab.paths import REPO_ROOT

FORMULA = re.compile(r"\$\$(.+?)\$\$|\$([^$\n]+?)\$", re.S)


def _formulas_by_cell() -> list[list[tuple[str, bool]]]:
    cells = []
    for path in sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "markdown":
                cells.append([(block or inline, bool(block)) for block, inline in FORMULA.findall("".join(cell["source"]))])
    return cells


def _formulas_of_the_lab() -> list[tuple[str, bool]]:
    return [formula for cell in _formulas_by_cell() for formula in cell]


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


def test_a_formula_that_defines_macros_shows_as_text():
    assert tex_to_mathml(r"\newcommand{\a}{\frac{x^2}{y}}\a\a", display=False) is None
    assert tex_to_mathml(r"\def\b{x}\b", display=False) is None
    assert tex_to_mathml(r"\left( x \right)", display=False) is not None  # \left is no \let


def test_an_amplifying_answer_gives_a_page_of_about_its_own_size():
    """Issue 30, attack 7: an 82 KB written answer of macro calls became a 58.8 MB page built in 126 s."""
    formula = r"$\newcommand{\a}{\frac{x^2}{y_1+\sqrt{z}}}" + r"\a" * 100 + "$"
    unbounded_per_formula = len(mathml_module.convert(formula.strip("$")))
    answer = "\n\n".join([formula] * 340)
    page = _render(answer)
    assert len(answer) > 80_000 and unbounded_per_formula * 340 > 5_000_000
    assert len(page) < 2 * len(answer)


def test_one_cell_renders_at_most_its_budget_of_mathml_and_shows_the_rest_as_tex():
    formula = "$" + r"\frac{x^2}{y}" * 70 + "$"  # about 980 characters, about 6,000 of MathML
    page = _render("\n\n".join([formula] * 100))
    assert mathml_module.CELL_MATHML <= page.count("<") * 40  # some formulas became MathML
    assert len(page) < mathml_module.CELL_MATHML + 100 * len(formula) + 10_000
    assert page.count("<math") < 100 and r"$\frac{x^2}{y}" in page  # ... and the rest stayed TeX


def test_the_lab_s_formulas_are_far_inside_every_bound():
    cells = [[(tex, tex_to_mathml(tex, display)) for tex, display in cell] for cell in _formulas_by_cell()]
    rendered = [mathml for cell in cells for _, mathml in cell]
    assert max(len(tex) for cell in cells for tex, _ in cell) * 5 < mathml_module.MAX_TEX
    assert max(len(m) for m in rendered) * 10 < mathml_module.MAX_MATHML
    per_cell = [sum(len(mathml) for _, mathml in cell) for cell in cells]
    assert max(per_cell) * 10 < mathml_module.CELL_MATHML  # the richest cell of the lab
    assert sum(len(m) for m in rendered) < mathml_module.CELL_MATHML  # all of the lab's formulas in one cell


def test_each_formula_carries_its_source_as_its_text_alternative():
    """Issue 55: a screen reader without MathML support reads the TeX; a quote in it stays inside the attribute."""
    mathml = tex_to_mathml(r'\sqrt{d} \text{" onmouseover="x}', False)
    root = ElementTree.fromstring(mathml)
    assert root.get("alttext") == r'\sqrt{d} \text{" onmouseover="x}' and set(root.attrib) == {"display", "alttext"}
