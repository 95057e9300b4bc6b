"""The feedback page's one h1 is its score: every heading of the notebook, the student's own included, one level
down; fenced code and what is not a heading stay as they are."""
from __future__ import annotations

import nbformat

from grader.nbgrader_plugins.demote_headings import DemoteHeadings, demoted


def test_headings_go_one_level_down_and_nothing_else_changes():
    source = ("# Part 1\ntext with a # inside\n## 1. The mask\n   ### indented\n###### six stays six\n#hashtag\n"
              "```python\n# a comment in code\n```\n~~~\n## not a heading either\n~~~\n#\n")
    assert demoted(source) == ("## Part 1\ntext with a # inside\n### 1. The mask\n   #### indented\n"
                               "###### six stays six\n#hashtag\n```python\n# a comment in code\n```\n~~~\n"
                               "## not a heading either\n~~~\n##\n")


def test_the_preprocessor_leaves_code_cells_alone():
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# Title"),
                                               nbformat.v4.new_code_cell("# a comment\nx = 1")])
    done, _ = DemoteHeadings().preprocess(notebook, {})
    assert [cell.source for cell in done.cells] == ["## Title", "# a comment\nx = 1"]
