"""Models whose outputs a check chose, so that one property of an answer shows alone (``properties``): what the
answer computes from them is known exactly, and each departs from it only where the property under probe is broken.

They hold no answer of the lab and no hidden input: a probe's batches are built here, the same in every split."""
from __future__ import annotations

import torch
from torch import nn

from ..datasets import Batch
from .harness import give_parameters_like

PAD = 0                 # the lab's PAD_ID
FIRST_LABEL_TOKEN = 5   # token FIRST_LABEL_TOKEN + c at position 0 says "predict class c"


class ScriptedClassifier(nn.Module):
    """Called as the lab's Model is (``model(src, src_key_padding_mask)``), it predicts the class its first token
    names, and the next class instead where the call breaks what ``wants`` lists: ``"padding"`` (the batch's own
    padding mask, True at padding, is passed), ``"eval"`` (the model is in eval mode)."""

    def __init__(self, wants: tuple[str, ...] = (), nclasses: int = 2):
        super().__init__()
        self.wants = tuple(wants)
        self.nclasses = nclasses
        self.scale = nn.Parameter(torch.ones(()))  # a parameter, so that .parameters(), .device and grads work

    def forward(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None,
                causal: bool = True) -> torch.Tensor:
        named = (src[:, 0] - FIRST_LABEL_TOKEN).clamp(0, self.nclasses - 1)
        right = True
        if "padding" in self.wants:
            right = src_key_padding_mask is not None and torch.equal(
                torch.as_tensor(src_key_padding_mask).bool(), src == PAD)
        if "eval" in self.wants:
            right = right and not self.training
        predicted = named if right else (named + 1) % self.nclasses
        return nn.functional.one_hot(predicted, self.nclasses).float() * self.scale


def labelled_batch(labels: list[int], predicted_right: list[bool], lengths: list[int] | None = None,
                   nclasses: int = 2) -> Batch:
    """A batch whose sentences the scripted classifier predicts right exactly where ``predicted_right`` says;
    ``lengths`` pads the shorter sentences (True in the padding mask)."""
    lengths = lengths or [3] * len(labels)
    width = max(lengths)
    inputs = torch.full((len(labels), width), PAD, dtype=torch.long)
    for row, (label, right, length) in enumerate(zip(labels, predicted_right, lengths)):
        named = label if right else (label + 1) % nclasses
        inputs[row, :length] = torch.tensor([FIRST_LABEL_TOKEN + named] + [FIRST_LABEL_TOKEN + nclasses] * (length - 1))
    return Batch(inputs, inputs == PAD, torch.tensor(labels, dtype=torch.long))


# the base's outputs the references store (and the LM head's on each), in this order: (src_mask, padding mask)
# given to the reference base
RECORDED_CALLS = (("causal", "padding"), ("none", "padding"), ("causal", "none"), ("none", "none"))


class RecordedBase(nn.Module):
    """Stands for the reference base in check_model where part 2's answers are held back: it answers the calls
    Model should make with the reference base's stored outputs (``RECORDED_CALLS``), and raises, saying what it
    was given, on any other (a mask of the batch's size gets PyTorch's own error).  Its parameters are the
    reference base's, by name and shape, so a Model that registers it counts what it would count."""

    def __init__(self, case: dict):
        super().__init__()
        give_parameters_like(self, case["base_state"])
        self.src, self.padding = case["src"], case["padding"]
        self.outputs = dict(zip(RECORDED_CALLS, case["base_outputs"]))

    def forward(self, src, src_mask=None, src_key_padding_mask=None):
        batch, seq = self.src.shape
        if not (isinstance(src, torch.Tensor) and src.shape == self.src.shape and torch.equal(src, self.src)):
            raise RuntimeError("the base was given other token ids than Model received")
        if src_mask is None:
            mask = "none"
        elif tuple(src_mask.shape) != (seq, seq):
            raise RuntimeError(f"The shape of the 2D attn_mask is torch.Size({list(src_mask.shape)}), but should be "
                               f"({seq}, {seq}).")
        elif torch.equal(torch.isinf(src_mask) if src_mask.is_floating_point() else src_mask.bool(),
                         torch.ones(seq, seq, dtype=torch.bool).triu(1)):
            mask = "causal"
        else:
            raise RuntimeError("src_mask is neither None nor the causal mask of generate_square_subsequent_mask")
        if src_key_padding_mask is None:
            padding = "none"
        elif torch.equal(torch.isinf(src_key_padding_mask) if src_key_padding_mask.is_floating_point()
                         else src_key_padding_mask.bool(), self.padding):
            padding = "padding"
        else:
            raise RuntimeError("src_key_padding_mask is not the padding mask Model received")
        if (mask, padding) not in self.outputs:
            raise RuntimeError(f"the base was called with src_mask={mask}, src_key_padding_mask={padding}, which "
                               "check_model never asks of Model")
        return self.outputs[(mask, padding)].clone()


class RecordedHead(nn.Module):
    """Stands for a reference head in check_model where part 2's answers are held back: the reference head's
    parameters (``state``), and for the base output it is given (by its place in ``RECORDED_CALLS``) and whether
    the padding mask came with it, the reference head's stored output."""

    def __init__(self, answers: dict, case: dict, state: dict):
        super().__init__()
        give_parameters_like(self, state)
        self.answers, self.base_outputs = answers, list(case["base_outputs"])

    def forward(self, hidden, src_key_padding_mask=None):
        which = next((i for i, h in enumerate(self.base_outputs)
                      if isinstance(hidden, torch.Tensor) and hidden.shape == h.shape and torch.equal(hidden, h)), None)
        key = (which, src_key_padding_mask is not None)
        if which is None or key not in self.answers:
            raise RuntimeError("the head was given other vectors than the base's output" if which is None else
                               "the head was given the padding mask with vectors computed without it")
        return self.answers[key].clone()


class RecordingEncoder(nn.Module):
    """Put around a base's ``transformer_encoder`` by a check: it runs the encoder as it is and keeps what each call
    gave it (the vectors, the mask and the padding mask), so that each property of the base is read from its own
    input (``part2_probes``)."""

    def __init__(self, inner: nn.Module):
        super().__init__()
        self.inner = inner
        self.seen: list[dict] = []

    def forward(self, src, mask=None, src_key_padding_mask=None, is_causal=None):
        def kept(value):
            return torch.Tensor.detach(value).clone() if isinstance(value, torch.Tensor) else None
        self.seen.append({"input": kept(src), "mask": kept(mask), "padding": kept(src_key_padding_mask)})
        extra = {} if is_causal is None else {"is_causal": is_causal}
        return self.inner(src, mask=mask, src_key_padding_mask=src_key_padding_mask, **extra)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(super().__getattr__("inner"), name)


def record_encoder_here(model: nn.Module) -> RecordingEncoder | None:
    """Wrap ``model.transformer_encoder`` in the process that holds the model; None where it has none."""
    inner = getattr(model, "transformer_encoder", None)
    if not isinstance(inner, nn.Module):
        return None
    model.transformer_encoder = RecordingEncoder(inner)
    return model.transformer_encoder


def layers_batch_first(recorder: RecordingEncoder) -> bool | None:
    """Whether the recorded encoder's first layer is built batch-first; None where that cannot be read."""
    layer = next(iter(getattr(recorder.inner, "layers", [])), None)
    attention = getattr(layer, "self_attn", None)
    return None if attention is None else bool(getattr(attention, "batch_first", False))


class ScriptedLM(nn.Module):
    """Called as the lab's language model is (``model(ids)``: (batch, seq) -> (batch, seq, VOCAB) logits), it
    predicts at position t the token ``ids[:, t] + 1`` in eval mode and ``ids[:, t] + 2`` in training mode, by a
    margin so wide that a draw picks it as surely as argmax does.  ``close_second`` puts the token ``ids[:, t] + 3``
    just behind it: argmax never picks it, a draw picks it about half the time."""

    VOCAB = 64
    MARGIN = 60.0

    def __init__(self, close_second: bool = False):
        super().__init__()
        self.close_second = close_second
        self.scale = nn.Parameter(torch.ones(()))  # a parameter, so that .parameters(), .device and grads work

    def forward(self, src: torch.Tensor, src_key_padding_mask: torch.Tensor | None = None,
                causal: bool = True) -> torch.Tensor:
        ids = torch.as_tensor(src).long()
        logits = torch.zeros(*ids.shape, self.VOCAB)
        logits.scatter_(-1, ((ids + (2 if self.training else 1)) % self.VOCAB).unsqueeze(-1), self.MARGIN)
        if self.close_second:
            logits.scatter_(-1, ((ids + 3) % self.VOCAB).unsqueeze(-1), self.MARGIN - 0.05)
        return logits * self.scale


def scripted_chain(prompt: list[int], steps: int, step: int = 1, eos_id: int | None = None) -> list[int]:
    """What greedy decoding of ``ScriptedLM`` gives after ``prompt``: each token the last one plus ``step``."""
    out, last = [], prompt[-1]
    for _ in range(steps):
        last = (last + step) % ScriptedLM.VOCAB
        if last == eos_id:
            break
        out.append(last)
    return out
