"""The softmax head's privacy bounds (property tests) and its input checks.

The statistical test of the mechanism's noise scale is in pate_stab.audit.erm_cases (run by
tests/audit/test_mechanism_cases.py).
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.erm.multinomial import (
    SOFTMAX_LIPSCHITZ,
    SOFTMAX_SMOOTHNESS,
    softmax_gradient,
    softmax_hessian,
    softmax_objective_budget,
    softmax_objective_perturbation,
    softmax_output_perturbation,
    softmax_output_sensitivity,
    solve_softmax_erm,
)

F64 = torch.float64


def _draw(seed: int, c: int, d: int, w_scale: float) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(c, d, generator=g, dtype=F64) * w_scale
    x = torch.randn(d, generator=g, dtype=F64)
    x = x / x.norm() * torch.rand((), generator=g, dtype=F64)  # ||x|| <= 1
    return w, x


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31), c=st.integers(2, 12), d=st.integers(1, 6), w_scale=st.sampled_from([0.0, 1.0, 30.0]))
def test_softmax_gradient_is_autograd_and_within_sqrt2_norm_x(seed, c, d, w_scale):
    w, x = _draw(seed, c, d, w_scale)
    for y in range(c):
        grad = softmax_gradient(w, x, y)
        wr = w.clone().requires_grad_(True)
        torch.nn.functional.cross_entropy((wr @ x).unsqueeze(0), torch.tensor([y])).backward()
        assert torch.allclose(grad, wr.grad, atol=1e-12)
        assert float(grad.norm()) <= SOFTMAX_LIPSCHITZ * float(x.norm()) * (1 + 1e-12)


def test_softmax_gradient_bound_is_tight():
    """||p − e_y||² → 2 when all mass sits on one wrong class: ρ = √2 cannot be lowered."""
    w = torch.zeros(3, 1, dtype=F64)
    w[1, 0] = 60.0
    x = torch.ones(1, dtype=F64)
    assert float(softmax_gradient(w, x, 0).norm()) == pytest.approx(math.sqrt(2.0), abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(seed=st.integers(0, 2**31), c=st.integers(2, 8), d=st.integers(1, 5), w_scale=st.sampled_from([0.0, 1.0, 10.0]))
def test_softmax_hessian_is_autograd_psd_rank_c_minus_1_norm_half_x2(seed, c, d, w_scale):
    w, x = _draw(seed, c, d, w_scale)
    hess = softmax_hessian(w, x)

    def loss(flat: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy((flat.reshape(c, d) @ x).unsqueeze(0), torch.tensor([0]))

    auto = torch.autograd.functional.hessian(loss, w.reshape(-1))
    assert torch.allclose(hess, auto, atol=1e-12)
    eig = torch.linalg.eigvalsh(hess)
    assert float(eig.min()) >= -1e-12  # convex
    assert float(eig.max()) <= SOFTMAX_SMOOTHNESS * float(x @ x) + 1e-12
    assert int((eig > 1e-12).sum()) <= c - 1


def test_softmax_hessian_bound_is_tight():
    """p = (1/2, 1/2, 0, …) and ||x|| = 1 reach the largest eigenvalue 1/2."""
    w = torch.zeros(4, 1, dtype=F64)
    w[2:, 0] = -80.0
    eig = torch.linalg.eigvalsh(softmax_hessian(w, torch.ones(1, dtype=F64)))
    assert float(eig.max()) == pytest.approx(0.5, abs=1e-12)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31), c=st.integers(2, 5), lam=st.sampled_from([0.05, 0.5, 2.0]))
def test_output_sensitivity_bounds_the_minimiser_under_replace_one(seed, c, lam):
    g = torch.Generator().manual_seed(seed)
    n, d = 8, 3
    x = torch.randn(n, d, generator=g, dtype=F64)
    x = x / x.norm(dim=1, keepdim=True).clamp(min=1.0)
    y = torch.randint(0, c, (n,), generator=g)
    x2, y2 = x.clone(), y.clone()
    x2[0] = -x[0] if seed % 2 else torch.randn(d, generator=g, dtype=F64).clamp(-0.5, 0.5)
    y2[0] = (y[0] + 1) % c
    w1, _ = solve_softmax_erm(x, y, num_classes=c, lam=lam, tol=1e-10)
    w2, _ = solve_softmax_erm(x2, y2, num_classes=c, lam=lam, tol=1e-10)
    assert float((w1 - w2).norm()) <= softmax_output_sensitivity(lam=lam, n=n) + 2e-10


def test_objective_budget_branches():
    big = softmax_objective_budget(epsilon=1.0, lam=1.0, n=1000, num_classes=10)
    assert big.extra_lam == 0.0
    assert big.epsilon_prime == pytest.approx(1.0 - 18.0 * math.log1p(0.5 / 1000.0))
    small = softmax_objective_budget(epsilon=1.0, lam=1e-6, n=100, num_classes=10)
    assert small.epsilon_prime == 0.5
    lam_total = 1e-6 + small.extra_lam  # the Jacobian term is exactly ε/2 at λ + Δ
    assert 18.0 * math.log1p(0.5 / (100 * lam_total)) == pytest.approx(0.5, rel=1e-12)


def _small_task(seed: int = 0, n: int = 300, d: int = 4, c: int = 3) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    centres = torch.randn(c, d, generator=g, dtype=F64)
    y = torch.randint(0, c, (n,), generator=g)
    x = centres[y] + 0.3 * torch.randn(n, d, generator=g, dtype=F64)
    return x / x.norm(dim=1, keepdim=True).clamp(min=1.0), y


@pytest.mark.parametrize("fn", [softmax_output_perturbation, softmax_objective_perturbation])
def test_heads_learn_and_are_reproducible_from_the_generator(fn):
    x, y = _small_task()
    a = fn(x, y, num_classes=3, epsilon=50.0, lam=1e-2, generator=torch.Generator().manual_seed(1))
    b = fn(x, y, num_classes=3, epsilon=50.0, lam=1e-2, generator=torch.Generator().manual_seed(1))
    assert torch.equal(a.weights, b.weights)
    assert float((a.predict(x) == y).double().mean()) > 0.8


def test_output_perturbation_noise_is_the_reported_scale():
    """W_released − W* has Frobenius norm ~ Gamma(C d, s) with s the reported scale (mean C d s)."""
    x, y = _small_task(n=200, d=2, c=3)
    w_star, _ = solve_softmax_erm(x, y, num_classes=3, lam=0.1, tol=1e-12)
    norms = []
    for seed in range(400):
        gen = torch.Generator().manual_seed(seed)
        m = softmax_output_perturbation(x, y, num_classes=3, epsilon=1.0, lam=0.1, generator=gen)
        norms.append(float((m.weights - w_star).norm()) / m.noise_scale)
    scale = softmax_output_sensitivity(lam=0.1, n=200) * (1 + 2e-3)
    assert m.noise_scale == pytest.approx(scale)
    mean = sum(norms) / len(norms)
    # Gamma(6, 1): mean 6, sd √6; the mean of 400 draws is within 6 ± 5.3 sd/√400 (α < 1e-6)
    assert abs(mean - 6.0) < 5.3 * math.sqrt(6.0) / 20.0


@pytest.mark.parametrize(
    ("x", "y", "eps", "match"),
    [
        ([[0.1, 0.2], [0.3, 0.1]], [0, 3], 1.0, r"labels must lie in \[0, 3\)"),
        ([[0.1, 0.2], [0.3, 0.1]], [0, -1], 1.0, r"labels must lie"),
        ([[0.1, float("nan")], [0.3, 0.1]], [0, 1], 1.0, "nan|NaN|finite"),
        ([[0.1, 0.2], [0.3, 0.1]], [0, 1], 0.0, "epsilon"),
        ([[0.1, 0.2], [0.3, 0.1]], [0, 1], float("nan"), "epsilon"),
        ([[3.0, 0.2], [0.3, 0.1]], [0, 1], 1.0, "unit"),
        ([[0.1, 0.2], [0.3, 0.1]], [0.5, 1], 1.0, "integers"),
    ],
)
@pytest.mark.parametrize("fn", [softmax_output_perturbation, softmax_objective_perturbation])
def test_bad_input_is_refused(fn, x, y, eps, match):
    with pytest.raises(ValueError, match=match):
        fn(
            torch.tensor(x, dtype=F64),
            torch.tensor(y),
            num_classes=3,
            epsilon=eps,
            lam=0.1,
            generator=torch.Generator().manual_seed(0),
        )
