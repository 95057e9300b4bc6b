"""The course secret and each student's variant, on the instructor's side (``grader.course.variants``)."""
from __future__ import annotations

import csv
import os
import stat
import subprocess
import sys

from grader.course import variants as course_variants
from translab.contract import ASSIGNMENT
from grader.isolation.sandbox import hidden_paths
from translab import diagnosis, variants
from translab.paths import REPO_ROOT


def _grader(root, *args, env=None):
    return subprocess.run([sys.executable, "-m", "grader", "--root", str(root), *args], capture_output=True, text=True,
                          timeout=300, env=env or os.environ, cwd=root)


def _without_secret_env() -> dict:
    return {k: v for k, v in os.environ.items() if k != course_variants.SECRET_ENV}


def test_the_secret_is_made_once_private_and_never_replaced(tmp_path):
    path, made = course_variants.create_secret(tmp_path)
    assert made and stat.S_IMODE(path.stat().st_mode) == 0o600 and len(path.read_text().strip()) == 64
    before = path.read_text()
    done = _grader(tmp_path, "variants", "--init", env=_without_secret_env())
    assert done.returncode == 0 and "kept" in done.stdout and path.read_text() == before
    assert path in hidden_paths(tmp_path), "a student's kernel must not read the course secret"


def test_one_students_code_and_the_class_report_with_the_terms_to_grade_by(tmp_path):
    course_variants.create_secret(tmp_path)
    env = _without_secret_env()
    secret = (tmp_path / course_variants.SECRET_FILE).read_text().strip().encode()
    done = _grader(tmp_path, "variants", "--student", "alice", env=env)
    code = variants.shown_code(variants.derive_code(secret, "alice"))
    assert done.returncode == 0 and code in done.stdout and f'variants.use_code("{code}")' in done.stdout
    for student in ("alice", "bob", "carol"):
        (tmp_path / "submitted" / student / ASSIGNMENT).mkdir(parents=True)
    done = _grader(tmp_path, "variants", env=env)
    assert done.returncode == 0, done.stderr
    with open(tmp_path / "reports" / "variants.csv", newline="", encoding="utf-8") as file:
        rows = {row["student"]: row for row in csv.DictReader(file)}
    assert sorted(rows) == ["alice", "bob", "carol"]
    for student, row in rows.items():
        mine = variants.from_code(variants.derive_code(secret, student))
        assert row["code"] == variants.shown_code(mine.code) and int(row["ntoken"]) == mine.ntoken
        body = sum(int(row[k]) for k in ("embedding", "attention (all layers)", "feed_forward (all layers)",
                                         "layer_norms (all layers)"))
        assert body + int(row["lm_head"]) == int(row["n_params_lm"]) == diagnosis.right_count(mine.config("lm"))
        assert body + int(row["classifier_head"]) == int(row["n_params_classifier"]) \
            == diagnosis.right_count(mine.config("classifier"))
    # what is sent to students: each one's code and the line to run, no count that would answer part 2
    with open(tmp_path / "reports" / "variant_codes.csv", newline="", encoding="utf-8") as file:
        sent = list(csv.DictReader(file))
    assert [list(row) for row in sent] == [["student", "code", "run once"]] * 3
    assert all(row["code"] == rows[row["student"]]["code"] and f'use_code("{row["code"]}")' in row["run once"]
               for row in sent)


def test_grading_without_the_secret_refuses_and_grades_nothing(tmp_path):
    (tmp_path / "nbgrader_config.py").write_text((REPO_ROOT / "nbgrader_config.py").read_text())
    (tmp_path / "submitted" / "alice" / ASSIGNMENT).mkdir(parents=True)
    done = _grader(tmp_path, "autograde", env=_without_secret_env())
    assert done.returncode == 1 and "no course secret" in done.stderr and "Nothing was graded" in done.stderr
    assert not (tmp_path / "autograded").exists() and not (tmp_path / "gradebook.db").exists()


def test_a_student_without_a_code_is_told_what_to_do_and_a_saved_code_is_used(tmp_path, monkeypatch, capsys):
    for name in (variants.VARIANT_ENV, "TRANSLAB_STUDENT_ID", "JUPYTERHUB_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variants.CONFIG_ENV, str(tmp_path))
    monkeypatch.setenv("TRANSLAB_STUDENT_ID", "late-joiner")  # an id alone finds no code: none is in the release
    try:
        variants.mine()
        raise AssertionError("no code: mine() must say what to do")
    except variants.VariantUnknown as error:
        assert "use_code" in str(error) and "instructor" in str(error)
    code = variants.derive_code(b"a course", "late-joiner")
    assert variants.use_code(variants.shown_code(code).lower()) == variants.from_code(code)
    assert "Your configuration (code" in capsys.readouterr().out
    assert variants.mine().code == code  # saved: every later notebook finds it


def test_the_variant_a_notebook_shows_is_read_back_and_a_mismatch_explained():
    import nbformat
    code = variants.derive_code(b"a course", "alice")
    line = f"{variants.SHOWN}{variants.shown_code(code)}, for the student id 'alice'):\n  ntoken=..."
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("mine = variants.mine(show=True)",
                                  outputs=[nbformat.v4.new_output("stream", name="stdout", text=line)])])
    assert course_variants.variant_in_outputs(notebook) == code
    assert course_variants.variant_in_outputs(nbformat.v4.new_notebook()) is None
    assert course_variants.mismatch(code, code) is None and course_variants.mismatch(None, code) is None
    other = variants.derive_code(b"another secret", "alice")
    assert "the secret changed since the release" in course_variants.mismatch(code, other)
    notebook.metadata["translab"] = {course_variants.SHOWN_KEY: "forged"}
    from grader.nbgrader_plugins.record_variant_shown import RecordVariantShown
    recorded, _ = RecordVariantShown().preprocess(notebook, {})
    assert recorded.metadata["translab"][course_variants.SHOWN_KEY] == code
