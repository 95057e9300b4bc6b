"""``python -m grader``: the grading commands behind the Makefile (see ``grader.batch``)."""
import sys

from .batch import main

sys.exit(main())
