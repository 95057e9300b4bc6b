"""BERT-style masked language modelling: the reference masking and the MLM loss.

Conventions (shared with the rest of translab): ids below ``FIRST_REGULAR_ID`` are special
(PAD, UNK, BOS, EOS, MASK) and are never chosen; a label is ``PAD_ID`` (ignored by
``make_loss``) everywhere except at the chosen positions, where it is the original token.
"""
from __future__ import annotations

import hashlib

import torch
from torch import nn

from .contract import MLM_DEMO_PREFIX, MLM_GUESSES
from .data import BOS_ID, EOS_ID, MASK_ID, PAD_ID, UNK_ID
from .datasets import pad_sequences, encode

SPECIAL_IDS = (PAD_ID, UNK_ID, BOS_ID, EOS_ID, MASK_ID)
FIRST_REGULAR_ID = max(SPECIAL_IDS) + 1
IGNORE_INDEX = PAD_ID


def special_tokens_mask(ids: torch.Tensor, special_ids=SPECIAL_IDS) -> torch.Tensor:
    """Bool tensor, True where ``ids`` holds a special token (never chosen for prediction)."""
    return torch.isin(ids, torch.as_tensor(list(special_ids), dtype=ids.dtype, device=ids.device))


def mask_tokens(ids: torch.Tensor, vocab_size: int, generator: torch.Generator | None = None,
                mlm_probability: float = 0.15, mask_id: int = MASK_ID,
                special_ids=SPECIAL_IDS) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs, labels) for masked LM, as in BERT (Devlin et al., 2019, section 3.1).

    Each non-special token is chosen with probability ``mlm_probability``.  Of the chosen ones,
    80 % become ``mask_id``, 10 % a random regular token, 10 % stay unchanged.  ``labels`` holds
    the original token at chosen positions and ``IGNORE_INDEX`` elsewhere.  ``ids`` is not modified.
    """
    if not 0.0 < mlm_probability < 1.0:
        raise ValueError(f"mlm_probability must be in (0, 1), got {mlm_probability}")
    if vocab_size <= FIRST_REGULAR_ID:
        raise ValueError(f"vocab_size={vocab_size} leaves no regular token to sample")
    inputs = ids.clone()
    labels = torch.full_like(ids, IGNORE_INDEX)
    probability = torch.full(ids.shape, mlm_probability)
    probability[special_tokens_mask(ids, special_ids)] = 0.0
    chosen = torch.bernoulli(probability, generator=generator).bool()
    labels[chosen] = ids[chosen]
    to_mask = torch.bernoulli(torch.full(ids.shape, 0.8), generator=generator).bool() & chosen
    inputs[to_mask] = mask_id
    # half of the remaining 20 %: a random token
    to_random = torch.bernoulli(torch.full(ids.shape, 0.5), generator=generator).bool() & chosen & ~to_mask
    random_ids = torch.randint(FIRST_REGULAR_ID, vocab_size, ids.shape, generator=generator, dtype=ids.dtype)
    inputs[to_random] = random_ids[to_random]
    return inputs, labels


def mlm_loss(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor,
             padding_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Cross-entropy at the chosen positions, the encoder attending in both directions (no causal mask)."""
    logits = model(inputs, padding_mask, causal=False)
    loss_fn = nn.CrossEntropyLoss(ignore_index=IGNORE_INDEX)
    return loss_fn(logits.reshape(-1, logits.size(-1)), labels.reshape(-1))


def mlm_batch(tokenizer, texts: list[str], generator: torch.Generator | None = None,
              max_len: int = 64, mask_fn=mask_tokens):
    """(inputs, labels, padding_mask, original ids) of a batch of sentences, masked by ``mask_fn``."""
    ids, padding_mask = pad_sequences([encode(tokenizer, text, max_len) for text in texts])
    inputs, labels = mask_fn(ids, tokenizer.get_piece_size(), generator)
    return inputs, labels, padding_mask, ids


# ----------------------------------------------------------------- the demo on the student's own sentence

DEMO_WORDS = (6, 16)      # the length, in words, of the sentences a demo draws from
DEMO_PROBABILITY = 0.25   # higher than training's 15 %: a short sentence should show a few chosen tokens


def demo_sentence(code: str, sentences: list[str]) -> tuple[str, int]:
    """A sentence and a generator seed of the variant ``code``'s own (issue 54): each student's demo masks another
    sentence, the same one on the student's machine and in the grader's re-run."""
    fitting = sorted({s for s in sentences if DEMO_WORDS[0] <= len(s.split()) <= DEMO_WORDS[1]})
    if not fitting:
        raise ValueError(f"no sentence of {DEMO_WORDS[0]} to {DEMO_WORDS[1]} words to draw a demo from")
    digest = hashlib.sha256(f"translab mlm demo {code}".encode()).digest()
    return fitting[int.from_bytes(digest[:8], "big") % len(fitting)], int.from_bytes(digest[8:12], "big")


def _piece(tokenizer, token) -> str:
    return tokenizer.id_to_piece(int(token))


def _chosen(labels: torch.Tensor) -> list[int]:
    return [int(i) for i in (labels[0] != IGNORE_INDEX).nonzero().flatten()]


def masking_lines(tokenizer, ids: torch.Tensor, inputs: torch.Tensor, labels: torch.Tensor) -> list[str]:
    """What the demo prints of the masking of one sentence (row 0): the sentence, what the masking made of it and what
    became of each chosen token.  Deterministic: the grader's re-run prints the same lines."""
    lines = [f"{MLM_DEMO_PREFIX}, your sentence : {' '.join(_piece(tokenizer, t) for t in ids[0])}",
             f"{MLM_DEMO_PREFIX}, your masking  : {' '.join(_piece(tokenizer, t) for t in inputs[0])}"]
    chosen = _chosen(labels)
    if not chosen:
        return lines + [f"{MLM_DEMO_PREFIX}: your mask_tokens chose no token of this sentence"]
    for position in chosen:
        original, became = int(ids[0, position]), int(inputs[0, position])
        what = ("the mask token" if became == MASK_ID else "unchanged" if became == original
                else f"random token {_piece(tokenizer, became)!r}")
        lines.append(f"{MLM_DEMO_PREFIX}, position {position}: {_piece(tokenizer, original)!r} -> {what}")
    return lines


def guess_lines(tokenizer, labels: torch.Tensor, probabilities: torch.Tensor, k: int = 3) -> list[str]:
    """The model's top ``k`` guesses, with their probabilities, at each chosen position of row 0."""
    lines = []
    for position in _chosen(labels):
        top = probabilities[0, position].topk(k)
        guesses = ", ".join(f"{_piece(tokenizer, i)!r} {p:.3f}" for p, i in zip(top.values.tolist(), top.indices.tolist()))
        lines.append(f"{MLM_GUESSES} at position {position}: {guesses}")
    return lines
