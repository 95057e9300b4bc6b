"""Grading behaviour, end to end through nbgrader on a temporary copy of the course (see conftest.py)."""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import nbformat
import pytest

from grader.course import known_clean
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

from conftest import (BOB_ID, CHEAT_FAILS, MISTAKE_CELLS, MISTAKE_MESSAGES, cell_scores, hidden_test_lines, page_text,
                      press_formgrader_button, venv_env)

pytestmark = pytest.mark.slow
BOB = BOB_ID
NOTEBOOKS = sorted(p.stem for p in (REPO_ROOT / "solutions" / ASSIGNMENT).glob("*.ipynb"))


def _comparable(path: Path) -> dict:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return notebook


def test_committed_student_notebooks_equal_a_fresh_release(course):
    root = course
    fresh = sorted(p.name for p in (root / "notebooks" / ASSIGNMENT).glob("*.ipynb"))
    committed = sorted(p.name for p in (REPO_ROOT / "notebooks" / ASSIGNMENT).glob("*.ipynb"))
    assert committed == fresh, "notebooks/ and solutions/ hold different notebooks: run `make release`"
    stale = [name for name in fresh if _comparable(root / "notebooks" / ASSIGNMENT / name)
             != _comparable(REPO_ROOT / "notebooks" / ASSIGNMENT / name)]
    assert not stale, f"student notebooks out of date with solutions/: {stale}; run `make release` and commit"


def test_collect_puts_lms_submissions_in_place(course):
    root = course
    for student in ("alice", BOB):
        found = sorted(p.stem for p in (root / "submitted" / student / ASSIGNMENT).glob("*.ipynb"))
        assert found == NOTEBOOKS, f"{student}: collected {found}"


def test_solutions_get_full_marks_on_every_autograded_cell(course):
    root = course
    scores = cell_scores(root, "alice")
    code_cells = {key: value for key, value in scores.items() if value[2]}
    assert len(code_cells) >= 25
    lost = {key: value for key, value in code_cells.items() if value[0] != value[1]}
    assert not lost, f"the solutions lose points on {lost}"


def test_the_batch_remembers_the_markdown_it_found_clean(course):
    """By hash, one file per notebook's graded ids, in a folder of the course's private to the instructor
    (grader.course.known_clean): the next submission's instructions are not rendered again."""
    folder = known_clean.folder_for(course)
    assert folder.stat().st_mode & 0o777 == 0o700
    hashes = [line for path in folder.iterdir() for line in path.read_text(encoding="ascii").split()]
    assert len(list(folder.iterdir())) >= 6 and len(hashes) >= 100 and {len(line) for line in hashes} == {64}


def _graded_cells(path: Path):
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        meta = cell.metadata.get("nbgrader", {})
        if cell.cell_type == "code" and meta.get("grade"):
            yield meta["grade_id"], cell


def test_no_stderr_and_no_error_in_graded_cells_of_the_solutions(course):
    root = course
    problems = []
    for path in sorted((root / "autograded" / "alice" / ASSIGNMENT).glob("*.ipynb")):
        for grade_id, cell in _graded_cells(path):
            for output in cell.outputs:
                if output.output_type == "error" or (output.output_type == "stream" and output.name == "stderr"):
                    problems.append((path.stem, grade_id, output.get("text", output.get("evalue", ""))[:200]))
    assert not problems, problems


def test_no_error_anywhere_in_the_solutions(course):
    """Ungraded cells too: the demos, training runs and plots of the solutions run under nbgrader."""
    root = course
    errors = []
    for path in sorted((root / "autograded" / "alice" / ASSIGNMENT).glob("*.ipynb")):
        for index, cell in enumerate(nbformat.read(path, as_version=4).cells):
            for output in cell.get("outputs", []):
                if output.output_type == "error":
                    errors.append((path.stem, index, output.ename, output.evalue[:200]))
    assert not errors, errors


def test_blank_notebooks_get_zero_on_every_test_cell(course):
    root = course
    scores = cell_scores(root, "blank")
    code_cells = {key: value for key, value in scores.items() if value[2]}
    assert len(code_cells) >= 25
    scored = {key: value for key, value in code_cells.items() if value[0] != 0}
    assert not scored, f"blank notebooks score on {scored}"


def test_typical_mistakes_lose_exactly_their_cells(course):
    root = course
    scores = cell_scores(root, BOB)
    expected_lost = {(nb, cell) for nb, cells in MISTAKE_CELLS.items() for cell in cells}
    lost = {key for key, (score, max_score, is_code) in scores.items() if is_code and score != max_score}
    assert lost == expected_lost, f"lost {sorted(lost)}, expected {sorted(expected_lost)}"
    assert all(scores[key][0] == 0 for key in expected_lost)


def _feedback_text(root: Path, student: str, notebook: str) -> str:
    return (root / "feedback" / student / ASSIGNMENT / f"{notebook}.html").read_text(encoding="utf-8")


def test_feedback_names_each_mistake(course):
    root = course
    for notebook, phrases in MISTAKE_MESSAGES.items():
        text = _feedback_text(root, BOB, notebook)
        for phrase in phrases:
            assert phrase in text, f"{notebook}: feedback does not say {phrase!r}"


def test_feedback_contains_no_hidden_test_code(course):
    root = course
    hidden = hidden_test_lines()
    assert hidden
    pages = sorted((root / "feedback").glob(f"*/{ASSIGNMENT}/*.html"))
    assert len(pages) >= 3 * len(NOTEBOOKS)
    for page in pages:
        text = page_text(page)
        assert "HIDDEN TESTS" not in text, page
        for line in hidden:
            assert line not in text, f"{page.relative_to(root)} shows hidden test code {line!r}"


def test_feedback_shows_each_model_answer_after_the_students_own(course):
    """What answers a written question reaches the student with the feedback, not before (issue 31), and only with
    that answer's grade (issue 49): bob's 04 answer was graded by hand, his 01 answer was not (feedback --force)."""
    root = course
    text = page_text(root / "feedback" / BOB / ASSIGNMENT / "04_transfer_experiment.html")
    question, _, after = text.partition("Model answer, shown after grading")
    assert "Written question: interpret the curves" in question
    assert "a good answer reads them off its own plot" in after
    ungraded = page_text(root / "feedback" / BOB / ASSIGNMENT / "01_mask_and_positional_encoding.html")
    assert "Model answer, shown after grading" not in ungraded and "comes with its grade" in ungraded
    # bob's own answer is the model answer's text (his notebooks are the solutions, a few cells changed): once only
    assert ungraded.count("loss would collapse by copying") == 1


def test_the_grader_sees_a_note_under_each_own_run_answer_and_the_student_does_not(course):
    """Issue 54: the autograded notebook (what the formgrader shows) has the grader's note right under each written
    answer that quotes the student's own run; the feedback page has none."""
    from grader.course.own_run import NOTE_MARK, OWN_RUN, is_note
    for student in ("alice", BOB_ID, "mallory"):
        for notebook, own in OWN_RUN.items():
            path = course / "autograded" / student / ASSIGNMENT / f"{notebook}.ipynb"
            if not path.exists():
                continue
            cells = nbformat.read(path, as_version=4).cells
            notes = [index for index, cell in enumerate(cells) if is_note(cell)]
            answer = next(index for index, cell in enumerate(cells)
                          if cell.metadata.get("nbgrader", {}).get("grade_id") == own.grade_id)
            assert notes == [answer + 1], (student, notebook, notes, answer)
            assert ("must agree" in cells[answer + 1].source) == own.deterministic
            if own.lines:  # part 5: the re-run's demo lines, quoted for the grader
                assert f"{own.lines}, your masking" in cells[answer + 1].source, cells[answer + 1].source
            feedback = course / "feedback" / student / ASSIGNMENT / f"{notebook}.html"
            assert NOTE_MARK.strip("*") not in page_text(feedback), (student, notebook)


def test_hidden_tests_defeat_calling_translab_and_hard_coding(course):
    root = course
    scores = cell_scores(root, "mallory")
    for notebook, cells in CHEAT_FAILS.items():
        for cell in cells:
            assert scores[(notebook, cell)][0] == 0, (notebook, cell, scores[(notebook, cell)])
    text = _feedback_text(root, "mallory", "01_mask_and_positional_encoding")
    assert "calls translab&#39;s own" in text or "calls translab's own" in text
    pasted = _feedback_text(root, "mallory", "02_model_and_parameters")
    assert "these are the counts of another configuration" in pasted  # alice's numbers, pasted
    from grader.course.gradebook import flagged_notebooks
    assert "02_model_and_parameters" in flagged_notebooks(root / "gradebook.db", "mallory")  # ran as alice
    assert "02_model_and_parameters" not in flagged_notebooks(root / "gradebook.db", "alice")


def test_grades_csv_has_one_row_per_student(course):
    root = course
    with open(root / "grades.csv", newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(row["student_id"] for row in rows) == sorted(["alice", "blank", BOB, "mallory"])
    by_student = {row["student_id"]: row for row in rows}
    assert float(by_student["alice"]["auto_score"]) > 0
    assert float(by_student["blank"]["total"]) == 0
    assert float(by_student["alice"]["max_score"]) == float(by_student["blank"]["max_score"])
    assert float(by_student[BOB]["auto_score"]) < float(by_student["alice"]["auto_score"])


def test_grades_csv_has_one_column_per_task(course):
    """Besides the per-notebook totals, one column per graded cell, ``<notebook>/<grade_id>``, in notebook order;
    a student's task scores add up to the notebook's score."""
    root = course
    with open(root / "grades.csv", newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        rows = {row["student_id"]: row for row in reader}
        columns = reader.fieldnames
    scores = cell_scores(root, "alice")
    tasks = [f"{notebook}/{cell}" for notebook, cell in scores]
    assert sorted(c for c in columns if "/" in c) == sorted(tasks)
    assert columns.index("01_mask_and_positional_encoding/mask_visible") < \
        columns.index("01_mask_and_positional_encoding/mask_hidden") < \
        columns.index("01_mask_and_positional_encoding/pe_visible")
    for student, row in rows.items():
        for notebook in NOTEBOOKS:
            total = sum(float(row[c] or 0) for c in columns if c.startswith(f"{notebook}/"))
            assert total == pytest.approx(float(row[notebook])), (student, notebook)
    lost = {(nb, cell) for nb, cells in MISTAKE_CELLS.items() for cell in cells}
    for (notebook, cell), (score, max_score, is_code) in cell_scores(root, BOB).items():
        if is_code:
            assert float(rows[BOB][f"{notebook}/{cell}"]) == (0 if (notebook, cell) in lost else max_score)
    assert float(rows["alice"]["02_model_and_parameters/count_hidden"]) == 1
    # a written answer awaiting its grade is blank, not 0; bob's 04 answer was graded by hand
    assert rows["alice"]["01_mask_and_positional_encoding/written_mask_pe"] == ""
    assert float(rows[BOB]["04_transfer_experiment/written_interpretation"]) > 0
    assert float(rows["mallory"]["02_model_and_parameters/count_visible"]) == 0
    assert float(rows["mallory"]["02_model_and_parameters/count_hidden"]) == 0


def test_grading_commands_are_idempotent(course):
    """A second `grades` run rewrites the same CSV; a second release leaves the notebooks unchanged."""
    from conftest import run_grader
    root = course
    before = (root / "grades.csv").read_text()
    run_grader(root, "grades")
    assert (root / "grades.csv").read_text() == before


def test_every_second_of_a_student_s_grading_has_a_name(course):
    """autograded/autograde_phases.csv (grader.grading.phases): each student's phases, the merge after them aside,
    add up to the seconds the report gives it, and each notebook nbgrader ran has its kernel's start, its cells and its checks timed."""
    from grader.grading.batch import REPORT_NAME
    from grader.grading import phases
    from grader.grading.phases import NOTEBOOK_PHASES, PHASES_NAME, SETUP, STUDENT_PHASES
    root = course
    with open(root / "autograded" / REPORT_NAME, newline="", encoding="utf-8") as handle:
        seconds = {row["student_id"]: float(row["seconds"]) for row in csv.DictReader(handle)}
    with open(root / "autograded" / PHASES_NAME, newline="", encoding="utf-8") as handle:
        rows = list(csv.DictReader(handle))
    assert [(row["phase"], float(row["seconds"]) > 0) for row in rows if not row["student_id"]] == [(SETUP, True)]
    for student in phases.read_students(root / "autograded" / PHASES_NAME):  # this batch's (the report keeps all)
        total = seconds[student]
        mine = {row["phase"]: float(row["seconds"]) for row in rows
                if row["student_id"] == student and not row["notebook"]}
        assert list(mine) == list(STUDENT_PHASES) and min(mine.values()) >= 0, (student, mine)
        assert abs(sum(mine.values()) - mine["merge"] - total) <= 0.15, (student, total, mine)  # merged after
    alice = {(row["notebook"], row["phase"]): float(row["seconds"]) for row in rows
             if row["student_id"] == "alice" and row["notebook"]}
    notebooks = sorted(path.stem for path in (root / "solutions" / ASSIGNMENT).glob("*.ipynb"))
    assert sorted(alice) == sorted((notebook, phase) for notebook in notebooks for phase in NOTEBOOK_PHASES)
    for notebook in notebooks:
        assert alice[(notebook, "kernel start")] > 0 and alice[(notebook, "checks")] > 0, (notebook, alice)


def test_feedback_waits_for_manual_grades(course, tmp_path):
    """`make feedback` refuses while written answers are ungraded (nbgrader would release them as 0), says whose,
    and writes nothing; --graded-only releases the fully graded students; --force everyone."""
    import shutil
    import subprocess
    import sys

    from nbgrader.api import Gradebook
    root = course
    copy = tmp_path / "course"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("feedback"))

    def feedback(*args):
        return subprocess.run([sys.executable, "-m", "grader", "--root", str(copy), "feedback", *args],
                              text=True, capture_output=True)

    refused = feedback()
    assert refused.returncode == 1 and not (copy / "feedback").exists()
    assert "not graded yet" in refused.stderr and "alice:" in refused.stderr and "written_" in refused.stderr
    assert "--graded-only" in refused.stderr and "--force" in refused.stderr
    with Gradebook(f"sqlite:///{copy / 'gradebook.db'}") as gradebook:
        for notebook in gradebook.find_submission(ASSIGNMENT, "alice").notebooks:
            for grade in notebook.grades:
                if grade.needs_manual_grade:  # what the formgrader's Manual Grading does on save
                    grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()
    from grader.course.gradebook import ungraded
    pending = {student for student, names in ungraded(copy).items() if names}
    assert "alice" not in pending and {BOB, "mallory"} <= set(pending)  # blank's unchanged answers score 0 by rule
    assert feedback().returncode == 1, "bob and mallory are still ungraded"
    released = feedback("--graded-only")
    assert released.returncode == 0, released.stderr[-3000:]
    assert sorted(p.name for p in (copy / "feedback").iterdir()) == sorted({"alice", "blank", BOB, "mallory"}
                                                                            - set(pending))
    forced = feedback("--force")
    assert forced.returncode == 0
    assert sorted(p.name for p in (copy / "feedback").iterdir()) == sorted(["alice", "blank", BOB, "mallory"])
    # quiet: a line a student and the class's, none of nbgrader's INFO lines (ARGS=--verbose shows them)
    said = forced.stdout.splitlines()
    assert "| INFO]" not in forced.stdout + forced.stderr and len(said) == 5, forced.stdout
    assert said[-1].startswith("feedback for 4 student(s)"), forced.stdout
    assert [line.split(":")[0].strip() for line in said[:-1]] == sorted(["alice", "blank", BOB, "mallory"]), said


def test_nbgrader_s_own_feedback_and_the_buttons_follow_the_same_rule(course, tmp_path):
    """Plain `nbgrader generate_feedback` and the formgrader's buttons (per assignment, per student) refuse while a
    selected student's written answer is ungraded, naming it, and write nothing; a fully graded student's button
    works; `--FeedbackGateExporter.release=graded-only` releases the graded students only."""
    import subprocess
    import sys

    from grader.course.gradebook import open_gradebook, ungraded
    root = course
    copy = tmp_path / "course"
    shutil.copytree(root, copy, ignore=shutil.ignore_patterns("feedback"))
    env = venv_env()

    def nbgrader(*args):
        return subprocess.run([sys.executable, "-m", "nbgrader", "generate_feedback", ASSIGNMENT, *args], cwd=copy,
                              env=env, text=True, capture_output=True)

    def button(*args):
        return press_formgrader_button(copy, "generate_feedback", ASSIGNMENT, *args)

    refused = nbgrader()
    said = refused.stdout + refused.stderr
    assert refused.returncode != 0 and "not graded yet" in said, said[-3000:]
    assert "alice:" in said and "written_" in said, said[-3000:]
    assert "--FeedbackGateExporter.release=graded-only" in said and not (copy / "feedback").exists()
    for args in ((), ("alice",)):
        pressed = button(*args)
        assert pressed["success"] is False and "not graded yet" in pressed.get("error", "") + pressed.get("log", "")
        assert not (copy / "feedback").exists()
    with open_gradebook(copy / "gradebook.db") as gradebook:
        for notebook in gradebook.find_submission(ASSIGNMENT, "alice").notebooks:
            for grade in notebook.grades:
                if grade.needs_manual_grade:
                    grade.manual_score, grade.needs_manual_grade = grade.max_score, False
        gradebook.db.commit()
    pending = {student for student, names in ungraded(copy).items() if names}
    assert button("alice")["success"] is True
    assert [p.name for p in (copy / "feedback").iterdir()] == ["alice"]
    assert button(BOB)["success"] is False and not (copy / "feedback" / BOB).exists()
    released = nbgrader("--force", "--FeedbackGateExporter.release=graded-only")
    assert released.returncode == 0, (released.stdout + released.stderr)[-3000:]
    assert sorted(p.name for p in (copy / "feedback").iterdir()) == sorted({"alice", "blank", BOB, "mallory"} - pending)
