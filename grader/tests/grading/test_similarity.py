"""`make similarity` on a class where one student's answers were copied three ways (verbatim, variables renamed,
statements reordered) and four others wrote their own: the copies rank first, the one-line mask that everyone
writes alike does not count, and the HTML page escapes what submissions hold."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.grading import similarity
from translab.paths import REPO_ROOT

pytestmark = pytest.mark.slow  # starts processes or trains: make test runs it, make test-fast does not

NB1 = "01_mask_and_positional_encoding"
NB2 = "02_model_and_parameters"
MASK = "def generate_square_subsequent_mask(sz):\n    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n"

ORIGINAL = {
    (NB1, "pe_answer"): '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        positions = torch.arange(0, max_len).float().unsqueeze(1)
        frequencies = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(positions * frequencies)
        table[:, 1::2] = torch.cos(positions * frequencies)
        self.register_buffer("pe", table)

    def forward(self, x):
        seq_len = x.size(1)
        return self.dropout(x + self.pe[:seq_len])
''',
    (NB1, "attention_answer"): '''def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.shape[-1]
    logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
    if mask is not None:
        logits = logits + mask
    attn = torch.softmax(logits, dim=-1)
    out = torch.matmul(attn, v)
    return out, attn
''',
    (NB2, "count_answer"): '''def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    emb = ntoken * nhid
    qkv = 3 * nhid * nhid + 3 * nhid
    out_proj = nhid * nhid + nhid
    ff1 = nhid * dim_feedforward + dim_feedforward
    ff2 = dim_feedforward * nhid + nhid
    norms = 4 * nhid
    n_out = ntoken if nclasses is None else nclasses
    head = nhid * n_out + n_out
    return emb + nlayers * (qkv + out_proj + ff1 + ff2 + norms) + head
''',
}
RENAMES = {"positions": "pos", "frequencies": "div", "table": "enc", "seq_len": "length", "logits": "s", "attn": "w",
           "out": "result", "emb": "embedding_size", "qkv": "in_projection", "ff1": "first", "ff2": "second",
           "norms": "layer_norms", "n_out": "outs"}
REORDERED = {
    (NB1, "pe_answer"): '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        frequencies = torch.exp(torch.arange(0, d_model, 2).float() * -(math.log(10000.0) / d_model))
        positions = torch.arange(0, max_len).float().unsqueeze(1)
        table = torch.zeros(max_len, d_model)
        table[:, 1::2] = torch.cos(positions * frequencies)
        table[:, 0::2] = torch.sin(positions * frequencies)
        self.register_buffer("pe", table)
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, x):
        seq_len = x.size(1)
        return self.dropout(x + self.pe[:seq_len])
''',
    (NB1, "attention_answer"): '''def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.shape[-1]
    logits = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(d)
    if mask is not None:
        logits = logits + mask
    attn = torch.softmax(logits, dim=-1)
    return torch.matmul(attn, v), attn
''',
    (NB2, "count_answer"): '''def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    n_out = ntoken if nclasses is None else nclasses
    head = nhid * n_out + n_out
    norms = 4 * nhid
    ff2 = dim_feedforward * nhid + nhid
    ff1 = nhid * dim_feedforward + dim_feedforward
    out_proj = nhid * nhid + nhid
    qkv = 3 * nhid * nhid + 3 * nhid
    emb = ntoken * nhid
    return emb + nlayers * (qkv + out_proj + ff1 + ff2 + norms) + head
''',
}
OWN = {  # four students' own answers, written each their way
    "fatima": {
        (NB1, "pe_answer"): '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pe = torch.zeros(max_len, d_model)
        for pos in range(max_len):
            for i in range(0, d_model, 2):
                angle = pos / (10000 ** (i / d_model))
                pe[pos, i] = math.sin(angle)
                pe[pos, i + 1] = math.cos(angle)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.shape[1]].unsqueeze(0))
''',
        (NB1, "attention_answer"): '''def scaled_dot_product_attention(q, k, v, mask=None):
    scale = 1.0 / q.size(-1) ** 0.5
    scores = torch.einsum("...qd,...kd->...qk", q, k) * scale
    scores = scores if mask is None else scores + mask
    weights = scores.softmax(-1)
    return torch.einsum("...qk,...kd->...qd", weights, v), weights
''',
        (NB2, "count_answer"): '''def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    per_layer = 4 * (nhid * nhid + nhid) + 2 * nhid * dim_feedforward + dim_feedforward + nhid + 2 * 2 * nhid
    classes = nclasses if nclasses is not None else ntoken
    return ntoken * nhid + per_layer * nlayers + (nhid + 1) * classes
''',
    },
    "gustavo": {
        (NB1, "pe_answer"): '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.drop = nn.Dropout(p=dropout)
        idx = torch.arange(max_len)[:, None].to(torch.float32)
        inv = 1.0 / torch.pow(10000.0, torch.arange(0, d_model, 2).to(torch.float32) / d_model)
        ang = idx * inv
        self.register_buffer("pe", torch.stack((ang.sin(), ang.cos()), dim=2).reshape(max_len, d_model))

    def forward(self, x):
        return self.drop(x + self.pe[None, : x.size(1), :])
''',
        (NB1, "attention_answer"): '''def scaled_dot_product_attention(q, k, v, mask=None):
    kt = k.transpose(-1, -2)
    raw = q.matmul(kt)
    raw.div_(math.sqrt(k.size(-1)))
    if mask is not None:
        raw += mask
    p = torch.nn.functional.softmax(raw, dim=-1)
    return p.matmul(v), p
''',
        (NB2, "count_answer"): '''def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    total = ntoken * nhid
    for _ in range(nlayers):
        total += 4 * nhid * nhid + 4 * nhid
        total += 2 * nhid * dim_feedforward + dim_feedforward + nhid
        total += 4 * nhid
    k = ntoken if nclasses is None else nclasses
    total += k * nhid + k
    return total
''',
    },
    "hana": {
        (NB1, "pe_answer"): '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super(PositionalEncoding, self).__init__()
        self.dropout = nn.Dropout(p=dropout)
        even = torch.arange(0, d_model, 2, dtype=torch.float)
        rates = torch.exp(-math.log(10000.0) * even / d_model)
        grid = torch.outer(torch.arange(max_len, dtype=torch.float), rates)
        buffer = torch.empty(max_len, d_model)
        buffer[:, ::2], buffer[:, 1::2] = grid.sin(), grid.cos()
        self.register_buffer("pe", buffer)

    def forward(self, x):
        b, t, d = x.shape
        return self.dropout(x + self.pe[:t])
''',
        (NB1, "attention_answer"): '''def scaled_dot_product_attention(q, k, v, mask=None):
    dk = k.shape[-1]
    sim = (q @ k.mT) * dk ** -0.5
    if mask is not None:
        sim = sim.masked_fill(mask == float("-inf"), float("-inf"))
    w = sim.softmax(dim=-1)
    return w @ v, w
''',
        (NB2, "count_answer"): '''def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    V, d, L, f = ntoken, nhid, nlayers, dim_feedforward
    C = V if nclasses is None else nclasses
    attention = 4 * d * d + 4 * d
    mlp = d * f + f + f * d + d
    ln = 2 * 2 * d
    return V * d + L * (attention + mlp + ln) + d * C + C
''',
    },
    "ivan": {
        (NB1, "pe_answer"): '''class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        half = torch.arange(d_model // 2, dtype=torch.float32)
        div = 10000.0 ** (2 * half / d_model)
        p = torch.arange(max_len, dtype=torch.float32).unsqueeze(-1) / div
        pe = torch.zeros(max_len, d_model)
        pe[:, 0::2] = p.sin()
        pe[:, 1::2] = p.cos()
        self.register_buffer("pe", pe)

    def forward(self, x):
        n = x.size(1)
        y = x + self.pe[:n, :]
        return self.dropout(y)
''',
        (NB1, "attention_answer"): '''def scaled_dot_product_attention(q, k, v, mask=None):
    dim = q.size(-1)
    a = torch.bmm(q.reshape(-1, *q.shape[-2:]), k.reshape(-1, *k.shape[-2:]).transpose(1, 2)).reshape(
        *q.shape[:-1], k.shape[-2]) / dim ** 0.5
    a = a + (0 if mask is None else mask)
    a = torch.softmax(a, -1)
    return a @ v, a
''',
        (NB2, "count_answer"): '''def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    sizes = {"embedding": ntoken * nhid,
             "layers": nlayers * (4 * (nhid ** 2 + nhid) + 2 * (nhid * dim_feedforward) + dim_feedforward + 5 * nhid),
             "head": (nhid + 1) * (nclasses or ntoken)}
    return sum(sizes.values())
''',
    },
}


SCRIPT = "# </pre><script>alert(1)</script>\n"  # a comment, for the page: it must arrive there as text


def _renamed(source: str) -> str:
    import re
    for old, new in RENAMES.items():
        source = re.sub(rf"\b{old}\b", new, source)
    return source


def _class() -> dict[str, dict]:
    students = {"dana": ORIGINAL, "eli_verbatim": dict(ORIGINAL),
                "rae_renamed": {task: _renamed(source) + SCRIPT for task, source in ORIGINAL.items()},
                "ola_reordered": REORDERED, **OWN}
    return {name: {**answers, (NB1, "mask_answer"): MASK} for name, answers in students.items()}


def _submit(root: Path, name: str, answers: dict) -> None:
    for notebook in (NB1, NB2):
        data = json.loads((REPO_ROOT / "solutions" / "transfer_learning" / f"{notebook}.ipynb").read_text())
        for cell in data["cells"]:
            grade_id = ((cell.get("metadata") or {}).get("nbgrader") or {}).get("grade_id")
            if (notebook, grade_id) in answers:
                cell["source"] = answers[(notebook, grade_id)]
        folder = root / "submitted" / name / "transfer_learning"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{notebook}.ipynb").write_text(json.dumps(data))


@pytest.fixture(scope="module")
def reported(tmp_path_factory):
    root = tmp_path_factory.mktemp("similarity")
    shutil.copytree(REPO_ROOT / "notebooks", root / "notebooks")  # the released stubs: boilerplate
    for name, answers in _class().items():
        _submit(root, name, answers)
    done = subprocess.run([sys.executable, "-m", "grader", "--root", str(root), "similarity"], capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return root, done.stdout


def test_the_copies_rank_first(reported):
    root, output = reported
    rows = list(csv.DictReader(open(root / "reports" / "similarity.csv", encoding="utf-8")))
    ranked = list(dict.fromkeys((row["student_a"], row["student_b"]) for row in rows))
    copiers = {"dana", "eli_verbatim", "rae_renamed", "ola_reordered"}
    top = ranked[:6]  # the four who share one set of answers make six pairs
    assert all(set(pair) <= copiers for pair in top), ranked[:8]
    scores = {pair: float(next(r["pair_score"] for r in rows if (r["student_a"], r["student_b"]) == pair))
              for pair in ranked}
    assert scores[("dana", "eli_verbatim")] == pytest.approx(1.0)
    assert min(scores[p] for p in top) > 2 * max([scores[p] for p in ranked[6:]] or [0.0])
    assert not any(row["task"].endswith("mask_answer") for row in rows), "the one-line mask everyone writes"
    assert "dana" in output and "similarity:" in output


def test_the_report_is_the_same_in_every_process(reported):
    """Python salts ``hash()`` per process; the scores must not follow the salt."""
    root, _ = reported
    tables = []
    for seed in ("1", "2"):
        subprocess.run([sys.executable, "-m", "grader", "--root", str(root), "similarity"], capture_output=True,
                       check=True, timeout=600, env={**os.environ, "PYTHONHASHSEED": seed})
        tables.append((root / "reports" / "similarity.csv").read_text(encoding="utf-8"))
    assert tables[0] == tables[1]


def test_the_page_shows_the_answers_side_by_side_escaped(reported):
    root, _ = reported
    page = (root / "reports" / "similarity.html").read_text(encoding="utf-8")
    assert "<script" not in page.lower() and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<mark>") >= 6 and "dana and eli_verbatim" in page
    assert "default-src 'none'" in page


def test_a_past_year_is_compared_too(tmp_path):
    root = tmp_path / "course"
    past = tmp_path / "last_year"
    (root / "notebooks").mkdir(parents=True)
    shutil.copytree(REPO_ROOT / "notebooks", root / "notebooks", dirs_exist_ok=True)
    _submit(root, "zoe", ORIGINAL)
    _submit(root, "yan", OWN["hana"])
    _submit(past, "dana_2025", ORIGINAL)
    pairs = similarity.compare(root, past / "submitted")
    assert (pairs[0].a, pairs[0].b) == ("past:dana_2025", "zoe") and pairs[0].score > 0.9


def test_an_answer_copied_from_translabs_own_code_is_found(tmp_path):
    """translab's implementation of each task (what a released stage, or a classmate's checkout, holds) is compared
    with every answer: a pasted copy matches it, a student's own answer does not."""
    import ast
    root = tmp_path / "course"
    shutil.copytree(REPO_ROOT / "notebooks", root / "notebooks")
    shutil.copytree(REPO_ROOT / "translab", root / "translab", ignore=shutil.ignore_patterns("__pycache__"))
    text = (REPO_ROOT / "translab" / "model.py").read_text(encoding="utf-8")
    pasted = "\n\n".join(ast.get_source_segment(text, node) for node in ast.parse(text).body
                          if getattr(node, "name", None) in ("PositionalEncoding", "sinusoidal_table"))
    _submit(root, "zoe", {**OWN["ivan"], (NB1, "pe_answer"): "import math\n\n" + pasted + "\n"})
    _submit(root, "yan", OWN["hana"])
    pe = {(p.a, p.b): m for p in similarity.compare(root) for m in p.matches if m.task == f"{NB1}/pe_answer"}
    assert min(pe[(similarity.REFERENCE, "zoe")].similarity) > 0.9, pe
    assert all(max(pe[pair].similarity) < 0.3 for pair in [(similarity.REFERENCE, "yan"), ("yan", "zoe")] if pair in pe), pe


def test_make_report_shows_the_most_similar_pairs(reported):
    from grader.grading.report import similar_section
    root, _ = reported
    section = similar_section(root / "reports")
    assert "dana</td><td>eli_verbatim" in section and section.count("<tr>") == 11
    assert "Not computed yet" in similar_section(root / "nothing-here")


def test_the_page_in_a_real_browser_marks_the_copies_and_runs_nothing(reported, browser):
    """Headless Chromium opens the page: the side-by-side answers show their marked spans, no dialog opens (the
    submission's script is text), and a screenshot is kept beside the page for the instructor's eyes."""
    root, _ = reported
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    dialogs = []
    page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
    page.goto((root / "reports" / "similarity.html").as_uri())
    assert page.locator("mark").count() >= 6 and page.locator("script").count() == 0
    assert page.locator("h2").first.inner_text().startswith("1. dana and eli_verbatim")
    page.locator("#pair-2").scroll_into_view_if_needed()
    page.screenshot(path=str(root / "reports" / "similarity.png"))
    assert (root / "reports" / "similarity.png").stat().st_size > 10_000 and dialogs == []
    page.close()
