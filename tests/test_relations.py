"""Mistakes named by what the answer measurably does (translab.relations, the fits in translab.diagnosis), not by a
list of known wrong outputs: each answer below is in no variant list, written as a student would, and both the
visible check and its hidden twin name it with the same key.  Right answers in unusual forms are never named wrong.
One notebook runs them through a kernel, nbgrader's Validate and the feedback's HTML."""
from __future__ import annotations

import html
import re
import textwrap

import pytest
import torch

from translab import checks, diagnosis, relations, variants
from translab.checks.part1_encoding import pe_table

PRELUDE = """
import math
import torch
from torch import nn
from translab import checks
from translab.model import generate_square_subsequent_mask


class PositionalEncodingWith(nn.Module):
    base, first = 10000.0, 0
    sin_on_even = True

    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)
        position = torch.arange(self.first, self.first + max_len, dtype=torch.float32).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32) * (-math.log(self.base) / d_model))
        pe = torch.zeros(max_len, d_model)
        even, odd = (torch.sin, torch.cos) if self.sin_on_even else (torch.cos, torch.sin)
        pe[:, 0::2] = even(position * div_term)
        pe[:, 1::2] = odd(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):
        return self.dropout(x + self.pe[: x.size(1)])


class ModelThat(nn.Module):
    def __init__(self, base, head):
        super().__init__()
        self.base, self.head = base, head

    def logits(self, src, src_key_padding_mask=None, causal=True):
        mask = generate_square_subsequent_mask(src.size(1)) if causal else None
        return self.head(self.base(src, mask, src_key_padding_mask), src_key_padding_mask)


def right_count(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    outputs = ntoken if nclasses is None else nclasses
    layer = 4 * nhid * nhid + 4 * nhid + 2 * nhid * dim_feedforward + dim_feedforward + nhid + 4 * nhid
    return ntoken * nhid + nlayers * layer + nhid * outputs + outputs


def transformer_model(dim_feedforward=lambda nhid: nhid, embedding="encoder", decoder=False, scale=True,
                      positions=True, causal=True, padding=True):
    class TransformerModel(nn.Module):
        def __init__(self, ntoken, nhead, nhid, nlayers, dropout=0.5):
            super().__init__()
            self.nhid = nhid
            setattr(self, embedding, nn.Embedding(ntoken, nhid))
            self.pos_encoder = PositionalEncodingWith(nhid, dropout)
            width = {} if dim_feedforward is None else {"dim_feedforward": dim_feedforward(nhid)}
            layer = nn.TransformerEncoderLayer(nhid, nhead, dropout=dropout, batch_first=True, **width)
            self.transformer_encoder = nn.TransformerEncoder(layer, nlayers, enable_nested_tensor=False)
            if decoder:
                self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            x = getattr(self, embedding)(src) * (math.sqrt(self.nhid) if scale else 1.0)
            x = self.pos_encoder(x) if positions else x
            src_mask = src_mask if causal else None
            src_key_padding_mask = src_key_padding_mask if padding else None
            if src_key_padding_mask is not None and src_mask is not None:  # one dtype for both masks: no warning
                src_key_padding_mask = torch.zeros(src_key_padding_mask.shape).masked_fill(src_key_padding_mask,
                                                                                            float("-inf"))
            return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask)
    return TransformerModel


def heads(read):
    class LanguageModelHead(nn.Module):
        def __init__(self, nhid, ntoken):
            super().__init__()
            self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, hidden, src_key_padding_mask=None):
            return self.decoder(hidden)

    class ClassificationHead(LanguageModelHead):
        def forward(self, hidden, src_key_padding_mask=None):
            return self.decoder(read(hidden, src_key_padding_mask))
    return LanguageModelHead, ClassificationHead
"""

# name: (the answer, as a student writes it, then the check), the keys both checks give, words of the message
ANSWERS = {
    # outputs that are a transformation of the right one
    "model returns probabilities": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        return torch.softmax(self.logits(src, src_key_padding_mask, causal), dim=-1)
checks.check_model(Model, split=SPLIT)""", {"output.softmax"}, "CrossEntropyLoss applies log-softmax itself"),
    "model returns log-probabilities": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        return nn.functional.log_softmax(self.logits(src, src_key_padding_mask, causal), dim=2)
checks.check_model(Model, split=SPLIT)""", {"output.log_softmax"}, "log-softmax of the right one"),
    "model returns sequence-first": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        return self.logits(src, src_key_padding_mask, causal).permute(1, 0, 2)
checks.check_model(Model, split=SPLIT)""", {"output.transposed"}, "(seq, batch, ntoken) instead of (batch, seq, ntoken)"),
    "model divides by a temperature": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        return self.logits(src, src_key_padding_mask, causal) / 2.0
checks.check_model(Model, split=SPLIT)""", {"output.scaled"}, "multiplied by 0.5"),
    "model adds a bias of its own": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        return self.logits(src, src_key_padding_mask, causal) + 1.0
checks.check_model(Model, split=SPLIT)""", {"output.shifted"}, "plus 1 everywhere"),
    "model predicts every position from the last": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        out = self.logits(src, src_key_padding_mask, causal)
        return out[:, -1:].expand_as(out)
checks.check_model(Model, split=SPLIT)""", {"output.positions"}, "every position holds the right values of position"),
    "model shifts its outputs by one": ("""
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        out = self.logits(src, src_key_padding_mask, causal)
        return torch.cat([out[:, 1:], out[:, -1:]], dim=1)
checks.check_model(Model, split=SPLIT)""", {"output.positions"}, "shifted by +1"),
    # a formula's parameters, fitted
    "positional encoding of base 1000": ("""
class PositionalEncoding(PositionalEncodingWith):
    base = 1000.0
checks.check_positional_encoding(PositionalEncoding, split=SPLIT)""", {"pe.base"}, "base 1,000"),
    "positional encoding of base 500 with cos first": ("""
class PositionalEncoding(PositionalEncodingWith):
    base, sin_on_even = 500.0, False
checks.check_positional_encoding(PositionalEncoding, split=SPLIT)""", {"pe.base", "pe.phase"}, "sin and cos are exchanged"),
    "positional encoding from position 2": ("""
class PositionalEncoding(PositionalEncodingWith):
    first = 2
checks.check_positional_encoding(PositionalEncoding, split=SPLIT)""", {"pe.phase"}, "shifted by +2"),
    "positional encoding that adds nothing": ("""
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(x)
checks.check_positional_encoding(PositionalEncoding, split=SPLIT)""", {"pe.nothing_added"}, "returns its input unchanged"),
    "count with the feed-forward three times": ("""
def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    return right_count(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses) + nlayers * nhid * dim_feedforward
checks.check_parameter_formula(count_parameters, split=SPLIT)""", {"count.coefficients"},
        "3 x nlayers*nhid*dim_feedforward where the right count has 2"),
    "count with PyTorch's default feed-forward": ("""
def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    return right_count(ntoken, nhid, nlayers, nhead, 2048, nclasses)
checks.check_parameter_formula(count_parameters, split=SPLIT)""", {"count.ignores_dim_feedforward"},
        "as if dim_feedforward=2048 (nn.TransformerEncoderLayer's default"),
    "count that is the notebook's number": ("""
def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    return 1_008_100 if nclasses is None else 988_402
checks.check_parameter_formula(count_parameters, split=SPLIT)""", {"count.ignores_ntoken", "count.ignores_nhid",
                                                                    "count.ignores_nlayers", "count.ignores_dim_feedforward",
                                                                    "count.ignores_nclasses"}, "does not change with"),
    "attention divided by 2 sqrt(d)": ("""
def scaled_dot_product_attention(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / (2 * math.sqrt(q.size(-1)))  # sqrt(d) twice: once here, once 'for safety'
    if mask is not None:
        scores = scores + mask
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights
checks.check_attention(scaled_dot_product_attention, split=SPLIT)""", {"attention.scale"}, "divided by"),
    "attention divided by d to the 1.5": ("""
def scaled_dot_product_attention(q, k, v, mask=None):
    d = q.size(-1)
    weights = torch.softmax((q @ k.transpose(-2, -1) / d ** 0.5 + (0 if mask is None else mask)) / d, dim=-1)
    return weights @ v, weights
checks.check_attention(scaled_dot_product_attention, split=SPLIT)""", {"attention.scale"}, "d*sqrt(d)"),
    # modules that do not load the reference weights
    "encoder layer with PyTorch's default width": ("""
checks.check_transformer_model(transformer_model(dim_feedforward=None), split=SPLIT)""", {"model.layer_size"},
        "2048 is nn.TransformerEncoderLayer's default dim_feedforward"),
    "encoder layer four times as wide": ("""
checks.check_transformer_model(transformer_model(dim_feedforward=lambda nhid: 4 * nhid), split=SPLIT)""",
        {"model.layer_size"}, "is 4*nhid"),
    "embedding under another name": ("""
checks.check_transformer_model(transformer_model(embedding="embedding"), split=SPLIT)""", {"model.renamed"},
        "your embedding is named encoder in the skeleton"),
    "a head inside the base": ("""
checks.check_transformer_model(transformer_model(decoder=True), split=SPLIT)""", {"model.extra_layer"},
        "your module has decoder.weight, which the reference does not"),
}
# stated numbers have no hidden twin: one check, the notebook's, on the student's own configuration
MINE = variants.from_code(variants.derive_code(b"translab-tests", "bob"))
_LM, _CLASSES = diagnosis.right_count(MINE.config("lm")), diagnosis.right_count(MINE.config("classifier"))
_WIDE = _CLASSES + MINE.nlayers * (2 * MINE.nhid * (2048 - MINE.nhid) + (2048 - MINE.nhid))  # dim_feedforward=2048
STATED = {
    "stated counts of the other heads": (f"checks.check_stated_counts({_CLASSES}, {_LM}, {MINE.code!r})",
                                         {"count.other_configuration", "count.head_ignores_nclasses"},
                                         f"n_params_lm is the right count for a {MINE.nclasses}-class head"),
    "stated count with PyTorch's default width": (
        f"checks.check_stated_counts({_LM}, {_WIDE}, {MINE.code!r})", {"count.other_configuration"},
        "right count for dim_feedforward=2048"),
}


def _run(source: str, split: str) -> str:
    namespace: dict = {"SPLIT": split}
    exec(compile(textwrap.dedent(PRELUDE), "<prelude>", "exec"), namespace)  # noqa: S102 - the test's own answers
    with pytest.raises(checks.CheckFailed) as caught:
        exec(compile(textwrap.dedent(source), "<answer>", "exec"), namespace)  # noqa: S102
    return str(caught.value)


def _keys(message: str) -> set[str]:
    match = re.search(r"\[diagnosis: (.*)\]$", message)
    assert match, f"no diagnosis in:\n{message}"
    return {key for part in match.group(1).split() for key in part.split("|")}


@pytest.mark.parametrize("name", list(ANSWERS))
def test_the_visible_check_and_its_hidden_twin_name_the_same_measured_mistake(name):
    source, keys, words = ANSWERS[name]
    visible, hidden = _run(source, "visible"), _run(source, "hidden")
    assert _keys(visible) == _keys(hidden) == keys, (visible, hidden)
    assert words in visible, visible
    assert "\n  expected:" not in hidden and "tensor(" not in hidden, hidden


@pytest.mark.parametrize("name", list(STATED))
def test_a_stated_number_right_for_another_question_says_which(name):
    source, keys, words = STATED[name]
    message = _run(source, "visible")
    assert _keys(message) == keys and words in message, message


RIGHT_IN_ODD_FORMS = {
    "model in float64, non-contiguous": """
class Model(ModelThat):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        out = self.logits(src, src_key_padding_mask, causal).double()
        return out.transpose(0, 1).contiguous().transpose(0, 1)
checks.check_model(Model, split=SPLIT)""",
    "encoding by powers, in float64 then float32": """
class PositionalEncoding(nn.Module):
    def __init__(self, d_model, dropout=0.1, max_len=5000):
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        pos = torch.arange(max_len, dtype=torch.float64)[:, None]
        angle = pos / torch.pow(10000.0, torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)
        self.register_buffer("pe", torch.stack([angle.sin(), angle.cos()], dim=-1).flatten(1).float())

    def forward(self, x):
        return self.dropout(x + self.pe[None, : x.shape[1], :])
checks.check_positional_encoding(PositionalEncoding, split=SPLIT)""",
    "count written out term by term": """
def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    embedding = ntoken * nhid
    attention = 3 * nhid * nhid + 3 * nhid + nhid * nhid + nhid
    feed_forward = nhid * dim_feedforward + dim_feedforward + dim_feedforward * nhid + nhid
    norms = 2 * (2 * nhid)
    head = nhid * (nclasses or ntoken) + (nclasses or ntoken)
    return embedding + nlayers * (attention + feed_forward + norms) + head
checks.check_parameter_formula(count_parameters, split=SPLIT)""",
    "encoder that keeps its positional table in the state_dict": """
checks.check_transformer_model(transformer_model(), split=SPLIT)""",
}


@pytest.mark.parametrize("name", list(RIGHT_IN_ODD_FORMS))
def test_right_answers_in_unusual_forms_are_never_named_wrong(name, capsys):
    for split in ("visible", "hidden"):
        namespace: dict = {"SPLIT": split}
        exec(compile(textwrap.dedent(PRELUDE), "<prelude>", "exec"), namespace)  # noqa: S102
        try:
            exec(compile(textwrap.dedent(RIGHT_IN_ODD_FORMS[name]), "<answer>", "exec"), namespace)  # noqa: S102
        except checks.CheckFailed as failed:
            assert "[diagnosis:" not in str(failed) or "stderr_warning" in str(failed), str(failed)
            if "stderr_warning" not in str(failed):
                raise
        assert "ok" in capsys.readouterr().out or name.startswith("encoder that keeps")


def test_the_relations_hold_only_where_they_hold():
    """No finding for the right output, noise, or a sum that is not a softmax; the fitted base of a table built
    with any base is that base."""
    def same(a, b):
        return torch.allclose(a, b, atol=1e-5)
    right = torch.randn(3, 5, 7, generator=torch.Generator().manual_seed(0))
    assert relations.output_relation(right.clone(), right, same, position_axis=1) is None
    assert relations.output_relation(torch.randn(3, 5, 7), right, same, position_axis=1) is None
    normalised = right.abs() / right.abs().sum(-1, keepdim=True)  # rows sum to 1, but no softmax
    assert relations.output_relation(normalised, right, same) is None
    assert "sums to 1.000" in relations.measured(normalised, right, same)
    table = pe_table(25, 16)
    for base in (300.0, 1000.0, 3000.0, 100000.0):
        [finding] = relations.positional_fit(pe_table(25, 16, base=base), table)
        assert finding.key == "pe.base" and f"base {base:,.0f}" in finding.text
    assert relations.positional_fit(table, table) == []
    assert relations.positional_fit(torch.randn(25, 16), table) == []


@pytest.mark.slow
def test_measured_diagnoses_reach_the_notebook_validate_and_the_feedback(tmp_path):
    """Through a real kernel (what JupyterLab shows), nbgrader's Validate and nbconvert's HTML (the feedback page):
    each answer's cell fails with its measured diagnosis."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_code_cell, new_notebook
    from nbgrader.validator import Validator

    answers = {**ANSWERS, **STATED}  # every family, at least two answers each
    chosen = list(answers)
    cells = [new_code_cell(textwrap.dedent(PRELUDE).replace("import math", "SPLIT = 'visible'\nimport math"))]
    for index, name in enumerate(chosen):
        cells.append(new_code_cell(textwrap.dedent(answers[name][0]), metadata={"nbgrader": {
            "grade": True, "grade_id": f"test_{index}", "points": 1, "solution": False, "locked": True,
            "schema_version": 3}}))
    notebook = new_notebook(cells=cells, metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                                  "language": "python"}})
    path = tmp_path / "measured.ipynb"
    nbformat.write(notebook, path)
    NotebookClient(notebook, kernel_name="python3", allow_errors=True, timeout=300).execute()
    page, _ = HTMLExporter().from_notebook_node(notebook)
    text = html.unescape(re.sub(r"<[^>]+>", "", page))
    failed = Validator().validate(str(path))["failed"]
    assert len(failed) == len(chosen)
    for index, name in enumerate(chosen):
        _, keys, words = answers[name]
        [error] = [o for o in notebook.cells[index + 1].outputs if o.output_type == "error"]
        assert error.ename == "CheckFailed" and _keys(error.evalue) == keys, error.evalue
        assert words in "\n".join(error.traceback)
        assert words in text, f"{name}: not in the feedback's HTML"
        assert any(words in re.sub(r"\x1b\[[0-9;]*m", "", f["raw_error"]) for f in failed), f"{name}: not in Validate"


# ----------------------------------------------------------------- every visible check beside its hidden twin

def _attention(scale=None, softmax_dim=-1, use_mask=True, mask_after=False):
    import math as _math

    def scaled_dot_product_attention(q, k, v, mask=None):
        scores = q @ k.transpose(-2, -1) / (_math.sqrt(q.size(-1)) if scale is None else scale(q.size(-1)))
        if mask is not None and use_mask and not mask_after:
            scores = scores + mask
        weights = torch.softmax(scores, dim=softmax_dim)
        if mask is not None and mask_after:
            weights = weights.masked_fill(torch.isinf(mask), 0.0)
        return weights @ v, weights
    return scaled_dot_product_attention


def _prelude() -> dict:
    namespace: dict = {}
    exec(compile(textwrap.dedent(PRELUDE), "<prelude>", "exec"), namespace)  # noqa: S102
    return namespace


def _positional(**kwargs):
    return type("PositionalEncoding", (_prelude()["PositionalEncodingWith"],), kwargs)


def _count(extra):
    def count_parameters(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
        outputs = ntoken if nclasses is None else nclasses
        layer = 4 * nhid * nhid + 4 * nhid + 2 * nhid * dim_feedforward + dim_feedforward + nhid + 4 * nhid
        right = ntoken * nhid + nlayers * layer + nhid * outputs + outputs
        return right + extra(ntoken=ntoken, nhid=nhid, nlayers=nlayers, nhead=nhead, ff=dim_feedforward,
                             outputs=outputs)
    return count_parameters


INF = float("inf")
MISTAKES = {  # (check, a wrong answer as students write it)
    "mask of ones": (checks.check_mask, lambda sz: torch.tril(torch.ones(sz, sz))),
    "mask of 0 and 1": (checks.check_mask, lambda sz: torch.triu(torch.ones(sz, sz), 1)),
    "boolean mask": (checks.check_mask, lambda sz: torch.triu(torch.ones(sz, sz, dtype=torch.bool), 1)),
    "diagonal blocked": (checks.check_mask, lambda sz: torch.triu(torch.full((sz, sz), -INF))),
    "past blocked": (checks.check_mask, lambda sz: torch.tril(torch.full((sz, sz), -INF), -1)),
    "-1e9 for -inf": (checks.check_mask, lambda sz: torch.triu(torch.full((sz, sz), -1e9), 1)),
    "encoding of base 100": (checks.check_positional_encoding, _positional(base=100.0)),
    "encoding of base 20000": (checks.check_positional_encoding, _positional(base=20000.0)),
    "encoding with cos first": (checks.check_positional_encoding, _positional(sin_on_even=False)),
    "encoding from position 1": (checks.check_positional_encoding, _positional(first=1)),
    "attention without the scale": (checks.check_attention, _attention(scale=lambda d: 1.0)),
    "attention divided by d": (checks.check_attention, _attention(scale=lambda d: d)),
    "attention divided by 2 sqrt(d)": (checks.check_attention, _attention(scale=lambda d: 2 * d ** 0.5)),
    "softmax over the queries": (checks.check_attention, _attention(softmax_dim=-2)),
    "mask ignored": (checks.check_attention, _attention(use_mask=False)),
    "mask zeroed after the softmax": (checks.check_attention, _attention(mask_after=True)),
    "encoder without sqrt(nhid)": (checks.check_transformer_model, _prelude()["transformer_model"](scale=False)),
    "encoder without positions": (checks.check_transformer_model, _prelude()["transformer_model"](positions=False)),
    "encoder without the causal mask": (checks.check_transformer_model, _prelude()["transformer_model"](causal=False)),
    "encoder without the padding mask": (checks.check_transformer_model, _prelude()["transformer_model"](padding=False)),
    "classifier reads position -1": (lambda answer, split: checks.check_heads(*answer, split=split),
                                     _prelude()["heads"](lambda hidden, padding: hidden[:, -1])),
    "classifier reads position 0": (lambda answer, split: checks.check_heads(*answer, split=split),
                                    _prelude()["heads"](lambda hidden, padding: hidden[:, 0])),
    "classifier averages the padding too": (lambda answer, split: checks.check_heads(*answer, split=split),
                                            _prelude()["heads"](lambda hidden, padding: hidden.mean(1))),
    "count without biases": (checks.check_parameter_formula, _count(
        lambda ntoken, nhid, nlayers, nhead, ff, outputs: -(nlayers * (3 * nhid + nhid + ff + nhid) + outputs))),
    "count with the attention per head": (checks.check_parameter_formula, _count(
        lambda ntoken, nhid, nlayers, nhead, ff, outputs: (nhead - 1) * nlayers * (4 * nhid * nhid + 4 * nhid))),
    "count with one layer norm": (checks.check_parameter_formula, _count(
        lambda ntoken, nhid, nlayers, nhead, ff, outputs: -2 * nlayers * nhid)),
    "count with an extra nlayers squared": (checks.check_parameter_formula, _count(
        lambda ntoken, nhid, nlayers, nhead, ff, outputs: nlayers ** 2 * nhid)),
}


@pytest.mark.parametrize("name", list(MISTAKES))
def test_every_visible_check_fails_what_its_hidden_twin_fails(name):
    """The same wrong answer fails both, with the same diagnosis: a visible check that passes what the hidden test
    fails would tell a student their wrong answer is right."""
    check, answer = MISTAKES[name]
    verdicts = {}
    for split in ("visible", "hidden"):
        with pytest.raises(checks.CheckFailed) as caught:
            check(answer, split=split)
        verdicts[split] = str(caught.value)
    keys = {split: re.search(r"\[diagnosis: (.*)\]$", message) for split, message in verdicts.items()}
    assert (keys["visible"] is None) == (keys["hidden"] is None), verdicts
    if keys["visible"]:
        assert keys["visible"].group(1) == keys["hidden"].group(1), verdicts
