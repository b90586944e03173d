"""The convex heads' public divisor: λ′ = λN/n makes the (1/n)-normalised solver minimise
J(w) = (1/N) Σ ℓ(w, z_i) + (λ/2)||w||² (pate_stab.erm.heads.public_divisor_lambda; run/direct's heads)."""

from __future__ import annotations

import pytest
import torch

from pate_stab.erm import public_divisor_lambda
from pate_stab.erm.losses import get_loss
from pate_stab.erm.solver import solve_erm


def _gradient_of_public_objective(w, x, y, *, lam, public_size):
    """∇J(w) for J with the fixed public divisor N."""
    loss = get_loss("logistic")
    return x.T @ loss.derivative(x @ w, y) / public_size + lam * w


@pytest.mark.parametrize(("n", "public_size"), [(40, 40), (40, 100), (150, 60)])
def test_the_solvers_minimiser_at_lambda_prime_is_the_public_objectives(n, public_size):
    gen = torch.Generator().manual_seed(n + public_size)
    x = torch.nn.functional.normalize(torch.randn(n, 3, generator=gen, dtype=torch.float64), dim=1)
    y = torch.where(x[:, 0] + 0.3 * torch.randn(n, generator=gen, dtype=torch.float64) > 0, 1.0, -1.0)
    lam = 0.05
    prime = public_divisor_lambda(lam, public_size=public_size, private_size=n)
    assert prime * n == pytest.approx(lam * public_size, rel=1e-15)  # every noise scale is a function of λ′n = λN
    w = solve_erm(x, y, loss="logistic", lam=prime, tol=1e-12).weights
    assert _gradient_of_public_objective(w, x, y, lam=lam, public_size=public_size).norm() < 1e-9
    if n != public_size:  # negative control: the paper's λ with divisor n minimises another objective
        other = solve_erm(x, y, loss="logistic", lam=lam, tol=1e-12).weights
        assert _gradient_of_public_objective(other, x, y, lam=lam, public_size=public_size).norm() > 1e-4


def test_public_divisor_lambda_rejects_bad_sizes():
    assert public_divisor_lambda(1e-3, public_size=60000, private_size=30000) == pytest.approx(2e-3, rel=1e-15)
    with pytest.raises(ValueError, match="private_size"):
        public_divisor_lambda(1e-3, public_size=100, private_size=0)
    with pytest.raises(ValueError, match="lam"):
        public_divisor_lambda(0.0, public_size=100, private_size=10)
