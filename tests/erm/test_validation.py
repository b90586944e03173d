from __future__ import annotations

import math

import pytest
import torch

from pate_stab.audit.harness import clopper_pearson
from pate_stab.erm.losses import RampLoss
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.validation import (
    alpha_split,
    control_choice,
    data_split,
    exponential_mechanism,
    random_choice,
    stability_constants_histogram,
    stability_constants_linear,
    stability_select,
    wu_private_tuning,
)

from ._data import classification, neighbour, regression


def test_theorem4_constants():
    b1, b2 = stability_constants_linear(lam_min=0.001, num_params=10, delta=0.01, epsilon_train=0.5, n=1000, dim=10)
    assert (b1, b2) == (2000.0, 1.0)
    b1, b2 = stability_constants_linear(
        lam_min=2.0, num_params=4, delta=0.1, epsilon_train=1.0, n=100, dim=3, score_bound=None
    )
    assert b1 == 1.0
    assert math.isclose(b2, 0.5 * (1 + 2 * 3 * math.log(3 * 4 / 0.1) / 100))


def test_theorem6_constants_and_sample_size_condition():
    h, k, delta, eps, n = 0.1, 5, 0.01, 1.0, 1000
    nu = 2 * math.log(4 * k / delta) / (n * eps * math.sqrt(h))
    b1, b2 = stability_constants_histogram(h_min=h, num_params=k, delta=delta, epsilon_train=eps, n=n)
    assert math.isclose(b1, 6 / ((1 - nu) * h)) and math.isclose(b2, 2 / h)
    with pytest.raises(ValueError, match="nu"):
        stability_constants_histogram(h_min=h, num_params=k, delta=delta, epsilon_train=eps, n=10)


def test_training_and_validation_stability_of_ramp_score():
    """Thm 4 with objective perturbation: same noise R, neighbouring T -> |dq| <= beta1/n;
    neighbouring V -> |dq| <= beta2/m."""
    n, m, d, lam = 80, 40, 3, 0.05
    ramp = RampLoss()
    xv, yv = classification(m, d, seed=99)

    def q(w, xv, yv):
        return -float(ramp.value(xv @ w, yv).mean())

    for seed in range(10):
        x, y = classification(n, d, seed)
        x2, y2 = neighbour(x, y, 300 + seed)
        w1 = objective_perturbation(x, y, epsilon=1.0, lam=lam, generator=torch.Generator().manual_seed(seed)).weights
        w2 = objective_perturbation(x2, y2, epsilon=1.0, lam=lam, generator=torch.Generator().manual_seed(seed)).weights
        b1, b2 = stability_constants_linear(lam_min=lam, num_params=1, delta=0.01, epsilon_train=1.0, n=n, dim=d)
        assert abs(q(w1, xv, yv) - q(w2, xv, yv)) <= b1 / n + 1e-8
        xv2, yv2 = neighbour(xv, yv, 400 + seed)
        assert abs(q(w1, xv, yv) - q(w1, xv2, yv2)) <= b2 / m + 1e-12


@pytest.mark.statistical
def test_exponential_mechanism_frequencies():
    """Empirical frequencies inside Clopper-Pearson intervals at alpha = 1e-6."""
    u = torch.tensor([0.0, 1.0, 2.0])
    p = torch.softmax(1.0 * u / 2.0, dim=0)
    g = torch.Generator().manual_seed(3)
    N = 20_000
    counts = torch.bincount(
        torch.tensor([exponential_mechanism(u, epsilon=1.0, sensitivity=1.0, generator=g) for _ in range(N)]),
        minlength=3,
    )
    for c, pi in zip(counts.tolist(), p.tolist(), strict=True):
        lo, hi = clopper_pearson(c, N, 1e-6)
        assert lo <= pi <= hi


def test_stability_select_picks_clear_winner_and_randomises_ties():
    g = torch.Generator().manual_seed(0)
    assert stability_select([0.0, 1.0, 0.0], beta1=1.0, beta2=1.0, n=10_000, m=10_000, epsilon=1.0, generator=g) == 1
    picks = {
        stability_select([0.0, 0.0], beta1=1.0, beta2=1.0, n=10, m=10, epsilon=1.0, generator=g) for _ in range(50)
    }
    assert picks == {0, 1}
    with pytest.raises(ValueError, match="epsilon"):
        stability_select([0.0], beta1=1.0, beta2=1.0, n=1, m=1, epsilon=float("nan"), generator=g)


def test_baselines_run_and_split_budget():
    x, y = classification(200, 3, seed=5)
    calls = []

    def train(theta, xt, yt, eps, gen):
        calls.append((theta, xt.shape[0], eps))
        return objective_perturbation(xt, yt, epsilon=eps, lam=theta, generator=gen).weights

    xv, yv = classification(50, 3, seed=6)

    def errors(w):
        return float((torch.sign(xv @ w) != yv).sum())

    g = torch.Generator().manual_seed(1)
    thetas = [0.01, 0.1, 1.0, 2.0]
    alpha_split(thetas, train, errors, x, y, epsilon=1.0, generator=g)
    assert all(c[2] == 0.25 and c[1] == 200 for c in calls)
    calls.clear()
    data_split(thetas, train, errors, x, y, epsilon=1.0, generator=g)
    assert [c[1] for c in calls] == [50] * 4 and all(c[2] == 1.0 for c in calls)
    i, _ = random_choice(thetas, train, x, y, epsilon=1.0, generator=g)
    assert 0 <= i < 4
    i, _ = control_choice(thetas, train, lambda w: -errors(w), x, y, epsilon=1.0, generator=g)
    assert 0 <= i < 4


def test_wu_private_tuning_chunks():
    x, y = regression(250, 3, seed=2)
    sizes = []

    def train(r, lam, xt, yt, eps, gen):
        sizes.append(xt.shape[0])
        return torch.zeros(3, dtype=torch.float64) + r

    i, w = wu_private_tuning(
        [(0.1, 0.1), (0.2, 0.1), (0.3, 0.1), (0.4, 0.1)],
        train,
        x,
        y,
        epsilon=1.0,
        generator=torch.Generator().manual_seed(0),
    )
    assert sizes == [50] * 4 and 0 <= i < 4
