"""nbgrader configuration of the course translab; the course root is the repository root.

solutions/transfer_learning/  instructor notebooks (nbgrader's source)
notebooks/transfer_learning/  student notebooks (nbgrader's release, `make release`)
submitted/ autograded/ feedback/ downloaded/ gradebook.db   working folders, git-ignored
"""
import os

from nbconvert.preprocessors import ClearMetadataPreprocessor, CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import (AssignLatePenalties, ClearHiddenTests, ClearOutput, DeduplicateIds, GetGrades,
                                    IgnorePattern, LimitOutput, OverwriteCells, OverwriteKernelspec, SaveAutoGrades)

from grader.course.mathml import NBGRADER_TEMPLATES, TEMPLATES
from grader.nbgrader_plugins.add_code_interview import AddCodeInterview
from grader.nbgrader_plugins.batch_autograde_exporter import BatchAutogradeExporter
from grader.nbgrader_plugins.check_cell_metadata_precompiled import CheckCellMetadataPrecompiled
from grader.nbgrader_plugins.clear_outputs_after_hidden_tests import ClearOutputsAfterHiddenTests
from grader.nbgrader_plugins.demote_headings import DemoteHeadings
from grader.nbgrader_plugins.feedback_gate_exporter import FeedbackGateExporter
from grader.nbgrader_plugins.flag_incidents import FlagIncidents
from grader.nbgrader_plugins.guarded_execute import GuardedExecute
from grader.nbgrader_plugins.hide_hidden_test_tracebacks import HideHiddenTestTracebacks
from grader.nbgrader_plugins.note_own_run import NoteOwnRun
from grader.nbgrader_plugins.record_submitted_figures import RecordSubmittedFigures
from grader.nbgrader_plugins.record_variant_shown import RecordVariantShown
from grader.nbgrader_plugins.remove_after_grading import RemoveAfterGrading
from grader.nbgrader_plugins.remove_grader_notes import RemoveGraderNotes
from grader.nbgrader_plugins.sanitize_student_content import SanitizeStudentContent
from grader.nbgrader_plugins.show_after_grading import ShowAfterGrading
from translab.paths import exchange_root

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

_here = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else os.getcwd()
c.CourseDirectory.root = _here
c.CourseDirectory.course_id = "translab"
c.CourseDirectory.source_directory = "solutions"
c.CourseDirectory.release_directory = "notebooks"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
c.CourseDirectory.db_url = "sqlite:///" + os.path.join(_here, "gradebook.db")
# nbgrader's exchange (release, fetch, submit, collect through shared folders) is not part of the local flow,
# where `make collect` reads an LMS zip; a folder of the course's own (made by `make formgrader`) keeps the
# formgrader from warning that /srv/nbgrader/exchange is missing.  On a JupyterHub, the hub names the shared one
# (TRANSLAB_EXCHANGE, hub/jupyterhub_config.py) for instructors and students alike.
c.Exchange.root = str(exchange_root(_here))

# Under nbgrader (NBGRADER_EXECUTION is set) every notebook uses translab.budget's small budget:
# the slowest cell takes under 5 s alone (results/bench.json); 60 s leaves room for a slow or busy machine and
# bounds what an infinite loop costs a batch.  `make autograde ARGS=--Execute.timeout=120` raises it.
c.Execute.timeout = 60
c.Execute.kernel_name = "python3"
# A graded notebook's kernel is killed when it is done, not asked to shut down: nothing in it needs a clean exit (the
# batch ends whatever the student's uid left behind), and the polite way waited about 1 s a notebook.
c.Execute.shutdown_kernel = "immediate"
# nbconvert validates the notebook against nbformat's schema after each of a conversion's preprocessors (17 in
# autograding): 100 validations a student, about 0.2 s.  Once, after the last, is enough: autograding is two
# conversions, and the first (the sanitizing) still refuses an invalid notebook before the second runs any cell.
c.Exporter.optimistic_validation = True
# nbgrader's CheckCellMetadata, in both conversions, with its schema checked once per batch instead of once per graded
# cell (grader/nbgrader_plugins/check_cell_metadata_precompiled.py): the same notebooks refused, the same message.

# Autograding: nbgrader's own pipeline (0.9.6 defaults), with translab's steps in it.  GuardedExecute is
# nbgrader's Execute with a wall-clock budget per notebook (c.GuardedExecute.notebook_budget, 180 s): a notebook
# that spends it, or whose kernel dies or hangs, keeps the points of the cells that ran, the rest score 0, and
# FlagIncidents flags it for the instructor.
# The demos no graded cell needs (solution cells tagged "translab": {"demo": true}: the training runs, a token effort
# under grading, and what shows them) are not run while grading, unless a cell that runs reads a name they define
# (grader/course/demos.py); each says so in its output.  False runs every cell, as the lab does.
c.GuardedExecute.skip_demos = True
c.Autograde.autograde_preprocessors = [GuardedExecute, NoteOwnRun, IgnorePattern, ClearMetadataPreprocessor,
                                       LimitOutput, SaveAutoGrades, FlagIncidents, AssignLatePenalties,
                                       CheckCellMetadataPrecompiled,
                                       SanitizeStudentContent]  # last: no live student HTML on disk

# Before ClearOutput empties them: the variant code the submission's outputs show (part 2's configuration), which
# GuardedExecute compares with the one it derives from the student's id (a mismatch is flagged, never scored), and
# the figures of an own-run notebook's outputs, which NoteOwnRun sets beside the written answer after the re-run
# (grader/course/own_run.py; RemoveGraderNotes keeps that note out of the feedback).
c.Autograde.sanitize_preprocessors = [RecordVariantShown, RecordSubmittedFigures, ClearOutput, DeduplicateIds, OverwriteKernelspec,
                                      OverwriteCells, CheckCellMetadataPrecompiled]

# Student code runs only in grader.isolation.sandbox's kernel.  The formgrader's Autograde button and plain `nbgrader autograde`
# (its --student, --force, --create, --Execute.timeout=...) hand the submissions nbgrader selected to translab's batch,
# which grades them as `make autograde` does; TRANSLAB_UNSANDBOXED=1 in nbgrader's environment opts out, for trusted
# notebooks only.  jobs: students at a time when a whole class is handed over (make autograde's JOBS).
c.Autograde.exporter_class = BatchAutogradeExporter
c.BatchAutogradeExporter.jobs = 1

# Student notebooks: answers replaced by stubs; solution notebooks carry no outputs.  The cells that would give a
# written answer away (summaries) and the self-check answers are not released; the feedback shows them
# (grader/course/after_grading.py).
from nbgrader.converters import GenerateAssignment  # noqa: E402 - its defaults, with ours first
c.GenerateAssignment.preprocessors = [RemoveAfterGrading, AddCodeInterview,
                                      *GenerateAssignment.class_traits()["preprocessors"].default()]
c.ClearSolutions.code_stub = {"python": "# YOUR CODE HERE\nraise NotImplementedError()"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# The code interview as a grade (grader/course/code_interview.py; `make interviews` picks whom to ask, and
# `make interviews RECORD=file.csv` records the outcomes).  Above 0 points, the release adds a manually graded task cell
# "code_interview" at the end of the last notebook (or of CodeInterview.notebook).  Decide before the students submit:
# nbgrader refuses to add a graded cell to a notebook that has submissions.  not_interviewed: "full" gives a student
# nobody interviewed the points in full when RECORD runs; "grade" leaves them to the formgrader.
c.CodeInterview.points = 0
c.CodeInterview.not_interviewed = "full"

# Feedback never shows hidden tests: neither their code, nor the tracebacks that quote it, nor what a student's cell
# that ran after one printed (it could show the hidden inputs; the instructor still sees it).  Nor live student HTML:
# SanitizeStudentContent again, for notebooks autograded before it was in the pipeline above.
c.GenerateFeedback.preprocessors = [RemoveGraderNotes, GetGrades, HideHiddenTestTracebacks, ClearOutputsAfterHiddenTests, ClearHiddenTests,
                                    SanitizeStudentContent, ShowAfterGrading, DemoteHeadings, CSSHTMLHeaderPreprocessor]
# Nor an answer still awaiting its manual grade, shown as 0: plain `nbgrader generate_feedback` and the formgrader's
# Generate Feedback buttons refuse, naming whose, as `make feedback` does (grader/course/feedback_rule.py).  "graded-only"
# releases the fully graded students, "force" everyone.
c.GenerateFeedback.exporter_class = FeedbackGateExporter
c.FeedbackGateExporter.release = "complete"

# Formgrader and feedback pages: formulas as MathML made when the page is built, and no MathJax from a CDN, so
# both read right offline (grader/course/mathml.py).  nbgrader's own templates stay second in the search path.
c.HTMLExporter.filters = {"markdown2html": "grader.course.mathml.markdown2html"}
c.HTMLExporter.extra_template_basedirs = [TEMPLATES, NBGRADER_TEMPLATES]
# The formgrader's Manual Grading page is our grader/templates/formgrade, which extends nbgrader's own by its full name
# ('formgrade/index.html.j2' under nbgrader's templates folder, which only this path reaches).
c.HTMLExporter.extra_template_paths = [NBGRADER_TEMPLATES]
