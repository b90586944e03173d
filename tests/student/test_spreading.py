"""Label spreading: the truncated series against its closed form, normalisation, and bad input."""

from __future__ import annotations

import pytest
import torch

from pate_stab.student.spreading import spread_labels, spread_scores


def _chain(n: int) -> torch.Tensor:
    """Normalised adjacency D^{-1/2} W D^{-1/2} of a path graph 0 - 1 - … - (n − 1)."""
    w = torch.zeros(n, n)
    i = torch.arange(n - 1)
    w[i, i + 1] = w[i + 1, i] = 1.0
    d = w.sum(1).rsqrt()
    return d[:, None] * w * d[None, :]


def test_long_series_matches_the_closed_form():
    s = _chain(6)
    seeds = torch.tensor([0, 5])
    targets = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    f = spread_scores(s, seeds, targets, alpha=0.5, steps=200)
    y = torch.zeros(6, 2)
    y[seeds] = targets
    closed = torch.linalg.solve(torch.eye(6) - 0.5 * s, y)  # Σ_t (αS)^t Y = (I − αS)^{-1} Y
    torch.testing.assert_close(f, closed, rtol=1e-5, atol=1e-6)
    assert torch.equal(spread_scores(s, seeds, targets, alpha=0.5, steps=0), y)


def test_labels_spread_to_the_nearer_seed_and_sparse_equals_dense():
    s = _chain(7)
    proba, mass = spread_labels(s, torch.tensor([0, 6]), torch.tensor([0, 1]), num_classes=2, alpha=0.9, steps=60)
    assert proba[:3, 0].gt(0.5).all() and proba[4:, 1].gt(0.5).all()
    torch.testing.assert_close(proba.sum(1), torch.ones(7))
    torch.testing.assert_close(proba[3], torch.tensor([0.5, 0.5]))  # the middle is equidistant
    sparse, _ = spread_labels(s.to_sparse_csr(), torch.tensor([0, 6]), torch.tensor([0, 1]), num_classes=2,
                              alpha=0.9, steps=60)  # fmt: skip
    torch.testing.assert_close(sparse, proba)
    assert bool((mass > 0).all())


def test_unreached_points_are_uniform_with_zero_mass():
    s = torch.zeros(4, 4)  # no edges: only the seed has mass
    proba, mass = spread_labels(s, torch.tensor([1]), torch.tensor([2]), num_classes=3, steps=5)
    assert mass.tolist() == [0.0, 1.0, 0.0, 0.0]
    torch.testing.assert_close(proba[0], torch.full((3,), 1 / 3))
    assert proba[1].tolist() == [0.0, 0.0, 1.0]


def test_scores_spread_as_two_class_distributions():
    s = _chain(3)
    proba, _ = spread_labels(s, torch.tensor([0]), torch.tensor([0.75]), num_classes=2, steps=10)
    torch.testing.assert_close(proba[2], torch.tensor([0.25, 0.75]))


@pytest.mark.parametrize(
    "seeds, labels, kwargs, message",
    [
        ([0, 0], [0, 1], {}, "repeat"),
        ([0, 9], [0, 1], {}, "seeds must lie"),
        ([0], [3], {}, "labels must lie"),
        ([0], [0.5], {"num_classes": 3}, "num_classes == 2"),
        ([0], [1.5], {}, "score labels"),
        ([0], [float("nan")], {}, "NaN"),
        ([0, 1], [0], {}, "target rows"),
        ([0], [0], {"alpha": 1.0}, "alpha"),
        ([0], [0], {"steps": -1}, "steps"),
    ],
)
def test_bad_input_is_named(seeds, labels, kwargs, message):
    args = {"num_classes": 2, **kwargs}
    with pytest.raises(ValueError, match=message):
        spread_labels(_chain(4), torch.tensor(seeds), torch.tensor(labels), **args)
