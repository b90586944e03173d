"""Functional Mechanism (Zhang et al. 2012, as Wu et al. 2016 use it): coefficients, sensitivity, noise, minimiser."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pate_stab.erm.functional_mechanism import (
    functional_mechanism,
    functional_mechanism_samples,
    functional_mechanism_sensitivity,
    linear_regression_coefficients,
    noisy_quadratic_minimiser,
)
from pate_stab.rng import seeded_generator

_F64 = torch.float64


def _poly(coef: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    d = w.numel()
    rows, cols = torch.triu_indices(d, d)
    return coef[0] + coef[1 : 1 + d] @ w + (coef[1 + d :] * w[rows] * w[cols]).sum()


def test_coefficients_expand_the_squared_loss() -> None:
    g = seeded_generator(0)
    x = torch.randn(30, 4, generator=g, dtype=_F64) / 3
    y = torch.rand(30, generator=g, dtype=_F64) * 2 - 1
    coef = linear_regression_coefficients(x, y)
    assert coef.numel() == 1 + 4 + 10
    for _ in range(5):
        w = torch.randn(4, generator=g, dtype=_F64)
        assert float(_poly(coef, w)) == pytest.approx(float(((y - x @ w) ** 2).sum()), rel=1e-12)


def test_sensitivity_pinned_values() -> None:
    assert functional_mechanism_sensitivity(1) == 8.0  # 2(1 + 1)²
    assert functional_mechanism_sensitivity(17) == 2.0 * 18**2  # Zhang et al.: 2(d² + 2d + 1)
    assert functional_mechanism_sensitivity(17, constant="l2") == pytest.approx(2.0 * (1 + math.sqrt(17)) ** 2)


_coord = st.floats(-1.0, 1.0, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    d=st.integers(1, 6),
    data=st.data(),
)
def test_sensitivity_bounds_every_replaced_record(d: int, data: st.DataObject) -> None:
    """‖λ(D) − λ(D')‖₁ <= Δ for neighbours differing in one record with |x_j| <= 1 (paper) or ‖x‖₂ <= 1 (l2)."""
    rows = [torch.tensor(data.draw(st.lists(_coord, min_size=d, max_size=d)), dtype=_F64) for _ in range(3)]
    ys = [data.draw(_coord) for _ in range(3)]
    shared_x = rows[0].reshape(1, d)
    a = linear_regression_coefficients(torch.cat([shared_x, rows[1].reshape(1, d)]), torch.tensor([ys[0], ys[1]]))
    b = linear_regression_coefficients(torch.cat([shared_x, rows[2].reshape(1, d)]), torch.tensor([ys[0], ys[2]]))
    diff = float((a - b).abs().sum())
    assert diff <= functional_mechanism_sensitivity(d) * (1 + 1e-12)
    # rows inside the unit ℓ2 ball: the tighter Δ = 2(1 + √d)² holds too
    r1 = rows[1] / max(1.0, float(rows[1].norm()))
    r2 = rows[2] / max(1.0, float(rows[2].norm()))
    a = linear_regression_coefficients(torch.cat([shared_x, r1.reshape(1, d)]), torch.tensor([ys[0], ys[1]]))
    b = linear_regression_coefficients(torch.cat([shared_x, r2.reshape(1, d)]), torch.tensor([ys[0], ys[2]]))
    assert float((a - b).abs().sum()) <= functional_mechanism_sensitivity(d, constant="l2") * (1 + 1e-12)


def test_sensitivity_is_attained_up_to_the_triangle_factor() -> None:
    """In d = 1 the largest change is 4 = Δ/2 (y x = 1 vs −1): why the audit's mutation errs by 4, not 2."""
    x = torch.ones((1, 1), dtype=_F64)
    a = linear_regression_coefficients(x, torch.ones(1, dtype=_F64))
    b = linear_regression_coefficients(x, -torch.ones(1, dtype=_F64))
    assert float((a - b).abs().sum()) == 4.0 == functional_mechanism_sensitivity(1) / 2


def test_noise_is_laplace_of_scale_delta_over_epsilon() -> None:
    g = seeded_generator(1)
    x = torch.rand(50, 3, generator=g, dtype=_F64) / 2
    y = torch.rand(50, generator=g, dtype=_F64) * 2 - 1
    eps = 0.7
    samples = functional_mechanism_samples(x, y, epsilon=eps, num_samples=4000, generator=g)
    noise = samples - linear_regression_coefficients(x, y)
    scale = functional_mechanism_sensitivity(3) / eps
    for k in (0, 2, 6):  # constant, linear and quadratic coefficients
        assert stats.kstest(noise[:, k].numpy(), "laplace", args=(0, scale)).pvalue > 1e-4


def test_one_release_is_one_sample_of_the_sampler() -> None:
    g = seeded_generator(2)
    x = torch.rand(40, 2, generator=g, dtype=_F64) / 2
    y = torch.rand(40, generator=g, dtype=_F64) * 2 - 1
    model = functional_mechanism(x, y, epsilon=1.0, generator=seeded_generator(5))
    sample = functional_mechanism_samples(x, y, epsilon=1.0, num_samples=1, generator=seeded_generator(5))[0]
    assert torch.equal(model.coefficients, sample)
    assert model.noise_scale == functional_mechanism_sensitivity(2) / 1.0


def test_minimiser_without_noise_is_least_squares_and_trims_indefinite_forms() -> None:
    g = seeded_generator(3)
    x = torch.randn(200, 3, generator=g, dtype=_F64) / 3
    w0 = torch.tensor([0.3, -0.5, 0.2], dtype=_F64)
    y = (x @ w0).clamp(-1, 1)
    w, kept = noisy_quadratic_minimiser(linear_regression_coefficients(x, y), 3)
    assert kept == 3 and torch.allclose(w, torch.linalg.lstsq(x, y).solution, atol=1e-10)
    # Q = diag(1, −1): only the first direction is kept; the minimiser along it is −b_1/2.
    coef = torch.tensor([0.0, 2.0, 5.0, 1.0, 0.0, -1.0], dtype=_F64)
    w, kept = noisy_quadratic_minimiser(coef, 2)
    assert kept == 1 and torch.allclose(w, torch.tensor([-1.0, 0.0], dtype=_F64))
    # ridge (a public constant) keeps both once it lifts the negative eigenvalue
    w, kept = noisy_quadratic_minimiser(coef, 2, ridge=2.0)
    assert kept == 2 and torch.allclose(w, torch.tensor([-1.0 / 3.0, -2.5], dtype=_F64))


@pytest.mark.parametrize(
    "x, y, kwargs, match",
    [
        (torch.ones((3, 2), dtype=_F64), torch.zeros(3, dtype=_F64), {}, "unit"),
        (torch.zeros((3, 2), dtype=_F64), torch.full((3,), 2.0, dtype=_F64), {}, r"\|y\| > 1"),
        (torch.zeros((3, 2), dtype=_F64), torch.zeros(3, dtype=_F64), {"epsilon": 0.0}, "epsilon"),
        (torch.zeros((3, 2), dtype=_F64), torch.zeros(3, dtype=_F64), {"constant": "tight"}, "constant"),
        (torch.zeros((3, 2), dtype=_F64), torch.zeros(3, dtype=_F64), {"ridge": -1.0}, "ridge"),
    ],
)
def test_bad_input_is_refused(x: torch.Tensor, y: torch.Tensor, kwargs: dict, match: str) -> None:
    args = {"epsilon": 1.0, **kwargs}
    with pytest.raises(ValueError, match=match):
        functional_mechanism(x, y, generator=seeded_generator(0), **args)
