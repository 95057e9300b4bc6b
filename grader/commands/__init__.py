"""The instructor's commands, one module each, run as ``python -m grader COMMAND`` (``grader.cli.COMMANDS`` lists
them) and by the Makefile's targets of the same names.  Each module gives ``HELP``, ``arguments(parser)`` and
``run(root, args)``; the work itself lives in the modules of ``grader/`` a command names.
"""
