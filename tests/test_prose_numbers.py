"""Numbers typed into the notebooks' markdown that the library can compute: held equal to their source, so that a
change of model, budget or checkpoint fails here instead of leaving the prose wrong (the lab review's list of
hand-typed numbers; results/ figures are held by experiments/tests/test_transfer.py)."""
from __future__ import annotations

import re

import nbformat
import pytest
import torch

from translab import bert, data, params
from translab.bert import BertConfig
from translab.budget import FULL
from translab.contract import ASSIGNMENT
from translab.model import ModelConfig
from translab.paths import REPO_ROOT

SOLUTIONS = REPO_ROOT / "solutions" / ASSIGNMENT


def _cell(notebook: str, cell_id: str) -> str:
    """One cell's source, whitespace folded (prose wraps anywhere)."""
    cells = {cell.id: cell for cell in nbformat.read(SOLUTIONS / f"{notebook}.ipynb", as_version=4).cells}
    return " ".join(cells[cell_id].source.split())


def _millions(count: int) -> str:
    return f"{count / 1e6:.1f} M"


def test_part_2_states_the_worked_example_s_counts():
    """The mission's worked example: ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=nhid."""
    config = ModelConfig(ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=200)
    text = _cell("02_model_and_parameters", "cell-22")
    assert "With ntoken=100, nhid=200, nlayers=4, nhead=2 and dim_feedforward=200, the model has" in text
    assert f"**{params.count_parameters_formula(config):,}** trainable parameters with the LM head" in text
    assert f"**{params.count_parameters_formula(config, nclasses=2):,}** with a 2-class head" in text


def test_part_6_states_minilm_s_shape_and_layer_norm_epsilon():
    config = BertConfig()
    opening = _cell("06_transfer_at_scale", "cell-00")
    assert (f"({config.num_hidden_layers} layers, {config.hidden_size} dimensions, "
            f"{config.num_attention_heads} heads:") in opening
    epsilons = re.search(r"\$10\^\{(-\d+)\}\$ instead of PyTorch's \$10\^\{(-\d+)\}\$",
                         _cell("06_transfer_at_scale", "cell-02"))
    assert epsilons, "cell-02 no longer states the two epsilons as 10^{n}"
    assert (10.0 ** int(epsilons[1]), 10.0 ** int(epsilons[2])) == (config.layer_norm_eps, torch.nn.LayerNorm(1).eps)


def test_the_shipped_config_json_is_the_config_the_prose_describes():
    """The defaults above are all-MiniLM-L6-v2's: read from the fetched checkpoint."""
    try:
        directory = data.minilm_dir()
    except data.DataError as error:
        pytest.fail(f"{error}\nThe pretrained encoder is missing: run `make setup` before `make test`")
    assert BertConfig.from_json(directory / "config.json") == BertConfig()


def test_part_6_s_model_answer_compares_sizes_it_can_compute():
    config = BertConfig()
    answer = _cell("06_transfer_at_scale", "cell-35")
    ours = params.count_parameters_formula(ModelConfig(ntoken=data.VOCAB_SIZE))
    theirs = bert.count_parameters_formula(config, pooler=True)
    assert f"({_millions(theirs)} vs {_millions(ours)} parameters" in answer
    assert f"almost {round(theirs / ours)} times larger" in answer and theirs / ours < round(theirs / ours)
    assert f"{config.vocab_size:,} x {config.hidden_size} word embedding" in answer
    assert config.vocab_size * config.hidden_size > theirs / 2, "the answer says over half are in the embedding"


def test_part_6_s_training_cell_names_its_budget_rather_than_typing_it():
    text = _cell("06_transfer_at_scale", "cell-28")
    for name in ("bert_train_size", "bert_epochs", "bert_eval_size"):
        assert f"budget.{name}" in text
    assert str(FULL.bert_train_size) not in text
