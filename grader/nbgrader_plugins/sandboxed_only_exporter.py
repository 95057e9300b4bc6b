"""Autograde's exporter (``c.Autograde.exporter_class``): no autograde runs student code outside the sandbox."""
from __future__ import annotations

import os

from nbconvert.exporters import NotebookExporter

from translab.contract import UNSANDBOXED_ENV

from .guarded_execute import GuardedExecute


class SandboxedAutograde(RuntimeError):
    """Autograding was started where student code would run without ``grader.sandbox``."""


class SandboxedOnlyExporter(NotebookExporter):
    """nbgrader's exporter for ``Autograde``, which refuses to be made unless the notebooks will run in the
    sandbox kernel (``python -m grader autograde`` selects it) or grading without it was asked for
    (``--no-sandbox``).  The formgrader's Autograde button and a plain ``nbgrader autograde`` would otherwise run
    student code as the instructor, with the gradebook, the solutions and the network in reach.  nbgrader makes the
    exporter before it touches a submission, so a refusal removes nothing already graded."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        from ..sandbox import KERNEL_NAME
        kernel = GuardedExecute(config=self.config).kernel_name  # as the config and command line set it
        if kernel != KERNEL_NAME and os.environ.get(UNSANDBOXED_ENV) != "1":
            raise SandboxedAutograde(
                f"translab grades only in its sandbox, and this autograde would run student code in the kernel "
                f"{kernel!r}, as you, with your files, the gradebook and the network (the formgrader's Autograde "
                "button and plain `nbgrader autograde` start it that way). Nothing was graded or removed. Grade with "
                "`make autograde` in the course folder, or `python -m grader autograde --student STUDENT_ID` for one "
                "student, then reload this page. Trusted notebooks only: `python -m grader autograde --no-sandbox`.")
