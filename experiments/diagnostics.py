"""What does the pretrained language model know about sentiment?  Two diagnostics, on validation only.

    python -m experiments.diagnostics                 # -> results/diagnostics.json

* **Linear probe**: freeze a base, take the mean of its states over each sentence (or the last token's), fit a
  logistic regression on N labeled sentences, score it on validation.  Pretrained against a random base of the
  same shape: the difference is what pretraining put into the features before any fine-tuning.
* **Zero-shot**: append "it is a great film ." or "it is a terrible film ." (and other pairs) to each
  sentence and compare the LM's log-likelihoods.  Above 50 % only if the LM tracks the sentence's sentiment.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from translab import data
from translab.checkpoint import PRETRAINED_PATH
from translab.data import BOS_ID, normalize
from .transfer import load_pretrained, training_pairs
from translab.model import ModelConfig, TransformerModel
from translab.probe import linear_probe, sentence_features
from translab.paths import RESULTS_DIR, as_recorded

ZERO_SHOT_PAIRS = (("great", "terrible"), ("good", "bad"), ("wonderful", "awful"), ("best", "worst"))


@torch.no_grad()
def continuation_logprob(lm, tokenizer, text: str, continuation: str) -> float:
    """log P(continuation | [bos] text) under the causal LM."""
    prefix = [BOS_ID] + tokenizer.encode(normalize(text))
    tail = tokenizer.encode(normalize(continuation))
    ids = torch.tensor([prefix + tail])
    logprobs = F.log_softmax(lm(ids[:, :-1]).float(), dim=-1)[0]
    return float(sum(logprobs[len(prefix) - 1 + i, token] for i, token in enumerate(tail)))


def zero_shot_accuracy(lm, tokenizer, pairs: list[tuple[str, int]], positive: str, negative: str) -> float:
    """Accuracy of "positive if the positive continuation is likelier than its median margin"."""
    lm.eval()
    margins = np.array([continuation_logprob(lm, tokenizer, text, f"it is a {positive} film .")
                        - continuation_logprob(lm, tokenizer, text, f"it is a {negative} film .") for text, _ in pairs])
    labels = np.array([label for _, label in pairs])
    return float(((margins > np.median(margins)) == labels).mean())


def run(checkpoint: Path, sizes: list[str], seeds: list[int], valid_size: int | None = None) -> dict:
    started = time.time()
    torch.set_num_threads(1)
    tokenizer = data.load_tokenizer()
    lm, ckpt = load_pretrained(checkpoint)
    config = ckpt["config"]
    torch.manual_seed(0)
    random_base = TransformerModel.from_config(ModelConfig.from_dict(config))
    valid_pairs = data.load_split("valid")[:valid_size]
    bases = {"pretrained": lm.base, "random": random_base}
    valid = {name: sentence_features(base, tokenizer, valid_pairs) for name, base in bases.items()}
    probe = []
    for size in sizes:
        for seed in seeds:
            train_pairs = training_pairs(size, seed)
            for name, base in bases.items():
                train = sentence_features(base, tokenizer, train_pairs)
                probe.append({"size": size, "seed": seed, "base": name,
                              **{pooling: linear_probe(train, valid[name], pooling) for pooling in ("mean", "last")}})
    zero_shot = {f"{pos}/{neg}": zero_shot_accuracy(lm, tokenizer, valid_pairs, pos, neg) for pos, neg in ZERO_SHOT_PAIRS}
    return {"command": "python -m experiments.diagnostics " + " ".join(sys.argv[1:]),
            "checkpoint": as_recorded(checkpoint),
            "valid_sentences": len(valid_pairs), "selection": "validation only; test set not loaded",
            "linear_probe": probe, "zero_shot": zero_shot, "wall_time_s": round(time.time() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.diagnostics", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", type=Path, default=PRETRAINED_PATH)
    parser.add_argument("--sizes", nargs="+", default=["100", "400", "1600"])
    parser.add_argument("--seeds", type=int, default=2)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    result = run(args.checkpoint, args.sizes, list(range(args.seeds)))
    for row in result["linear_probe"]:
        print(f"probe {row['size']:>5} seed {row['seed']} {row['base']:10s} mean {100 * row['mean']:.1f}  "
              f"last {100 * row['last']:.1f}")
    for name, accuracy in result["zero_shot"].items():
        print(f"zero-shot {name:20s} {100 * accuracy:.1f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "diagnostics.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out / 'diagnostics.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
