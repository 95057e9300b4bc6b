"""The end of a process whose grading is done: nbgrader's, whose exporter ran a batch, and ``python -m grader``'s
(grader.grading.process_exit)."""
from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow  # starts processes: make test runs it, make test-fast does not

# An exit handler registered first runs last: it sees what the interpreter's exit will collect with.
EXIT = """\
import atexit, gc, sys
atexit.register(lambda: print("frozen" if gc.get_freeze_count() else "not frozen", flush=True))
from grader.grading.process_exit import skip_final_collections
{call}
print("graded", flush=True)
sys.exit(3)
"""


def _run(call: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", EXIT.format(call=call)], capture_output=True, text=True, timeout=60)


def test_after_the_batch_the_exit_collects_nothing_and_keeps_its_handlers_and_its_code():
    ended = _run("skip_final_collections(); skip_final_collections()")
    assert (ended.stdout.split(), ended.returncode) == (["graded", "frozen"], 3), ended.stderr


def test_without_it_the_exit_is_python_s_own():
    ended = _run("")
    assert (ended.stdout.split(), ended.returncode) == (["graded", "not", "frozen"], 3), ended.stderr


# ``python -m grader`` itself, on a command that ends with an error of its own (no result folder to merge)
COMMAND = """\
import atexit, gc, runpy, sys
atexit.register(lambda: print("frozen" if gc.get_freeze_count() else "not frozen", flush=True))
sys.argv = ["grader", "--root", sys.argv[1], "merge", sys.argv[1] + "/nothing-here"]
runpy.run_module("grader", run_name="__main__", alter_sys=True)
"""


def test_python_m_grader_ends_so_after_its_command_and_keeps_its_exit_code(tmp_path):
    ended = subprocess.run([sys.executable, "-c", COMMAND, str(tmp_path)], capture_output=True, text=True, timeout=60)
    assert "does not exist" in ended.stderr and ended.returncode == 1, ended.stderr
    assert ended.stdout.split() == ["frozen"], ended.stdout
