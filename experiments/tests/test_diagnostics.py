"""The sentiment diagnostics of the pretrained LM: right log-probabilities, a probe that can tell signal from noise."""
from __future__ import annotations

import numpy as np
import pytest

from experiments import diagnostics
from translab import data
from translab.checkpoint import PRETRAINED_PATH
from translab.data import normalize
from experiments.transfer import load_pretrained


@pytest.fixture(scope="module")
def lm_and_tokenizer():
    lm, _ = load_pretrained(PRETRAINED_PATH)
    return lm, data.load_tokenizer()


def test_continuation_logprob_obeys_the_chain_rule(lm_and_tokenizer):
    lm, tokenizer = lm_and_tokenizer
    assert tokenizer.encode(normalize("it is")) == tokenizer.encode("it") + tokenizer.encode("is")
    text = "a quiet , moving film"
    whole = diagnostics.continuation_logprob(lm, tokenizer, text, "it is")
    parts = (diagnostics.continuation_logprob(lm, tokenizer, text, "it")
             + diagnostics.continuation_logprob(lm, tokenizer, text + " it", "is"))
    assert whole == pytest.approx(parts, abs=1e-3)
    assert whole < 0


def test_linear_probe_finds_signal_and_not_noise():
    rng = np.random.default_rng(0)
    features = rng.normal(size=(400, 8))
    signal = {"mean": features, "labels": (features[:, 0] > 0).astype(int)}
    noise = {"mean": features, "labels": rng.integers(0, 2, 400)}
    split = lambda d, s: {k: v[s] for k, v in d.items()}  # noqa: E731
    # 0.96 here: points next to the boundary may fall either way with another CPU's BLAS, so leave room for a few
    assert diagnostics.linear_probe(split(signal, slice(0, 200)), split(signal, slice(200, None)), "mean") > 0.9
    assert diagnostics.linear_probe(split(noise, slice(0, 200)), split(noise, slice(200, None)), "mean") < 0.65


def test_a_small_run_reports_both_bases_and_every_pair():
    result = diagnostics.run(PRETRAINED_PATH, ["32"], [0], valid_size=40)
    assert {row["base"] for row in result["linear_probe"]} == {"pretrained", "random"}
    assert set(result["zero_shot"]) == {f"{p}/{n}" for p, n in diagnostics.ZERO_SHOT_PAIRS}
    assert all(0 <= row["mean"] <= 1 and 0 <= row["last"] <= 1 for row in result["linear_probe"])
    assert "test" in result["selection"]
