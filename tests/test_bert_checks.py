"""The checks of part 6 (notebook 06): a right answer passes, each usual mistake is named, hidden feedback
does not show hidden inputs or expected values."""
from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from grader import references as builders
from translab import checks, references
from translab.bert import BertConfig

# ---------------------------------------------------------------- right answers (as in the solution notebook)


class BertBase(nn.Module):
    def __init__(self, config: BertConfig, *, scale=False, activation="gelu", norm_first=False, eps=None,
                 embedding_norm=True, token_types=True, mask=True, types_used=True):
        super().__init__()
        self.config, self.scale, self.mask, self.types_used = config, scale, mask, types_used
        d = config.hidden_size
        eps = config.layer_norm_eps if eps is None else eps
        self.word_embeddings = nn.Embedding(config.vocab_size, d)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, d)
        if token_types:
            self.token_type_embeddings = nn.Embedding(config.type_vocab_size, d)
        self.embedding_norm = nn.LayerNorm(d, eps=eps)
        self.use_norm = embedding_norm
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        layer = nn.TransformerEncoderLayer(d, config.num_attention_heads, config.intermediate_size,
                                           config.hidden_dropout_prob, activation=activation, layer_norm_eps=eps,
                                           batch_first=True, norm_first=norm_first)
        self.encoder = nn.TransformerEncoder(layer, config.num_hidden_layers, enable_nested_tensor=False)

    def forward(self, input_ids, padding_mask=None, token_type_ids=None):
        if token_type_ids is None or not self.types_used:
            token_type_ids = torch.zeros_like(input_ids)
        x = self.word_embeddings(input_ids) * (self.config.hidden_size ** 0.5 if self.scale else 1.0)
        x = x + self.position_embeddings(torch.arange(input_ids.size(1)))
        if hasattr(self, "token_type_embeddings"):
            x = x + self.token_type_embeddings(token_type_ids)
        x = self.dropout(self.embedding_norm(x) if self.use_norm else x)
        return self.encoder(x, src_key_padding_mask=padding_mask if self.mask else None)


def variant(**changes):
    class Variant(BertBase):
        def __init__(self, config):
            super().__init__(config, **changes)
    return Variant


LAYER_PARTS = (("self_attn.out_proj", "attention.output.dense"), ("norm1", "attention.output.LayerNorm"),
               ("linear1", "intermediate.dense"), ("linear2", "output.dense"), ("norm2", "output.LayerNorm"))


def convert_checkpoint(checkpoint, config, order=("query", "key", "value"), parts=LAYER_PARTS, transpose_qkv=False,
                       layers=None, skip=(), extra=()):
    state = {
        "word_embeddings.weight": checkpoint["embeddings.word_embeddings.weight"],
        "position_embeddings.weight": checkpoint["embeddings.position_embeddings.weight"],
        "token_type_embeddings.weight": checkpoint["embeddings.token_type_embeddings.weight"],
        "embedding_norm.weight": checkpoint["embeddings.LayerNorm.weight"],
        "embedding_norm.bias": checkpoint["embeddings.LayerNorm.bias"],
    }
    for i in range(config.num_hidden_layers if layers is None else layers):
        theirs, ours = f"encoder.layer.{i}.", f"encoder.layers.{i}."
        for kind in ("weight", "bias"):
            qkv = [checkpoint[f"{theirs}attention.self.{part}.{kind}"] for part in order]
            if transpose_qkv and kind == "weight":
                qkv = [t.T for t in qkv]
            state[f"{ours}self_attn.in_proj_{kind}"] = torch.cat(qkv)
            for mine, source in parts:
                state[f"{ours}{mine}.{kind}"] = checkpoint[f"{theirs}{source}.{kind}"]
    for name in [n for n in state if any(re.search(pattern, n) for pattern in skip)]:
        del state[name]
    state.update({key: checkpoint[key] for key in extra})
    return state


def mapping(**changes):
    return lambda checkpoint, config: convert_checkpoint(checkpoint, config, **changes)


def count_bert_parameters(config, pooler=False):
    d, f = config.hidden_size, config.intermediate_size
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    layer = 3 * (d * d + d) + (d * d + d) + (d * f + f) + (f * d + d) + 2 * 2 * d
    return embeddings + config.num_hidden_layers * layer + (d * d + d if pooler else 0)


class BertClassifier(nn.Module):
    def __init__(self, encoder, nclasses, pooling="mean", pass_mask=True):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(encoder.config.hidden_size, nclasses)
        self.pooling, self.pass_mask = pooling, pass_mask

    def forward(self, input_ids, padding_mask=None, token_type_ids=None):
        hidden = self.encoder(input_ids, padding_mask if self.pass_mask else None, token_type_ids)
        keep = torch.ones(hidden.shape[:2], dtype=torch.bool) if padding_mask is None else ~padding_mask
        if self.pooling == "mean":
            pooled = (hidden * keep.unsqueeze(-1)).sum(1) / keep.sum(1, keepdim=True)
        elif self.pooling == "mean_all":
            pooled = hidden.mean(1)
        elif self.pooling == "cls":
            pooled = hidden[:, 0]
        elif self.pooling == "last_real":
            pooled = hidden[torch.arange(len(hidden)), keep.sum(1) - 1]
        elif self.pooling == "sum":
            pooled = (hidden * keep.unsqueeze(-1)).sum(1)
        return self.head(pooled)


def classifier(**changes):
    return lambda encoder, nclasses: BertClassifier(encoder, nclasses, **changes)


# ---------------------------------------------------------------- right answers pass, without stderr

@pytest.mark.parametrize("split", ["visible", "hidden"])
def test_right_answers_pass_every_check(split, capfd):
    checks.check_bert_base(BertBase, split=split)
    checks.check_weight_mapping(convert_checkpoint, split=split, BertBase=BertBase)
    checks.check_bert_parameter_count(count_bert_parameters, split=split)
    checks.check_bert_classifier(BertClassifier, split=split)
    out, err = capfd.readouterr()
    assert err == ""
    assert out.count("ok  ") == 4
    assert "your BertBase, loaded with the same tensors, computes the same outputs" in out


def test_visible_count_states_the_two_numbers(capsys):
    checks.check_bert_parameter_count(count_bert_parameters)
    assert "22,565,376 parameters without the pooler, 22,713,216 with it" in capsys.readouterr().out


def failure(check, answer, split="visible", **kwargs) -> str:
    with pytest.raises(checks.CheckFailed) as caught:
        check(answer, split=split, **kwargs)
    return str(caught.value)


# ---------------------------------------------------------------- the base

@pytest.mark.parametrize("answer,phrase", [
    (variant(scale=True), "as in part 2. BERT does not scale them"),
    (variant(activation="relu"), "BERT uses GELU"),
    (variant(norm_first=True), "BERT is post-LN"),
    (variant(eps=1e-5), "BERT's LayerNorms use eps=1e-12"),
    (variant(embedding_norm=False), "the embedding LayerNorm is not applied"),
    (variant(token_types=False), "BERT adds a token-type (segment) embedding"),
    (variant(types_used=False), "token_type_ids is ignored"),
    (variant(mask=False), "padding_mask is not passed to the encoder"),
])
def test_base_mistakes_are_named(answer, phrase):
    assert phrase in failure(checks.check_bert_base, answer)


def test_a_base_built_for_fixed_sizes_fails_the_hidden_check():
    class FixedHeads(BertBase):
        def __init__(self, config):
            super().__init__(BertConfig(**{**config.__dict__, "num_attention_heads": 2}))

    checks.check_bert_base(FixedHeads)  # the visible configuration has 2 heads
    message = failure(checks.check_bert_base, FixedHeads, split="hidden")
    assert "hidden configuration" in message


def test_a_stub_says_it_is_not_written():
    class Stub(nn.Module):
        def __init__(self, config):
            raise NotImplementedError()

    assert "is not written yet" in failure(checks.check_bert_base, Stub)


def test_calling_translab_encoder_is_refused():
    from translab.bert import BertEncoder

    class Borrowed(BertEncoder):
        pass

    with pytest.raises(AssertionError, match="translab's own BertEncoder"):
        checks.check_bert_base(Borrowed)


# ---------------------------------------------------------------- the weight mapping

@pytest.mark.parametrize("answer,phrase", [
    (mapping(order=("key", "query", "value")), "packed in the order (key, query, value)"),
    (mapping(order=("value", "key", "query")), "packed in the order (value, key, query)"),
    (mapping(transpose_qkv=True), "the query, key and value matrices are transposed"),
    (mapping(skip=[r"in_proj_bias"]), "in_proj_bias is missing"),
    (mapping(skip=[r"linear2\.bias"]), "a bias is missing"),
    (mapping(skip=[r"norm2\."]), "a LayerNorm is missing"),
    (mapping(skip=[r"^embedding_norm"]), "a LayerNorm is missing"),
    (mapping(parts=(LAYER_PARTS[0], ("norm1", "output.LayerNorm"), *LAYER_PARTS[2:4],
                    ("norm2", "attention.output.LayerNorm"))), "norm1 and norm2 are swapped"),
    (mapping(extra=("pooler.dense.weight", "pooler.dense.bias")), "leave out the pooler"),
    (mapping(parts=(("self_attn.out_proj", "output.dense"), *LAYER_PARTS[1:])),
     "the checkpoint's output.dense fills linear2; self_attn.out_proj comes from attention.output.dense"),
    (mapping(parts=(*LAYER_PARTS[:2], ("linear1", "output.dense"), ("linear2", "intermediate.dense"),
                    LAYER_PARTS[4])), "linear1 comes from intermediate.dense"),
])
def test_mapping_mistakes_are_named(answer, phrase):
    assert phrase in failure(checks.check_weight_mapping, answer)


def test_a_transposed_out_projection_is_named():
    def transposed(checkpoint, config):
        state = convert_checkpoint(checkpoint, config)
        return {k: v.T if k.endswith("out_proj.weight") else v for k, v in state.items()}

    assert "a weight matrix is transposed" in failure(checks.check_weight_mapping, transposed)


def test_checkpoint_names_left_as_they_are_are_named():
    message = failure(checks.check_weight_mapping, lambda checkpoint, config: dict(checkpoint))
    assert "not the checkpoint's" in message or "leave out the pooler" in message


def test_a_fixed_layer_count_passes_visible_and_fails_hidden():
    fixed = mapping(layers=6)
    checks.check_weight_mapping(fixed)
    message = failure(checks.check_weight_mapping, fixed, split="hidden")
    assert "loop over range(config.num_hidden_layers)" in message


def test_a_right_mapping_that_empties_the_dict_it_is_given_passes():
    """Some conversions pop each tensor as they place it, to see what is left over: the check compares with its
    own checkpoint, never with what the answer left of the one it was given."""
    def consuming(checkpoint, config):
        state = convert_checkpoint(checkpoint, config)
        checkpoint.clear()
        return state

    checks.check_weight_mapping(consuming)
    checks.check_weight_mapping(consuming, split="hidden")


def test_a_mapping_that_zeroes_its_input_after_placing_it_fails_on_what_it_returns():
    """The tensors returned are the ones given (no copy): changing those in place changes the answer."""
    def zeroing(checkpoint, config):
        state = convert_checkpoint(checkpoint, config)
        for tensor in checkpoint.values():
            tensor.zero_()
        return state

    assert "tensors hold the wrong values" in failure(checks.check_weight_mapping, zeroing)


def test_the_mapping_check_leaves_no_answer_unchecked_when_the_base_is_wrong(capsys):
    """The mapping is graded on the reference encoder; a wrong BertBase only adds a note."""
    checks.check_weight_mapping(convert_checkpoint, BertBase=variant(activation="relu"))
    assert "not graded here: your BertBase loads these tensors but computes other outputs" in capsys.readouterr().out


def test_hidden_mapping_feedback_does_not_show_the_hidden_sentences():
    text = failure(checks.check_weight_mapping, mapping(order=("key", "query", "value")), split="hidden")
    for sentence in builders.BERT_SENTENCES["hidden"]:
        for piece in ([sentence] if isinstance(sentence, str) else sentence):
            assert piece not in text


# ---------------------------------------------------------------- the parameter count

def miscount(delta=None, **changes):
    def count(config, pooler=False):
        fields = {**config.__dict__, **changes}
        return count_bert_parameters(BertConfig(**fields), pooler) + (delta(config, pooler) if delta else 0)
    return count


@pytest.mark.parametrize("answer,key,phrase", [
    (lambda config, pooler=False: count_bert_parameters(config, True), "bert_count.pooler",
     "the pooler is counted when pooler=False"),
    (miscount(lambda c, p: -c.num_hidden_layers * 4 * c.hidden_size), "bert_count.layer",
     "leaves out exactly the two LayerNorms (4d)"),
    (miscount(lambda c, p: -c.max_position_embeddings * c.hidden_size), "bert_count.positions",
     "BERT learns its positions"),
    (miscount(lambda c, p: c.max_position_embeddings), "bert_count.positions", "a constant buffer of the checkpoint"),
    (miscount(intermediate_size=384), "bert_count.feed_forward_width", "the feed-forward is counted with another width"),
    (miscount(lambda c, p: -2 * c.hidden_size), "bert_count.embedding_norm", "the embedding LayerNorm"),
])
def test_count_mistakes_are_measured_and_named_alone(answer, key, phrase):
    """Each mistake is measured by changing one size of the check's own configuration (issue 82): the finding
    says what changed by how much, and names the one term the measurement points to, nothing else."""
    message = failure(checks.check_bert_parameter_count, answer)
    assert phrase in message
    assert message.rstrip().endswith(f"[diagnosis: {key}]"), message


def test_a_count_with_two_mistakes_hears_of_both():
    message = failure(checks.check_bert_parameter_count,
                      miscount(lambda c, p: -c.max_position_embeddings * c.hidden_size - 2 * c.hidden_size))
    assert "BERT learns its positions" in message and "the embedding LayerNorm" in message


def test_hard_coded_counts_fail_both_checks_without_revealing_the_hidden_numbers():
    def hard_coded(config, pooler=False):
        return 22_713_216 if pooler else 22_565_376

    assert "the count is the same whatever the configuration" in failure(checks.check_bert_parameter_count,
                                                                         hard_coded)
    message = failure(checks.check_bert_parameter_count, hard_coded, split="hidden")
    hidden = references.load("bert_parameters")["hidden"]
    assert not any(f"{case['expected']:,}" in message or str(case["expected"]) in message for case in hidden)
    assert "[diagnosis: bert_count.constant]" in message


# ---------------------------------------------------------------- the classifier

@pytest.mark.parametrize("answer,phrase", [
    (classifier(pooling="mean_all"), "average the real tokens only"),
    (classifier(pooling="cls"), "the first token ([CLS]) alone"),
    (classifier(pooling="last_real"), "that is part 4's readout"),
    (classifier(pooling="sum"), "divide by the number of real tokens"),
    (classifier(pass_mask=False), "pass padding_mask to the encoder too"),
])
def test_pooling_mistakes_are_named(answer, phrase):
    assert phrase in failure(checks.check_bert_classifier, answer)


def test_a_frozen_encoder_is_named():
    def frozen(encoder, nclasses):
        model = BertClassifier(encoder, nclasses)
        for p in model.encoder.parameters():
            p.requires_grad_(False)
        return model

    assert "some parameters are frozen" in failure(checks.check_bert_classifier, frozen)


def test_a_head_under_another_name_is_named():
    class Renamed(BertClassifier):
        def __init__(self, encoder, nclasses):
            super().__init__(encoder, nclasses)
            self.classifier = self.head
            del self.head

        def forward(self, input_ids, padding_mask=None, token_type_ids=None):
            raise AssertionError("never run")

    assert "name the new linear layer self.head" in failure(checks.check_bert_classifier, Renamed)


def test_a_mapping_that_calls_translab_is_refused():
    from translab.bert import convert_checkpoint as translabs

    assert "calls translab's own convert_checkpoint" in failure(checks.check_weight_mapping, translabs)
