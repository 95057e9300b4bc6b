"""What a cold start waits for before translab's grading can begin, each timed alone in a new interpreter: the
imports of nbgrader's command (before it reads a configuration, so before the exporter can hand anything to the
batch) and those of the kernels' zygote (before the batch's first kernel can be forked).  Issue 53 judges plain
``nbgrader autograde`` against the project path and a batch's first submission against its next ones; these two
figures name the seconds between them that no code of the course runs in."""
from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from grader.isolation.zygote import STARTUP

# what the ``nbgrader`` console script imports before anything else (``nbgrader.apps.nbgraderapp:main``); the
# package's __init__ imports every server extension of nbgrader's with it
NBGRADER_COMMAND = ("nbgrader.apps",)
# what the kernels' zygote imports before it forks the batch's first kernel
ZYGOTE_STARTUP = STARTUP


def import_seconds(modules: tuple[str, ...], env: dict, cwd: Path, timeout: float = 120) -> float | None:
    """Wall seconds of a new interpreter (this one's executable) that imports ``modules`` and exits, or None if
    the import failed."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", f"import {', '.join(modules)}"], cwd=cwd, env=env,
                          capture_output=True, timeout=timeout)
    return round(time.perf_counter() - start, 2) if done.returncode == 0 else None
