"""Issue 82: one probe per property (``translab.checks.properties``) and the scripted models the probes call."""
from __future__ import annotations

import pytest
import torch

from translab.checks import CheckFailed
from translab.checks.harness import checked, fail
from translab.checks.properties import Probe, measure_all, sizes_said
from translab.checks.scripted import ScriptedClassifier, ScriptedLM, labelled_batch, scripted_chain


def _failing(message: str, key: str = "raised"):
    def measure():
        raise CheckFailed(message, key)
    return measure


def test_every_failing_property_is_found_once_in_the_given_order():
    probes = [Probe("a.first", "one input", lambda: "first is broken"),
              Probe("a.fine", "another input", lambda: None),
              Probe("a.second", "a third input", lambda: ("second is broken", "a.other_key")),
              Probe("a.first", "a fourth input", lambda: "first again, on another input")]
    assert measure_all(probes) == [("first is broken", "a.first"), ("second is broken", "a.other_key")]


def test_a_probe_that_raises_is_that_probes_finding_phrased_from_its_input_and_the_others_still_run():
    probes = [Probe("a.one", "a mask=None call", _failing("f raised TypeError")),
              Probe("a.two", "four leading axes", lambda: "the axes are wrong"),
              Probe("a.three", "a padded batch", _failing("f raised TypeError"))]
    found = measure_all(probes)
    assert ("the axes are wrong", "a.two") in found
    raised = [message for message, key in found if key == "raised"]
    assert raised == ["with a mask=None call and with a padded batch: f raised TypeError"]  # said once, both inputs


def test_measured_sizes_are_said_in_a_visible_check_only():
    seen = {}

    @checked
    def check(split: str = "visible"):
        seen[split] = sizes_said("3 of 4 tensors")
        fail("stop", key="x")

    for split in ("visible", "hidden"):
        with pytest.raises(CheckFailed):
            check(split=split)
    assert seen == {"visible": " (measured: 3 of 4 tensors)", "hidden": ""}


def test_the_scripted_classifier_is_right_only_where_the_call_is_right():
    batch = labelled_batch([0, 1, 1, 0], [True, True, False, True], lengths=[3, 1, 2, 3])
    model = ScriptedClassifier(("padding", "eval")).eval()
    predicted = model(batch.inputs, batch.padding_mask).argmax(-1)
    assert predicted.tolist() == [0, 1, 0, 0]  # right where predicted_right says
    assert (model(batch.inputs).argmax(-1) == batch.targets).sum() == 1  # no mask: every prediction flipped
    assert (model.train()(batch.inputs, batch.padding_mask).argmax(-1) == batch.targets).sum() == 1  # training mode


def test_the_scripted_lm_predicts_the_next_id_in_eval_mode_and_another_in_training_mode():
    ids = torch.tensor([[5, 9]])
    assert ScriptedLM().eval()(ids)[0].argmax(-1).tolist() == [6, 10]
    assert ScriptedLM().train()(ids)[0].argmax(-1).tolist() == [7, 11]
    close = torch.softmax(ScriptedLM(close_second=True).eval()(ids)[0, -1], -1)
    assert 0.45 < float(close[12]) < 0.5 and int(close.argmax()) == 10
    assert scripted_chain([5], 4) == [6, 7, 8, 9] and scripted_chain([5], 4, eos_id=8) == [6, 7]


@pytest.mark.parametrize("check", ["check_accuracy", "check_greedy", "check_bert_parameter_count"])
def test_an_answer_not_written_yet_is_told_so_once_whatever_the_probes(check):
    from translab import checks

    def blank(*args, **kwargs):
        raise NotImplementedError()

    with pytest.raises(CheckFailed) as caught:
        getattr(checks, check)(blank)
    message = str(caught.value)
    assert message.count("is not written yet") == 1 and "also:" not in message, message
    assert message.rstrip().endswith("[diagnosis: not_written]")
