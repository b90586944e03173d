"""Calibration: pinned values, the exact leak bound (closed form and Monte Carlo), tight < paper."""

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import stats

from pate_stab.privacy.accounting.composition import advanced_composition_epsilon, optimal_homogeneous_composition_delta
from pate_stab.privacy.mechanisms.calibration import (
    calibrate,
    leak_probability,
    paper_noise_scale,
    paper_threshold,
    sparse_vector_pld_epsilon,
    threshold_for_leak,
)
from pate_stab.privacy.noise.seeded import laplace

GRID = [(eps, t) for eps in (1.0, 3.0, 8.0) for t in (10, 50)]


def test_pinned_paper_values():
    cal = calibrate(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, mode="paper")
    lam = math.sqrt(32 * 10 * math.log(2e5)) / 3
    assert cal.noise_scale == pytest.approx(lam, rel=1e-12)
    assert cal.noise_scale == pytest.approx(20.83, abs=0.01)
    assert cal.threshold == pytest.approx(2 * lam * math.log(2e8), rel=1e-12)  # the paper's w meets the bound
    assert not cal.threshold_corrected
    assert paper_noise_scale(epsilon=3, delta=1e-5, max_unstable=10, soft_labels=True) == pytest.approx(
        math.sqrt(64 * 10 * math.log(2e5)) / 3
    )


def test_pinned_composition_values():
    assert advanced_composition_epsilon(epsilon0=0.1, num=10, delta_prime=1e-5) == pytest.approx(
        math.sqrt(20 * math.log(1e5)) * 0.1 + 10 * 0.1 * math.expm1(0.1), rel=1e-12
    )
    assert optimal_homogeneous_composition_delta(epsilon0=1.0, num=1, epsilon=0.0) == pytest.approx(
        (math.e - 1) / (math.e + 1)
    )
    # one ε0-DP mechanism: δ(ε0) = 0
    assert optimal_homogeneous_composition_delta(epsilon0=0.7, num=1, epsilon=0.7) == 0.0


@pytest.mark.parametrize("eps0,k", [(0.1, 10), (0.3, 40), (0.05, 200)])
def test_pld_matches_exact_optimal_composition(eps0, k):
    delta = 1e-5
    eps_pld = sparse_vector_pld_epsilon(noise_scale=2 / eps0, num_segments=k, delta=delta)
    # the PLD is pessimistic: at its ε the exact δ is at most δ (up to dp-accounting's float
    # search tolerance, ~1e-10 relative), and a slightly smaller ε fails
    assert optimal_homogeneous_composition_delta(epsilon0=eps0, num=k, epsilon=eps_pld) <= delta * (1 + 1e-8)
    assert optimal_homogeneous_composition_delta(epsilon0=eps0, num=k, epsilon=eps_pld * 0.99 - 1e-3) > delta
    assert eps_pld <= advanced_composition_epsilon(epsilon0=eps0, num=k, delta_prime=delta)


@pytest.mark.parametrize("soft", [False, True])
@pytest.mark.parametrize("eps,t", GRID)
def test_certificates_hold(eps, t, soft):
    for mode in ("paper", "tight"):
        cal = calibrate(epsilon=eps, delta=1e-5, num_queries=1000, max_unstable=t, mode=mode, soft_labels=soft)
        assert cal.certified_epsilon <= eps * (1 + 1e-9)
        assert cal.certified_delta <= 1e-5  # as computed, no rounding slack
        # the leak of every test that can run fits in the leak's share of δ (DESIGN fact 3)
        assert cal.num_tests * leak_probability(
            threshold=cal.threshold, noise_scale=cal.noise_scale
        ) <= cal.delta_leak * (1 + 1e-9)
        # the sparse-vector part certifies ε at its share of δ (exact optimal composition)
        assert optimal_homogeneous_composition_delta(
            epsilon0=2 / cal.noise_scale, num=cal.num_segments, epsilon=cal.certified_epsilon
        ) <= cal.delta_sparse_vector * (1 + 1e-9)
    paper = calibrate(epsilon=eps, delta=1e-5, num_queries=1000, max_unstable=t, mode="paper", soft_labels=soft)
    tight = calibrate(epsilon=eps, delta=1e-5, num_queries=1000, max_unstable=t, mode="tight", soft_labels=soft)
    assert tight.noise_scale < paper.noise_scale
    assert tight.threshold < paper.threshold


def test_soft_label_paper_threshold_is_corrected():
    # Alg 6's w = λ log(4m/δ) leaks about √(δ/m) per test, far above δ/(4m) (DESIGN fact 3).
    cal = calibrate(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, mode="paper", soft_labels=True)
    w_paper = paper_threshold(noise_scale=cal.noise_scale, delta=1e-5, num_queries=1000, soft_labels=True)
    assert leak_probability(threshold=w_paper, noise_scale=cal.noise_scale) > 100 * cal.delta_leak / cal.num_tests
    assert cal.threshold_corrected and cal.threshold > w_paper
    assert cal.num_segments == 20 and cal.num_tests == 2000


def test_leak_closed_form_inverse():
    for p in (1e-12, 1e-8, 1e-3, 0.2, 0.49):
        w = threshold_for_leak(probability=p, noise_scale=3.0)
        assert leak_probability(threshold=w, noise_scale=3.0) == pytest.approx(p, rel=1e-9)
    assert threshold_for_leak(probability=0.5, noise_scale=1.0) == 0.0
    assert leak_probability(threshold=0.0, noise_scale=1.0) == pytest.approx(0.5)


@pytest.mark.statistical
def test_leak_closed_form_monte_carlo():
    # P[Lap(2λ) − Lap(λ) > w] estimated from 10^6 draws; Clopper–Pearson interval at α = 1e-6.
    gen = torch.Generator().manual_seed(7)
    lam, n = 1.0, 1_000_000
    z = laplace(2 * lam, n, generator=gen) - laplace(lam, n, generator=gen)
    for w in (0.5, 2.0, 6.0, 12.0):
        count = int((z > w).sum())
        lo = stats.beta.ppf(0.5e-6, count, n - count + 1) if count else 0.0
        hi = stats.beta.ppf(1 - 0.5e-6, count + 1, n - count)
        assert lo <= leak_probability(threshold=w, noise_scale=lam) <= hi


@pytest.mark.parametrize(
    "kwargs,name",
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": -1.0}, "epsilon"),
        ({"epsilon": math.nan}, "epsilon"),
        ({"epsilon": math.inf}, "epsilon"),
        ({"delta": 0.0}, "delta"),
        ({"delta": 1.0}, "delta"),
        ({"delta": math.nan}, "delta"),
        ({"num_queries": 0}, "num_queries"),
        ({"max_unstable": 0}, "max_unstable"),
        ({"max_unstable": 2000}, "max_unstable"),
        ({"mode": "loose"}, "mode"),
    ],
)
def test_bad_input(kwargs, name):
    args = {"epsilon": 1.0, "delta": 1e-5, "num_queries": 1000, "max_unstable": 10, "mode": "paper"}
    args.update(kwargs)
    with pytest.raises(ValueError, match=name):
        calibrate(**args)


def test_type_errors():
    with pytest.raises(TypeError, match="num_queries"):
        calibrate(epsilon=1.0, delta=1e-5, num_queries=10.5, max_unstable=1)
    with pytest.raises(TypeError, match="epsilon"):
        calibrate(epsilon="1", delta=1e-5, num_queries=10, max_unstable=1)


def test_paper_mode_at_large_epsilon_uses_the_better_analysis():
    # advanced composition is loose at large ε (here it exceeds the target): PLD certifies instead
    cal = calibrate(epsilon=200.0, delta=1e-5, num_queries=10, max_unstable=1, mode="paper")
    assert advanced_composition_epsilon(epsilon0=2 / cal.noise_scale, num=1, delta_prime=5e-6) > 200.0
    assert cal.composition.startswith("optimal") and cal.certified_epsilon <= 200.0
    tight = calibrate(epsilon=200.0, delta=1e-5, num_queries=10, max_unstable=1, mode="tight")
    assert tight.certified_epsilon <= 200.0


@settings(max_examples=60, deadline=None)
@given(
    eps=st.floats(0.2, 10.0),
    delta=st.floats(1e-9, 0.05),
    m=st.integers(1, 5000),
    t=st.integers(1, 60),
    soft=st.booleans(),
    split=st.floats(0.05, 0.95),
)
def test_certified_delta_never_exceeds_the_target_as_computed(eps, delta, m, t, soft, split):
    """The float certificate itself stays within (ε, δ): rounding in the leak inverse and in the δ
    split is absorbed by the threshold, never by the certificate."""
    t = min(t, m)
    cal = calibrate(
        epsilon=eps, delta=delta, num_queries=m, max_unstable=t, mode="tight", soft_labels=soft, delta_split=split
    )
    assert cal.certified_delta <= delta
    assert (
        cal.delta_sparse_vector + cal.num_tests * leak_probability(threshold=cal.threshold, noise_scale=cal.noise_scale)
        <= delta
    )
    assert cal.certified_epsilon <= eps


# -- a calibration is checked wherever it is made or accepted (audit defect D5) ---------------------


def test_edited_calibration_is_refused():
    import dataclasses

    cal = calibrate(epsilon=1.0, delta=1e-5, num_queries=100, max_unstable=5, mode="tight")
    with pytest.raises(ValueError, match="leak"):
        dataclasses.replace(cal, threshold=0.0)  # true leak 0.5 per test
    with pytest.raises(ValueError, match="sparse-vector"):
        dataclasses.replace(cal, noise_scale=cal.noise_scale / 2, threshold=cal.threshold * 2)
    with pytest.raises(ValueError, match="cutoff"):
        dataclasses.replace(cal, num_segments=cal.num_segments - 1)
    with pytest.raises(ValueError, match="tests"):
        dataclasses.replace(cal, num_tests=1)


def test_releaser_recomputes_the_leak_of_a_forged_calibration(tmp_path):
    from pate_stab.aggregation.releaser import StabilityReleaser, releaser_event
    from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger

    cal = calibrate(epsilon=1.0, delta=1e-5, num_queries=100, max_unstable=5, mode="tight")
    forged = copy.copy(cal)
    object.__setattr__(forged, "threshold", 0.0)  # bypasses the constructor's check
    with pytest.raises(ValueError, match="calibration does not hold"):
        releaser_event(forged)
    ledger = PrivacyLedger(tmp_path / "l.jsonl", run_id="t", budget_epsilon=10.0, budget_delta=1e-3)
    with pytest.raises(ValueError):
        StabilityReleaser(forged, noise="seeded", generator=torch.Generator().manual_seed(0), ledger=ledger)
    assert ledger.entries() == []
