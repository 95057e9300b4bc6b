"""Called once a process's grading work is done: by ``python -m grader`` after its command (``grader/__main__.py``)
and by the exporter once the batch it ran in nbgrader's process has ended
(``grader.nbgrader_plugins.batch_autograde_exporter``).  The process then ends without the interpreter's last garbage
collections.  Those walked every object the process had imported, after the batch had printed its summary, and
whoever waited for the command (a script, ``make``, the formgrader's button, the bench) waited for them: 0.45 s of
CPU on 2 cores in nbgrader's process (nbgrader's, jupyter's and SQLAlchemy's objects), 0.25 s in a warm press's
``python -m grader autograde --warm`` (Dask's).  ``gc.freeze`` at exit leaves the rest of the exit as it was: the
other exit handlers, logging's flush, each object freed when its last reference goes, and the exit code."""
from __future__ import annotations

import atexit
import gc

_registered = False  # once per process: the formgrader's server runs the exporter at each press


def skip_final_collections() -> None:
    global _registered
    if not _registered:
        atexit.register(gc.freeze)  # exit handlers run before the interpreter's own collections
        _registered = True
