"""``python -m grader``: the instructor's commands behind the Makefile, each mapped to the module that does it.

    python -m grader release          # solutions/ -> notebooks/ (nbgrader generate_assignment)
    python -m grader references       # grader/references/*.pt from translab (--margins: against other CPUs)
    python -m grader autograde        # every submission in submitted/ [--jobs N] [--Execute.timeout=S ...]
    python -m grader feedback         # feedback/ as HTML, hidden tests removed
    python -m grader grades           # grades.csv, one row per student
    python -m grader collect FILE.zip # an LMS download -> submitted/<student>/transfer_learning/

Every command is idempotent (nbgrader runs with --force) and exits non-zero when nbgrader reports
an error, including a configuration file that failed to load (nbgrader itself only logs that).
``--root`` points at another course folder (the tests grade a temporary copy of the course).
``autograde`` exits 0 when students' notebooks fail (they score 0, flagged: ``grader.batch``), 1 only when the
grading machinery does.  Options of the form ``--Class.trait=value`` after ``autograde`` are passed on to nbgrader.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .batch import STUDENT_BUDGET
from .commands.grades import FORMATS as GRADE_FORMATS
from .course import GradingError, course_root


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=None,
                        help="the course folder (default: the nearest folder from here up that holds "
                             "nbgrader_config.py, else this repository)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    references_command = commands.add_parser("references", help="rebuild grader/references/ from translab")
    references_command.add_argument("--margins", action="store_true",
                                    help="then measure how far each reference moves on another CPU's code paths "
                                         "against its check's tolerance (results/reference_margins.json)")
    grade = commands.add_parser("autograde", help="grade every submission in submitted/")
    grade.add_argument("--jobs", type=int, default=1, help="grade N students at a time (the Makefile's JOBS=N)")
    grade.add_argument("--student", action="append", help="grade only this student (again for more)")
    grade.add_argument("--no-sandbox", action="store_true",
                       help="run student code in a plain kernel, without grader.sandbox's limits")
    grade.add_argument("--cluster", help="grade on a Dask cluster: tcp://127.0.0.1:PORT, tls://... or a JSON spec "
                                         "file (grader.cluster); only students not merged or resubmitted, unless --force")
    grade.add_argument("--force", action="store_true", help="with --cluster: grade students already merged too")
    grade.add_argument("--results-dir", type=Path,
                       help="grade the --student(s) into this folder instead of gradebook.db (python -m grader merge)")
    grade.add_argument("--student-timeout", type=float, default=STUDENT_BUDGET,
                       help=f"wall-clock seconds for one student, every notebook and retry included, before grading "
                            f"stops and the rest scores 0, flagged (default {STUDENT_BUDGET:.0f}; each notebook also "
                            "has a budget of its own, c.GuardedExecute.notebook_budget)")
    merged = commands.add_parser("merge", help="merge result folders graded elsewhere (--results-dir) into gradebook.db")
    merged.add_argument("folders", type=Path, nargs="+")
    given = commands.add_parser("feedback", help="write feedback/ (HTML, hidden tests removed); refuses while "
                                                 "written answers await a manual grade")
    release_mode = given.add_mutually_exclusive_group()
    release_mode.add_argument("--graded-only", action="store_true",
                              help="release only the students whose every answer is graded")
    release_mode.add_argument("--force", action="store_true",
                              help="release everyone; answers not graded yet show as 0")
    export = commands.add_parser("grades", help="write grades.csv, one row per student, or an LMS's import file")
    export.add_argument("--out", type=Path)
    export.add_argument("--format", default="csv", choices=GRADE_FORMATS,
                        help="canvas: Canvas's gradebook import; moodle: Moodle's grading worksheet, filled in")
    export.add_argument("--canvas-column", help='the assignment as Canvas heads its column: "Title (4242)"')
    export.add_argument("--moodle-worksheet", type=Path, help="the grading worksheet downloaded from Moodle")
    export.add_argument("--grade-column", help="the worksheet's grade column, where its language is not known")
    export.add_argument("--feedback-column", help="the worksheet's feedback comments column, likewise")
    commands.add_parser("report", help="reports/: per task who passed, the diagnosed misconceptions ranked (CSV, HTML)")
    similar = commands.add_parser("similarity", help="reports/similarity.*: pairs of students whose answers match")
    similar.add_argument("--past", type=Path, help="a past year's submitted/ folder to compare with too")
    zipped = commands.add_parser("collect", help="unpack an LMS zip into submitted/")
    zipped.add_argument("zip", type=Path)
    roster = commands.add_parser("students", help="add the class's names and e-mails from an LMS roster CSV")
    roster.add_argument("roster", type=Path)
    variant = commands.add_parser("variants", help="reports/variants.csv: each student's configuration for part 2's "
                                                   "counts; --student ID: one student's code; --init: the course secret")
    variant.add_argument("--student")
    variant.add_argument("--init", action="store_true", help="create the course secret unless there is one")
    students = commands.add_parser("student-release", help="write what students get (no solutions, no hidden tests)")
    students.add_argument("dest", type=Path)
    students.add_argument("--until", type=int, default=1,
                          help="the part the students start now: its notebook and those before it, translab's reference "
                               "code of the parts before it, stubs for the rest (default 1: no answer at all; "
                               "7: everything, after the last deadline)")
    students.add_argument("--package", default="",
                          help="what each notebook's setup cell pip-installs in Colab: the wheel's URL where you publish "
                               "it, or a name on PyPI (default with --colab: the wheel in that repository's dist/)")
    students.add_argument("--colab", default="",
                          help="the GitHub repository (owner/name[@branch]) you push the release to: each notebook and "
                               "the README get an Open in Colab badge")
    students.add_argument("--no-wheel", action="store_true", help="skip building dist/translab-*.whl")
    args, extra = parser.parse_known_args(argv)
    if extra and args.command != "autograde":
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    bad = [arg for arg in extra if not arg.startswith("--") or "=" not in arg]
    if bad:
        parser.error(f"extra nbgrader options must look like --Class.trait=value: {' '.join(bad)}")
    root = (args.root or course_root()).resolve()
    try:
        if args.command == "release":
            from .commands.release import release
            for path in release(root):
                print(f"released {path.relative_to(root)}")
        elif args.command == "references":
            from . import references
            for name, status in references.write_all():
                print(f"{status:9s} grader/references/{name}.pt")
            if args.margins:
                from . import reference_margins
                print(reference_margins.write_table(root / "results" / "reference_margins.json"))
        elif args.command == "autograde":
            from .batch import autograde, print_summary
            if args.results_dir:
                from .results import grade_students_to
                for folder in grade_students_to(root, args.student, args.results_dir, tuple(extra),
                                                not args.no_sandbox, args.student_timeout):
                    print(f"graded into {folder} (python -m grader merge {args.results_dir})")
                return 0
            if args.cluster:
                from .cluster import autograde_on_cluster
                report = autograde_on_cluster(root, args.cluster, args.student, args.force, tuple(extra),
                                              not args.no_sandbox, args.student_timeout)
            else:
                report = autograde(root, args.jobs, args.student, tuple(extra), sandbox=not args.no_sandbox,
                                   student_timeout=args.student_timeout)
            return print_summary(root, report, args.student_timeout)
        elif args.command == "merge":
            from .commands.merge import merge
            return merge(root, args.folders)
        elif args.command == "feedback":
            mode = "graded-only" if args.graded_only else "force" if args.force else "complete"
            from .commands.feedback import feedback
            for page in feedback(root, mode):
                print(f"feedback {page.relative_to(root)}")
        elif args.command == "grades":
            from .commands.grades import grades
            grades(root, args.out, args.format, args.canvas_column, args.moodle_worksheet, args.grade_column,
                   args.feedback_column)
        elif args.command == "report":
            from . import report
            try:
                print(report.summary(report.write(root)))
            except FileNotFoundError as error:
                raise GradingError(str(error)) from error
        elif args.command == "similarity":
            from . import similarity
            if args.past is not None and not args.past.is_dir():
                raise GradingError(f"--past {args.past}: no such folder (a past year's submitted/, one folder per "
                                   "student)")
            similarity.main(root, args.past)
        elif args.command == "collect":
            from .commands.collect import collect
            collect(root, args.zip)
        elif args.command == "students":
            from . import roster
            try:
                added, updated = roster.import_roster(root, args.roster)
            except roster.RosterError as error:
                raise GradingError(str(error)) from error
            print(f"roster {args.roster}: {added} student(s) added, {updated} updated in {root / 'gradebook.db'}")
        elif args.command == "variants":
            from . import variants
            try:
                variants.main(root, args.student, args.init)
            except variants.SecretMissing as error:
                raise GradingError(str(error)) from error
        elif args.command == "student-release":
            from . import student_release
            try:
                written = student_release.write(args.dest, root, until=args.until, package=args.package,
                                                colab=args.colab, wheel=not args.no_wheel)
            except student_release.ReleaseError as error:
                raise GradingError(str(error)) from error
            from .withheld import LAST_PART
            held = (f"translab's answers to parts {args.until} to {LAST_PART} held back" if args.until <= LAST_PART
                    else "every answer of translab in it")
            print(f"wrote the student release to {args.dest.resolve()}: {len(written)} files, notebooks 1 to "
                  f"{min(args.until, LAST_PART)}, {held}; students run `make setup` then `make lab` there")
            wheels = sorted((args.dest / "dist").glob("*.whl"))
            if wheels:
                print(f"  the same as one wheel: {wheels[0]} (pip install it anywhere, then python -m translab setup)")
            if not (args.package or args.colab):
                print("  no Colab links: the setup cells say where translab comes from once you give "
                      "PACKAGE=<wheel URL> or COLAB=owner/name (the GitHub repository you push this folder to)")
            print("  no student's variant code is in it: send each student theirs from `make variants` (all, in a "
                  "table) or `make variants STUDENT=id` (one); they run `variants.use_code(...)` once")
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
