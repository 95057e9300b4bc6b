"""What an nbgrader converter selected, as translab's exporters read it (``nbgrader_plugins/batch_autograde_exporter``
and ``feedback_gate_exporter``): nbgrader makes a converter's exporter after it has listed the submissions and before
it touches one, so an exporter can judge that list, hand it on, or narrow it.  The converter's ``assignments`` maps
each submission folder to its notebooks."""
from __future__ import annotations

import os
import re

from nbgrader.converters.base import NbGraderException

from translab.contract import GRADER_RUN_ENV


def run_by_translab() -> bool:
    """This nbgrader process was started by one of translab's commands, which did the exporters' work already."""
    return os.environ.get(GRADER_RUN_ENV) == "1"


def listed(converter, step: str) -> dict[str, tuple[str, str] | None]:
    """{submission folder: (assignment, student), or None where the folder does not read as one} of what the
    converter listed below the course's ``step`` folder (its ``submitted_directory``, ``autograded_directory``...)."""
    course = converter.coursedir
    pattern = course.format_path(step, "(?P<student_id>[^/]+)", "(?P<assignment_id>[^/]+)", escape=True)
    found = {folder: re.fullmatch(pattern, folder) for folder in sorted(converter.assignments)}
    return {folder: (match.group("assignment_id"), match.group("student_id")) if match else None
            for folder, match in found.items()}


def refusal(log, message: str) -> NbGraderException:
    """nbgrader's app exits 1 on this exception without a word: the message goes to its log first."""
    log.error("%s", message)
    return NbGraderException(message)
