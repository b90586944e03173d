import math

import pytest
import torch

from pate_stab.models import ModelSpec, build_model, init_parameters, init_stacked_parameters, stacked_forward
from pate_stab.rng import seeded_generator


@pytest.mark.parametrize(
    "spec, x_shape",
    [
        (ModelSpec("logistic", (6,), 2), (5, 6)),
        (ModelSpec("mlp", (1, 4, 4), 3, hidden=(8, 8)), (5, 1, 4, 4)),
        (ModelSpec("cnn", (1, 28, 28), 10, channels=(4, 8), hidden=(16,)), (5, 1, 28, 28)),
    ],
)
def test_stacked_forward_equals_per_teacher_forward(spec, x_shape):
    seeds = [11, 12, 13]
    stacked = init_stacked_parameters(spec, seeds)
    x = torch.randn(*x_shape, generator=seeded_generator(0))
    out = stacked_forward(build_model(spec), stacked, x, shared_input=True)
    assert out.shape == (3, 5, spec.num_classes)
    for j, seed in enumerate(seeds):
        model = init_parameters(build_model(spec), generator=seeded_generator(seed))
        torch.testing.assert_close(out[j], model(x), rtol=1e-5, atol=1e-5)


def test_init_bounds_match_pytorch_default():
    model = init_parameters(build_model(ModelSpec("mlp", (50,), 2, hidden=(20,))), generator=seeded_generator(0))
    first = model[1][0]
    bound = 1 / math.sqrt(50)
    assert first.weight.abs().max() <= bound and first.weight.abs().max() > 0.9 * bound
    assert first.bias.abs().max() <= bound


def test_spec_validation():
    with pytest.raises(ValueError, match="kind"):
        ModelSpec("tree", (3,), 2)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="CNN"):
        ModelSpec("cnn", (784,), 10)
