"""The lab's figures: masks, positional encodings, attention, loss and accuracy curves.

Each function draws on ``ax`` if given (else a new figure) and returns the axes, so notebooks
can compose them and tests can inspect them without a display.  Each also writes what the figure shows in one line,
read from the same data: it prints it (a reader who cannot see the plot reads it there), keeps it on the axes
(``summary``), and in a notebook the figure's image carries it as its text alternative (``alt``), in JupyterLab as on
the feedback page (``figure_output``).  Series differ by marker and line style as well as colour, in the Okabe-Ito
palette, so no one needs to tell colours apart; a model has the same look in every figure (``MODEL_STYLES``).
"""
from __future__ import annotations

import base64
import builtins
import html
import io
import json
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import torch

from .results import ARMS

# Okabe and Ito's colour-blind-safe palette; the first five have a contrast of 3:1 or more on white (WCAG 1.4.11)
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#000000", "#E69F00", "#56B4E9")
MARKERS = ("o", "s", "^", "D", "v", "P", "X")
LINESTYLES = ("-", "--", "-.", ":")
SUMMARY = "translab_summary"  # the attribute of an Axes that holds what it shows
# The transfer experiment's models, one look each in every figure that shows them (results/transfer.png, part 6's):
# each has a marker of its own, the two MiniLMs share a colour, the bag-of-words baselines are dashed
MODEL_STYLES = {
    "pretrained": {"color": PALETTE[0], "marker": "o", "linestyle": "-"},
    "scratch": {"color": PALETTE[1], "marker": "s", "linestyle": "-"},
    "minilm": {"color": PALETTE[3], "marker": "D", "linestyle": "-"},
    "minilm_frozen": {"color": PALETTE[3], "marker": "P", "linestyle": ":"},
    "naive_bayes": {"color": PALETTE[2], "marker": "^", "linestyle": "--"},
    "logistic_regression": {"color": PALETTE[4], "marker": "v", "linestyle": "-."},
}


def series_style(index: int) -> dict:
    """The colour, marker and line style of a figure's ``index``-th series: any two differ in more than colour."""
    return {"color": PALETTE[index % len(PALETTE)], "marker": MARKERS[index % len(MARKERS)],
            "linestyle": LINESTYLES[index % len(LINESTYLES)]}


def _says(ax, text: str):
    """Keep ``text`` as what ``ax`` shows, and print it, under the figure's cell, for those who cannot see it."""
    setattr(ax, SUMMARY, text)
    print(text)
    _give_figures_their_text()  # now: the inline backend sets its own PNG formatter when it draws the first figure
    return ax


def summary(figure_or_axes) -> str:
    """What a figure (or one of its axes, or an array of them) shows, in words: its axes' lines, in order."""
    if hasattr(figure_or_axes, "get_axes"):
        axes = figure_or_axes.get_axes()
    else:
        axes = list(np.ravel(np.asarray(figure_or_axes, dtype=object)))
    return " ".join(getattr(ax, SUMMARY) for ax in axes if getattr(ax, SUMMARY, None))


def figure_output(figure) -> tuple[dict, dict]:
    """(data, metadata) of a figure's output in a notebook: its PNG as the inline backend draws it, and when the
    figure says what it shows, that text as the PNG's ``alt`` and the same PNG as an HTML ``<img alt>``.  JupyterLab
    (4.6) draws an image/png output as an ``<img>`` without alt, whatever the output's metadata holds, but shows
    text/html first, as nbconvert does, and keeps an ``<img>``'s ``data:`` source and alt when it sanitizes; so does
    the feedback page's sanitizer."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", bbox_inches="tight", facecolor=figure.get_facecolor())
    return _png_output(buffer.getvalue(), summary(figure))


def _png_output(png_bytes: bytes, text: str) -> tuple[dict, dict]:
    png = base64.b64encode(png_bytes).decode("ascii")
    if not text:
        return {"image/png": png}, {}
    return ({"image/png": png, "text/html": f'<img src="data:image/png;base64,{png}" alt="{html.escape(text)}">'},
            {"image/png": {"alt": text}})


def _notebook_shell():
    """The running IPython shell (IPython puts ``get_ipython`` in the builtins), None outside one: translab does not
    import IPython, which its wheel does not require."""
    return getattr(builtins, "get_ipython", lambda: None)()


def show_png(path: Path, alt: str) -> None:
    """Show a PNG file in the notebook with ``alt`` as its text alternative (IPython's ``Image`` has none in
    JupyterLab), the same output as a figure drawn live."""
    shell = _notebook_shell()
    if shell is None:  # not in a notebook: the words are what there is to show
        print(alt)
        return
    data, metadata = _png_output(Path(path).read_bytes(), alt)
    shell.display_pub.publish(data=data, metadata=metadata)


def transfer_png_alt(results: dict) -> str:
    """What results/transfer.png shows, in words read from the results it was drawn from."""
    rows = results["learning_curve"]
    sizes = ", ".join(str(row["n_train"]) for row in rows)
    return (f"Two plots. Left: test accuracy (%) of each model of the table above against the number of labels "
            f"({sizes}), mean and standard deviation over {len(results['seeds'])} seeds, the table's numbers. "
            f"Right: validation accuracy per epoch of our Transformer, pretrained and from scratch, one line a seed.")


def _give_figures_their_text() -> None:
    """In a notebook kernel, a figure's output is ``figure_output``'s: its own PNG formatter, the inline backend's,
    would draw the PNG a second time."""
    shell = _notebook_shell()
    display_formatter = getattr(shell, "display_formatter", None)
    if display_formatter is not None:
        from matplotlib.figure import Figure
        display_formatter.formatters["image/png"].pop(Figure, None)
        display_formatter.mimebundle_formatter.for_type(Figure, figure_output)


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
    size = values.shape[0]
    causal = np.array_equal(np.isneginf(values), np.triu(np.ones_like(values, dtype=bool), k=1))
    shape = ("0 on and below the diagonal, -inf above it: no query sees a later key" if causal else
             f"{int(np.isneginf(values).sum())} of {values.size} entries -inf")
    return _says(ax, f"{title}: {size} x {values.shape[1]}, {shape}.")


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
    labels = tokens if tokens is not None else range(values.shape[1])
    strongest = [str(list(labels)[j]) for j in values.argmax(axis=1)[:12]]
    later = float(np.triu(values, k=1).sum()) if values.shape[0] == values.shape[1] else None
    ahead = "" if later is None else (" no weight on later keys;" if later == 0 else f" weight on later keys {later:.2f};")
    return _says(ax, f"{title}: {values.shape[0]} queries x {values.shape[1]} keys;{ahead} each query's largest "
                     f"weight is on key {', '.join(strongest)}{' ...' if values.shape[0] > 12 else ''}.")


def plot_attention_scaling(rows: list[dict], axes=None):
    """``translab.attention.scaling_demo``'s rows: the spread of the scores, then the softmax's entropy, against d."""
    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    dims = [row["d"] for row in rows]
    for index, (name, label) in enumerate((("raw", "q.k"), ("scaled", "q.k / sqrt(d)"))):
        axes[0].plot(dims, [row[f"spread_{name}"] for row in rows], label=label, **series_style(index))
        axes[1].plot(dims, [row[f"entropy_{name}"] for row in rows], label=label, **series_style(index))
    axes[0].set(xscale="log", yscale="log", xlabel="d", ylabel="standard deviation of the scores",
                title="the spread of the scores")
    axes[1].set(xscale="log", ylim=(0, 1.05), xlabel="d", ylabel="entropy / log(keys)",
                title="how evenly the softmax spreads its weight")
    for ax in axes:
        ax.legend()
    last = rows[-1]
    _says(axes[0], f"At d = {last['d']}, the scores' standard deviation is {last['spread_raw']:.2f} as q.k and "
                   f"{last['spread_scaled']:.2f} divided by sqrt(d) (at d = {rows[0]['d']}: {rows[0]['spread_raw']:.2f} "
                   f"and {rows[0]['spread_scaled']:.2f}).")
    _says(axes[1], f"The softmax's entropy (1 = even) at d = {last['d']}: {last['entropy_raw']:.2f} as q.k, "
                   f"{last['entropy_scaled']:.2f} scaled.")
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
    changes = np.count_nonzero(np.diff(np.sign(values), axis=0), axis=0)
    return _says(ax, f"{title}: {values.shape[0]} positions x {values.shape[1]} dimensions, values from "
                     f"{values.min():.2f} to {values.max():.2f}; dimension 0 changes sign {changes[0]} times over the "
                     f"positions, the last dimension {changes[-1]} times: fast waves first, slow ones last.")


def plot_encoding_dimensions(table, dims=(0, 1, 4, 5, 10), ax=None):
    """A few columns of the table as curves over positions: fast and slow waves."""
    ax = _axes(ax, figsize=(7, 3))
    values = _numpy(table)
    shown = [dim for dim in dims if dim < values.shape[1]]
    for index, dim in enumerate(shown):
        ax.plot(values[:, dim], label=f"dim {dim} ({'sin' if dim % 2 == 0 else 'cos'})", markevery=max(1, len(values) // 12),
                **series_style(index))
    ax.set_xlabel("position")
    ax.set_ylabel("value")
    ax.legend(fontsize=8, ncol=len(dims))
    changes = np.count_nonzero(np.diff(np.sign(values[:, shown]), axis=0), axis=0)
    return _says(ax, f"Dimensions over {values.shape[0]} positions, sign changes: " + ", ".join(
        f"dim {dim} {count}" for dim, count in zip(shown, changes)) + ".")


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
    values, smoothed = _numpy(losses), smooth(losses, window)
    ax.plot(steps, values, alpha=0.35, label=f"{label} per step", **{**series_style(0), "marker": None, "linestyle": ":"})
    ax.plot(steps, smoothed, label=f"{label}, mean of {window}", markevery=max(1, len(steps) // 10), **series_style(1))
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy")
    ax.set_title(title)
    ax.legend()
    if len(values) == 0:
        return _says(ax, f"{title}: no steps.")
    return _says(ax, f"{title}: {label} {values[0]:.2f} at step 1 and {values[-1]:.2f} at step {len(values)}; its mean "
                     f"of {window} went from {smoothed[0]:.2f} to {smoothed[-1]:.2f} (lowest {smoothed.min():.2f}).")


def plot_epoch_losses(histories: dict, ax=None, key: str = "train_loss", title: str = "training loss per epoch"):
    """``histories``: name -> history dict from ``translab.training.fine_tune``: each arm's mean loss per epoch."""
    ax = _axes(ax, figsize=(6, 4))
    said = []
    for index, (name, history) in enumerate(histories.items()):
        ax.plot(history["epoch"], history[key], label=name, **series_style(index))
        values = _numpy(history[key])
        lowest = int(np.argmin(values))
        said.append(f"{name}: {values[0]:.3f} after epoch {history['epoch'][0]}, {values[-1]:.3f} after epoch "
                    f"{history['epoch'][-1]} (lowest {values[lowest]:.3f}, epoch {history['epoch'][lowest]})")
    ax.set(xlabel="epoch", ylabel="mean training loss", title=title)
    ax.legend(fontsize=8)
    return _says(ax, f"{title}: " + "; ".join(said) + ".")


def plot_accuracy_curves(histories: dict, ax=None, title: str = "accuracy per epoch", key: str = "valid_accuracy",
                         second_key: str | None = "test_accuracy"):
    """``histories``: name -> history dict from ``translab.training.fine_tune``."""
    ax = _axes(ax, figsize=(6, 4))
    said = []
    for index, (name, history) in enumerate(histories.items()):
        style = series_style(index)
        ax.plot(history["epoch"], history[key], label=f"{name}, {key.split('_')[0]}", **style)
        if second_key and history.get(second_key):
            ax.plot(history["epoch"], history[second_key], alpha=0.6, label=f"{name}, {second_key.split('_')[0]}",
                    **{**style, "marker": MARKERS[(index + 3) % len(MARKERS)], "linestyle": ":"})
        if "best_epoch" in history:
            ax.axvline(history["best_epoch"], color=style["color"], lw=0.8, ls=":")
        best = int(np.argmax(history[key]))
        said.append(f"{name}: {key.split('_')[0]} {history[key][0]:.1%} after epoch {history['epoch'][0]}, highest "
                    f"{history[key][best]:.1%} after epoch {history['epoch'][best]}"
                    + (f", kept epoch {history['best_epoch']}" if "best_epoch" in history else ""))
    ax.axhline(0.5, color="#595959", lw=0.8, ls="--", label="chance")
    ax.set_xlabel("epoch")
    ax.set_ylabel("accuracy")
    ax.set_title(title)
    ax.legend(fontsize=8)
    return _says(ax, f"{title}: " + "; ".join(said) + " (chance: 50.0%).")


def legend_below(ax, fontsize: float = 7, **options):
    """A legend under the axes' tick labels and x label, where it covers no data point: the gap is measured in points,
    which a later ``tight_layout`` leaves as it is (a fraction of the axes' height would not)."""
    axis = ax.xaxis.get_tightbbox(ax.figure.canvas.get_renderer())
    gap = (ax.get_window_extent().y0 - axis.y0) * 72 / ax.figure.dpi
    return ax.legend(loc="upper center", bbox_to_anchor=(0.5, 0), borderaxespad=gap / fontsize + 0.5,
                     fontsize=fontsize, **options)


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
        _, axes = plt.subplots(1, 2, figsize=(11, 5.2))
    left, right = axes
    labels = {"pretrained": "part 4: pretrained Transformer", "scratch": "part 4: Transformer from scratch",
              "naive_bayes": "part 4: naive Bayes (bag of words)",
              "minilm": "full experiment: this BERT, 3 seeds per size"}
    best = history["valid_accuracy"][history["best_epoch"] - 1] if history.get("best_epoch") else None
    if results is not None:
        rows = validation_by_size(results)
        x = [row["n_train"] for row in rows]
        for key, label in labels.items():
            if key not in rows[0]:
                continue
            left.errorbar(x, [100 * row[key][0] for row in rows], yerr=[100 * row[key][1] for row in rows], capsize=3,
                          label=label, **MODEL_STYLES[key])
        for init in ARMS:
            size = results.get("epoch_curve_size")
            seen_per_epoch = next((row["n_train"] for row in rows if row["size"] == size), None)
            for i, curve in enumerate((results.get("epoch_curves") or {}).get(init, [])):
                right.plot([e * seen_per_epoch for e in curve["epoch"]], [100 * a for a in curve["valid_accuracy"]],
                           alpha=0.7, markersize=4, label=f"{labels[init]}, {size} labels" if i == 0 else None,
                           **MODEL_STYLES[init])
    if reference_runs:
        for i, run in enumerate(reference_runs):
            kept = run["valid_accuracy"][run["best_epoch"] - 1]
            left.plot([n_train], [100 * kept], "x", color="#595959", label=f"BERT, same recipe, {len(reference_runs)} seeds" if i == 0 else None)
    if best is not None:
        left.plot([n_train], [100 * best], "*", color=PALETTE[4], markersize=14, label=name)
    right.plot(history["seen"], [100 * a for a in history["valid_accuracy"]], "*-", color=PALETTE[4], markersize=10,
               label=f"{name}, {n_train} labels")
    for ax, xlabel in ((left, "labeled training sentences"), (right, "training sentences seen (epochs x labels)")):
        ax.axhline(50, color="#595959", lw=0.8, ls=":", label="chance")
        ax.set_xscale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("validation accuracy (%)")
        ax.grid(alpha=0.3)
        legend_below(ax, ncol=2)
    left.set_title("after fine-tuning (kept epoch)")
    right.set_title("during fine-tuning")
    mine = (f"{name}: {best:.1%} validation accuracy with {n_train} labels (kept epoch {history['best_epoch']})"
            if best is not None else f"{name}: no kept epoch")
    if results is not None:
        row = min(validation_by_size(results), key=lambda r: abs(r["n_train"] - n_train))
        mine += f"; part 4 with {row['n_train']} labels: " + ", ".join(
            f"{labels[key].split(': ')[1]} {row[key][0]:.1%}" for key in labels if key in row)
    _says(left, mine + ".")
    _says(right, f"During fine-tuning, your run's validation accuracy by epoch: "
                 + ", ".join(f"{a:.1%}" for a in history["valid_accuracy"]) + ".")
    return axes
