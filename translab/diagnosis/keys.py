"""Every misconception a check names has a stable key: a failing check ends its error value with
``[diagnosis: key ...]`` (alternatives that give identical numbers joined by ``|``), which ``grader.report`` counts
and describes with ``describe``."""
from __future__ import annotations

from ..relations import KEYS as RELATION_KEYS
from .counts import MISTAKES_BY_KEY

KEYS = {
    "not_written": "the answer is not written yet (NotImplementedError)",
    "calls_translab": "the answer calls translab's own implementation",
    "raised": "the answer raised an exception",
    "mutates_input": "the answer changes a tensor it was given, in place",
    "stderr_warning": "the answer printed a warning to stderr",
    "wrong_type": "the answer returns the wrong type (not a tensor / not a number)",
    "wrong_dtype": "the answer returns the wrong dtype",
    "wrong_device": "the answer returns a tensor on another device",
    "wrong_shape": "the answer returns the wrong shape",
    "checker_error": "the check could not compare the answer (an unexpected kind of answer)",
    "mask.ones": "a 'keep' mask of 1s on and below the diagonal instead of 0 / -inf",
    "mask.zero_one": "a mask of 0 and 1 instead of 0 / -inf",
    "mask.boolean": "a boolean mask instead of an additive float mask",
    "mask.integer": "an integer mask (cannot hold -inf)",
    "mask.diagonal_blocked": "the diagonal is blocked (triu without diagonal=1)",
    "mask.blocks_past": "the mask blocks the past instead of the future (tril instead of triu)",
    "mask.nonzero_allowed": "allowed positions are not 0",
    "mask.finite_negative": "a large negative number instead of -inf",
    "mask.nan": "NaN where the mask must be 0 (a 0/1 triangle multiplied by -inf)",
    "pe.trainable": "the positional encoding is a trainable parameter instead of a buffer",
    "pe.dtype": "the positional-encoding table is not float32 (e.g. float64)",
    "pe.sin_cos_swapped": "sin and cos swapped",
    "pe.exponent_i": "exponent i/d_model instead of 2i/d_model",
    "pe.base_100": "base 100 instead of 10000",
    "pe.halves": "sin in the first half, cos in the second, instead of interleaved",
    "pe.positions_from_1": "positions counted from 1 instead of 0",
    "pe.rows_order": "table rows reversed or transposed",
    "pe.multiplied": "the encoding multiplies the input instead of being added",
    "pe.nothing_added": "the positional encoding returns its input unchanged",
    "pe.not_batch_first": "the encoding is added along the wrong axis (not batch-first)",
    "pe.scales_input": "the encoding multiplies its input (by sqrt(d_model)) before adding the table",
    "attention.no_scale": "attention scores not divided by sqrt(d)",
    "attention.scale_by_d": "attention scores divided by d instead of sqrt(d)",
    "attention.softmax_wrong_axis": "attention softmax over the queries (dim=-2)",
    "attention.mask_ignored": "the attention mask is not added to the scores",
    "attention.mask_as_keep": "the additive mask read as a keep-mask (masked_fill(mask == 0, ...)): only blocked keys "
                              "weigh",
    "attention.mask_after_softmax": "the mask added (or multiplied) after the softmax: -inf or NaN in the weights",
    "attention.mask_multiplied": "the additive mask multiplied into the scores: allowed scores become 0, blocked ones "
                                 "+-inf or NaN",
    "attention.zeroed_after_softmax": "masked weights zeroed after the softmax: rows no longer sum to 1",
    "attention.not_softmax": "attention weights that are not a softmax over the keys",
    "attention.three_axes_only": "attention written for 3-D inputs only (bmm, 'bqd' einsum, transpose(1, 2))",
    "mha.qkv_order": "q, k, v taken from in_proj_weight in the wrong order",
    "mha.split_no_transpose": "heads split by view(batch, heads, seq, d_head), cutting the sequence",
    "mha.merge_no_transpose": "heads merged without transposing back",
    "mha.scale_by_d_model": "multi-head scores divided by sqrt(d_model) instead of sqrt(d_head)",
    "mha.no_out_proj": "no output projection after merging the heads",
    "mha.no_in_bias": "in_proj_bias not added",
    "mha.weight_not_transposed": "projections computed as x @ W instead of x @ W.T",
    "mha.weights_averaged": "the weights averaged over the heads (nn.MultiheadAttention's default)",
    "model.load_state": "the model's parameter names or sizes do not fit the skeleton",
    "model.no_scale": "embeddings not multiplied by sqrt(nhid)",
    "model.no_positions": "positional encoding not applied",
    "model.no_causal_mask": "src_mask not passed to the encoder",
    "model.no_padding_mask": "src_key_padding_mask not passed to the encoder",
    "model.masks_not_optional": "forward(src) without masks fails or differs",
    "heads.lm_softmax": "the LM head applies a softmax",
    "heads.last_position": "the classifier reads position -1 (padding for short sentences)",
    "heads.first_position": "the classifier reads the first position",
    "heads.mean": "the classifier averages over all positions, padding included",
    "heads.no_padding_mask_default": "the classifier without a padding mask does not read the last position",
    "model.not_registered": "Model does not register base and head as submodules",
    "model.not_causal": "Model(src) is not causal",
    "model.causal_false_masks": "causal=False still masks the future",
    "model.padding_not_to_head": "Model does not pass the padding mask on to the head",
    "model.mask_from_batch": "Model builds the causal mask from src.size(0), the batch size",
    "count.not_a_number": "the count is not a number (a string, a non-integral float, ...)",
    "count.depends_on_nhead": "the count depends on nhead",
    "count.unexplained": "a wrong count that matches no known combination of mistakes",
    "model.layer_size": "a layer of another size than the reference's (where the size comes from named)",
    "model.renamed": "a layer under another attribute name than the skeleton's",
    "model.missing_layer": "a layer of the reference missing from the module",
    "model.extra_layer": "a layer the reference does not have",
    "count.other_configuration": "a stated count that is right for another configuration or head",
    "count.another_variant": "both stated counts are another configuration's: another student's variant, or the "
                             "worked example (numbers passed around, or the wrong configuration)",
    "count.constant": "the count is a constant: the formula does not use the sizes",
    "count.coefficients": "the count is an exact formula of the sizes with other coefficients (fitted)",
    **{f"count.ignores_{name}": f"the count does not change with {name}"
       for name in ("ntoken", "nhid", "nlayers", "dim_feedforward", "nclasses")},
    "targets.copy": "targets equal inputs",
    "targets.swapped": "inputs and targets swapped",
    "targets.rolled": "targets made with roll: the last target wraps round to the first token",
    "targets.lengths_differ": "inputs keep every token, targets one fewer",
    "targets.batch_axis": "the shift runs along the batch axis instead of the sequence",
    "loss.not_scalar": "the loss is not a scalar tensor",
    "loss.detached": "the loss is detached from the graph",
    "loss.softmax_first": "softmax applied before CrossEntropyLoss",
    "loss.padding_counted": "padding positions counted in the loss",
    "loss.sum": "the loss is summed instead of averaged",
    "loss.nll_on_logits": "nll_loss on raw logits (it expects log-probabilities)",
    "loss.class_axis": "logits handed to cross-entropy as (batch, seq, vocab): the classes belong on axis 1",
    "greedy.returns_prompt": "greedy generation returns the prompt too",
    "greedy.includes_eos": "greedy generation includes the end token",
    "greedy.no_stop": "greedy generation does not stop at the end token",
    "greedy.no_eval": "greedy generation without model.eval() (dropout on)",
    "greedy.too_few": "greedy generation stops one token before max_new_tokens",
    "greedy.wrong_position": "greedy generation reads the first position's logits, not the last one's",
    "accuracy.count": "accuracy returned as a count",
    "accuracy.percentage": "accuracy returned as a percentage",
    "accuracy.no_padding_mask": "accuracy ignores the padding mask",
    "accuracy.no_eval": "accuracy without model.eval() / no_grad",
    "transfer.changes_lm": "transfer changes the pretrained LM",
    "transfer.not_pretrained": "the classifier's base does not hold the pretrained weights",
    "transfer.shared_weights": "the classifier shares weights with the pretrained LM (no deepcopy)",
    "transfer.keeps_lm_head": "the classifier keeps the LM head",
    "transfer.frozen": "some parameters are frozen",
    "masking.in_place": "mask_tokens modifies ids in place",
    "masking.special_chosen": "special tokens chosen for prediction",
    "masking.special_changed": "special tokens changed in the inputs",
    "masking.labels_everywhere": "every position has a label",
    "masking.wrong_labels": "labels at chosen positions are not the original tokens",
    "masking.unchosen_changed": "tokens that were not chosen were changed",
    "masking.out_of_vocabulary": "inputs hold ids outside the vocabulary",
    "masking.no_generator": "masking not reproducible with the generator",
    "masking.fixed_choice": "the same choice of tokens for every seed",
    "masking.rate": "the wrong share of tokens chosen",
    "masking.all_masked": "every chosen token replaced by MASK (no 80/10/10)",
    "masking.no_random": "the random 10 % is missing",
    "masking.random_20": "20 % random, none unchanged",
    "masking.split": "the 80/10/10 split is off",
    "masking.few_random_ids": "random replacements use few distinct ids",
    "masking.random_special": "random replacements include special tokens (PAD, MASK, ...)",
    "masking.ignore_index": "labels use a negative ignore index (-100) instead of PAD_ID",
    "mlm.causal": "the MLM loss uses the causal mask",
    "mlm.all_positions": "the MLM loss is computed at every position (PAD_ID counted as a target)",
    "mlm.inputs_as_labels": "the MLM loss predicts the masked inputs instead of the labels",
    "mlm.detached": "the MLM loss carries no gradient",
    "mlm.no_padding_mask": "the MLM loss runs the model without the padding mask",
    "bert.scaled": "BERT's word embeddings scaled by sqrt(hidden_size), as in part 2",
    "bert.no_embedding_norm": "no LayerNorm over the summed embeddings",
    "bert.no_positions": "no position embeddings added",
    "bert.no_token_types": "no token-type embeddings added",
    "bert.types_ignored": "token_type_ids ignored when given",
    "bert.relu": "ReLU in the feed-forward (PyTorch's default) instead of BERT's GELU",
    "bert.tanh_gelu": "the tanh approximation of GELU instead of the exact one",
    "bert.pre_ln": "pre-LN layers (norm_first=True); BERT is post-LN",
    "bert.no_padding_mask": "the padding mask not passed to the encoder",
    "bert.padding_inverted": "the padding mask inverted (Hugging Face's attention_mask convention): NaN outputs",
    "bert.layer_norm_eps": "LayerNorms with PyTorch's eps instead of config.layer_norm_eps",
    "mapping.qkv_order": "query, key and value packed into in_proj in another order",
    "mapping.qkv_axis": "query, key and value stacked along dim=1 (or the stack transposed)",
    "mapping.qkv_not_packed": "query, key and value not packed into in_proj_weight / in_proj_bias",
    "mapping.transposed": "checkpoint weights transposed (nn.Linear and the checkpoint both keep (out, in))",
    "mapping.norms_swapped": "a layer's two LayerNorms swapped",
    "mapping.not_copied": "a tensor left at its initial value (never copied)",
    "mapping.other_layer": "a tensor taken from another layer of the checkpoint",
    "mapping.wrong_source": "a parameter filled from the wrong checkpoint tensor",
    "mapping.values_changed": "tensors copied with other values (scaled, re-initialised, ...)",
    "mapping.checkpoint_names": "the state dict keeps the checkpoint's names instead of BertBase's",
    "mapping.extra_tensors": "the pooler or position_ids kept in the state dict",
    "mapping.missing_tensor": "a parameter missing from the state dict (a bias, a LayerNorm, in_proj_bias)",
    "mapping.layer_count": "a fixed number of layers instead of config.num_hidden_layers",
    "mapping.names": "state-dict names that are not BertBase's",
    "classifier.mean_with_padding": "the classifier averages every position, padding included",
    "classifier.last_real_token": "the classifier reads each sentence's last real token (part 4's readout)",
    "classifier.first_token": "the classifier reads [CLS] alone instead of the mean of the real tokens",
    "classifier.last_position": "the classifier reads the last position (padding for short sentences)",
    "classifier.sum": "the classifier sums the real tokens instead of averaging them",
    "classifier.max": "the classifier max-pools the real tokens instead of averaging them",
    "classifier.no_padding_mask": "the encoder run without the padding mask",
    "classifier.types_ignored": "token_type_ids not passed on to the encoder",
    "classifier.padding_inverted": "the classifier averages the padding (padding_mask read as an attention_mask)",
    **RELATION_KEYS,  # what an output measurably is (translab.relations)
}


# Keys that say why a check could not judge the answer rather than what the student misunderstood.
NOT_MISCONCEPTIONS = frozenset({"not_written", "calls_translab", "raised", "checker_error", "count.unexplained",
                                "count.another_variant"})


def describe(key: str) -> str | None:
    """A short description of a diagnosis key, for the instructor's report (None if unknown)."""
    if key in KEYS:
        return KEYS[key]
    if "|" in key:
        parts = [describe(k) for k in key.split("|")]
        return " = ".join(p for p in parts if p) or None
    if "+" in key:
        parts = [describe(k) for k in key.split("+")]
        return " and ".join(p for p in parts if p) or None
    mistake = MISTAKES_BY_KEY.get(key)
    if mistake is not None:
        return mistake.text.split(";")[0].split(":")[0] if key != "count.depends_on_nhead" else KEYS[key]
    return None


def is_valid_key(key: str) -> bool:
    import re
    return bool(re.fullmatch(r"[a-z0-9_.+|-]{1,200}", key))


