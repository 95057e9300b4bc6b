"""The instructor's grader: what turns students' notebooks into scores and feedback.

Run from the course root (the folder of ``nbgrader_config.py``), never imported by a student's notebook:

    python -m grader --help      # the commands: one module each in ``commands`` (``cli.COMMANDS`` lists them)

Its folders are its roles, each importing only those listed before it:

* ``course``: the course on disk (its folders, roster, gradebook, variants, what a release withholds, the LMS's
  files in and out, what feedback shows);
* ``references``: the reference answers the checks judge against, and the code that builds them;
* ``isolation``: the kernel student code runs in (``sandbox`` decides its walls, ``launcher`` builds them, forked
  from a ``zygote``);
* ``grading``: one grading run (``batch`` after ``preflight``; nbgrader in ``nbgrader_process``; out-of-band
  ``verdicts``; ``cluster`` and ``result_folders`` on Dask workers or Slurm jobs; the class ``report``);
* ``commands``: one module per command, which ``cli`` runs; ``nbgrader_plugins``: the preprocessors and exporters
  ``nbgrader_config.py`` names; ``testing``: what the tests and the bench drive (the corpus of honest and hostile
  submissions, the JupyterHub driver).

``moved`` keeps the paths from before the folders importable for one release.  ``translab`` (the student library)
never imports this package; what the processes agree on is ``translab.contract``.
"""
import sys

from grader import moved

# jsonschema (under nbformat) imports its optional IRI format checker, rfc3987_syntax, which compiles a Lark
# grammar when imported: 1 s of every grading process (0.14 s for nbformat without it), for string formats that
# no notebook schema uses and nbformat never checks.  jsonschema does without it (an ImportError it expects).  `make
# setup` puts the same line in the environment's site-packages (skip_iri_syntax.pth), for the processes that import
# jsonschema before this package: plain `nbgrader` commands and Jupyter servers.
sys.modules.setdefault("rfc3987_syntax", None)

moved.install()
