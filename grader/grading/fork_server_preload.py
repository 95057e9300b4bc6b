"""Imported by the batch's fork server only (``grader.grading.nbgrader_process.WARM_IMPORTS``): what each nbgrader
process it forks did again for itself, done once before the forks (0.15 s a student on 2 cores).  nbformat's schema
validators are compiled: the strict one that reads a notebook, and the relaxed one that nbconvert checks the
preprocessors' output with.  IPython is imported: jupyter_client finds the kernelspecs through ``IPython.paths``.
So is SQLAlchemy's SQLite dialect, which each gradebook's engine loads.  Last, everything the fork server holds is
frozen (``gc.freeze``): an nbgrader process's collections then never walk it, and so never copy its pages."""
from __future__ import annotations

import gc

import IPython.paths  # noqa: F401 - the import is the point
import nbformat.validator
import sqlalchemy.dialects.sqlite  # noqa: F401 - the import is the point

for _relaxed in (False, True):
    nbformat.validator.get_validator(4, relax_add_props=_relaxed)  # nbformat keeps each one it compiled
gc.freeze()
