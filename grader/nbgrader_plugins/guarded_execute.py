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
student's next notebook.  The kernel and its checker end with the notebook; the next notebook's were started as soon as
this one's kernel was ready, and wait for it (``grader.grading.next_kernel``, which says why they stay apart).

Outputs that the kernel creates or updates once the first hidden test has begun could carry that test's inputs; a
cell before the hidden test keeps the outputs it had when the test began (a display updated later is put back), and
``ClearOutputsAfterHiddenTests`` hides the outputs of the cells after it from the feedback.  A test cell whose checks
never reported, though the grader cut nothing short, is tampering with the channel: the notebook is flagged.
"""
from __future__ import annotations

import copy
import os
import shutil
import time
from pathlib import Path

from nbclient.exceptions import CellTimeoutError, DeadKernelError
from nbclient.util import ensure_async, run_sync
from nbformat.notebooknode import NotebookNode
from nbgrader.preprocessors import Execute
from traitlets import Bool, Float, Int, Unicode

from translab.contract import CHECKER_DIR_ENV, CHECKER_ENV, VARIANT_ENV, WATCH_TAMPERED_KEY, tagged

from grader.course.demos import NOT_RUN, left_out
from grader.course.variants import SECRET_ENVS, SHOWN_KEY, grading_code, mismatch
from grader.grading import next_kernel, phases
from grader.grading.prompt_kernel_client import PromptKernelClient
from grader.grading.verdicts import SOCKET_NAMES, Checker, ForkedChecker, expected_calls, suspicious
from grader.isolation import kernel_stages
from grader.isolation.sandbox import KERNEL_SOCKETS

from ..course import course_root
from .clear_outputs_after_hidden_tests import is_hidden_test, is_test

CLIENT_CLASS = f"{PromptKernelClient.__module__}.{PromptKernelClient.__name__}"
INCIDENTS = "translab_incidents"  # resources key: what cut this notebook's grading short (read by FlagIncidents)


OUTPUT_MESSAGES = {"stream", "display_data", "execute_result", "error", "update_display_data"}
OUTPUT_NOTE = "the notebook's output passed its budget"


def _size(value, depth: int = 0) -> int:
    """About how many bytes a message's content holds: its strings' lengths (text, base64 images, tracebacks)."""
    if isinstance(value, str):
        return len(value)
    if depth > 20:
        return 0
    if isinstance(value, dict):
        return sum(len(str(key)) + _size(item, depth + 1) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_size(item, depth + 1) for item in value)
    return 8


def _error(ename: str, message: str) -> NotebookNode:
    return NotebookNode(output_type="error", ename=ename, evalue=message, traceback=[f"{ename}: {message}"])


class GuardedExecute(Execute):
    """nbgrader's ``Execute`` with a wall-clock budget per notebook and a notebook that survives its kernel."""

    notebook_budget = Float(180.0, help=(
        "Wall-clock seconds for all the cells of one notebook.  The slowest honest notebook takes 12 s under "
        "grading on a quiet 2-core machine and about 40 s on a busy one; after the budget the remaining cells "
        "are not run and score 0.")).tag(config=True)

    output_budget = Int(16 * 1024 ** 2, help=(
        "Bytes of output one notebook may send (text, images, errors; counted as each message arrives).  An honest "
        "notebook sends about 1 MB under grading; past the budget every further output of the notebook is dropped "
        "as it arrives (nothing of it is held in this process), a note says so in the cell, and the notebook is "
        "flagged.  The cells still run and score as graded.")).tag(config=True)

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
    _notebook = ""  # the notebook's name and the folder its kernel runs in, set in preprocess
    _folder = ""
    _checker = None  # this notebook's checker (grader.grading.verdicts), made in preprocess
    _handed_over = False  # whether its kernel was started while the notebook before it ran (grader.grading.next_kernel)

    def preprocess(self, nb, resources=None, km=None):
        self._deadline = time.monotonic() + self.notebook_budget
        self._stopped: str | None = None  # why the remaining cells are not run
        self._left_out = left_out(nb.cells) if self.skip_demos else set()
        self._output_bytes, self._output_cut = 0, False  # what the kernel has sent as output so far (output_budget)
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
        self._notebook = (resources.get("nbgrader") or {}).get("notebook", "")
        self._folder = str((resources.get("metadata") or {}).get("path") or "")  # where its kernel runs
        owned = km is None
        waiting = next_kernel.take(self._notebook, self._folder, self.log) if owned else None
        self._handed_over = waiting is not None
        if waiting is not None:
            self._checker, km = waiting.checker, waiting.km
        else:
            self._checker = self._new_checker()
            km = km or self.create_kernel_manager()
        try:
            nb, resources = super().preprocess(nb, resources, km)
        finally:
            if owned:  # no kernel outlives its notebook (a caller's kernel manager is the caller's to end)
                next_kernel.end_kernel(self.km, self.kc)
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
        km.client_class = CLIENT_CLASS
        return _beside_checker(km, self._checker)

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

    def _new_checker(self, name: str = SOCKET_NAMES[0]) -> Checker | ForkedChecker:
        """The batch puts the socket in a folder of its own below the student's (``CHECKER_DIR_ENV``), where its
        kernel's sockets go too (``_beside_checker``): the one folder of the batch that kernel sees, and not the
        other notebook's.  Else a private folder."""
        folder = os.environ.get(CHECKER_DIR_ENV) or None
        folder = str(Path(folder) / name) if folder else None
        if folder:  # the folder an earlier notebook's kernel had: emptied here, before this one's kernel binds in it
            shutil.rmtree(folder, ignore_errors=True)  # (a forked checker doing it would race that kernel's start)
        if self.zygote and folder:
            try:
                return ForkedChecker(self.zygote, folder, name=name)
            except OSError as error:  # no zygote listens (one that fails later fails the notebook: CheckerGone)
                self.log.warning("no checker from the zygote (%s): the checker runs in this process", error)
        return Checker(folder, name)

    def _kernel_env(self, env: dict, checker: Checker | ForkedChecker, stage: int) -> dict:
        env = {**os.environ, **env, CHECKER_ENV: str(checker.path), kernel_stages.STAGE_ENV: str(stage)}
        for name in (VARIANT_ENV, *SECRET_ENVS):  # the launcher passes on an allow-list; these never, in any case
            env.pop(name, None)
        if self._variant:  # the student's own configuration, as the notebook shows it
            env[VARIANT_ENV] = self._variant
        return env

    async def async_start_new_kernel(self, **kwargs):
        kwargs["env"] = self._kernel_env(kwargs.get("env", {}), self._checker, self._stage)
        await super().async_start_new_kernel(**kwargs)
        self._checker.warm_up()

    start_new_kernel = run_sync(async_start_new_kernel)  # nbclient binds the sync name to its own coroutine

    async def async_start_new_kernel_client(self):
        """The client, then the next notebook's kernel (``grader.grading.next_kernel``), started while this one runs.
        A kernel started for this notebook that does not answer in ``HANDOFF_WAIT`` seconds is replaced."""
        if self._handed_over:
            self._handed_over, startup_timeout, waited = False, self.startup_timeout, self.km
            self.startup_timeout = min(startup_timeout, next_kernel.HANDOFF_WAIT)
            try:
                return await self._connected()
            except Exception as error:  # noqa: BLE001 - that kernel is ended; this notebook starts one of its own
                self.log.warning("the kernel started for %s did not answer (%s): starting another", self._notebook, error)
                next_kernel.end_kernel(waited)
                self._checker.stop()
                self._checker = self._new_checker()
                self.km = self.create_kernel_manager()
                await self.async_start_new_kernel()
            finally:
                self.startup_timeout = startup_timeout
        return await self._connected()

    start_new_kernel_client = run_sync(async_start_new_kernel_client)

    async def _connected(self):
        kc = await super().async_start_new_kernel_client()
        await self._start_next()
        return kc

    def _next_notebook(self) -> str | None:
        """The notebook nbgrader converts after this one: the next of its converter's list (one without
        ``--notebook``), or None."""
        names = [Path(path).stem for path in getattr(getattr(self.parent, "parent", None), "notebooks", None) or []]
        if self._notebook not in names:
            return None
        following = names[names.index(self._notebook) + 1:]
        return following[0] if following else None

    async def _start_next(self) -> None:
        """Start the next notebook's checker and kernel (not waited for) and keep them for it; on any failure,
        that notebook starts its own as before."""
        notebook = self._next_notebook()
        if notebook is None or not self._folder:
            return
        checker = km = None
        try:
            name = next(other for other in SOCKET_NAMES if other != self._checker.path.name)
            checker = self._new_checker(name)
            km = self.kernel_manager_class(config=self.config, **({"kernel_name": self.kernel_name} if self.kernel_name else {}))
            km.client_class = CLIENT_CLASS
            _beside_checker(km, checker)
            env = self._kernel_env({}, checker, kernel_stages.stage_of(notebook))
            await ensure_async(km.start_kernel(extra_arguments=self.extra_arguments, env=env, cwd=self._folder))
            checker.warm_up()
        except Exception as error:  # noqa: BLE001 - a missed head start, not a failed notebook
            self.log.warning("could not start %s's kernel ahead (%s): it starts its own", notebook, error)
            next_kernel.end_kernel(km)
            if checker is not None:
                checker.stop()
            return
        next_kernel.keep(next_kernel.Waiting(notebook, self._folder, km, checker))

    def process_message(self, msg, cell, cell_index):
        """nbclient's, with the notebook's output counted as it streams (``output_budget``): past it, an output is
        dropped as it arrives, and the first one dropped leaves a note in its cell and an incident."""
        if msg.get("msg_type") in OUTPUT_MESSAGES:
            self._output_bytes += _size(msg.get("content"))
            if self._output_bytes > self.output_budget:
                if not self._output_cut:
                    self._output_cut = True
                    note = f"{OUTPUT_NOTE} ({self.output_budget:,} bytes): what it wrote after that is not kept"
                    self.resources[INCIDENTS].append(f"cell {cell_index}: {note}")
                    cell.outputs.append(_error("OutputBudgetExceeded", note))
                return None
        return super().process_message(msg, cell, cell_index)

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


def _beside_checker(km, checker: Checker | ForkedChecker | None):
    """``km``'s kernel binds its IPC sockets in its checker's folder (``CHECKER_DIR_ENV``/name), which the launcher
    gives the student's uid and the kernel's view keeps alone: a notebook's kernel cannot unlink, bind or connect to
    what the next notebook's kernel and checker listen on."""
    if checker is not None and getattr(km, "transport", None) == "ipc" and os.environ.get(CHECKER_DIR_ENV):
        km.ip = str(Path(checker.folder) / KERNEL_SOCKETS)
    return km


def _tampering(cell: NotebookNode, record) -> str:
    """Why a test cell's record shows the channel was tampered with, or "": the checker refused a call (not the
    check the cell's source makes next), or the cell ran to its end in the kernel, no error raised and nothing cut
    short, and yet its checks never reported (replaced, or their channel rebound), or a check raised in the kernel
    (CheckFailed: it began, and lost the checker) and none reported.  A cell that stopped on an
    error before its check (an answer never defined) is a student's mistake, not this."""
    if record.refused:
        return "the checker refused calls the cell's source does not make: " + "; ".join(record.refused[:2])
    if record.put_back:
        return ("an answer replaced the checks' channel (" + ", ".join(record.put_back[:5]) + "): the grader put it "
                "back before this cell, whose checks reported through the real one")
    if any(not passed and key == WATCH_TAMPERED_KEY for _, passed, _, _, key in record.results):
        return ("an answer switched off what watches PyTorch's calls while it is graded (translab.checks.torch_watch: "
                "the function mode popped, the profiler stopped or restarted, RecordFunction off)")
    errors = [output.get("ename") for output in cell.get("outputs", []) if output.get("output_type") == "error"]
    if record.passed or record.failure()[1] != "no_verdict":
        return ""
    if not errors:
        return ("the cell ran without an error, yet its checks never reported a verdict: the answer replaced the "
                "checks or the kernel's side of their channel")
    if "CheckFailed" in errors:  # a check began in the kernel, and no verdict reached the grader
        return ("a check failed in the kernel, yet no verdict of it reached the grader: the answer cut or replaced the "
                "kernel's side of the checks' channel")
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

