"""Issue 51: sampling's next-token distribution (temperature, top-k, top-p), the sampler, the repetition measure and
pieces back into text."""
from __future__ import annotations

import pytest
import torch

from translab import checks
from translab.generation import next_token_probs, repetition, sample_generate_ids, sample_next_token

ROW = torch.tensor([2.0, 1.2, 1.2, 0.5, -0.3, -1.0, 0.1, 0.9])  # the notebook's example: a tie at 1.2


def test_without_settings_it_is_the_softmax_and_rows_sum_to_one():
    logits = torch.randn(2, 3, 11)
    assert torch.allclose(next_token_probs(logits), logits.softmax(-1))
    for settings in ({"temperature": 0.3}, {"top_k": 4}, {"top_p": 0.6}, {"temperature": 1.7, "top_k": 5, "top_p": 0.8}):
        probs = next_token_probs(logits, **settings)
        assert probs.shape == logits.shape and torch.allclose(probs.sum(-1), torch.ones(2, 3)), settings


def test_temperature_divides_the_logits():
    assert torch.allclose(next_token_probs(ROW, temperature=0.5), (ROW / 0.5).softmax(-1))
    flat, sharp = next_token_probs(ROW, temperature=4.0), next_token_probs(ROW, temperature=0.25)
    assert flat.max() < ROW.softmax(-1).max() < sharp.max()
    with pytest.raises(ValueError, match="temperature must be > 0"):
        next_token_probs(ROW, temperature=0.0)


def test_top_k_keeps_the_tokens_tied_with_the_kth():
    probs = next_token_probs(ROW, top_k=2)
    assert (probs > 0).tolist() == [True, True, True, False, False, False, False, False]
    assert probs[1] == probs[2]
    assert torch.equal(next_token_probs(ROW, top_k=8), next_token_probs(ROW))  # k >= vocab filters nothing


def test_top_p_keeps_the_token_that_crosses_p():
    probs = ROW.softmax(-1)
    ordered = probs.sort(descending=True).values
    # the three most likely hold less than 0.7, the fourth carries the total past it: four tokens stay
    assert ordered[:3].sum() < 0.7 < ordered[:4].sum()
    kept = next_token_probs(ROW, top_p=0.7)
    assert int((kept > 0).sum()) == 4 and kept[7] > 0
    # a p the most likely token alone reaches keeps that token only
    assert int((next_token_probs(ROW, top_p=0.2) > 0).sum()) == 1


def test_the_sampler_draws_with_the_probabilities_and_repeats_with_its_generator():
    logits = ROW.expand(20000, 8)
    ids = sample_next_token(logits, 0.8, 4, 0.8, generator=torch.Generator().manual_seed(1))
    assert ids.shape == (20000,) and ids.dtype == torch.long
    frequencies = torch.bincount(ids, minlength=8).double() / 20000
    expected = next_token_probs(ROW, 0.8, 4, 0.8).double()
    assert torch.all((frequencies - expected).abs() < 0.02) and frequencies[expected == 0].sum() == 0
    again = sample_next_token(logits, 0.8, 4, 0.8, generator=torch.Generator().manual_seed(1))
    assert torch.equal(ids, again)


def test_repetition_counts_repeated_ngrams_and_distinct_bigrams():
    looping = repetition([[1, 2, 3, 1, 2, 3, 1, 2, 3]])
    assert looping["repeated_ngrams"] == pytest.approx(4 / 7) and looping["distinct_2"] == pytest.approx(3 / 8)
    fresh = repetition([[1, 2, 3, 4], [1, 2, 3, 4]])  # each continuation on its own: nothing repeats within one
    assert fresh == {"distinct_2": 1.0, "repeated_ngrams": 0.0, "n": 3}


def test_sampled_generation_uses_the_sampler_it_is_given_and_stops_at_eos():
    class Constant(torch.nn.Module):
        def forward(self, ids):
            return torch.zeros(ids.size(0), ids.size(1), 5)
    drawn = []

    def sampler(logits, temperature, top_k, top_p, generator=None):
        drawn.append(tuple(logits.shape))
        return torch.tensor([4 if len(drawn) < 3 else 3])
    assert sample_generate_ids(Constant(), [2], max_new_tokens=10, eos_id=3, sampler=sampler) == [4, 4]
    assert drawn == [(1, 5)] * 3


@pytest.mark.parametrize("check, name", [(checks.check_decoding, "next_token_probs"),
                                         (checks.check_sampling, "sample_next_token"),
                                         (checks.check_pieces_to_text, "pieces_to_text")])
def test_the_stubs_are_not_written_yet(check, name):
    def stub(*args, **kwargs):
        raise NotImplementedError()
    with pytest.raises(checks.CheckFailed, match=r"not_written"):
        check(stub)


def test_pieces_become_text_without_markers_marks_or_outer_spaces():
    from translab.tokens import pieces_to_text
    pieces = ["<s>", "\u2581an", "\u2581unbelievabl", "y", "\u2581film", "\u2581!", "</s>", "<pad>", "<pad>"]
    assert pieces_to_text(pieces) == "an unbelievably film !"
    assert pieces_to_text(["<s>", "\u2581the", "<mask>", "\u2581end", "</s>"]) == "the end"
    assert pieces_to_text(["\u2581a", "<unk>", "b"]) == "a<unk>b"  # <unk> stands for text: it stays


def test_sampled_generation_is_the_given_greedy_loop_drawing_each_token():
    """sample_generate_ids holds no loop of its own (issue 90: in part 3's week it would be the greedy answer): the
    loop it is given, run on scores where the draw is the only token left, gives the tokens a plain sampling loop
    draws with the same generator."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Embedding(7, 7))
    loops = []

    def greedy(model, prompt_ids, max_new_tokens=30, eos_id=3):
        loops.append(len(prompt_ids))
        ids = list(prompt_ids)
        for _ in range(max_new_tokens):
            next_id = int(model(torch.tensor([ids]))[0, -1].argmax())
            if next_id == eos_id:
                break
            ids.append(next_id)
        return ids[len(prompt_ids):]
    found = sample_generate_ids(model, [1, 2], 12, temperature=1.5, eos_id=-1, generator=torch.Generator().manual_seed(4),
                                loop=greedy)
    generator, ids = torch.Generator().manual_seed(4), [1, 2]
    for _ in range(12):
        next_id = int(sample_next_token(model(torch.tensor([ids]))[:, -1], 1.5, generator=generator)[0])
        ids.append(next_id)
    assert loops == [2] and found == ids[2:] and len(found) == 12 and len(set(found)) > 1
