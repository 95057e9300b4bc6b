import random

import pytest

from translab.model import build_classifier, build_language_model
from translab.params import count_parameters_formula, count_trainable_parameters, encoder_layer_parameters


def test_the_two_numbers_of_the_lab():
    assert count_parameters_formula(100, 200, 4, 2, 200) == 1_008_100
    assert count_parameters_formula(100, 200, 4, 2, 200, nclasses=2) == 988_402
    assert count_trainable_parameters(build_language_model(100, 200, 4, 2)) == 1_008_100
    assert count_trainable_parameters(build_classifier(100, 2, 200, 4, 2)) == 988_402


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
    model = (build_language_model(ntoken, nhid, nlayers, nhead) if nclasses is None
             else build_classifier(ntoken, nclasses, nhid, nlayers, nhead))
    assert count_trainable_parameters(model) == count_parameters_formula(ntoken, nhid, nlayers, nhead, nhid, nclasses)


def test_frozen_parameters_are_not_counted():
    model = build_classifier(50, 2, 8, 1, 2)
    for p in model.base.parameters():
        p.requires_grad_(False)
    assert count_trainable_parameters(model) == 8 * 2 + 2


def test_formula_rejects_indivisible_heads():
    with pytest.raises(ValueError):
        count_parameters_formula(10, 10, 1, 3)
