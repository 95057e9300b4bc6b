"""Which cells of a notebook grading can leave out: the demos that no graded cell needs.

Under nbgrader every training run shrinks to a token effort (``translab.budget.FAST``: one step, 16 sentences),
so its loss curve has one point and its accuracies are noise: nothing a grader or a student learns from.  Yet
those runs and what shows them were a third of grading a submission (measured: 3.4 s of 11).  A solution cell
tagged ``"translab": {"demo": true}`` in its metadata is such a demo; while nbgrader grades, it is not run and says
so, *unless* a cell that does run reads a name it defines.

That last rule is what keeps grading fair to a student who wrote a helper into a demo cell, or reads a demo's
result in an answer: the submitted cells decide, not the solutions.  Graded cells (answers and tests) always run,
whatever their metadata says, and a student can only leave out cells of their own, as deleting them would.  The
analysis is static (``names``): a name read only through ``globals()`` or ``exec`` is not seen, which can only
cost the student who hides it that way.
"""
from __future__ import annotations

import ast

DEMO_KEY = "translab"  # cell.metadata[DEMO_KEY]["demo"] is True for a demo grading may leave out
NOT_RUN = "not run while grading: a demo no graded cell needs (it runs in full in the lab)\n"


def names(source: str) -> tuple[set[str], set[str]]:
    """(names the cell reads and does not bind itself, names it binds); parameters and locals count as bound,
    IPython's ``%`` and ``!`` lines are skipped.  A cell that does not parse reads and binds nothing."""
    source = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set(), set()
    read, bound = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            bound.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
    return read - bound, bound


def needed(cells: list, kept: list[bool]) -> list[bool]:
    """``kept`` grown by every cell that binds a name a kept cell after it reads, and so on back to the first
    cell: what must run for the kept cells to see the names they read."""
    result = list(kept)
    wanted: set[str] = set()
    for index in range(len(cells) - 1, -1, -1):
        read, bound = names(cells[index].source)
        if not result[index] and bound & wanted:
            result[index] = True
        if result[index]:
            wanted |= read
    return result


def is_graded(cell) -> bool:
    grading = cell.metadata.get("nbgrader", {})
    return bool(grading.get("solution") or grading.get("grade") or grading.get("task"))


def is_demo(cell) -> bool:
    return cell.cell_type == "code" and not is_graded(cell) and cell.metadata.get(DEMO_KEY, {}).get("demo") is True


def left_out(cells: list) -> set[int]:
    """Indexes of the code cells grading leaves out: demos that no cell which runs needs."""
    code = [(index, cell) for index, cell in enumerate(cells) if cell.cell_type == "code"]
    runs = needed([cell for _, cell in code], [not is_demo(cell) for _, cell in code])
    return {index for (index, _), run in zip(code, runs) if not run}
