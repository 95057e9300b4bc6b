"""How long the lab takes a student: each solution notebook top to bottom in a fresh kernel, at the student budget
and at the grading budget, and each training cell on its own (what ``budget.estimate`` announces)."""
from __future__ import annotations

import os
import re
import tempfile
import time
from contextlib import contextmanager

from translab import variants
from translab.contract import ASSIGNMENT, GRADING_ENV
from translab.paths import REPO_ROOT

@contextmanager
def nbgrader_execution(value: str | None):
    """NBGRADER_EXECUTION set to ``value`` (unset for None) inside the block, as it was after: the kernels
    started inside inherit it, so the notebooks run at the budget nbgrader would give them."""
    saved = os.environ.pop(GRADING_ENV, None)
    if value is not None:
        os.environ[GRADING_ENV] = value
    try:
        yield
    finally:
        os.environ.pop(GRADING_ENV, None)
        if saved is not None:
            os.environ[GRADING_ENV] = saved


def as_a_student() -> None:
    """The kernels this process starts get a student's own configuration for part 2's counts, as the grader or the
    release's table gives one (``translab.variants``)."""
    os.environ.setdefault(variants.VARIANT_ENV, variants.derive_code(b"translab-bench", "student"))


ESTIMATE = re.compile(r"""budget\.estimate\(\s*["'](\d\d)["']\s*,\s*["']([^"']+)["']\s*\)""")


def training_cells(notebook) -> dict:
    """{cell name: seconds} of an executed notebook's training cells (those calling ``budget.estimate``), from
    nbclient's timing record: what ``Budget.estimate`` prints before the cell runs."""
    from datetime import datetime
    found = {}
    for cell in notebook.cells:
        match = ESTIMATE.search(cell.source) if cell.cell_type == "code" else None
        timing = cell.metadata.get("execution", {})
        if match and "iopub.execute_input" in timing and "shell.execute_reply" in timing:
            began, ended = (datetime.fromisoformat(timing[k].replace("Z", "+00:00"))
                            for k in ("iopub.execute_input", "shell.execute_reply"))
            found[match.group(2)] = round((ended - began).total_seconds(), 1)
    return found


# The kernel's peak resident memory, asked of the kernel itself in a last cell: what a hub must give each user.
# Linux's VmHWM, not getrusage's ru_maxrss: that one keeps, across fork and exec, the resident size of the process
# that started the kernel (the bench's own 853 MB, after its training probe, was every notebook's "peak").
PEAK_CELL = ("import re\nwith open('/proc/self/status') as status:\n"
             "    print('KERNEL_PEAK_KB', re.search(r'VmHWM:\\s+(\\d+)', status.read()).group(1))")


def kernel_peak_mb(notebook) -> float | None:
    """The peak memory of the kernel that ran ``notebook`` (with ``PEAK_CELL`` last), in MB."""
    said = "".join(output.get("text", "") for output in notebook.cells[-1].get("outputs", []))
    found = re.search(r"KERNEL_PEAK_KB (\d+)", said)
    return round(int(found.group(1)) / 1024, 1) if found else None


def notebook_times(timeout: float = 3600) -> dict:
    """Wall time and the kernel's peak memory of each solution notebook run top to bottom in a fresh kernel, at the
    student budget and at the grading budget (``NBGRADER_EXECUTION`` set, as nbgrader sets it); null with the
    error if one fails."""
    import nbformat
    from nbclient import NotebookClient

    as_a_student()
    times = {}
    for path in sorted((REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb")):
        times[path.stem] = {}
        for budget, value in (("student_s", None), ("nbgrader_s", "autograde")):
            notebook = nbformat.read(path, as_version=4)
            notebook.cells.append(nbformat.v4.new_code_cell(PEAK_CELL))
            with tempfile.TemporaryDirectory(prefix="translab-bench-nb-") as tmp, nbgrader_execution(value):
                start = time.perf_counter()
                try:
                    NotebookClient(notebook, timeout=timeout, kernel_name="python3", record_timing=True,
                                   resources={"metadata": {"path": tmp}}).execute()
                    times[path.stem][budget] = round(time.perf_counter() - start, 1)
                    times[path.stem].setdefault("cells", {})[budget.removesuffix("_s")] = training_cells(notebook)
                    times[path.stem][budget.replace("_s", "_peak_mb")] = kernel_peak_mb(notebook)
                except Exception as error:  # a failing notebook is a finding, not a crash of the bench
                    times[path.stem][budget] = None
                    times[path.stem][budget.replace("_s", "_error")] = f"{type(error).__name__}: {str(error)[:300]}"
    return times
