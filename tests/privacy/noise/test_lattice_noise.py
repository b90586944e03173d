"""Exact lattice Laplace release (output perturbation's noise): grid, calibration, rounding, law.

Statistical tests decide at α = 1e-6 (tests/_stats.py): chi-square of the recovered integer noise
against the discrete Laplace law at the scale this file computes from the mechanism's definition,
in equal-probability cells; the same test rejects draws at a 10 % smaller scale (power).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
import torch
from scipy import stats

import pate_stab.privacy.noise.lattice as lattice_noise
from pate_stab.erm import output_perturbation
from pate_stab.erm.multinomial import softmax_output_perturbation, softmax_output_sensitivity
from pate_stab.privacy.noise.discrete import SeededRandomSource, SystemRandomSource
from pate_stab.privacy.noise.lattice import GRID_FACTOR, lattice_grid, lattice_laplace, lattice_scale
from tests._stats import ALPHA

CASES = [(0.05, 1000, 1.0), (3.0, 100, 5000.0), (0.033, 3000, 0.01), (1.0, 1, 2.0)]  # (Δ, D, ε); t ≈ 2 in the second


def _expected(delta: float, dim: int, epsilon: float) -> tuple[float, float]:
    """(γ, t) from the mechanism's definition: γ = 2^⌊log2(Δ/(G√D))⌋, t = (√D·Δ/γ + D)/ε."""
    grid = 2.0 ** math.floor(math.log2(delta / (GRID_FACTOR * math.sqrt(dim))))
    return grid, (math.sqrt(dim) * delta / grid + dim) / epsilon


@pytest.mark.parametrize("delta,dim,epsilon", CASES)
def test_grid_and_scale_follow_the_definition_and_never_undercharge(delta, dim, epsilon):
    grid, scale = _expected(delta, dim, epsilon)
    assert lattice_grid(delta, dim) == grid
    t, l1 = lattice_scale(l2_sensitivity=delta, dim=dim, grid=grid, epsilon=epsilon)
    assert l1 >= math.sqrt(dim) * delta / grid + dim  # an upper bound of the ℓ1 sensitivity
    assert l1 / t <= epsilon  # exact rationals: the claim holds
    assert float(t) == pytest.approx(scale, rel=1e-5)  # and costs (almost) nothing more


@pytest.mark.parametrize("delta,dim,epsilon", CASES[:3])
def test_rounded_neighbours_stay_within_the_l1_bound(delta, dim, epsilon):
    """Worst cases for rounding: every coordinate just below a half-step, moved by Δ/√D each way.

    The privacy loss of any output between k and k′ is ‖k − k′‖₁/t; it must not exceed ε.
    """
    grid = lattice_grid(delta, dim)
    t, l1 = lattice_scale(l2_sensitivity=delta, dim=dim, grid=grid, epsilon=epsilon)
    gen = torch.Generator().manual_seed(3)
    for trial in range(20):
        base = torch.randint(-1000, 1000, (dim,), generator=gen).double() * grid
        v = (
            base + (0.5 - 1e-9) * grid
            if trial % 2
            else base + torch.rand(dim, generator=gen, dtype=torch.float64) * grid
        )
        direction = torch.randn(dim, generator=gen, dtype=torch.float64) if trial % 3 else torch.ones(dim)
        w = v + delta * (1 - 1e-12) * direction / torch.linalg.vector_norm(direction)
        moved = int((torch.round(v / grid) - torch.round(w / grid)).abs().sum())
        assert moved <= l1 and moved / t <= epsilon


def test_outputs_lie_on_the_grid_and_the_seeded_source_reproduces():
    v = torch.randn(50, dtype=torch.float64)
    a = lattice_laplace(v, l2_sensitivity=0.1, epsilon=1.0, source=SeededRandomSource(5))
    b = lattice_laplace(v, l2_sensitivity=0.1, epsilon=1.0, source=SeededRandomSource(5))
    assert torch.equal(a.values, b.values) and a.epsilon <= 1.0
    units = a.values / a.grid
    assert torch.equal(units, torch.round(units))  # multiples of γ: the support is γℤ^D for every input
    c = lattice_laplace(v, l2_sensitivity=0.1, epsilon=1.0, source=SystemRandomSource())
    assert not torch.equal(a.values, c.values)


def _cdf(z: np.ndarray, scale: float) -> np.ndarray:
    """P[X ≤ z] for P[X = x] ∝ q^{|x|}, q = e^{−1/scale} (written here from the law, not the library)."""
    q = math.exp(-1.0 / scale)
    z = np.asarray(z, dtype=np.float64)
    return np.where(z >= 0, 1.0 - q ** (z + 1) / (1.0 + q), q ** (-z) / (1.0 + q))


def _quantile(p: float, scale: float) -> int:
    """The smallest integer z with P[X ≤ z] ≥ p (the CDF inverted in closed form, then checked)."""
    q = math.exp(-1.0 / scale)
    if p <= 1.0 / (1.0 + q):  # z < 0: q^{-z}/(1 + q) ≥ p
        z = math.ceil(-math.log(p * (1.0 + q)) / math.log(q))
    else:  # z ≥ 0: 1 − q^{z+1}/(1 + q) ≥ p
        z = math.ceil(math.log((1.0 - p) * (1.0 + q)) / math.log(q) - 1.0)
    while _cdf(np.array(z - 1), scale) >= p:
        z -= 1
    while _cdf(np.array(z), scale) < p:
        z += 1
    return z


def _chi_square_p(noise: np.ndarray, scale: float, cells: int = 60) -> float:
    """p-value of integer draws against the discrete Laplace law at ``scale``, in about equal-probability cells."""
    edges = np.unique([_quantile(j / cells, scale) for j in range(1, cells)])
    probs = np.diff(np.concatenate([[0.0], _cdf(edges, scale), [1.0]]))
    counts = np.bincount(np.searchsorted(edges, noise, side="left"), minlength=probs.size)
    expected = noise.size * probs
    keep = expected >= 20
    assert keep.sum() >= 5
    chi2 = float(((counts - expected) ** 2 / expected)[keep].sum())
    return float(stats.chi2.sf(chi2, df=int(keep.sum()) - 1))


def _noise(delta: float, dim: int, epsilon: float, draws: int, seed: int) -> np.ndarray:
    """Integer noise Z = release/γ − round(v/γ), with γ from the definition (not from the release)."""
    grid, _ = _expected(delta, dim, epsilon)
    gen = torch.Generator().manual_seed(seed)
    out = []
    source = SeededRandomSource(seed)
    while sum(z.size for z in out) < draws:
        v = torch.randn(dim, generator=gen, dtype=torch.float64) * 3
        r = lattice_laplace(v, l2_sensitivity=delta, epsilon=epsilon, source=source)
        out.append((r.values / grid - torch.round(v / grid)).numpy())
    return np.concatenate(out)[:draws]


@pytest.mark.statistical
@pytest.mark.parametrize("delta,dim,epsilon", CASES[:3])
def test_noise_has_the_discrete_laplace_law_at_the_calibrated_scale(delta, dim, epsilon):
    """Chi-square of 120,000 noise coordinates against the law at t = (√D·Δ/γ + D)/ε, α = 1e-6."""
    _, scale = _expected(delta, dim, epsilon)
    noise = _noise(delta, dim, epsilon, 120_000, seed=17)
    assert np.array_equal(noise, np.round(noise))
    assert _chi_square_p(noise, scale) > ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("delta,dim,epsilon", CASES[:3])
def test_a_ten_percent_smaller_scale_is_caught(delta, dim, epsilon, monkeypatch):
    """Power: a sampler drawing at 0.9·t (an ε 11 % above the claim) fails the same test."""
    original = lattice_noise.discrete_laplace

    def smaller(scale, n, source):  # type: ignore[no-untyped-def]
        return original((scale * Fraction(9, 10)).limit_denominator(1 << 20), n, source=source)

    monkeypatch.setattr(lattice_noise, "discrete_laplace", smaller)
    _, scale = _expected(delta, dim, epsilon)
    assert _chi_square_p(_noise(delta, dim, epsilon, 120_000, seed=17), scale) < ALPHA


def _unit_rows(n: int, d: int, seed: int) -> torch.Tensor:
    x = torch.randn(n, d, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp(min=1.0)


def test_output_perturbation_with_exact_noise_releases_lattice_points():
    x = _unit_rows(400, 5, 1)
    y = torch.where(x[:, 0] > 0, 1.0, -1.0)
    m = output_perturbation(x, y, epsilon=1.0, lam=0.1, generator=torch.Generator().manual_seed(0),
                            exact_noise=SeededRandomSource(2))  # fmt: skip
    grid = lattice_grid(2.0 / (0.1 * 400) * (1 + 2e-6), 5)
    assert torch.equal(m.weights / grid, torch.round(m.weights / grid)) and "exact lattice" in m.mechanism
    labels = torch.randint(0, 3, (400,), generator=torch.Generator().manual_seed(4))
    s = softmax_output_perturbation(x, labels, num_classes=3, epsilon=2.0, lam=0.1, generator=torch.Generator(),
                                    exact_noise=SeededRandomSource(3))  # fmt: skip
    assert s.weights.shape == (3, 5) and "exact lattice" in s.mechanism
    grid = lattice_grid(softmax_output_sensitivity(lam=0.1, n=400) * (1 + 2e-3), 15)  # default solver_rtol 1e-3
    assert torch.equal(s.weights / grid, torch.round(s.weights / grid))
