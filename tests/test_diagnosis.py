"""Feedback that diagnoses: realistic wrong answers get the misconception named, odd answers get a message (never
a traceback from the checker), hidden checks keep their inputs to themselves, and a failing check renders as its
message alone in IPython, in nbgrader's error output and in nbconvert's HTML."""
from __future__ import annotations

import html
import math
import re

import numpy as np
import pytest
import torch
from torch import nn

from grader import references as builders
from translab import checks, diagnosis, references, variants
from translab.model import build_classifier, build_language_model
from translab.params import TERMS, count_parameters_formula, split_config, term_sizes
from translab.paths import REPO_ROOT

LM = dict(ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=200)
# a student's own configuration, for the numbers they state (translab.variants)
MINE = variants.from_code(variants.derive_code(b"translab-tests", "bob"))
MY_LM = {k: v for k, v in MINE.config("lm").items() if k != "nclasses"}


def failure(check, *args, **kwargs) -> str:
    """The message of a check that must fail with CheckFailed (any other exception fails the test)."""
    with pytest.raises(checks.CheckFailed) as caught:
        check(*args, **kwargs)
    return str(caught.value)


def keys_of(message: str) -> set[str]:
    match = re.search(r"\[diagnosis: (.*)\]$", message)
    assert match, f"no diagnosis key in:\n{message}"
    return set(match.group(1).split())


# ----------------------------------------------------------------- the terms of the count, in one place

def test_terms_sum_to_the_formula_and_each_is_one_parameter_tensor_of_the_model():
    for cfg in (dict(ntoken=37, nhid=24, nlayers=3, nhead=4, dim_feedforward=24, nclasses=None),
                dict(ntoken=11, nhid=8, nlayers=2, nhead=2, dim_feedforward=8, nclasses=5)):
        sizes = term_sizes(**cfg)
        config, nclasses = split_config(cfg)
        assert sum(sizes.values()) == count_parameters_formula(config, nclasses)
        model = build_language_model(config) if nclasses is None else build_classifier(config, nclasses)
        named = dict(model.named_parameters())
        covered = set()
        for term in TERMS:
            pattern = re.compile(re.escape(term.parameter).replace(r"\*", r"\d+") + "$")
            matching = [name for name in named if pattern.match(name)]
            assert matching, term.parameter
            assert sum(named[name].numel() for name in matching) == sizes[term.key], term.key
            covered.update(matching)
        assert covered == set(named), f"parameters without a term: {set(named) - covered}"


def test_the_layer_terms_hold_for_a_feed_forward_of_another_width():
    layer = nn.TransformerEncoderLayer(24, 4, dim_feedforward=40, batch_first=True)
    sizes = term_sizes(ntoken=1, nhid=24, nlayers=1, nhead=4, dim_feedforward=40)
    for term in TERMS:
        if term.per_layer:
            name = term.parameter.split("layers.*.")[1]
            assert dict(layer.named_parameters())[name].numel() == sizes[term.key], term.key


def test_the_reference_variants_come_from_the_catalogue_of_mistakes():
    assert builders.same_within(references.load("parameters"), builders.build("parameters"), references.EXACT), \
        "run make references"
    case = references.load("parameters")["visible"][0]
    for name in builders.PARAMETER_VARIANTS:
        assert case[name] == round(diagnosis.mistaken_count(case["config"], f"count.{name}")), name
        assert case[name] != case["expected"], name


def test_every_mistake_changes_the_count_somewhere_in_the_probes():
    for mistake in diagnosis.COUNT_MISTAKES:
        assert any(abs(diagnosis.count_with_mistakes(cfg, [mistake]) - diagnosis.right_count(cfg)) > 0.5
                   for cfg in diagnosis.PROBES), mistake.key


# ----------------------------------------------------------------- realistic wrong parameter counts

def right_count(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    """A right answer written as a student would (translab's own formula is switched off during the checks)."""
    outputs = ntoken if nclasses is None else nclasses
    layer = 4 * (nhid * nhid + nhid) + 2 * nhid * dim_feedforward + dim_feedforward + nhid + 4 * nhid
    return ntoken * nhid + nlayers * layer + nhid * outputs + outputs


def several_missing(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    """No attention biases, no LayerNorms and no head bias."""
    outputs = ntoken if nclasses is None else nclasses
    layer = 4 * nhid * nhid + (nhid * dim_feedforward + dim_feedforward) + (dim_feedforward * nhid + nhid)
    return ntoken * nhid + nlayers * layer + nhid * outputs


def weights_only(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    outputs = ntoken if nclasses is None else nclasses
    return ntoken * nhid + nlayers * (4 * nhid * nhid + 2 * nhid * dim_feedforward) + nhid * outputs


def nhead_in_the_formula(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    """Right at nhead=2 (the notebook's), wrong elsewhere: the attention counted per pair of heads."""
    outputs = ntoken if nclasses is None else nclasses
    attention = nhead * 2 * (nhid * nhid + nhid)
    layer = attention + 2 * nhid * dim_feedforward + dim_feedforward + nhid + 4 * nhid
    return ntoken * nhid + nlayers * layer + nhid * outputs + outputs


def layer_norm_as_nhid(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
    outputs = ntoken if nclasses is None else nclasses
    layer = 4 * (nhid * nhid + nhid) + 2 * nhid * dim_feedforward + dim_feedforward + nhid + 2 * nhid
    return ntoken * nhid + nlayers * layer + nhid * outputs + outputs


def test_several_missing_terms_are_all_named():
    message = failure(checks.check_parameter_formula, several_missing)
    assert "three things at once" in message
    assert "the two LayerNorms of each layer are missing" in message
    assert "the attention's biases are missing" in message
    assert "the head's bias" in message
    assert keys_of(message) == {"count.no_attention_biases", "count.no_layer_norms", "count.missing.head.bias"}


def test_weights_only_is_no_biases_and_no_layer_norms():
    message = failure(checks.check_parameter_formula, weights_only)
    assert "weights counted without biases" in message and "LayerNorms of each layer are missing" in message
    assert keys_of(message) == {"count.no_biases", "count.no_layer_norms"}


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_nhead_in_the_formula_is_named_by_both_checks(split):
    """Right at the notebook's nhead = 2 only: the visible check tries other sizes too, as the hidden one does."""
    message = failure(checks.check_parameter_formula, nhead_in_the_formula, split=split)
    assert "multiplied by nhead/2" in message and "the number of heads does not change the count" in message
    assert keys_of(message) == {"count.depends_on_nhead"}
    if split == "visible":
        assert message.startswith("count_parameters is right for the notebook's sizes but not for")


def test_an_unusual_use_of_nhead_is_still_named():
    def odd(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
        return right_count(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses) + (nhead - 2) ** 2 * nhid
    message = failure(checks.check_parameter_formula, odd, split="hidden")
    assert "your count changes with nhead alone" in message
    assert keys_of(message) == {"count.depends_on_nhead"}


def test_layer_norm_as_nhid_is_stated_with_its_twin():
    message = failure(checks.check_parameter_formula, layer_norm_as_nhid)
    assert "each LayerNorm counted as nhid" in message
    assert "equivalently only one LayerNorm per layer" in message
    assert keys_of(message) == {"count.layer_norm_as_nhid|count.one_layer_norm"}


def test_an_unexplained_count_says_where_the_error_lies():
    def odd(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
        return right_count(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses) + 7 * nlayers ** 2 * nhid
    message = failure(checks.check_parameter_formula, odd)
    assert "the error changes with nhid, nlayers but not with ntoken, nhead, dim_feedforward, nclasses" in message
    assert keys_of(message) == {"count.unexplained"}


def test_stated_counts_name_the_combination_and_say_when_several_fit():
    k = MINE.nclasses
    message = failure(checks.check_stated_counts, weights_only(**MY_LM), weights_only(**MY_LM, nclasses=k), MINE.code)
    assert "weights counted without biases" in message and "LayerNorms of each layer are missing" in message
    message = failure(checks.check_stated_counts, several_missing(**MY_LM), several_missing(**MY_LM, nclasses=k),
                      MINE.code)
    assert "several mistakes give the same numbers" in message
    assert "the attention's biases are missing" in message  # the real combination, among those that fit
    message = failure(checks.check_stated_counts, layer_norm_as_nhid(**MY_LM), layer_norm_as_nhid(**MY_LM, nclasses=k),
                      MINE.code)
    assert "equivalently only one LayerNorm per layer" in message


def test_one_wrong_stated_number_is_explained_alone():
    right_lm = count_parameters_formula(*split_config(MY_LM))
    message = failure(checks.check_stated_counts, right_lm,
                      count_parameters_formula(split_config(MY_LM)[0], MINE.nclasses) - MINE.nclasses, MINE.code)
    assert message.startswith(f"n_params_classifier ({MINE.nclasses} classes) is not the count of your configuration")
    right = count_parameters_formula(split_config(MY_LM)[0], MINE.nclasses)
    assert f"{right:,}" not in message and f"{MINE.nclasses:+,}" not in message.splitlines()[0]  # no answer in it
    assert "n_params_lm" not in message.splitlines()[0]
    assert "count.missing.head.bias" in keys_of(message)


def _my_counts() -> tuple[int, int]:
    return diagnosis.right_count(MINE.config("lm")), diagnosis.right_count(MINE.config("classifier"))


def test_stated_counts_are_the_students_own_and_anothers_are_named(monkeypatch, capsys):
    """Each student states the counts of their own variant: the worked example's numbers, or a classmate's, are
    named as another configuration's; the variant comes from the kernel (the lab) or the grader (``variant=``)."""
    lm, classifier = _my_counts()
    monkeypatch.setenv(variants.VARIANT_ENV, MINE.code)
    checks.check_stated_counts(lm, classifier)
    assert capsys.readouterr().out.startswith("ok")
    message = failure(checks.check_stated_counts, 1_008_100, 988_402)
    assert "these are the counts of another configuration: the worked example" in message
    assert keys_of(message) == {"count.another_variant"}
    classmate = variants.from_code(variants.derive_code(b"translab-tests", "alice"))
    theirs = diagnosis.right_count(classmate.config("lm")), diagnosis.right_count(classmate.config("classifier"))
    message = failure(checks.check_stated_counts, *theirs)
    assert "these are the counts of another configuration (" in message and "not of yours" in message
    assert f"ntoken={classmate.ntoken}, nhid={classmate.nhid}, nlayers={classmate.nlayers}" in message
    # what the grader passes wins over the kernel's own: the classmate's numbers pass only under their code
    checks.check_stated_counts(*theirs, classmate.code)
    message = failure(checks.check_stated_counts, lm, classifier, "")
    assert "no variant" in message and keys_of(message) == {"checker_error"}


def test_variants_are_pure_disjoint_from_every_checked_configuration_and_rarely_shared():
    """The same code gives the same configuration; no variant is the worked example, a visible or hidden
    configuration of the checks, or a probe; in a class of 300, students share counts rarely."""
    assert variants.from_code("s9wp-me36q7") == variants.from_code("S9WPM-E36Q7")
    with pytest.raises(ValueError, match="not a variant code"):
        variants.from_code("ABC")
    configs = [case["config"] for split in ("visible", "hidden")
               for case in references.load_from(REPO_ROOT / "grader" / "references", "parameters")[split]]
    configs += list(diagnosis.PROBES)
    configs.append(variants.WORKED_EXAMPLE)
    assert not [cfg for cfg in configs if variants.in_pool(cfg)]
    drawn = [variants.from_code(variants.derive_code(b"a course", f"student{i}")) for i in range(300)]
    assert all(variants.in_pool(v.config("lm")) and variants.in_pool(v.config("classifier")) for v in drawn)
    counts = {(diagnosis.right_count(v.config("lm")), diagnosis.right_count(v.config("classifier"))) for v in drawn}
    assert len(counts) >= 298


@pytest.mark.parametrize("kind", [int, np.int64, float, torch.tensor])
def test_stated_counts_accept_any_kind_of_whole_number(kind, capsys):
    lm, classifier = _my_counts()
    checks.check_stated_counts(kind(lm), classifier, MINE.code)
    assert capsys.readouterr().out.startswith("ok")


@pytest.mark.parametrize("lm, words", [("1008100", "the string '1008100'"), ("1,008,100", "the string"),
                                       (1_008_100.5, "not a whole number"), (float("nan"), "is nan"),
                                       (float("inf"), "is inf"), (True, "not a number"), (None, "not a number"),
                                       ([1_008_100], "not a number"), (torch.tensor([1.0, 2.0]), "not a number")])
def test_stated_counts_that_are_no_whole_number_get_a_message(lm, words):
    message = failure(checks.check_stated_counts, lm, 988_402, MINE.code)
    assert words in message


def test_a_count_returned_as_a_string_gets_a_message():
    message = failure(checks.check_parameter_formula, lambda **cfg: str(right_count(**cfg)))
    assert "is not a number" in message and "no quotes" in message


# ----------------------------------------------------------------- the mask and the positional encoding

def test_a_mask_of_ones_is_told_what_torch_really_does_with_it():
    message = failure(checks.check_mask, lambda sz: torch.tril(torch.ones(sz, sz)))
    assert "a mask of 1s" in message and keys_of(message) == {"mask.ones"}
    # the claim, checked on this torch
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(16, 2, 16, 0.1, batch_first=True)
    encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
    x, mask = torch.randn(3, 5, 16), torch.tril(torch.ones(5, 5))
    with torch.no_grad():
        nan_in_eval = bool(torch.isnan(encoder.eval()(x, mask=mask)).any())
    nan_in_train = bool(torch.isnan(encoder.train()(x, mask=mask)).any())
    if nan_in_eval and not nan_in_train:
        assert "in eval() (under torch.no_grad(), as when a model is evaluated) nn.TransformerEncoder's fast path " \
               f"returns NaN with this mask on torch {torch.__version__.split('+')[0]}" in message
        assert "in train() it happens to run, but the mask then *adds* 1 to the allowed scores instead of blocking " \
               "the future" in message
    else:
        assert "NaN" not in message or nan_in_eval
        assert "*adds* 1 to the allowed scores" in message


def test_a_mask_of_ones_is_named_in_the_hidden_check_too():
    message = failure(checks.check_mask, lambda sz: torch.tril(torch.ones(sz, sz)), split="hidden")
    assert "a mask of 1s" in message and "fast path" in message
    assert not re.search(r"sz=\d", message) and "tensor(" not in message


def positional_encoding(base: float = 10000.0, dtype=torch.float32, exponent_halved: bool = False):
    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len, dtype=dtype).unsqueeze(1)
            two_i = torch.arange(0, d_model, 2, dtype=dtype)
            div_term = torch.exp((two_i / 2 if exponent_halved else two_i) * (-math.log(base) / d_model))
            pe = torch.zeros(max_len, d_model, dtype=dtype)
            pe[:, 0::2] = torch.sin(position * div_term)
            pe[:, 1::2] = torch.cos(position * div_term)
            self.register_buffer("pe", pe)

        def forward(self, x):
            return self.dropout(x + self.pe[: x.size(1)])
    return PositionalEncoding


@pytest.mark.parametrize("answer", [positional_encoding(base=100.0), positional_encoding(exponent_halved=True)],
                         ids=["base 100", "exponent i over d"])
def test_base_100_and_exponent_i_are_stated_together(answer):
    for split in ("visible", "hidden"):
        message = failure(checks.check_positional_encoding, answer, split=split)
        assert "base 100 instead of 10000, equivalently an exponent of i/d_model instead of 2i/d_model" in message
        assert "100^(2i/d_model) = 10000^(i/d_model)" in message
        assert keys_of(message) == {"pe.base_100|pe.exponent_i"}


def test_a_float64_buffer_gets_feedback_not_a_runtime_error():
    for split in ("visible", "hidden"):
        message = failure(checks.check_positional_encoding, positional_encoding(dtype=torch.float64), split=split)
        assert "returns float64 for a float32 input: its buffer pe (float64) is not float32" in message
        assert "the values are right" in message
        assert keys_of(message) == {"pe.dtype"}


# ----------------------------------------------------------------- odd but plausible answers never crash the checker

def _lm_head_numpy():
    class LanguageModelHead(nn.Module):
        def __init__(self, nhid, ntoken):
            super().__init__()
            self.decoder = nn.Linear(nhid, ntoken)

        def forward(self, hidden, src_key_padding_mask=None):
            return self.decoder(hidden).detach().numpy()
    return LanguageModelHead


class NotAModule:
    def __init__(self, *args, **kwargs):
        pass


ODD = {
    "mask as numpy": (checks.check_mask, lambda sz: np.triu(np.full((sz, sz), -np.inf), 1), "numpy.ndarray"),
    "mask as list": (checks.check_mask, lambda sz: np.triu(np.full((sz, sz), -np.inf), 1).tolist(), "list"),
    "mask of None": (checks.check_mask, lambda sz: None, "returns nothing"),
    "mask on meta": (checks.check_mask, lambda sz: torch.zeros(sz, sz, device="meta"), "meta device"),
    "mask in half precision": (checks.check_mask, lambda sz: torch.triu(torch.ones(sz, sz), 1).half(), "only 0 and 1"),
    "mask as string": (checks.check_mask, lambda sz: "triu", "str"),
    "pe not a module": (checks.check_positional_encoding, NotAModule, "is not an nn.Module"),
    "model not a module": (checks.check_transformer_model, NotAModule, "is not an nn.Module"),
    "lm head returns numpy": (lambda a: checks.check_heads(a, _lm_head_numpy()), _lm_head_numpy(), "numpy.ndarray"),
    "loss as a float": (checks.check_lm_loss, lambda logits, targets: 2.5, "must return a scalar tensor"),
    "loss in float64": (checks.check_lm_loss, lambda logits, targets: torch.tensor(2.5, dtype=torch.float64,
                                                                                   requires_grad=True), "differs"),
    "targets as lists": (checks.check_lm_targets, lambda ids: (ids[:, :-1].tolist(), ids[:, 1:].tolist()), "list"),
    "greedy returns a string": (checks.check_greedy, lambda *args: "12 7 3", "list of token ids"),
    "greedy returns nested": (checks.check_greedy, lambda *args: [[1, 2]], "nested list"),
    "accuracy as a string": (checks.check_accuracy, lambda model, batches: "0.75", "the string '0.75'"),
    "accuracy as a vector": (checks.check_accuracy, lambda model, batches: torch.tensor([0.5, 0.2]), "not a number"),
    "transfer returns a dict": (checks.check_transfer, lambda lm, n: {"base": lm.base}, "dict"),
    "masking returns numpy": (checks.check_masking, lambda ids, v, g, p: (ids.numpy(), ids.numpy()), "numpy.ndarray"),
    "masking returns floats": (checks.check_masking, lambda ids, v, g, p: (ids.float(), ids.float()), "torch.long"),
    "mlm loss as a float": (checks.check_mlm_loss, lambda model, inputs, labels, padding: 1.0, "scalar tensor"),
    "attention demo as numpy": (checks.check_attention_demo, np.zeros((3, 3)), "numpy.ndarray"),
    "count returns None": (checks.check_parameter_formula, lambda **cfg: None, "not a number"),
}


@pytest.mark.parametrize("name", list(ODD))
def test_odd_answers_get_a_message_not_a_traceback(name):
    check, answer, words = ODD[name]
    message = failure(check, answer)
    assert words in message, message


def test_an_unexpected_error_inside_the_checker_becomes_a_message(monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError("Float did not match Double")
    monkeypatch.setattr(checks.part1_encoding, "matches_reference", broken)
    message = failure(checks.check_positional_encoding, positional_encoding())
    assert message.startswith("the check could not compare your answer with the reference (RuntimeError: Float did "
                              "not match Double)")
    assert keys_of(message) == {"checker_error"}


def test_an_exception_in_the_answer_names_the_line_of_the_answer_without_a_path():
    def generate_square_subsequent_mask(sz):
        rows = torch.ones(2)
        return rows[sz]
    message = failure(checks.check_mask, generate_square_subsequent_mask)
    assert "raised IndexError at line" in message and "(return rows[sz])" in message
    assert str(REPO_ROOT) not in message and ".py" not in message


def test_calling_translab_is_named():
    from translab.model import generate_square_subsequent_mask
    message = failure(checks.check_mask, lambda sz: generate_square_subsequent_mask(sz))
    assert "calls translab's own" in message and keys_of(message) == {"calls_translab"}


def _second_copy_of(module_name: str, copy_name: str, tmp_path=None):
    """translab's module loaded again under another name (from a copy of its file when ``tmp_path`` is given)."""
    import importlib.util
    import shutil
    import sys
    source = importlib.import_module(module_name).__file__
    if tmp_path is not None:
        source = shutil.copy(source, tmp_path / "my_helpers.py")
    spec = importlib.util.spec_from_file_location(copy_name, source)
    copy = importlib.util.module_from_spec(spec)
    sys.modules[copy_name] = copy  # dataclasses look their module up while the copy is executed
    try:
        spec.loader.exec_module(copy)
    finally:
        del sys.modules[copy_name]
    return copy


@pytest.mark.parametrize("from_a_copied_file", [False, True])
def test_a_second_copy_of_translab_is_forbidden_too(tmp_path, from_a_copied_file):
    """Issue 30, attack 2: forbid switched translab's functions off by name, and a copy loaded with importlib
    passed the mask checks."""
    copy = _second_copy_of("translab.model", "not_translab_model", tmp_path if from_a_copied_file else None)
    message = failure(checks.check_mask, lambda sz: copy.generate_square_subsequent_mask(sz))
    assert "calls translab's own" in message and keys_of(message) == {"calls_translab"}
    message = failure(checks.check_positional_encoding, copy.PositionalEncoding)
    assert "uses translab's own PositionalEncoding" in message
    assert copy.generate_square_subsequent_mask(2)[0, 1] == float("-inf")  # and it works again afterwards


def test_an_answer_with_the_references_bytecode_is_not_taken_for_a_copy():
    namespace: dict = {}
    exec("import torch\n"
         "def generate_square_subsequent_mask(sz: int) -> torch.Tensor:\n"
         "    return torch.triu(torch.full((sz, sz), float('-inf')), diagonal=1)\n", namespace)
    checks.check_mask(namespace["generate_square_subsequent_mask"])


# ----------------------------------------------------------------- hidden checks keep their secrets

def _hidden_secrets() -> list[str]:
    """Texts that would reveal the hidden configurations or expected values of the checks tried below."""
    secrets = []
    for case in references.load("parameters")["hidden"]:
        cfg = case["config"]
        secrets += [f"{case['expected']:,}", str(case["expected"]), f"ntoken={cfg['ntoken']}", f"nhid={cfg['nhid']}"]
    secrets += [f"sz={size}" for size in builders.MASK_SIZES["hidden"]]
    secrets += [f"d_model={d}" for d, _ in builders.PE_CONFIGS["hidden"]]
    return secrets


@pytest.mark.parametrize("check, answer, hint", [
    (checks.check_parameter_formula, several_missing, "the attention's biases are missing"),
    (checks.check_parameter_formula, nhead_in_the_formula, "nhead"),
    (checks.check_parameter_formula, layer_norm_as_nhid, "equivalently only one LayerNorm per layer"),
    (checks.check_mask, lambda sz: torch.tril(torch.ones(sz, sz)), "*adds* 1"),
    (checks.check_mask, lambda sz: torch.tril(torch.full((sz, sz), float("-inf")), -1), "use triu, not tril"),
    (checks.check_positional_encoding, positional_encoding(base=100.0), "base 100"),
])
def test_a_failing_hidden_check_says_what_is_wrong_without_its_inputs(check, answer, hint):
    message = failure(check, answer, split="hidden")
    assert hint in message and "likely:" in message
    assert "expected:" not in message and "found:" not in message
    leaks = [secret for secret in _hidden_secrets() if secret in message]
    assert not leaks, f"the hidden check's message reveals {leaks}:\n{message}"


def test_every_key_a_check_names_is_described():
    from translab.checks import part6
    part = "".join((REPO_ROOT / "translab" / "checks" / f"part{n}.py").read_text(encoding="utf-8") for n in range(1, 7))
    literal = set(re.findall(r'key="([a-z0-9_.]+)"', part)) | set(re.findall(r'"(mapping\.[a-z_]+)"', part))
    literal |= {f"bert.{name}" for name in part6.BERT_BASE_MISTAKES}
    literal |= {f"classifier.{name}" for name in part6.BERT_POOLING_MISTAKES}
    dynamic = {"model.no_scale", "model.no_positions", "model.no_causal_mask", "model.no_padding_mask",
               "loss.softmax_first", "loss.padding_counted", "loss.sum", "mlm.causal", "mlm.all_positions",
               "mlm.inputs_as_labels",
               "heads.last_position", "heads.first_position", "heads.mean", "pe.sin_cos_swapped", "pe.base_100",
               "pe.exponent_i", "pe.halves", "pe.positions_from_1"}
    assert len(literal) > 40
    undescribed = sorted(k for k in literal | dynamic if diagnosis.describe(k) is None)
    assert not undescribed, undescribed
    for mistake in diagnosis.COUNT_MISTAKES:
        assert diagnosis.describe(mistake.key), mistake.key


# ----------------------------------------------------------------- how a failing check looks in the browser

def test_check_failed_renders_as_its_message_and_keeps_the_key_in_its_value():
    error = checks.CheckFailed("the mask is wrong.\n  likely:   use triu", "mask.blocks_past")
    assert error._render_traceback_() == ["\x1b[0;31mCheckFailed\x1b[0m: the mask is wrong.", "  likely:   use triu"]
    assert str(error).endswith("\n[diagnosis: mask.blocks_past]")
    assert isinstance(error, AssertionError)


FORBIDDEN_IN_DISPLAY = (r"Traceback", r"most recent call last", r"checks\.py", r"site-packages",
                        re.escape(str(REPO_ROOT)), r'File "', r"line \d+, in ", r"---->", r"/tmp/", r"ipykernel_",
                        r"\.py\b")


def leaks(text: str) -> list[str]:
    """What in a displayed error looks like a traceback or a file path."""
    return [pattern for pattern in FORBIDDEN_IN_DISPLAY if re.search(pattern, text)]


def _clean(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;]*m", "", text)


def test_ipython_shows_a_failing_check_as_its_message_only(capsys):
    from IPython.core.interactiveshell import InteractiveShell
    shell = InteractiveShell.instance()
    try:
        result = shell.run_cell("import torch\nfrom translab import checks\n"
                                "checks.check_mask(lambda sz: torch.tril(torch.ones(sz, sz)))")
        shown = _clean(capsys.readouterr().out)
    finally:
        InteractiveShell.clear_instance()
    assert isinstance(result.error_in_exec, checks.CheckFailed)
    assert shown.lstrip().startswith("CheckFailed: the mask for sz=5 has 1 on and below the diagonal")
    assert "likely:" in shown and "[diagnosis:" not in shown
    assert not leaks(shown), shown


def _tiny_notebook(test_source: str):
    import nbformat
    from nbformat.v4 import new_code_cell, new_notebook
    notebook = new_notebook()
    notebook.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    meta = {"nbgrader": {"grade": True, "solution": False, "locked": True, "grade_id": "mask_visible", "points": 1,
                         "schema_version": 3}}
    notebook.cells = [new_code_cell("import torch\nfrom translab import checks"),
                      new_code_cell(test_source, metadata=meta)]
    return nbformat.from_dict(notebook)


@pytest.mark.slow
def test_a_kernel_nbgrader_and_the_feedback_html_show_the_message_only(tmp_path):
    """Through a real kernel (what JupyterLab shows), nbgrader's grade and Validate output, and nbconvert's HTML
    (what the feedback page is made of): the cell fails and scores 0, and shows no checker traceback or path."""
    import nbformat
    from nbclient import NotebookClient
    from nbconvert import HTMLExporter
    from nbgrader.utils import determine_grade
    from nbgrader.validator import Validator

    notebook = _tiny_notebook("checks.check_mask(lambda sz: torch.tril(torch.ones(sz, sz)))")
    NotebookClient(notebook, kernel_name="python3", allow_errors=True, timeout=120).execute()
    [error] = [o for o in notebook.cells[1].outputs if o.output_type == "error"]
    assert error.ename == "CheckFailed"
    assert error.evalue.endswith("[diagnosis: mask.ones]")
    shown = _clean("\n".join(error.traceback))
    assert shown.startswith("CheckFailed: the mask for sz=5 has 1 on and below the diagonal")
    assert not leaks(shown), shown
    assert determine_grade(notebook.cells[1]) == (0, 1)

    page, _ = HTMLExporter().from_notebook_node(notebook)
    [shown] = [block for block in re.findall(r"<pre>(.*?)</pre>", page, flags=re.S) if "CheckFailed" in block]
    text = html.unescape(re.sub(r"<[^>]+>", "", shown))
    assert text.strip().startswith("CheckFailed: the mask for sz=5 has 1 on and below the diagonal")
    assert "fast path" in text and "likely:" in text
    assert not leaks(text), text
    body = html.unescape(re.sub(r"<[^>]+>", "", page.split("<body", 1)[1]))
    assert "Traceback" not in body and str(REPO_ROOT) not in body

    path = tmp_path / "tiny.ipynb"
    nbformat.write(_tiny_notebook("checks.check_mask(lambda sz: torch.tril(torch.ones(sz, sz)))"), path)
    result = Validator().validate(str(path))
    [failed] = result["failed"]
    assert _clean(failed["raw_error"]).startswith("CheckFailed: the mask for sz=5")
    assert not leaks(_clean(failed["raw_error"]))


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_a_formula_that_writes_nhid_for_the_feed_forward_width_fails_both_checks(split):
    """In the notebook dim_feedforward == nhid: the visible check catches it at its other sizes."""
    def nhid_for_feed_forward(ntoken, nhid, nlayers, nhead, dim_feedforward, nclasses=None):
        outputs = ntoken if nclasses is None else nclasses
        layer = 4 * nhid * nhid + 4 * nhid + 2 * (nhid * nhid + nhid) + 4 * nhid  # nhid where dim_feedforward belongs
        return ntoken * nhid + nlayers * layer + nhid * outputs + outputs
    message = failure(checks.check_parameter_formula, nhid_for_feed_forward, split=split)
    assert "count.feed_forward_width_nhid" in keys_of(message)


# ----------------------------------------------------------------- visible checks that passed wrong code (issue 32)

class _Model(nn.Module):
    """Model as students write it; ``pass_padding=False`` is the mistake: the head never gets the padding mask."""
    pass_padding = True

    def __init__(self, base, head):
        super().__init__()
        self.base, self.head = base, head

    def forward(self, src, src_key_padding_mask=None, causal=True):
        from translab.model import generate_square_subsequent_mask
        mask = generate_square_subsequent_mask(src.size(1)) if causal else None
        hidden = self.base(src, mask, src_key_padding_mask)
        return self.head(hidden, src_key_padding_mask if self.pass_padding else None)


class _ModelWithoutPaddingForTheHead(_Model):
    pass_padding = False


def _masking(ignore=None, random_low=5):
    """mask_tokens as students write it, with Hugging Face's -100 as the ignore label or random ids drawn from the
    whole vocabulary (special tokens included)."""
    from translab.data import MASK_ID, PAD_ID
    from translab.mlm import special_tokens_mask

    def mask_tokens(ids, vocab_size, generator, mlm_probability=0.15):
        inputs, labels = ids.clone(), torch.full_like(ids, PAD_ID if ignore is None else ignore)
        probability = torch.full(ids.shape, mlm_probability)
        probability[special_tokens_mask(ids)] = 0.0
        chosen = torch.bernoulli(probability, generator=generator).bool()
        labels[chosen] = ids[chosen]
        masked = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
        inputs[masked] = MASK_ID
        replaced = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~masked
        inputs[replaced] = torch.randint(random_low, vocab_size, ids.shape, generator=generator)[replaced]
        return inputs, labels
    return mask_tokens


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_a_model_that_keeps_the_padding_mask_from_the_head_fails_both_checks(split, capsys):
    checks.check_model(_Model, split=split)
    assert "the padding mask passed on to the head" in capsys.readouterr().out
    message = failure(checks.check_model, _ModelWithoutPaddingForTheHead, split=split)
    assert keys_of(message) == {"model.padding_not_to_head"} and "position -1" in message


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_random_replacements_must_be_regular_tokens_in_both_checks(split, capsys):
    checks.check_masking(_masking(), part="rates", split=split)
    checks.check_masking(_masking(), part="structure", split=split)
    assert capsys.readouterr().out.count("ok  ") == 2
    message = failure(checks.check_masking, _masking(random_low=0), part="rates", split=split)
    assert keys_of(message) == {"masking.random_special"} and "FIRST_REGULAR_ID" in message


@pytest.mark.parametrize("part", ["structure", "rates"])
def test_labels_with_hugging_faces_ignore_index_are_named_not_misdiagnosed(part):
    for split in ("visible", "hidden"):
        message = failure(checks.check_masking, _masking(ignore=-100), part=part, split=split)
        assert keys_of(message) == {"masking.ignore_index"}, message
        assert "-100" in message and "special tokens were chosen" not in message and "% of the real tokens" not in message


def _sequence_first_encoding():
    """PyTorch's tutorial's PositionalEncoding (pe of shape (max_len, 1, d_model), indexed by x.size(0)) in a
    batch-first model."""
    class PositionalEncoding(nn.Module):
        def __init__(self, d_model, dropout=0.1, max_len=5000):
            super().__init__()
            self.dropout = nn.Dropout(p=dropout)
            position = torch.arange(max_len).unsqueeze(1)
            div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
            pe = torch.zeros(max_len, 1, d_model)
            pe[:, 0, 0::2] = torch.sin(position * div_term)
            pe[:, 0, 1::2] = torch.cos(position * div_term[: d_model // 2])
            self.register_buffer("pe", pe)

        def forward(self, x):
            return self.dropout(x + self.pe[: x.size(0)])
    return PositionalEncoding


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_the_tutorials_sequence_first_encoding_is_named_in_a_batch_first_model(split):
    message = failure(checks.check_positional_encoding, _sequence_first_encoding(), split=split)
    assert keys_of(message) == {"pe.not_batch_first"} and "x.size(1)" in message


class _ModelWithTheMaskOfTheBatch(_Model):
    def forward(self, src, src_key_padding_mask=None, causal=True):
        from translab.model import generate_square_subsequent_mask
        mask = generate_square_subsequent_mask(src.size(0)) if causal else None
        return self.head(self.base(src, mask, src_key_padding_mask), src_key_padding_mask)


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_a_causal_mask_of_the_batchs_size_is_named_not_left_to_pytorchs_error(split):
    message = failure(checks.check_model, _ModelWithTheMaskOfTheBatch, split=split)
    assert keys_of(message) == {"model.mask_from_batch"} and "src.size(1)" in message


def test_a_wrong_stated_count_never_shows_the_right_one_nor_the_gap():
    """Issue 90: the right counts of the student's own configuration are the answer; a failing check that printed
    them (or how far off the stated ones are) would hand it to whoever states any number."""
    lm, classifier = _my_counts()
    k = MINE.nclasses
    for stated in [(0, 0), (lm + 1, classifier), (lm, classifier - 7), (lm * 2, classifier * 2),
                   (weights_only(**MY_LM), weights_only(**MY_LM, nclasses=k))]:
        message = failure(checks.check_stated_counts, *stated, MINE.code)
        for right in (lm, classifier):
            assert f"{right:,}" not in message and str(right) not in message, (stated, message)
        assert "off by" not in message and ("is not the count" in message or "are not the counts" in message)
