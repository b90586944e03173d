"""Released labels → student targets: ⊥ dropped or replaced by a uniform label (BTT18 §4.2)."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.student import hard_targets, soft_targets


def test_hard_drop_keeps_answered_queries_only():
    labels = torch.tensor([2, -1, 0, -1, 1])
    t = hard_targets(labels, num_classes=3, bottom="drop")
    assert t.index.tolist() == [0, 2, 4]
    assert t.targets.tolist() == [2, 0, 1]
    assert t.num_bottom == 2 and not t.soft


def test_hard_random_replaces_bottom_uniformly(generator):
    labels = torch.full((30000,), -1, dtype=torch.int64)
    labels[:10] = 1
    t = hard_targets(labels, num_classes=3, bottom="random", generator=generator)
    assert t.index.numel() == labels.numel()
    assert t.targets[:10].tolist() == [1] * 10  # answered labels unchanged
    counts = torch.bincount(t.targets[10:], minlength=3).double() / (labels.numel() - 10)
    # each class has probability 1/3; 6 standard deviations of a binomial proportion
    assert torch.all((counts - 1 / 3).abs() < 6 * math.sqrt((1 / 3) * (2 / 3) / 29990))


def test_soft_targets_drop_and_random(generator):
    scores = torch.tensor([0.25, math.nan, 0.95], dtype=torch.float64)
    t = soft_targets(scores, bottom="drop")
    assert t.soft and t.index.tolist() == [0, 2]
    assert torch.allclose(t.targets, torch.tensor([0.25, 0.95]))
    r = soft_targets(scores, bottom="random", generator=generator)
    assert r.targets[1].item() in (0.0, 1.0) and r.num_bottom == 1


@pytest.mark.parametrize("bad", [torch.tensor([3]), torch.tensor([-2])])
def test_hard_rejects_out_of_range(bad):
    with pytest.raises(ValueError, match="labels"):
        hard_targets(bad, num_classes=3)


def test_bad_policy_and_scores():
    with pytest.raises(ValueError, match="bottom"):
        hard_targets(torch.tensor([0]), num_classes=2, bottom="ignore")
    with pytest.raises(ValueError, match="scores"):
        soft_targets(torch.tensor([1.5]))
    with pytest.raises(TypeError):
        hard_targets(torch.tensor([0]), num_classes=2, bottom="random", generator=None)
