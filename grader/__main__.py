"""``python -m grader``: the grading commands behind the Makefile (``grader.cli``)."""
import sys

from .cli import main

sys.exit(main())
