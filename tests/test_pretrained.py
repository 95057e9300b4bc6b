"""The committed checkpoint is the one its manifest describes, and it still performs as recorded.

Notebooks 03 and 04 load ``artifacts/pretrained_lm.pt``; if it drifts from the tokenizer, the data
or its manifest, students would silently fine-tune a different model than the one documented.
"""
from __future__ import annotations

import json

import pytest
import torch

from translab import data
from translab.checkpoint import PRETRAINED_PATH, load_checkpoint
from translab.paths import ARTIFACTS_DIR
from translab.datasets import heldout_batches
from translab.training import evaluate_language_model

MANIFEST_PATH = ARTIFACTS_DIR / "pretrained_lm.json"


@pytest.fixture(scope="module")
def manifest() -> dict:
    assert MANIFEST_PATH.exists(), f"{MANIFEST_PATH} is missing: rebuild both files with `make pretrain`"
    return json.loads(MANIFEST_PATH.read_text())


@pytest.fixture(scope="module")
def loaded():
    assert PRETRAINED_PATH.exists(), f"{PRETRAINED_PATH} is missing: rebuild it with `make pretrain`"
    return load_checkpoint(PRETRAINED_PATH, map_location="cpu")


def test_checkpoint_loads_on_cpu(loaded):
    model, checkpoint = loaded
    assert all(p.device.type == "cpu" for p in model.parameters())
    assert not model.training, "load_checkpoint should return the model in eval mode"
    for key in ("ntoken", "nhid", "nlayers", "nhead", "dropout"):
        assert key in checkpoint["config"], f"checkpoint config lacks {key}"


def test_vocab_matches_committed_tokenizer(loaded):
    model, checkpoint = loaded
    tokenizer = data.load_tokenizer(ARTIFACTS_DIR / "tokenizer.model")
    vocab = tokenizer.get_piece_size()
    assert checkpoint["config"]["ntoken"] == vocab, (
        f"checkpoint has {checkpoint['config']['ntoken']} tokens, artifacts/tokenizer.model has {vocab}")
    assert model.base.encoder.num_embeddings == vocab
    assert model.head.decoder.out_features == vocab


def test_manifest_matches_data_and_checkpoint(manifest, loaded):
    _, checkpoint = loaded
    recorded = manifest["data_sha256"]
    for source in data.SOURCES:
        for raw in source.files:
            assert recorded.get(raw.name) == raw.sha256, (
                f"manifest records {raw.name} as {recorded.get(raw.name)}, translab.data.SOURCES says "
                f"{raw.sha256}: the checkpoint was trained on other data; rerun `make pretrain`")
    assert recorded["tokenizer.model"] == data.sha256_of(ARTIFACTS_DIR / "tokenizer.model"), (
        "artifacts/tokenizer.model is not the tokenizer the checkpoint was trained with")
    assert manifest["config"] == checkpoint["config"]
    embedded = checkpoint.get("extra", {}).get("manifest", {})
    assert embedded.get("steps") == manifest["steps"], (
        "artifacts/pretrained_lm.json and .pt come from different points of training")


@torch.no_grad()
def test_heldout_perplexity_as_recorded(manifest, loaded):
    model, _ = loaded
    tokenizer = data.load_tokenizer(ARTIFACTS_DIR / "tokenizer.model")
    args = manifest["args"]
    batches = heldout_batches(tokenizer, seq_len=int(args["seq_len"]), batch_size=int(args["batch_size"]))
    measured = evaluate_language_model(model, batches, bf16=False)["perplexity"]
    recorded = manifest["heldout_perplexity"]
    assert abs(measured - recorded) <= 0.02 * recorded, (
        f"held-out perplexity {measured:.2f}, manifest records {recorded:.2f} (more than 2 % apart)")
    # And it is a trained model, not a uniform guesser over the vocabulary.
    assert measured < 0.1 * manifest["config"]["ntoken"]
