"""The grader's modules before they were grouped by role, still importable for one release: an existing course's
``nbgrader_config.py`` imports ``grader.mathml`` and names ``grader.mathml.markdown2html``, and a kernelspec written
by an older batch runs ``python -m grader.launcher``.  Each old path gives the module at its new path (the same
object, so a patch through either name is seen by both) with a ``FutureWarning`` that names where it went.
``grader/__init__.py`` installs the finder; remove it, this module and the table in the release after next."""
from __future__ import annotations

import importlib
import sys
import warnings

# old dotted path -> new (a module's name, or its role folder and a name that says what it holds)
OLD_PATHS = {
    "grader.after_grading": "grader.course.after_grading",
    "grader.demos": "grader.course.demos",
    "grader.feedback_rule": "grader.course.feedback_rule",
    "grader.gradebook": "grader.course.gradebook",
    "grader.lms": "grader.course.lms_grades",
    "grader.lms_zip": "grader.course.lms_zip",
    "grader.mathml": "grader.course.mathml",
    "grader.roster": "grader.course.roster",
    "grader.student_release": "grader.course.student_release",
    "grader.variants": "grader.course.variants",
    "grader.withheld": "grader.course.withheld",
    "grader.batch": "grader.grading.batch",
    "grader.cluster": "grader.grading.cluster",
    "grader.nbgrader_process": "grader.grading.nbgrader_process",
    "grader.nbgrader_selection": "grader.grading.nbgrader_selection",
    "grader.preflight": "grader.grading.preflight",
    "grader.report": "grader.grading.report",
    "grader.results": "grader.grading.result_folders",
    "grader.similarity": "grader.grading.similarity",
    "grader.staging": "grader.grading.plain_copies",
    "grader.verdicts": "grader.grading.verdicts",
    "grader.cgroups": "grader.isolation.cgroups",
    "grader.kernel_environment": "grader.isolation.kernel_environment",
    "grader.kernel_stages": "grader.isolation.kernel_stages",
    "grader.launcher": "grader.isolation.launcher",
    "grader.processes": "grader.isolation.processes",
    "grader.sandbox": "grader.isolation.sandbox",
    "grader.zygote": "grader.isolation.zygote",
    "grader.reference_margins": "grader.references.margins",
    "grader.references_bert": "grader.references.bert",
}


class _OldPath:
    """Imports as the module at its new path; run with ``python -m``, runs that module's code as ``__main__``.
    (A loader and a finder by their methods, not ``importlib.abc``'s classes: importing that costs every grader
    process 18 ms at start, for paths only old courses use.)"""

    def __init__(self, new: str):
        self.new = new

    def create_module(self, spec):
        return importlib.import_module(self.new)

    def exec_module(self, module) -> None:
        """Nothing: ``create_module`` returned the new module, already run."""

    def get_code(self, fullname: str):
        import importlib.util
        spec = importlib.util.find_spec(self.new)
        return spec.loader.get_code(self.new)

    def is_package(self, fullname: str) -> bool:
        return False


class OldPathFinder:
    def find_spec(self, fullname: str, path=None, target=None):
        new = OLD_PATHS.get(fullname)
        if new is None:
            return None
        import importlib.util
        warnings.warn(f"{fullname} is now {new}: change the course's nbgrader_config.py (or regenerate it) and "
                      "anything else that names the old path; the old one goes in the release after next",
                      FutureWarning, stacklevel=2)
        return importlib.util.spec_from_loader(fullname, _OldPath(new))


def install() -> None:
    if not any(isinstance(finder, OldPathFinder) for finder in sys.meta_path):
        sys.meta_path.append(OldPathFinder())
