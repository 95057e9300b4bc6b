"""One grading run: the checks before it (``preflight``), a batch of students (``batch``: ``plain_copies`` copies a
submission's plain files, ``nbgrader_process`` runs nbgrader, ``verdicts`` judges each answer outside the kernel),
the same on Dask workers (``cluster``) or in Slurm jobs (``result_folders``), and what a graded class reads back
(``report``, ``similarity``).  Imports ``course``, ``isolation`` and ``references``."""
