"""What pretraining put into a base's features before any fine-tuning: a linear probe.

Freeze a base, read each sentence's vector (the last real token's, as the lab's classifier does, or the mean of
its tokens), fit a logistic regression on labeled sentences and score it on the validation sentences.  A pretrained
base against a random one of the same shape: the difference is what pretraining gave the features.  Part 4's
students run it; ``experiments.diagnostics`` runs it over sizes and seeds (``results/diagnostics.json``).
"""
from __future__ import annotations

import torch

from .datasets import bucketed_batches, encode_pairs
from .model import TransformerModel, generate_square_subsequent_mask, last_token_states

PROBE_C = (0.01, 0.1, 1.0, 10.0)  # inverse L2 strengths of the logistic regression, chosen on validation


@torch.no_grad()
def sentence_features(base: TransformerModel, tokenizer, pairs: list[tuple[str, int]], batch_size: int = 128) -> dict:
    """{"mean": (n, d), "last": (n, d), "labels": (n,)} numpy arrays of frozen causal features, in the order of
    ``pairs``."""
    base.eval()
    examples = encode_pairs(tokenizer, pairs)
    means, lasts, labels = [], [], []
    for batch in bucketed_batches(examples, batch_size, shuffle=False):
        padding = batch.padding_mask
        hidden = base(batch.inputs, generate_square_subsequent_mask(batch.inputs.size(1)), padding)
        keep = (~padding).unsqueeze(-1).to(hidden.dtype)
        means.append((hidden * keep).sum(1) / keep.sum(1))
        lasts.append(last_token_states(hidden, padding))
        labels.append(batch.targets)
    return {"mean": torch.cat(means).numpy(), "last": torch.cat(lasts).numpy(), "labels": torch.cat(labels).numpy()}


def linear_probe(train: dict, valid: dict, pooling: str) -> float:
    """Best validation accuracy of a logistic regression over ``PROBE_C`` (validation is the selector and the
    score here: a diagnostic, reported as such, never a test result)."""
    from sklearn.linear_model import LogisticRegression
    scores = [LogisticRegression(C=c, max_iter=2000).fit(train[pooling], train["labels"])
              .score(valid[pooling], valid["labels"]) for c in PROBE_C]
    return float(max(scores))
