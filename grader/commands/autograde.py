"""``make autograde``: every submission in submitted/, here (``grader.grading.batch``), on a Dask cluster
(``grader.grading.cluster``), on the course's warm grader (``grader.grading.warm_grader``), or one student into a
result folder for ``merge`` (``grader.grading.result_folders``, a Slurm job's way).

Exits 0 when students' notebooks fail (they score 0, flagged), 1 only when the grading machinery does.  Options of
the form ``--Class.trait=value`` are passed on to nbgrader."""
from __future__ import annotations

from pathlib import Path

from grader.course import GradingError
from grader.grading import batch
from grader.grading.cluster import autograde_on_cluster
from grader.grading.preflight import preflight
from grader.grading.result_folders import fingerprint, grade_students_to
from grader.grading.warm_grader import IDLE_S, held

HELP = "grade every submission in submitted/"
PASSES_NBGRADER_OPTIONS = True  # --Class.trait=value options after the command go to nbgrader


def arguments(parser) -> None:
    parser.add_argument("--jobs", type=int, default=1, help="grade N students at a time (the Makefile's JOBS=N)")
    parser.add_argument("--student", action="append", help="grade only this student (again for more)")
    parser.add_argument("--no-sandbox", action="store_true",
                        help="run student code in a plain kernel, without grader.isolation.sandbox's limits")
    parser.add_argument("--cluster", help="grade on a Dask cluster: tcp://127.0.0.1:PORT, tls://... or a JSON spec "
                                          "file (grader.grading.cluster); only students not merged or resubmitted, unless "
                                          "--force")
    parser.add_argument("--force", action="store_true", help="with --cluster: grade students already merged too")
    parser.add_argument("--warm", action="store_true",
                        help="grade on the course's warm grader (started now if none is running, stopped after "
                             "--idle seconds without work): each later batch skips the grading process's start; "
                             "--jobs students at a time, up to a core each (what make autograde and the formgrader "
                             "do unless WARM=0 or c.BatchAutogradeExporter.warm = False)")
    parser.add_argument("--idle", type=float, default=IDLE_S,
                        help=f"with --warm: seconds without work before the warm grader stops (default {IDLE_S})")
    parser.add_argument("--results-dir", type=Path,
                        help="grade the --student(s) into this folder instead of gradebook.db (python -m grader merge)")
    parser.add_argument("--student-timeout", type=float, default=batch.STUDENT_BUDGET,
                        help=f"wall-clock seconds for one student, every notebook and retry included, before grading "
                             f"stops and the rest scores 0, flagged (default {batch.STUDENT_BUDGET:.0f}; each notebook also "
                             "has a budget of its own, c.GuardedExecute.notebook_budget)")


def run(root: Path, args) -> int:
    sandbox, nbgrader_options = not args.no_sandbox, args.nbgrader_options
    if args.results_dir:
        for folder in grade_students_to(root, args.student, args.results_dir, nbgrader_options, sandbox,
                                        args.student_timeout):
            print(f"graded into {folder} (python -m grader merge {args.results_dir})")
        return 0
    if args.warm:
        if args.cluster or args.results_dir:
            raise GradingError("--warm grades on the course's own warm grader: not with --cluster or --results-dir")
        preflight(root, args.student, data_here=False)  # a press that will be refused starts or holds no grader
        course_fingerprint = fingerprint(root)  # once: the grader is chosen by the digest the tasks carry
        with held(root, args.idle, course_fingerprint=course_fingerprint) as spec:
            report = autograde_on_cluster(root, spec, args.student, True, nbgrader_options, sandbox,
                                          args.student_timeout, jobs=args.jobs, course_fingerprint=course_fingerprint)
        report.cluster = f"the warm grader ({report.cluster})"  # named in the summary
    elif args.cluster:
        report = autograde_on_cluster(root, args.cluster, args.student, args.force, nbgrader_options, sandbox,
                                      args.student_timeout)
    else:
        report = batch.autograde(root, args.jobs, args.student, nbgrader_options, sandbox=sandbox,
                           student_timeout=args.student_timeout)
    return batch.print_summary(root, report, args.student_timeout)
