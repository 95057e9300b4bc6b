"""Autograde's exporter (``c.Autograde.exporter_class``): plain ``nbgrader autograde`` and the formgrader's
Autograde button grade through translab's batch, exactly as ``make autograde`` does.

nbgrader's own loop would run each notebook in a kernel it starts as the instructor, with the gradebook, the
solutions and the network in reach.  nbgrader makes the exporter after it has listed the submissions to grade and
before it touches one, so this exporter, made by an ``Autograde`` that none of translab's commands started, hands
that list (the assignment, ``--student``, ``--force``, ``--create``, ``student_id_exclude``, as nbgrader read them)
to ``python -m grader autograde --warm`` (``warm``: the course's warm grader, kept between presses; without it a
batch of its own).  From the formgrader's button that runs in a process of its own, since nbgrader runs the button's
Autograde inside the notebook server; from the command line in nbgrader's own short-lived process, which has
imported most of what the batch's process would import again (what plain ``nbgrader autograde`` still spends over
``make autograde``, nbgrader's own start, ``make bench`` measures).  Either way: a plain-file copy, sandboxed
kernels forked from the zygote, verdicts decided outside the student's process, a per-student gradebook merged in
one transaction, flags and ``autograded/autograde_report.csv``.  nbgrader's loop is then left nothing to do (the
converter's ``assignments`` emptied), so nbgrader reports the batch's success, or its failure with the batch's own
words.

Inside the nbgrader processes of translab's commands (``GRADER_RUN_ENV``), and where the instructor opted out of
the sandbox for trusted notebooks (``UNSANDBOXED_ENV=1``, what ``--no-sandbox`` sets), it is nbgrader's
``NotebookExporter`` and nothing more.
"""
from __future__ import annotations

import contextlib
import io
import os
import subprocess
import sys
import traceback
from pathlib import Path

from nbconvert.exporters import NotebookExporter
from nbgrader.api import Gradebook, MissingEntry
from nbgrader.apps.autogradeapp import AutogradeApp
from nbgrader.converters import Autograde
from traitlets import Bool, Float, Int

from translab.contract import ASSIGNMENT, UNSANDBOXED_ENV

from grader.grading.nbgrader_selection import listed, refusal, run_by_translab
from grader.grading.process_exit import skip_final_collections

from ..course import students
from .guarded_execute import GuardedExecute

# options of the nbgrader command line the batch passes on to its own nbgrader processes (the rest it sets itself)
PASSED_ON = ("Execute", "GuardedExecute", "ExecutePreprocessor", "LimitOutput")


class BatchAutogradeExporter(NotebookExporter):
    """Made by nbgrader's ``Autograde``; outside translab's commands it grades the submissions nbgrader selected
    with translab's batch and leaves nbgrader nothing to run."""

    jobs = Int(1, help="Students graded at a time when nbgrader autograde hands a class to the batch (make "
                       "autograde's JOBS)").tag(config=True)
    warm = Bool(True, help="Grade on the course's warm grader (grader.grading.warm_grader): the first press starts "
                           "it, the next ones find its grading process started; False: each press starts a batch of "
                           "its own").tag(config=True)
    student_timeout = Float(None, allow_none=True, help="Wall-clock seconds for one student, every notebook "
                            "included (the batch's --student-timeout; None: its default)").tag(config=True)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        converter = self.parent
        if not isinstance(converter, Autograde) or run_by_translab() or os.environ.get(UNSANDBOXED_ENV) == "1":
            return
        if not GuardedExecute(parent=converter).enabled:
            raise refusal(self.log, "--no-execute would score the outputs saved in the submissions, which a student "
                          "can write at will: translab scores only what its checker saw run. Nothing was graded; "
                          "autograde without --no-execute")
        selected = self._selected(converter)
        converter.assignments = {}  # the batch grades them; nbgrader's own loop runs nothing
        if selected:
            self._run_batch(converter, selected)

    def _selected(self, converter: Autograde) -> list[str]:
        """The students whose submission nbgrader would grade now, in its order, with its rules for skipping."""
        course = converter.coursedir
        root = Path(os.path.abspath(course.root))
        if course.db_url != f"sqlite:///{root / 'gradebook.db'}":
            raise refusal(self.log, f"translab's batch grades into {root / 'gradebook.db'}, and this autograde "
                          f"names {course.db_url}: grade with the course's nbgrader_config.py")
        excluded = set(filter(None, course.student_id_exclude.split(",")))
        selected = []
        for folder, found in listed(converter, course.submitted_directory).items():
            if found is None:
                raise refusal(self.log, f"could not read the student and assignment of {folder}")
            assignment, student = found
            if assignment != ASSIGNMENT:
                raise refusal(self.log, f"translab grades the assignment {ASSIGNMENT!r}, not {assignment!r}")
            if student in excluded:
                continue
            if course.notebook_id != "*":
                self.log.warning("translab grades a submission's notebooks together: all of %s's notebooks, not "
                                 "only %s", student, course.notebook_id)
            elif not converter.force and not converter.init_destination(assignment, student):
                continue  # graded already and not submitted again since (nbgrader said so): --force regrades it
            selected.append(student)
        if selected and not converter.create_student:
            with Gradebook(course.db_url, course.course_id) as gradebook:
                unknown = [s for s in selected if not _known(gradebook, s)]
            if unknown:
                raise refusal(self.log, f"No student with ID {', '.join(map(repr, unknown))} exists in the "
                              "database (--create adds them, or `make students ROSTER=...`)")
        return selected

    def _run_batch(self, converter: Autograde, student_ids: list[str]) -> None:
        root = Path(os.path.abspath(converter.coursedir.root))
        arguments = ["--root", str(root), "autograde", "--jobs", str(self.jobs), *(["--warm"] if self.warm else [])]
        if student_ids != students(root):  # the batch's own "everyone": without --student it grades those
            arguments += [arg for student in student_ids for arg in ("--student", student)]
        if self.student_timeout is not None:
            arguments += ["--student-timeout", str(self.student_timeout)]
        arguments += _passed_on(converter)
        here = isinstance(converter.parent, AutogradeApp)  # the command line's process, not the notebook server's
        self.log.info("translab grades %d submission(s) in its sandbox (%s): python -m grader %s", len(student_ids),
                      "in nbgrader's process" if here else "in a process of its own", " ".join(arguments))
        said = _LoggedLines(self.log)
        code = _in_this_process(root, arguments, said) if here else _in_a_process_of_its_own(root, arguments, said)
        skip_final_collections()  # nbgrader's process now only reports: no 0.45 s of collections at its end
        if code != 0:
            raise refusal(self.log, f"translab's batch exited {code}: {said.lines[-1] if said.lines else 'no output'}")


class _LoggedLines(io.TextIOBase):
    """The batch's output, a line at a time into nbgrader's log (which the formgrader's dialog shows)."""

    def __init__(self, log):
        self.log, self.lines, self._part = log, [], ""

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        *complete, self._part = (self._part + text).split("\n")
        for line in complete:
            self.lines.append(line.rstrip())
            self.log.info("%s", line.rstrip())
        return len(text)

    def end(self) -> None:
        """The last line, if the batch ended without its newline."""
        if self._part:
            self.write("\n")


def _in_this_process(root: Path, arguments: list[str], said: _LoggedLines) -> int:
    from grader import cli  # the batch's imports, here once nbgrader has chosen its exporter
    with contextlib.chdir(root), contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
        try:
            code = cli.main(arguments)
        except SystemExit as ended:  # argparse's refusal of an option
            code = ended.code if isinstance(ended.code, int) else 1
        except Exception:  # noqa: BLE001  reported as the batch's own process would have reported it
            traceback.print_exc()
            code = 1
    said.end()
    return code


def _in_a_process_of_its_own(root: Path, arguments: list[str], said: _LoggedLines) -> int:
    with subprocess.Popen([sys.executable, "-m", "grader", *arguments], cwd=root, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, bufsize=1) as batch:
        for line in batch.stdout:
            said.write(line)
    said.end()
    return batch.returncode


def _known(gradebook: Gradebook, student: str) -> bool:
    try:
        gradebook.find_student(student)
        return True
    except MissingEntry:
        return False


def _passed_on(converter: Autograde) -> list[str]:
    """The nbgrader command line's ``--Execute.timeout=...`` and the like, for the batch's nbgrader processes."""
    app = converter.parent
    given = getattr(app, "cli_config", None) or {}
    return [f"--{section}.{name}={value}" for section in PASSED_ON for name, value in given.get(section, {}).items()]
