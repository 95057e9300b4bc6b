"""A warning never ends the diagnosis (issue 82): the check goes on comparing, and the failure names every finding,
each with its own diagnosis key."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from translab import checks
from translab.model import PositionalEncoding

from test_attention import named
from test_diagnosis import failure


def _base(scaled: bool):
    """A base written seq-first, as PyTorch's own tutorial writes it: no batch_first, its own transposes (right),
    the encoder's default enable_nested_tensor (PyTorch warns at construction)."""
    class TransformerModel(nn.Module):
        def __init__(self, ntoken, nhead, nhid, nlayers, dropout=0.5):
            super().__init__()
            self.nhid = nhid
            self.encoder = nn.Embedding(ntoken, nhid)
            self.pos_encoder = PositionalEncoding(nhid, dropout)
            layer = nn.TransformerEncoderLayer(nhid, nhead, dim_feedforward=nhid, dropout=dropout)
            self.transformer_encoder = nn.TransformerEncoder(layer, nlayers)

        def forward(self, src, src_mask=None, src_key_padding_mask=None):
            if src_key_padding_mask is not None and src_mask is not None:
                padding = torch.zeros(src_key_padding_mask.shape, dtype=src_mask.dtype)
                src_key_padding_mask = padding.masked_fill(src_key_padding_mask, float("-inf"))
            x = self.pos_encoder(self.encoder(src) * (math.sqrt(self.nhid) if scaled else 1.0)).transpose(0, 1)
            return self.transformer_encoder(x, mask=src_mask, src_key_padding_mask=src_key_padding_mask).transpose(0, 1)
    return TransformerModel


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_a_warning_alone_is_the_one_finding(split):
    message = failure(checks.check_transformer_model, _base(scaled=True), split=split)
    assert named(message) == {"stderr_warning"}, message
    assert "also:" not in message


@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_the_output_is_still_compared_after_a_warning(split):
    message = failure(checks.check_transformer_model, _base(scaled=False), split=split)
    assert named(message) == {"model.no_scale", "stderr_warning"}, message
    first, also = message.split("\n  also:     ", 1)
    assert "sqrt(nhid)" in first and "printed a warning to stderr" in also


def test_outside_a_check_a_warning_fails_at_once():
    import warnings
    with pytest.raises(checks.CheckFailed) as caught:
        with checks.harness.no_warnings("this call"):
            warnings.warn("a warning", UserWarning)
    assert "printed a warning to stderr" in str(caught.value)


def _attention_without_a_none_path(q, k, v, mask=None):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    scores = scores.masked_fill(mask == float("-inf"), float("-inf"))  # mask=None: masked_fill(False, ...)
    weights = torch.softmax(scores, dim=-1)
    return weights @ v, weights


def test_a_call_with_mask_none_that_raises_says_so_without_pytorchs_signature_list():
    message = failure(checks.check_attention, _attention_without_a_none_path)
    assert named(message) == {"raised"}, message
    assert "measured: the call passed `mask=None`" in message and "is not None" in message
    assert "masked_fill()" in message and " * (" not in message, message
