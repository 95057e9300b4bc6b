"""Imported by the batch's fork server only (``grader.grading.nbgrader_process.WARM_IMPORTS``): when the batch ends,
the fork server ends at once instead of tearing down the interpreter it filled with nbgrader's imports (0.5 s on
2 cores), during which it still held the batch's stdout and stderr, so that whoever read the batch's output (a
script, a test, the formgrader) waited for it after the batch had ended.  It holds nothing to save: only modules."""
from __future__ import annotations

import atexit
import os
import sys

_FORK_SERVER = os.getpid()  # the process that imported this; its children (nbgrader, forked) have pids of their own


@atexit.register
def _end_at_once() -> None:
    if os.getpid() != _FORK_SERVER:  # an nbgrader child running the exit handlers it inherited: its own exit
        return
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
