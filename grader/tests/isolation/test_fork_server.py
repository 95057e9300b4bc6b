"""The fork server that every nbgrader process of a batch is forked from (grader.grading.nbgrader_process.fork_server):
it holds nbgrader already imported, the checks too when it forks many students, and never what grading does not use
(see grader/__init__.py)."""
from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from grader.grading import batch, nbgrader_process
from grader.commands.release import release
from grader.course import GradingError
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

PROBE = """\
import json, sys
from grader.grading import nbgrader_process

CHILD = '''
import gc, json, sys
import nbformat
frozen = gc.get_freeze_count() > 100_000  # nbgrader's objects: out of this child's collections
compiled = sorted(key[1:] for key in nbformat.validator.validators)  # before the child validates anything
nbformat.validate(nbformat.v4.new_notebook())  # jsonschema still validates without the module kept out
json.dump({"frozen": frozen, "validators": compiled, **{name: sys.modules.get(name) is not None for name in %r}}, sys.stdout)
'''
if __name__ == "__main__":
    names = ["nbgrader.apps.nbgraderapp", "jsonschema", "rfc3987_syntax", "torch", "translab.checks",
             "torch.fx.experimental.symbolic_shapes", "IPython.paths", "sqlalchemy.dialects.sqlite"]
    child = nbgrader_process.fork_server(checker_imports=sys.argv[1] == "1").Process(target=exec, args=(CHILD % names,))
    child.start()
    child.join(120)
    sys.exit(child.exitcode)
"""


@pytest.mark.parametrize("checker_imports", [True, False])
def test_children_start_with_nbgrader_imported_and_the_checks_only_when_asked(tmp_path, checker_imports):
    script = tmp_path / "probe.py"
    script.write_text(PROBE)
    done = subprocess.run([sys.executable, str(script), str(int(checker_imports))], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-2000:]
    minor = nbformat.v4.nbformat_minor  # the strict validator and nbconvert's relaxed one, compiled before the forks
    assert json.loads(done.stdout) == {"frozen": True, "validators": [[4, minor, False], [4, minor, True]],
                                       "nbgrader.apps.nbgraderapp": True, "jsonschema": True, "rfc3987_syntax": False,
                                       "torch": checker_imports, "translab.checks": checker_imports,
                                       "torch.fx.experimental.symbolic_shapes": checker_imports,
                                       "IPython.paths": True, "sqlalchemy.dialects.sqlite": True}


@pytest.mark.parametrize("count, sandbox", [(1, True), (3, True), (1, False), (3, False)])
def test_autograde_starts_the_fork_server_before_the_gradebook_with_the_checks_for_an_unsandboxed_class(
        tmp_path, monkeypatch, count, sandbox):
    """The checks' imports go to the fork server only where its nbgrader processes run checkers themselves: a
    sandboxed batch forks them from its zygote (verdicts.ForkedChecker)."""
    for index in range(count):
        (tmp_path / "submitted" / f"student{index}" / batch.ASSIGNMENT).mkdir(parents=True)
    calls = []
    monkeypatch.setattr(batch, "fork_server", lambda checker_imports=False: calls.append(("fork", checker_imports)))
    monkeypatch.setattr(batch, "ensure_assignment", lambda root: calls.append(("gradebook",)))
    monkeypatch.setattr(batch, "grade_batch", lambda root, names, **options: calls.append(("grade", len(names))))
    batch.autograde(tmp_path, sandbox=sandbox)
    assert calls == [("fork", count > 1 and not sandbox), ("gradebook",), ("grade", count)]


def test_autograde_refuses_before_anything_when_the_data_is_missing(tmp_path, monkeypatch):
    (tmp_path / "submitted" / "student0" / batch.ASSIGNMENT).mkdir(parents=True)
    monkeypatch.setenv("TRANSLAB_DATA_DIR", str(tmp_path / "nowhere"))
    calls = []
    monkeypatch.setattr(batch, "fork_server", lambda checker_imports=False: calls.append("fork"))
    monkeypatch.setattr(batch, "grade_batch", lambda root, names, **options: calls.append("grade"))
    with pytest.raises(GradingError) as refused:
        batch.autograde(tmp_path)
    assert calls == [] and "train.tsv" in str(refused.value) and "make data" in str(refused.value)


@pytest.mark.parametrize("body, told", [("c = get_config()\nc.Execute.timeout = 60\n", None),
                                        ("raise ValueError('a typo on line 1')\n", "ValueError('a typo on line 1')"),
                                        ("import os\nos._exit(3)\n", "loading it ended the process")])
def test_a_configuration_that_does_not_load_stops_the_batch_with_its_error(tmp_path, body, told):
    (tmp_path / "nbgrader_config.py").write_text(body)
    if told is None:
        nbgrader_process.check_config(tmp_path)
        return
    with pytest.raises(GradingError) as refused:
        nbgrader_process.check_config(tmp_path)
    assert told in str(refused.value) and "fix it and grade again" in str(refused.value)


def test_a_configuration_that_does_not_load_stops_the_release(tmp_path):
    """nbgrader logs a configuration that raises and releases with its defaults: without ours, the summaries that
    give written answers away (grader.course.after_grading) would reach students."""
    (tmp_path / "solutions" / batch.ASSIGNMENT).mkdir(parents=True)
    (tmp_path / "nbgrader_config.py").write_text("raise ValueError('a typo on line 1')\n")
    with pytest.raises(GradingError) as refused:
        release(tmp_path)
    assert "a typo on line 1" in str(refused.value) and not (tmp_path / "notebooks").exists()


def test_a_plain_process_of_the_environment_skips_the_iri_grammar_and_still_validates(tmp_path):
    """`make setup` puts grader/skip_iri_syntax.pth in the environment: a process that imports jsonschema before the
    grader (plain `nbgrader`, a Jupyter server) does not compile rfc3987_syntax's grammar (1 s), and notebooks
    still validate."""
    probe = ("import sys, nbformat\nnbformat.validate(nbformat.v4.new_notebook())\n"
             "print(repr(sys.modules.get('rfc3987_syntax', 'never imported')))")
    done = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "None", f"rfc3987_syntax was {done.stdout.strip()}: run make setup"


def test_the_fork_server_ends_at_once_with_what_it_printed_and_without_tearing_down_its_imports():
    """What it holds is imports only: it skips the interpreter's teardown (0.5 s with nbgrader's), during which it
    held the batch's stdout open after the batch had ended, and flushes its output first."""
    script = ("import grader.grading.fork_server_exit\nclass Held:\n    def __del__(self):\n"
              "        print('torn down', flush=True)\nheld = Held()\nprint('printed before the end', end='')\n")
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout, done.stderr) == (0, "printed before the end", "")


CHILD_EXIT = """\
import sys
from grader.grading import nbgrader_process
if __name__ == "__main__":
    # as an nbgrader child does (nbgrader_process._nbgrader_main): the exit handlers it inherited, then its own code
    child = nbgrader_process.fork_server().Process(target=exec, args=("import atexit, sys\\natexit._run_exitfuncs()\\n"
                                                                      "sys.exit(3)",))
    child.start()
    child.join(120)
    print(child.exitcode)
"""


def test_a_child_of_the_fork_server_keeps_its_own_exit_code(tmp_path):
    script = tmp_path / "child_exit.py"
    script.write_text(CHILD_EXIT)
    done = subprocess.run([sys.executable, str(script)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert (done.returncode, done.stdout.strip()) == (0, "3"), done.stderr[-2000:]
