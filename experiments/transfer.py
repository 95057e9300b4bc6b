"""The transfer experiment (``make experiment``): does pretraining pay off, and when?

    python -m experiments.transfer                       # full run -> results/transfer.json, .png
    python -m experiments.transfer --quick --out /tmp/x  # reduced run (what `make test` does)

For each number of labeled sentences (``--sizes``, ``all`` = train + pool) and each seed, the same
balanced subset is used to fine-tune three models, each with its own recipe (``RECIPES``: all tuned on
the validation set only): the lab's LM pretrained in part 3, the same Transformer from random weights,
and all-MiniLM-L6-v2, a BERT-family encoder pretrained at scale (part 6's ``BertEncoder``).  The frozen
MiniLM's mean-pooled features under a logistic regression are a fourth, training-free reference.  Each run keeps the weights of
its best validation epoch; the test set is scored once per run (and, at 1,600 labels, after every
epoch for the learning curves of notebook 04 -- reported, never used to select).  The same subsets
feed the bag-of-words baselines.  Runs are independent and seeded, so they go to ``--jobs``
worker processes of ``--threads`` torch threads each and the results do not depend on the order.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import random
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from multiprocessing import get_context
from pathlib import Path

import torch
from torch import nn
from tqdm.auto import tqdm

from translab import bert, data
from translab.bert import mean_pool
from translab.checkpoint import PRETRAINED_PATH, load_checkpoint
from translab.datasets import Batch, bucketed_batches, encode_pairs
from translab.model import Model, ModelConfig, build_classifier
from translab.paths import REPO_ROOT, RESULTS_DIR, as_recorded
from translab.results import ARMS, format_cost, format_table
from translab.training import evaluate_accuracy, fine_tune, set_seed, warmup_linear

SCHEMA_VERSION = 2
INITS = ARMS  # the fine-tuned arms: our LM, random weights, MiniLM
MINILM_MAX_LENGTH = 64                          # WordPiece tokens; the lab's sentences are shorter
DEFAULT_SIZES = ("100", "200", "400", "800", "1600", "all")
CURVE_SIZE = 1600          # per-epoch test accuracy is recorded at this size (notebook 04)
EVAL_BATCH = 128


@dataclass(frozen=True)
class Recipe:
    """How one model is fine-tuned.  ``layer_decay`` < 1 gives lower layers smaller learning rates
    (ULMFiT's discriminative fine-tuning); ``freeze_epochs`` trains only the head at first."""
    lr_head: float
    lr_base: float             # learning rate of the top encoder layer
    layer_decay: float = 1.0   # multiplier per layer going down, embedding last
    weight_decay: float = 0.01
    warmup: float = 0.1        # fraction of the scheduled steps spent warming up linearly
    dropout: float = 0.1
    batch_size: int = 32
    min_steps: int = 300       # small datasets get more epochs, up to max_epochs
    max_epochs: int = 12
    min_epochs: int = 3
    patience: int = 3          # early stopping on validation accuracy
    freeze_epochs: int = 0
    clip: float = 1.0
    pooling: str = "last"      # "last": the lab's ClassificationHead; "mean": average of all tokens

    def epochs(self, n_examples: int) -> int:
        per_epoch = math.ceil(n_examples / self.batch_size)
        return max(self.min_epochs, min(self.max_epochs, math.ceil(self.min_steps / per_epoch)))


# What ``--tune`` tries: the fine-tuning choices the issue names, for each initialisation.
_DISCRIMINATIVE = Recipe(lr_head=1e-3, lr_base=3e-4, layer_decay=0.7)  # ULMFiT-style: lower layers slower
_MINILM = Recipe(lr_head=1e-4, lr_base=1e-4, batch_size=16, min_steps=150, max_epochs=10, min_epochs=1,
                 pooling="mean")
CANDIDATES = {
    "pretrained": {
        "uniform lr 3e-4": Recipe(lr_head=3e-4, lr_base=3e-4),
        "uniform lr 1e-3": Recipe(lr_head=1e-3, lr_base=1e-3),
        "head 1e-3, base 3e-4, decay 0.7": _DISCRIMINATIVE,
        "head 1e-3, base 1e-4, decay 0.8": Recipe(lr_head=1e-3, lr_base=1e-4, layer_decay=0.8),
        "head 1e-3, base 3e-4, decay 0.7, head-only epoch 1": replace(_DISCRIMINATIVE, freeze_epochs=1),
        "head 1e-3, base 3e-4, decay 0.7, dropout 0.3": replace(_DISCRIMINATIVE, dropout=0.3),
        "head 1e-3, base 3e-4, decay 0.7, mean pooling": replace(_DISCRIMINATIVE, pooling="mean"),
    },
    # BERT's own recipe (Devlin et al.: AdamW, small learning rates, warmup, few epochs), batch 16 for the CPU.
    "minilm": {
        "lr 1e-4": _MINILM,
        "lr 3e-5": replace(_MINILM, lr_head=3e-5, lr_base=3e-5),
    },
    "scratch": {
        "uniform lr 3e-4": Recipe(lr_head=3e-4, lr_base=3e-4),
        "uniform lr 1e-3": Recipe(lr_head=1e-3, lr_base=1e-3),
        "uniform lr 1e-3, dropout 0.3": Recipe(lr_head=1e-3, lr_base=1e-3, dropout=0.3),
        "uniform lr 1e-3, mean pooling": Recipe(lr_head=1e-3, lr_base=1e-3, pooling="mean"),
    },
}
# The winners of ``--tune`` (mean validation accuracy at 400 and 1,600 labels, 2 seeds; the test set is not
# loaded): results/recipe_search.json, which experiments/tests/test_transfer.py checks these names against.
CHOSEN = {"pretrained": "uniform lr 1e-3", "scratch": "uniform lr 1e-3, mean pooling", "minilm": "lr 1e-4"}
RECIPES = {init: CANDIDATES[init][name] for init, name in CHOSEN.items()}
QUICK_RECIPE_CHANGES = {"min_steps": 20, "max_epochs": 2, "min_epochs": 1, "patience": 1}
# --quick evaluates on fixed, balanced slices (MiniLM's evaluation was most of the reduced run: 200 and 400 took 84 s)
QUICK_VALID, QUICK_TEST = 100, 200


def load_pretrained(path: Path) -> tuple[Model, dict]:
    """The checkpoint's LM (on CPU); says how to get one if it is missing."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"pretrained checkpoint {path} is missing: restore it with "
                                "`git checkout artifacts/` or rebuild it with `make pretrain`")
    return load_checkpoint(path, map_location="cpu")


def balanced_subset(pairs: list[tuple[str, int]], size: int, seed: int) -> list[tuple[str, int]]:
    """``size`` pairs, half of each label, drawn with ``seed`` (same seed -> same subset)."""
    by_label = {label: [p for p in pairs if p[1] == label] for label in (0, 1)}
    if size % 2 or size // 2 > min(len(v) for v in by_label.values()):
        raise ValueError(f"cannot draw a balanced subset of {size} from {len(pairs)} pairs")
    rng = random.Random(seed)
    chosen = []
    for label in (0, 1):
        chosen += rng.sample(by_label[label], size // 2)
    rng.shuffle(chosen)
    return chosen


def training_pairs(size: str, seed: int) -> list[tuple[str, int]]:
    """The labeled sentences of one run: a balanced subset of train, or train + pool for ``all``."""
    if size == "all":
        return data.load_split("train") + data.load_split("pool")
    return balanced_subset(data.load_split("train"), int(size), seed)


class MeanPoolHead(nn.Module):
    """Classifies from the mean of the non-padding states (an alternative to the last token)."""

    def __init__(self, nhid: int, nclasses: int):
        super().__init__()
        self.decoder = nn.Linear(nhid, nclasses)

    def forward(self, hidden: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.decoder(mean_pool(hidden, src_key_padding_mask))


def set_dropout(model: nn.Module, p: float) -> None:
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
        elif isinstance(module, nn.MultiheadAttention):
            module.dropout = p


def param_groups(model: nn.Module, recipe: Recipe) -> list[dict]:
    """Head at ``lr_head``; encoder layers from the top down at ``lr_base * layer_decay**depth``, embeddings last."""
    groups = [{"params": list(model.head.parameters()), "lr": recipe.lr_head}]
    for depth, params in enumerate(reversed(_bottom_up_layers(model))):
        groups.append({"params": params, "lr": recipe.lr_base * recipe.layer_decay ** depth})
    covered = sum(p.numel() for g in groups for p in g["params"])
    if covered != sum(p.numel() for p in model.parameters()):
        raise RuntimeError("param_groups missed some parameters of the model")
    return groups


def _bottom_up_layers(model: nn.Module) -> list[list[nn.Parameter]]:
    """The encoder's parameters by depth: the embeddings, then each Transformer layer."""
    if isinstance(model, Model):
        base = model.base
        return [list(base.encoder.parameters())] + [list(l.parameters()) for l in base.transformer_encoder.layers]
    encoder = model.encoder  # a BertClassifier: every parameter outside encoder.encoder is an embedding
    embeddings = [p for name, p in encoder.named_parameters() if not name.startswith("encoder.")]
    return [embeddings] + [list(l.parameters()) for l in encoder.encoder.layers]


class BertForFineTune(nn.Module):
    """A ``bert.BertClassifier`` with the lab's classifier call, ``model(inputs, padding_mask, causal=...)``,
    so that ``training.fine_tune`` drives it unchanged.  ``causal`` is ignored: BERT reads both ways."""

    def __init__(self, classifier: nn.Module):
        super().__init__()
        self.classifier = classifier

    @property
    def encoder(self) -> nn.Module:
        return self.classifier.encoder

    @property
    def head(self) -> nn.Module:
        return self.classifier.head

    def forward(self, inputs: torch.Tensor, padding_mask: torch.Tensor | None = None, causal: bool = False):
        return self.classifier(inputs, padding_mask)


def _lab_arm(job: dict, recipe: Recipe):
    """(model, batches) of the lab's Transformer, pretrained in part 3 or from random weights."""
    tokenizer = data.load_tokenizer()

    def batches(pairs, batch_size, shuffle=False, seed=0):
        return bucketed_batches(encode_pairs(tokenizer, pairs), batch_size, shuffle=shuffle, seed=seed)

    lm, checkpoint = load_pretrained(job["checkpoint"])
    config = replace(ModelConfig.from_dict(checkpoint["config"]), dropout=recipe.dropout)
    base = lm.base if job["init"] == "pretrained" else None
    model = build_classifier(config, 2, base=base)
    if recipe.pooling == "mean":
        model = Model(model.base, MeanPoolHead(config.nhid, 2))
    return model, batches


def _minilm_arm(job: dict, recipe: Recipe):
    """(model, batches) of all-MiniLM-L6-v2 under a fresh head reading the mean of its real tokens."""

    if recipe.pooling != "mean":
        raise ValueError("the MiniLM arm pools by the mean (a bidirectional encoder has no 'last' token to read)")
    tokenizer = bert.minilm_tokenizer(MINILM_MAX_LENGTH)

    def batches(pairs, batch_size, shuffle=False, seed=0):
        return [Batch(b.input_ids, b.padding_mask, b.labels)
                for b in bert.sentence_batches(tokenizer, pairs, batch_size, shuffle=shuffle, seed=seed)]

    encoder, _ = bert.load_minilm(max_length=MINILM_MAX_LENGTH)
    return BertForFineTune(bert.BertClassifier(encoder.train(), nclasses=2)), batches


def run_one(job: dict) -> dict:
    """Fine-tune one model on one subset; returns its scores and history (plain data)."""
    import resource

    torch.set_num_threads(job["threads"])
    recipe = Recipe(**job["recipe"])
    set_seed(job["seed"])
    model, batches = (_minilm_arm if job["init"] == "minilm" else _lab_arm)(job, recipe)
    train = training_pairs(job["size"], job["seed"])
    valid = batches(job["valid"], EVAL_BATCH)
    # The recipe search passes test=None: it must never see the test set.
    test = batches(job["test"], EVAL_BATCH) if job["test"] is not None else None
    set_dropout(model, recipe.dropout)

    epochs = recipe.epochs(len(train))
    per_epoch = math.ceil(len(train) / recipe.batch_size)
    optimizer = torch.optim.AdamW(param_groups(model, recipe), weight_decay=recipe.weight_decay)
    scheduler = warmup_linear(optimizer, max(1, int(recipe.warmup * epochs * per_epoch)), epochs * per_epoch)

    encoder_parameters = [p for layer in _bottom_up_layers(model) for p in layer]

    def train_batches(epoch: int):
        frozen = epoch <= recipe.freeze_epochs
        for parameter in encoder_parameters:
            parameter.requires_grad_(not frozen)
        return batches(train, recipe.batch_size, shuffle=True, seed=job["seed"] * 1000 + epoch)

    start = time.time()
    history = fine_tune(model, train_batches, valid, epochs, optimizer, scheduler,
                        test_batches=test if job["curve"] else None, clip=recipe.clip,
                        patience=recipe.patience, progress=False)
    best = history["best_epoch"]
    if test is None:
        test_accuracy = None
    elif job["curve"]:
        test_accuracy = history["test_accuracy"][best - 1]
    else:
        test_accuracy = evaluate_accuracy(model, test)
    return {"size": job["size"], "seed": job["seed"], "init": job["init"], "n_train": len(train),
            "test_accuracy": test_accuracy, "valid_accuracy": history["valid_accuracy"][best - 1],
            "best_epoch": best, "epochs_run": len(history["epoch"]), "max_epochs": epochs,
            "seconds": round(time.time() - start, 1),
            # of the worker process so far: each arm gets fresh workers (``run``), so this bounds the arm's own peak
            "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "history": history if job["curve"] else None}


def summarize(values: list[float]) -> dict:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "per_seed": values}


def paired_gap(better: list[float], worse: list[float]) -> dict:
    gaps = [p - q for p, q in zip(better, worse)]
    return {**summarize(gaps), "min": min(gaps), "all_positive": all(g > 0 for g in gaps)}


def learning_curve(runs: list[dict], baselines: dict, sizes: list[str], seeds: list[int],
                   probes: dict | None = None) -> list[dict]:
    """Per size: mean, sd and per-seed accuracies of each arm, their paired gaps over scratch, the baselines."""
    by_key = {(r["size"], r["seed"], r["init"]): r for r in runs}
    inits = [init for init in INITS if (sizes[0], seeds[0], init) in by_key]
    rows = []
    for size in sizes:
        acc = {init: [by_key[size, s, init]["test_accuracy"] for s in seeds] for init in inits}
        row = {"size": size, "n_train": by_key[size, seeds[0], inits[0]]["n_train"],
               **{init: summarize(acc[init]) for init in inits}}
        if "pretrained" in acc and "scratch" in acc:
            row["gap"] = paired_gap(acc["pretrained"], acc["scratch"])
        if "minilm" in acc and "scratch" in acc:
            row["minilm_gap"] = paired_gap(acc["minilm"], acc["scratch"])
        if probes:
            row["minilm_frozen"] = summarize([probes[size, s]["test_accuracy"] for s in seeds])
        for kind in ("naive_bayes", "logistic_regression"):
            row[kind] = summarize([baselines[size, s][kind]["test_accuracy"] for s in seeds])
            row[kind + "_default"] = summarize([baselines[size, s][kind]["default_test_accuracy"] for s in seeds])
        rows.append(row)
    return rows


def check_targets(rows: list[dict]) -> dict:
    """The issues' targets, evaluated on what was measured (None when a size or an arm was not run)."""
    by_size = {row["size"]: row for row in rows}
    small = [row for row in rows if row["size"] != "all" and int(row["size"]) <= 400]

    def every_small(key: str, points: float):
        if not small or key not in small[0]:
            return None
        return all(r[key]["min"] >= points for r in small)

    targets = {
        "gap_ge_10_points_at_le_400_labels": (all(r["gap"]["mean"] >= 0.10 and r["gap"]["all_positive"]
                                                  for r in small) if small and "gap" in small[0] else None),
        "gap_ge_3_points_at_1600_labels": (by_size["1600"]["gap"]["mean"] >= 0.03
                                           and by_size["1600"]["gap"]["all_positive"]
                                           if "1600" in by_size and "gap" in by_size["1600"] else None),
        # issue 12: every seed, every size up to 400 labels
        "minilm_beats_scratch_by_ge_15_points_at_le_400_labels_every_seed": every_small("minilm_gap", 0.15),
    }
    if "all" in by_size:
        row = by_size["all"]
        for init in ("pretrained", "minilm"):
            if init in row:
                targets[f"{init}_minus_naive_bayes_at_all_labels"] = row[init]["mean"] - row["naive_bayes"]["mean"]
                targets[f"{init}_reaches_naive_bayes_at_all_labels"] = row[init]["mean"] >= row["naive_bayes"]["mean"]
    return targets


# the curves' labels; their looks are the lab's (translab.plots.MODEL_STYLES), the same in part 6's figure
LABELS = {"minilm": "MiniLM fine-tuned (pretrained at scale)",
          "minilm_frozen": "MiniLM frozen + log. regression",
          "pretrained": "our Transformer, pretrained (part 3)",
          "scratch": "our Transformer from scratch",
          "naive_bayes": "naive Bayes (BoW)",
          "logistic_regression": "logistic regression (BoW)"}


def plot(result: dict, path: Path) -> None:
    """transfer.png from a result (``--replot`` draws it again from transfer.json, training nothing)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = draw(result)
    fig.savefig(path, dpi=120)
    plt.close(fig)


def draw(result: dict):
    """The figure of transfer.png: left, test accuracy against the number of labels; right, validation per epoch."""
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    # here, not at the top: translab.plots imports pyplot, which the workers never need (plot picks Agg before it)
    from translab.plots import MODEL_STYLES, legend_below

    rows = result["learning_curve"]
    x = [row["n_train"] for row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.4))
    for key, label in LABELS.items():
        if key not in rows[0]:
            continue
        mean = [row[key]["mean"] * 100 for row in rows]
        sd = [row[key]["sd"] * 100 for row in rows]
        left.errorbar(x, mean, yerr=sd, capsize=3, label=label, **MODEL_STYLES[key])
    left.set_xscale("log")
    left.set_xticks(x, [str(v) for v in x])
    left.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    left.set_xlabel("labeled training sentences")
    left.set_ylabel("test accuracy (%)")
    left.set_title(f"mean ± sd over {len(result['seeds'])} seeds")
    left.grid(alpha=0.3)
    legend_below(left, fontsize=7.5, ncol=2)
    curves = result.get("epoch_curves") or {}
    for init in INITS:
        for i, history in enumerate(curves.get(init, [])):
            right.plot(history["epoch"], [a * 100 for a in history["valid_accuracy"]], alpha=0.8, markersize=4,
                       label=LABELS[init] if i == 0 else None, **MODEL_STYLES[init])
    # validation, never test, per epoch: the lab teaches that test is scored once, for the epoch validation kept
    right.set_xlabel("epoch")
    right.set_ylabel("validation accuracy (%)")
    right.set_title(f"validation accuracy per epoch, {result.get('epoch_curve_size')} labels (a line per seed)")
    right.xaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
    right.grid(alpha=0.3)
    if curves:
        right.legend(fontsize=8)
    fig.tight_layout()
    return fig


def run(sizes: list[str], seeds: list[int], out: Path, checkpoint: Path, threads: int, jobs: int,
        quick: bool = False, progress: bool = True, recipes: dict | None = None) -> dict:
    recipes = dict(recipes or RECIPES)
    if quick:
        recipes = {k: replace(r, **QUICK_RECIPE_CHANGES) for k, r in recipes.items()}
    started = time.time()
    load_pretrained(checkpoint)  # fail early, with the fix, if it is missing
    data.minilm_dir()
    valid, test = data.load_split("valid"), data.load_split("test")
    if quick:  # a fixed, balanced slice keeps the reduced run within seconds
        valid, test = balanced_subset(valid, QUICK_VALID, 0), balanced_subset(test, QUICK_TEST, 0)
    runs, arms = [], {}
    # One pool per arm: each arm's wall time and peak memory are its own.
    for init in INITS:
        job_list = [{"size": size, "seed": seed, "init": init, "threads": threads, "checkpoint": str(checkpoint),
                     "recipe": asdict(recipes[init]), "valid": valid, "test": test,
                     "curve": size == str(CURVE_SIZE) or (quick and size == sizes[-1])}
                    for size in sizes for seed in seeds]
        # Biggest runs first so that the pool's workers finish together.
        job_list.sort(key=lambda j: -len(training_pairs(j["size"], j["seed"])))
        arm_started = time.time()
        mine = [result for _, result in _run_pool(job_list, jobs, f"fine-tuning: {init}", progress,
                                                  describe=_describe)]
        arms[init] = {"wall_time_s": round(time.time() - arm_started, 1),
                      "cpu_run_seconds": round(sum(r["seconds"] for r in mine), 1),
                      "peak_rss_mb": max(r["peak_rss_mb"] for r in mine)}
        runs += mine
    from .baselines import all_baselines  # scikit-learn: 2 s to import, only the full experiment needs it
    baselines = {(size, seed): all_baselines(training_pairs(size, seed), valid, test)
                 for size in tqdm(sizes, desc="baselines", disable=not progress) for seed in seeds}
    probe_started = time.time()
    probes = minilm_probes(sizes, seeds, valid, test, threads=threads * jobs, progress=progress)
    arms["minilm_frozen"] = {"wall_time_s": round(time.time() - probe_started, 1)}
    runs.sort(key=lambda r: (_size_key(r["size"]), r["seed"], INITS.index(r["init"])))
    curve_size = str(CURVE_SIZE) if str(CURVE_SIZE) in sizes else (sizes[-1] if quick else None)
    rows = learning_curve(runs, baselines, sizes, seeds, probes)
    _, ckpt = load_pretrained(checkpoint)
    manifest = ckpt.get("extra", {}).get("manifest", {})
    result = {
        "schema_version": SCHEMA_VERSION,
        "command": "python -m experiments.transfer " + " ".join(sys.argv[1:]),
        "quick": quick, "sizes": sizes, "seeds": seeds, "threads": threads, "jobs": jobs,
        "torch": str(torch.__version__),
        "checkpoint": {"path": as_recorded(checkpoint), "sha256": data.sha256_of(Path(checkpoint)),
                       "steps": manifest.get("steps"), "heldout_perplexity": manifest.get("heldout_perplexity")},
        "minilm": {"sha256": data.sha256_of(data.minilm_dir() / "model.safetensors"),
                   "max_length": MINILM_MAX_LENGTH},
        "data": {"valid": len(valid), "test": len(test), "train": len(data.load_split("train")),
                 "pool": len(data.load_split("pool"))},
        "selection": "every choice (recipe, epoch, baseline and probe hyperparameters) uses validation accuracy only",
        "recipes": {k: asdict(v) for k, v in recipes.items()},
        "learning_curve": rows,
        "targets": check_targets(rows),
        "cost": arms,
        "epoch_curve_size": curve_size,
        "epoch_curves": {init: [{"seed": r["seed"], **r["history"]} for r in runs
                                if r["history"] is not None and r["size"] == curve_size and r["init"] == init]
                         for init in INITS},
        "runs": [{k: v for k, v in r.items() if k != "history"} for r in runs],
        "baselines": [{"size": size, "seed": seed, **baselines[size, seed]} for size in sizes for seed in seeds],
        "probes": [{"size": size, "seed": seed, **probes[size, seed]} for size in sizes for seed in seeds],
        "wall_time_s": round(time.time() - started, 1),
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "transfer.json").write_text(json.dumps(result, indent=2) + "\n")
    plot(result, out / "transfer.png")
    return result


def minilm_probes(sizes: list[str], seeds: list[int], valid: list[tuple[str, int]], test: list[tuple[str, int]],
                  threads: int, progress: bool = True) -> dict:
    """Per (size, seed): logistic regression on the frozen MiniLM's sentence embeddings of the same subset.
    Each distinct sentence is embedded once."""
    import numpy as np

    from .baselines import fit_feature_probe  # lazy: scikit-learn, 2 s to import

    torch.set_num_threads(threads)
    subsets = {(size, seed): training_pairs(size, seed) for size in sizes for seed in seeds}
    sentences = sorted({text for pairs in [*subsets.values(), valid, test] for text, _ in pairs})
    model, tokenizer = bert.load_minilm(max_length=MINILM_MAX_LENGTH)
    index = {text: i for i, text in enumerate(sentences)}
    features = torch.cat([bert.embed(model, tokenizer, sentences[start:start + 1024])
                          for start in tqdm(range(0, len(sentences), 1024), desc="MiniLM features",
                                            disable=not progress)]).numpy()

    def split(pairs):
        return features[[index[text] for text, _ in pairs]], np.array([label for _, label in pairs])

    return {key: fit_feature_probe(split(pairs), split(valid), split(test)) for key, pairs in subsets.items()}


def tune(sizes: list[str], seeds: list[int], out: Path, checkpoint: Path, threads: int, jobs: int,
         progress: bool = True, quick: bool = False, inits: list[str] | None = None) -> dict:
    """Score every candidate recipe of ``inits`` (default: all) on the validation set (the test set is not
    loaded).  Searching some arms only keeps the other arms' rankings already in ``recipe_search.json``."""
    started = time.time()
    inits = list(inits or CANDIDATES)
    load_pretrained(checkpoint)
    valid = data.load_split("valid")
    if quick:
        valid = balanced_subset(valid, QUICK_VALID, 0)
    changes = QUICK_RECIPE_CHANGES if quick else {}
    job_list = [{"size": size, "seed": seed, "init": init, "threads": threads, "checkpoint": str(checkpoint),
                 "recipe": asdict(replace(recipe, **changes)), "valid": valid, "test": None, "curve": False, "candidate": name}
                for init in inits for name, recipe in CANDIDATES[init].items()
                for size in sizes for seed in seeds]
    results = [{"candidate": job["candidate"], **result}
               for job, result in _run_pool(job_list, jobs, "recipe search (validation only)", progress)]
    path = out / "recipe_search.json"
    previous = json.loads(path.read_text()) if path.exists() and set(inits) != set(CANDIDATES) else {}
    table, searches = dict(previous.get("ranking", {})), dict(previous.get("searches", {}))
    command = "python -m experiments.transfer " + " ".join(sys.argv[1:])
    for init in inits:
        table[init] = []
        for name, recipe in CANDIDATES[init].items():
            mine = [r for r in results if r["init"] == init and r["candidate"] == name]
            per_size = {size: statistics.fmean(r["valid_accuracy"] for r in mine if r["size"] == size)
                        for size in sizes}
            table[init].append({"candidate": name, "recipe": asdict(recipe), "valid_accuracy": per_size,
                                "mean_valid_accuracy": statistics.fmean(per_size.values())})
        table[init].sort(key=lambda row: -row["mean_valid_accuracy"])
        searches[init] = {"command": command, "quick": quick, "sizes": sizes, "seeds": seeds,
                          "wall_time_s": round(time.time() - started, 1)}
    search = {"selection": "mean validation accuracy over sizes and seeds; test set not loaded",
              "searches": searches, "ranking": table, "best": {init: rows[0]["candidate"] for init, rows in table.items()}}
    out.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(search, indent=2) + "\n")
    return search


def _run_pool(job_list: list[dict], jobs: int, description: str, progress: bool,
              describe=None) -> list[tuple[dict, dict]]:
    """(job, result) of ``run_one`` over ``job_list``, in completion order: in ``jobs`` worker processes, or in
    this process when ``jobs`` is 1.  ``describe(result)`` goes on the progress bar."""
    done = []
    bar = tqdm(total=len(job_list), desc=description, disable=not progress)

    def record(job: dict, result: dict) -> None:
        done.append((job, result))
        if describe is not None:
            bar.set_postfix_str(describe(result))
        bar.update()

    if jobs > 1:
        with ProcessPoolExecutor(jobs, mp_context=get_context("spawn")) as pool:
            futures = {pool.submit(run_one, job): job for job in job_list}
            for future in as_completed(futures):
                record(futures[future], future.result())
    else:
        for job in job_list:
            record(job, run_one(job))
    bar.close()
    return done


def compare_checkpoints(checkpoints: dict[str, Path], sizes: list[str], seeds: list[int], out: Path, threads: int,
                        jobs: int, progress: bool = True, quick: bool = False) -> dict:
    """Fine-tune each pretrained checkpoint with the pretrained recipe and score it on validation only (the
    test set is not loaded): how a pretraining choice, such as extra general-English text, is decided."""
    started = time.time()
    valid = data.load_split("valid")
    recipe = RECIPES["pretrained"]
    if quick:
        valid, recipe = balanced_subset(valid, QUICK_VALID, 0), replace(recipe, **QUICK_RECIPE_CHANGES)
    job_list = [{"size": size, "seed": seed, "init": "pretrained", "threads": threads, "checkpoint": str(path),
                 "recipe": asdict(recipe), "valid": valid, "test": None, "curve": False, "name": name}
                for name, path in checkpoints.items() for size in sizes for seed in seeds]
    done = sorted(_run_pool(job_list, jobs, "checkpoint comparison (validation only)", progress),
                  key=lambda pair: pair[0]["seed"])
    table = {}
    for name, path in checkpoints.items():
        _, ckpt = load_pretrained(path)
        manifest = ckpt.get("extra", {}).get("manifest", {})
        per_size = {size: [r["valid_accuracy"] for job, r in done if job["name"] == name and job["size"] == size]
                    for size in sizes}
        table[name] = {"checkpoint": str(path), "command": manifest.get("command"), "steps": manifest.get("steps"),
                       "train_tokens": manifest.get("train_tokens"),
                       "heldout_perplexity": manifest.get("heldout_perplexity"),
                       "valid_accuracy": {size: summarize(values) for size, values in per_size.items()},
                       "mean_valid_accuracy": statistics.fmean(v for values in per_size.values() for v in values)}
    comparison = {"command": "python -m experiments.transfer " + " ".join(sys.argv[1:]), "sizes": sizes,
                  "seeds": seeds, "quick": quick, "recipe": asdict(recipe),
                  "selection": "validation accuracy only; test set not loaded", "checkpoints": table,
                  "best": max(table, key=lambda name: table[name]["mean_valid_accuracy"]),
                  "wall_time_s": round(time.time() - started, 1)}
    out.mkdir(parents=True, exist_ok=True)
    (out / "checkpoint_comparison.json").write_text(json.dumps(comparison, indent=2) + "\n")
    return comparison


def _size_key(size: str) -> float:
    return math.inf if size == "all" else int(size)


def _describe(r: dict) -> str:
    return f"{r['init']} n={r['n_train']} seed={r['seed']}: {r['test_accuracy']:.3f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m experiments.transfer", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", nargs="+", default=None,
                        help=f"labeled training sentences per run, 'all' = train + pool (default: {' '.join(DEFAULT_SIZES)})")
    parser.add_argument("--seeds", type=int, default=None, help="number of seeds, 0..N-1 (default 3; 2 with --quick)")
    parser.add_argument("--quick", action="store_true", help="reduced run for tests: small sizes, few epochs, eval subsets")
    parser.add_argument("--out", type=Path, default=RESULTS_DIR, help="directory for transfer.json and transfer.png")
    parser.add_argument("--checkpoint", type=Path, default=PRETRAINED_PATH)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker process")
    parser.add_argument("--jobs", type=int, default=0, help="worker processes (0 = cores // threads)")
    parser.add_argument("--no-progress", action="store_true")
    parser.add_argument("--tune", action="store_true",
                        help="score the candidate recipes on validation only -> recipe_search.json (default sizes 400 1600, 2 seeds)")
    parser.add_argument("--inits", nargs="+", choices=INITS, default=None,
                        help="with --tune: search these arms' recipes only, keeping the others' (default: all)")
    parser.add_argument("--replot", action="store_true",
                        help="draw transfer.png again from the transfer.json in --out, training nothing")
    parser.add_argument("--compare", nargs="+", metavar="NAME=CHECKPOINT",
                        help="fine-tune each checkpoint, score on validation only -> checkpoint_comparison.json")
    args = parser.parse_args(argv)
    sizes = args.sizes or (["64"] if args.quick else list(DEFAULT_SIZES))  # --quick: one size (make test's time)
    for size in sizes:
        if size != "all" and not (size.isdigit() and int(size) > 0):
            parser.error(f"--sizes takes positive integers or 'all', got {size!r}")
    seeds = list(range(args.seeds if args.seeds is not None else (2 if args.quick else 3)))
    if not seeds:
        parser.error("--seeds must be at least 1")
    jobs = args.jobs or max(1, (os.cpu_count() or 1) // max(1, args.threads))
    if args.replot:
        plot(json.loads((args.out / "transfer.json").read_text(encoding="utf-8")), args.out / "transfer.png")
        print(f"wrote {args.out / 'transfer.png'} from {args.out / 'transfer.json'}")
        return 0
    if args.compare:
        checkpoints = dict(item.split("=", 1) for item in args.compare if "=" in item)
        if len(checkpoints) != len(args.compare):
            parser.error("--compare takes NAME=CHECKPOINT pairs")
        comparison = compare_checkpoints({k: Path(v) for k, v in checkpoints.items()},
                                         args.sizes or ["400", "1600"], list(range(args.seeds or 3)), args.out,
                                         args.threads, jobs, progress=not args.no_progress, quick=args.quick)
        for name, row in comparison["checkpoints"].items():
            print(f"{name:12s} mean valid {100 * row['mean_valid_accuracy']:5.1f}  held-out ppl "
                  f"{row['heldout_perplexity']:.1f}  " + "  ".join(f"{size}: {100 * v['mean']:.1f}"
                                                                 for size, v in row["valid_accuracy"].items()))
        print(f"wrote {args.out / 'checkpoint_comparison.json'} in {comparison['wall_time_s']:.0f} s")
        return 0
    if args.tune:
        search = tune(args.sizes or (["64"] if args.quick else ["400", "1600"]), list(range(args.seeds or 2)),
                      args.out, args.checkpoint, args.threads, jobs, progress=not args.no_progress, quick=args.quick,
                      inits=args.inits)
        for init, rows in search["ranking"].items():
            for row in rows:
                print(f"{init:10s} {100 * row['mean_valid_accuracy']:5.1f}  {row['candidate']}")
        seconds = max(search["searches"][init]["wall_time_s"] for init in args.inits or CANDIDATES)
        print(f"wrote {args.out / 'recipe_search.json'} in {seconds:.0f} s")
        return 0
    result = run(sizes, seeds, args.out, args.checkpoint, args.threads, jobs, quick=args.quick,
                 progress=not args.no_progress)
    print(format_table(result))
    print(format_cost(result))
    print(json.dumps(result["targets"], indent=2))
    print(f"wrote {args.out / 'transfer.json'} and {args.out / 'transfer.png'} in {result['wall_time_s']:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
