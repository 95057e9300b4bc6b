"""GuardedExecute on tiny notebooks in a plain python3 kernel: a notebook's budget, a
kernel that dies, a kernel that ignores the interrupt.  The cells that ran keep their outputs; every code
cell that did not run carries an error output (so nbgrader scores it 0, never full marks)."""
from __future__ import annotations

import socket
import time

import nbformat
import pytest
from traitlets import List
from traitlets.config import Configurable

from grader.nbgrader_plugins.clear_outputs_after_hidden_tests import HIDDEN_AFTER_NOTE, ClearOutputsAfterHiddenTests
from grader.course.demos import DEMO_KEY, NOT_RUN
from grader.grading import next_kernel
from grader.isolation import kernel_stages
from grader.nbgrader_plugins.guarded_execute import INCIDENTS, GuardedExecute

from conftest import still_running

pytestmark = pytest.mark.slow


def run_grader(sources: list[str], path: str = ".", demos: tuple[int, ...] = (), **traits) -> tuple[list, list[str], float]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(s) for s in sources])
    for index in demos:
        notebook.cells[index].metadata[DEMO_KEY] = {"demo": True}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    executor = GuardedExecute(kernel_name="python3", **traits)
    start = time.monotonic()
    notebook, resources = executor.preprocess(notebook, {"metadata": {"path": path}})
    return notebook.cells, resources[INCIDENTS], time.monotonic() - start


def _errors(cell) -> list[str]:
    return [output.ename for output in cell.outputs if output.output_type == "error"]


def test_an_ordinary_notebook_runs_as_with_nbgrader():
    cells, incidents, _ = run_grader(["x = 1", "print(x + 1)", "raise ValueError('student bug')", "x"], notebook_budget=60)
    assert incidents == []
    assert [_errors(c) for c in cells] == [[], [], ["ValueError"], []]
    assert cells[1].outputs[0].text == "2\n"


@pytest.mark.parametrize("skip_demos", [True, False])
def test_a_demo_no_cell_needs_is_left_out_and_says_so_unless_asked_to_run_it(skip_demos):
    cells, incidents, _ = run_grader(["x = 1", "raise RuntimeError('a training run')", "print(x)"], demos=(1,),
                               notebook_budget=60, skip_demos=skip_demos)
    assert incidents == [] and _errors(cells[0]) == [] and cells[2].outputs[0].text == "1\n"
    if skip_demos:
        assert _errors(cells[1]) == [] and cells[1].outputs[0].text == NOT_RUN and cells[1].execution_count is None
    else:
        assert _errors(cells[1]) == ["RuntimeError"]


def test_the_notebook_budget_stops_the_cells_after_it():
    # The budget's clock starts before the kernel does, which takes 1 s on a quiet machine and up to 4 s on a busy
    # 2-core one: 12 s leaves the first two cells room on any of them, and the third can never fit.
    cells, incidents, seconds = run_grader(["import time\npassed = 1", "time.sleep(2)", "time.sleep(60)", "passed"],
                                     notebook_budget=12, timeout=120)
    assert [_errors(c) for c in (cells[0], cells[1], cells[3])] == [[], [], ["CellNotRun"]]
    assert _errors(cells[2])[-1] == "TimeBudgetExceeded"  # after the interrupt's KeyboardInterrupt
    assert "time budget of 12 s" in cells[3].outputs[0].evalue
    assert len(incidents) == 1 and incidents[0].startswith("cell 2:")
    assert seconds < 35, f"the budget did not bound the notebook: {seconds:.0f} s"


def test_a_dead_kernel_keeps_what_ran_before():
    cells, incidents, _ = run_grader(["earned = 1", "import os\nos._exit(1)", "earned", "print('after')"], notebook_budget=60)
    assert [_errors(c) for c in cells] == [[], ["DeadKernelError"], ["CellNotRun"], ["CellNotRun"]]
    assert "kernel died" in cells[2].outputs[0].evalue
    assert len(incidents) == 1 and incidents[0].startswith("cell 1:")


def test_a_kernel_that_ignores_the_interrupt_is_given_up():
    cells, incidents, seconds = run_grader(["earned = 1", "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\n"
                                      "while True:\n    pass", "earned"], notebook_budget=60, timeout=3)
    assert _errors(cells[0]) == [] and _errors(cells[2]) == ["CellNotRun"]
    assert _errors(cells[1])[-1] == "UnresponsiveKernel"
    assert len(incidents) == 1
    assert seconds < 40


# ----------------------------------------------------------------- one kernel for a student's notebooks

PID_AND_STATE = "import os\nprint(os.getpid(), sorted(k for k in globals() if not k.startswith('_')))"


def _pid_and_names(cells, index: int = -1) -> tuple[str, str]:
    pid, names = cells[index].outputs[0].text.split(" ", 1)
    return pid, names.strip()


def test_each_notebook_is_graded_in_a_kernel_of_its_own(tmp_path):
    """No kernel outlives its notebook: nothing the first notebook did (a name, a patched module) reaches the
    student's next one, which in the sandbox imports another stage of translab."""
    first, incidents, _ = run_grader(["import string\nstring.ascii_letters = ''\nleft_over = 1", PID_AND_STATE],
                                     path=str(tmp_path), notebook_budget=60)
    assert incidents == []
    second, _, _ = run_grader(["import string\nprint(string.ascii_letters == '')", PID_AND_STATE], path=str(tmp_path),
                              notebook_budget=60)
    assert _pid_and_names(second)[0] != _pid_and_names(first)[0]
    assert "left_over" not in _pid_and_names(second)[1] and second[0].outputs[0].text == "False\n"


def test_a_display_updated_after_the_first_hidden_test_keeps_what_it_showed_before():
    """Issue 47, rule 3: a display shown before the hidden test and updated during it (with what the hidden test
    gave the answer) stands in an earlier cell; it keeps what it showed when the hidden test began."""
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("from IPython.display import display\nshown = display('before', display_id=True)"),
        nbformat.v4.new_code_cell("### BEGIN HIDDEN TESTS\nshown.update('a hidden input: 7 13')\n"
                                  "### END HIDDEN TESTS"),
        nbformat.v4.new_code_cell("shown.update('after: 7 13')")])
    notebook.cells[1].metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "hidden", "locked": True,
                                              "points": 1}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook, _ = GuardedExecute(kernel_name="python3", notebook_budget=60).preprocess(
        notebook, {"metadata": {"path": "."}})
    shown = str(notebook.cells[0].outputs)
    assert "before" in shown and "7 13" not in shown, shown


# ----------------------------------------------------------------- the next notebook's kernel, started ahead

class _Converter(Configurable):
    """What GuardedExecute reads of nbgrader's converter (its exporter's parent): the notebooks it converts in turn."""
    notebooks = List()


PID_AND_STAGE = f"import os\nprint(os.getpid(), os.environ.get({kernel_stages.STAGE_ENV!r}))"


def _in_turn(folder, names: list[str], graded: list[str]) -> list[tuple[str, str]]:
    """Grade the notebooks ``graded`` (of the converter's ``names``) in turn, each printing its kernel's pid and
    stage; after each, the pid of the kernel that waits for the next one, if any."""
    exporter = Configurable(parent=_Converter(notebooks=[f"{folder}/{name}.ipynb" for name in names]))
    seen = []
    for name in graded:
        notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(PID_AND_STAGE)])
        notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
        notebook, _ = GuardedExecute(parent=exporter, kernel_name="python3", notebook_budget=60).preprocess(
            notebook, {"metadata": {"path": str(folder)}, "nbgrader": {"notebook": name}})
        waiting = next_kernel.held()
        seen.append((notebook.cells[0].outputs[0].text.split(),
                     waiting and (waiting.notebook, waiting.km.provisioner.process.pid)))
    return seen


def test_the_next_notebook_runs_in_the_kernel_started_for_it_while_this_one_ran(tmp_path):
    try:
        seen = _in_turn(tmp_path, ["01_a", "02_b", "03_c"], ["01_a", "02_b", "03_c"])
    finally:
        next_kernel.discard()
    (first, waiting_1), (second, waiting_2), (third, waiting_3) = seen
    assert [first[1], second[1], third[1]] == ["1", "2", "3"]  # each kernel has its own notebook's stage
    assert len({first[0], second[0], third[0]}) == 3
    assert waiting_1 == ("02_b", int(second[0])) and waiting_2 == ("03_c", int(third[0])) and waiting_3 is None


def test_a_kernel_started_for_a_notebook_that_does_not_come_next_is_ended(tmp_path):
    try:
        (_, waiting), (other, _) = _in_turn(tmp_path, ["01_a", "02_b", "03_c"], ["01_a", "03_c"])
    finally:
        next_kernel.discard()
    assert waiting[0] == "02_b" and int(other[0]) != waiting[1] and other[1] == "3"
    assert not still_running([waiting[1]])


def test_the_kernel_that_waits_when_grading_ends_is_ended(tmp_path):
    (_, waiting), = _in_turn(tmp_path, ["01_a", "02_b"], ["01_a"])
    next_kernel.discard()  # what the nbgrader process's exit does
    assert not still_running([waiting[1]])


def test_a_waiting_kernel_whose_checker_socket_was_taken_is_not_used(tmp_path):
    """The running kernel shares the student's socket folder with the next notebook's checker: a socket that is
    no longer the checker's (moved aside, one of the kernel's own in its place, dead with that kernel) means the
    next notebook starts a kernel and checker of its own."""
    try:
        (_, waiting), = _in_turn(tmp_path, ["01_a", "02_b"], ["01_a"])
        path = next_kernel.held().checker.path
        path.rename(path.with_name("moved"))
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as taken:
            taken.bind(str(path))
            taken.listen(1)
        (second, _), = _in_turn(tmp_path, ["01_a", "02_b"], ["02_b"])
    finally:
        next_kernel.discard()
    assert int(second[0]) != waiting[1] and second[1] == "2"
    assert not still_running([waiting[1]])


# ----------------------------------------------------------------- a test cell scores the checker's verdict

RIGHT_MASK = "import torch\nfrom translab import checks\n" \
    "def generate_square_subsequent_mask(sz):\n    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n"


def _graded(answer: str, test: str) -> tuple[list, list[str]]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(answer), nbformat.v4.new_code_cell(test)])
    notebook.cells[0].metadata["nbgrader"] = {"solution": True, "grade": False, "grade_id": "answer", "locked": False}
    notebook.cells[1].metadata["nbgrader"] = {"solution": False, "grade": True, "grade_id": "test", "locked": True,
                                              "points": 1}
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    notebook, resources = GuardedExecute(kernel_name="python3", notebook_budget=120).preprocess(
        notebook, {"metadata": {"path": "."}})
    return notebook.cells, resources[INCIDENTS]


def test_a_passing_check_keeps_its_point_whatever_the_kernel_raises_after_it():
    cells, _ = _graded(RIGHT_MASK, "checks.check_mask(generate_square_subsequent_mask)\nraise RuntimeError('after')")
    assert _errors(cells[1]) == []
    assert cells[1].outputs[0].text.startswith("ok  causal mask for sz = 5")


def test_a_test_cell_whose_check_never_reports_scores_nothing_and_is_flagged():
    cells, incidents = _graded(RIGHT_MASK + "checks.check_mask = lambda *a, **k: print('ok  all tests passed')",
                               "checks.check_mask(generate_square_subsequent_mask)")
    assert _errors(cells[1]) == ["CheckFailed"]
    assert "never reported a verdict" in cells[1].outputs[-1].evalue
    assert all("all tests passed" not in output.get("text", "") for output in cells[1].outputs)
    assert any("never reported a verdict: the answer replaced the checks" in i for i in incidents), incidents


def test_a_test_cell_that_stops_on_a_missing_answer_is_not_taken_for_tampering():
    cells, incidents = _graded("import torch\nfrom translab import checks",
                               "checks.check_mask(generate_square_subsequent_mask)")
    assert _errors(cells[1]) == ["CheckFailed"] and "never reported a verdict" in cells[1].outputs[-1].evalue
    assert incidents == []


def test_a_failing_check_shows_the_checkers_message_and_the_answer_is_flagged_when_it_reaches_for_tricks():
    cells, incidents = _graded(RIGHT_MASK.replace("diagonal=1", "diagonal=0") + "import sys\nsys.settrace(None)",
                               "checks.check_mask(generate_square_subsequent_mask)")
    assert _errors(cells[1]) == ["CheckFailed"]
    assert "the diagonal of the mask for sz=5 is -inf" in cells[1].outputs[-1].evalue
    assert incidents == ["cell 0: the answer installs a tracer"]


def test_feedback_shows_no_output_of_a_student_cell_that_ran_after_a_hidden_test():
    """Issue 30, attack 6: what a student's cell printed after a hidden test ran (the hidden inputs its answer
    recorded) is replaced by a note in the feedback; test cells keep the checker's outputs."""
    def cell(source, output, **nbgrader):
        code = nbformat.v4.new_code_cell(source)
        code.outputs = [nbformat.v4.new_output("stream", name="stdout", text=output)]
        if nbgrader:
            code.metadata["nbgrader"] = nbgrader
        return code
    answer, test = {"solution": True, "grade": False}, {"solution": False, "grade": True}
    notebook = nbformat.v4.new_notebook(cells=[
        cell("seen = []", "before", **answer),
        cell("check(visible)", "visible checked", **test),
        cell("### BEGIN HIDDEN TESTS\ncheck(hidden)\n### END HIDDEN TESTS", "hidden checked", **test),
        cell("def f(x):\n    seen.append(x)", "answer after", **answer),
        cell("check(f)", "later test", **test),
        cell("print(seen)", "[7, 13]"),
    ])
    notebook.cells.insert(4, nbformat.v4.new_markdown_cell("prose"))
    done, _ = ClearOutputsAfterHiddenTests().preprocess(notebook, {})
    shown = [[output.text for output in c.outputs] for c in done.cells if c.cell_type == "code"]
    note = [HIDDEN_AFTER_NOTE]
    assert shown == [["before"], ["visible checked"], ["hidden checked"], note, ["later test"], note]
