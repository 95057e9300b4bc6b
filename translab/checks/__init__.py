"""The checks that the notebooks' test cells run, with feedback that teaches: one module per part.

Each ``check_*`` takes the student's function or class, runs it on small inputs and compares the result with
reference tensors computed from translab (``grader/references``, built by ``make references``; a student
release carries the visible split).  On failure it raises ``CheckFailed`` (an ``AssertionError``) whose message
says what was expected, what was found and the likely misconception; on success it prints one line starting
with "ok".  ``split="hidden"`` runs the same check on sizes, hyperparameters and seeds that the notebook never
shows; its messages say what is wrong without those inputs or the expected values.  The likely misconception is
diagnosed (``translab.diagnosis``) and carries a stable key for ``make report``; each part's module keeps its
mistakes (the key, what the output then looks like, the hint) beside the check that names them.

While the student's code runs, translab's own implementation of the same thing is switched off (``forbid``).
In the lab the checks judge in the student's kernel.  While nbgrader grades, they are run by the grader's
checker, outside the kernel (``translab.wire``, ``grader.grading.verdicts``), and the kernel only runs the student's code.

    harness.py   CheckFailed, checked, call_student, forbid, the comparisons every part uses
    part1.py ... part6.py   the checks of notebooks 01 ... 06 (part1_encoding.py: part 1's positional encoding;
                            part6_mapping.py: part 6's weight mapping)
"""
from ..contract import GRADING_ENV
from .harness import CheckFailed, call_student, capture_output, fail, forbid, release_output
from .part1 import check_attention, check_attention_demo, check_mask, check_multi_head_attention
from .part1_encoding import check_positional_encoding
from .part2 import check_heads, check_model, check_parameter_formula, check_stated_counts, check_transformer_model
from .part3 import (check_decoding, check_greedy, check_lm_loss, check_lm_targets, check_pieces_to_text,
                    check_sampling)
from .part4 import check_accuracy, check_transfer
from .part5 import check_masking, check_mlm_loss
from .part6 import check_bert_base, check_bert_classifier, check_bert_parameter_count
from .part6_mapping import check_weight_mapping

__all__ = ["CheckFailed", "forbid", "check_mask", "check_attention_demo", "check_positional_encoding",
           "check_attention", "check_multi_head_attention",
           "check_transformer_model", "check_heads", "check_model", "check_parameter_formula",
           "check_stated_counts", "check_pieces_to_text", "check_lm_targets", "check_lm_loss", "check_greedy", "check_decoding",
           "check_sampling", "check_accuracy",
           "check_transfer", "check_masking", "check_mlm_loss", "check_bert_base", "check_weight_mapping",
           "check_bert_parameter_count", "check_bert_classifier"]


# The visible checks of each part, as its test cells call them (tests/test_progress.py keeps the two in step).
VISIBLE = {
    1: ["checks.check_mask(generate_square_subsequent_mask)", "checks.check_positional_encoding(PositionalEncoding)",
        "checks.check_attention(scaled_dot_product_attention)", "checks.check_multi_head_attention(multi_head_attention)"],
    2: ["checks.check_transformer_model(TransformerModel)", "checks.check_heads(LanguageModelHead, ClassificationHead)",
        "checks.check_model(Model)", "checks.check_parameter_formula(count_parameters)",
        "checks.check_stated_counts(n_params_lm, n_params_classifier)"],
    3: ["checks.check_pieces_to_text(pieces_to_text)", "checks.check_lm_targets(make_lm_targets)", "checks.check_lm_loss(lm_loss)",
        "checks.check_greedy(greedy_generate_ids)", "checks.check_decoding(next_token_probs)",
        "checks.check_sampling(sample_next_token)"],
    4: ["checks.check_accuracy(evaluate_accuracy)", "checks.check_transfer(transfer)"],
    5: ['checks.check_masking(mask_tokens, part="structure")', 'checks.check_masking(mask_tokens, part="rates")',
        "checks.check_mlm_loss(mlm_loss)"],
    6: ["checks.check_bert_base(BertBase)", "checks.check_weight_mapping(convert_checkpoint, BertBase=BertBase)",
        "checks.check_bert_parameter_count(count_bert_parameters)", "checks.check_bert_classifier(BertClassifier)"],
}


def progress(part: int, namespace: dict) -> list[tuple[str, str | None]]:
    """Run part ``part``'s visible checks on the answers in ``namespace`` (a notebook's ``globals()``) and say how
    many pass, with the first line of each failure; returns (call, failure or None).  Not run under nbgrader:
    grading runs the test cells themselves."""
    import contextlib
    import io
    import os
    import sys
    if os.environ.get(GRADING_ENV):
        print("your progress: not measured while nbgrader runs the notebook (the test cells are graded instead)")
        return []
    results = []
    for call in VISIBLE[part]:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                eval(call, {**namespace, "checks": sys.modules[__name__]})  # noqa: S307 - our own table
            results.append((call, None))
        except NameError as error:
            results.append((call, f"{error.name} is not defined yet: run the cell that defines it"))
        except CheckFailed as failed:
            results.append((call, (failed.message.splitlines() or [""])[0]))
        except Exception as error:  # noqa: BLE001 - the summary must reach the end
            results.append((call, f"{type(error).__name__}: {str(error).splitlines()[0][:200] if str(error) else ''}"))
    passed = sum(why is None for _, why in results)
    print(f"your progress in part {part}: {passed} of {len(results)} visible checks pass")
    for call, why in results:
        print(f"  {'✓' if why is None else '✗'} {call.removeprefix('checks.')}" + (f"\n      {why}" if why else ""))
    print("When you submit, your instructor also runs hidden checks: the same checks on inputs you have not seen.")
    return results
