"""Privacy events and their composition, checked against closed forms."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import mpmath
import pytest
from scipy.stats import norm

from pate_stab.privacy.accounting.composition import (
    advanced_composition_epsilon,
    delta_for_epsilon,
    epsilon_for_delta,
    implies_guarantee,
    optimal_homogeneous_composition_delta,
)
from pate_stab.privacy.accounting.events import (
    ApproxDpEvent,
    ComposedEvent,
    ExPostEvent,
    GaussianEvent,
    LaplaceEvent,
    PureDpEvent,
    SparseVectorEvent,
    event_from_dict,
)

ROOT = Path(__file__).resolve().parents[3]
INTERVAL = 1e-4  # the default value_discretization_interval
# Float64 round-off of dp-accounting's FFT convolutions and sums, relative to the value compared.
# (Observed below 1e-10; this is not a modelling tolerance, which the sandwich bounds below pin.)
ROUNDOFF = 1e-9

EVENTS = [
    PureDpEvent(0.5),
    SparseVectorEvent(noise_scale=12.5, num_segments=7),
    SparseVectorEvent(noise_scale=3.0, num_segments=2, sensitivity=2.0),
    ApproxDpEvent(0.0, 1e-6, "distance-to-instability leak"),
    ApproxDpEvent(0.3, 1e-7),
    LaplaceEvent(4.0),
    LaplaceEvent(noise_scale=2.0, sensitivity=0.5),
    GaussianEvent(3.0),
    GaussianEvent(sigma=1.5, sensitivity=2.0),
    ComposedEvent((PureDpEvent(0.1), ComposedEvent([GaussianEvent(2.0), ApproxDpEvent(0.0, 1e-9)]))),
    ExPostEvent(0.25, "noise reduction stopped at step 3"),
]


@pytest.mark.parametrize("event", EVENTS, ids=lambda e: type(e).__name__)
def test_events_round_trip_through_json(event: object) -> None:
    data = json.loads(json.dumps(event.to_dict()))  # type: ignore[attr-defined]
    assert event_from_dict(data) == event
    assert type(event).from_dict(data) == event  # type: ignore[attr-defined]


def test_event_from_dict_rejects_unknown_data() -> None:
    with pytest.raises(ValueError, match="unknown event type"):
        event_from_dict({"type": "moments"})
    with pytest.raises(ValueError, match="no fields"):
        event_from_dict({"type": "pure_dp", "epsilon": 1.0, "delta": 0.0})
    with pytest.raises(ValueError, match="cannot build"):
        PureDpEvent.from_dict(LaplaceEvent(1.0).to_dict())


@pytest.mark.parametrize(
    ("build", "name"),
    [
        (lambda: PureDpEvent(0.0), "epsilon"),
        (lambda: PureDpEvent(float("nan")), "epsilon"),
        (lambda: PureDpEvent(float("inf")), "epsilon"),
        (lambda: SparseVectorEvent(noise_scale=-1.0, num_segments=3), "noise_scale"),
        (lambda: SparseVectorEvent(noise_scale=1.0, num_segments=0), "num_segments"),
        (lambda: SparseVectorEvent(noise_scale=1.0, num_segments=3, sensitivity=float("nan")), "sensitivity"),
        (lambda: ApproxDpEvent(0.1, 1.0), "delta"),
        (lambda: ApproxDpEvent(-0.1, 0.0), "epsilon"),
        (lambda: LaplaceEvent(0.0), "noise_scale"),
        (lambda: GaussianEvent(float("inf")), "sigma"),
        (lambda: ExPostEvent(-1.0), "epsilon_ex_post"),
        (lambda: ComposedEvent(()), "events"),
        (lambda: advanced_composition_epsilon(epsilon0=0.0, num=3, delta_prime=1e-5), "epsilon0"),
        (lambda: advanced_composition_epsilon(epsilon0=0.1, num=3, delta_prime=0.0), "delta_prime"),
        (lambda: optimal_homogeneous_composition_delta(epsilon0=0.1, num=0, epsilon=1.0), "num"),
        (lambda: optimal_homogeneous_composition_delta(epsilon0=0.1, num=3, epsilon=float("nan")), "epsilon"),
        (lambda: epsilon_for_delta(PureDpEvent(1.0), delta=1.0), "delta"),
        (lambda: delta_for_epsilon(PureDpEvent(1.0), epsilon=-1.0), "epsilon"),
        (
            lambda: epsilon_for_delta(PureDpEvent(1.0), delta=1e-5, value_discretization_interval=0.0),
            "value_discretization_interval",
        ),
    ],
)
def test_bad_values_raise_naming_the_parameter(build, name: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ValueError, match=name):
        build()


def test_integer_types_are_checked() -> None:
    with pytest.raises(TypeError, match="num_segments"):
        SparseVectorEvent(noise_scale=1.0, num_segments=2.0)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="num"):
        advanced_composition_epsilon(epsilon0=0.1, num=2.5, delta_prime=1e-5)  # type: ignore[arg-type]


def test_ex_post_does_not_compose() -> None:
    with pytest.raises(TypeError, match="ex-post"):
        ExPostEvent(0.2).to_pld()
    with pytest.raises(TypeError, match="ExPostEvent"):
        epsilon_for_delta([PureDpEvent(0.1), ExPostEvent(0.2)], delta=1e-5)
    with pytest.raises(TypeError, match="ExPostEvent"):
        ComposedEvent([ExPostEvent(0.2)])


# -- closed forms ------------------------------------------------------------------------------------


def test_optimal_composition_small_cases_by_hand() -> None:
    # k = 1, ε = 0: δ = p·(1 − e^{−ε0}) = (e^{ε0} − 1)/(e^{ε0} + 1) = tanh(ε0/2).
    assert math.isclose(
        optimal_homogeneous_composition_delta(epsilon0=0.7, num=1, epsilon=0.0), math.tanh(0.35), rel_tol=1e-14
    )
    # k = 2, ε = 0: only j = 0 (loss 2ε0) is positive; δ = p²·(1 − e^{−2ε0}).
    p = math.exp(0.7) / (1 + math.exp(0.7))
    assert math.isclose(
        optimal_homogeneous_composition_delta(epsilon0=0.7, num=2, epsilon=0.0),
        p * p * -math.expm1(-1.4),
        rel_tol=1e-14,
    )
    # No loss exceeds kε0: δ(kε0) = 0.
    assert optimal_homogeneous_composition_delta(epsilon0=0.3, num=5, epsilon=1.5) == 0.0


def _optimal_delta_mpmath(epsilon0: float, num: int, epsilon: float) -> float:
    """The same sum in 50-digit arithmetic, term by term, as an independent reference."""
    with mpmath.workdps(50):
        e0, eps = mpmath.mpf(epsilon0), mpmath.mpf(epsilon)
        p = mpmath.exp(e0) / (1 + mpmath.exp(e0))
        total = mpmath.mpf(0)
        for j in range(num + 1):
            loss = e0 * (num - 2 * j)
            if loss > eps:
                total += mpmath.binomial(num, j) * p ** (num - j) * (1 - p) ** j * (1 - mpmath.exp(eps - loss))
        return float(total)


@pytest.mark.parametrize(
    ("epsilon0", "num", "epsilon"), [(0.1, 100, 2.0), (0.05, 2000, 3.0), (0.02, 3000, 2.5), (1.0, 30, 12.0)]
)
def test_optimal_composition_matches_high_precision(epsilon0: float, num: int, epsilon: float) -> None:
    ours = optimal_homogeneous_composition_delta(epsilon0=epsilon0, num=num, epsilon=epsilon)
    assert math.isclose(ours, _optimal_delta_mpmath(epsilon0, num, epsilon), rel_tol=1e-10)


def test_optimal_composition_pinned() -> None:
    # ε0 = 0.1, k = 100, ε = 2: the 50-digit sum above gives 0.0201401784281915...
    assert math.isclose(
        optimal_homogeneous_composition_delta(epsilon0=0.1, num=100, epsilon=2.0), 0.0201401784281915, rel_tol=1e-12
    )


def test_advanced_composition_pinned() -> None:
    # By hand: ε0 = 0.1, k = 100, δ' = 1e-5.
    #   sqrt(2·100·ln(1e5)) = sqrt(200 · 11.5129255) = sqrt(2302.5851) = 47.985261; × 0.1 = 4.7985261
    #   k·ε0·(e^{ε0} − 1) = 10 · 0.10517092 = 1.0517092
    #   ε = 4.7985261 + 1.0517092 = 5.8502353 (to 7 digits; 5.85023509 exactly below)
    assert math.isclose(advanced_composition_epsilon(epsilon0=0.1, num=100, delta_prime=1e-5), 5.8502351, rel_tol=1e-7)
    # k = 1, δ' = e^{-1/2}: sqrt(2·ln(e^{1/2}))·ε0 + ε0(e^{ε0} − 1) = ε0·e^{ε0}.
    assert math.isclose(
        advanced_composition_epsilon(epsilon0=0.5, num=1, delta_prime=math.exp(-0.5)),
        0.5 * math.exp(0.5),
        rel_tol=1e-14,
    )


# -- PLD composition against the exact values ---------------------------------------------------------


# Noise scales chosen so that ε0 = 2/λ is *not* a multiple of the grid: rounding up is visible.
@pytest.mark.parametrize(
    ("noise_scale", "num_segments", "epsilon"),
    [(20.3, 10, 0.5), (20.3, 100, 2.0), (7.77, 50, 4.0), (41.1, 1000, 4.0), (3.3, 3, 0.9)],
)
def test_sparse_vector_pld_matches_optimal_composition(noise_scale: float, num_segments: int, epsilon: float) -> None:
    """δ_exact(ε) ≤ δ_PLD(ε) ≤ δ_exact(ε − k·h): pessimistic, and off only by the rounding of each
    segment's loss up to the grid h (at most h per segment, k·h in total)."""
    event = SparseVectorEvent(noise_scale=noise_scale, num_segments=num_segments)
    epsilon0 = event.epsilon_per_segment
    pld = delta_for_epsilon(event, epsilon=epsilon)
    exact = optimal_homogeneous_composition_delta(epsilon0=epsilon0, num=num_segments, epsilon=epsilon)
    upper = optimal_homogeneous_composition_delta(
        epsilon0=epsilon0, num=num_segments, epsilon=epsilon - num_segments * INTERVAL
    )
    assert exact > 1e-9
    assert pld >= exact * (1 - ROUNDOFF)
    assert pld <= upper * (1 + ROUNDOFF)
    # and the ε side: the PLD's ε(δ) is a valid ε for the exact curve
    delta = exact
    eps_pld = epsilon_for_delta(event, delta=delta)
    assert optimal_homogeneous_composition_delta(epsilon0=epsilon0, num=num_segments, epsilon=eps_pld) <= delta * (
        1 + ROUNDOFF
    )
    assert eps_pld <= epsilon + num_segments * INTERVAL


def test_coarser_grid_is_more_pessimistic() -> None:
    event = SparseVectorEvent(noise_scale=20.3, num_segments=30)
    fine = epsilon_for_delta(event, delta=1e-5, value_discretization_interval=1e-5)
    default = epsilon_for_delta(event, delta=1e-5)
    coarse = epsilon_for_delta(event, delta=1e-5, value_discretization_interval=1e-2)
    assert fine <= default <= coarse


@pytest.mark.parametrize(
    ("epsilon0", "num", "delta"),
    [(0.1, 10, 1e-5), (0.1, 100, 1e-5), (0.05, 400, 1e-6), (0.5, 20, 1e-5), (1.0, 5, 1e-3)],
)
def test_pld_epsilon_at_most_advanced_composition(epsilon0: float, num: int, delta: float) -> None:
    event = SparseVectorEvent(noise_scale=2.0 / epsilon0, num_segments=num)
    pld = epsilon_for_delta(event, delta=delta)
    advanced = advanced_composition_epsilon(epsilon0=epsilon0, num=num, delta_prime=delta)
    assert pld <= advanced
    assert pld <= num * epsilon0 + num * INTERVAL  # and never worse than basic composition, up to rounding


@pytest.mark.parametrize("epsilon", [0.0, 0.1, 0.3, 0.49])
def test_laplace_pld_matches_closed_form(epsilon: float) -> None:
    # Lap(b), sensitivity Δ, ε_L = Δ/b: δ(ε) = 1 − e^{(ε − ε_L)/2} for 0 ≤ ε ≤ ε_L.
    exact = -math.expm1((epsilon - 0.5) / 2)
    pld = delta_for_epsilon(LaplaceEvent(noise_scale=2.0, sensitivity=1.0), epsilon=epsilon)
    assert exact * (1 - ROUNDOFF) <= pld <= exact * (1 + 1e-6)


@pytest.mark.parametrize("epsilon", [0.0, 0.5, 1.0, 2.0])
def test_gaussian_pld_matches_closed_form(epsilon: float) -> None:
    # Balle & Wang 2018, Thm 8: δ(ε) = Φ(Δ/2σ − εσ/Δ) − e^ε Φ(−Δ/2σ − εσ/Δ).
    sigma, sens = 2.0, 1.0
    exact = norm.cdf(sens / (2 * sigma) - epsilon * sigma / sens) - math.exp(epsilon) * norm.cdf(
        -sens / (2 * sigma) - epsilon * sigma / sens
    )
    pld = delta_for_epsilon(GaussianEvent(sigma=sigma, sensitivity=sens), epsilon=epsilon)
    assert exact * (1 - ROUNDOFF) <= pld <= exact * (1 + 1e-6)


def test_approx_dp_deltas_compose_as_mass_at_infinity() -> None:
    # Two (0, δ_i) events: δ(0) = 1 − (1 − δ1)(1 − δ2) ≤ δ1 + δ2.
    both = delta_for_epsilon([ApproxDpEvent(0.0, 1e-3), ApproxDpEvent(0.0, 2e-3)], epsilon=0.0)
    assert math.isclose(both, 1 - (1 - 1e-3) * (1 - 2e-3), rel_tol=1e-12)
    # A pure ε part plus a δ: at ε (on the grid) only the δ remains.
    assert math.isclose(
        delta_for_epsilon([PureDpEvent(0.5), ApproxDpEvent(0.0, 1e-3)], epsilon=0.5), 1e-3, rel_tol=1e-12
    )


def test_composed_event_equals_list_and_grouping() -> None:
    parts = [SparseVectorEvent(noise_scale=9.1, num_segments=4), GaussianEvent(3.0), ApproxDpEvent(0.1, 1e-7)]
    as_list = epsilon_for_delta(parts, delta=1e-6)
    nested = epsilon_for_delta(ComposedEvent([parts[0], ComposedEvent(parts[1:])]), delta=1e-6)
    assert math.isclose(as_list, nested, rel_tol=1e-12)
    # k segments in one event = k one-segment events (grouped and self-composed)
    one = SparseVectorEvent(noise_scale=9.1, num_segments=1)
    assert math.isclose(
        delta_for_epsilon([one] * 4, epsilon=0.7), delta_for_epsilon(parts[0], epsilon=0.7), rel_tol=1e-9
    )


def test_implies_guarantee() -> None:
    event = SparseVectorEvent(noise_scale=20.0, num_segments=30)
    assert implies_guarantee(event, epsilon=3.0, delta=0.0)  # basic composition: 30 · 0.1
    eps = epsilon_for_delta(event, delta=1e-6)
    assert eps < 3.0
    assert implies_guarantee(event, epsilon=eps, delta=1e-6)
    assert not implies_guarantee(event, epsilon=eps * 0.9, delta=1e-6)
    assert not implies_guarantee(GaussianEvent(1.0), epsilon=1.0, delta=1e-6)


def test_accounting_imports_no_lightning_or_model_code() -> None:
    code = (
        "import sys, pate_stab.privacy.accounting.composition, pate_stab.privacy.ledger.privacy_ledger; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('lightning', 'pytorch_lightning', 'torchvision')"
        " or m.startswith(('pate_stab.models', 'pate_stab.teachers', 'pate_stab.student', 'pate_stab.aggregation'))]; "
        "print(bad)"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
