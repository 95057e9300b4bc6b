"""The measured results as the README and the notebooks show them (``results/*.json`` -> text).

The numbers are never typed into prose: notebooks print them from here, and a test checks that the
README and the rubric quote what ``results/transfer.json`` holds.
"""
from __future__ import annotations

ARMS = ("pretrained", "scratch", "minilm")  # the fine-tuned models of the transfer experiment, in its run order


def format_table(result: dict) -> str:
    """The learning curve as a Markdown table (for the README and the console): test accuracy, mean ± sd."""
    rows = result["learning_curve"]
    columns = [(key, label) for key, label in (
        ("minilm", "MiniLM fine-tuned"), ("minilm_frozen", "MiniLM frozen"), ("pretrained", "ours pretrained"),
        ("scratch", "ours scratch"), ("naive_bayes", "naive Bayes"), ("logistic_regression", "log. regression"))
        if key in rows[0]]
    gaps = [(key, label) for key, label in (("minilm_gap", "MiniLM − scratch (per seed)"),
                                            ("gap", "ours pretrained − scratch (per seed)")) if key in rows[0]]
    lines = ["| labels | " + " | ".join(label for _, label in columns + gaps) + " |",
             "| ---: | " + " | ".join("---:" for _ in columns + gaps) + " |"]
    for row in rows:
        pct = lambda s: f"{100 * s['mean']:.1f} ± {100 * s['sd']:.1f}"  # noqa: E731
        gap = lambda g: f"{100 * g['mean']:+.1f} ({', '.join(f'{100 * v:+.1f}' for v in g['per_seed'])})"  # noqa: E731
        lines.append(f"| {row['n_train']} | " + " | ".join([pct(row[key]) for key, _ in columns]
                                                        + [gap(row[key]) for key, _ in gaps]) + " |")
    return "\n".join(lines)


def format_cost(result: dict) -> str:
    """What each arm cost in this run (for the README): wall time on the machine's cores and peak memory."""
    cost, jobs = result["cost"], result["jobs"]
    parts = [f"{init}: {cost[init]['wall_time_s'] / 60:.1f} min, peak {cost[init]['peak_rss_mb']:,} MB per worker"
             for init in ARMS if init in cost]
    if "minilm_frozen" in cost:
        parts.append(f"MiniLM features + probes: {cost['minilm_frozen']['wall_time_s'] / 60:.1f} min")
    return (f"Wall time with {jobs} worker processes of {result['threads']} thread: " + "; ".join(parts)
            + f"; the whole run {result['wall_time_s'] / 60:.0f} min.")


def chosen_recipe(recipe_search: dict | None, init: str, pooling: str = "last") -> tuple[str, dict]:
    """(name, recipe) that the recipe search chose on validation for ``init`` among the recipes that read the
    sentence the way ``pooling`` says ("last": the lab's ClassificationHead), from ``results/recipe_search.json``."""
    if recipe_search is None:
        raise FileNotFoundError("results/recipe_search.json is missing: it comes with the course (the fine-tuning "
                                "recipes chosen on validation); ask your instructor for it")
    for row in recipe_search["ranking"][init]:
        if row["recipe"]["pooling"] == pooling:
            return row["candidate"], row["recipe"]
    raise KeyError(f"the recipe search tried no {pooling!r}-pooling recipe for {init!r}")
