"""Checks of part 6: the BERT-family encoder, the parameter count and the classifier; the weight mapping's checks
are in ``part6_mapping``, which uses the checkpoint helpers here.

Why one file: the encoder's, the count's and the classifier's checks share the small BERT shapes, the state loading
and the forbidding of translab's own BERT (the mapping, which has its own diagnosis, is already apart).
"""
from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Callable

import torch
from torch import nn

from .. import bert, params, references, wire
from ..stages import held_in_kernel
from . import properties
from .part6_count import bert_count_probes
from .harness import (OutputMistake, call_student, checked, fail, fail_if_related, forbid, give_parameters_like,
                      report_ok, shorten)


def bert_module():
    return bert


def forbid_bert():
    b = bert_module()
    return forbid(b.BertEncoder, b.BertClassifier, b.load_minilm, b.mean_pool, b.embed, b.convert_checkpoint,
                  b.weight_mapping, b.load_pretrained_weights, b.count_parameters_formula, mapping_from_digests)


def _forbid_pooling():
    """The classifier's check runs translab's encoder inside the answer: only the pooling and the classifier are off."""
    b = bert_module()
    return forbid(b.BertClassifier, b.mean_pool, b.embed)


def tensors_close(a: torch.Tensor, b: torch.Tensor, tol: references.Tolerance) -> bool:
    return references.within(a, b, tol)


def _config_text(fields: dict) -> str:
    return "BertConfig(" + ", ".join(f"{k}={v}" for k, v in fields.items()) + ")" if fields else "BertConfig()"


def layer_pattern(name: str) -> str:
    import re
    return re.sub(r"\.(layers?)\.\d+\.", r".\1.*.", name)


def module_of(name: str) -> str:
    """What a tensor belongs to, its layer number left out: ``encoder.layer.3.output.LayerNorm.weight`` ->
    ``output.LayerNorm``.  The hints name modules so, read from the mapping in hand (translab's, or the one the
    digests give where it is held back): no hint text spells out the mapping."""
    import re
    return re.sub(r"^encoder\.layers?\.\d+\.", "", name).rsplit(".", 1)[0]


def listed_names(names, limit: int = 4, counts: bool = True) -> str:
    """Parameter names, one pattern per kind: ``encoder.layers.*.norm1.weight (6 layers)`` (``counts=False``: without
    the number of layers, which a hidden configuration keeps to itself)."""
    groups: dict = {}
    for name in names:
        groups.setdefault(layer_pattern(name), []).append(name)
    parts = [pattern + (f" ({len(members)} layers)" if "*" in pattern and counts else "")
             for pattern, members in groups.items()]
    return ", ".join(parts[:limit]) + (f" and {len(parts) - limit} more" if len(parts) > limit else "")


_BERT_ATTRIBUTES = ("keep the attribute names of the skeleton (word_embeddings, position_embeddings, "
                    "token_type_embeddings, embedding_norm, dropout, encoder): the weights are loaded by name")


def _load_bert_state(module: nn.Module, state: dict, what: str, classifier: bool = False, visible: bool = True) -> None:
    own = module.state_dict()
    missing = [k for k in state if k not in own]
    unexpected = [k for k in own if k not in state]
    resized = [k for k in state if k in own and tuple(own[k].shape) != tuple(state[k].shape)]
    if not (missing or unexpected or resized):
        module.load_state_dict(state, strict=True)
        return
    prefix = "encoder." if classifier else ""
    if classifier and any(k.startswith("head.") for k in missing):
        hint = "name the new linear layer self.head (nn.Linear(hidden_size, nclasses)) and keep self.encoder as given"
    elif any(k.startswith(prefix + "token_type_embeddings") for k in missing):
        hint = ("BERT adds a token-type (segment) embedding: self.token_type_embeddings = "
                "nn.Embedding(config.type_vocab_size, config.hidden_size)")
    elif any(k.startswith(prefix + "position_embeddings") for k in missing):
        hint = ("BERT learns its positions: self.position_embeddings = nn.Embedding(config.max_position_embeddings, "
                "config.hidden_size), not part 1's fixed sinusoids")
    elif any(k.startswith(prefix + "embedding_norm") for k in missing):
        hint = "BERT normalises the summed embeddings: self.embedding_norm = nn.LayerNorm(hidden_size, eps=config.layer_norm_eps)"
    elif any(k.startswith(prefix + "encoder.layers") for k in missing + unexpected):
        hint = ("the layers: self.encoder = nn.TransformerEncoder(nn.TransformerEncoderLayer(...), "
                "config.num_hidden_layers, enable_nested_tensor=False), one layer per config.num_hidden_layers")
    elif resized:
        hint = ("every size comes from config: vocab_size, hidden_size, intermediate_size (the layer's "
                "dim_feedforward), max_position_embeddings, type_vocab_size")
    else:
        hint = ("keep self.encoder (the encoder given) and the new layer as self.head" if classifier
                else _BERT_ATTRIBUTES)
    sizes = ", ".join(f"{k} {tuple(own[k].shape)} instead of {tuple(state[k].shape)}" if visible else k
                      for k in resized[:2])
    found = "; ".join(part for part in (
        missing and f"missing {listed_names(missing, counts=visible)}",
        unexpected and f"unexpected {listed_names(unexpected, counts=visible)}", resized and f"wrong sizes for {sizes}")
        if part)
    fail(f"{what}: the reference weights do not fit your module.", "the parameters of BERT's encoder, by name", found, hint)


def bert_base_pieces(model: nn.Module, ids, padding, types) -> SimpleNamespace:
    """What a reference BertEncoder computes on the way, and an encoder like its own with other settings, from
    which BERT's differences from part 2, each got wrong, are computed."""
    config = model.config

    def encoder_like(**changes):
        settings = {"activation": "gelu", "layer_norm_eps": config.layer_norm_eps, "norm_first": False, **changes}
        layer = nn.TransformerEncoderLayer(config.hidden_size, config.num_attention_heads, config.intermediate_size,
                                           config.hidden_dropout_prob, batch_first=True, **settings)
        encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)
        encoder.load_state_dict(model.encoder.state_dict())
        return encoder.eval()

    def run(x, encoder=model.encoder, mask=padding):
        return encoder(x, src_key_padding_mask=mask)

    return SimpleNamespace(run=run, encoder_like=encoder_like, norm=model.embedding_norm,
                           scale=math.sqrt(config.hidden_size), word=model.word_embeddings(ids),
                           position=model.position_embeddings(torch.arange(ids.size(1))),
                           kind=model.token_type_embeddings(types),
                           kind_zero=model.token_type_embeddings(torch.zeros_like(types)))


BERT_BASE_MISTAKES = {  # what the output looks like: "the output of an encoder with <looks_like>"
    "scaled": OutputMistake("the word embeddings are multiplied by sqrt(hidden_size), as in part 2. BERT does not scale them: "
                      "it learned their size. The embedding LayerNorm rescales the sum, but scaling the word part alone "
                      "makes it outweigh the learned positions and token types",
                      lambda p: p.run(p.norm(p.word * p.scale + p.position + p.kind)),
                      "embeddings scaled by sqrt(hidden_size)"),
    "no_embedding_norm": OutputMistake("the embedding LayerNorm is not applied: "
                                 "x = embedding_norm(word + position + token type), then dropout, then the encoder",
                                 lambda p: p.run(p.word + p.position + p.kind), "no embedding LayerNorm"),
    "no_positions": OutputMistake("the position embeddings are not added: "
                            "position_embeddings(torch.arange(seq_len)), one learned vector per position",
                            lambda p: p.run(p.norm(p.word + p.kind)), "no position embeddings"),
    "no_token_types": OutputMistake("the token-type embeddings are not added: token_type_embeddings(token_type_ids)",
                              lambda p: p.run(p.norm(p.word + p.position)), "no token-type embeddings"),
    "types_ignored": OutputMistake("token_type_ids is ignored: use it when it is given (all zeros only when it is None)",
                             lambda p: p.run(p.norm(p.word + p.position + p.kind_zero)), "token_type_ids ignored"),
    "relu": OutputMistake("the feed-forward uses ReLU, PyTorch's default; BERT uses GELU: activation=\"gelu\"",
                    lambda p: p.run(p.norm(p.word + p.position + p.kind), p.encoder_like(activation="relu")),
                    "ReLU layers"),
    "tanh_gelu": OutputMistake("BERT uses the exact (erf) GELU: activation=\"gelu\"",
                         lambda p: p.run(p.norm(p.word + p.position + p.kind), p.encoder_like(
                             activation=lambda t: nn.functional.gelu(t, approximate="tanh"))),
                         "tanh-approximated GELU"),
    "pre_ln": OutputMistake("the layers normalise first (norm_first=True); BERT is post-LN, PyTorch's default "
                      "norm_first=False: x = norm1(x + attention(x)), then x = norm2(x + feed_forward(x))",
                      lambda p: p.run(p.norm(p.word + p.position + p.kind), p.encoder_like(norm_first=True)),
                      "pre-LN layers"),
    "no_padding_mask": OutputMistake("padding_mask is not passed to the encoder: src_key_padding_mask=padding_mask",
                               lambda p: p.run(p.norm(p.word + p.position + p.kind), mask=None), "no padding mask"),
}


@checked
def check_bert_base(BertBase: type, split: str = "visible") -> None:
    """BertBase(config) loads the reference encoder's weights by name and computes the same outputs."""
    b = bert_module()
    cases = references.load("bert_base")[split]
    tol = references.tolerance("bert_base")
    visible = split == "visible"
    for case in cases:
        config = b.BertConfig(**case["config"])
        label = f"BertBase({_config_text(case['config'])})" if visible else "BertBase on a hidden configuration"
        with forbid_bert():
            model = call_student(label, BertBase, config)
        if not isinstance(model, nn.Module):
            fail(f"{label} must build an nn.Module.", "an nn.Module", wire.type_name(model))
        _load_bert_state(model, case["state_dict"], label, visible=visible)
        eps = sorted({module.eps for module in model.modules() if isinstance(module, nn.LayerNorm)})
        if eps != [config.layer_norm_eps]:
            fail(f"{label}: the LayerNorms do not use config.layer_norm_eps.",
                 f"eps={config.layer_norm_eps:g} everywhere" if visible else "eps=config.layer_norm_eps everywhere",
                 f"eps {', '.join(f'{e:g}' for e in eps)}" if visible else None,
                 "BERT's LayerNorms use eps=1e-12 (config.layer_norm_eps), PyTorch's default is 1e-5: pass "
                 "layer_norm_eps=config.layer_norm_eps to the encoder layer and eps=config.layer_norm_eps to "
                 "the embedding LayerNorm", key="bert.layer_norm_eps")
        model.eval()
        with forbid_bert(), torch.no_grad():
            out = call_student(f"{label}.forward(input_ids, padding_mask, token_type_ids)", model, case["ids"],
                               case["padding"], case["types"])
            plain = call_student(f"{label}.forward(input_ids)", model, case["ids"])
        expected, real = case["expected"], ~case["padding"]
        for found, what in ((out, "forward(input_ids, padding_mask, token_type_ids)"), (plain, "forward(input_ids)")):
            if not isinstance(found, torch.Tensor) or found.shape != expected.shape:
                fail(f"{label}: {what} returns the wrong shape for input_ids of shape {tuple(case['ids'].shape)}.",
                     f"{tuple(expected.shape)} = (batch, seq, hidden_size)",
                     tuple(found.shape) if isinstance(found, torch.Tensor) else wire.type_name(found),
                     "batch-first: nn.TransformerEncoderLayer(..., batch_first=True); return the encoder's output "
                     "(one vector per token), no pooling inside the base", key="wrong_shape")
        if not tensors_close(out[real], expected[real], tol):
            if bool(torch.isnan(out[real]).any()):
                fail(f"{label}: the output holds NaN.", hint="padding_mask is True at padding (PyTorch's "
                     "src_key_padding_mask); Hugging Face's attention_mask is the opposite (1 = real token): "
                     "do not invert it", key="bert.padding_inverted")
            for key, mistake in BERT_BASE_MISTAKES.items():
                variant = case[key]
                if not tensors_close(variant[real], expected[real], tol) and tensors_close(out[real], variant[real], tol):
                    fail(f"{label}: the output differs from the reference.", "the reference encoder's output",
                         f"the output of an encoder with {mistake.looks_like}", mistake.hint, key=f"bert.{key}",
                         keep=True)
            fail(f"{label}: the output differs from the reference.",
                 shorten(expected[0, 0, :4]) + " at [0, 0, :4]" if visible else None,
                 shorten(out[0, 0, :4]) if visible else None,
                 "embedding_norm(word + position + token type) -> dropout -> post-LN encoder layers with GELU, "
                 "padding mask passed as src_key_padding_mask")
        if not tensors_close(plain, case["expected_no_masks"], tol):
            fail(f"{label}: forward(input_ids) without the optional arguments differs from the reference.",
                 hint="padding_mask=None means no padding, token_type_ids=None means every token type is 0")
    what = "the configuration shown" if visible else f"{len(cases)} hidden configurations"
    report_ok(f"BertBase on {what}: BERT's weights load by name, outputs equal the reference encoder's "
              "(learned positions and token types, embedding LayerNorm, post-LN GELU layers, padding mask)")


# --- the weight mapping

QKV = ("query", "key", "value")


def checkpoint_case(case: dict):
    """(config, checkpoint under the checkpoint's names) of one case of the mapping check."""
    b = bert_module()
    if case["checkpoint"] is None:
        return b.load_checkpoint()
    return b.BertConfig(**case["config"]), case["checkpoint"]


def tensor_digest(tensor: torch.Tensor) -> str:
    """sha256 of a tensor's dtype, shape and bytes: the same on every machine for a tensor copied, not computed."""
    import hashlib
    data = tensor.detach().cpu().contiguous()
    header = f"{data.dtype}{tuple(data.shape)}".encode()
    return hashlib.sha256(header + data.view(torch.uint8).numpy().tobytes()).hexdigest()


def source_digests(checkpoint: dict, mapping: dict) -> dict[str, list[str]]:
    """{parameter of BertBase: digests of the checkpoint tensors that make it}: what the references store so that
    the mapping check runs where translab's mapping is held back (``translab.stages``) without naming the sources."""
    return {name: [tensor_digest(checkpoint[key]) for key in keys] for name, keys in mapping.items()}


def mapping_from_digests(checkpoint: dict, digests: dict[str, list[str]]) -> tuple[dict, dict]:
    """(mapping, right state dict) found by matching the stored digests with this checkpoint's tensors."""
    named = {tensor_digest(value): key for key, value in checkpoint.items() if value.dtype.is_floating_point}
    mapping = {name: tuple(named[digest] for digest in stored) for name, stored in digests.items()}
    right = {}
    for name, keys in mapping.items():
        parts = [checkpoint[key] for key in keys]
        right[name] = parts[0] if len(parts) == 1 else torch.cat(parts, dim=0)
    return mapping, right


def provenance(tensor: torch.Tensor, checkpoint: dict) -> str | None:
    """The checkpoint tensor that ``tensor`` is a copy of, if any."""
    for key, value in checkpoint.items():
        if value.shape == tensor.shape and value.dtype.is_floating_point and torch.equal(value, tensor.to(value.dtype)):
            return key
    return None


def bert_count_pieces(config, pooler: bool) -> SimpleNamespace:
    """The right count of a BERT encoder and what its terms are made of, from which the usual wrong counts are
    computed (d hidden size, f feed-forward width)."""
    from dataclasses import replace
    count = bert_module().count_parameters_formula
    layer = count(replace(config, num_hidden_layers=1)) - count(replace(config, num_hidden_layers=0))
    return SimpleNamespace(config=config, pooler=pooler, right=count(config, pooler), count=count, replace=replace,
                           layer=layer, d=config.hidden_size, f=config.intermediate_size,
                           layers=config.num_hidden_layers, heads=config.num_attention_heads)


BERT_COUNT_MISTAKES = {
    "pooler_flipped": OutputMistake("the pooler is counted when pooler=False or left out when pooler=True: it is one Linear "
                              "(hidden_size x hidden_size and its bias), added only when pooler=True",
                              lambda p: p.count(p.config, not p.pooler)),
    "no_biases": OutputMistake("biases are missing: every Linear has one (in-projection 3d, out-projection d, feed-forward "
                         "intermediate_size + d, the pooler d)",
                         lambda p: p.right - p.layers * (3 * p.d + p.d + p.f + p.d) - (p.d if p.pooler else 0)),
    "no_layer_norms": OutputMistake("the two LayerNorms of each layer are missing (a weight and a bias of hidden_size each: "
                              "4d per layer)", lambda p: p.right - p.layers * 4 * p.d),
    "one_layer_norm": OutputMistake("one LayerNorm per layer; there are two (after attention and after the feed-forward)",
                              lambda p: p.right - p.layers * 2 * p.d),
    "no_embedding_norm": OutputMistake("the embedding LayerNorm (a weight and a bias of hidden_size: 2d) is missing",
                                 lambda p: p.right - 2 * p.d),
    "no_position_embeddings": OutputMistake("the position table is missing: BERT learns its positions, "
                                      "max_position_embeddings x hidden_size parameters (part 1's sinusoids had none)",
                                      lambda p: p.right - p.config.max_position_embeddings * p.d),
    "no_token_types": OutputMistake("the token-type table (type_vocab_size x hidden_size) is missing",
                              lambda p: p.right - p.config.type_vocab_size * p.d),
    "position_ids_counted": OutputMistake("embeddings.position_ids is counted: a constant buffer of the checkpoint "
                                    "(0 .. max_position_embeddings - 1), not a parameter",
                                    lambda p: p.right + p.config.max_position_embeddings),
    "feed_forward_of_width_d": OutputMistake("the feed-forward is counted with width hidden_size, as in part 2; BERT's is "
                                       "intermediate_size wide",
                                       lambda p: p.count(p.replace(p.config, intermediate_size=p.d), p.pooler)),
    "attention_times_heads": OutputMistake("the attention is multiplied by the number of heads; the heads split hidden_size "
                                     "into slices, the projections stay hidden_size x hidden_size",
                                     lambda p: p.right + p.layers * (p.heads - 1) * (4 * p.d * p.d + 4 * p.d)),
    "qkv_once": OutputMistake("one projection counted instead of three (query, key and value each have d*d + d)",
                        lambda p: p.right - p.layers * (2 * p.d * p.d + 2 * p.d)),
    "no_out_projection": OutputMistake("the attention's output projection (d*d + d per layer) is missing",
                                 lambda p: p.right - p.layers * (p.d * p.d + p.d)),
    "one_layer": OutputMistake("only one layer counted; multiply by num_hidden_layers",
                         lambda p: p.right - (p.layers - 1) * p.layer),
}


# Shapes the visible check also tries (the hidden ones are others, in the grader's references).
BERT_PROBES = (dict(vocab_size=1009, hidden_size=48, num_hidden_layers=3, num_attention_heads=4, intermediate_size=80,
                    max_position_embeddings=64, type_vocab_size=3),
               dict(vocab_size=211, hidden_size=30, num_hidden_layers=2, num_attention_heads=5, intermediate_size=47,
                    max_position_embeddings=33, type_vocab_size=1))


@checked
def check_bert_parameter_count(count_bert_parameters: Callable, split: str = "visible") -> None:
    """count_bert_parameters(config, pooler=False) by formula: all-MiniLM-L6-v2 (visible), other shapes (hidden)."""
    b = bert_module()
    visible = split == "visible"
    stored = references.load("bert_parameters")[split]
    cases = [case for case in stored if not case.get("probe")]
    found_properties = properties.report(bert_count_probes(count_bert_parameters, b))
    for case in cases:
        config, pooler, expected = b.BertConfig(**case["config"]), case["pooler"], case["expected"]
        call = f"count_bert_parameters(config, pooler={pooler})"
        with forbid(b.count_parameters_formula, params.count_trainable_parameters):
            found = call_student(call, count_bert_parameters, config, pooler=pooler)
        try:
            value = int(found)
        except (TypeError, ValueError):
            fail(f"{call} is not a number.", "an int", shorten(found))
        if value == expected and float(found) == expected:
            continue
        if found_properties:
            return  # the properties measured are the failure (``checked`` raises them)
        hints = [mistake.hint for key, mistake in BERT_COUNT_MISTAKES.items()
                 if case[key] != expected and value == case[key]]
        hint = " -- or: ".join(hints) if hints else None  # no property explains it: what was measured, no recipe
        if visible:
            fail(f"{call} for all-MiniLM-L6-v2 is off by {value - expected:+,}.", f"{expected:,}", f"{value:,}", hint)
        fail(f"{call} is wrong on a hidden configuration.", hint=hint)
    if found_properties:
        return  # right on these configurations, not on the probes' own: the findings are the failure
    if visible:  # right for all-MiniLM-L6-v2 is not enough: the hidden test tries other shapes, and so does this one
        probes = [(case["config"], case["pooler"], case["expected"]) for case in stored if case.get("probe")]
        with forbid(b.count_parameters_formula, params.count_trainable_parameters):
            for shape, pooler, expected in probes:
                call = f"count_bert_parameters(BertConfig(**{shape}), pooler={pooler})"
                found = call_student(call, count_bert_parameters, b.BertConfig(**shape), pooler=pooler)
                try:
                    right = float(found) == expected
                except (TypeError, ValueError):
                    right = False
                if not right:
                    fail(f"{call} is wrong: your formula is right for all-MiniLM-L6-v2 but not for another shape.",
                         f"{expected:,}", shorten(found), "a formula uses the config's sizes (vocab_size, hidden_size, "
                         "num_hidden_layers, intermediate_size, max_position_embeddings, type_vocab_size), not the "
                         "numbers of one checkpoint")
        without, with_pooler = (case["expected"] for case in cases)
        report_ok(f"all-MiniLM-L6-v2: {without:,} parameters without the pooler, {with_pooler:,} with it; right at "
                  f"{len(BERT_PROBES)} other shapes too")
    else:
        report_ok(f"parameter formula right on {len(cases) // 2} hidden configurations, with and without the pooler")


# --- the classifier

def bert_pooling_pieces(classifier: nn.Module, ids, padding, types) -> SimpleNamespace:
    """A reference BertClassifier's encoder output and head, from which the usual wrong readouts are computed."""
    encoder = classifier.encoder
    return SimpleNamespace(head=classifier.head, encoder=encoder, ids=ids, padding=padding, types=types,
                           hidden=encoder(ids, padding, types), lengths=(~padding).sum(dim=1),
                           keep=(~padding).unsqueeze(-1).float(), mean_pool=bert_module().mean_pool)


BERT_POOLING_MISTAKES = {  # what the logits look like: "the head applied to <looks_like>"
    "mean_with_padding": OutputMistake("average the real tokens only (padding_mask is True at padding): leave the "
                                 "padding positions out of both the sum and the count",
                                 lambda p: p.head(p.hidden.mean(dim=1)), "the mean over every position, padding included"),
    "last_real_token": OutputMistake("that is part 4's readout, right for a causal model. This encoder is bidirectional: every "
                               "token has seen the whole sentence, and the mean over the real tokens is the summary it "
                               "was trained to give",
                               lambda p: p.head(p.hidden[torch.arange(len(p.ids)), p.lengths - 1]),
                               "each sentence's last real token"),
    "first_token": OutputMistake("average the real tokens instead: this checkpoint was trained with mean-pooled sentence "
                           "vectors (and the pooler over [CLS] is not loaded)",
                           lambda p: p.head(p.hidden[:, 0]), "the first token ([CLS]) alone"),
    "last_position": OutputMistake("that is padding for every shorter sentence; average the real tokens",
                             lambda p: p.head(p.hidden[:, -1]), "the last position"),
    "sum": OutputMistake("divide by the number of real tokens: a mean does not grow with length",
                   lambda p: p.head((p.hidden * p.keep).sum(dim=1)), "the sum over the real tokens"),
    "max": OutputMistake("average the real tokens instead",
                   lambda p: p.head(p.hidden.masked_fill(p.padding.unsqueeze(-1), float("-inf")).max(dim=1).values),
                   "the maximum over the real tokens"),
    "no_padding_mask": OutputMistake("pass padding_mask to the encoder too, or its attention reads padding: "
                               "self.encoder(input_ids, padding_mask, token_type_ids)",
                               lambda p: p.head(p.mean_pool(p.encoder(p.ids, None, p.types), p.padding)),
                               "an encoder run without the padding mask"),
    "types_ignored": OutputMistake("pass token_type_ids on to the encoder",
                             lambda p: p.head(p.mean_pool(p.encoder(p.ids, p.padding), p.padding)),
                             "an encoder run without the token types"),
    "padding_inverted": OutputMistake("padding_mask is True at padding (PyTorch's convention); Hugging Face's attention_mask "
                                "is the opposite (1 = real token): average where padding_mask is False",
                                lambda p: p.head((p.hidden * p.padding.unsqueeze(-1).float()).sum(dim=1)
                                                 / p.padding.sum(dim=1, keepdim=True).clamp(min=1)),
                                "the mean of the padding positions (the mask read as Hugging Face's attention_mask)"),
}


# the encoder's outputs the references store, in this order: (padding_mask, token_type_ids) given to it
RECORDED_ENCODER_CALLS = (("padding", "types"), ("none", "types"), ("padding", "none"), ("none", "none"))


class _RecordedEncoder(nn.Module):
    """Stands for the reference encoder in check_bert_classifier where part 6's answers are held back
    (``translab.stages``): the reference's config, its parameters by name and shape (so the classifier's state dict
    is the same), and for each call a classifier may make (``RECORDED_ENCODER_CALLS``) the reference's stored output; any
    other call raises, saying what it was given."""

    def __init__(self, case: dict, config):
        super().__init__()
        self.config = config  # what a classifier reads its sizes from, as from BertEncoder
        give_parameters_like(self, case["encoder_state"])
        self.recorded = (case["ids"], case["padding"], case["types"])
        self.outputs = dict(zip(RECORDED_ENCODER_CALLS, case["encoder_outputs"]))

    def forward(self, input_ids, padding_mask=None, token_type_ids=None):
        ids, padding, types = self.recorded
        if not (isinstance(input_ids, torch.Tensor) and input_ids.shape == ids.shape and torch.equal(input_ids, ids)):
            raise RuntimeError("the encoder was given other input_ids than the classifier received")
        if padding_mask is None:
            mask = "none"
        elif isinstance(padding_mask, torch.Tensor) and padding_mask.shape == padding.shape \
                and torch.equal(padding_mask.bool(), padding):
            mask = "padding"
        else:
            raise RuntimeError("padding_mask is not the one the classifier received (True at padding)")
        if isinstance(token_type_ids, torch.Tensor) and token_type_ids.shape == types.shape \
                and torch.equal(token_type_ids, types):
            given = "types"
        elif token_type_ids is None or (isinstance(token_type_ids, torch.Tensor) and not token_type_ids.any()):
            given = "none"  # all zeros: what the encoder uses without them
        else:
            raise RuntimeError("token_type_ids are not the ones the classifier received")
        return self.outputs[(mask, given)].clone()


@checked
def check_bert_classifier(BertClassifier: type, split: str = "visible") -> None:
    """BertClassifier(encoder, nclasses): a fresh head over the mean of the real tokens' vectors."""
    b = bert_module()
    visible = split == "visible"
    cases = references.load("bert_classifier")[split]
    tol = references.tolerance("bert_classifier")
    for case in cases:
        config, nclasses = b.BertConfig(**case["config"]), case["nclasses"]
        encoder = _RecordedEncoder(case, config) if held_in_kernel(b.BertEncoder) else b.BertEncoder.to_load(config)
        encoder.load_state_dict(case["encoder_state"])
        label = f"BertClassifier(encoder, nclasses={nclasses})" if visible else "BertClassifier on a hidden configuration"
        with _forbid_pooling():
            model = call_student(label, BertClassifier, encoder, nclasses)
        if not isinstance(model, nn.Module):
            fail(f"{label} must build an nn.Module.", "an nn.Module", wire.type_name(model))
        state = {**{f"encoder.{k}": v for k, v in case["encoder_state"].items()},
                 **{f"head.{k}": v for k, v in case["head_state"].items()}}
        _load_bert_state(model, state, label, classifier=True, visible=visible)
        frozen = [name for name, p in model.named_parameters() if not p.requires_grad]
        if frozen:
            fail(f"{label}: some parameters are frozen.", "every parameter trainable (we fine-tune the whole model)",
                 listed_names(frozen))
        model.eval()
        with _forbid_pooling(), torch.no_grad():
            out = call_student(f"{label}.forward(input_ids, padding_mask, token_type_ids)", model, case["ids"],
                               case["padding"], case["types"])
            plain = call_student(f"{label}.forward(input_ids)", model, case["ids"])
        expected = case["expected"]
        if not isinstance(out, torch.Tensor) or out.shape != expected.shape:
            fail(f"{label} returns the wrong shape.", f"{tuple(expected.shape)} = (batch, nclasses)",
                 tuple(out.shape) if isinstance(out, torch.Tensor) else wire.type_name(out),
                 "one vector per sentence (the mean over its real tokens), then the head", key="wrong_shape")
        if not tensors_close(out, expected, tol):
            for key, mistake in BERT_POOLING_MISTAKES.items():
                if not tensors_close(case[key], expected, tol) and tensors_close(out, case[key], tol):
                    fail(f"{label}: the logits differ from the reference.",
                         "the head applied to the mean of the real tokens' vectors",
                         f"the head applied to {mistake.looks_like}", mistake.hint, key=f"classifier.{key}", keep=True)
            fail_if_related(f"{label}: the logits differ from the reference", out, expected, tol, ("sentence", "class"),
                            {"output.softmax": "return the head's logits: the loss (CrossEntropyLoss) applies the "
                                               "log-softmax itself, and a softmax before it flattens its gradient",
                             "output.log_softmax": "return the head's logits: CrossEntropyLoss applies the "
                                                   "log-softmax itself"})
            fail(f"{label}: the logits differ from the reference.", shorten(expected) if visible else None,
                 shorten(out) if visible else None,
                 "hidden = encoder(input_ids, padding_mask, token_type_ids); average hidden over the real tokens "
                 "(padding_mask False); return head(that mean)")
        if not tensors_close(plain, case["expected_no_masks"], tol):
            fail(f"{label}: forward(input_ids) without a padding mask differs from the reference.",
                 hint="padding_mask=None means no padding: average every position")
    report_ok(f"BertClassifier on {len(cases)} {'configuration' if visible else 'hidden configuration'}"
              f"{'s' if len(cases) > 1 else ''}: a fresh head on the mean of the real tokens, never padding")
