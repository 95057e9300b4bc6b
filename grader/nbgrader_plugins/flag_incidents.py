"""Autograde step after ``SaveAutoGrades``: a notebook whose grading was cut short is flagged for the instructor."""
from __future__ import annotations

from nbgrader.api import Gradebook
from nbgrader.preprocessors import NbGraderPreprocessor

from .guarded_execute import INCIDENTS


class FlagIncidents(NbGraderPreprocessor):
    """Flag, in the gradebook, a notebook whose grading ``GuardedExecute`` cut short, and log why."""

    def preprocess(self, nb, resources):
        incidents = resources.get(INCIDENTS)
        if incidents:
            info = resources["nbgrader"]
            with Gradebook(info["db_url"]) as gradebook:  # the URL nbgrader itself uses
                notebook = gradebook.find_submission_notebook(info["notebook"], info["assignment"], info["student"])
                notebook.flagged = True
                gradebook.db.commit()
            self.log.warning("flagged %s for review: %s", info["notebook"], "; ".join(incidents))
        return nb, resources
