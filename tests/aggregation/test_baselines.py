"""Tests for pate_stab.aggregation.baselines: LNMax, GNMax, Confident-GNMax."""

from __future__ import annotations

import math

import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.pld import pld_privacy_accountant
from scipy import optimize, stats

from pate_stab.aggregation.baselines import ABSTAIN, ConfidentGNMax, GNMax, LNMax
from pate_stab.audit.harness import dp_test
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.accounting.events import GaussianEvent, LaplaceEvent
from pate_stab.privacy.noise.seeded import gaussian, laplace
from tests._stats import ALPHA, assert_not_refuted, assert_refuted

DELTA = 1e-5


def analytic_gaussian_delta(mu: float, epsilon: float) -> float:
    """δ(ε) of the Gaussian mechanism with sensitivity/σ = μ (Balle & Wang 2018, Thm 8)."""
    return float(stats.norm.cdf(mu / 2 - epsilon / mu) - math.exp(epsilon) * stats.norm.cdf(-mu / 2 - epsilon / mu))


def analytic_mu(epsilon: float, delta: float) -> float:
    """The μ at which the Gaussian mechanism is exactly (ε, δ)-DP."""
    return float(optimize.brentq(lambda mu: analytic_gaussian_delta(mu, epsilon) - delta, 1e-3, 50.0, xtol=1e-12))


# --------------------------------------------------------------------------- calibration


def test_lnmax_single_query_pinned() -> None:
    """One Laplace query: ε₀ = 2/b pure, and (ε₀ + 2 log(1 − δ), δ)-DP exactly, so for ε = 1,
    δ = 1e-5 the scale is 2/(1 − 2 log(1 − 1e-5)) = 1.999960 (PLD discretisation 1e-4 in the loss)."""
    agg = LNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1, noise="seeded")
    expected = 2.0 / (1.0 - 2.0 * math.log1p(-DELTA))
    assert expected == pytest.approx(1.999960, abs=1e-6)
    assert agg.noise_scale == pytest.approx(expected, rel=2e-4)
    assert agg.noise_scale >= expected * (1 - 1e-6)  # never less noise than the exact answer
    assert agg.per_query_pure_epsilon == pytest.approx(2.0 / agg.noise_scale)
    assert agg.certified_epsilon <= 1.0
    assert agg.certified_epsilon == pytest.approx(1.0, abs=1e-4)


def test_lnmax_event_uses_sensitivity_two() -> None:
    """A directly configured LNMax with b = 4 and one query is (0.5 + 2 log(1 − δ), δ)-DP."""
    agg = LNMax(noise_scale=4.0, num_queries=1, delta=DELTA, noise="seeded")
    assert agg.certified_epsilon == pytest.approx(0.5 + 2 * math.log1p(-DELTA), abs=2e-4)
    assert agg.per_query_event() == LaplaceEvent(noise_scale=4.0, sensitivity=2.0)
    assert agg.per_query_event().to_dp_event() == dp_event.LaplaceDpEvent(noise_multiplier=2.0)


@pytest.mark.parametrize("num_queries", [1, 100, 10_000])
def test_gnmax_calibration_matches_analytic_gaussian(num_queries: int) -> None:
    """m GNMax queries = one Gaussian mechanism with μ = √(2m)/σ; pinned: m = 1 → σ ≈ 5.276."""
    agg = GNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=num_queries, noise="seeded")
    exact_sigma = math.sqrt(2 * num_queries) / analytic_mu(1.0, DELTA)
    if num_queries == 1:
        assert exact_sigma == pytest.approx(5.2759, abs=1e-3)
    assert exact_sigma <= agg.sigma <= exact_sigma * (1 + 2e-3)
    assert agg.certified_epsilon <= 1.0
    assert agg.certified_epsilon == pytest.approx(1.0, abs=1e-3)
    assert agg.per_query_event() == GaussianEvent(sigma=agg.sigma, sensitivity=math.sqrt(2))
    assert agg.per_query_event().to_dp_event() == dp_event.GaussianDpEvent(noise_multiplier=agg.sigma / math.sqrt(2))


def test_confident_gnmax_calibration_matches_analytic_gaussian() -> None:
    """Data-independent: every query pays the check (Δ = 1) and an answer (Δ = √2):
    μ² = m (1/σ1² + 2/σ2²)."""
    m, ratio = 500, 3.0
    agg = ConfidentGNMax.calibrate(
        epsilon=2.0, delta=DELTA, num_queries=m, threshold=100, sigma_ratio=ratio, noise="seeded"
    )
    assert agg.sigma1 == pytest.approx(ratio * agg.sigma2)
    exact_sigma2 = math.sqrt(m * (1 / ratio**2 + 2)) / analytic_mu(2.0, DELTA)
    assert exact_sigma2 <= agg.sigma2 <= exact_sigma2 * (1 + 2e-3)
    assert agg.certified_epsilon <= 2.0
    assert agg.certified_epsilon == pytest.approx(2.0, abs=1e-3)


def test_lnmax_many_queries_tighter_than_basic_and_rdp() -> None:
    m = 1000
    agg = LNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=m, noise="seeded")
    rdp = LNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=m, accountant="rdp", noise="seeded")
    basic_scale = 2.0 * m / 1.0  # m pure (2/b)-DP queries, basic composition
    assert agg.noise_scale < rdp.noise_scale < basic_scale
    assert agg.certified_epsilon <= 1.0 and rdp.certified_epsilon <= 1.0
    # the PLD result is still a valid bound under the other accountant's analysis (no contradiction)
    again = LNMax(noise_scale=agg.noise_scale, num_queries=m, delta=DELTA, accountant="rdp", noise="seeded")
    assert again.certified_epsilon > 1.0


@pytest.mark.parametrize(
    "make",
    [
        lambda e, m: LNMax.calibrate(epsilon=e, delta=DELTA, num_queries=m).noise_scale,
        lambda e, m: GNMax.calibrate(epsilon=e, delta=DELTA, num_queries=m).sigma,
        lambda e, m: ConfidentGNMax.calibrate(epsilon=e, delta=DELTA, num_queries=m, threshold=50).sigma2,
    ],
    ids=["LNMax", "GNMax", "ConfidentGNMax"],
)
def test_more_queries_or_less_epsilon_more_noise(make) -> None:  # type: ignore[no-untyped-def]
    a, b, c = make(1.0, 10), make(1.0, 100), make(2.0, 100)
    assert a < b
    assert c < b


def test_certified_epsilon_is_the_accountants() -> None:
    agg = GNMax(sigma=30.0, num_queries=50, delta=DELTA, noise="seeded")
    acc = pld_privacy_accountant.PLDAccountant()
    acc.compose(dp_event.SelfComposedDpEvent(dp_event.GaussianDpEvent(30.0 / math.sqrt(2)), 50))
    assert agg.certified_epsilon == pytest.approx(acc.get_epsilon(DELTA), rel=1e-12)
    assert agg.certified_delta == DELTA
    mu = math.sqrt(2 * 50) / 30.0
    assert analytic_gaussian_delta(mu, agg.certified_epsilon) <= DELTA


# --------------------------------------------------------------------------- exact behaviour


def huge_margin_counts() -> torch.Tensor:
    counts = torch.zeros(300, 4, dtype=torch.int64)
    counts[torch.arange(300), torch.arange(300) % 4] = 1000
    return counts


@pytest.mark.parametrize("noise", ["secure", "seeded"])
@pytest.mark.parametrize(
    "make",
    [
        lambda noise: LNMax(noise_scale=20.0, num_queries=300, delta=DELTA, noise=noise),  # margin 1000 = 50 b
        lambda noise: GNMax(sigma=50.0, num_queries=300, delta=DELTA, noise=noise),  # margin 20 σ
        lambda noise: ConfidentGNMax(
            threshold=500, sigma1=25.0, sigma2=50.0, num_queries=300, delta=DELTA, noise=noise
        ),
    ],
    ids=["LNMax", "GNMax", "ConfidentGNMax"],
)
def test_huge_margin_gives_argmax(make, noise: str, generator: torch.Generator) -> None:  # type: ignore[no-untyped-def]
    agg = make(noise)
    labels = agg.release(huge_margin_counts(), generator=generator)
    assert labels.dtype == torch.int64 and labels.shape == (300,)
    assert torch.equal(labels, torch.arange(300) % 4)
    summary = agg.summary()
    assert summary["queries_seen"] == 300 and summary["answered"] == 300 and summary["abstained"] == 0
    assert summary["epsilon"] == agg.certified_epsilon and summary["delta"] == DELTA


def test_confident_gnmax_below_threshold_abstains(generator: torch.Generator) -> None:
    agg = ConfidentGNMax(threshold=500, sigma1=20.0, sigma2=20.0, num_queries=100, delta=DELTA)
    counts = torch.tensor([[0, 0, 0]] * 25 + [[0, 300, 200]] * 25 + [[1000, 0, 0]] * 50)
    labels = agg.release(counts, generator=generator)
    assert (labels[:50] == ABSTAIN).all() and (labels[50:] == 0).all()  # margins ≥ 25 σ
    assert agg.summary()["answered"] == 50 and agg.summary()["abstained"] == 50


def test_release_reproducible_and_matches_sample(generator: torch.Generator) -> None:
    counts = torch.tensor([[5, 4, 3]] * 1000)

    def seeded(m: int) -> GNMax:
        return GNMax(sigma=30.0, num_queries=m, delta=DELTA, noise="seeded")

    a = seeded(1000).release(counts, generator=torch.Generator().manual_seed(7))
    b = seeded(1000).release(counts, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, b)
    assert len(set(a.tolist())) == 3
    s = seeded(1).sample(torch.tensor([5, 4, 3]), 1000, generator=torch.Generator().manual_seed(7))
    assert torch.equal(a, s)


def test_budget_is_enforced(generator: torch.Generator) -> None:
    agg = LNMax(noise_scale=2.0, num_queries=10, delta=DELTA)
    agg.release(torch.tensor([[3, 1]] * 6), generator=generator)
    with pytest.raises(BudgetExhaustedError, match="10 queries"):
        agg.release(torch.tensor([[3, 1]] * 5), generator=generator)
    assert agg.queries_seen == 6
    agg.release(torch.tensor([[3, 1]] * 4), generator=generator)
    assert agg.queries_seen == 10
    # sampling the single-query mechanism for tests does not touch the counters
    agg.sample(torch.tensor([3, 1]), 50, generator=generator)
    assert agg.queries_seen == 10


# --------------------------------------------------------------------------- bad input


@pytest.mark.parametrize("cls", [LNMax, GNMax, ConfidentGNMax])
@pytest.mark.parametrize(
    "kwargs, exc, match",
    [
        ({"epsilon": 0.0}, ValueError, "epsilon"),
        ({"epsilon": -1.0}, ValueError, "epsilon"),
        ({"epsilon": float("nan")}, ValueError, "epsilon"),
        ({"epsilon": float("inf")}, ValueError, "epsilon"),
        ({"delta": 0.0}, ValueError, "delta"),
        ({"delta": 1.0}, ValueError, "delta"),
        ({"delta": float("nan")}, ValueError, "delta"),
        ({"num_queries": 0}, ValueError, "num_queries"),
        ({"num_queries": 2.5}, TypeError, "num_queries"),
        ({"accountant": "moments"}, ValueError, "accountant"),
    ],
)
def test_calibrate_rejects_bad_targets(cls, kwargs, exc, match) -> None:  # type: ignore[no-untyped-def]
    args = {"epsilon": 1.0, "delta": DELTA, "num_queries": 10, **kwargs}
    if cls is ConfidentGNMax:
        args["threshold"] = 10
    with pytest.raises(exc, match=match):
        cls.calibrate(**args)


def test_constructors_reject_bad_noise() -> None:
    for bad in (0.0, -1.0, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="noise_scale"):
            LNMax(noise_scale=bad, num_queries=1, delta=DELTA)
        with pytest.raises(ValueError, match="sigma"):
            GNMax(sigma=bad, num_queries=1, delta=DELTA)
        with pytest.raises(ValueError, match="sigma1"):
            ConfidentGNMax(threshold=1, sigma1=bad, sigma2=1.0, num_queries=1, delta=DELTA)
        with pytest.raises(ValueError, match="sigma_ratio"):
            ConfidentGNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1, threshold=1, sigma_ratio=bad)
    with pytest.raises(ValueError, match="threshold"):
        ConfidentGNMax(threshold=float("nan"), sigma1=1.0, sigma2=1.0, num_queries=1, delta=DELTA)


def test_release_rejects_bad_counts(generator: torch.Generator) -> None:
    agg = GNMax(sigma=50.0, num_queries=100, delta=DELTA, noise="seeded")
    with pytest.raises(TypeError, match="integer"):
        agg.release(torch.tensor([[1.0, 2.0]]), generator=generator)
    with pytest.raises(ValueError, match="2 dimensions"):
        agg.release(torch.tensor([1, 2]), generator=generator)
    with pytest.raises(ValueError, match="non-negative"):
        agg.release(torch.tensor([[1, -2]]), generator=generator)
    with pytest.raises(TypeError, match="generator"):
        agg.release(torch.tensor([[1, 2]]), generator=7)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="1 dimensions"):
        agg.sample(torch.tensor([[1, 2]]), 10, generator=generator)
    assert agg.queries_seen == 0


# --------------------------------------------------------------------------- statistical DP tests
# Each test's false-failure probability for a correct claim is α = 1e-6 (Clopper–Pearson).

NUM_SAMPLES = 200_000


@pytest.fixture(scope="module")
def gnmax_one() -> GNMax:
    return GNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1)


@pytest.fixture(scope="module")
def confident_one() -> ConfidentGNMax:
    return ConfidentGNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1, threshold=10)


def as_mechanism(agg):  # type: ignore[no-untyped-def]
    return lambda x, n, g: agg.sample(x, n, generator=g)


def neighbours(a: list[int], src: int, dst: int) -> tuple[torch.Tensor, torch.Tensor]:
    """a and a with one vote moved from class src to class dst."""
    b = list(a)
    b[src] -= 1
    b[dst] += 1
    return torch.tensor(a), torch.tensor(b)


def lnmax_at(noise_scale: float):  # type: ignore[no-untyped-def]
    def mech(x: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
        counts = x.to(torch.float64).expand(n, -1)
        return (counts + laplace(noise_scale, counts.shape, generator=g)).argmax(1)

    return mech


@pytest.mark.statistical
@pytest.mark.parametrize("counts", [[1, 0, 0], [4, 0, 0], [6, 5, 2]])
def test_lnmax_single_query_is_dp(counts: list[int], generator: torch.Generator) -> None:
    agg = LNMax(noise_scale=2.0, num_queries=1, delta=DELTA)  # pure ε₀ = 1 per query
    a, b = neighbours(counts, 0, 1)
    result = dp_test(
        as_mechanism(agg),
        a,
        b,
        epsilon=agg.per_query_pure_epsilon,
        num_samples=NUM_SAMPLES,
        alpha=ALPHA,
        generator=generator,
    )
    assert_not_refuted(result)


@pytest.mark.statistical
def test_lnmax_broken_scale_is_flagged(generator: torch.Generator) -> None:
    """Noise scale ε/2 instead of 2/ε (claimed ε = 0.5)."""
    epsilon = 0.5
    a, b = neighbours([4, 3, 0], 0, 1)
    result = dp_test(
        lnmax_at(epsilon / 2), a, b, epsilon=epsilon, num_samples=NUM_SAMPLES, alpha=ALPHA, generator=generator
    )
    assert_refuted(result)


@pytest.mark.statistical
def test_lnmax_sensitivity_one_analysis_is_flagged(generator: torch.Generator) -> None:
    """Claiming ε₀ = 1/b (ℓ1 sensitivity 1) is wrong when one record moves one vote."""
    a, b = neighbours([4, 0], 0, 1)
    result = dp_test(lnmax_at(2.0), a, b, epsilon=0.5, num_samples=NUM_SAMPLES, alpha=ALPHA, generator=generator)
    assert_refuted(result)


@pytest.mark.statistical
@pytest.mark.parametrize("counts", [[1, 0, 0], [3, 0, 0], [6, 5, 2]])
def test_gnmax_single_query_is_dp(counts: list[int], gnmax_one: GNMax, generator: torch.Generator) -> None:
    agg = gnmax_one
    a, b = neighbours(counts, 0, 1)
    result = dp_test(
        as_mechanism(agg),
        a,
        b,
        epsilon=agg.single_query_epsilon(DELTA),
        delta=DELTA,
        num_samples=NUM_SAMPLES,
        alpha=ALPHA,
        generator=generator,
    )
    assert_not_refuted(result)


@pytest.mark.statistical
def test_gnmax_broken_scale_is_flagged(generator: torch.Generator) -> None:
    """σ = ε instead of the calibrated σ (≈ 10.5 for ε = 0.5, δ = 1e-5)."""
    epsilon = 0.5

    def mech(x: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
        counts = x.to(torch.float64).expand(n, -1)
        return (counts + gaussian(epsilon, counts.shape, generator=g)).argmax(1)

    a, b = neighbours([2, 1, 0], 0, 1)
    result = dp_test(
        mech, a, b, epsilon=epsilon, delta=DELTA, num_samples=NUM_SAMPLES, alpha=ALPHA, generator=generator
    )
    assert_refuted(result)


@pytest.mark.statistical
@pytest.mark.parametrize("counts, move", [([10, 9, 0], (0, 2)), ([10, 4, 0], (0, 1)), ([9, 9, 1], (2, 0))])
def test_confident_gnmax_single_query_is_dp(counts, move, confident_one, generator) -> None:  # type: ignore[no-untyped-def]
    agg = confident_one
    a, b = neighbours(counts, *move)
    result = dp_test(
        as_mechanism(agg),
        a,
        b,
        epsilon=agg.single_query_epsilon(DELTA),
        delta=DELTA,
        num_samples=NUM_SAMPLES,
        alpha=ALPHA,
        generator=generator,
    )
    assert_not_refuted(result)


@pytest.mark.statistical
def test_confident_gnmax_noiseless_check_is_flagged(confident_one: ConfidentGNMax, generator) -> None:  # type: ignore[no-untyped-def]
    """Dropping the threshold-check noise (a known broken variant) makes ⊥ reveal the max count."""
    agg = confident_one

    def mech(x: torch.Tensor, n: int, g: torch.Generator) -> torch.Tensor:
        counts = x.to(torch.float64).expand(n, -1)
        confident = counts.max(1).values >= agg.threshold
        noisy = counts + gaussian(agg.sigma2, counts.shape, generator=g)
        return torch.where(confident, noisy.argmax(1), ABSTAIN)

    a, b = neighbours([10, 9, 0], 0, 2)
    result = dp_test(
        mech,
        a,
        b,
        epsilon=agg.single_query_epsilon(DELTA),
        delta=DELTA,
        num_samples=NUM_SAMPLES,
        alpha=ALPHA,
        generator=generator,
    )
    assert_refuted(result)


def test_pld_refuses_vacuous_guarantees() -> None:
    with pytest.raises(ValueError, match="accountant='rdp'"):
        LNMax(noise_scale=100.0, num_queries=10**7, delta=DELTA)
    with pytest.raises(ValueError, match="accountant='rdp'"):
        GNMax.calibrate(epsilon=100.0, delta=DELTA, num_queries=10, noise="seeded")
    rdp = LNMax(noise_scale=100.0, num_queries=10**7, delta=DELTA, accountant="rdp")
    assert rdp.certified_epsilon > 64
