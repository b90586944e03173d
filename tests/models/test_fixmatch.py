"""FixMatch's shared ingredients (pate_stab.models.fixmatch): the configuration's checks and presets, the
learning-rate decay and the index batches."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.models import FixMatchBatches, FixMatchConfig, fixmatch_lr_factor


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("threshold", 0.0, "threshold"),
        ("threshold", 1.5, "threshold"),
        ("threshold", math.nan, "threshold"),
        ("mu", 0, "mu"),
        ("steps", 0, "steps"),
        ("batch_size", 0, "batch_size"),
        ("lambda_u", -1.0, "lambda_u"),
        ("lr", 0.0, "lr"),
        ("ema", 1.0, "ema"),
        ("optimizer", "rmsprop", "optimizer"),
        ("channels", (8, 8, 8), "channels"),
        ("weak_shift", -1, "weak_shift"),
    ],
)
def test_config_rejects_bad_values(field, value, message):
    with pytest.raises(ValueError, match=message):
        FixMatchConfig(**{field: value})


def test_config_presets_and_to_dict():
    cpu, gpu = FixMatchConfig.cpu(), FixMatchConfig.gpu(steps=10)
    assert gpu.steps == 10 and gpu.mu == 7 and gpu.channels == (64, 128)
    assert cpu.steps == 3000 and FixMatchConfig(**cpu.to_dict()) == cpu
    with pytest.raises(TypeError, match="steps"):
        FixMatchConfig(steps=1.5)


def test_the_learning_rate_decays_as_cos_7_pi_k_over_16_k():
    total = 40
    factors = [fixmatch_lr_factor(k, total) for k in range(total + 1)]
    assert factors[0] == 1.0 and math.isclose(factors[-1], math.cos(7 * math.pi / 16))
    assert all(a > b for a, b in zip(factors, factors[1:], strict=False))


def _take(batches: FixMatchBatches, steps: int) -> tuple[torch.Tensor, torch.Tensor]:
    stream = iter(batches)
    pairs = [next(stream) for _ in range(steps)]
    return torch.cat([i for i, _ in pairs]), torch.cat([j for _, j in pairs])


def test_index_batches_read_every_image_once_per_pass_and_repeat_under_a_seed():
    labelled, unlabelled = _take(FixMatchBatches(5, 7, batch_size=2, mu=3, seed=1), steps=5)  # 10 and 30 indices
    assert labelled.shape == (10,) and unlabelled.shape == (30,)
    for start in (0, 5):  # two passes over the 5 labelled images
        assert sorted(labelled[start : start + 5].tolist()) == list(range(5))
    for start in range(0, 28, 7):  # four passes over the 7 unlabelled images
        assert sorted(unlabelled[start : start + 7].tolist()) == list(range(7))
    again = _take(FixMatchBatches(5, 7, batch_size=2, mu=3, seed=1), steps=5)
    other = _take(FixMatchBatches(5, 7, batch_size=2, mu=3, seed=2), steps=5)
    assert torch.equal(again[0], labelled) and torch.equal(again[1], unlabelled)
    assert not (torch.equal(other[0], labelled) and torch.equal(other[1], unlabelled))
    # a pass shorter than a batch is repeated within it; no unlabelled image: empty batches
    tiny, none = _take(FixMatchBatches(1, 0, batch_size=3, mu=2, seed=0), steps=2)
    assert tiny.tolist() == [0] * 6 and none.numel() == 0
