"""Checks of part 4: accuracy and transfer."""
from __future__ import annotations

import math
from typing import Callable

import torch
from torch import nn

from .. import references, training, wire
from ..datasets import Batch
from .harness import (as_number, call_student, checked, equal_elementwise, fail, forbid, held_parameters,
                      in_hidden_check, kind_of, lab_model_module, matches_reference, report_ok, require_tensor)


def reference_classifier(case: dict):
    m = lab_model_module()
    cfg = case["config"]
    base = m.TransformerModel.from_config(m.ModelConfig.pick(cfg, dropout=0.5))  # build_classifier is part 4's
    model = m.Model(base, m.ClassificationHead(base.nhid, cfg["nclasses"]))        # answer, held back in its week
    model.load_state_dict(case["state_dict"])
    return model


@checked
def check_accuracy(evaluate_accuracy: Callable, split: str = "visible") -> None:
    case = references.load("accuracy")[split]
    tol = references.tolerance("accuracy")
    model = reference_classifier(case).train()
    batches = [Batch(b["inputs"], b["padding_mask"], b["targets"]) for b in case["batches"]]
    total = sum(len(b.targets) for b in batches)
    with forbid(training.evaluate_accuracy, training.predict):
        found = call_student("evaluate_accuracy(model, batches)", evaluate_accuracy, model, batches)
    value = as_number(found, "evaluate_accuracy(model, batches)")
    expected = case["expected"]
    if math.isclose(value, expected, abs_tol=tol.atol, rel_tol=tol.rtol):
        report_ok("accuracy right on the hidden batches of different lengths" if in_hidden_check() else
                  f"accuracy {value:.4f} over {total} sentences in {len(batches)} batches of different lengths")
        return
    if math.isclose(value, expected * total, abs_tol=1e-4):
        fail("evaluate_accuracy returns a count.", f"{expected:.4f}", value, "divide by the number of sentences",
             key="accuracy.count")
    if math.isclose(value, expected * 100, abs_tol=1e-4):
        fail("evaluate_accuracy returns a percentage.", f"{expected:.4f}", value, "return a fraction in [0, 1]",
             key="accuracy.percentage")
    if math.isclose(value, case["no_padding_mask"], abs_tol=tol.atol, rel_tol=tol.rtol):
        fail("evaluate_accuracy ignores the padding mask.", f"{expected:.4f}", f"{value:.4f}",
             "call model(batch.inputs, batch.padding_mask): without it the classifier reads padding "
             "and attends to it", key="accuracy.no_padding_mask")
    with forbid(training.evaluate_accuracy, training.predict):
        again = call_student("evaluate_accuracy (second call)", evaluate_accuracy, model.train(), batches)
    again = as_number(again, "evaluate_accuracy (second call)")
    if not math.isclose(again, value, abs_tol=1e-9):
        fail("evaluate_accuracy gives a different answer each call.", f"{expected:.4f}", f"{value:.4f} then {again:.4f}",
             "call model.eval() (dropout off) and use torch.no_grad()", key="accuracy.no_eval")
    fail("evaluate_accuracy differs from the reference.", f"{expected:.4f}", f"{value:.4f}",
         "accuracy = mean over ALL sentences of (argmax of the logits == label); weight batches by their size")


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
    changed = [k for k, v in lm.state_dict().items() if k not in before or not torch.equal(v, before[k])]
    if changed or not isinstance(lm.head, m.LanguageModelHead):
        fail("transfer changed the pretrained language model.", "the pretrained LM left intact",
             f"changes in {changed[:3] or ['lm.head']}",
             "build a new Model around a copy of lm.base and a new head; do not assign to lm.head",
             key="transfer.changes_lm", keep=True)
    clf.eval()
    lm.eval()
    with torch.no_grad():
        out = call_student("classifier(src, src_key_padding_mask)", clf, case["src"], case["padding"])
    require_tensor(out, "classifier(src, src_key_padding_mask)")
    if tuple(out.shape) != (case["src"].size(0), nclasses):
        fail("the classifier returns the wrong shape.", (case["src"].size(0), nclasses), tuple(out.shape),
             "the new head is ClassificationHead(nhid, nclasses), one prediction per sentence", key="wrong_shape")
    base = getattr(clf, "base", None)
    if not isinstance(base, nn.Module):
        fail("the classifier has no .base.", hint="return Model(base, head)", key="transfer.not_pretrained")
    base_state = base.state_dict()
    lm_base = lm.base.state_dict()
    if base_state.keys() != lm_base.keys() or not all(equal_elementwise(base_state[k], lm_base[k]) for k in lm_base):
        fail("the classifier's base does not hold the pretrained weights.", "the pretrained base's weights",
             "other weights", "the point of transfer is to start from the pretrained base: copy lm.base, "
             "do not build a new TransformerModel", key="transfer.not_pretrained", keep=True)
    shared = {wire.kernel_pointer(p) for p in lm.parameters()} & {wire.kernel_pointer(p) for p in clf.parameters()}
    if shared:
        fail("the classifier shares its weights with the pretrained LM.", "an independent copy of the base",
             f"{len(shared)} shared tensors", "fine-tuning would change the pretrained LM too (and the next "
             "experiment would start from a fine-tuned base); use copy.deepcopy(lm.base)",
             key="transfer.shared_weights", keep=True)
    head = getattr(clf, "head", None)
    if not isinstance(head, nn.Module) or isinstance(head, m.LanguageModelHead):
        fail("the classifier keeps the language-model head.", "a fresh ClassificationHead",
             kind_of(head), "the LM head predicts the next token among ntoken; classification needs a new head",
             key="transfer.keeps_lm_head", keep=True)
    with torch.no_grad():
        hidden = lm.base(case["src"], m.generate_square_subsequent_mask(case["src"].size(1)), case["padding"])
        reference_out = call_student("the classifier's head(hidden, src_key_padding_mask)", head, hidden, case["padding"])
    if not matches_reference(out, reference_out, tol):
        fail("the classifier's output is not head(base(src)) with the causal and padding masks.",
             hint="return Model(base, head): its forward applies both masks")
    held = held_parameters(clf)
    trainable = sum(p.numel() for p in held if p.requires_grad)
    if trainable != sum(p.numel() for p in held):
        fail("some parameters are frozen.", "every parameter trainable (we fine-tune the whole model)",
             f"{trainable} trainable", key="transfer.frozen")
    report_ok(f"transfer: pretrained base copied ({'every weight' if in_hidden_check() else f'{sum(p.numel() for p in base.parameters()):,} weights'}), fresh "
              f"{f'{nclasses}-class ' if visible else ''}head, pretrained LM untouched")
