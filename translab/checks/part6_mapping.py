"""Checks of part 6's weight mapping: ``convert_checkpoint`` (the checkpoint's tensors under PyTorch's names), each
wrong tensor traced back to the checkpoint tensor it came from, so the message names the confusion."""
from __future__ import annotations

from typing import Callable

import torch

from .. import references, wire
from ..stages import withheld
from .harness import CheckFailed, REFUSED, call_student, checked, error_said, fail, no_warnings, refuse_call, report_ok
from .part6 import (QKV, bert_module, checkpoint_case, forbid_bert, layer_pattern, listed_names, mapping_from_digests,
                    module_of, provenance, tensors_close)


def _mapping_value_mistake(name: str, found: torch.Tensor, right: dict, checkpoint: dict, mapping: dict):
    """(kind, hint, key) for a tensor of the right shape and the wrong values."""
    sources = mapping[name]
    if "in_proj" in name:
        chunks = found.chunk(3)
        parts = [checkpoint[key] for key in sources]
        order = []
        for chunk in chunks:
            match = [i for i, part in enumerate(parts) if part.shape == chunk.shape and torch.equal(part, chunk.to(part.dtype))]
            order.append(match[0] if match else None)
        if None not in order and order != [0, 1, 2]:
            packed = ", ".join(QKV[i] for i in order)
            return (f"in_proj packed as ({packed})",
                    f"query, key and value are packed in the order ({packed}). PyTorch cuts in_proj_weight into "
                    "q, k, v in that order: rows 0..d-1 are the query, d..2d-1 the key, 2d..3d-1 the value; stack "
                    "torch.cat([query, key, value], dim=0), the biases in the same order", "mapping.qkv_order")
        if found.dim() == 2 and all(part.dim() == 2 and torch.equal(chunk, part.T.to(chunk.dtype))
                                    for chunk, part in zip(chunks, parts)):
            return ("transposed", "the query, key and value matrices are transposed. nn.Linear keeps its weight as "
                                  "(out_features, in_features), and so does the checkpoint: copy them as they are",
                    "mapping.transposed")
    if ".norm1." in name or ".norm2." in name:
        other = name.replace(".norm1.", ".norm#.").replace(".norm2.", ".norm1.").replace(".norm#.", ".norm2.")
        if torch.equal(found.to(right[other].dtype), right[other]):
            which = ".norm1." if ".norm1." in name else ".norm2."
            first, second = (module_of(mapping[name.replace(which, f".norm{n}.")][0]) for n in (1, 2))
            return ("the two LayerNorms swapped",
                    "norm1 and norm2 are swapped. Post-LN: norm1 normalises x + attention(x), i.e. the checkpoint's "
                    f"{first}; norm2 normalises x + feed_forward(x), i.e. its {second}", "mapping.norms_swapped")
    if found.dim() == 2 and found.shape[0] == found.shape[1] and torch.equal(found.T.to(right[name].dtype), right[name]):
        return ("transposed", "a weight matrix is transposed. nn.Linear keeps its weight as (out_features, "
                              "in_features), and so does the checkpoint: copy it as it is, no .T", "mapping.transposed")
    if name.endswith("bias") and not bool(found.any()):
        return ("a bias left at zero", "a bias is all zeros, as if it was never copied: every Linear of the "
                                       "checkpoint has a bias (in_proj_bias packs query.bias, key.bias, value.bias)",
                "mapping.not_copied")
    if "norm" in name and name.endswith("weight") and bool((found == 1).all()):
        return ("a LayerNorm left at its initial value", "a LayerNorm weight is all ones, as if it was never "
                "copied: copy the checkpoint's LayerNorm.weight and LayerNorm.bias (BERT's gamma and beta)",
                "mapping.not_copied")
    origin = provenance(found, checkpoint)
    if origin is not None:
        return (f"{layer_pattern(name)} holds {layer_pattern(origin)}", *_confusion_hint(name, origin, mapping))
    return ("values differ", "the values differ from the checkpoint's: copy the tensors unchanged (no scaling, "
                             "no re-initialisation)", "mapping.values_changed")


def _confusion_hint(name: str, origin: str, mapping: dict) -> tuple[str, str]:
    """(hint, key): what the checkpoint tensor ``origin`` fills, and where ``name`` comes from, named from
    ``mapping``."""
    import re
    sources = mapping[name]
    layer_found = re.search(r"\.layers?\.(\d+)\.", origin)
    layer_wanted = re.search(r"\.layers?\.(\d+)\.", name)
    if layer_found and layer_wanted and layer_found.group(1) != layer_wanted.group(1) and \
            layer_pattern(origin) == layer_pattern(sources[0]):
        return ("a tensor of another layer: layer i of the checkpoint (encoder.layer.i) goes to encoder.layers.i",
                "mapping.other_layer")
    fills = next((target for target, keys in mapping.items() if origin in keys), None)
    if fills is None:
        return f"{layer_pattern(name)} is filled from the wrong checkpoint tensor", "mapping.wrong_source"
    return (f"the checkpoint's {module_of(origin)} fills {module_of(fills)}; {module_of(name)} comes from "
            + " + ".join(dict.fromkeys(module_of(key) for key in sources)), "mapping.wrong_source")


def _mapping_shape_hint(name: str, found: torch.Tensor, wanted: torch.Tensor, checkpoint: dict,
                        mapping) -> tuple[str, str]:
    """(hint, key) for a tensor of the wrong shape."""
    origin = provenance(found, checkpoint)
    if origin is not None and origin not in mapping[name]:
        return _confusion_hint(name, origin, mapping)
    if "in_proj" in name and found.dim() == 2 and tuple(found.shape) == tuple(wanted.shape[::-1]):
        return ("query, key and value are stacked along dim=1, or the stack is transposed: in_proj_weight is "
                "(3 * hidden_size, hidden_size), torch.cat([query, key, value], dim=0)", "mapping.qkv_axis")
    if found.dim() == 2 and tuple(found.shape) == tuple(wanted.shape[::-1]):
        return ("a transposed weight. nn.Linear keeps its weight as (out_features, in_features), and so does the "
                "checkpoint: copy it as it is, no .T", "mapping.transposed")
    if "in_proj" in name and found.shape[0] * 3 == wanted.shape[0]:
        return ("in_proj packs all three of query, key and value, stacked along dim 0 (3 * hidden_size rows)",
                "mapping.qkv_not_packed")
    return "each parameter of BertBase has the shape of the checkpoint tensor(s) it comes from", "wrong_shape"


def _mapping_keys_hint(missing: list[str], unexpected: list[str], mapping: dict) -> tuple[str, str]:
    """(hint, key) for a state dict whose names are not BertBase's."""
    ignored = [k for k in unexpected if k.startswith("pooler.") or k == "embeddings.position_ids"]
    if any(k.startswith(("embeddings.", "encoder.layer.")) for k in unexpected if k not in ignored):
        name, (key,) = next((name, keys) for name, keys in mapping.items() if "layers.0." in name and len(keys) == 1)
        return ("the keys are BertBase's parameter names (those of BertBase(config).state_dict()), not the "
                f"checkpoint's: e.g. {key} goes to {name}", "mapping.checkpoint_names")
    if ignored:
        return ("leave out the pooler (BertBase has none: we average the tokens) and embeddings.position_ids "
                "(a constant buffer 0, 1, 2, ..., not a weight)", "mapping.extra_tensors")
    if any(part in k for k in unexpected for part in ("query", "key", "value", "q_proj", "k_proj", "v_proj")):
        return ("nn.MultiheadAttention has no separate query, key and value weights: stack them into "
                "self_attn.in_proj_weight, and their biases into self_attn.in_proj_bias", "mapping.qkv_not_packed")
    if any(k.endswith("in_proj_bias") for k in missing):
        return ("in_proj_bias is missing: the query, key and value biases are packed into it like the weights, "
                "in the same order", "mapping.missing_tensor")
    if any(k.endswith(".bias") and "norm" not in k for k in missing):
        return "a bias is missing: every Linear (out_proj, linear1, linear2) has a weight and a bias", \
            "mapping.missing_tensor"
    if any("norm" in k for k in missing):
        return ("a LayerNorm is missing: embedding_norm, and in every layer norm1 and norm2, from the "
                "checkpoint's LayerNorms, a weight and a bias each", "mapping.missing_tensor")
    if any(".layers." in k for k in missing + unexpected):
        return "one set of keys per layer: loop over range(config.num_hidden_layers), not a fixed count", \
            "mapping.layer_count"
    return "exactly one entry per parameter of BertBase(config).state_dict()", "mapping.names"


def _check_mapping_case(convert_checkpoint: Callable, case: dict, what: str, visible: bool):
    """The student's state dict for one case, after checking its keys, shapes, values and outputs."""
    from collections.abc import Mapping
    tol = references.tolerance("bert_mapping")
    b = bert_module()
    config, checkpoint = checkpoint_case(case)
    if withheld(b.weight_mapping):  # a release of part 6's week: the sources are known by their digests only
        mapping, right = mapping_from_digests(checkpoint, case["sources"])
    else:
        mapping, right = b.weight_mapping(config), b.convert_checkpoint(checkpoint, config)
    reference = None if withheld(b.BertEncoder) else b.BertEncoder.to_load(config).eval()
    # what the answer may change in place: a copy, unless the call goes to the grader's kernel, which gets its own
    given = checkpoint if wire.remote(convert_checkpoint) else {key: value.clone()
                                                               for key, value in checkpoint.items()}
    with forbid_bert():
        try:
            with no_warnings(what):
                found = convert_checkpoint(given, config)
        except CheckFailed:
            raise
        except AssertionError as error:
            if REFUSED in str(error):  # forbid()'s message: the answer calls the implementation it is to write
                refuse_call(what, error)
            fail(f"{what} failed an assertion{error_said(error, 300)}", key="raised")
        except NotImplementedError:
            fail(f"{what} is not written yet (it raises NotImplementedError).",
                 hint="replace `raise NotImplementedError()` in the answer cell with your code, then run that cell",
                 key="not_written")
        except KeyError as error:
            fail(f"{what} raised KeyError" + (f": {error}" if visible else " (a key this checkpoint does not have)"),
                 hint="read only the checkpoint's own keys (print them); loop "
                 "over range(config.num_hidden_layers), not a fixed number of layers")
        except Exception as error:
            fail(f"{what} raised {type(error).__name__}{error_said(error, 400)}", key="raised")
    if not isinstance(found, Mapping) or not all(isinstance(v, torch.Tensor) for v in found.values()):
        fail(f"{what} must return a dict {{parameter name of BertBase: tensor}}.", "a dict of tensors",
             wire.type_name(found) if not isinstance(found, Mapping) else "a dict with values that are not tensors",
             "build a new dict; BertBase(config).load_state_dict(it) must accept it")
    missing = [k for k in right if k not in found]
    unexpected = [k for k in found if k not in right]
    if missing or unexpected:
        hint, key = _mapping_keys_hint(missing, unexpected, mapping)
        fail(f"{what}: the keys are not BertBase's parameter names.",
             f"the {len(right)} names of BertBase(config).state_dict()" if visible else "BertBase's names",
             "; ".join(p for p in (missing and f"missing {listed_names(missing, counts=visible)}",
                                   unexpected and f"unexpected {listed_names(unexpected, counts=visible)}") if p),
             hint, key=key)
    resized = [k for k in right if tuple(found[k].shape) != tuple(right[k].shape)]
    if resized:
        name = resized[0]
        hint, key = _mapping_shape_hint(name, found[name], right[name], checkpoint, mapping)
        fail(f"{what}: tensors of the wrong shape: {listed_names(resized, counts=visible)}.",
             f"{name} {tuple(right[name].shape)}" if visible else None,
             f"{tuple(found[name].shape)}" if visible else None,
             hint, key=key)
    wrong = [k for k in right if not torch.equal(found[k].to(right[k].dtype), right[k])]
    if wrong:
        kinds: dict = {}
        for name in wrong:
            kinds.setdefault(_mapping_value_mistake(name, found[name], right, checkpoint, mapping), []).append(name)
        (kind, hint, key), names = max(kinds.items(), key=lambda item: len(item[1]))
        others = " (and other tensors wrong otherwise)" if len(names) < len(wrong) else ""
        fail(f"{what}: tensors hold the wrong values: {listed_names(names, counts=visible)}{others}.",
             "each parameter filled from its checkpoint tensor(s)", kind, hint, key=key)
    if reference is None:  # held back (translab.stages): every tensor is the right one, so are the outputs
        return config, found, case["expected"], case
    reference.load_state_dict(dict(found), strict=True)
    real = ~case["padding"]
    with torch.no_grad():
        out = reference(case["ids"], case["padding"], case["types"])
    if not tensors_close(out[real], case["expected"][real], tol):
        fail(f"{what}: the encoder loaded with your tensors does not reproduce the reference outputs.",
             hint="every tensor must be copied unchanged, in float32")
    return config, found, out, case


@checked
def check_weight_mapping(convert_checkpoint: Callable, split: str = "visible", BertBase: type | None = None) -> None:
    """convert_checkpoint(checkpoint, config) -> BertBase's state dict: loaded into the reference encoder, the real
    all-MiniLM-L6-v2 reproduces the reference outputs on sentences (hidden: other sentences, and a small
    checkpoint of another shape).  With ``BertBase``, also says (not graded) whether your base computes the same."""
    visible = split == "visible"
    cases = references.load("bert_mapping")[split]
    tol = references.tolerance("bert_mapping")
    results = []
    for case in cases:
        real = case["checkpoint"] is None
        what = ("convert_checkpoint(checkpoint, config) on all-MiniLM-L6-v2" + ("" if visible else ", hidden sentences")
                if real else "convert_checkpoint on another (hidden) checkpoint")
        results.append(_check_mapping_case(convert_checkpoint, case, what, visible))
    config, found, out, case = results[0]
    sentences = int(case["ids"].size(0))
    message = (f"weight mapping: all {len(found)} tensors of all-MiniLM-L6-v2 in place (query, key, value packed in "
               f"order); the reference encoder loaded with them reproduces its outputs on {sentences} "
               + ("sentences" if visible else "hidden sentences") + (" and on another checkpoint" if len(cases) > 1 else ""))
    if BertBase is not None:
        try:
            with forbid_bert():
                model = call_student("BertBase(config)", BertBase, config)
                model.load_state_dict(dict(found), strict=True)
                model.eval()
                with torch.no_grad():
                    mine = call_student("BertBase.forward", model, case["ids"], case["padding"], case["types"])
            same = tensors_close(mine[~case["padding"]], out[~case["padding"]], tol)
            note = ("your BertBase, loaded with the same tensors, computes the same outputs" if same else
                    "not graded here: your BertBase loads these tensors but computes other outputs (see its check)")
        except Exception as error:  # noqa: BLE001 - the base is graded by its own check
            note = "not graded here: your BertBase could not load or run them" + (
                f" ({type(error).__name__})" if not visible else f" ({str(error).splitlines()[0][:120]})")
        message += f"\n    {note}"
    report_ok(message)


# --- the parameter count
