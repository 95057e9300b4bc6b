"""What every way of grading checks before it grades anyone, in one place and one wording: a batch here
(``grader.grading.batch``), a Dask cluster (``grader.grading.cluster``) and a Slurm or Kubernetes job's ``--results-dir``
(``grader.grading.result_folders``).  A refusal grades no one and names what to do; a batch that went ahead instead would give a
whole class zeros for a machine's fault."""
from __future__ import annotations

from pathlib import Path

from translab.contract import ASSIGNMENT, DATA_DIR_ENV
from translab.data import FIX_HINT, missing

from grader.course import GradingError, students
from grader.course.variants import SecretMissing, require_secret


def students_to_grade(root: Path, student_ids: list[str] | None) -> list[str]:
    """Every student with a submission, or the ``only`` ones (each once, in the order given), all of whom must have
    one."""
    found = students(root)
    if not found:
        raise GradingError(f"nothing to grade: put submissions in {root / 'submitted'}/<student>/{ASSIGNMENT}/ "
                           "(or `make collect ZIP=...`)")
    if student_ids:
        absent = [student for student in student_ids if student not in found]
        if absent:
            raise GradingError(f"no submission for {', '.join(map(repr, absent))} in {root / 'submitted'}; "
                               "nothing was graded")
        return list(dict.fromkeys(student_ids))
    return found


def require_data(where: str = "this machine") -> None:
    """The lab's data is where the students' notebooks run: without it every cell that reads it loses its points."""
    absent = missing()
    if absent:
        raise GradingError(f"the lab's data is not on {where} ({', '.join(map(str, absent[:3]))}"
                           f"{' and more' if len(absent) > 3 else ''}): every student would lose the points of the "
                           f"cells that read it. Nothing was graded: {FIX_HINT}, or point {DATA_DIR_ENV} at the "
                           "data folder, and grade again")


def course_secret(root: Path) -> bytes:
    """The course secret: part 2's stated counts are judged against each student's variant, derived from it."""
    try:
        return require_secret(root)
    except SecretMissing as error:
        raise GradingError(f"{error} Nothing was graded.") from error


def preflight(root: Path, student_ids: list[str] | None, data_here: bool = True) -> tuple[list[str], bytes]:
    """(the students to grade, the course secret), or a ``GradingError``; ``data_here=False`` where the students'
    notebooks run elsewhere (a cluster's workers check the data themselves)."""
    student_ids = students_to_grade(root, student_ids)
    if data_here:
        require_data()
    return student_ids, course_secret(root)
