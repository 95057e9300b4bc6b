"""``python -m grader.nbgrader_cli ARGS``: nbgrader's own command line (``python -m nbgrader ARGS``), started
through this package so that its import settings (``grader/__init__.py``) apply: the batch runs one nbgrader
process per student, and each saved a second."""
from nbgrader.apps.nbgraderapp import main

if __name__ == "__main__":
    main()
