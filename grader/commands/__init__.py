"""The instructor's commands, one module each, as ``python -m grader`` (``grader.cli``) and the Makefile run them:
``release``, ``feedback``, ``grades``, ``collect``.  ``autograde`` is ``grader.batch``; ``report``,
``similarity``, ``students``, ``variants`` and ``student-release`` are the modules of those names.
"""
