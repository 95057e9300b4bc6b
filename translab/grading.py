"""The instructor's side of the lab, around nbgrader (what the Makefile's grading targets run).

    python -m translab.grading release          # solutions/ -> notebooks/ (nbgrader generate_assignment)
    python -m translab.grading references       # grader/references/*.pt from translab
    python -m translab.grading autograde        # every submission in submitted/
    python -m translab.grading feedback         # feedback/ as HTML, hidden tests removed
    python -m translab.grading grades           # grades.csv, one row per student
    python -m translab.grading collect FILE.zip # an LMS download -> submitted/<student>/transfer_learning/

Every command is idempotent (nbgrader runs with --force) and exits non-zero when nbgrader reports
an error, including a configuration file that failed to load (nbgrader itself only logs that).
``--root`` points at another course folder (the tests grade a temporary copy of the course).
"""
from __future__ import annotations

import argparse
import csv
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from nbgrader.plugins.zipcollect import FileNameCollectorPlugin
from nbgrader.preprocessors import NbGraderPreprocessor

from .paths import REPO_ROOT

ASSIGNMENT = "transfer_learning"
NOTEBOOK_PATTERN = re.compile(r"(?P<notebook>\d\d_[a-z_]+?)(?:[-_ ]?\(?\d+\)?)?\.ipynb$")
FATAL_LOG_LINES = ("Exception while loading config", "[ERROR]", "[CRITICAL]")


class GradingError(RuntimeError):
    pass


# ----------------------------------------------------------------- nbgrader plugins used by nbgrader_config.py

class HideHiddenTestTracebacks(NbGraderPreprocessor):
    """Feedback preprocessor: a failing hidden test keeps only its error message.

    ``ClearHiddenTests`` removes the hidden source, but an error's traceback quotes the failing line
    of the cell, i.e. the hidden test.  Runs before ``ClearHiddenTests`` (which removes the markers).
    """

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type == "code" and "BEGIN HIDDEN TESTS" in cell.source:
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    output["traceback"] = [f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"]
        return cell, resources


class LMSCollector(FileNameCollectorPlugin):
    """``nbgrader zip_collect`` plugin for the common LMS download layouts.

    * one folder per student (Moodle: ``Jane Doe_12345_assignsubmission_file_/01_mask....ipynb``): the student
      is the folder's participant number, else its name;
    * flat files (Canvas: ``doejane_12345_67890_01_mask....ipynb``, maybe ``-1`` before ``.ipynb`` on a
      resubmission): the student is the part before the first ``_``.

    The notebook is recognised by its ``NN_name`` ending; student ids keep only letters, digits, ``.`` and ``-``.
    """

    def collect(self, submitted_file: str):
        path = Path(submitted_file)
        if path.suffix not in self.valid_ext:
            return None
        parts = path.parts
        if "extracted" in parts:
            parts = parts[len(parts) - parts[::-1].index("extracted"):]
        if parts and parts[0] == "lms" and len(parts) > 1:  # the folder our `collect` unpacks into
            parts = parts[1:]
        match = NOTEBOOK_PATTERN.search(parts[-1])
        if not match:
            self.log.warning("skipped %s: not one of the lab's notebooks", submitted_file)
            return None
        if len(parts) > 1:
            folder = parts[0]
            moodle = re.match(r"^(.+?)_(\d+)_assignsubmission", folder)
            student = moodle.group(2) if moodle else folder
        else:
            student = parts[-1].split("_", 1)[0]
        student = re.sub(r"[^A-Za-z0-9.-]+", "-", student).strip("-")
        if not student:
            self.log.warning("skipped %s: no student id in its name", submitted_file)
            return None
        return {"student_id": student, "file_id": match.group("notebook") + ".ipynb"}


# ----------------------------------------------------------------- running nbgrader

def _nbgrader(root: Path, *args: str, check: bool = True) -> str:
    env = dict(os.environ)
    env.pop("NBGRADER_EXECUTION", None)
    # nbgrader runs `alembic` (the gradebook's migrations) from PATH: put this venv's bin/ first.
    env["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), env.get("PATH", "")])
    command = [sys.executable, "-m", "nbgrader", *args]
    process = subprocess.run(command, cwd=root, env=env, text=True, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT)
    output = process.stdout
    sys.stdout.write(output)
    bad = [line for line in output.splitlines() if any(marker in line for marker in FATAL_LOG_LINES)]
    if check and (process.returncode != 0 or bad):
        raise GradingError(f"`nbgrader {' '.join(args)}` failed (exit {process.returncode}):\n" + "\n".join(bad[:20]))
    return output


def release(root: Path) -> list[Path]:
    """Regenerate the student notebooks (and the gradebook's copy of the tests) from the solutions."""
    source = root / "solutions" / ASSIGNMENT
    dirty = [p.name for p in sorted(source.glob("*.ipynb")) if _has_outputs(p)]
    if dirty:
        raise GradingError(f"solution notebooks must be committed without outputs: {dirty}. "
                           "Clear them (Edit > Clear Outputs of All Cells, or `jupyter nbconvert --clear-output "
                           "--inplace`) and release again.")
    _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force")
    return sorted((root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))


def _has_outputs(path: Path) -> bool:
    import nbformat
    notebook = nbformat.read(path, as_version=4)
    return any(cell.get("outputs") or cell.get("execution_count") for cell in notebook.cells if cell.cell_type == "code")


def _gradebook_has_assignment(root: Path) -> bool:
    from nbgrader.api import Gradebook, MissingEntry
    db = root / "gradebook.db"
    if not db.exists():
        return False
    with Gradebook(f"sqlite:///{db}") as gradebook:
        try:
            return len(gradebook.find_assignment(ASSIGNMENT).notebooks) > 0
        except MissingEntry:
            return False


def students(root: Path) -> list[str]:
    submitted = root / "submitted"
    return sorted(p.parent.name for p in submitted.glob(f"*/{ASSIGNMENT}") if p.is_dir())


def autograde(root: Path, jobs: int = 1, student: str | None = None) -> None:
    if not students(root):
        raise GradingError(f"nothing to grade: put submissions in {root / 'submitted'}/<student>/{ASSIGNMENT}/ "
                           "(or `make collect ZIP=...`)")
    if not _gradebook_has_assignment(root):
        # The gradebook holds the tests (hidden ones included) that autograde puts back; build it
        # from the solutions without touching the committed student notebooks.
        import tempfile
        with tempfile.TemporaryDirectory() as scratch:
            _nbgrader(root, "generate_assignment", ASSIGNMENT, "--force",
                      f"--CourseDirectory.release_directory={scratch}")
    args = ["autograde", ASSIGNMENT, "--force"]
    if student:
        args.append(f"--student={student}")
    _nbgrader(root, *args)


def feedback(root: Path) -> list[Path]:
    _nbgrader(root, "generate_feedback", ASSIGNMENT, "--force")
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    leaking = [p for p in pages if "BEGIN HIDDEN TESTS" in p.read_text(encoding="utf-8", errors="replace")]
    if leaking:
        raise GradingError(f"feedback shows hidden tests: {leaking[:3]}; check nbgrader_config.py")
    return pages


def grades(root: Path, out: Path | None = None) -> Path:
    """One row per student: the score of each notebook, the total, the maximum, manual grading left."""
    from nbgrader.api import Gradebook, MissingEntry
    out = Path(out) if out is not None else root / "grades.csv"
    db = root / "gradebook.db"
    if not db.exists():
        raise GradingError("no gradebook.db yet: run `make autograde` first")
    with Gradebook(f"sqlite:///{db}") as gradebook:
        assignment = gradebook.find_assignment(ASSIGNMENT)
        notebooks = sorted(nb.name for nb in assignment.notebooks)
        rows = []
        for student in sorted(s.id for s in gradebook.students):
            try:
                submission = gradebook.find_submission(ASSIGNMENT, student)
            except MissingEntry:
                continue
            row = {"student_id": student}
            for name in notebooks:
                try:
                    row[name] = gradebook.find_submission_notebook(name, ASSIGNMENT, student).score
                except MissingEntry:
                    row[name] = 0.0
            row.update(total=submission.score, max_score=submission.max_score,
                       auto_score=submission.code_score, written_score=submission.written_score,
                       needs_manual_grade=bool(submission.needs_manual_grade))
            rows.append(row)
    with open(out, "w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["student_id", *notebooks, "total", "max_score", "auto_score",
                                                    "written_score", "needs_manual_grade"])
        writer.writeheader()
        writer.writerows(rows)
    print(f"wrote {out} ({len(rows)} students)")
    return out


def collect(root: Path, archive: Path) -> list[str]:
    archive = Path(archive).resolve()
    if not archive.exists():
        raise GradingError(f"{archive} does not exist")
    downloaded = root / "downloaded" / ASSIGNMENT
    shutil.rmtree(downloaded, ignore_errors=True)
    (downloaded / "archive").mkdir(parents=True)
    shutil.copy(archive, downloaded / "archive" / "lms.zip")
    _nbgrader(root, "zip_collect", ASSIGNMENT, "--force", "--collector=translab.grading.LMSCollector")
    found = students(root)
    print(f"submitted/ now holds {len(found)} student(s): {', '.join(found)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m translab.grading", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the course folder (default: the repository)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("release", help="regenerate notebooks/ from solutions/")
    commands.add_parser("references", help="rebuild grader/references/ from translab")
    grade = commands.add_parser("autograde", help="grade every submission in submitted/")
    grade.add_argument("--jobs", type=int, default=1,
                       help="accepted for the Makefile's JOBS=N; grading is sequential for now, whatever N is")
    grade.add_argument("--student", help="grade only this student")
    commands.add_parser("feedback", help="write feedback/ (HTML, hidden tests removed)")
    export = commands.add_parser("grades", help="write grades.csv, one row per student")
    export.add_argument("--out", type=Path)
    zipped = commands.add_parser("collect", help="unpack an LMS zip into submitted/")
    zipped.add_argument("zip", type=Path)
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        if args.command == "release":
            for path in release(root):
                print(f"released {path.relative_to(root)}")
        elif args.command == "references":
            from . import references
            for name, status in references.write_all():
                print(f"{status:9s} grader/references/{name}.pt")
        elif args.command == "autograde":
            if args.jobs > 1:
                print(f"note: --jobs {args.jobs} requested; grading runs sequentially for now")
            autograde(root, args.jobs, args.student)
        elif args.command == "feedback":
            for page in feedback(root):
                print(f"feedback {page.relative_to(root)}")
        elif args.command == "grades":
            grades(root, args.out)
        elif args.command == "collect":
            collect(root, args.zip)
    except GradingError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
