"""Answers written the ways people outside this project write them (issues 50, 82): parts 1 to 6.

Each graded answer of those parts has a module of answers (``part1.py`` ... ``part6.py``), written for this
project after reading how course homework, learners' repositories, tutorials and from-scratch BERT and GPT code
write the same thing: their styles and their mistakes, right answers included, in our own code.  Each answer says
what a fair grader concludes: right (``mistake=None``) or every misconception it holds (a diagnosis key, or a
tuple of them for an answer with several mistakes at once; a key that ``translab.diagnosis`` does not know yet is
a name the checks still owe).  Named means exactly: the failing checks' keys together are the listed ones, and no
failing check claims a key that is not listed.

``run(answer, split)`` runs it at the check level, as the notebook's test cell would: the part's imports, the answer
cell, then the check.  ``python -m grader.testing.outside`` prints the table per graded answer (answers, right and
wrong, verdicts right, mistakes named exactly) and writes it to ``results/outside_corpus.json``.
"""
from __future__ import annotations

import contextlib
import io
import re
import textwrap
from dataclasses import dataclass

from .answer import Answer

# What each notebook's first cell imports: an answer that uses anything else imports it, as students do.
PRELUDES = {
    1: """
import math
import torch
from torch import nn
from translab import checks
""",
    2: """
import math
import torch
from torch import nn
from translab import checks
from translab.model import PositionalEncoding, generate_square_subsequent_mask
""",
    3: """
import math
import torch
from torch import nn
from translab import checks
from translab.data import BOS_ID, EOS_ID, PAD_ID
""",
    4: """
import copy
import math
import torch
from torch import nn
from translab import checks
from translab.model import ClassificationHead, Model, ModelConfig, TransformerModel
""",
    5: """
import torch
from torch import nn
from translab import checks
from translab.data import MASK_ID, PAD_ID
from translab.mlm import FIRST_REGULAR_ID, SPECIAL_IDS
""",
    6: """
import math
import torch
import torch.nn.functional as F
from torch import nn
from translab import checks
from translab.bert import BertConfig
""",
}

# The graded answers: the part, and the test cells' calls (a check may have several, as part 5's masking has).
GRADED = {
    "base": (2, ["checks.check_transformer_model(TransformerModel, split=SPLIT)"]),
    "heads": (2, ["checks.check_heads(LanguageModelHead, ClassificationHead, split=SPLIT)"]),
    "mask": (1, ["checks.check_mask(generate_square_subsequent_mask, split=SPLIT)"]),
    "encoding": (1, ["checks.check_positional_encoding(PositionalEncoding, split=SPLIT)"]),
    "attention": (1, ["checks.check_attention(scaled_dot_product_attention, split=SPLIT)"]),
    "multi_head": (1, ["checks.check_multi_head_attention(multi_head_attention, split=SPLIT)"]),
    "pieces": (3, ["checks.check_pieces_to_text(pieces_to_text, split=SPLIT)"]),
    "lm_targets": (3, ["checks.check_lm_targets(make_lm_targets, split=SPLIT)"]),
    "lm_loss": (3, ["checks.check_lm_loss(lm_loss, split=SPLIT)"]),
    "greedy": (3, ["checks.check_greedy(greedy_generate_ids, split=SPLIT)"]),
    "decoding": (3, ["checks.check_decoding(next_token_probs, split=SPLIT)"]),
    "sampling": (3, ["checks.check_sampling(sample_next_token, split=SPLIT)"]),
    "accuracy": (4, ["checks.check_accuracy(evaluate_accuracy, split=SPLIT)"]),
    "transfer": (4, ["checks.check_transfer(transfer, split=SPLIT)"]),
    "mlm_masking": (5, ['checks.check_masking(mask_tokens, part="structure", split=SPLIT)',
                        'checks.check_masking(mask_tokens, part="rates", split=SPLIT)']),
    "mlm_loss": (5, ["checks.check_mlm_loss(mlm_loss, split=SPLIT)"]),
    "bert_base": (6, ["checks.check_bert_base(BertBase, split=SPLIT)"]),
    "weight_mapping": (6, ["checks.check_weight_mapping(convert_checkpoint, BertBase=BertBase, split=SPLIT)"]),
    "bert_count": (6, ["checks.check_bert_parameter_count(count_bert_parameters, split=SPLIT)"]),
    "classifier": (6, ["checks.check_bert_classifier(BertClassifier, split=SPLIT)"]),
}
SPLITS = ("visible", "hidden")
# Graded answers whose hidden calls share one test cell: there the first failure ends the cell (the visible calls
# are cells of their own).
ONE_HIDDEN_CELL = {"mlm_masking"}


@dataclass(frozen=True)
class Outcome:
    passed: bool
    keys: frozenset[str]   # the diagnosis keys of the failure (empty when it passed or named none)
    message: str


def diagnosis_keys(message: str) -> frozenset[str]:
    found = re.search(r"\[diagnosis: (.*)\]\s*$", message)
    return frozenset(key for part in found.group(1).split() for key in part.split("|")) if found else frozenset()


def run(answer: Answer, split: str, support: str = "") -> Outcome:
    """The answer's test cells on ``split``: its first failure, or a pass.  ``support``: cells the notebook
    defines before this answer that the check needs (part 6's mapping check builds the student's BertBase)."""
    from translab import checks
    part, calls = GRADED[answer.graded]
    namespace: dict = {"SPLIT": split}
    exec(compile(textwrap.dedent(PRELUDES[part]), "<imports>", "exec"), namespace)  # noqa: S102 - our corpus
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            if support:
                exec(compile(textwrap.dedent(support), "<earlier cell>", "exec"), namespace)  # noqa: S102
            exec(compile(textwrap.dedent(answer.source), "<answer>", "exec"), namespace)  # noqa: S102
    except Exception as error:  # noqa: BLE001 - an answer cell that raises on its own is recorded, not fatal
        return Outcome(False, frozenset({"cell_raised"}), f"{type(error).__name__}: {error}")
    failures = []  # each call is a test cell of its own: every one runs, as nbgrader runs them
    for call in calls:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                eval(call, namespace)  # noqa: S307 - our table
        except checks.CheckFailed as failed:
            failures.append(str(failed))
        except Exception as error:  # noqa: BLE001 - recorded, not fatal
            failures.append(f"{type(error).__name__}: {error} [diagnosis: cell_raised]")
        if failures and split == "hidden" and answer.graded in ONE_HIDDEN_CELL:
            break
    if failures:
        return Outcome(False, frozenset().union(*(diagnosis_keys(text) for text in failures)), "\n".join(failures))
    return Outcome(True, frozenset(), "")


def answers() -> list[Answer]:
    from . import part1, part2, part3, part4, part5, part6
    found = [*part1.ANSWERS, *part2.ANSWERS, *part3.ANSWERS, *part4.ANSWERS, *part5.ANSWERS, *part6.ANSWERS]
    names = [(a.graded, a.name) for a in found]
    assert len(names) == len(set(names)), "answer names repeat"
    return found


def support_for(answer: Answer) -> str:
    """The right answer to the cell before that a check builds on: the BertBase the mapping check builds its model
    from, the next_token_probs a sampler draws from (the student's earlier cell, graded on its own)."""
    if answer.graded == "weight_mapping":
        from . import part6
        return part6.RIGHT_BERT_BASE
    if answer.graded == "sampling":
        from . import part3
        return part3.RIGHT_NEXT_TOKEN_PROBS
    return ""
