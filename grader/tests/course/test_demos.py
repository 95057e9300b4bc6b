"""Which cells grading leaves out (grader.course.demos): tagged demos that no cell which runs needs, never a graded cell,
and never a demo a student's own code reads from."""
from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from grader.course.demos import DEMO_KEY, is_demo, left_out, names
from translab.paths import REPO_ROOT

SOLUTIONS = sorted((REPO_ROOT / "solutions" / "transfer_learning").glob("*.ipynb"))


def _cell(source: str, demo: bool = False, **grading):
    cell = nbformat.v4.new_code_cell(source)
    if demo:
        cell.metadata[DEMO_KEY] = {"demo": True}
    if grading:
        cell.metadata["nbgrader"] = grading
    return cell


def test_names_read_and_bound():
    read, bound = names("%matplotlib inline\nimport torch as t\nx = f(y)\ndef g(a):\n    return a + z\n")
    assert read == {"f", "y", "z"} and bound == {"t", "x", "g", "a"}
    assert names("def broken(:\n") == (set(), set())


def test_a_demo_nothing_reads_is_left_out_and_so_is_what_only_shows_it():
    cells = [_cell("import torch"), _cell("losses = train()", demo=True), _cell("plot(losses)", demo=True),
             _cell("print(torch.ones(1))")]
    assert left_out(cells) == {1, 2}


def test_a_demo_that_a_cell_which_runs_reads_from_runs_with_what_it_needs():
    """A student's helper written into a demo cell, or an answer that reads a demo's result: the demo runs."""
    cells = [_cell("data = load()", demo=True), _cell("def helper(x):\n    return x\nlosses = train(data)", demo=True),
             _cell("plot(losses)", demo=True), _cell("def answer(x):\n    return helper(x)", solution=True)]
    assert left_out(cells) == {2}


def test_graded_and_markdown_cells_always_run_whatever_their_metadata_says():
    cells = [_cell("x = 1", demo=True, solution=True), _cell("check(x)", demo=True, grade=True, points=1),
             nbformat.v4.new_markdown_cell("text")]
    cells[2].metadata[DEMO_KEY] = {"demo": True}
    assert left_out(cells) == set() and not any(is_demo(cell) for cell in cells)


@pytest.mark.parametrize("path", SOLUTIONS, ids=lambda path: path.stem[:2])
def test_every_tagged_demo_of_the_solutions_is_left_out_and_no_graded_cell_reads_it(path: Path):
    cells = nbformat.read(path, as_version=4).cells
    tagged = {index for index, cell in enumerate(cells) if is_demo(cell)}
    assert left_out(cells) == tagged, "a tagged demo is needed by a cell that runs: untag it, or tag what reads it"
    bound = set().union(*(names(cells[index].source)[1] for index in tagged))
    graded = [cell for cell in cells if cell.metadata.get("nbgrader", {}).get("grade")
              or cell.metadata.get("nbgrader", {}).get("solution")]
    assert not [name for cell in graded for name in names(cell.source)[0] & bound]


def test_the_solutions_tag_every_training_run():
    """Each budgeted training run (budget.estimate) is a demo grading leaves out: they were a third of grading."""
    runs = [(path.stem, cell.id) for path in SOLUTIONS for cell in nbformat.read(path, as_version=4).cells
            if cell.cell_type == "code" and "budget.estimate(" in cell.source]
    assert len(runs) == 4 and all(is_demo(cell) for path in SOLUTIONS
                                  for cell in nbformat.read(path, as_version=4).cells
                                  if cell.cell_type == "code" and "budget.estimate(" in cell.source), runs
