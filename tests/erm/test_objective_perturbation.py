from __future__ import annotations

import math

import pytest
import torch

from pate_stab.erm.objective_perturbation import objective_perturbation, objective_perturbation_budget

from ._data import classification, regression


def test_budget_positive_branch():
    b = objective_perturbation_budget(epsilon=1.0, lam=0.01, n=1000, smoothness=0.25)
    assert b.extra_lam == 0.0
    assert math.isclose(b.epsilon_prime, 1.0 - math.log(1 + 2 * 0.025 + 0.025**2))


def test_budget_at_and_below_the_edge():
    c, n, lam = 0.25, 100, 0.01
    edge = 2 * math.log1p(c / (n * lam))  # eps' = 0 exactly here
    for eps in (edge, edge * 0.5, 0.01):
        b = objective_perturbation_budget(epsilon=eps, lam=lam, n=n, smoothness=c)
        assert b.epsilon_prime == eps / 2
        assert b.extra_lam > 0
        # the Jacobian term at lam + Delta uses exactly the other half of the budget
        assert math.isclose(2 * math.log1p(c / (n * (lam + b.extra_lam))), eps / 2, rel_tol=1e-12)
    just_above = objective_perturbation_budget(epsilon=edge * (1 + 1e-9), lam=lam, n=n, smoothness=c)
    assert just_above.extra_lam == 0.0 and 0 < just_above.epsilon_prime < 1e-8


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf")])
def test_budget_bad_epsilon(bad):
    with pytest.raises(ValueError, match="epsilon"):
        objective_perturbation_budget(epsilon=bad, lam=0.1, n=10, smoothness=0.25)


def test_requires_smooth_loss_and_radius_for_squared():
    x, y = classification(30, 2, seed=0)
    with pytest.raises(ValueError, match="smoothness"):
        objective_perturbation(x, y, epsilon=1.0, lam=0.1, loss="hinge", generator=torch.Generator())
    xr, yr = regression(30, 2, seed=0)
    with pytest.raises(ValueError, match="radius"):
        objective_perturbation(xr, yr, epsilon=1.0, lam=0.1, loss="squared", generator=torch.Generator())
    m = objective_perturbation(
        xr, yr, epsilon=1.0, lam=0.1, loss="squared", radius=0.5, generator=torch.Generator().manual_seed(0)
    )
    assert float(torch.linalg.vector_norm(m.weights)) <= 0.5 + 1e-12
    assert math.isclose(
        m.noise_scale, 2 * 3.0 / objective_perturbation_budget(epsilon=1.0, lam=0.1, n=30, smoothness=2.0).epsilon_prime
    )


def test_uses_extra_regularization_when_needed():
    x, y = classification(50, 2, seed=1)
    m = objective_perturbation(x, y, epsilon=0.05, lam=0.01, generator=torch.Generator().manual_seed(0))
    b = objective_perturbation_budget(epsilon=0.05, lam=0.01, n=50, smoothness=0.25)
    assert m.lam == pytest.approx(0.01 + b.extra_lam)
    assert m.noise_scale == pytest.approx(2 / 0.025)
