from __future__ import annotations

import pytest
import torch

from pate_stab.erm.losses import HuberHingeLoss, LogisticLoss, RampLoss, SquaredLoss, get_loss
from pate_stab.erm.solver import erm_objective, solve_erm
from pate_stab.errors import ConvergenceError

from ._data import classification, regression


@pytest.mark.parametrize("loss", [LogisticLoss(), HuberHingeLoss(h=0.3), SquaredLoss()])
def test_derivatives_match_autograd(loss):
    z = torch.linspace(-3, 3, 301, dtype=torch.float64, requires_grad=True)
    y = torch.where(torch.arange(301) % 2 == 0, 1.0, -1.0).to(torch.float64)
    (g,) = torch.autograd.grad(loss.value(z, y).sum(), z, create_graph=True)
    torch.testing.assert_close(g, loss.derivative(z, y))
    (h,) = torch.autograd.grad(g.sum(), z)
    torch.testing.assert_close(h, loss.second_derivative(z, y))
    assert float(loss.second_derivative(z.detach(), y).abs().max()) <= loss.smoothness + 1e-15


def test_lipschitz_constants():
    z = torch.linspace(-5, 5, 1001, dtype=torch.float64)
    for name in ["logistic", "hinge", "huber_hinge", "ramp"]:
        loss = get_loss(name)
        for yv in (1.0, -1.0):
            assert float(loss.derivative(z, torch.full_like(z, yv)).abs().max()) <= loss.lipschitz()
    # squared: |2(z - y)| <= 2(R + 1) for |z| <= R, |y| <= 1
    assert SquaredLoss().lipschitz(0.5) == 3.0
    with pytest.raises(ValueError, match="radius"):
        SquaredLoss().lipschitz(None)
    assert not RampLoss().convex
    with pytest.raises(ValueError, match="convex"):
        solve_erm(torch.zeros(3, 2), torch.ones(3), loss="ramp", lam=1.0)


@pytest.mark.parametrize("loss", ["logistic", "huber_hinge", "hinge"])
def test_solver_certificate_is_a_true_bound(loss):
    x, y = classification(200, 4, seed=1)
    lam = 0.05
    r = solve_erm(x, y, loss=loss, lam=lam, tol=1e-8)
    assert r.distance_bound <= 1e-8
    # The minimiser: no random direction lowers the objective.
    f0 = erm_objective(r.weights, x, y, loss=get_loss(loss), lam=lam)
    g = torch.Generator().manual_seed(0)
    for _ in range(20):
        u = torch.randn(4, generator=g, dtype=torch.float64) * 1e-3
        assert float(erm_objective(r.weights + u, x, y, loss=get_loss(loss), lam=lam)) >= float(f0) - 1e-13


def test_ball_constraint_matches_projected_gradient():
    x, y = regression(300, 5, seed=2)
    lam, radius = 0.01, 0.3
    r = solve_erm(x, y, loss="squared", lam=lam, radius=radius, tol=1e-9)
    assert float(torch.linalg.vector_norm(r.weights)) <= radius + 1e-15
    assert r.multiplier > 0
    w = torch.zeros(5, dtype=torch.float64)
    for _ in range(5000):
        w = w - 0.2 * (2 * x.T @ (x @ w - y) / 300 + lam * w)
        w = w * min(1.0, radius / float(torch.linalg.vector_norm(w)))
    assert float(torch.linalg.vector_norm(w - r.weights)) <= 1e-8


def test_convergence_error_when_tolerance_not_met():
    x, y = classification(100, 3, seed=3)
    with pytest.raises(ConvergenceError):
        solve_erm(x, y, loss="logistic", lam=1e-3, tol=1e-12, max_iter=1)
