"""Greedy decoding against sampling on part 3's prompts: how repetitive each one's text is.

    python -m experiments.decoding      # make decoding: results/decoding.json

The shipped checkpoint continues each of the notebook's prompts by 30 tokens, greedily and by sampling at a few
settings (each prompt drawn ``SEEDS`` times, the seeds fixed); the figures are ``translab.generation.repetition``'s:
distinct-2 (the share of a continuation's bigrams that are distinct) and the share of its 3-grams already seen
earlier in it.  Part 3 prints them beside the same measure of the student's own run.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

from translab.checkpoint import load_checkpoint
from translab.data import BOS_ID, load_tokenizer, normalize
from translab.generation import greedy_generate_ids, repetition, sample_generate_ids
from translab.paths import RESULTS_DIR

PROMPTS = ["the movie is", "i did not like", "the acting", "this film is a"]  # notebook 03's
MAX_NEW_TOKENS = 30
SEEDS = 8
SETTINGS = {"sampling T=1": dict(temperature=1.0), "sampling T=0.8, top-p 0.9": dict(temperature=0.8, top_p=0.9),
            "sampling T=0.7, top-k 40": dict(temperature=0.7, top_k=40)}


def measure() -> dict:
    torch.set_num_threads(1)
    model, _ = load_checkpoint()
    tokenizer = load_tokenizer()
    prompts = [[BOS_ID] + tokenizer.encode(normalize(prompt)) for prompt in PROMPTS]
    rows = {"greedy": {"settings": {}, **repetition([greedy_generate_ids(model, ids, MAX_NEW_TOKENS)
                                                     for ids in prompts])}}
    examples = {"greedy": tokenizer.decode(greedy_generate_ids(model, prompts[0], MAX_NEW_TOKENS))}
    for name, settings in SETTINGS.items():
        texts = [sample_generate_ids(model, ids, MAX_NEW_TOKENS, generator=torch.Generator().manual_seed(seed),
                                     **settings) for ids in prompts for seed in range(SEEDS)]
        rows[name] = {"settings": settings, **repetition(texts)}
        examples[name] = tokenizer.decode(texts[0])
    return {"prompts": PROMPTS, "max_new_tokens": MAX_NEW_TOKENS, "seeds": SEEDS, "measures": rows,
            "examples": {"prompt": PROMPTS[0], **examples}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.decoding", description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=RESULTS_DIR / "decoding.json")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    document = {"what": __doc__.splitlines()[0], "command": "python -m experiments.decoding", **measure()}
    document["seconds"] = round(time.perf_counter() - started, 1)
    for name, row in document["measures"].items():
        print(f"{name:28s} distinct-2 {row['distinct_2']:.2f}   repeated 3-grams {row['repeated_ngrams']:.2f}")
    args.output.write_text(json.dumps(document, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {args.output} in {document['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
