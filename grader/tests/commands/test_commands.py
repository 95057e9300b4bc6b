"""``python -m grader``: one module per command in grader/commands/, ``grader.cli.COMMANDS`` the one list, and every
way of grading refusing the same things before it grades anyone (``grader.grading.preflight``)."""
from __future__ import annotations

import pytest

from grader import cli
from grader.grading import batch, result_folders
from grader.course import GradingError
from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

COMMANDS_DIR = REPO_ROOT / "grader" / "commands"


def test_every_command_is_a_module_of_grader_commands_and_the_table_lists_each_once():
    """The table against the folder; the Makefile's and the documentation's commands against the table:
    tests/test_project.py's test that every command the documentation names exists."""
    modules = sorted(path.stem for path in COMMANDS_DIR.glob("*.py") if path.stem != "__init__")
    assert len(set(cli.COMMANDS)) == len(cli.COMMANDS)
    assert sorted(command.replace("-", "_") for command in cli.COMMANDS) == modules
    for command in cli.COMMANDS:
        module = cli.command_module(command)
        assert module.HELP and callable(module.arguments) and callable(module.run), command


def test_help_lists_every_command(capsys):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    said = capsys.readouterr().out
    assert all(command in said for command in cli.COMMANDS)


def test_only_autograde_takes_nbgrader_options(capsys):
    with pytest.raises(SystemExit):
        cli.main(["release", "--Execute.timeout=5"])
    assert "unrecognized arguments" in capsys.readouterr().err


def _course(tmp_path, students=("student0",)):
    for student in students:
        (tmp_path / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    return tmp_path


def _grade_nothing(monkeypatch):
    """Whatever would grade or touch the gradebook records that it was reached."""
    reached = []
    monkeypatch.setattr(batch, "fork_server", lambda checker_imports=False: reached.append("fork"))
    monkeypatch.setattr(batch, "ensure_assignment", lambda root: reached.append("gradebook"))
    monkeypatch.setattr(batch, "grade_batch", lambda root, names, **options: reached.append("grade"))
    monkeypatch.setattr(result_folders, "grade_to_folders", lambda root, given, out: reached.append("grade") or [])
    return reached


GRADE_HERE = {"batch": lambda root, out: batch.autograde(root, student_ids=["student0"]),
              "results-dir": lambda root, out: result_folders.grade_students_to(root, ["student0"], out)}


@pytest.mark.parametrize("way", sorted(GRADE_HERE))
def test_each_way_of_grading_here_refuses_without_the_data(tmp_path, monkeypatch, way):
    """Code review 2026-11-27: the --results-dir path (a Slurm job's) went on without the data."""
    root = _course(tmp_path / "course")
    monkeypatch.setenv("TRANSLAB_DATA_DIR", str(tmp_path / "nowhere"))
    monkeypatch.setenv("TRANSLAB_COURSE_SECRET", "a secret for this test")
    reached = _grade_nothing(monkeypatch)
    with pytest.raises(GradingError) as refused:
        GRADE_HERE[way](root, tmp_path / "out")
    assert reached == [] and "train.tsv" in str(refused.value) and "make data" in str(refused.value)
    assert "Nothing was graded" in str(refused.value) and not (tmp_path / "out").exists()


@pytest.mark.parametrize("way", sorted(GRADE_HERE))
def test_each_way_of_grading_refuses_without_the_secret_and_names_the_fix(tmp_path, monkeypatch, way):
    root = _course(tmp_path / "course")
    monkeypatch.delenv("TRANSLAB_COURSE_SECRET", raising=False)
    monkeypatch.setattr("grader.grading.preflight.require_data", lambda where="this machine": None)
    reached = _grade_nothing(monkeypatch)
    with pytest.raises(GradingError) as refused:
        GRADE_HERE[way](root, tmp_path / "out")
    assert reached == [] and "variants --init" in str(refused.value) and "Nothing was graded" in str(refused.value)


@pytest.mark.parametrize("way", sorted(GRADE_HERE))
def test_each_way_of_grading_refuses_a_student_without_a_submission(tmp_path, monkeypatch, way):
    root = _course(tmp_path / "course", students=("student1",))
    reached = _grade_nothing(monkeypatch)
    with pytest.raises(GradingError) as refused:
        GRADE_HERE[way](root, tmp_path / "out")
    assert reached == [] and "no submission for 'student0'" in str(refused.value)


def test_autograde_hands_the_nbgrader_options_on(tmp_path, monkeypatch):
    given = {}
    monkeypatch.setattr(batch, "autograde", lambda root, jobs, student_ids, extra, **options: given.update(
        root=root, student_ids=student_ids, extra=extra, **options) or "report")
    monkeypatch.setattr(batch, "print_summary", lambda root, report, timeout: 0 if report == "report" else 9)
    code = cli.main(["--root", str(tmp_path), "autograde", "--student", "alice", "--Execute.timeout=5",
                     "--GuardedExecute.notebook_budget=30"])
    assert code == 0 and given["student_ids"] == ["alice"] and given["sandbox"] is True
    assert given["extra"] == ("--Execute.timeout=5", "--GuardedExecute.notebook_budget=30")


def test_a_warm_press_takes_the_course_fingerprint_once_for_its_grader_and_its_tasks(tmp_path, monkeypatch):
    """The warm grader is chosen by the digest the press's tasks carry: one reading of the course, not two (two
    readings cost 0.03 s a press, and a file changed between them could part the grader from its tasks)."""
    from contextlib import contextmanager
    from types import SimpleNamespace
    command, taken, seen = cli.command_module("autograde"), [], {}

    @contextmanager
    def held(root, idle_s, course_fingerprint=None):
        seen["held"] = course_fingerprint
        yield "spec.json"

    def on_cluster(root, spec, *args, course_fingerprint=None, **options):
        seen["tasks"] = course_fingerprint
        return SimpleNamespace(cluster=spec)

    monkeypatch.setattr(command, "fingerprint", lambda root: taken.append(root) or {"digest": f"d{len(taken)}"})
    monkeypatch.setattr(command, "held", held)
    monkeypatch.setattr(command, "autograde_on_cluster", on_cluster)
    monkeypatch.setattr(batch, "print_summary", lambda root, report, timeout: 0)
    monkeypatch.setenv("TRANSLAB_COURSE_SECRET", "a secret for this test")
    root = _course(tmp_path / "course", students=("alice",))
    assert cli.main(["--root", str(root), "autograde", "--warm", "--student", "alice"]) == 0
    assert len(taken) == 1 and seen == {"held": {"digest": "d1"}, "tasks": {"digest": "d1"}}


@pytest.mark.parametrize("refused", ["no secret", "no submission"])
def test_a_warm_press_that_is_refused_starts_no_warm_grader(tmp_path, monkeypatch, capsys, refused):
    """The refusal comes before the warm grader is found or started: a misconfigured course does not pay a
    grader's start (4-20 s) nor leave one holding 0.6 GB for its idle minutes."""
    root = _course(tmp_path / "course", students=("student0",) if refused == "no secret" else ("student1",))
    if refused == "no secret":
        monkeypatch.delenv("TRANSLAB_COURSE_SECRET", raising=False)
    command, entered = cli.command_module("autograde"), []
    monkeypatch.setattr(command, "held", lambda *args, **options: entered.append(args))
    assert cli.main(["--root", str(root), "autograde", "--warm", "--student", "student0"]) == 1
    said = capsys.readouterr().err
    assert entered == [] and ("variants --init" in said if refused == "no secret" else "no submission for" in said)


@pytest.mark.parametrize("verbose", [False, True])
def test_feedback_says_one_line_a_student_and_nbgrader_s_log_only_when_asked(tmp_path, monkeypatch, capsys, verbose):
    """``make feedback`` printed nbgrader's six INFO lines a student: now a line a student and the class's, and
    nbgrader's own log level quiets it (its errors still show and fail) unless ``ARGS=--verbose``."""
    from grader.commands import feedback
    students, calls = ("ann", "ben"), []

    def nbgrader(root, *args):
        calls.append(args)
        for student in students:
            for notebook in ("01_first", "02_second"):
                page = root / "feedback" / student / ASSIGNMENT / f"{notebook}.html"
                page.parent.mkdir(parents=True, exist_ok=True)
                page.write_text("<html></html>", encoding="utf-8")
        return ""

    monkeypatch.setattr(feedback, "nbgrader", nbgrader)
    monkeypatch.setattr(feedback, "held_back", lambda root, mode, how: [])
    assert cli.main(["--root", str(tmp_path), "feedback", "--force", *(["--verbose"] if verbose else [])]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[:2] == [f"  {student}: 2 page(s) in feedback/{student}/{ASSIGNMENT}/" for student in students]
    assert lines[2].startswith(f"feedback for 2 student(s), 4 page(s), in {tmp_path / 'feedback'}") and len(lines) == 3
    assert ("--log-level=ERROR" in calls[0]) is not verbose and ("ARGS=--verbose" in lines[2]) is not verbose
