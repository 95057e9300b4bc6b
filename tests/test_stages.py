"""A release that holds part 2's answers back (``grader.withheld``): check_model, whose reference base and heads
are part 2's answers, judges with stand-ins that replay their stored outputs, and says what it says with them."""
from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from translab import checks, stages
from translab.checks import part2
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


def _verdict(Model) -> tuple[bool, str]:
    try:
        checks.check_model(Model)
        return True, ""
    except checks.CheckFailed as failed:
        return False, " ".join(sorted(re.findall(r"\[diagnosis: (.*)\]", str(failed))))


@pytest.mark.parametrize("name", list(MODELS))
def test_check_model_says_the_same_with_the_stand_ins(name, monkeypatch):
    expected = _verdict(MODELS[name])
    monkeypatch.setattr(part2, "withheld", lambda obj: True)  # as in a release for part 2
    assert _verdict(MODELS[name]) == expected
    assert expected[0] == (name in ("right", "a bool causal mask")), expected


def test_the_stand_ins_are_what_check_model_gets_when_the_base_is_held_back(monkeypatch):
    from translab import references
    case = references.load("model")["visible"][0]
    monkeypatch.setattr(part2, "withheld", lambda obj: True)
    base, head = part2._reference_base_and_head(case)
    assert isinstance(base, part2._RecordedBase) and isinstance(head, part2._RecordedHead)
    with pytest.raises(RuntimeError, match="neither None nor the causal mask"):
        base(case["src"], torch.zeros(case["src"].size(1), case["src"].size(1)))
    assert not stages.withheld(part2._reference_base_and_head) and not stages.withheld(nn.Linear)
