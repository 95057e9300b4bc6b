"""A release that holds part 2's answers back (``grader.course.withheld``): check_model, whose reference base and heads
are part 2's answers, judges with stand-ins that replay their stored outputs, and says what it says with them."""
from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from translab import checks, stages
from translab.checks import part2, part6
from translab.model import generate_square_subsequent_mask


def _model(forward, register: bool = True):
    class Model(nn.Module):
        def __init__(self, base, head):
            super().__init__()
            if register:
                self.base, self.head = base, head
            else:
                self.parts = [base, head]

        def forward(self, src, src_key_padding_mask=None, causal=True):
            base, head = (self.base, self.head) if register else self.parts
            return forward(base, head, src, src_key_padding_mask, causal)
    return Model


def _right(base, head, src, padding, causal):
    mask = generate_square_subsequent_mask(src.size(1)) if causal else None
    return head(base(src, src_mask=mask, src_key_padding_mask=padding), padding)


MODELS = {
    "right": _model(_right),
    "not registered": _model(_right, register=False),
    "never causal": _model(lambda b, h, s, p, c: h(b(s, None, p), p)),
    "always causal": _model(lambda b, h, s, p, c: h(b(s, generate_square_subsequent_mask(s.size(1)), p), p)),
    "padding not to the head": _model(lambda b, h, s, p, c: h(b(s, generate_square_subsequent_mask(s.size(1))
                                                                 if c else None, p))),
    "mask of the batch's size": _model(lambda b, h, s, p, c: h(b(s, generate_square_subsequent_mask(s.size(0))
                                                                  if c else None, p), p)),
    "softmax on the logits": _model(lambda b, h, s, p, c: torch.softmax(_right(b, h, s, p, c), dim=-1)),
    "a bool causal mask": _model(lambda b, h, s, p, c: h(b(s, torch.ones(s.size(1), s.size(1), dtype=torch.bool)
                                                            .triu(1) if c else None, p), p)),
}


def _verdict(check, answer) -> tuple[bool, str]:
    try:
        check(answer)
        return True, ""
    except checks.CheckFailed as failed:
        return False, failed.message


def _hold_back(monkeypatch, module) -> None:
    """As in a release that holds the part back: its answers are stubs here, and so in the kernel the checks serve."""
    for name in ("withheld", "held_in_kernel"):
        monkeypatch.setattr(module, name, lambda obj: True, raising=False)


def test_the_stand_ins_are_what_check_model_gets_when_the_base_is_held_back(monkeypatch):
    from translab import references
    case = references.load("model")["visible"][0]
    _hold_back(monkeypatch, part2)
    base, head = part2.reference_base_and_head(case)
    assert isinstance(base, part2.RecordedBase) and isinstance(head, part2.RecordedHead)
    with pytest.raises(RuntimeError, match="neither None nor the causal mask"):
        base(case["src"], torch.zeros(case["src"].size(1), case["src"].size(1)))
    assert not stages.withheld(part2.reference_base_and_head) and not stages.withheld(nn.Linear)


def _classifier(pool, call=lambda e, i, p, t: e(i, p, t)):
    class BertClassifier(nn.Module):
        def __init__(self, encoder, nclasses):
            super().__init__()
            self.encoder = encoder
            self.head = nn.Linear(encoder.config.hidden_size, nclasses)

        def forward(self, input_ids, padding_mask=None, token_type_ids=None):
            hidden = call(self.encoder, input_ids, padding_mask, token_type_ids)
            return self.head(pool(hidden, padding_mask))
    return BertClassifier


def _mean_of_real(hidden, padding):
    if padding is None:
        return hidden.mean(dim=1)
    keep = (~padding).unsqueeze(-1).to(hidden.dtype)
    return (hidden * keep).sum(dim=1) / keep.sum(dim=1)


CLASSIFIERS = {
    "right": _classifier(_mean_of_real),
    "mean with padding": _classifier(lambda h, p: h.mean(dim=1)),
    "first token": _classifier(lambda h, p: h[:, 0]),
    "last position": _classifier(lambda h, p: h[:, -1]),
    "no padding mask to the encoder": _classifier(_mean_of_real, lambda e, i, p, t: e(i, None, t)),
    "token types ignored": _classifier(_mean_of_real, lambda e, i, p, t: e(i, p)),
    "types by keyword": _classifier(_mean_of_real, lambda e, i, p, t: e(i, padding_mask=p, token_type_ids=t)),
}


PASSING = {"right", "a bool causal mask", "types by keyword"}
STAND_INS = [(part2, checks.check_model, MODELS, name) for name in MODELS] + \
            [(part6, checks.check_bert_classifier, CLASSIFIERS, name) for name in CLASSIFIERS]


@pytest.mark.parametrize("module, check, answers, name", STAND_INS,
                         ids=[f"{check.__name__}: {name}" for _, check, _, name in STAND_INS])
def test_a_check_says_the_same_with_the_stand_ins(module, check, answers, name, monkeypatch):
    """Right and wrong answers get the same verdict and message whether the reference is translab's class or a
    stand-in replaying its stored outputs (as in the release of the part's week)."""
    expected = _verdict(check, answers[name])
    _hold_back(monkeypatch, module)
    assert _verdict(check, answers[name]) == expected
    assert expected[0] == (name in PASSING), expected


def test_the_mapping_check_passes_the_right_tensors_without_the_encoder(monkeypatch, capsys):
    """Held back, the encoder does not run the student's tensors: they are compared one by one first."""
    from translab import bert
    from translab.checks import part6
    config, checkpoint = bert.load_checkpoint()
    right = bert.convert_checkpoint(checkpoint, config)  # the visible case is all-MiniLM-L6-v2 itself
    _hold_back(monkeypatch, part6)
    checks.check_weight_mapping(lambda given, config: {name: tensor.clone() for name, tensor in right.items()})
    assert capsys.readouterr().out.startswith("ok")
    swapped = {name: (torch.cat([t[t.size(0) // 3: 2 * t.size(0) // 3], t[: t.size(0) // 3], t[2 * t.size(0) // 3:]])
                      if "in_proj" in name else t.clone()) for name, t in right.items()}
    with pytest.raises(checks.CheckFailed, match="wrong values"):
        checks.check_weight_mapping(lambda given, config: swapped)


def _rewritten(change):
    """An answer for the visible case (all-MiniLM-L6-v2 itself): the right tensors with one mistake
    (``change(state)``)."""
    from translab import bert
    right = bert.convert_checkpoint(*reversed(bert.load_checkpoint()))

    def convert(checkpoint, config):
        state = {name: tensor.clone() for name, tensor in right.items()}
        change(state)
        return state
    return convert


def _swap(state, a, b):
    for name in [n for n in state if a in n]:
        state[name], state[name.replace(a, b)] = state[name.replace(a, b)], state[name]


WRONG_MAPPINGS = {
    "right": lambda state: None,
    "norms swapped": lambda state: _swap(state, ".norm1.", ".norm2."),
    "feed-forward swapped": lambda state: _swap(state, ".linear1.", ".linear2."),
    "out-projection transposed": lambda state: state.update(
        {n: t.T.contiguous() for n, t in state.items() if n.endswith("out_proj.weight")}),
    "q and k swapped": lambda state: state.update(
        {n: torch.cat([t.chunk(3)[1], t.chunk(3)[0], t.chunk(3)[2]]) for n, t in state.items() if "in_proj" in n}),
    "layer 0 everywhere": lambda state: state.update(
        {n: state[re.sub(r"layers\.\d+\.", "layers.0.", n)] for n in list(state) if ".layers." in n}),
    "a bias missing": lambda state: state.pop("encoder.layers.0.linear2.bias"),
    "a bias zero": lambda state: state["encoder.layers.2.linear1.bias"].zero_(),
}


@pytest.mark.parametrize("name", WRONG_MAPPINGS)
def test_the_mapping_check_says_the_same_without_translabs_mapping(name, monkeypatch):
    """In the release of part 6's week, weight_mapping and convert_checkpoint are stubs: the check finds each
    parameter's sources by the digests the references store, and says what it says with translab's mapping."""
    answer = _rewritten(WRONG_MAPPINGS[name])
    expected = _verdict(checks.check_weight_mapping, answer)
    assert expected[0] == (name == "right"), expected
    _hold_back(monkeypatch, part6)
    assert _verdict(checks.check_weight_mapping, answer) == expected
