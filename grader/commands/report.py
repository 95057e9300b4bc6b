"""``make report``: reports/, per task who passed and the diagnosed misconceptions ranked (``grader.grading.report``)."""
from __future__ import annotations

from pathlib import Path

from ..course import GradingError

HELP = "reports/: per task who passed, the diagnosed misconceptions ranked (CSV, HTML)"


def arguments(parser) -> None:
    """No options."""


def run(root: Path, args) -> int:
    from grader.grading import report  # lazy: torch and the count diagnosis (3.7 s); --help imports every command
    try:
        print(report.summary(report.write(root)))
    except FileNotFoundError as error:
        raise GradingError(str(error)) from error
    return 0
