"""Checks of part 4: accuracy and transfer."""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .. import references, training, wire
from ..datasets import Batch
from . import properties, scripted
from .properties import Probe, sizes_said
from .harness import (CheckFailed, as_number, call_student, checked, defer, equal_elementwise, fail, forbid,
                      held_parameters,
                      in_hidden_check, kind_of, lab_model_module, matches_reference, report_ok, require_tensor)


def reference_classifier(case: dict):
    m = lab_model_module()
    cfg = case["config"]
    base = m.TransformerModel.from_config(m.ModelConfig.pick(cfg, dropout=0.5))  # build_classifier is part 4's
    model = m.Model(base, m.ClassificationHead(base.nhid, cfg["nclasses"]))        # answer, held back in its week
    model.load_state_dict(case["state_dict"])
    return model


def _accuracy_probes(evaluate_accuracy: Callable) -> list[Probe]:
    """The properties of an accuracy, each on scripted batches of its own (``scripted``): the scale first, since
    the later probes read their values on the scale it found."""
    found_scale = {"as": "fraction"}  # what the scale probe found: "fraction", "percentage" or "count"

    def measured(what: str, wants: tuple[str, ...], batches: list, model_mode: str = "train") -> float:
        model = scripted.ScriptedClassifier(wants)
        model.train(model_mode == "train")
        with forbid(training.evaluate_accuracy, training.predict):
            value = as_number(call_student(f"evaluate_accuracy on {what}", evaluate_accuracy, model, batches),
                              f"evaluate_accuracy on {what}")
        divide = {"fraction": 1.0, "percentage": 100.0, "count": float(sum(len(b.targets) for b in batches))}
        return value / divide[found_scale["as"]]

    def scale():
        value = measured("one batch of 4 sentences, 3 predicted right",
                         (), [scripted.labelled_batch([0, 1, 1, 0], [True, True, True, False])])
        if math.isclose(value, 0.75, abs_tol=1e-6):
            return None
        for kind, times, key in (("percentage", 100.0, "accuracy.percentage"), ("count", 4.0, "accuracy.count")):
            if math.isclose(value, 0.75 * times, abs_tol=1e-4):
                found_scale["as"] = kind
                said = f"a {kind}"
                return (f"evaluate_accuracy returns {said}: on one batch of 4 sentences with 3 predicted right it "
                        f"returns {value:g} where 0.75 is right.\n  likely:   return the fraction of sentences "
                        "predicted right, a number in [0, 1]", key)
        return None  # no scale explains it: the comparison says what was measured

    def weighted():
        value = measured("a batch of 1 sentence predicted right and a batch of 3 predicted wrong", (),
                         [scripted.labelled_batch([1], [True]), scripted.labelled_batch([0, 1, 0], [False] * 3)])
        if math.isclose(value, 0.5, abs_tol=1e-6):
            return ("evaluate_accuracy averages the batches' accuracies: with a batch of 1 sentence predicted right "
                    "and a batch of 3 predicted wrong it gives 0.5 where 1 of 4 sentences, 0.25, is right.\n"
                    "  likely:   count the sentences predicted right over all batches, then divide by the number of "
                    "sentences (batches differ in size)")
        return None

    def rounded():
        value = measured("3 batches of 3 sentences, 1 predicted right in each", (),
                         [scripted.labelled_batch([0, 1, 0], [True, False, False]) for _ in range(3)])
        exact = 1 / 3
        if math.isclose(value, exact, abs_tol=1e-6):
            return None
        if value == 0 or any(math.isclose(value, round(exact, digits), abs_tol=1e-9) for digits in range(6)):
            return (f"evaluate_accuracy rounds: with 3 batches of 3 sentences, 1 predicted right in each, it gives "
                    f"{value:g} where 1/3 is right.\n  likely:   keep whole counts and divide once at the end, "
                    "with / (not //), and do not round (nor call int() on a batch's accuracy)")
        return None

    def padded():
        batch = scripted.labelled_batch([0, 1, 1, 0], [True] * 4, lengths=[4, 2, 3, 1])
        value = measured("a padded batch", ("padding",), [batch], "eval")
        if math.isclose(value, 1.0, abs_tol=1e-6):
            return None
        return (f"evaluate_accuracy does not give the model the batch's padding mask: a scripted classifier that "
                f"predicts right only when called as model(batch.inputs, batch.padding_mask) scored {value:g}, "
                "where 1 is right.\n  likely:   call model(batch.inputs, batch.padding_mask): without it the "
                "classifier reads padding and attends to it")

    def evaluated():
        batch = scripted.labelled_batch([0, 1, 1, 0], [True] * 4)
        value = measured("a model left in training mode", ("eval",), [batch])
        if math.isclose(value, 1.0, abs_tol=1e-6):
            return None
        return (f"evaluate_accuracy runs the model in training mode: a scripted classifier that predicts right only "
                f"in eval mode, handed over in training mode, scored {value:g}, where 1 is right.\n"
                "  likely:   call model.eval() first: dropout is on in training mode")

    return [Probe("accuracy.percentage", "one batch of 4 sentences", scale),
            Probe("accuracy.batch_mean", "two batches of different sizes", weighted),
            Probe("accuracy.rounded", "batches whose accuracy is 1/3", rounded),
            Probe("accuracy.no_padding_mask", "a padded batch", padded),
            Probe("accuracy.no_eval", "a model in training mode", evaluated)]


@checked
def check_accuracy(evaluate_accuracy: Callable, split: str = "visible") -> None:
    case = references.load("accuracy")[split]
    tol = references.tolerance("accuracy")
    model = reference_classifier(case).train()
    batches = [Batch(b["inputs"], b["padding_mask"], b["targets"]) for b in case["batches"]]
    total = sum(len(b.targets) for b in batches)
    found_properties = properties.report(_accuracy_probes(evaluate_accuracy))
    call = "evaluate_accuracy(model, batches)"
    try:
        with forbid(training.evaluate_accuracy, training.predict):  # twice in training mode, before any comparison
            first = as_number(call_student(call, evaluate_accuracy, model, batches), call)
            again = as_number(call_student(f"{call}, called again", evaluate_accuracy, model.train(), batches), call)
    except CheckFailed as failed:
        if not found_properties:
            raise
        defer([(f"with the check's own classifier and batches: {failed.message}", failed.key)])
        return  # after the properties, which may explain it
    if not math.isclose(again, first, abs_tol=1e-9) and "accuracy.no_eval" not in found_properties:
        values = "" if in_hidden_check() else f" ({first:.4f}, then {again:.4f})"
        defer([(f"evaluate_accuracy gives a different answer each call on a model handed over in training "
                f"mode{values}.\n  likely:   call model.eval() first: dropout is on in training mode",
                "accuracy.no_eval")])
        return
    if found_properties or not math.isclose(again, first, abs_tol=1e-9):
        return  # the findings are the failure (``checked`` raises them)
    expected = case["expected"]
    if math.isclose(first, expected, abs_tol=tol.atol, rel_tol=tol.rtol):
        report_ok("accuracy right on the hidden batches of different lengths" if in_hidden_check() else
                  f"accuracy {first:.4f} over {total} sentences in {len(batches)} batches of different lengths")
        return
    fail("evaluate_accuracy differs from the reference, though on every scripted probe (the scale, batches of "
         "different sizes, no rounding, the padding mask, eval mode) it was right.", f"{expected:.4f}",
         f"{first:.4f}")


def _transfer_probes(lm, before: dict, clf, m) -> list[Probe]:
    """What a transferred classifier must be, each property read off what ``transfer`` returned and left behind."""
    def lm_untouched():
        changed = [k for k, v in lm.state_dict().items() if k not in before or not torch.equal(v, before[k])]
        if changed or not isinstance(lm.head, m.LanguageModelHead):
            return ("transfer changed the pretrained language model" +
                    sizes_said(f"{len(changed)} tensors changed" if changed else "its head replaced") +
                    ".\n  likely:   build a new Model around a copy of lm.base and a new head; do not assign to "
                    "lm.head")
        return None

    def base_pretrained():
        base = getattr(clf, "base", None)
        if not isinstance(base, nn.Module):
            return "the classifier has no .base module.\n  likely:   return Model(base, head)"
        base_state, lm_base = base.state_dict(), lm.base.state_dict()
        if base_state.keys() == lm_base.keys() and all(equal_elementwise(base_state[k], lm_base[k]) for k in lm_base):
            return None
        same = sum(k in base_state and equal_elementwise(base_state[k], v) for k, v in lm_base.items())
        return ("the classifier's base does not hold the pretrained weights" +
                sizes_said(f"{same} of {len(lm_base)} tensors equal to the pretrained base's") +
                ".\n  likely:   the point of transfer is to start from the pretrained base: copy lm.base, do not "
                "build a new TransformerModel")

    def independent():
        shared = {wire.kernel_pointer(p) for p in lm.parameters()} & {wire.kernel_pointer(p) for p in clf.parameters()}
        if shared:
            return ("the classifier shares its weights with the pretrained LM" +
                    sizes_said(f"{len(shared)} tensors are the same objects") +
                    ".\n  likely:   fine-tuning would change the pretrained LM too (and the next experiment "
                    "would start from a fine-tuned base); use copy.deepcopy(lm.base)")
        return None

    def fresh_head():
        head = getattr(clf, "head", None)
        if not isinstance(head, nn.Module) or isinstance(head, m.LanguageModelHead):
            return (f"the classifier keeps the language-model head (found: {kind_of(head)}).\n  likely:   the LM "
                    "head predicts the next token among ntoken; classification needs a new ClassificationHead")
        return None

    def trainable():
        held = held_parameters(clf)
        count = sum(p.numel() for p in held if p.requires_grad)
        total = sum(p.numel() for p in held)
        if count != total:
            return ("some parameters are frozen" +
                    sizes_said(f"{total - count:,} of {total:,} values have requires_grad=False") +
                    ".\n  likely:   we fine-tune the whole model: leave requires_grad on")
        return None

    return [Probe("transfer.changes_lm", "the pretrained LM after the call", lm_untouched),
            Probe("transfer.not_pretrained", "the classifier's base", base_pretrained),
            Probe("transfer.shared_weights", "the classifier's parameters", independent),
            Probe("transfer.keeps_lm_head", "the classifier's head", fresh_head),
            Probe("transfer.frozen", "the classifier's parameters", trainable)]


@checked
def check_transfer(transfer: Callable, split: str = "visible") -> None:
    m = lab_model_module()
    visible = split == "visible"
    case = references.load("transfer")[split]
    tol = references.tolerance("transfer")
    cfg, nclasses = case["config"], case["nclasses"]
    lm = m.build_language_model(m.ModelConfig.pick(cfg, dropout=0.1))
    lm.load_state_dict(case["state_dict"])
    before = {k: v.clone() for k, v in lm.state_dict().items()}
    lm = wire.share(lm)  # in the grader's checker: the kernel's copy, which the answer may change
    call = f"transfer(pretrained_lm, nclasses={nclasses})" if visible else "transfer on a hidden pretrained model"
    with forbid(m.build_classifier):
        clf = call_student(call, transfer, lm, nclasses)
    if not isinstance(clf, nn.Module):
        fail("transfer must return a model (an nn.Module).", "Model(base, ClassificationHead(...))", kind_of(clf),
             key="wrong_type", keep=True)
    found = properties.report(_transfer_probes(lm, before, clf, m))
    clf.eval()
    lm.eval()
    with torch.no_grad():
        out = call_student("classifier(src, src_key_padding_mask)", clf, case["src"], case["padding"])
    require_tensor(out, "classifier(src, src_key_padding_mask)")
    if tuple(out.shape) != (case["src"].size(0), nclasses) and "transfer.keeps_lm_head" not in found:
        fail("the classifier returns the wrong shape.", (case["src"].size(0), nclasses), tuple(out.shape),
             "the new head is ClassificationHead(nhid, nclasses), one prediction per sentence", key="wrong_shape")
    if found:
        return  # the findings are the failure (``checked`` raises them)
    with torch.no_grad():
        hidden = lm.base(case["src"], m.generate_square_subsequent_mask(case["src"].size(1)), case["padding"])
        reference_out = call_student("the classifier's head(hidden, src_key_padding_mask)", clf.head, hidden,
                                     case["padding"])
    if not matches_reference(out, reference_out, tol):
        fail("the classifier's output is not head(base(src)) with the causal and padding masks.",
             hint="return Model(base, head): its forward applies both masks")
    copied = "every weight" if in_hidden_check() else f"{sum(p.numel() for p in clf.base.parameters()):,} weights"
    report_ok(f"transfer: pretrained base copied ({copied}), fresh "
              f"{f'{nclasses}-class ' if visible else ''}head, pretrained LM untouched")
