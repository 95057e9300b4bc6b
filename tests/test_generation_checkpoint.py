import pytest
import torch

from translab.budget import FAST, FULL, get_budget
from translab.checkpoint import load_checkpoint, save_checkpoint
from translab.data import BOS_ID, EOS_ID
from translab.generation import greedy_generate, greedy_generate_ids
from translab.model import ModelConfig, build_language_model


def biased_model(ntoken, favourite):
    """A language model whose output bias makes ``favourite`` the argmax everywhere."""
    torch.manual_seed(0)
    model = build_language_model(ModelConfig(ntoken, nhid=8, nlayers=1, nhead=2, dropout=0.0))
    with torch.no_grad():
        model.head.decoder.weight.zero_()
        model.head.decoder.bias.zero_()
        model.head.decoder.bias[favourite] = 5.0
    return model


def test_greedy_stops_at_eos():
    assert greedy_generate_ids(biased_model(20, EOS_ID), [BOS_ID, 7], max_new_tokens=10) == []


def test_greedy_stops_at_max_length():
    assert greedy_generate_ids(biased_model(20, 11), [BOS_ID], max_new_tokens=6) == [11] * 6


def test_greedy_takes_the_argmax_at_each_step():
    torch.manual_seed(1)
    model = build_language_model(ModelConfig(30, nhid=16, nlayers=1, nhead=2, dropout=0.0)).eval()
    ids = [BOS_ID, 12]
    expected = []
    with torch.no_grad():
        for _ in range(5):
            nxt = int(model(torch.tensor([ids + expected]))[0, -1].argmax())
            if nxt == EOS_ID:
                break
            expected.append(nxt)
    assert greedy_generate_ids(model, ids, 5) == expected
    with pytest.raises(ValueError):
        greedy_generate_ids(model, [], 3)


def test_greedy_generate_decodes_text(tokenizer):
    favourite = tokenizer.piece_to_id("▁film")
    model = biased_model(tokenizer.get_piece_size(), favourite)
    assert greedy_generate(model, tokenizer, "The plot", max_new_tokens=3) == "film film film"


def test_checkpoint_round_trip(tmp_path):
    config = ModelConfig(25, nhid=8, nlayers=1, nhead=2, dropout=0.1)
    model = build_language_model(config)
    save_checkpoint(tmp_path / "m.pt", model, config, steps=3)
    loaded, checkpoint = load_checkpoint(tmp_path / "m.pt", map_location="cpu")
    assert checkpoint["extra"] == {"steps": 3} and ModelConfig.from_dict(checkpoint["config"]) == config
    assert not loaded.training
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name


def test_checkpoint_errors_say_what_to_do(tmp_path):
    with pytest.raises(FileNotFoundError, match="make pretrain"):
        load_checkpoint(tmp_path / "absent.pt")
    torch.save({"weights": torch.zeros(1)}, tmp_path / "other.pt")
    with pytest.raises(ValueError, match="not a translab checkpoint"):
        load_checkpoint(tmp_path / "other.pt")
    with pytest.raises(TypeError, match="ModelConfig"):
        save_checkpoint(tmp_path / "x.pt", build_language_model(ModelConfig(5, 4, 1, 2)), {"ntoken": 5})
    with pytest.raises(ValueError, match="unknown model config keys"):
        ModelConfig.from_dict({"ntoken": 5, "n_hid": 4})


@pytest.mark.parametrize("env,expected", [
    ({}, FULL), ({"NBGRADER_EXECUTION": "autograde"}, FAST), ({"NBGRADER_EXECUTION": "validate"}, FAST),
    ({"TRANSLAB_FAST": "1"}, FAST), ({"TRANSLAB_FAST": "0"}, FULL),
])
def test_budget_follows_the_environment(monkeypatch, env, expected):
    monkeypatch.delenv("NBGRADER_EXECUTION", raising=False)
    monkeypatch.delenv("TRANSLAB_FAST", raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert get_budget() == expected


def test_fast_budget_is_smaller_everywhere():
    for field in FULL.__dataclass_fields__:
        if field != "name":
            assert getattr(FAST, field) < getattr(FULL, field), field
