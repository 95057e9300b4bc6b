"""What a student's own part 4 run shows, over seeds: notebook 04's fine-tuning and linear probe, as it runs them.

    python -m experiments.student_run [--seeds 3]      # -> results/student_run.json

The notebook runs seed 0 at the student budget (``translab.budget.FULL``): the first ``finetune_train_size``
training sentences, ``eval_size`` validation and test sentences, the recipe the search chose on validation for each
model among those that read the last token (``results/recipe_search.json``), the best validation epoch kept and
the test set scored once.  This runs the same code for each seed, so the notebook and the rubric can say what one
run can and cannot show, and the linear probe (pretrained against random base, frozen) on the same sentences.
"""
from __future__ import annotations

import argparse
import copy
import json
import sys
import time
from pathlib import Path

import torch

from translab import data
from translab.budget import FULL
from translab.checkpoint import load_checkpoint
from translab.datasets import bucketed_batches, encode_pairs
from translab.model import ModelConfig, TransformerModel, build_classifier
from translab.paths import RESULTS_DIR
from translab.probe import linear_probe, sentence_features
from translab.results import chosen_recipe
from translab.training import evaluate_accuracy, fine_tune_with_recipe, set_seed


def run(seeds: list[int], budget=FULL) -> dict:
    started = time.time()
    tokenizer = data.load_tokenizer()
    pretrained, checkpoint = load_checkpoint()
    config = ModelConfig.from_dict(checkpoint["config"])
    train_pairs = data.load_split("train")[: budget.finetune_train_size]
    valid_pairs = data.load_split("valid")[: budget.eval_size]
    test_pairs = data.load_split("test")[: budget.eval_size]
    train_examples = encode_pairs(tokenizer, train_pairs)
    valid_batches = bucketed_batches(encode_pairs(tokenizer, valid_pairs), 64, shuffle=False)
    test_batches = bucketed_batches(encode_pairs(tokenizer, test_pairs), 64, shuffle=False)

    def train_batches(epoch):
        return bucketed_batches(train_examples, 32, shuffle=True, seed=epoch)

    search = json.loads((RESULTS_DIR / "recipe_search.json").read_text(encoding="utf-8"))
    recipes = {init: chosen_recipe(search, init) for init in ("pretrained", "scratch")}
    runs = []
    for seed in seeds:
        for init in ("pretrained", "scratch"):
            set_seed(seed)
            base = copy.deepcopy(pretrained.base) if init == "pretrained" else None  # as the students' transfer() does
            model = build_classifier(config, nclasses=2, base=base)
            history = fine_tune_with_recipe(model, recipes[init][1], train_batches, valid_batches,
                                            budget.finetune_epochs, seed=seed, progress=False, description=init)
            best = history["best_epoch"]
            runs.append({"seed": seed, "init": init, "best_epoch": best, "epochs": len(history["epoch"]),
                         "valid_accuracy": history["valid_accuracy"], "train_loss": history["train_loss"],
                         "best_valid": history["valid_accuracy"][best - 1],
                         "test_accuracy": evaluate_accuracy(model, test_batches)})
            print(f"seed {seed} {init:10s} best epoch {best}: valid {runs[-1]['best_valid']:.3f} "
                  f"test {runs[-1]['test_accuracy']:.3f}", flush=True)
    torch.manual_seed(0)
    bases = {"pretrained": pretrained.base, "random": TransformerModel.from_config(config)}
    probe = {}
    for name, base in bases.items():
        train, valid = sentence_features(base, tokenizer, train_pairs), sentence_features(base, tokenizer, valid_pairs)
        probe[name] = {pooling: linear_probe(train, valid, pooling) for pooling in ("last", "mean")}
    return {"command": "python -m experiments.student_run " + " ".join(sys.argv[1:]), "budget": budget.name,
            "train_sentences": len(train_pairs), "eval_sentences": len(valid_pairs), "epochs": budget.finetune_epochs,
            "recipes": {init: name for init, (name, _) in recipes.items()},
            "selection": "best validation epoch; test scored once per run", "runs": runs,
            "linear_probe": probe, "threads": torch.get_num_threads(), "wall_time_s": round(time.time() - started, 1)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.student_run", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--out", type=Path, default=RESULTS_DIR)
    args = parser.parse_args(argv)
    result = run(list(range(args.seeds)))
    for name, scores in result["linear_probe"].items():
        print(f"probe {name:10s} last {100 * scores['last']:.1f}  mean {100 * scores['mean']:.1f}")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "student_run.json").write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {args.out / 'student_run.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
