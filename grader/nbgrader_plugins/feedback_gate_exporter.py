"""Feedback's exporter (``c.GenerateFeedback.exporter_class``): plain ``nbgrader generate_feedback`` and the
formgrader's Generate Feedback buttons follow ``make feedback``'s rule (``grader.course.feedback_rule``).

Left to itself, nbgrader releases a written answer nobody has graded yet as 0, without a word.  nbgrader makes the
exporter after it has listed the submissions and before it writes a page, so this exporter checks the students
it listed against the gradebook: under ``release = "complete"`` (the default) it refuses while one of them has an
answer awaiting its manual grade, naming them, and nothing is written; ``graded-only`` leaves those students out
(the converter's ``assignments``); ``force`` releases everyone.  The instructor chooses with
``--FeedbackGateExporter.release=graded-only`` on the command line, or in ``nbgrader_config.py`` for the
formgrader.  Inside translab's own commands (``GRADER_RUN_ENV``), which applied the rule already, it is nbgrader's
``HTMLExporter`` and nothing more.
"""
from __future__ import annotations

import os
from pathlib import Path

from nbconvert.exporters import HTMLExporter
from nbgrader.converters import GenerateFeedback
from traitlets import Enum

from ..course import GradingError
from grader.course.feedback_rule import FEEDBACK_MODES, held_back
from grader.grading.nbgrader_selection import listed, refusal, run_by_translab

HOW = {mode: f"`--FeedbackGateExporter.release={mode}`, or c.FeedbackGateExporter.release = {mode!r} in "
             "nbgrader_config.py for the formgrader's buttons" for mode in FEEDBACK_MODES}


class FeedbackGateExporter(HTMLExporter):
    """Made by nbgrader's ``GenerateFeedback``; outside translab's commands it applies the release rule to the
    students nbgrader selected."""

    release = Enum(FEEDBACK_MODES, default_value="complete", help=(
        "complete: refuse while a selected student has an answer awaiting its manual grade; graded-only: leave "
        "those students out; force: release everyone, ungraded answers as 0")).tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        converter = self.parent
        if not isinstance(converter, GenerateFeedback) or run_by_translab():
            return
        course = converter.coursedir
        students = {found[1]: folder for folder, found in listed(converter, course.autograded_directory).items()
                    if found is not None}
        if not students:
            return
        try:
            pending = held_back(Path(os.path.abspath(course.root)), self.release, HOW, sorted(students))
        except GradingError as error:
            converter.assignments = {}  # nothing written, whatever nbgrader does next
            raise refusal(self.log, str(error)) from error
        if pending:
            self.log.warning("feedback for the fully graded students; left out until graded: %s", ", ".join(pending))
            left_out = {students[student] for student in pending}
            converter.assignments = {folder: notebooks for folder, notebooks in converter.assignments.items()
                                     if folder not in left_out}
