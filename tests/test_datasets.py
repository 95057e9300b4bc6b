import pytest
import torch

from translab.data import BOS_ID, EOS_ID, PAD_ID
from translab.datasets import (TokenStream, bucketed_batches, classification_collate, encode, encode_pairs,
                               lm_collate, make_lm_targets, pad_sequences)


def test_encode_wraps_in_bos_eos_and_truncates(tokenizer):
    ids = encode(tokenizer, "A great , GREAT film !")
    assert ids[0] == BOS_ID and ids[-1] == EOS_ID
    assert tokenizer.decode(ids[1:-1]) == "a great , great film !"
    short = encode(tokenizer, "a great , great film !", max_len=4)
    assert len(short) == 4 and short[-1] == EOS_ID and short[:3] == ids[:3]


def test_pad_sequences_right_pads_and_masks():
    ids, mask = pad_sequences([[5, 6, 7], [8]])
    assert ids.tolist() == [[5, 6, 7], [8, PAD_ID, PAD_ID]]
    assert mask.tolist() == [[False, False, False], [False, True, True]]
    with pytest.raises(ValueError):
        pad_sequences([[1], []])


def test_lm_targets_are_inputs_shifted_by_one():
    ids = torch.tensor([[2, 10, 11, 12, 3]])
    inputs, targets = make_lm_targets(ids)
    assert inputs.tolist() == [[2, 10, 11, 12]] and targets.tolist() == [[10, 11, 12, 3]]
    with pytest.raises(ValueError, match="seq >= 2"):
        make_lm_targets(torch.tensor([[1]]))


def test_lm_collate_ignores_padding_in_targets():
    batch = lm_collate([[2, 9, 9, 3], [2, 8, 3]])
    assert batch.targets.tolist() == [[9, 9, 3], [8, 3, PAD_ID]]
    assert batch.inputs.tolist() == [[2, 9, 9], [2, 8, 3]]  # the pad was the last id: shifted away
    longer = lm_collate([[2, 9, 9, 9, 3], [2, 8, 3]])
    assert longer.padding_mask.tolist() == [[False] * 4, [False, False, False, True]]
    assert longer.targets.tolist()[1] == [8, 3, PAD_ID, PAD_ID]


def test_classification_collate_and_bucketing_cover_every_example_once():
    examples = [([BOS_ID] + [7] * n + [EOS_ID], n % 2) for n in range(1, 41)]
    batches = bucketed_batches(examples, batch_size=8, shuffle=True, seed=3)
    seen = sorted(int((~b.padding_mask).sum(1)[i]) for b in batches for i in range(len(b.targets)))
    assert seen == sorted(len(ids) for ids, _ in examples)
    padding = sum(int(b.padding_mask.sum()) for b in batches)
    unbucketed = sum(int(classification_collate(examples[i:i + 8]).padding_mask.sum()) for i in range(0, 40, 8))
    assert padding <= unbucketed
    again = bucketed_batches(examples, batch_size=8, shuffle=True, seed=3)
    assert all(torch.equal(a.inputs, b.inputs) for a, b in zip(batches, again))


def test_encode_pairs_keeps_labels(tokenizer):
    pairs = encode_pairs(tokenizer, [("good .", 1), ("bad .", 0)])
    assert [label for _, label in pairs] == [1, 0]


def test_token_stream_batches(tokenizer):
    stream = TokenStream(tokenizer, ["a film .", "another film ."])
    assert stream.ids[0] == BOS_ID and stream.ids.tolist().count(EOS_ID) == 2
    batch = stream.random_batch(3, 4, torch.Generator().manual_seed(0))
    assert batch.inputs.shape == batch.targets.shape == (3, 4)
    assert torch.equal(batch.inputs[:, 1:], batch.targets[:, :-1])
    sequential = stream.sequential_batches(2, 3)
    assert all(b.inputs.size(1) == 3 for b in sequential)
    with pytest.raises(ValueError, match="too short"):
        stream.random_batch(1, len(stream), torch.Generator())
