"""Verdicts outside the student's process: the wire's codec, the checker's windows, and tricks that fail now.

A "kernel" here is a fresh Python process given ``TRANSLAB_CHECKER``, as nbgrader's kernel is by
``GuardedExecute``; the corpus (test_corpus.py) runs the same tricks through nbgrader and the sandbox."""
from __future__ import annotations

import inspect
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from grader.tests.isolation.test_zygote import process_gone
from grader.grading.verdicts import Call, Checker, CheckerGone, ForkedChecker, expected_calls, suspicious
from grader.isolation.zygote import Zygote
from translab import wire
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

RIGHT_MASK = """
def generate_square_subsequent_mask(sz):
    return torch.triu(torch.full((sz, sz), float("-inf")), diagonal=1)
"""
WRONG_MASK = """
def generate_square_subsequent_mask(sz):
    return torch.zeros(sz, sz)
"""


def run_kernel(code: str, env: dict, timeout: float = 120) -> subprocess.CompletedProcess:
    """``code`` in a fresh Python process that has torch and ``checks`` imported, as a notebook's kernel has."""
    source = "import torch\nfrom translab import checks\n" + textwrap.dedent(code)
    return subprocess.run([sys.executable, "-c", source], env=env, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def zygote(tmp_path_factory):
    """The batch's checkers' zygote (grader.isolation.zygote), which forks a checker per notebook when the batch is sandboxed."""
    with Zygote(tmp_path_factory.mktemp("work"), {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT,
                role="checker") as started:
        yield started


# make test runs each verdict test on the forked checker (what a batch grades with) and samples the in-process one
# (plain nbgrader's fallback, the same Checker) once, in test_the_in_process_checker_judges_as_the_forked_one;
# make test-exhaustive runs every test on both (about 50 s more)
@pytest.fixture(params=[pytest.param("thread", marks=pytest.mark.exhaustive), "forked"])
def checker(request, tmp_path):
    """Each verdict test twice: the checker as a thread of this process, and forked from a zygote."""
    if request.param == "thread":
        instance = Checker()
    else:
        instance = ForkedChecker(request.getfixturevalue("zygote").path, tmp_path / "ipc")
    yield instance
    instance.stop()


def grade(checker: Checker, code: str, calls: list[Call]):
    checker.open("cell", calls)
    done = run_kernel(code, {**os.environ, wire.ENV: str(checker.path)})
    return checker.close(), done


# ----------------------------------------------------------------- the codec

class Liar(torch.Tensor):
    """Equal to everything, as far as torch's functions are asked."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if func in (torch.allclose, torch.equal):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})


def roundtrip(value):
    objects = {}
    tree, buffers = wire.encode(value, objects)
    return wire.decode(tree, buffers, session=wire.Session(socket.socket(socket.AF_UNIX))), objects


def test_tensors_arrive_as_plain_tensors_with_their_own_bytes():
    liar = torch.zeros(3, 3).as_subclass(Liar)
    back, _ = roundtrip({"liar": liar, "half": torch.arange(6, dtype=torch.float16).reshape(2, 3),
                         "flags": torch.tensor([True, False]), "empty": torch.zeros(0, 4), "n": np.int64(7),
                         "array": np.arange(4.0), "nested": [(1, 2.5, "x", None)], "inf": float("-inf")})
    assert type(back["liar"]) is torch.Tensor and not torch.allclose(back["liar"], torch.ones(3, 3))
    assert back["half"].dtype == torch.float16 and back["half"].tolist() == [[0, 1, 2], [3, 4, 5]]
    assert back["flags"].tolist() == [True, False] and tuple(back["empty"].shape) == (0, 4)
    assert type(back["n"]) is np.int64 and back["n"] == 7 and back["array"].tolist() == [0, 1, 2, 3]
    assert back["nested"] == [(1, 2.5, "x", None)] and back["inf"] == float("-inf")


def test_a_received_tensor_is_built_on_its_buffer_and_two_on_one_buffer_do_not_alias():
    raw = bytearray(torch.arange(4, dtype=torch.float32).numpy().tobytes())  # as wire.recv returns a buffer
    node = {"t": "tensor", "dtype": "torch.float32", "shape": [4], "buf": 0}
    first, second = wire.decode({"t": "list", "v": [node, node]}, [raw])
    assert first.data_ptr() == np.frombuffer(raw, dtype=np.uint8).ctypes.data, "copied, not built on the buffer"
    first.add_(1)  # the kernel named one buffer twice: the second tensor must not change with the first
    assert second.tolist() == [0, 1, 2, 3] and first.tolist() == [1, 2, 3, 4]


def _received(nodes: list, buffer: bytes) -> tuple[dict, list]:
    """(header, buffers) as the checker receives a message of ``nodes`` over a real socket."""
    import threading
    here, there = socket.socketpair()
    with here, there:
        sender = threading.Thread(target=wire.send, args=(there, {"value": {"t": "list", "v": nodes}}, [buffer]))
        sender.start()
        received = wire.recv(here)
        sender.join()
    return received


def test_a_message_whose_tensors_share_one_buffer_cannot_make_the_checker_hold_gigabytes():
    """Issue 30, attack 4: 64 MiB sent, named by 60 tensor nodes, once became 3.76 GiB in the checker."""
    buffer = bytes(64 * 2**20)
    node = {"t": "tensor", "dtype": "torch.float32", "shape": [16 * 2**20], "buf": 0}
    header, buffers = _received([node] * 60, buffer)
    with pytest.raises(wire.WireError, match="copies"):
        wire.decode(header["value"], buffers)
    header, buffers = _received([node] * 3, buffer)  # an honest message may still name a buffer a few times
    assert [tuple(t.shape) for t in wire.decode(header["value"], buffers)] == [(16 * 2**20,)] * 3


def test_the_checkers_big_tensors_reach_the_kernel_as_their_bytes_and_views_as_torch_pickles_them():
    big = torch.randn(600, 600)  # 1.4 MB: raw bytes
    grad = torch.randn(700, 500, requires_grad=True)
    ints = torch.arange(300_000)
    shared = torch.randn(800, 800)
    value = {"big": big, "grad": grad, "ints": ints, "transposed": shared.t(), "row": shared[1],
             "small": torch.ones(3), "parameter": torch.nn.Parameter(torch.randn(600, 600))}
    assert wire.owns_its_storage(big) and not wire.owns_its_storage(shared.t())
    assert not wire.owns_its_storage(shared[1]) and not wire.owns_its_storage(torch.ones(3))
    back = wire.unpack(wire.pack(value), {})
    for name, tensor in value.items():
        assert type(back[name]) is type(tensor) and back[name].dtype == tensor.dtype, name
        assert torch.equal(back[name], tensor) and back[name].stride() == tensor.stride(), name
        assert back[name].requires_grad == tensor.requires_grad, name
    back["big"].add_(1)  # the kernel's copy is its own, and writable
    assert not torch.equal(back["big"], big)


def test_other_objects_stay_in_the_kernel_as_handles_that_isinstance_sees():
    back, objects = roundtrip([torch.nn.Linear(2, 2), lambda: 1])
    linear, function = back
    assert wire.remote(linear) and wire.remote(function)
    assert isinstance(linear, torch.nn.Module) and isinstance(linear, torch.nn.Linear)
    assert not isinstance(function, torch.nn.Module)
    assert len(objects) == 2


@pytest.mark.parametrize("tree, buffers", [
    ({"t": "tensor", "dtype": "torch.float32", "shape": [2, 2], "buf": 0}, [b"\0" * 12]),  # bytes != shape
    ({"t": "tensor", "dtype": "object", "shape": [1], "buf": 0}, [b"\0" * 8]),
    ({"t": "ndarray", "dtype": "|O", "shape": [1], "buf": 0}, [b"\0" * 8]),
    ({"t": "pickle", "v": "gASVAAAAAAAAAAB9lC4="}, []),
    (["a bare list"], []),
])
def test_the_checker_refuses_what_is_not_plain_data(tree, buffers):
    with pytest.raises(wire.WireError):
        wire.decode(tree, buffers, None)


# ----------------------------------------------------------------- windows and verdicts

def test_a_right_answer_passes_and_the_checker_says_so(checker):
    record, done = grade(checker, RIGHT_MASK + "checks.check_mask(generate_square_subsequent_mask, split='hidden')",
                         [Call("check_mask", "hidden")])
    assert record.passed, (record, done.stderr[-2000:])
    assert any("hidden sizes" in line for line in record.lines())
    assert "ok" in done.stdout  # the kernel shows the checker's message


def test_a_wrong_answer_fails_with_the_same_feedback_as_in_the_lab(checker):
    record, done = grade(checker, WRONG_MASK + "checks.check_mask(generate_square_subsequent_mask)",
                         [Call("check_mask")])
    message, key = record.failure()
    assert not record.passed and key == "mask.zero_one" and "holds only 0 and 1" in message
    assert "CheckFailed" in done.stderr and "holds only 0 and 1" in done.stderr


def test_an_answer_that_empties_and_zeroes_the_checkpoint_it_is_given_leaves_the_checkers_intact(checker):
    """The checker sends the kernel the real checkpoint without copying it first: the kernel gets its own bytes,
    so a right mapping that then empties the dict and zeroes every tensor it was given still passes."""
    kernel = """
    from translab.bert import load_checkpoint, weight_mapping
    config, _ = load_checkpoint()
    sources = weight_mapping(config)  # read here: the check forbids translab's mapping while it runs

    def convert_checkpoint(checkpoint, config):
        state = {name: torch.cat([checkpoint[key] for key in keys]).clone() for name, keys in sources.items()}
        for tensor in checkpoint.values():
            tensor.zero_()
        checkpoint.clear()
        return state

    checks.check_weight_mapping(convert_checkpoint)
    """
    record, done = grade(checker, kernel, [Call("check_weight_mapping")])
    assert record.passed, (record, done.stderr[-2000:])


def test_the_in_process_checker_judges_as_the_forked_one():
    """The sample of the thread twins make test keeps: a right answer passes, a wrong one fails with its key."""
    checker = Checker()
    try:
        record, done = grade(checker, RIGHT_MASK + "checks.check_mask(generate_square_subsequent_mask, split='hidden')",
                             [Call("check_mask", "hidden")])
        assert record.passed, (record, done.stderr[-2000:])
        record, done = grade(checker, WRONG_MASK + "checks.check_mask(generate_square_subsequent_mask)",
                             [Call("check_mask")])
        assert not record.passed and record.failure()[1] == "mask.zero_one", record
    finally:
        checker.stop()


def test_a_check_outside_a_graded_cell_runs_in_the_kernel(checker):
    record, done = grade(checker, RIGHT_MASK + "checks.check_mask(generate_square_subsequent_mask)", [])
    assert record.results == [] and record.refused and "ok" in done.stdout


def test_a_cell_that_never_calls_its_check_scores_nothing(checker):
    record, _ = grade(checker, RIGHT_MASK + "print('ok  all tests passed')", [Call("check_mask")])
    assert not record.passed and record.failure()[1] == "no_verdict"


def test_a_check_of_another_cell_is_refused(checker):
    record, _ = grade(checker, RIGHT_MASK + "checks.check_mask(generate_square_subsequent_mask)",
                      [Call("check_mask", "hidden")])
    assert not record.passed and "not the next check" in record.refused[0]


HARD_CODED_MASK_OF_5 = """
def generate_square_subsequent_mask(sz):
    return torch.triu(torch.full((5, 5), float("-inf")), diagonal=1)
"""
# Issue 30, attack 1: the kernel's translab.wire.serve, reached under a computed name, rewritten to ask for the visible
# cases while the request names the hidden split.
REWRITTEN_REQUEST = ("import importlib\nw = importlib.import_module('translab.' + 'wi' + 're')\nserve = w.serve\n"
                     "w.serve = lambda name, args, kwargs, split, *more: serve(name, args, {**kwargs, 'split': 'visible'}, "
                     "split, *more)\n")


def test_a_hidden_test_runs_the_hidden_cases_whatever_split_the_kernel_asks_for(checker):
    code = HARD_CODED_MASK_OF_5 + REWRITTEN_REQUEST + "checks.check_mask(generate_square_subsequent_mask, split='hidden')\n"
    record, _ = grade(checker, code, [Call("check_mask", "hidden")])
    assert len(record.results) == 1 and not record.passed, record.results
    control, _ = grade(checker, HARD_CODED_MASK_OF_5 + REWRITTEN_REQUEST +
                       "checks.check_mask(generate_square_subsequent_mask)\n", [Call("check_mask")])
    assert control.passed, control.results  # the visible cases: size 5 only


def test_stated_numbers_are_judged_on_the_variant_the_grader_derived_not_the_kernels(checker):
    """A student's numbers are checked against the configuration the grader derived from their id: a kernel that
    claims a classmate's variant (its environment, or the check's argument) gets no say."""
    from translab import diagnosis, variants
    mine, theirs = (variants.from_code(variants.derive_code(b"k", sid)) for sid in ("mallory", "alice"))
    counts = {v.code: (diagnosis.right_count(v.config("lm")), diagnosis.right_count(v.config("classifier")))
              for v in (mine, theirs)}
    pasted = "checks.check_stated_counts({}, {}, variant={!r})\n".format(*counts[theirs.code], theirs.code)
    checker.open("cell", [Call("check_stated_counts")], mine.code)
    done = run_kernel(pasted, {**os.environ, wire.ENV: str(checker.path), variants.VARIANT_ENV: theirs.code})
    record = checker.close()
    assert not record.passed, (record.results, done.stderr[-2000:])
    assert "these are the counts of another configuration" in record.results[0][3]
    own = "checks.check_stated_counts({}, {})\n".format(*counts[mine.code])
    checker.open("cell", [Call("check_stated_counts")], mine.code)
    run_kernel(own, {**os.environ, wire.ENV: str(checker.path)})
    assert checker.close().passed
    checker.open("cell", [Call("check_stated_counts")])  # a grader without the course secret says so
    run_kernel(own, {**os.environ, wire.ENV: str(checker.path)})
    record = checker.close()
    assert not record.passed and record.results[0][4] == "checker_error"


def test_every_check_of_a_cell_must_pass(checker):
    code = RIGHT_MASK + "checks.check_mask(generate_square_subsequent_mask)\n"
    record, _ = grade(checker, code, [Call("check_mask"), Call("check_mask", "hidden")])
    assert not record.passed and len(record.results) == 1


def _children(pid: int) -> set[int]:
    return {int(child) for task in Path(f"/proc/{pid}/task").iterdir()
            for child in (task / "children").read_text().split()}


def _forked_checker_pid(zygote: Zygote, before: set[int]) -> int:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        new = _children(zygote.process.pid) - before
        if new:
            return new.pop()
        time.sleep(0.05)
    raise AssertionError("the zygote forked no checker")


def test_a_forked_checker_ends_when_its_nbgrader_process_does(zygote, tmp_path):
    before = _children(zygote.process.pid)
    forked = ForkedChecker(zygote.path, tmp_path / "ipc")
    forked.open("cell", [Call("check_mask")])  # answered: it runs
    pid = _forked_checker_pid(zygote, before)
    for stream in (forked._replies, forked._control, forked._zygote):  # what this process's death closes
        stream.close()
    assert process_gone(pid), "a forked checker outlived the process it served"


def test_a_forked_checker_has_a_kernels_address_space_at_most(zygote, tmp_path):
    """Issue 30, attack 4: the checker ran as root without a memory limit."""
    from grader.isolation.sandbox import Limits
    before = _children(zygote.process.pid)
    forked = ForkedChecker(zygote.path, tmp_path / "ipc")
    forked.open("cell", [Call("check_mask")])
    limits = Path(f"/proc/{_forked_checker_pid(zygote, before)}/limits").read_text()
    row = next(line for line in limits.splitlines() if line.startswith("Max address space"))
    assert row.split()[3:5] == [str(Limits.address_space)] * 2, row
    forked.close()


def test_a_checker_the_zygote_cannot_fork_fails_loudly_not_as_a_wrong_answer(tmp_path):
    with Zygote(tmp_path, {**os.environ, "PYTHONPATH": str(REPO_ROOT)}, REPO_ROOT, role="checker") as zygote:
        zygote.process.kill()  # listening, then gone: the request reaches no one
        zygote.process.wait()
        with pytest.raises((OSError, CheckerGone)):
            ForkedChecker(zygote.path, tmp_path / "ipc").open("cell", [Call("check_mask")])


MASK_CHECK = ("checks.check_mask(generate_square_subsequent_mask, split='hidden')\n", Call("check_mask", "hidden"))
PE_CHECK = ("checks.check_positional_encoding(PositionalEncoding, split='hidden')\n",
            Call("check_positional_encoding", "hidden"))
TRICKS = {  # each passes its check when the check judges inside the kernel (test below)
    # the answer silences the checker from inside the function the check calls
    "patch_at_call": ("""
        def generate_square_subsequent_mask(sz):
            checks.part1.fail = lambda *a, **k: None
            return torch.zeros(sz, sz)
    """, MASK_CHECK),
    # ... walks up to the checker's frame for the expected value
    "frame": ("""
        import sys
        def generate_square_subsequent_mask(sz):
            frame = sys._getframe(1)
            while frame is not None:
                expected = frame.f_locals.get("expected")
                if isinstance(expected, torch.Tensor) and tuple(expected.shape) == (sz, sz):
                    return expected.clone()
                frame = frame.f_back
            return torch.zeros(sz, sz)
    """, MASK_CHECK),
    # ... returns a tensor that equals everything
    "subclass": (inspect.getsource(Liar) + textwrap.dedent("""
        class PositionalEncoding(torch.nn.Module):
            def __init__(self, d_model, dropout=0.1, max_len=5000):
                super().__init__()
            def forward(self, x):
                return x.as_subclass(Liar)
    """), PE_CHECK),
    # ... jumps over every line of the check that would fail
    "tracer": ("""
        import linecache, sys
        def generate_square_subsequent_mask(sz):
            return torch.zeros(sz, sz)
        def _local(frame, event, arg):
            line = lambda n: linecache.getline(frame.f_code.co_filename, n).strip()
            if event == "line" and line(frame.f_lineno).startswith(("fail(", "fail_mask(")):
                frame.f_lineno = next(n for n in range(frame.f_lineno, frame.f_code.co_firstlineno + 400)
                                      if line(n).startswith("sizes = "))
            return _local
        sys.settrace(lambda frame, event, arg: _local if frame.f_code.co_name == "check_mask" else None)
    """, MASK_CHECK),
    # ... reads the expected values from the references (the sandbox hides the grader's from the kernel)
    "references": ("""
        from translab import references
        def generate_square_subsequent_mask(sz):
            for split in references.load("mask").values():
                for size, expected in split.items():
                    if int(size) == sz:
                        return expected.clone()
            return torch.zeros(sz, sz)
    """, MASK_CHECK),
}


def _trick(name: str, env: dict) -> subprocess.CompletedProcess:
    code, (call, _) = TRICKS[name]
    return run_kernel(textwrap.dedent(code) + call + "print('PASSED')\n", env)


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_each_trick_passes_a_check_that_judges_inside_the_kernel(trick):
    env = {k: v for k, v in os.environ.items() if k != wire.ENV}
    done = _trick(trick, env)
    assert "PASSED" in done.stdout, done.stderr[-1500:]


@pytest.mark.parametrize("trick", sorted(TRICKS))
def test_no_trick_changes_the_checkers_verdict(checker, trick, tmp_path):
    checker.open("cell", [TRICKS[trick][1][1]])
    # the kernel cannot read the grader's references (the sandbox hides them): here an empty folder, for the
    # kernel only (the checker reads the real ones)
    _trick(trick, {**os.environ, wire.ENV: str(checker.path), "TRANSLAB_REFERENCES": str(tmp_path)})
    record = checker.close()
    assert record.results and not record.passed, f"{trick}: {record}"


# ----------------------------------------------------------------- reading the cells

def test_expected_calls_are_read_from_the_test_cells_source_in_order():
    source = ("# two checks\n### BEGIN HIDDEN TESTS\nchecks.check_masking(mask_tokens, part='structure', "
              "split='hidden')\nchecks.check_masking(mask_tokens, part=\"rates\", split='hidden')\n### END HIDDEN TESTS")
    assert expected_calls(source) == [Call("check_masking", "hidden", "structure"), Call("check_masking", "hidden", "rates")]
    assert expected_calls("print('no check')") == [] and expected_calls("checks.check_mask(") == []


@pytest.mark.parametrize("source, reason", [
    ("import sys\nsys.settrace(lambda *a: None)", "installs a tracer"),
    ("f = lambda: 0\nf.__code__ = (lambda: 1).__code__", "replaces a function's code"),
    ("checks.fail = print", "assigns checks.fail"),
    ("import torch.nn.modules.transformer as t\nm = t._generate_square_subsequent_mask(3)",
     "calls PyTorch's private mask helper"),
    ("import grader.isolation.sandbox", "imports the grader"),
    ("class PE(torch.nn.Module):\n    def named_parameters(self, *a, **k):\n        return iter(())",
     "redefines named_parameters, which the checks read"),
    ("PE.parameters = lambda self: iter(())", "reassigns parameters, which the checks read"),
])
def test_answers_that_reach_for_the_tools_of_a_rewrite_are_flagged(source, reason):
    assert reason in suspicious(source)


def test_an_ordinary_answer_is_not_flagged():
    assert suspicious(RIGHT_MASK + "\nclass PositionalEncoding(torch.nn.Module):\n    pass\n") == []
    assert suspicious("def count(model):\n    return sum(p.numel() for p in model.parameters())\n") == []


# ----------------------------------------------------------------- measured diagnoses, through the checker

MODULES = """
import math
from torch import nn

class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000, base=10000.0):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(base) / d_model))
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = torch.sin(position * div_term)
        pe[:, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)  # persistent: in the state_dict, unlike the reference's

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])

class Base1000(PositionalEncoding):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__(d_model, dropout, max_len, base=1000.0)

def transformer_model(embedding="encoder"):
    class TransformerModel(nn.Module):
        def __init__(self, ntoken, nhead, nhid, nlayers, dropout=0.5):
            super().__init__()
            self.nhid = nhid
            setattr(self, embedding, nn.Embedding(ntoken, nhid))
            self.pos_encoder = PositionalEncoding(nhid, dropout)
            layer = nn.TransformerEncoderLayer(nhid, nhead, nhid, dropout, batch_first=True)
            self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)

        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            x = self.pos_encoder(getattr(self, embedding)(src) * math.sqrt(self.nhid))
            if src_key_padding_mask is not None and src_mask is not None:
                src_key_padding_mask = torch.zeros(src_key_padding_mask.shape).masked_fill(
                    src_key_padding_mask, float("-inf"))
            return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask)
    return TransformerModel
"""


@pytest.mark.parametrize("call, answer, key", [
    ("check_transformer_model", "transformer_model()", None),
    ("check_transformer_model", "transformer_model('embedding')", "model.renamed"),
    ("check_positional_encoding", "Base1000", "pe.base"),
])
def test_measured_diagnoses_reach_the_grader_as_in_the_lab(checker, call, answer, key):
    """The checks that read the student's module (its state_dict, its outputs) answer the same from the grading
    kernel, where the module is a handle and load_state_dict's result a plain tuple, as in the lab."""
    record, done = grade(checker, MODULES + f"checks.{call}({answer}, split='hidden')", [Call(call, "hidden")])
    if key is None:
        assert record.passed, (record, done.stderr[-2000:])
    else:
        message, found = record.failure()
        assert not record.passed and found == key, (message, found, done.stderr[-2000:])


@pytest.mark.parametrize("name", ["../checker", "/tmp/checker", "kernel-1"])
def test_a_checkers_socket_takes_one_of_its_two_names_never_a_path(tmp_path, name):
    with pytest.raises(ValueError, match="named one of"):
        Checker(tmp_path, name)
    assert not (tmp_path / "kernel-1").exists() and not (tmp_path.parent / "checker").exists()
