"""The lab's figures: masks, positional encodings, attention, loss and accuracy curves.

Each function draws on ``ax`` if given (else a new figure) and returns the axes, so notebooks
can compose them and tests can inspect them without a display.
"""
from __future__ import annotations

import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from .results import ARMS


def _axes(ax, figsize=(4.5, 4)):
    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _numpy(values) -> np.ndarray:
    if isinstance(values, torch.Tensor):
        values = values.detach().cpu().float().numpy()
    return np.asarray(values, dtype=float)


def plot_mask(mask, ax=None, title: str = "causal mask (added to the scores)"):
    """Heatmap of an additive mask: -inf drawn dark, 0 light."""
    ax = _axes(ax)
    values = _numpy(mask)
    shown = np.where(np.isneginf(values), -1.0, np.clip(values, -1, 1))
    image = ax.imshow(shown, cmap="gray", vmin=-1, vmax=1)
    ax.set_xlabel("key position j (attended to)")
    ax.set_ylabel("query position i")
    ax.set_title(title)
    if values.shape[0] <= 12:
        for (i, j), value in np.ndenumerate(values):
            ax.text(j, i, "-inf" if np.isneginf(value) else f"{value:g}", ha="center", va="center", fontsize=7,
                    color="white" if np.isneginf(value) else "black")
    cbar = ax.figure.colorbar(image, ax=ax, ticks=[-1, 0, 1], fraction=0.046)
    cbar.ax.set_yticklabels(["-inf", "0", "1"])
    return ax


def plot_attention(weights, ax=None, title: str = "attention weights after softmax", tokens=None):
    ax = _axes(ax)
    values = _numpy(weights)
    image = ax.imshow(values, cmap="viridis", vmin=0, vmax=max(1e-9, float(values.max())))
    ax.set_xlabel("key position j")
    ax.set_ylabel("query position i")
    if tokens is not None:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90)
        ax.set_yticks(range(len(tokens)), tokens)
    ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046)
    return ax


def plot_attention_scaling(rows: list[dict], axes=None):
    """``translab.attention.scaling_demo``'s rows: the spread of the scores, then the softmax's entropy, against d."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    dims = [row["d"] for row in rows]
    for name, label in (("raw", "q.k"), ("scaled", "q.k / sqrt(d)")):
        axes[0].plot(dims, [row[f"spread_{name}"] for row in rows], "o-", label=label)
        axes[1].plot(dims, [row[f"entropy_{name}"] for row in rows], "o-", label=label)
    axes[0].set(xscale="log", yscale="log", xlabel="d", ylabel="standard deviation of the scores",
                title="the spread of the scores")
    axes[1].set(xscale="log", ylim=(0, 1.05), xlabel="d", ylabel="entropy / log(keys)",
                title="how evenly the softmax spreads its weight")
    for ax in axes:
        ax.legend()
    return axes


def plot_attention_heads(weights, tokens=None, title: str = "", heads=None):
    """One map per head: ``weights`` (heads, seq, seq), a panel for each of ``heads`` (default: the first 4)."""
    values = _numpy(weights)
    heads = list(range(min(4, values.shape[0]))) if heads is None else list(heads)
    fig, axes = plt.subplots(1, len(heads), figsize=(4.2 * len(heads), 4), squeeze=False)
    for panel, head in enumerate(heads):
        plot_attention(values[head], ax=axes[0, panel], title=f"{title} head {head}".strip(), tokens=tokens)
    fig.tight_layout()
    return axes[0]


def plot_positional_encoding(table, ax=None, title: str = "sinusoidal positional encoding"):
    """Heatmap of a (positions, d_model) table."""
    ax = _axes(ax, figsize=(7, 4))
    values = _numpy(table)
    image = ax.imshow(values, cmap="RdBu", aspect="auto", vmin=-1, vmax=1)
    ax.set_xlabel("encoding dimension")
    ax.set_ylabel("position")
    ax.set_title(title)
    ax.figure.colorbar(image, ax=ax, fraction=0.046)
    return ax


def plot_encoding_dimensions(table, dims=(0, 1, 4, 5, 10), ax=None):
    """A few columns of the table as curves over positions: fast and slow waves."""
    ax = _axes(ax, figsize=(7, 3))
    values = _numpy(table)
    for dim in dims:
        if dim < values.shape[1]:
            ax.plot(values[:, dim], label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})")
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.legend(fontsize=8, ncol=len(dims))
    return ax


def smooth(values, window: int = 10) -> np.ndarray:
    """Trailing moving average (same length; the first points average what is available)."""
    values = _numpy(values)
    if len(values) == 0 or window <= 1:
        return values
    cumulative = np.cumsum(np.insert(values, 0, 0.0))
    counts = np.minimum(np.arange(1, len(values) + 1), window)
    return (cumulative[1:] - cumulative[np.maximum(0, np.arange(1, len(values) + 1) - window)]) / counts


def plot_loss_curve(losses, ax=None, window: int = 10, title: str = "training loss", label: str = "loss"):
    ax = _axes(ax, figsize=(6, 3.5))
    steps = np.arange(1, len(losses) + 1)
    ax.plot(steps, _numpy(losses), alpha=0.3, label=f"{label} per step")
    ax.plot(steps, smooth(losses, window), label=f"{label}, mean of {window}")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_title(title)
    ax.legend()
    return ax


def plot_accuracy_curves(histories: dict, ax=None, title: str = "accuracy per epoch", key: str = "valid_accuracy",
                         second_key: str | None = "test_accuracy"):
    """``histories``: name -> history dict from ``translab.training.fine_tune``."""
    ax = _axes(ax, figsize=(6, 4))
    for index, (name, history) in enumerate(histories.items()):
        color = f"C{index}"
        ax.plot(history["epoch"], history[key], "o-", color=color, label=f"{name}, {key.split('_')[0]}")
        if second_key and history.get(second_key):
            ax.plot(history["epoch"], history[second_key], "s--", color=color, alpha=0.6,
                    label=f"{name}, {second_key.split('_')[0]}")
        if "best_epoch" in history:
            ax.axvline(history["best_epoch"], color=color, lw=0.8, ls=":")
    ax.axhline(0.5, color="gray", lw=0.8, ls="--", label="chance")
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return ax


def load_results(path: Path) -> dict | None:
    """The JSON that ``make experiment`` wrote, or None if it is not there."""
    path = Path(path)
    if not path.exists():
        return None
    return json.loads(path.read_text())


def validation_by_size(results: dict) -> list[dict]:
    """The full experiment's validation accuracies (``results/transfer.json``), per number of labeled sentences: mean
    and sd over seeds of each fine-tuned arm (our pretrained Transformer, from scratch, MiniLM when it was run) and
    of naive Bayes, with ``n_train``."""
    rows = []
    inits = [init for init in ARMS if any(run["init"] == init for run in results["runs"])]
    for row in results["learning_curve"]:
        size = row["size"]
        entry = {"size": size, "n_train": row["n_train"]}
        for init in inits:
            values = [run["valid_accuracy"] for run in results["runs"] if run["size"] == size and run["init"] == init]
            entry[init] = (float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0)
        values = [b["naive_bayes"]["valid_accuracy"] for b in results["baselines"] if b["size"] == size]
        entry["naive_bayes"] = (float(np.mean(values)), float(np.std(values, ddof=1)) if len(values) > 1 else 0.0)
        rows.append(entry)
    return rows


def plot_bert_beside_part4(history: dict, n_train: int, results: dict | None, reference_runs: list | None = None,
                           axes=None, name: str = "BERT (all-MiniLM-L6-v2), your run"):
    """Two panels of validation accuracy (%).  Left, against the number of labeled sentences: part 4's pretrained
    and from-scratch Transformers and naive Bayes (mean +- sd over seeds, from ``results``) and this run's kept
    epoch (``reference_runs``: the same recipe's other seeds, from ``results/bert_finetune.json``).  Right, against
    the training sentences seen: part 4's per-epoch curves and this run's epochs."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    left, right = axes
    styles = {"pretrained": ("C0", "o", "part 4: pretrained Transformer"),
              "scratch": ("C1", "s", "part 4: Transformer from scratch"),
              "naive_bayes": ("C2", "", "part 4: naive Bayes (bag of words)"),
              "minilm": ("C4", "D", "full experiment: this BERT, 3 seeds per size")}
    best = history["valid_accuracy"][history["best_epoch"] - 1] if history.get("best_epoch") else None
    if results is not None:
        rows = validation_by_size(results)
        x = [row["n_train"] for row in rows]
        for key, (color, marker, label) in styles.items():
            if key not in rows[0]:
                continue
            left.errorbar(x, [100 * row[key][0] for row in rows], yerr=[100 * row[key][1] for row in rows], color=color,
                          marker=marker or None, linestyle="-" if marker else "--", capsize=3, label=label)
        for init in ARMS:
            color, _, label = styles[init]
            size = results.get("epoch_curve_size")
            seen_per_epoch = next((row["n_train"] for row in rows if row["size"] == size), None)
            for i, curve in enumerate((results.get("epoch_curves") or {}).get(init, [])):
                right.plot([e * seen_per_epoch for e in curve["epoch"]], [100 * a for a in curve["valid_accuracy"]],
                           color=color, alpha=0.7, marker=".", label=f"{label}, {size} labels" if i == 0 else None)
    if reference_runs:
        for i, run in enumerate(reference_runs):
            kept = run["valid_accuracy"][run["best_epoch"] - 1]
            left.plot([n_train], [100 * kept], "x", color="gray", label=f"BERT, same recipe, {len(reference_runs)} seeds" if i == 0 else None)
    if best is not None:
        left.plot([n_train], [100 * best], "*", color="C3", markersize=14, label=name)
    right.plot(history["seen"], [100 * a for a in history["valid_accuracy"]], "*-", color="C3", markersize=10,
               label=f"{name}, {n_train} labels")
    for ax, xlabel in ((left, "labeled training sentences"), (right, "training sentences seen (epochs x labels)")):
        ax.axhline(50, color="gray", lw=0.8, ls=":", label="chance")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation accuracy (%)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    left.set_title("after fine-tuning (kept epoch)")
    right.set_title("during fine-tuning")
    return axes
