"""nbgrader autograde steps (``nbgrader_config.py``) that bound what one notebook can cost and keep what it earned.

nbgrader's ``Execute`` gives each cell a timeout, but nothing bounds the notebook: five cells that sleep just
under the timeout, or 20,000 empty cells, cost minutes each (measured: 285 s and 377 s).  And a kernel that
dies, or ignores the interrupt after a timeout, makes nbclient raise, so nbgrader fails the whole notebook and
the tests that had already passed score 0.

``GuardedExecute`` runs the cells as nbgrader does, but

* gives the notebook a wall-clock budget (``notebook_budget``): a cell's timeout is cut to what is left of it,
  and once it is spent the remaining code cells are not run;
* when the kernel dies, or stays unresponsive after the interrupt, stops there instead of raising;

and in both cases marks every code cell it did not run with an error output saying why, so nbgrader scores
those test cells 0 (a code cell with no error output would score full marks) while the cells that ran keep
their points.  ``FlagIncidents`` then flags the notebook in the gradebook, so the instructor sees where
grading was cut short and which cells it cost.
"""
from __future__ import annotations

import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute, NbGraderPreprocessor
from traitlets import Float

INCIDENTS = "translab_incidents"  # resources key: what cut this notebook's grading short


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


class GuardedExecute(Execute):
    """nbgrader's ``Execute`` with a wall-clock budget per notebook and a notebook that survives its kernel."""

    notebook_budget = Float(180.0, help=(
        "Wall-clock seconds for all the cells of one notebook.  The slowest honest notebook takes 12 s under "
        "grading on a quiet 2-core machine and about 40 s on a busy one; after the budget the remaining cells "
        "are not run and score 0.")).tag(config=True)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_budget
        self._stopped: str | None = None  # why the remaining cells are not run
        resources = resources if resources is not None else {}
        resources[INCIDENTS] = []
        return super().preprocess(nb, resources, km)

    def _get_timeout(self, cell):
        """The cell's timeout, cut to what is left of the notebook's budget (nbclient interrupts at it)."""
        timeout = super()._get_timeout(cell)
        left = max(1, int(self._deadline - time.monotonic()) + 1)
        return left if timeout is None else min(timeout, left)

    def _not_run(self, cell: NotebookNode) -> None:
        cell.outputs = [_error("CellNotRun", f"not run: {self._stopped}")]
        cell.execution_count = None

    def _stop(self, index: int, reason: str) -> None:
        self._stopped = reason
        self.resources[INCIDENTS].append(f"cell {index}: {reason}")
        self.log.warning("notebook stopped at cell %d: %s", index, reason)

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.source.strip():
            return cell, resources
        if self._stopped is None and time.monotonic() >= self._deadline:
            self._stop(index, f"the notebook's time budget of {self.notebook_budget:.0f} s was spent before this cell")
        if self._stopped is not None:
            self._not_run(cell)
            return cell, resources
        try:
            cell, resources = super().preprocess_cell(cell, resources, index)
        except DeadKernelError:
            self._stop(index, "the kernel died while running this cell (e.g. os._exit, a crash or a limit)")
            cell.outputs.append(_error("DeadKernelError", self._stopped))
            return cell, self.resources
        except CellTimeoutError:
            # nbclient interrupted the cell at its timeout and the kernel did not answer the interrupt
            self._stop(index, "the kernel did not respond after this cell was interrupted at its time limit")
            cell.outputs.append(_error("UnresponsiveKernel", self._stopped))
            return cell, self.resources
        if time.monotonic() >= self._deadline:
            budget = f"the notebook's time budget of {self.notebook_budget:.0f} s ran out during this cell"
            cell.outputs.append(_error("TimeBudgetExceeded", budget))
            self._stop(index, budget)
        return cell, resources


class FlagIncidents(NbGraderPreprocessor):
    """Flag, in the gradebook, a notebook whose grading ``GuardedExecute`` cut short (after ``SaveAutoGrades``)."""

    def preprocess(self, nb, resources):
        incidents = resources.get(INCIDENTS)
        if incidents:
            from nbgrader.api import Gradebook
            info = resources["nbgrader"]
            with Gradebook(info["db_url"]) as gradebook:
                notebook = gradebook.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
                notebook.flagged = True
                gradebook.db.commit()
            self.log.warning("flagged %s for review: %s", info["notebook"], "; ".join(incidents))
        return nb, resources
