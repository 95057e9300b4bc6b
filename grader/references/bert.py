"""The reference tensors of notebook 06's checks (a real BERT), built like the rest (``grader.references``, which
collects these builders with its own): small seeded BERT shapes, the real checkpoint's mapping by digests, the
parameter counts and the classifier's encoder calls."""
from __future__ import annotations

import torch
from torch import nn

from translab.bert import (BertClassifier, BertConfig, BertEncoder, load_checkpoint, load_minilm, to_checkpoint,
                           tokenize, weight_mapping)
from translab.checks import part6
from translab.checks.harness import mistaken_outputs


def state_copy(module: nn.Module) -> dict:
    """A module's state, detached and cloned: what a reference stores of a model."""
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


# Small BERT shapes for the checks of BertBase and BertClassifier: the hidden ones change every size, the
# LayerNorm epsilon, the number of token types, and use token types other than 0.
BERT_CONFIGS = {
    "visible": [dict(vocab_size=60, hidden_size=16, num_hidden_layers=2, num_attention_heads=2, intermediate_size=32,
                     max_position_embeddings=24, type_vocab_size=2)],
    "hidden": [dict(vocab_size=41, hidden_size=24, num_hidden_layers=3, num_attention_heads=4, intermediate_size=40,
                    max_position_embeddings=16, type_vocab_size=3, layer_norm_eps=1e-7),
               dict(vocab_size=17, hidden_size=8, num_hidden_layers=1, num_attention_heads=1, intermediate_size=8,
                    max_position_embeddings=10, type_vocab_size=1)],
}
BERT_CLASSES = {"visible": [2], "hidden": [3, 5]}
# A checkpoint of another shape for the hidden check of the weight mapping (a fixed layer count fails it).
BERT_SYNTHETIC = dict(vocab_size=40, hidden_size=12, num_hidden_layers=3, num_attention_heads=3, intermediate_size=20,
                      max_position_embeddings=16, type_vocab_size=2)
# Sentences run through the real checkpoint.  The visible ones are the notebook's; the hidden ones are never shown
# (only their token ids are stored), one of them a sentence pair with token types 0 and 1.
BERT_SENTENCES = {
    "visible": ["a gorgeous , witty , seductive movie .", "the plot is a mess and the jokes fall flat .",
                "he drove to the stadium ."],
    "hidden": ["an uneven but often touching portrait of two brothers .",
               "nothing here rings true , least of all the ending .",
               "quiet , patient and quite beautiful .",
               "i wanted to like it more than i did .",
               ("was the soundtrack any good ?", "it was the best thing in the film .")],
}
BERT_MAX_LENGTH = 64


def _bert_config(fields: dict):
    return BertConfig(**fields)


def _random_bert(config, seed: int):
    """A BertEncoder with random weights, LayerNorms included (else a forgotten or swapped LayerNorm, still at
    weight 1 and bias 0, could not be told from the right one), at a scale where every mistake shows."""
    torch.manual_seed(seed)
    model = BertEncoder(replace_config(config, initializer_range=0.2))
    with torch.no_grad():
        for name, param in model.named_parameters():
            if param.dim() == 1:
                param.add_(0.2 * torch.randn_like(param))
    return model.eval()


def replace_config(config, **changes):
    from dataclasses import replace
    return replace(config, **changes)


def _bert_inputs(config, seed: int, lengths=(7, 4, 2)) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, config.vocab_size, (len(lengths), max(lengths)), generator=g)
    padding = torch.zeros_like(ids, dtype=torch.bool)
    types = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        ids[row, length:] = 0
        padding[row, length:] = True
        if config.type_vocab_size > 1:  # a second segment, of a type other than 0
            types[row, length // 2:length] = torch.randint(1, config.type_vocab_size, (1,), generator=g)
    return ids, padding, types


@torch.no_grad()
@torch.no_grad()
def build_bert_base() -> dict:
    out = {}
    for split, configs in BERT_CONFIGS.items():
        out[split] = []
        for i, fields in enumerate(configs):
            config = _bert_config(fields)
            model = _random_bert(config, 3000 + 10 * i + (split == "hidden"))
            ids, padding, types = _bert_inputs(config, 3100 + 10 * i + (split == "hidden"))
            out[split].append({"config": fields, "state_dict": state_copy(model), "ids": ids, "padding": padding,
                               "types": types, "expected": model(ids, padding, types),
                               "expected_no_masks": model(ids),
                               **mistaken_outputs(part6.BERT_BASE_MISTAKES, part6.bert_base_pieces(model, ids, padding, types))})
    return out


@torch.no_grad()
def build_bert_mapping() -> dict:
    """Outputs of the real all-MiniLM-L6-v2 (loaded by translab's mapping) on the visible and hidden sentences,
    and, hidden, a small checkpoint of another shape with its outputs.  Only token ids are stored, and for the real
    checkpoint each parameter's sources by digest (``sources``: what the check uses where the mapping is held back;
    a file's bytes, the same on every CPU, unlike the synthetic checkpoint's draws, which only the grader reads)."""
    minilm, tokenizer = load_minilm(max_length=BERT_MAX_LENGTH)
    real_config, real_checkpoint = load_checkpoint()
    real_sources = part6.source_digests(real_checkpoint, weight_mapping(real_config))
    out = {}
    for split, sentences in BERT_SENTENCES.items():
        single = [s for s in sentences if isinstance(s, str)]
        pairs = [s for s in sentences if not isinstance(s, str)]
        encodings = tokenizer.encode_batch(single + pairs)
        ids, padding, types = tokenize(tokenizer, single) if not pairs else (
            torch.tensor([e.ids for e in encodings]), torch.tensor([e.attention_mask for e in encodings]) == 0,
            torch.tensor([e.type_ids for e in encodings]))
        out[split] = [{"config": None, "checkpoint": None, "ids": ids, "padding": padding, "types": types,
                       "expected": minilm(ids, padding, types), "sources": real_sources}]
    config = _bert_config(BERT_SYNTHETIC)
    model = _random_bert(config, 3300)
    ids, padding, types = _bert_inputs(config, 3301, lengths=(9, 5, 3, 9))
    out["hidden"].append({"config": BERT_SYNTHETIC, "checkpoint": to_checkpoint(model), "ids": ids, "padding": padding,
                          "types": types, "expected": model(ids, padding, types)})
    return out


def _bert_count_variants(fields: dict, pooler: bool) -> dict:
    """The parameter count of a BERT encoder and its usual wrong versions (``part6.BERT_COUNT_MISTAKES``)."""
    pieces = part6.bert_count_pieces(_bert_config(fields), pooler)
    return {"config": fields, "pooler": pooler, "expected": pieces.right,
            **mistaken_outputs(part6.BERT_COUNT_MISTAKES, pieces)}


BERT_COUNT_CONFIGS = {
    "visible": [dict()],  # all-MiniLM-L6-v2 itself (BertConfig's defaults)
    "hidden": [BERT_CONFIGS["hidden"][0], BERT_SYNTHETIC,
               dict(vocab_size=28996, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, max_position_embeddings=512, type_vocab_size=2)],
}


def build_bert_parameters() -> dict:
    """The cases of each split; the visible one also the counts at ``part6.BERT_PROBES`` (``probe``), which the
    visible check tries without translab's formula (a release for part 6 holds it back)."""
    out = {split: [_bert_count_variants(fields, pooler) for fields in configs for pooler in (False, True)]
           for split, configs in BERT_COUNT_CONFIGS.items()}
    out["visible"] += [{"config": shape, "pooler": pooler, "probe": True,
                        "expected": part6.bert_count_pieces(_bert_config(shape), pooler).right}
                       for shape in part6.BERT_PROBES for pooler in (False, True)]
    return out


@torch.no_grad()
def build_bert_classifier() -> dict:
    out = {}
    for split, configs in BERT_CONFIGS.items():
        out[split] = []
        for i, (fields, nclasses) in enumerate(zip(configs, BERT_CLASSES[split])):
            config = _bert_config(fields)
            encoder = _random_bert(config, 3400 + 10 * i + (split == "hidden"))
            torch.manual_seed(3500 + i)
            classifier = BertClassifier(encoder, nclasses).eval()
            ids, padding, types = _bert_inputs(config, 3600 + 10 * i + (split == "hidden"), lengths=(6, 2, 4, 6))
            out[split].append({
                "config": fields, "nclasses": nclasses, "encoder_state": state_copy(encoder),
                "head_state": state_copy(classifier.head), "ids": ids, "padding": padding, "types": types,
                "expected": classifier(ids, padding, types), "expected_no_masks": classifier(ids),
                **mistaken_outputs(part6.BERT_POOLING_MISTAKES, part6.bert_pooling_pieces(classifier, ids, padding, types)),
                # the encoder's output for each call a classifier may make (part6.RECORDED_ENCODER_CALLS), for a
                # release that holds the encoder back (the check's stand-in replays them)
                "encoder_outputs": [encoder(ids, padding if mask == "padding" else None, types if given == "types" else None)
                                    for mask, given in part6.RECORDED_ENCODER_CALLS],
            })
    return out
