"""The instructor's grader: what turns students' notebooks into scores and feedback.

Run from the course root (the folder of ``nbgrader_config.py``), never imported by a student's notebook:

    python -m grader --help      # the commands: one module each in ``commands`` (``cli.COMMANDS`` lists them)

``cli`` runs a command's module; ``batch`` grades a class after ``preflight`` (``staging`` copies the plain files
of a submission, ``nbgrader_process`` runs nbgrader, ``gradebook`` merges each student's rows; one sandboxed kernel
per student, out-of-band verdicts); ``cluster`` and ``results`` grade on Dask workers or Slurm jobs; ``sandbox`` is
the policy of the kernel student code runs in, which ``launcher`` applies, forked from the ``zygote``, judged by
``verdicts``; ``nbgrader_plugins`` holds the preprocessors and exporters ``nbgrader_config.py`` names; ``course``
finds the course on disk; ``report`` summarises a class; ``testing`` holds what the tests and the bench drive
(the corpus of honest and hostile submissions, the JupyterHub driver).  ``translab`` (the student library) never
imports this package; what the processes agree on is ``translab.contract``.
"""
import sys

# jsonschema (under nbformat) imports its optional IRI format checker, rfc3987_syntax, which compiles a Lark
# grammar when imported: 1 s of every grading process (0.14 s for nbformat without it), for string formats that
# no notebook schema uses and nbformat never checks.  jsonschema does without it (an ImportError it expects).
sys.modules.setdefault("rfc3987_syntax", None)
