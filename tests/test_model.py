import math

import pytest
import torch

from translab.model import (ClassificationHead, ModelConfig, LanguageModelHead, Model, PositionalEncoding, TransformerModel,
                            build_classifier, build_language_model, generate_square_subsequent_mask,
                            last_token_states)


@pytest.mark.parametrize("size", [1, 2, 5, 17])
def test_mask_matches_pytorch(size):
    mask = generate_square_subsequent_mask(size)
    assert mask.dtype == torch.float32
    assert torch.equal(mask, torch.nn.Transformer.generate_square_subsequent_mask(size))


def test_mask_zero_on_and_below_diagonal_minus_inf_above():
    mask = generate_square_subsequent_mask(4)
    for i in range(4):
        for j in range(4):
            assert mask[i, j] == (0.0 if j <= i else float("-inf"))


def test_mask_rejects_bad_size():
    with pytest.raises(ValueError, match="positive"):
        generate_square_subsequent_mask(0)


def test_masked_attention_gives_zero_weight_to_the_future():
    scores = torch.randn(6, 6)
    weights = torch.softmax(scores + generate_square_subsequent_mask(6), dim=-1)
    assert torch.all(weights.triu(diagonal=1) == 0)
    assert torch.allclose(weights.sum(-1), torch.ones(6))


def test_positional_encoding_formula_and_buffer():
    d_model, max_len = 6, 50
    encoding = PositionalEncoding(d_model, dropout=0.0, max_len=max_len)
    assert list(encoding.parameters()) == []  # fixed, not trained
    assert "pe" in dict(encoding.named_buffers())
    pe = encoding.pe
    for pos in (0, 1, 7, 49):
        for i in range(d_model // 2):
            angle = pos / (10000 ** (2 * i / d_model))
            assert pe[pos, 2 * i].item() == pytest.approx(math.sin(angle), abs=1e-5)
            assert pe[pos, 2 * i + 1].item() == pytest.approx(math.cos(angle), abs=1e-5)
    x = torch.zeros(2, 5, d_model)
    assert torch.allclose(encoding(x), pe[:5].expand(2, 5, d_model))


def test_positional_encoding_odd_dimension_and_length_error():
    assert PositionalEncoding(5, 0.0, 10).pe.shape == (10, 5)
    with pytest.raises(ValueError, match="max_len"):
        PositionalEncoding(4, 0.0, max_len=3)(torch.zeros(1, 4, 4))


def test_base_scales_embedding_and_adds_positions():
    torch.manual_seed(0)
    base = TransformerModel(ntoken=30, nhead=2, nhid=8, nlayers=1, dropout=0.0).eval()
    src = torch.randint(0, 30, (2, 5))
    expected_input = base.encoder(src) * math.sqrt(8) + base.pos_encoder.pe[:5]
    expected = base.transformer_encoder(expected_input, mask=generate_square_subsequent_mask(5))
    assert torch.allclose(base(src, generate_square_subsequent_mask(5)), expected, atol=1e-6)
    layer = base.transformer_encoder.layers[0]
    assert layer.linear1.out_features == 8  # dim_feedforward = nhid, as in the original lab
    assert layer.self_attn.batch_first


def test_base_rejects_indivisible_heads():
    with pytest.raises(ValueError, match="divisible"):
        TransformerModel(10, nhead=3, nhid=8, nlayers=1)


def test_causal_model_ignores_the_future():
    torch.manual_seed(0)
    model = build_language_model(ModelConfig(50, nhid=16, nlayers=2, nhead=2, dropout=0.0)).eval()
    src = torch.randint(5, 50, (1, 8))
    changed = src.clone()
    changed[0, 5:] = (changed[0, 5:] + 1) % 50
    with torch.no_grad():
        a, b = model(src), model(changed)
    assert torch.allclose(a[0, :5], b[0, :5], atol=1e-5)
    assert not torch.allclose(a[0, 5:], b[0, 5:])


def test_classifier_reads_last_real_token_not_padding():
    """A padded sentence must get exactly the logits it gets alone (the ALTEGRAD bug read output[-1])."""
    torch.manual_seed(0)
    model = build_classifier(ModelConfig(40, nhid=16, nlayers=2, nhead=2, dropout=0.0), nclasses=3).eval()
    short = torch.tensor([[2, 7, 9, 3]])
    padded = torch.tensor([[2, 7, 9, 3, 0, 0, 0], [2, 5, 6, 8, 11, 12, 3]])
    padding = padded.eq(0)
    with torch.no_grad():
        alone = model(short)
        batch = model(padded, padding)
        wrong = model.head.decoder(model.base(padded, generate_square_subsequent_mask(7), padding)[:, -1])
    assert torch.allclose(batch[0], alone[0], atol=1e-5)
    assert not torch.allclose(wrong[0], alone[0], atol=1e-3)


def test_last_token_states_and_all_padding_error():
    hidden = torch.arange(2 * 4 * 1, dtype=torch.float32).view(2, 4, 1)
    padding = torch.tensor([[False, False, True, True], [False, False, False, False]])
    assert last_token_states(hidden, padding).flatten().tolist() == [1.0, 7.0]
    assert last_token_states(hidden, None).flatten().tolist() == [3.0, 7.0]
    with pytest.raises(ValueError, match="all padding"):
        last_token_states(hidden, torch.ones(2, 4, dtype=torch.bool))


def test_heads_and_model_shapes_without_warnings(recwarn):
    base = TransformerModel(20, 2, 8, 2, 0.1)
    src = torch.randint(0, 20, (3, 6))
    padding = torch.zeros(3, 6, dtype=torch.bool)
    padding[0, 4:] = True
    for training in (True, False):
        lm = Model(base, LanguageModelHead(8, 20)).train(training)
        clf = Model(base, ClassificationHead(8, 2)).train(training)
        assert lm(src, padding).shape == (3, 6, 20)
        assert clf(src, padding).shape == (3, 2)
        assert lm(src, causal=False).shape == (3, 6, 20)
    assert not [w for w in recwarn if "torch" in str(w.filename)], [str(w.message) for w in recwarn]


def test_transfer_shares_the_base():
    lm = build_language_model(ModelConfig(30, nhid=8, nlayers=1, nhead=2))
    classifier = build_classifier(ModelConfig(30, nhid=8, nlayers=1, nhead=2), nclasses=2, base=lm.base)
    assert classifier.base is lm.base
    assert isinstance(classifier.head, ClassificationHead)
