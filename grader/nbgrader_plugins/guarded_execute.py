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

It also decides the test cells' verdicts outside the kernel (``grader.verdicts``): a checker listens for the
notebook's kernel, each graded test cell opens a window for the checks its source calls, and the cell's outputs
are then replaced by what the checker recorded, which is what nbgrader scores.  Answer cells that reach for the
tools of an attempt on the grader (``verdicts.suspicious``) flag the notebook for a human.

One kernel serves all the notebooks of a student (nbgrader grades one student per process in ``grader.batch``):
a fresh kernel pays 3 s a notebook for its start, torch, matplotlib and ``torch._dynamo`` (measured), more than
the graded checks of a notebook cost.  Between notebooks the kernel is reset (``FRESH_NOTEBOOK``: an empty
namespace, execution count 1, the notebook's folder, no open figures, autograd on, float32), so each notebook is
graded from its own cells as in a fresh kernel.  What a notebook changed inside a module stays for the student's
next notebook, which is why a kernel is kept only after a notebook that ran to the end with no incident, and while
it has most of its CPU allowance (``sandbox.Limits.cpu_seconds``) left; otherwise the next notebook starts a new
one.  The kernel and the checker it reports to end with the nbgrader process.
"""
from __future__ import annotations

import atexit
import os
import time
from dataclasses import dataclass
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import run_hook, run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Unicode

from jupyter_client.manager import KernelManager

from translab.contract import CHECKER_DIR_ENV, CHECKER_ENV, SANDBOX_STATUS_ENV, VARIANT_ENV, tagged

from ..demos import NOT_RUN, left_out
from ..variants import SECRET_ENVS
from ..verdicts import Checker, ForkedChecker, expected_calls, suspicious

INCIDENTS = "translab_incidents"  # resources key: what cut this notebook's grading short (read by FlagIncidents)


# Run in a kept kernel before the student's next notebook, silently (no output, no history).  reset() comes last:
# it empties the namespace, helpers included, and restarts the execution count.
FRESH_NOTEBOOK = """\
import os as _os, sys as _sys
_os.chdir({cwd!r})
if "matplotlib.pyplot" in _sys.modules:
    _sys.modules["matplotlib.pyplot"].close("all")
if "torch" in _sys.modules:
    _sys.modules["torch"].set_grad_enabled(True)
    _sys.modules["torch"].set_default_dtype(_sys.modules["torch"].float32)
get_ipython().reset(new_session=True)
"""
RESET_TIMEOUT = 10  # seconds for FRESH_NOTEBOOK; a kernel that takes longer is not kept
KEEP_CPU_SHARE = 0.5  # a kernel is kept while it has used less than this share of its RLIMIT_CPU


@dataclass
class _KeptKernel:
    """The kernel kept between the notebooks of one student, with the checker its environment names, the client
    already connected to it (a new client waits at least 0.2 s for the kernel's messages to settle) and the reset
    it was sent (``reset``, a message id): the kernel runs it while nbgrader saves this notebook and prepares the
    next, and the next notebook waits for its reply (``_reset_done``) before its first cell."""
    km: KernelManager
    checker: Checker | ForkedChecker
    cwd: str
    kc: object = None
    reset: str | None = None
    reset_deadline: float = 0.0


kept_kernel: _KeptKernel | None = None  # this nbgrader process's kernel between two notebooks of its student


def _take_kept(cwd: str) -> _KeptKernel | None:
    """The kept kernel if it was started for this folder (the same student and assignment) and still runs."""
    global kept_kernel
    kept, kept_kernel = kept_kernel, None
    if kept is None:
        return None
    if kept.cwd == cwd and run_sync(kept.km.is_alive)() and run_sync(_reset_done)(kept):
        return kept
    _retire(kept.km, kept.checker, kept.kc)
    return None


async def _reset_done(kept: _KeptKernel) -> bool:
    """Whether the kept kernel answered its reset with "ok" by its deadline, its messages about it read: what
    ``execute_interactive`` waited for in place, before the reset overlapped nbgrader's work between notebooks."""
    async def about_reset(receive, wanted=lambda message: True) -> dict:
        """The next message about the reset that ``wanted`` accepts; TimeoutError at the deadline."""
        while True:
            left = kept.reset_deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            message = await receive(timeout=left)
            if message["parent_header"].get("msg_id") == kept.reset and wanted(message):
                return message

    try:
        reply = await about_reset(kept.kc.get_shell_msg)
        if reply["content"].get("status") != "ok":
            return False
        # the reset's own busy and idle: no output (silent), nothing left for the next cell
        await about_reset(kept.kc.get_iopub_msg, lambda message: message["msg_type"] == "status"
                          and message["content"].get("execution_state") == "idle")
    except Exception:  # the deadline (queue.Empty or TimeoutError), or the kernel went
        return False
    return True


def _retire(km: KernelManager | None, checker: Checker | ForkedChecker | None, kc=None) -> None:
    """Kill a kernel (nothing in it needs a clean exit), close its client and stop its checker."""
    try:
        if kc is not None:
            kc.stop_channels()
        if km is not None and km.has_kernel:
            run_sync(km.shutdown_kernel)(now=True)
    except Exception:  # already gone: the batch ends whatever the student's uid left anyway
        pass
    finally:
        if checker is not None:
            checker.stop()


@atexit.register
def retire_kept_kernel() -> None:
    global kept_kernel
    if kept_kernel is not None:
        kept, kept_kernel = kept_kernel, None
        _retire(kept.km, kept.checker, kept.kc)


def _cpu_seconds(pid: int) -> float | None:
    """CPU time (user + system) the process has used so far; None if it cannot be read."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError):
        return None


def kernel_pid(km: KernelManager) -> int | None:
    """The kernel's own process: the one nbgrader started, or, when that is a launcher a zygote forked the kernel
    for (``grader.zygote``) or the keeper of a PID namespace (``grader.processes``), the pid the kernel's launch
    record gives for it (written before any student code, in a folder out of the kernel's reach)."""
    pid = getattr(km.provisioner, "pid", None)
    status = os.environ.get(SANDBOX_STATUS_ENV)
    if pid and status:
        from ..sandbox import launch_records
        for record in reversed(launch_records(Path(status))):
            started_by = (record.get("launcher"), record.get("keeper"))
            if record.get("ok") and pid in started_by and isinstance(record.get("pid"), int):
                return record["pid"]
    return pid


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


class GuardedExecute(Execute):
    """nbgrader's ``Execute`` with a wall-clock budget per notebook and a notebook that survives its kernel."""

    notebook_budget = Float(180.0, help=(
        "Wall-clock seconds for all the cells of one notebook.  The slowest honest notebook takes 12 s under "
        "grading on a quiet 2-core machine and about 40 s on a busy one; after the budget the remaining cells "
        "are not run and score 0.")).tag(config=True)

    skip_demos = Bool(True, help=(
        "Leave out the demos no graded cell needs (grader.demos: the training runs, at a token effort under "
        "grading, and what shows them), each saying so in its output.  False runs every cell.")).tag(config=True)

    zygote = Unicode("", help=(
        "The socket of the batch's zygote (grader.zygote), set by the batch: the checker is forked from it, with "
        "torch and the checks imported, instead of importing them here.  Empty, or no zygote answering: the "
        "checker is a thread of this process.")).tag(config=True)

    _variant: str | None = None  # the student's variant code (grader.variants), derived in preprocess

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_budget
        self._stopped: str | None = None  # why the remaining cells are not run
        self._left_out = left_out(nb.cells) if self.skip_demos else set()
        resources = resources if resources is not None else {}
        from ..course import course_root
        from ..variants import SHOWN_KEY, grading_code, mismatch
        self._variant = grading_code((resources.get("nbgrader") or {}).get("student"), course_root())
        shown = (nb.metadata.get("translab") or {}).pop(SHOWN_KEY, None)  # RecordVariantShown's, before ClearOutput
        why = mismatch(shown if isinstance(shown, str) else None, self._variant)
        resources[INCIDENTS] = [why] if why else []
        for index, cell in enumerate(nb.cells):
            if cell.cell_type == "code" and cell.metadata.get("nbgrader", {}).get("solution"):
                for reason in suspicious(cell.source):
                    resources[INCIDENTS].append(f"cell {index}: the answer {reason}")
        cwd = os.path.abspath(resources.get("metadata", {}).get("path") or os.getcwd())
        kept = _take_kept(cwd) if km is None else None
        self._kept_client = None
        if kept is not None:
            self._checker, km, self._kept_client = kept.checker, kept.km, kept.kc
        else:
            self._checker = self._new_checker()
        owned = km is None
        km = km or self.create_kernel_manager()  # ours, so nbclient leaves the kernel running at the end
        finished = False
        try:
            result = super().preprocess(nb, resources, km)
            finished = True
            return result
        finally:
            if owned or kept is not None:
                self._keep_or_retire(cwd, finished)
            else:  # a kernel manager our caller passed in: theirs to end
                self._checker.stop()

    def _new_checker(self) -> Checker | ForkedChecker:
        """The batch puts the socket beside the kernel's own (reachable from the sandbox); else a private folder."""
        folder = os.environ.get(CHECKER_DIR_ENV) or None
        if self.zygote and folder:
            try:
                return ForkedChecker(self.zygote, folder)
            except OSError as error:  # no zygote listens (one that fails later fails the notebook: CheckerGone)
                self.log.warning("no checker from the zygote (%s): the checker runs in this process", error)
        return Checker(folder)

    def _keep_or_retire(self, cwd: str, finished: bool) -> None:
        """Keep the kernel for the student's next notebook if this one ran to the end with no incident and the
        kernel has most of its CPU allowance left, sending it the reset to a fresh namespace (the next notebook
        takes it only if that worked); else end it."""
        global kept_kernel
        from ..sandbox import Limits
        km, kc = self.km, self.kc
        keep = finished and self._stopped is None and km is not None and kc is not None
        if keep:
            pid = kernel_pid(km)
            used = _cpu_seconds(pid) if pid else None
            keep = used is not None and used < KEEP_CPU_SHARE * Limits().cpu_seconds
        reset = None
        if keep:
            try:  # sent, not waited for: the next notebook waits (_take_kept)
                reset = kc.execute(FRESH_NOTEBOOK.format(cwd=cwd), silent=True, store_history=False)
            except Exception:  # the kernel went
                keep = False
        self.kc = self.km = None
        if keep:
            kept_kernel = _KeptKernel(km, self._checker, cwd, kc, reset, time.monotonic() + RESET_TIMEOUT)
        else:
            _retire(km, self._checker, kc)

    async def async_start_new_kernel(self, **kwargs):
        kwargs["env"] = {**os.environ, **kwargs.get("env", {}), CHECKER_ENV: str(self._checker.path)}
        for name in (VARIANT_ENV, *SECRET_ENVS):  # the course secret never reaches student code
            kwargs["env"].pop(name, None)
        if self._variant:  # the student's own configuration, as the notebook shows it
            kwargs["env"][VARIANT_ENV] = self._variant
        await super().async_start_new_kernel(**kwargs)
        self._checker.warm_up()

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync name to its own coroutine

    async def async_start_new_kernel_client(self):
        """The kept kernel's client when there is one (it answered the reset just now), else a new client."""
        kept, self._kept_client = getattr(self, "_kept_client", None), None
        if kept is None:
            return await super().async_start_new_kernel_client()
        self.kc = kept
        self.kc.allow_stdin = False
        await run_hook(self.on_notebook_start, notebook=self.nb)
        return self.kc

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

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
        if index in self._left_out:
            cell.outputs = [NotebookNode(output_type="stream", name="stdout", text=NOT_RUN)]
            cell.execution_count = None
            return cell, resources
        grading = cell.metadata.get("nbgrader", {})
        calls = expected_calls(cell.source) if grading.get("grade") and not grading.get("solution") else []
        if not calls:
            return self._run_cell(cell, resources, index)
        self._checker.open(grading.get("grade_id", f"cell {index}"), calls, self._variant)
        try:
            cell, resources = self._run_cell(cell, resources, index)
        finally:
            record = self._checker.close()
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
