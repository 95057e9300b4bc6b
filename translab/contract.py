"""What the processes of a graded submission agree on, named once for every side.

Four processes handle a submission: the batch (``grader.grading.batch``), nbgrader with its preprocessors, the student's
sandboxed kernel (translab and the student's code) and the checker outside it (``grader.grading.verdicts``).  They talk
through environment variables, one folder layout and the last line of a failed check's error value; this module
names each of them.  It is a leaf: it imports nothing of translab or the grader, so every side can import it, and
the student release carries it.
"""
from __future__ import annotations

import re

# The assignment's folder name in nbgrader's layout (source/, release/, submitted/<student>/, autograded/, ...).
ASSIGNMENT = "transfer_learning"

# --- environment variables

GRADING_ENV = "NBGRADER_EXECUTION"             # set by nbgrader while it executes a notebook: the grading budget
FAST_ENV = "TRANSLAB_FAST"                     # the grading budget outside nbgrader (tests, a quick run)
HOME_ENV = "TRANSLAB_HOME"                     # a student release's folder, for a non-editable install
DATA_DIR_ENV = "TRANSLAB_DATA_DIR"             # the data alone elsewhere
CACHE_ENV = "TRANSLAB_CACHE"                   # the downloads elsewhere
REFERENCES_ENV = "TRANSLAB_REFERENCES"         # the reference tensors' folder
EXCHANGE_ENV = "TRANSLAB_EXCHANGE"             # nbgrader's exchange shared by a hub's users
CHECKER_ENV = "TRANSLAB_CHECKER"               # the checker's socket, in a grading kernel's environment
CHECKER_DIR_ENV = "TRANSLAB_CHECKER_DIR"       # where the batch puts a student's checker sockets
# A student's two checkers (a notebook's, and the next notebook's, started with its kernel while this one runs), each
# in a folder of its own below CHECKER_DIR with its kernel's sockets: no kernel reaches the other notebook's.
CHECKER_SOCKET_NAMES = ("checker", "checker-next")
SANDBOX_STATUS_ENV = "TRANSLAB_SANDBOX_STATUS"  # the batch's file where the launcher says how it isolated a kernel
VARIANT_ENV = "TRANSLAB_VARIANT"               # the student's variant code, set by the grader (and a hub)
CONFIG_ENV = "TRANSLAB_CONFIG_DIR"             # where a student's saved id or code lives (default ~/.config/translab)
UNSANDBOXED_ENV = "TRANSLAB_UNSANDBOXED"       # "1": grading without the sandbox was asked for (--no-sandbox)
GRADER_RUN_ENV = "TRANSLAB_GRADER_RUN"       # "1": an nbgrader process translab's own commands started
COURSE_ENV = "TRANSLAB_COURSE"                 # a Dask worker's checkout of the course (grader.grading.cluster)

# --- output lines the grader reads back from a submission's own run

# each line part 5's MLM demo prints starts with it (translab.mlm.masking_lines and guess_lines); the grader's note
# quotes those lines as submitted and as re-run beside the own-run answer (grader.course.own_run).  The masking's
# lines are deterministic, the guesses' lines (which start with MLM_GUESSES) come from training.
MLM_DEMO_PREFIX = "MLM demo"
MLM_GUESSES = MLM_DEMO_PREFIX + ", guesses"

# --- the diagnosis tag: a failed check's error value ends with the keys of the misconceptions it named

_TAG = re.compile(r"\n?\[diagnosis: ([^\]\n]{1,600})\]\s*$")


def tagged(message: str, key: str) -> str:
    """``message`` with its diagnosis tag (none for an empty key)."""
    return message + (f"\n[diagnosis: {key}]" if key else "")


def untagged(value: str) -> tuple[str, str]:
    """(message, key) of an error value; key "" when it carries no tag."""
    found = _TAG.search(value)
    return (value[:found.start()], found.group(1)) if found else (value, "")


WATCH_TAMPERED_KEY = "watch_tampered"  # a check's failure key when the answer switched off what watches it: flagged

class CheckFailed(AssertionError):
    """A test cell's check failed; the message explains why.

    ``str(error)`` (nbgrader's ``evalue``) is the message and, when the check named the misconception, a last line
    ``[diagnosis: key ...]`` (``translab.diagnosis``; ``grader.grading.report`` counts them).  In a notebook the error
    renders as its message alone (IPython's ``_render_traceback_``): JupyterLab, nbgrader's Validate dialog and the
    feedback show what was expected, what was found and the likely mistake, no traceback from inside the checker and
    no file path.  nbgrader still records an error output, so the cell scores 0."""

    def __init__(self, message: str = "", key: str = ""):
        self.message, self.key = str(message), str(key)
        super().__init__(tagged(self.message, self.key))

    def _render_traceback_(self) -> list[str]:
        first, *rest = self.message.splitlines() or [""]
        return [f"\x1b[0;31mCheckFailed\x1b[0m: {first}", *rest]
