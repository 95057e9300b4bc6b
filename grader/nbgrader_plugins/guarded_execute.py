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
their points.  ``FlagIncidents`` (``flag_incidents.py``) then flags the notebook in the gradebook, so the instructor sees where
grading was cut short and which cells it cost.

It also decides the test cells' verdicts outside the kernel (``grader.grading.verdicts``): a checker listens for the
notebook's kernel, each graded test cell opens a window for the checks its source calls, and the cell's outputs
are then replaced by what the checker recorded, which is what nbgrader scores.  Answer cells that reach for the
tools of an attempt on the grader (``verdicts.suspicious``) flag the notebook for a human.

Each notebook is graded in a kernel of its own, forked from the batch's kernels' zygote (a start costs a fork and
ipykernel's own set-up, not a new interpreter), whose translab is the notebook's stage (``grader.isolation.kernel_stages``:
notebook N sees the library of a student in week N, whatever the course has released).  No kernel outlives its
notebook, so nothing an answer changed in a module, the kernel's side of the verdict channel included, reaches the
student's next notebook.  The kernel and its checker end with the notebook.

Outputs that the kernel creates or updates once the first hidden test has begun could carry that test's inputs; a
cell before the hidden test keeps the outputs it had when the test began (a display updated later is put back), and
``ClearOutputsAfterHiddenTests`` hides the outputs of the cells after it from the feedback.  A test cell whose checks
never reported, though the grader cut nothing short, is tampering with the channel: the notebook is flagged.
"""
from __future__ import annotations

import copy
import os
import subprocess
import time

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Unicode

from jupyter_client.manager import KernelManager

from translab.contract import CHECKER_DIR_ENV, CHECKER_ENV, VARIANT_ENV, tagged

from grader.course.demos import NOT_RUN, left_out
from grader.course.variants import SECRET_ENVS, SHOWN_KEY, grading_code, mismatch
from grader.grading import phases
from grader.grading.prompt_kernel_client import PromptKernelClient
from grader.grading.verdicts import Checker, ForkedChecker, expected_calls, suspicious
from grader.isolation import kernel_stages

from ..course import course_root
from .clear_outputs_after_hidden_tests import is_hidden_test, is_test

KILL_WAIT = 5.0  # s for a killed kernel's process to end (jupyter_client waits as long)
INCIDENTS = "translab_incidents"  # resources key: what cut this notebook's grading short (read by FlagIncidents)


def _end_kernel(km: KernelManager | None, kc=None) -> None:
    """Kill a notebook's kernel (nothing in it needs a clean exit) and close its client.  jupyter_client's kill
    checks for the end every 0.1 s, and a killed kernel has ended within a millisecond: waiting on its process
    first saves about 0.1 s a notebook (issue 53's phase "kernel stop")."""
    try:
        if kc is not None:
            kc.stop_channels()
        if km is not None and km.has_kernel:
            process = getattr(km.provisioner, "process", None)
            if process is not None:
                run_sync(km.provisioner.kill)()
                try:
                    process.wait(timeout=KILL_WAIT)
                except subprocess.TimeoutExpired:  # jupyter_client's own wait below takes over
                    pass
            run_sync(km.shutdown_kernel)(now=True)
    except Exception:  # already gone: the batch ends whatever the student's uid left anyway
        pass


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


class GuardedExecute(Execute):
    """nbgrader's ``Execute`` with a wall-clock budget per notebook and a notebook that survives its kernel."""

    notebook_budget = Float(180.0, help=(
        "Wall-clock seconds for all the cells of one notebook.  The slowest honest notebook takes 12 s under "
        "grading on a quiet 2-core machine and about 40 s on a busy one; after the budget the remaining cells "
        "are not run and score 0.")).tag(config=True)

    skip_demos = Bool(True, help=(
        "Leave out the demos no graded cell needs (grader.course.demos: the training runs, at a token effort under "
        "grading, and what shows them), each saying so in its output.  False runs every cell.")).tag(config=True)

    zygote = Unicode("", help=(
        "The socket of the batch's checkers' zygote (grader.isolation.zygote), set by the batch: each notebook's checker is "
        "forked from it, with torch, the full library and the checks imported, instead of importing them here.  "
        "Empty, or no zygote answering: the checker is a thread of this process.")).tag(config=True)

    phases_file = Unicode("", help=(
        "Where to append one JSON line per notebook with the seconds of its phases (grader.grading.phases: the "
        "kernel's start, the cells, the test cells, the kernel's end), set by the batch.  Empty: not timed.")
    ).tag(config=True)

    _variant: str | None = None  # the student's variant code (grader.course.variants), derived in preprocess

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_budget
        self._stopped: str | None = None  # why the remaining cells are not run
        self._left_out = left_out(nb.cells) if self.skip_demos else set()
        resources = resources if resources is not None else {}
        self._variant = grading_code((resources.get("nbgrader") or {}).get("student"), course_root())
        shown = (nb.metadata.get("translab") or {}).pop(SHOWN_KEY, None)  # RecordVariantShown's, before ClearOutput
        why = mismatch(shown if isinstance(shown, str) else None, self._variant)
        resources[INCIDENTS] = [why] if why else []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                for reason in suspicious(cell.source):
                    resources[INCIDENTS].append(f"cell {index}: the answer {reason}")
        self._stage = kernel_stages.stage_of((resources.get("nbgrader") or {}).get("notebook")
                                             or resources.get("unique_key") or "")
        self._before_hidden: dict[int, list] | None = None  # earlier cells' outputs as the first hidden test began
        self._seconds = dict.fromkeys(phases.NOTEBOOK_PHASES, 0.0)
        self._clock = time.perf_counter()  # the end of the last phase timed
        self._started = False  # whether a cell has begun: what came before was the kernel's start (and checker's)
        self._checker = self._new_checker()
        owned = km is None
        km = km or self.create_kernel_manager()
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            if owned:  # no kernel outlives its notebook (a caller's kernel manager is the caller's to end)
                _end_kernel(self.km, self.kc)
            self._checker.stop()
            self._timed("kernel stop" if self._started else "kernel start")
            if self.phases_file:
                phases.record_notebook(self.phases_file, (resources.get("nbgrader") or {}).get("notebook", ""),
                                       self._seconds)
        self._put_back_outputs(nb)
        return nb, resources

    def create_kernel_manager(self):
        """nbclient's, with a client that is ready as soon as the kernel is (``PromptKernelClient``)."""
        km = super().create_kernel_manager()
        km.client_class = f"{PromptKernelClient.__module__}.{PromptKernelClient.__name__}"
        return km

    def _timed(self, phase: str) -> None:
        """Add the seconds since the last phase ended to ``phase``."""
        now = time.perf_counter()
        self._seconds[phase] += now - self._clock
        self._clock = now

    def _put_back_outputs(self, nb) -> None:
        """The cells before the first hidden test as they were when it began: a display the kernel updated later
        (``display(..., display_id=...)`` and ``handle.update``) would carry what the hidden test showed it."""
        for index, outputs in (self._before_hidden or {}).items():
            nb.cells[index].outputs = outputs

    def _new_checker(self) -> Checker | ForkedChecker:
        """The batch puts the socket beside the kernel's own (reachable from the sandbox); else a private folder."""
        folder = os.environ.get(CHECKER_DIR_ENV) or None
        if self.zygote and folder:
            try:
                return ForkedChecker(self.zygote, folder)
            except OSError as error:  # no zygote listens (one that fails later fails the notebook: CheckerGone)
                self.log.warning("no checker from the zygote (%s): the checker runs in this process", error)
        return Checker(folder)

    async def async_start_new_kernel(self, **kwargs):
        kwargs["env"] = {**os.environ, **kwargs.get("env", {}), CHECKER_ENV: str(self._checker.path),
                         kernel_stages.STAGE_ENV: str(self._stage)}
        for name in (VARIANT_ENV, *SECRET_ENVS):  # the launcher passes on an allow-list; these never, in any case
            kwargs["env"].pop(name, None)
        if self._variant:  # the student's own configuration, as the notebook shows it
            kwargs["env"][VARIANT_ENV] = self._variant
        await super().async_start_new_kernel(**kwargs)
        self._checker.warm_up()

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync name to its own coroutine

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
        if not self._started:
            self._timed("kernel start")
            self._started = True
        try:
            return self._guarded_cell(cell, resources, index)
        finally:
            self._timed("checks" if is_test(cell) else "cells")

    def _guarded_cell(self, cell, resources, index):
        if index in self._left_out:
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=NOT_RUN)]
            cell.execution_count = None
            return cell, resources
        grading = cell.metadata.get("nbgrader", {})
        if self._before_hidden is None and is_hidden_test(cell):
            self._before_hidden = {i: copy.deepcopy(c.get("outputs", [])) for i, c in enumerate(self.nb.cells[:index])
                                   if c.cell_type == "code"}
        calls = expected_calls(cell.source) if is_test(cell) else []
        if not calls:
            return self._run_cell(cell, resources, index)
        self._checker.open(grading.get("grade_id", f"cell {index}"), calls, self._variant, self._stage)
        try:
            cell, resources = self._run_cell(cell, resources, index)
        finally:
            record = self._checker.close()
        tampering = _tampering(cell, record)
        if tampering:
            self.resources[INCIDENTS].append(f"cell {index} ({record.grade_id}): {tampering}")
        _apply_verdict(cell, record)
        return cell, resources

    def _run_cell(self, cell, resources, index):
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


def _tampering(cell: NotebookNode, record) -> str:
    """Why a test cell's record shows the channel was tampered with, or "": the checker refused a call (not the
    check the cell's source makes next), or the cell ran to its end in the kernel, no error raised and nothing cut
    short, and yet its checks never reported (replaced, or their channel rebound).  A cell that stopped on an
    error before its check (an answer never defined) is a student's mistake, not this."""
    if record.refused:
        return "the checker refused calls the cell's source does not make: " + "; ".join(record.refused[:2])
    raised = any(output.get("output_type") == "error" for output in cell.get("outputs", []))
    if not record.passed and record.failure()[1] == "no_verdict" and not raised:
        return ("the cell ran without an error, yet its checks never reported a verdict: the answer replaced the "
                "checks or the kernel's side of their channel")
    return ""


_GRADER_ERRORS = ("CellNotRun", "DeadKernelError", "UnresponsiveKernel", "TimeBudgetExceeded")


def _apply_verdict(cell: NotebookNode, record) -> None:
    """The test cell's outputs become the checker's record: its "ok" lines, and an error unless every check the
    cell calls passed (nbgrader scores a test cell by that error).  The grader's own notes on a cell it cut short
    stay; nothing else the kernel printed or raised is kept."""
    outputs = []
    lines = record.lines()
    if lines:
        outputs.append(NotebookNode(output_type="stream", name="stdout", text="\n".join(lines) + "\n"))
    if not record.passed:
        ours = [o for o in cell.get("outputs", []) if o.get("output_type") == "error" and o.get("ename") in _GRADER_ERRORS]
        message, key = record.failure()
        if ours and key == "no_verdict":
            outputs += ours
        else:
            evalue = tagged(message, key)
            first, *rest = message.splitlines() or [""]
            outputs.append(NotebookNode(output_type="error", ename="CheckFailed", evalue=evalue,
                                        traceback=[f"CheckFailed: {first}", *rest]))
    cell.outputs = outputs
