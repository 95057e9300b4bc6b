"""The checks that the notebooks' test cells run, with feedback that teaches: one module per part.

Each ``check_*`` takes the student's function or class, runs it on small inputs and compares the result with
reference tensors computed from translab (``grader/references``, built by ``make references``; a student
release carries the visible split).  On failure it raises ``CheckFailed`` (an ``AssertionError``) whose message
says what was expected, what was found and the likely misconception; on success it prints one line starting
with ``ok``.  ``split="hidden"`` runs the same check on sizes, hyperparameters and seeds that the notebook never
shows; its messages say what is wrong without those inputs or the expected values.  The likely misconception is
diagnosed (``translab.diagnosis``) and carries a stable key for ``make report``; each part's module keeps its
mistakes (the key, what the output then looks like, the hint) beside the check that names them.

While the student's code runs, translab's own implementation of the same thing is switched off (``forbid``).
In the lab the checks judge in the student's kernel.  While nbgrader grades, they are run by the grader's
checker, outside the kernel (``translab.wire``, ``grader.verdicts``), and the kernel only runs the student's code.

    harness.py   CheckFailed, _checked, _call, forbid, the comparisons every part uses
    part1.py ... part6.py   the checks of notebooks 01 ... 06
"""
from .harness import CheckFailed, _call, _fail, capture_output, forbid, release_output
from .part1 import check_attention_demo, check_mask, check_positional_encoding
from .part2 import check_heads, check_model, check_parameter_formula, check_stated_counts, check_transformer_model
from .part3 import check_greedy, check_lm_loss, check_lm_targets
from .part4 import check_accuracy, check_transfer
from .part5 import check_masking, check_mlm_loss
from .part6 import check_bert_base, check_bert_classifier, check_bert_parameter_count, check_weight_mapping

__all__ = ["CheckFailed", "forbid", "check_mask", "check_attention_demo", "check_positional_encoding",
           "check_transformer_model", "check_heads", "check_model", "check_parameter_formula",
           "check_stated_counts", "check_lm_targets", "check_lm_loss", "check_greedy", "check_accuracy",
           "check_transfer", "check_masking", "check_mlm_loss", "check_bert_base", "check_weight_mapping",
           "check_bert_parameter_count", "check_bert_classifier"]
