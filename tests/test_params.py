import random

import pytest

from translab.model import ModelConfig, build_classifier, build_language_model
from translab.params import count_parameters_formula, count_trainable_parameters, encoder_layer_parameters


def test_the_two_numbers_of_the_lab():
    lab = ModelConfig(ntoken=100, nhid=200, nlayers=4, nhead=2, dim_feedforward=200)
    assert count_parameters_formula(lab) == 1_008_100
    assert count_parameters_formula(lab, nclasses=2) == 988_402
    assert count_trainable_parameters(build_language_model(lab)) == 1_008_100
    assert count_trainable_parameters(build_classifier(lab, 2)) == 988_402
    assert count_parameters_formula(ModelConfig(ntoken=100)) == 1_008_100, "the defaults are part 2's model"


def test_layer_count_breakdown():
    # attention 4*200*200 + 4*200, feed-forward 2*200*200 + 200 + 200, two LayerNorms 4*200
    assert encoder_layer_parameters(200, 200) == 160_800 + 80_400 + 800


@pytest.mark.parametrize("seed", range(20))
def test_formula_equals_numel_for_random_configurations(seed):
    rng = random.Random(seed)
    nhead = rng.choice([1, 2, 4])
    nhid = nhead * rng.randint(1, 12)
    ntoken, nlayers = rng.randint(2, 300), rng.randint(1, 3)
    nclasses = rng.choice([None, 2, 5])
    config = ModelConfig(ntoken, nhid, nlayers, nhead, dim_feedforward=rng.choice([None, 2 * nhid, 3]))
    model = build_language_model(config) if nclasses is None else build_classifier(config, nclasses)
    assert count_trainable_parameters(model) == count_parameters_formula(config, nclasses)


def test_frozen_parameters_are_not_counted():
    model = build_classifier(ModelConfig(50, 8, 1, 2), 2)
    for p in model.base.parameters():
        p.requires_grad_(False)
    assert count_trainable_parameters(model) == 8 * 2 + 2


def test_formula_rejects_indivisible_heads():
    with pytest.raises(ValueError):
        count_parameters_formula(ModelConfig(10, 10, 1, 3))


def test_the_worked_example_part_2_states_is_the_formulas():
    """Section 5 of notebook 02 states the worked example's two totals in its prose: they are the formula's."""
    import json

    from translab.paths import REPO_ROOT
    from translab.variants import WORKED_EXAMPLE
    cells = json.loads((REPO_ROOT / "solutions" / "transfer_learning" / "02_model_and_parameters.ipynb").read_text())["cells"]
    prose = next("".join(c["source"]) for c in cells if "**The worked example.**" in "".join(c["source"]))
    config = ModelConfig(**{k: v for k, v in WORKED_EXAMPLE.items() if k not in ("nclasses", "dim_feedforward")})
    assert f"**{count_parameters_formula(config):,}**" in prose
    assert f"**{count_parameters_formula(config, nclasses=WORKED_EXAMPLE['nclasses']):,}** with a 2-class head" in prose


def test_the_diagnosis_sizes_by_inspection_what_the_held_back_formula_computes():
    """The staged release holds ``term_sizes`` back; the checks' diagnosis sizes the terms from PyTorch's own modules
    instead.  Both must agree term by term, including sizes a mistake makes (0, an indivisible feed-forward)."""
    from translab.params import TERMS, formula_text, inspected_sizes, monomials, term_sizes
    rng = random.Random(2026)
    for _ in range(500):
        nhead = rng.choice([1, 2, 3, 4, 5])
        cfg = dict(ntoken=rng.randrange(0, 500), nhid=nhead * rng.randrange(1, 40), nlayers=rng.randrange(1, 9),
                   nhead=nhead, dim_feedforward=rng.choice([None, rng.randrange(0, 300)]),
                   nclasses=rng.choice([None, rng.randrange(0, 12)]))
        assert inspected_sizes(**cfg) == term_sizes(**cfg), cfg
    assert set(monomials()) == {term.key for term in TERMS}
    assert monomials()["in_proj.weight"] == (3, ("nhid", "nhid"))
    assert formula_text("norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias") == "4*nhid"
    assert formula_text("linear1.weight", "linear1.bias") == "nhid*dim_feedforward + dim_feedforward"
    with pytest.raises(ValueError, match="divisible"):
        inspected_sizes(10, 6, 1, 4)
