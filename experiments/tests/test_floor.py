"""The grading floor of ``make bench``: which cells it runs (experiments.bench.grading.graded_and_needed)."""
import nbformat

from experiments.bench.grading import graded_and_needed


def _cell(source, **nbgrader):
    cell = nbformat.v4.new_code_cell(source)
    if nbgrader:
        cell.metadata["nbgrader"] = nbgrader
    return cell


def test_the_floor_keeps_graded_cells_and_what_they_read_and_drops_the_demos():
    cells = [
        _cell("%matplotlib inline\nimport torch\nfrom translab import checks"),        # read by both graded cells
        _cell("SIZE = 5\nlosses = [1.0]"),                                              # SIZE read by the answer
        _cell("for step in range(100):\n    losses.append(step)\nplot(losses)"),        # a demo: nothing graded reads it
        _cell("def mask(sz, model=None):\n    return torch.zeros(sz + SIZE)", solution=True),
        _cell("model = train(mask)"),                                                   # defines a name only a parameter shadows
        _cell("checks.check_mask(mask)", grade=True),
    ]
    kept = graded_and_needed(cells)
    assert [cells.index(c) for c in kept] == [0, 1, 3, 5]


def test_the_floor_of_a_notebook_without_graded_cells_is_empty():
    assert graded_and_needed([_cell("x = 1"), _cell("print(x)")]) == []
