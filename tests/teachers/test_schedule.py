"""The default teacher schedule is sized in optimiser steps per teacher (from its own shard size
only); an explicit schedule is kept as given and warns when it is too short."""

from __future__ import annotations

import warnings

import pytest
import torch

from pate_stab.data import make_gaussian_mixture
from pate_stab.models import ModelSpec
from pate_stab.rng import seeded_generator
from pate_stab.teachers import ShortScheduleWarning, TrainConfig, teacher_epochs, train_teachers

SPEC = ModelSpec("logistic", (4,), 3)
DEFAULT = TrainConfig(batch_size=4, lr=1e-2, min_steps=24)  # epochs=None: sized in steps


def _problem(sizes=(3, 9, 20, 40)):
    """Shards of the given sizes (default 3, 9, 20, 40 records: 1, 3, 5, 10 steps an epoch at B = 4)."""
    x, y = make_gaussian_mixture(120, num_classes=3, dim=4, generator=seeded_generator(0))
    cuts = [0, *torch.tensor(sizes).cumsum(0).tolist()]
    return x, y, [torch.arange(a, b) for a, b in zip(cuts, cuts[1:], strict=False)]


def _train(x, y, shards, config=DEFAULT, **kw):
    return train_teachers(x, y, shards, spec=SPEC, config=config, generator=seeded_generator(7), **kw)


def test_teacher_epochs_pinned():
    config = TrainConfig(batch_size=32, min_steps=300)
    assert teacher_epochs([12, 6000, 0], config) == [300, 10, 300]
    assert teacher_epochs([12, 6000], TrainConfig(epochs=4)) == [4, 4]
    assert TrainConfig().epochs is None and TrainConfig().min_steps == 300
    with pytest.raises(ValueError, match="min_steps"):
        TrainConfig(min_steps=0)


def test_every_teacher_makes_the_steps_of_its_own_schedule():
    x, y, shards = _problem()
    ensemble = _train(x, y, shards)
    epochs = teacher_epochs([len(s) for s in shards], DEFAULT)
    assert epochs == [24, 10, 10, 10]  # max(10 epochs, ⌈24 / steps an epoch⌉)
    trained = ensemble.metrics["trained"]  # (epochs run, k): the epochs in which each teacher moved
    assert trained.sum(0).tolist() == epochs


def test_schedule_depends_on_the_teachers_own_shard_only():
    """Shrinking shard 2 to 3 records raises its epochs from 10 to 24; the other teachers are unchanged."""
    x, y, shards = _problem((9, 20, 40))
    base = _train(x, y, shards)
    small = list(shards)
    small[2] = shards[2][:3]
    other = _train(x, y, small)
    assert other.metrics["trained"].shape[0] > base.metrics["trained"].shape[0]  # a longer fit overall
    for name, p in base.params.items():
        assert torch.equal(p[:2], other.params[name][:2]), name  # bit-identical


def test_vectorized_matches_sequential_with_per_teacher_epochs():
    x, y, shards = _problem()
    vec = _train(x, y, shards)
    seq = _train(x, y, shards, mode="sequential")
    for name, p in vec.params.items():
        assert torch.allclose(p, seq.params[name], atol=1e-5), name


def test_short_explicit_schedule_warns_and_default_does_not():
    x, y, shards = _problem()
    with pytest.warns(ShortScheduleWarning, match="make 2 optimiser steps"):
        _train(x, y, shards, config=TrainConfig(epochs=2, batch_size=4, min_steps=24))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ShortScheduleWarning)
        _train(x, y, shards)
