"""Turning text into batches: LM streams and padded, masked batches of sentences.

Conventions: right padding with ``PAD_ID``; a padding mask is a bool tensor, True at padding
(what ``src_key_padding_mask`` expects); each sentence is ``[bos] tokens [eos]``.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import torch

from . import data
from .data import BOS_ID, EOS_ID, PAD_ID, normalize


def encode(tokenizer, text: str, max_len: int | None = None) -> list[int]:
    """``[bos] pieces [eos]`` of the normalized text, truncated to ``max_len`` ids (eos kept)."""
    ids = [BOS_ID] + tokenizer.encode(normalize(text)) + [EOS_ID]
    if max_len is not None and len(ids) > max_len:
        ids = ids[: max_len - 1] + [EOS_ID]
    return ids


def pad_sequences(sequences: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    """(batch, longest) ids padded on the right, and the padding mask (True = padding)."""
    if not sequences or any(len(s) == 0 for s in sequences):
        raise ValueError("cannot pad an empty batch or an empty sequence")
    longest = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), longest), PAD_ID, dtype=torch.long)
    for row, sequence in enumerate(sequences):
        ids[row, : len(sequence)] = torch.as_tensor(sequence, dtype=torch.long)
    return ids, ids.eq(PAD_ID)


def make_lm_targets(ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Input is every token but the last, target is every token but the first (shift by one)."""
    if ids.dim() != 2 or ids.size(1) < 2:
        raise ValueError(f"expected (batch, seq) ids with seq >= 2, got shape {tuple(ids.shape)}")
    return ids[:, :-1], ids[:, 1:]


@dataclass
class Batch:
    inputs: torch.Tensor          # (batch, seq) token ids
    padding_mask: torch.Tensor    # (batch, seq) bool, True at padding
    targets: torch.Tensor         # (batch, seq) next-token ids (PAD = ignored) or (batch,) labels

    @property
    def num_tokens(self) -> int:
        return int((~self.padding_mask).sum())


def lm_collate(sequences: list[list[int]]) -> Batch:
    """A padded LM batch of sentences; padded target positions hold PAD_ID and are ignored by the loss."""
    ids, _ = pad_sequences(sequences)
    inputs, targets = make_lm_targets(ids)
    return Batch(inputs, inputs.eq(PAD_ID), targets)


def classification_collate(examples: list[tuple[list[int], int]]) -> Batch:
    ids, padding_mask = pad_sequences([ids for ids, _ in examples])
    labels = torch.tensor([label for _, label in examples], dtype=torch.long)
    return Batch(ids, padding_mask, labels)


def encode_pairs(tokenizer, pairs: list[tuple[str, int]], max_len: int = 128) -> list[tuple[list[int], int]]:
    return [(encode(tokenizer, text, max_len), label) for text, label in pairs]


def bucketed_batches(examples: list[tuple[list[int], int]], batch_size: int, shuffle: bool = True,
                     seed: int = 0) -> list[Batch]:
    """Classification batches of similar lengths (less padding, faster), order shuffled when training.

    Sorting within windows of 50 batches keeps batches random enough to train on.
    """
    order = list(range(len(examples)))
    rng = random.Random(seed)
    if shuffle:
        rng.shuffle(order)
    window = batch_size * 50
    order = [i for start in range(0, len(order), window)
             for i in sorted(order[start:start + window], key=lambda i: len(examples[i][0]))]
    batches = [classification_collate([examples[i] for i in order[start:start + batch_size]])
               for start in range(0, len(order), batch_size)]
    if shuffle:
        rng.shuffle(batches)
    return batches


class TokenStream:
    """Documents joined into one id stream (``[bos] doc [eos] [bos] doc [eos] ...``), cut into LM batches."""

    def __init__(self, tokenizer, documents: list[str]):
        ids: list[int] = []
        for document in documents:
            ids += [BOS_ID] + tokenizer.encode(normalize(document)) + [EOS_ID]
        self.ids = torch.tensor(ids, dtype=torch.long)

    def __len__(self) -> int:
        return len(self.ids)

    def random_batch(self, batch_size: int, seq_len: int, generator: torch.Generator) -> Batch:
        """Windows at random offsets: every step sees fresh context boundaries."""
        if len(self.ids) <= seq_len + 1:
            raise ValueError(f"stream of {len(self.ids)} tokens is too short for seq_len={seq_len}")
        starts = torch.randint(0, len(self.ids) - seq_len - 1, (batch_size,), generator=generator)
        windows = torch.stack([self.ids[s: s + seq_len + 1] for s in starts.tolist()])
        inputs, targets = make_lm_targets(windows)
        return Batch(inputs, torch.zeros_like(inputs, dtype=torch.bool), targets)

    def sequential_batches(self, batch_size: int, seq_len: int, max_batches: int | None = None) -> list[Batch]:
        """Non-overlapping windows in order: a fixed, repeatable evaluation set."""
        span = seq_len + 1
        count = (len(self.ids) - 1) // seq_len
        windows = [self.ids[i * seq_len: i * seq_len + span] for i in range(count)
                   if i * seq_len + span <= len(self.ids)]
        batches = []
        for start in range(0, len(windows), batch_size):
            inputs, targets = make_lm_targets(torch.stack(windows[start:start + batch_size]))
            batches.append(Batch(inputs, torch.zeros_like(inputs, dtype=torch.bool), targets))
            if max_batches is not None and len(batches) >= max_batches:
                break
        return batches


# ----------------------------------------------------------------- the pretraining text (part 3)

HELDOUT_FRACTION = 0.05
HELDOUT_SEED = 7


def pretraining_documents(extra_text: Path | None = None) -> tuple[list[str], list[str]]:
    """(training documents, held-out reviews).

    Training: the Pang & Lee reviews and the RT sentences of the train split and pool, never
    a valid or test sentence; plus every ``*.txt`` below ``extra_text`` if given (the general-English
    ablation of ``--extra-text``).  Held-out: 5 % of the reviews, fixed by a seed, so perplexities of
    runs with and without extra text are comparable.
    """
    reviews = data.load_reviews()
    order = list(range(len(reviews)))
    random.Random(HELDOUT_SEED).shuffle(order)
    cut = int(len(reviews) * HELDOUT_FRACTION)
    heldout = [reviews[i] for i in sorted(order[:cut])]
    train = [reviews[i] for i in sorted(order[cut:])]
    train += [text for split in ("train", "pool") for text, _ in data.load_split(split)]
    if extra_text is not None:
        files = sorted(Path(extra_text).rglob("*.txt"))
        if not files:
            raise FileNotFoundError(f"--extra-text {extra_text}: no *.txt files there")
        train += [path.read_text(encoding="utf-8", errors="replace") for path in files]
    return train, heldout


def heldout_batches(tokenizer, seq_len: int = 64, batch_size: int = 32, max_batches: int | None = None):
    _, heldout = pretraining_documents()
    return TokenStream(tokenizer, heldout).sequential_batches(batch_size, seq_len, max_batches)
