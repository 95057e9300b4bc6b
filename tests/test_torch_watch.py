"""PyTorch's builtins seen where PyTorch dispatches them (issue 81): an answer that reaches scaled dot-product
attention by any name is refused, one that switches the watch off is flagged, and what a call was handed inside
``*args`` or as a module's parameters is compared after it."""
from __future__ import annotations

import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from translab import checks
from translab.checks import torch_watch

from test_attention import named
from test_diagnosis import failure


WEIGHTS = """
def weights_of(q, k, mask):
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
    return torch.softmax(scores if mask is None else scores + mask, -1)
"""

# Each answer's output line, as a student writing against the watch would write it; the weights are right in each.
BUILTIN_BY_ANOTHER_NAME = {  # how an answer reaches PyTorch's attention: each refused
    "functional": "out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
    "C name": "out = torch._C._nn.scaled_dot_product_attention(q, k, v, attn_mask=mask)",
    "aten operator": "out = torch.ops.aten._scaled_dot_product_attention_math(q, k, v, mask)[0]",
    "torch function off": """
with torch._C.DisableTorchFunction():
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)""",
    "mode popped and put back": """
modes = [torch._C._pop_torch_function_stack() for _ in range(torch._C._len_torch_function_stack())]
out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
for mode in reversed(modes):
    torch._C._push_on_torch_function_stack(mode)""",
    "refusal caught": """
try:
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
except AssertionError:  # the refusal: caught, and done by hand; the attempt was seen all the same
    out = weights_of(q, k, mask) @ v""",
}

_PLAIN_SDPA = """
with torch._C.DisableTorchFunction():
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)"""

WATCH_SWITCHED_OFF = {  # each flagged: the observation cannot be trusted, and says so
    "profiler stopped": "torch._C._autograd._disable_profiler_legacy()" + _PLAIN_SDPA,
    "profiler restarted": "torch._C._autograd._disable_profiler_legacy()" + _PLAIN_SDPA + """
from torch._C._profiler import ProfilerConfig, ProfilerState, _ExperimentalConfig
torch._C._autograd._enable_profiler_legacy(
    ProfilerConfig(ProfilerState.CPU, False, False, False, False, False, _ExperimentalConfig()))""",
    "RecordFunction off": "torch._C._autograd._enable_record_function(False)" + _PLAIN_SDPA,
    "mode left popped": "torch._C._pop_torch_function_stack()\nout = weights_of(q, k, mask) @ v",
}

# What a test puts back after an answer that left PyTorch's observers off: as a fresh process has them.
OBSERVERS_BACK_ON = """
torch._C._autograd._enable_record_function(True)
if torch.autograd._profiler_enabled():
    torch._C._autograd._disable_profiler_legacy()
while torch._C._len_torch_function_stack():
    torch._C._pop_torch_function_stack()
"""


def _run(source: str) -> dict:
    namespace = {"torch": torch, "F": F, "math": math}
    exec(compile(source, "<answer>", "exec"), namespace)
    return namespace


def _answer(output: str):
    """An attention answer whose output is computed by ``output`` (a cell's lines), its weights by hand."""
    body = "\n".join("    " + line for line in output.strip("\n").splitlines())
    return _run(WEIGHTS + "\ndef scaled_dot_product_attention(q, k, v, mask=None):\n" + body +
                "\n    return out, weights_of(q, k, mask)\n")["scaled_dot_product_attention"]


@pytest.fixture(autouse=True)
def _observers_back_on():
    yield
    _run(OBSERVERS_BACK_ON)


def test_the_honest_answer_passes_under_the_watch():
    checks.check_attention(_answer("out = weights_of(q, k, mask) @ v"))
    assert not torch.autograd._profiler_enabled()
    assert not _run("depth = torch._C._len_torch_function_stack()")["depth"]


@pytest.mark.parametrize("way", sorted(BUILTIN_BY_ANOTHER_NAME))
@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_pytorchs_attention_is_refused_by_whatever_name_it_is_reached(way, split):
    message = failure(checks.check_attention, _answer(BUILTIN_BY_ANOTHER_NAME[way]), split=split)
    assert "calls PyTorch's own scaled_dot_product_attention" in message and named(message) == {"calls_translab"}


@pytest.mark.parametrize("way", sorted(WATCH_SWITCHED_OFF))
def test_an_answer_that_switches_the_watch_off_is_flagged(way):
    message = failure(checks.check_attention, _answer(WATCH_SWITCHED_OFF[way]))
    assert named(message) == {torch_watch.TAMPERED_KEY}, message
    assert "switched off what watches it" in message


def test_a_students_own_profile_of_a_visible_check_is_left_running():
    with torch.autograd.profiler.profile() as profile:
        message = failure(checks.check_attention, _answer(BUILTIN_BY_ANOTHER_NAME["functional"]))
        assert torch.autograd._profiler_enabled()
    assert "calls PyTorch's own" in message  # the mode alone still refuses it
    assert any(event.name.startswith("aten::") for event in profile.function_events)


def test_an_answer_taking_star_args_that_writes_into_them_is_named():
    in_place = _run(WEIGHTS + """
def scaled_dot_product_attention(*args):
    q, k, v, mask = (list(args) + [None])[:4]
    weights = weights_of(q, k, mask)
    q.mul_(0)
    return weights @ v, weights
""")["scaled_dot_product_attention"]
    message = failure(checks.check_attention, in_place)
    assert named(message) == {"mutates_input"} and "`argument 1` in place" in message, message


def test_tensors_inside_containers_and_a_modules_parameters_are_compared():
    layer = nn.Linear(3, 2)
    given = dict(torch_watch.tensors_given(layer, (torch.zeros(1, 3),), {}))
    assert {"argument 1", "parameter weight", "parameter bias"} <= set(given)
    nested = dict(torch_watch.tensors_given(lambda batch, **options: None,
                                            ([torch.zeros(1), (torch.ones(1),)],), {"extra": {"m": torch.ones(2)}}))
    assert set(nested) == {"batch[0]", "batch[1][0]", "extra['m']"}


def test_a_forward_that_trains_its_own_parameters_is_named():
    class Sneaky(nn.Module):
        def __init__(self):
            super().__init__()
            self.scale = nn.Parameter(torch.ones(()))

        def forward(self, x):
            with torch.no_grad():
                self.scale.add_(1.0)
            return x * self.scale
    message = failure(checks.harness.call_student, "forward", Sneaky(), torch.ones(2))
    assert named(message) == {"mutates_input"} and "`parameter scale`" in message, message
