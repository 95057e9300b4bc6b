"""The properties of part 2's base, each read from what the base gave its encoder (``scripted.RecordingEncoder``):
the embedding's scale, the positions and the axis they run along, the causal mask, the padding mask, the layout the
layers are built for, and masks that may be left out.  Each is measured alone; every one that fails is reported."""
from __future__ import annotations

import math

import torch

from .. import wire
from .harness import attempt_again, in_hidden_check, matches_reference
from .properties import Probe, sizes_said
from .scripted import layers_batch_first, record_encoder_here

CLOSE = {"rtol": 1e-4, "atol": 1e-5}


def _there(function, *args):
    """``function(*args)`` in the process that holds ``args[0]`` (the grading kernel, where the model lives)."""
    if wire.remote(args[0]):
        return wire.session().call(wire.session().put(function), args, {})
    return function(*args)


def record_encoder(model):
    """The recorder around ``model.transformer_encoder``, or None where the base has none."""
    return _there(record_encoder_here, model)


def _reading(model, seen: dict, case: dict) -> dict:
    """How the encoder's input decomposes: its layout, its embedding scale, where its positions run."""
    src = case["src"]
    batch, seq = src.shape
    x = seen["input"]
    weight = case["state_dict"]["encoder.weight"]
    nhid = weight.size(1)
    if x is None or x.dim() != 3 or x.size(-1) != nhid:
        return {}
    layout = "seq_first" if tuple(x.shape) == (seq, batch, nhid) and seq != batch else "batch_first"
    x = x.transpose(0, 1) if layout == "seq_first" else x
    table = attempt_again(model.pos_encoder, torch.zeros(1, max(batch, seq), nhid))
    embedded = weight[src]
    positions = {"none": torch.zeros(()), **({"seq": table[0, :seq].unsqueeze(0), "batch": table[0, :batch].unsqueeze(1)}
                                             if isinstance(table, torch.Tensor) and table.dim() == 3 else {})}
    for scale_name, scaled in (("sqrt", embedded * math.sqrt(nhid)), ("none", embedded)):
        for axis, added in positions.items():
            if tuple(x.shape) == tuple(embedded.shape) and torch.allclose(x, scaled + added, **CLOSE):
                return {"layout": layout, "scale": scale_name, "positions": axis}
    return {"layout": layout}


def _mask_pattern(mask) -> torch.Tensor | None:
    if not isinstance(mask, torch.Tensor):
        return None
    return torch.isinf(mask) if mask.is_floating_point() else mask.bool()


def base_probes(model, recorder, case: dict) -> list[Probe]:
    """The probes of one case, read from the recorder's first call (both masks given) and the model's layers."""
    seen = list(getattr(recorder, "seen", None) or [])
    if not seen:
        return []
    first = seen[0]
    reading = _reading(model, first, case)
    src, padding = case["src"], case["padding"]

    def layout():
        try:
            layer = _there(layers_batch_first, recorder)
        except Exception:  # noqa: BLE001 - layers of another kind: the layout is not read
            layer = None
        if "layout" not in reading or layer is None:
            return None
        if (reading["layout"] == "seq_first") == bool(layer):
            given = "(seq, batch, nhid)" if reading["layout"] == "seq_first" else "(batch, seq, nhid)"
            built = "batch_first=True" if layer else "batch_first=False (sequence first)"
            return (f"the encoder's layers are built with {built} but are given {given} vectors: attention then "
                    "runs across the sentences of the batch instead of along each sentence.\n  likely:   build "
                    "nn.TransformerEncoderLayer with batch_first=True and give it the (batch, seq, nhid) vectors as "
                    "they are")
        return None

    def scale():
        if reading.get("scale") == "none":
            return ("the embeddings are not multiplied by sqrt(nhid) before the positions are added (measured: the "
                    "encoder's input is embedding + positions).\n  likely:   self.encoder(src) * math.sqrt(self.nhid)")
        return None

    def positions():
        if reading.get("positions") == "none":
            return ("the positional encoding is not applied (measured: the encoder's input holds no positions).\n"
                    "  likely:   pass the scaled embeddings through self.pos_encoder", "model.no_positions")
        if reading.get("positions") == "batch":
            return ("the positions run along the batch axis: sentence b gets position b's encoding at every token "
                    "(measured on the encoder's input).\n  likely:   apply self.pos_encoder to (batch, seq, nhid) "
                    "vectors; transpose only after it, if at all")
        return None

    def causal():
        if first["mask"] is None:
            return ("src_mask is not passed to the encoder (measured: the encoder was called with mask=None), so "
                    "every token sees the future.\n  likely:   self.transformer_encoder(x, mask=src_mask, "
                    "src_key_padding_mask=src_key_padding_mask)")
        return None

    def padded():
        given = _mask_pattern(first["padding"])
        if given is None:
            return ("src_key_padding_mask is not passed to the encoder (measured: it was called without one), so "
                    "real tokens attend to padding.\n  likely:   pass src_key_padding_mask=src_key_padding_mask")
        if tuple(given.shape) == tuple(padding.shape) and not torch.equal(given, padding):
            return ("the encoder's padding mask is not the one given: measured where it masks against the batch's "
                    "padding" + sizes_said(f"{int((given != padding).sum())} positions differ") + ".")
        return None

    def optional():
        if attempt_again(model, src) is None and attempt_again(model, src, None, None) is not None:
            return ("forward(src) without masks fails, though forward(src, None, None) works: the masks have no "
                    "default.\n  likely:   def forward(self, src, src_mask=None, src_key_padding_mask=None)")
        return None

    return [Probe("model.layout", "the vectors given to the encoder", layout),
            Probe("model.no_scale", "the vectors given to the encoder", scale),
            Probe("model.positions_batch_axis", "the vectors given to the encoder", positions),
            Probe("model.no_causal_mask", "the masks given to the encoder", causal),
            Probe("model.no_padding_mask", "the masks given to the encoder", padded),
            Probe("model.masks_not_optional", "a call of forward(src) alone", optional)]


def _cls_reading(out: torch.Tensor, case: dict, tol, centred: bool) -> tuple[str, str | None, str] | None:
    """Which position (or mean) each row of ``out`` is the reference decoder's output at: (what, hint, key);
    ``centred``: compare up to a constant per row (logits recovered from probabilities)."""
    hidden, padding, state = case["hidden"], case["padding"], case["cls_state"]

    def head(vectors):
        logits = vectors @ state["decoder.weight"].T + state["decoder.bias"]
        return logits - logits.mean(-1, keepdim=True) if centred else logits
    at = head(hidden)  # (batch, seq, nclasses): the classification each position would give
    lengths = (~padding).sum(dim=1)
    last = (lengths - 1).tolist()
    read = []
    for b in range(hidden.size(0)):
        hits = [t for t in range(hidden.size(1)) if torch.allclose(out[b], at[b, t], **CLOSE)]
        read.append(hits[0] if len(hits) == 1 else None)
    keep = (~padding).unsqueeze(-1).to(hidden.dtype)
    seq = hidden.size(1)
    readings = [
        (read == last, "reads each sentence's last real token", None, "heads.readout_right"),
        (read == [0] * len(read), "reads position 0 of every sentence", "with a causal mask, position 0 has only "
         "seen the first token; the last real token has seen them all", "heads.first_position"),
        (read == [seq - 1] * len(read), "reads the last position, hidden[:, -1], which is padding for shorter "
         "sentences", "with right padding, sentence b ends at position (~padding[b]).sum() - 1; use the padding mask "
         "to find it", "heads.last_position"),
        (read == [min(n, seq - 1) for n in lengths.tolist()], "reads the position after each sentence's last real "
         "token, the first padding", "the last real token is at (~padding[b]).sum() - 1: positions count from 0",
         "heads.off_by_one"),
        (matches_reference(out, head(hidden.mean(dim=1)), tol), "averages over all positions, padding included",
         "read the state of each sentence's last non-padding token", "heads.mean"),
        (matches_reference(out, head((hidden * keep).sum(dim=1) / keep.sum(dim=1)), tol), "averages the real "
         "tokens", "this causal model's summary of a sentence is its last real token's state, which has seen every "
         "token; a mean mixes in states that saw only the beginning", "heads.mean_real")]
    for holds, what, hint, key in readings:
        if holds:
            return what, hint, key
    if any(t is not None for t in read):
        where = "" if in_hidden_check() else f" (positions {read} where the last real tokens are at {last})"
        return f"reads another position than each sentence's last real token{where}", None, ""
    return None


def readout_finding(cls_out: torch.Tensor, case: dict, tol) -> tuple[str, str | None, str] | None:
    """What the classifier's output was read from, measured by applying the reference decoder to every position
    (and to the means), through a softmax if the rows are probabilities: (message, hint, keys), or None."""
    rows = cls_out.sum(-1)
    for name, logits in (("softmax", lambda x: x.clamp_min(1e-30).log()), ("log_softmax", lambda x: x)):
        probabilities = cls_out if name == "softmax" else cls_out.exp()
        if torch.allclose(probabilities.sum(-1), torch.ones_like(rows), atol=1e-4) and bool((probabilities >= 0).all()):
            under = logits(cls_out)
            found = _cls_reading(under - under.mean(-1, keepdim=True), case, tol, centred=True)
            reading = "" if found is None or found[2] == "heads.readout_right" else f"; underneath, it {found[0]}"
            keys = "heads.cls_softmax" + (f" {found[2]}" if reading and found[2] else "")
            hints = "return the raw scores (logits): CrossEntropyLoss applies log-softmax itself" + (
                f"; {found[1]}" if reading and found[1] else "")
            return f"ClassificationHead returns a {name} of its logits (measured: its rows are probabilities){reading}.", \
                hints, keys
    found = _cls_reading(cls_out, case, tol, centred=False)
    if found is None or found[2] == "heads.readout_right":
        return None
    return f"ClassificationHead {found[0]} (measured by applying the decoder to every position).", found[1], found[2]
