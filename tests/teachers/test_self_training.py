"""Self-training of the vectorised heads on every input under label privacy (pate_stab.teachers.self_training):
each teacher's pseudo-labels are its own predictions, so one changed label still moves at most one teacher."""

from __future__ import annotations

import functools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.data import make_gaussian_mixture
from pate_stab.models import ModelSpec
from pate_stab.teachers import TrainConfig
from pate_stab.teachers.self_training import pseudo_targets, self_train_teachers

N_PRIVATE, N_PUBLIC, K, C = 60, 30, 4, 3
SPEC = ModelSpec("logistic", (5,), C)
CONFIG = TrainConfig(epochs=3, batch_size=8, lr=0.05, min_steps=1)
THRESHOLD = 0.6


def _data():
    x, y = make_gaussian_mixture(N_PRIVATE + N_PUBLIC, num_classes=C, dim=5, separation=2.0,
                                 generator=torch.Generator().manual_seed(0))  # fmt: skip
    shards = [torch.arange(j, N_PRIVATE, K) for j in range(K)]
    return x[:N_PRIVATE], y[:N_PRIVATE], x[N_PRIVATE:], shards


def _train(y: torch.Tensor, rounds: int = 2):
    x, _, public, shards = _data()
    return self_train_teachers(
        x, y, shards, public_x=public, privacy_unit="label", spec=SPEC, threshold=THRESHOLD, rounds=rounds,
        config=CONFIG, generator=torch.Generator().manual_seed(1), accelerator="cpu",
    )  # fmt: skip


@functools.cache
def _baseline():
    return _train(_data()[1])


@settings(max_examples=5, deadline=None)
@given(record=st.integers(0, N_PRIVATE - 1), shift=st.integers(1, C - 1))
def test_one_changed_label_moves_at_most_one_self_trained_teacher(record, shift):
    y2 = _data()[1].clone()
    y2[record] = (y2[record] + shift) % C
    (d, history), (n, _) = _baseline(), _train(y2)
    moved = torch.stack([(d.params[p] != n.params[p]).flatten(1).any(1) for p in d.params]).any(0)
    assert moved.tolist() == [j == record % K for j in range(K)]
    assert all(h["pseudo_labels"][j] > 0 for h in history for j in range(K)), "self-training must have pseudo-labels"


def test_a_teacher_s_targets_are_its_own_predictions_and_its_own_shard_s_labels():
    x, y, public, shards = _data()
    teachers, _ = _train(y, rounds=0)
    x_all = torch.cat([x, public])
    targets = pseudo_targets(teachers, x_all, y, shards, threshold=THRESHOLD)
    probs = teachers.predict_scores(x_all)  # (k, N, C)
    for j, shard in enumerate(shards):
        own = torch.zeros(x_all.shape[0], dtype=torch.bool)
        own[shard] = True
        assert torch.equal(targets[j, shard].long(), y[shard])
        confident = probs[j].max(-1).values >= THRESHOLD
        expected = torch.where(confident, probs[j].argmax(-1), -1)
        assert torch.equal(targets[j, ~own].long(), expected[~own])


def test_self_training_is_refused_under_record_privacy_and_for_cnns():
    x, y, public, shards = _data()
    common = {"public_x": public, "threshold": THRESHOLD, "generator": torch.Generator().manual_seed(1)}
    with pytest.raises(ValueError, match="privacy_unit 'label'"):
        self_train_teachers(x, y, shards, privacy_unit="record", spec=SPEC, **common)
    with pytest.raises(ValueError, match="vectorised heads"):
        self_train_teachers(x, y, shards, privacy_unit="label", spec=ModelSpec("cnn", (1, 4, 4), C), **common)
