"""The one place that decides how much compute a run gets.

Students get a budget that shows learning in a few CPU minutes; under nbgrader
(``NBGRADER_EXECUTION`` is set while it executes a notebook) or with ``TRANSLAB_FAST=1``
every run shrinks so that grading a whole class takes seconds per notebook.
"""
from __future__ import annotations

import os
from dataclasses import dataclass

from . import paths
from .contract import FAST_ENV, GRADING_ENV


@dataclass(frozen=True)
class Budget:
    name: str
    pretrain_steps: int        # optimizer steps of the in-notebook LM demo run
    pretrain_reviews: int      # reviews tokenized into its training stream (tokenizing is most of a short run)
    lm_eval_batches: int       # held-out batches used to report perplexity
    finetune_epochs: int       # epochs per classifier in notebook 04
    finetune_train_size: int   # labeled sentences used for fine-tuning in notebook 04
    eval_size: int             # valid/test sentences scored per evaluation in notebook 04
    reversal_steps: int        # optimizer steps of each run of the reversal task in notebook 03
    mlm_steps: int             # optimizer steps of the MLM demo in notebook 05
    bert_train_size: int       # labeled sentences for fine-tuning the pretrained BERT in notebook 06
    bert_epochs: int           # its epochs
    bert_eval_size: int        # validation sentences it is scored on after each epoch

    def estimate(self, part: str, cell: str) -> float | None:
        """Print how long this training cell took at this budget when ``make bench`` last ran the notebooks
        (``results/bench.json``, per cell), before it starts; returns the seconds, or None if never measured."""
        import json

        try:
            bench = json.loads((paths.RESULTS_DIR / "bench.json").read_text(encoding="utf-8"))
            notebook = next(v for k, v in bench["notebooks"].items() if k.startswith(f"{part}_"))
            seconds = notebook["cells"]["student" if self.name == "full" else "nbgrader"][cell]
        except (OSError, ValueError, KeyError, StopIteration, TypeError):
            print(f"{cell}: no time measured for this cell yet")
            return None
        cores = bench.get("cpu_count") or "?"
        print(f"{cell}: about {seconds:.0f} s at the {self.name} budget on a {cores}-core laptop CPU "
              "(measured by the course's maintainers; longer while other programs share the CPU)")
        return float(seconds)


FULL = Budget("full", pretrain_steps=150, pretrain_reviews=300, lm_eval_batches=20, finetune_epochs=6,
              finetune_train_size=1600, eval_size=2000, reversal_steps=300, mlm_steps=60, bert_train_size=400,
              bert_epochs=2, bert_eval_size=400)
# A token effort: no graded cell depends on a training run (each check builds its own small model), so under
# nbgrader a run only has to go through its code once (one step, one epoch, one small batch) and feed the plots.
# Grading itself leaves the runs out (grader/course/demos.py) unless a student's own code reads from them; this budget is
# for those, for TRANSLAB_FAST=1, and for c.GuardedExecute.skip_demos = False.
# Halving it (from 2 steps and batches of 32 and 16 sentences) cut the runs of 04, 05 and 06 from 1.27, 1.01 and
# 1.85 s to 0.64, 0.53 and 0.94 s (in-process, one thread, as a grading kernel runs them).
FAST = Budget("fast", pretrain_steps=1, pretrain_reviews=8, lm_eval_batches=1, finetune_epochs=1,
              finetune_train_size=16, eval_size=16, reversal_steps=1, mlm_steps=1, bert_train_size=8,
              bert_epochs=1, bert_eval_size=8)


def is_fast() -> bool:
    return bool(os.environ.get(GRADING_ENV)) or os.environ.get(FAST_ENV, "") not in ("", "0")


def get_budget() -> Budget:
    return FAST if is_fast() else FULL
