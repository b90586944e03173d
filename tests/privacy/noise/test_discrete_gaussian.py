"""The exact discrete Gaussian sampler (CKS20 Alg 3), its exact σ'², and the facts its accounting uses.

Statistical tests decide at α = 1e-6 (chi-square against the exact pmf; normal bound on the
sample variance with the exact fourth moment; Clopper–Pearson for Bernoulli rates).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pate_stab.audit.harness import clopper_pearson
from pate_stab.privacy.noise.discrete import _bernoulli_exp_rational, _log_theta
from pate_stab.privacy.noise.secure import (
    SeededRandomSource,
    SystemRandomSource,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_tail_bound,
    exact_laplace_parameter,
    exact_sigma_sq_at_least,
)

ALPHA = 1e-6
Z_ALPHA = float(stats.norm.isf(ALPHA / 2))  # two-sided normal quantile at α


def _support(sigma: float) -> np.ndarray:
    span = int(math.ceil(40 * sigma)) + 2
    return np.arange(-span, span + 1)


def _chi_square_p(x: np.ndarray, sigma: float) -> float:
    """p-value of the sample ``x`` against the exact pmf of N_Z(0, σ'²) (cells with expected count >= 20)."""
    n = x.size
    support = _support(sigma)
    pmf = discrete_gaussian_pmf(support, sigma)
    cells = support[n * pmf >= 20]
    lo, hi = int(cells.min()), int(cells.max())
    observed = [int((x < lo).sum())] + [int((x == v).sum()) for v in cells] + [int((x > hi).sum())]
    expected = [n * pmf[support < lo].sum()] + list(n * pmf[(support >= lo) & (support <= hi)])
    expected += [n * pmf[support > hi].sum()]
    obs, exp = np.array(observed, dtype=float), np.array(expected)
    assert abs(exp.sum() - n) < 1e-6 * n
    keep = exp > 0
    chi2 = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    return float(stats.chi2.sf(chi2, df=int(keep.sum()) - 1))


@pytest.mark.statistical
@pytest.mark.parametrize("sigma,source", [(0.6, "seeded"), (1.0, "system"), (3.3, "seeded"), (25.5, "system")])
def test_discrete_gaussian_pmf_goodness_of_fit(sigma, source):
    """Chi-square of 200,000 draws against the exact pmf, α = 1e-6."""
    src = SystemRandomSource() if source == "system" else SeededRandomSource(11)
    x = discrete_gaussian(sigma, 200_000, source=src).numpy()
    assert _chi_square_p(x, sigma) > ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [1.0, 3.3, 25.5])
def test_a_halved_sigma_is_rejected_by_the_same_test(sigma):
    """Power: draws with σ/2 fail the chi-square against the pmf of σ (so the test can catch a wrong σ)."""
    x = discrete_gaussian(sigma / 2, 200_000, source=SeededRandomSource(12)).numpy()
    assert _chi_square_p(x, sigma) < ALPHA


@pytest.mark.statistical
@pytest.mark.parametrize("sigma", [2.0, 40.0, 60_000.0])
def test_sample_variance_matches_the_exact_variance(sigma):
    """|s² − Var| <= z_α·sqrt((μ4 − Var²)/n) with Var, μ4 from the exact pmf (σ = 60,000: the
    big-integer rejection path, 2·n·d·t² >= 2^62), α = 1e-6; σ·1.1 is rejected."""
    n = 50_000
    sq = float(exact_sigma_sq_at_least(sigma))
    if sigma > 1000:  # the theta-function sum is σ² to double precision at this scale
        var, mu4 = sq, 3 * sq * sq
        exact = exact_sigma_sq_at_least(sigma)
        t = math.isqrt(exact.numerator // exact.denominator) + 1
        assert 2 * exact.numerator * exact.denominator * t * t >= 1 << 62
    else:
        support = _support(sigma)
        pmf = discrete_gaussian_pmf(support, sigma)
        var, mu4 = float((pmf * support**2).sum()), float((pmf * support.astype(float) ** 4).sum())
    bound = Z_ALPHA * math.sqrt((mu4 - var * var) / n)
    x = discrete_gaussian(sigma, n, source=SeededRandomSource(13)).numpy().astype(np.float64)
    assert abs(float(np.mean(x**2)) - var) <= bound  # the mean is 0: E[X²] is the variance
    wrong = discrete_gaussian(1.1 * sigma, n, source=SeededRandomSource(14)).numpy().astype(np.float64)
    assert abs(float(np.mean(wrong**2)) - var) > bound


@pytest.mark.statistical
@pytest.mark.parametrize("num,den", [(3, 7), (10**20 + 3, 10**19), ((1 << 70) + 5, (1 << 70) + 9)])
def test_bernoulli_exp_is_exact_on_both_paths(num, den):
    """Bernoulli(exp(−num/den)) rate within its Clopper–Pearson interval (α = 1e-6), int64 and big-integer paths."""
    n = 40_000
    hits = int(_bernoulli_exp_rational([num] * n, den, SeededRandomSource(15)).sum())
    lo, hi = clopper_pearson(hits, n, ALPHA)
    assert lo <= math.exp(-num / den) <= hi


def test_exact_sigma_sq_is_never_below_sigma_sq():
    assert exact_sigma_sq_at_least(5.0) == 25
    for sigma in (0.3, 1.7, 66.77860411, 5_000.5, 60_000.0):
        sq = exact_sigma_sq_at_least(sigma)
        assert sq >= Fraction(sigma) ** 2  # the float's exact value, rounded up
        assert sq - Fraction(sigma) ** 2 < Fraction(1, sq.denominator)
        assert sq.denominator & (sq.denominator - 1) == 0  # a power of two
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="sigma"):
            exact_sigma_sq_at_least(bad)
    with pytest.raises(ValueError, match="size"):
        discrete_gaussian(1.0, -1)


def test_exact_laplace_parameter_is_a_double_at_most_one_over_b():
    assert exact_laplace_parameter(2.0) == Fraction(1, 2)
    for b in (0.37, 2.0, 64.10299, 1e5):
        a = exact_laplace_parameter(b)
        assert a <= 1 / Fraction(b) and float(a) == a  # exactly representable
        assert 1 / Fraction(b) - a < a * Fraction(1, 1 << 19)  # and within 2^-19 of 1/b


def test_seeded_source_reproduces_and_system_source_does_not():
    a = discrete_gaussian(7.0, 500, source=SeededRandomSource(3))
    assert (a == discrete_gaussian(7.0, 500, source=SeededRandomSource(3))).all()
    assert not (discrete_gaussian(7.0, 500) == discrete_gaussian(7.0, 500)).all()


# --------------------------------------------------------------------------- the facts the accounting uses


def _log_pmf(x: np.ndarray, sigma: float) -> np.ndarray:
    """log P[X = x] for N_Z(0, σ'²), without underflow."""
    sq = float(exact_sigma_sq_at_least(sigma))
    return np.asarray(-(x.astype(np.float64) ** 2) / (2 * sq) - _log_theta(sq))


def _renyi(sigma: float, shift: int, alpha: float) -> float:
    """D_α(N_Z(0, σ'²) ‖ N_Z(shift, σ'²)), summed over the support."""
    support = _support(sigma + abs(shift))
    log_p = _log_pmf(support, sigma)
    log_q = _log_pmf(support - shift, sigma)
    terms = alpha * log_p + (1 - alpha) * log_q
    top = terms.max()
    return float((top + math.log(np.exp(terms - top).sum())) / (alpha - 1))


@settings(max_examples=60, deadline=None)
@given(
    sigma=st.floats(0.5, 30.0),
    shift=st.integers(1, 3),
    alpha=st.floats(1.05, 60.0),
)
def test_renyi_divergence_at_most_the_continuous_gaussians(sigma, shift, alpha):
    """CKS20 Prop 5: for an integer shift, D_α <= α·shift²/(2σ'²), the continuous Gaussian's RDP."""
    sq = float(exact_sigma_sq_at_least(sigma))
    assert _renyi(sigma, shift, alpha) <= alpha * shift**2 / (2 * sq) * (1 + 1e-9) + 1e-12


@settings(max_examples=60, deadline=None)
@given(sigma=st.floats(0.3, 30.0), t=st.floats(-3.0, 3.0))
def test_moment_generating_function_is_sub_gaussian(sigma, t):
    """CKS20 §2 (sub-Gaussian): E[e^{tX}] <= e^{t²σ'²/2}, the basis of the discrete tail bounds."""
    sq = float(exact_sigma_sq_at_least(sigma))
    support = _support(sigma + abs(t) * sigma * sigma)
    log_terms = _log_pmf(support, sigma) + t * support
    top = log_terms.max()
    log_mgf = float(top + math.log(np.exp(log_terms - top).sum()))
    assert log_mgf <= t * t * sq / 2 + 1e-9


@settings(max_examples=40, deadline=None)
@given(sigma=st.floats(0.5, 15.0), gap=st.integers(0, 60))
def test_tail_bound_of_a_difference_holds_exactly(sigma, gap):
    """P[Z1 − Z2 >= g] (exact convolution of the pmfs) <= exp(−g²/(4σ²)) = discrete_gaussian_tail_bound."""
    support = _support(sigma)
    pmf = discrete_gaussian_pmf(support, sigma)
    diff = np.convolve(pmf, pmf[::-1])  # law of Z1 − Z2 on 2·support
    values = np.arange(2 * support[0], 2 * support[-1] + 1)
    exact = float(diff[values >= gap].sum())
    assert exact <= float(discrete_gaussian_tail_bound(gap, sigma, differences=2)) + 1e-12
