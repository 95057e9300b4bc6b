"""Issue 51's shown lessons: one cached generation step is full causal attention's last row; post-LN's gradients grow
toward the output of a deep stack, pre-LN's do not; a model that reverses digits puts its weight on the mirror
position."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from translab.attention import cached_attention_step, multi_head_attention
from translab.budget import FULL
from translab.model import generate_square_subsequent_mask
from translab.normalization import layer_gradient_norms
from translab.reversal import (DIGITS, LENGTH, anti_diagonal_weight, build_reversal_model, reversal_batch,
                               reversal_scores, train_reversal)


def test_cached_steps_give_full_causal_attention_and_grow_the_cache_by_one_row():
    torch.manual_seed(3)
    layer = nn.MultiheadAttention(24, 3, batch_first=True)
    weights = (layer.in_proj_weight, layer.in_proj_bias, layer.out_proj.weight, layer.out_proj.bias)
    x = torch.randn(2, 7, 24)
    with torch.no_grad():
        full, _ = multi_head_attention(x, *weights, 3, generate_square_subsequent_mask(7))
        cache, steps = None, []
        for t in range(7):
            out, cache = cached_attention_step(x[:, t:t + 1], cache, *weights, 3)
            assert cache[0].shape == cache[1].shape == (2, 3, t + 1, 8)
            steps.append(out)
        assert torch.allclose(torch.cat(steps, dim=1), full, atol=1e-5)
        # a prefix cached at once, then one step: the same last row
        _, prefix = cached_attention_step(x[:, :-1], None, *weights, 3)
        last, _ = cached_attention_step(x[:, -1:], prefix, *weights, 3)
        assert torch.allclose(last, full[:, -1:], atol=1e-5)


def test_deep_post_ln_gradients_grow_toward_the_output_and_pre_ln_ones_do_not():
    post, pre = layer_gradient_norms(12, norm_first=False), layer_gradient_norms(12, norm_first=True)
    assert post[-1] == max(post) and post[-1] > 1.5 * min(post)
    assert pre[-1] <= min(pre) * 1.05 and pre[0] == max(pre)
    shallow = layer_gradient_norms(4, norm_first=False), layer_gradient_norms(4, norm_first=True)
    assert all(0.8 < a / b < 1.4 for a, b in zip(*shallow))  # at our model's depth the two differ little


def test_reversal_batches_and_the_anti_diagonal_measure():
    inputs, targets = reversal_batch(5, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (5, LENGTH) and torch.equal(targets, inputs.flip(1))
    assert 0 <= int(inputs.min()) and int(inputs.max()) < DIGITS
    mirror = torch.eye(LENGTH).flip(1)
    assert anti_diagonal_weight(mirror) == 1.0
    assert abs(anti_diagonal_weight(torch.full((3, LENGTH, LENGTH), 1 / LENGTH)) - 1 / LENGTH) < 1e-7
    assert anti_diagonal_weight(torch.eye(LENGTH)) == 0.0  # a head on itself is not a reversal


@pytest.mark.slow  # two training runs
def test_the_reversal_run_learns_the_anti_diagonal_only_from_a_small_embedding():
    """What notebook 03 says its own run shows: at the students' step budget, the model whose embedding starts at std
    1/sqrt(nhid) reverses and puts its weight on the mirror position; the one built as in part 2 stays near chance."""
    inputs, targets = reversal_batch(256, torch.Generator().manual_seed(1))
    found = {}
    for small in (True, False):
        model = build_reversal_model(small, seed=0)
        losses = train_reversal(model, FULL.reversal_steps)
        assert len(losses) == FULL.reversal_steps
        found[small] = (losses[-1], *reversal_scores(model, inputs, targets))
    loss, right, maps = found[True]
    assert loss < 0.1 and right > 0.95 and anti_diagonal_weight(maps) > 0.4, found[True][:2]
    assert torch.allclose(maps.sum(-1), torch.ones(256, LENGTH), atol=1e-5)
    loss, right, maps = found[False]
    assert loss > 2.0 and right < 0.3 and anti_diagonal_weight(maps) < 0.15, found[False][:2]


def test_each_variant_code_draws_its_own_mlm_demo_sentence_and_seed():
    """Issue 54, part 5: the demo is the student's own (another sentence or seed than a classmate's) and the same in
    the grader's re-run (the same code, the same draw)."""
    from translab.mlm import DEMO_WORDS, demo_sentence
    sentences = [" ".join(["word"] * (n % 4 + 5)) + f" {n} ." for n in range(50)]  # 6 to 9 words
    draws = {code: demo_sentence(code, sentences) for code in ("ABCDE12345", "ZZZZZ00000", "Q1W2E3R4T5", "0000000001")}
    assert draws["ABCDE12345"] == demo_sentence("ABCDE12345", list(reversed(sentences))), "not the order given"
    assert len({seed for _, seed in draws.values()}) == 4 and len({text for text, _ in draws.values()}) > 1
    assert all(DEMO_WORDS[0] <= len(text.split()) <= DEMO_WORDS[1] for text, _ in draws.values())
    with pytest.raises(ValueError, match="no sentence of"):
        demo_sentence("ABCDE12345", ["too short ."])


def test_the_mlm_demo_says_what_became_of_each_chosen_token_and_the_guesses_there(tokenizer):
    from translab.contract import MLM_DEMO_PREFIX, MLM_GUESSES
    from translab.data import MASK_ID
    from translab.datasets import encode, pad_sequences
    from translab.mlm import IGNORE_INDEX, guess_lines, masking_lines
    ids, _ = pad_sequences([encode(tokenizer, "the film is a total waste of time .")])
    inputs, labels = ids.clone(), torch.full_like(ids, IGNORE_INDEX)
    labels[0, [2, 3, 5]] = ids[0, [2, 3, 5]]
    inputs[0, 2], inputs[0, 5] = MASK_ID, ids[0, 1]  # 2 masked, 3 unchanged, 5 a random token (the first word's)
    piece = tokenizer.id_to_piece
    lines = masking_lines(tokenizer, ids, inputs, labels)
    assert all(line.startswith(MLM_DEMO_PREFIX) for line in lines) and len(lines) == 5
    assert lines[1] == f"{MLM_DEMO_PREFIX}, your masking  : " + " ".join(piece(int(t)) for t in inputs[0])
    assert lines[2:] == [f"{MLM_DEMO_PREFIX}, position 2: {piece(int(ids[0, 2]))!r} -> the mask token",
                         f"{MLM_DEMO_PREFIX}, position 3: {piece(int(ids[0, 3]))!r} -> unchanged",
                         f"{MLM_DEMO_PREFIX}, position 5: {piece(int(ids[0, 5]))!r} -> random token {piece(int(ids[0, 1]))!r}"]
    assert masking_lines(tokenizer, ids, ids, torch.full_like(ids, IGNORE_INDEX))[-1].endswith(
        "your mask_tokens chose no token of this sentence")
    probabilities = torch.full((1, ids.shape[1], tokenizer.get_piece_size()), 1e-6)
    probabilities[0, :, ids[0, 1]], probabilities[0, :, ids[0, 2]] = 0.5, 0.25
    guesses = guess_lines(tokenizer, labels, probabilities, k=2)
    assert guesses == [f"{MLM_GUESSES} at position {p}: {piece(int(ids[0, 1]))!r} 0.500, {piece(int(ids[0, 2]))!r} 0.250"
                       for p in (2, 3, 5)]
