"""Composition of privacy events: ε(δ), δ(ε), guarantees, and closed-form composition bounds.

The events themselves (:class:`~pate_stab.privacy.accounting.events.SparseVectorEvent`,
:class:`~pate_stab.privacy.accounting.events.LaplaceEvent`, …) live in :mod:`pate_stab.privacy.accounting.events`;
this module composes them with the privacy-loss-distribution (PLD) accountant of Google's
``dp_accounting`` (Koskela et al. 2020; Doroshenko et al. 2022). Every PLD is the *pessimistic*
estimate (see :mod:`pate_stab.privacy.accounting.events`), so the ε(δ) and δ(ε) reported are upper bounds
on the true ones, never optimistic.

Ex-post privacy (Ligett et al. 2017, Def 2.3) is not an (ε, δ) guarantee and does not compose
into one: an :class:`~pate_stab.privacy.accounting.events.ExPostEvent` is refused here.

The same events are also composed by dp-accounting's own accountants (:func:`accountant_epsilon`:
its PLD accountant, or its RDP accountant for events without a valid PLD such as the discrete
Gaussian), which is how PATE's aggregators certify and calibrate their noise
(:func:`calibrate_scale`); :func:`implies_guarantee` accepts a declared (ε, δ) that any of these
upper bounds proves.

The persistent ledger is :mod:`pate_stab.privacy.ledger.privacy_ledger`; it imports this module, never the
other way round.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Literal

from dp_accounting import mechanism_calibration, privacy_accountant
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from pate_stab._checks import (
    check_delta,
    check_int,
    check_nonnegative,
    check_positive,
)
from pate_stab.privacy.accounting.events import (
    DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    ApproxDpEvent,
    ComposedEvent,
    ExPostEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureDpEvent,
    SelfComposedEvent,
    SparseVectorEvent,
    composed_pld,
)

__all__ = [
    "AccountantName",
    "MAX_PLD_EPSILON",
    "accountant_epsilon",
    "calibrate_scale",
    "check_pld_feasible",
    "fresh_accountant",
    "zcdp_guess",
    "epsilon_for_delta",
    "delta_for_epsilon",
    "implies_guarantee",
    "advanced_composition_epsilon",
    "optimal_homogeneous_composition_delta",
]


def _as_events(events: PrivacyEvent | Iterable[PrivacyEvent]) -> list[PrivacyEvent]:
    if isinstance(events, PrivacyEvent):
        return [events]
    if not isinstance(events, Iterable):
        raise TypeError(f"events must be an event or a sequence of events, got {type(events).__name__}")
    return list(events)


def epsilon_for_delta(
    events: PrivacyEvent | Iterable[PrivacyEvent],
    *,
    delta: float,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """Smallest ε such that the composition of ``events`` is (ε, ``delta``)-DP, from the PLD.

    The PLDs are pessimistic (losses rounded up to the grid of width
    ``value_discretization_interval``), so the ε returned is an upper bound on the true one.
    (ε, δ) events contribute their δ as mass at +∞ (see :class:`ApproxDpEvent`).

    Example: ``epsilon_for_delta(SparseVectorEvent(noise_scale=20, num_segments=10),
    delta=1e-5)`` ≈ 0.9937, against 10 · 0.1 = 1.0 by basic composition (the gap grows with
    the number of segments).

    Raises:
        TypeError: an event is not a composable privacy event (e.g. an :class:`ExPostEvent`).
        ValueError: ``delta`` outside [0, 1) or not finite; no events.
    """
    delta = check_delta(delta, allow_zero=True)
    pld = composed_pld(_as_events(events), value_discretization_interval=value_discretization_interval)
    return float(pld.get_epsilon_for_delta(delta))


def delta_for_epsilon(
    events: PrivacyEvent | Iterable[PrivacyEvent],
    *,
    epsilon: float,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> float:
    """Smallest δ such that the composition of ``events`` is (``epsilon``, δ)-DP, from the PLD.

    Pessimistic like :func:`epsilon_for_delta`: the δ returned is an upper bound on the true one.

    Raises:
        TypeError: an event is not a composable privacy event.
        ValueError: ``epsilon`` negative or not finite; no events.
    """
    epsilon = check_nonnegative("epsilon", epsilon)
    pld = composed_pld(_as_events(events), value_discretization_interval=value_discretization_interval)
    return float(pld.get_delta_for_epsilon(epsilon))


def _basic_bound(event: PrivacyEvent) -> tuple[float, float] | None:
    """(Σ ε, Σ δ) of an event by basic composition, or None when it has no pure-ε form."""
    if isinstance(event, PureDpEvent):
        return event.epsilon, 0.0
    if isinstance(event, SparseVectorEvent):
        return event.num_segments * event.epsilon_per_segment, 0.0
    if isinstance(event, ApproxDpEvent):
        return event.epsilon, event.delta
    if isinstance(event, LaplaceEvent):
        return event.sensitivity / event.noise_scale, 0.0
    if isinstance(event, SelfComposedEvent):
        inner = _basic_bound(event.event)
        return None if inner is None else (event.count * inner[0], event.count * inner[1])
    if isinstance(event, ComposedEvent):
        parts = [_basic_bound(e) for e in event.events]
        if any(p is None for p in parts):
            return None
        return math.fsum(p[0] for p in parts if p), math.fsum(p[1] for p in parts if p)
    return None


def implies_guarantee(
    event: PrivacyEvent,
    *,
    epsilon: float,
    delta: float,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> bool:
    """Whether the mechanism ``event`` describes is (``epsilon``, ``delta``)-DP.

    True when basic composition (Dwork & Roth 2014, Thm 3.16) of the event's parts already gives
    it, when dp-accounting's RDP or PLD accountant (:func:`accountant_epsilon`, for events with a
    dp-accounting counterpart) gives ε(``delta``) ≤ ``epsilon``, or when the pessimistic PLD gives
    δ(ε) ≤ ``delta``. Each is an upper bound on the true privacy loss, so any one suffices. A
    relative 1e-9 is allowed for the floating-point round-off between ε(δ) and δ(ε) computed from
    one PLD, so that an ε obtained from :func:`epsilon_for_delta` or :func:`accountant_epsilon` is
    accepted with the same δ.
    """
    epsilon = check_nonnegative("epsilon", epsilon)
    delta = check_delta(delta, allow_zero=True)
    if isinstance(event, ExPostEvent):
        raise TypeError("an ExPostEvent is not an (ε, δ) guarantee")
    basic = _basic_bound(event)
    rtol = 1e-9
    if basic is not None and basic[0] <= epsilon * (1 + rtol) and basic[1] <= delta * (1 + rtol):
        return True
    if delta > 0:
        for name in ("rdp", "pld"):
            try:
                bound = accountant_epsilon(event, delta=delta, accountant=name)
            except (TypeError, NotImplementedError):  # no counterpart valid for this accountant
                continue
            if bound <= epsilon * (1 + rtol):
                return True
            if bound > MAX_PLD_EPSILON:  # far off: PLD accounting would only be slow, not tighter enough
                break
    try:
        implied = delta_for_epsilon(event, epsilon=epsilon, value_discretization_interval=value_discretization_interval)
    except TypeError:  # an event without a PLD (e.g. the discrete Gaussian), not proved above
        return False
    return implied <= delta * (1 + rtol)


def advanced_composition_epsilon(*, epsilon0: float, num: int, delta_prime: float) -> float:
    """ε of the ``num``-fold composition of ``epsilon0``-DP mechanisms, at extra δ′.

    Advanced composition (Dwork, Rothblum & Vadhan 2010; Dwork & Roth 2014, Thm 3.20): k
    adaptively composed ε0-DP mechanisms are (ε, δ′)-DP with
    ε = sqrt(2k ln(1/δ′))·ε0 + k·ε0·(e^{ε0} − 1).

    Example: ε0 = 0.1, k = 100, δ′ = 1e-5 gives ε ≈ 5.8502.

    Raises:
        ValueError: ``epsilon0`` ≤ 0, ``num`` < 1, ``delta_prime`` outside (0, 1); NaN/inf.
    """
    epsilon0 = check_positive("epsilon0", epsilon0)
    num = check_int("num", num, minimum=1)
    delta_prime = check_delta(delta_prime, "delta_prime")
    return math.sqrt(2.0 * num * math.log(1.0 / delta_prime)) * epsilon0 + num * epsilon0 * math.expm1(epsilon0)


def optimal_homogeneous_composition_delta(*, epsilon0: float, num: int, epsilon: float) -> float:
    """Exact δ(ε) of the ``num``-fold composition of ε0-randomized response.

    This is the optimal (smallest valid) δ for k-fold composition of ε0-DP mechanisms
    (Kairouz, Oh & Viswanath 2015, Thm 3.3 / Murtagh & Vadhan 2016). Under the first of the two
    worst-case inputs each round's privacy loss is +ε0 with probability p = e^{ε0}/(1 + e^{ε0})
    and −ε0 with q = 1 − p, so with j losses of −ε0 the total loss is ε0(k − 2j) and
    δ(ε) = E[(1 − e^{ε − L})₊] = Σ_j C(k, j) p^{k−j} q^j max(0, 1 − e^{ε − ε0(k − 2j)}).
    Terms are formed in log space (log C(k, j) from the exact integer, log p = −log1p(e^{−ε0}),
    log q = −log1p(e^{ε0})) and summed with ``math.fsum``; accurate for k in the thousands.

    Example: ε0 = 0.1, k = 100, ε = 2 gives δ ≈ 0.020140 (pinned in the tests).

    Raises:
        ValueError: ``epsilon0`` ≤ 0, ``num`` < 1, ``epsilon`` < 0; NaN/inf.
    """
    epsilon0 = check_positive("epsilon0", epsilon0)
    num = check_int("num", num, minimum=1)
    epsilon = check_nonnegative("epsilon", epsilon)
    log_p = -math.log1p(math.exp(-epsilon0))
    log_q = -epsilon0 - math.log1p(math.exp(-epsilon0))  # = −log1p(e^{ε0}), without overflow
    terms = []
    for j in range(num + 1):
        loss = epsilon0 * (num - 2 * j)
        if loss <= epsilon:
            break  # losses decrease in j
        log_weight = math.log(math.comb(num, j)) + (num - j) * log_p + j * log_q
        terms.append(math.exp(log_weight) * -math.expm1(epsilon - loss))
    return min(1.0, math.fsum(terms))


# --------------------------------------------------------------------------- dp-accounting's accountants

AccountantName = Literal["pld", "rdp"]
NEIGHBOURS = privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE
MAX_PLD_EPSILON = 64.0
"""Largest ε (by the cheap RDP bound) that PLD accounting is asked to certify; see ``check_pld_feasible``."""


class PldRangeError(ValueError):
    """A guarantee too weak for PLD accounting (ε above :data:`MAX_PLD_EPSILON`, by the target or the RDP bound)."""


def fresh_accountant(accountant: str) -> privacy_accountant.PrivacyAccountant:
    """A new dp-accounting accountant, ``"pld"`` (``PLDAccountant``) or ``"rdp"`` (``RdpAccountant``), add/remove.

    The events are expressed at unit sensitivity, dp-accounting's ``ADD_OR_REMOVE_ONE`` relation
    for unsampled Laplace / Gaussian events; the record-level relation enters through each event's
    sensitivity.
    """
    if accountant == "pld":
        return pld_privacy_accountant.PLDAccountant(NEIGHBOURS)
    if accountant == "rdp":
        return rdp_privacy_accountant.RdpAccountant(neighboring_relation=NEIGHBOURS)
    raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")


def accountant_epsilon(event: PrivacyEvent, *, delta: float, accountant: str) -> float:
    """ε at ``delta`` of ``event`` composed by a fresh dp-accounting ``accountant`` ("pld" or "rdp").

    Example: ``accountant_epsilon(SelfComposedEvent(GaussianEvent(sigma=5.27, sensitivity=2**0.5), 1),
    delta=1e-5, accountant="pld")`` ≈ 1.0 (GNMax, one query at ε = 1).

    Raises:
        TypeError: the event has no dp-accounting counterpart valid for that accountant.
        NotImplementedError: the accountant does not support the event.
    """
    if not isinstance(event, PrivacyEvent):
        raise TypeError(f"event must be a privacy event, got {type(event).__name__}")
    dp_event = event.to_dp_event(accountant=accountant)
    acc = fresh_accountant(accountant)
    if not acc.supports(dp_event):
        raise NotImplementedError(f"the {accountant} accountant does not support {dp_event!r}")
    return float(acc.compose(dp_event).get_epsilon(delta))


def check_pld_feasible(event: PrivacyEvent, *, delta: float, accountant: str) -> None:
    """Refuse PLD accounting of very weak guarantees (memory grows with ε: ~3 GB at ε ≈ 100, m = 10⁶).

    The RDP bound is cheap; when it exceeds :data:`MAX_PLD_EPSILON` the guarantee is vacuous
    anyway, and the caller is told to use ``accountant="rdp"`` if the number is still wanted.
    """
    if accountant != "pld":
        return
    rdp_epsilon = accountant_epsilon(event, delta=delta, accountant="rdp")
    if rdp_epsilon > MAX_PLD_EPSILON:
        raise PldRangeError(
            f"noise too small for PLD accounting: the RDP bound is epsilon = {rdp_epsilon:.4g} > "
            f"{MAX_PLD_EPSILON:g} at delta = {delta:g}; pass accountant='rdp' to the aggregator (Python: LNMax, "
            "GNMax or ConfidentGNMax(..., accountant='rdp')), or use more noise / fewer queries"
        )


def zcdp_guess(*, epsilon: float, delta: float, rho_times_scale_sq: float) -> float:
    """Noise scale s whose zCDP bound ρ = c/s² converts to exactly ε at δ (Bun–Steinke 2016, Prop 1.3).

    ε = ρ + 2√(ρ log(1/δ)) is an upper bound, so at this s the accountant's ε is at most the
    target (up to its discretisation): a starting point for the bracket search only.
    """
    log_inv_delta = math.log(1.0 / delta)
    sqrt_rho = math.sqrt(log_inv_delta + epsilon) - math.sqrt(log_inv_delta)
    return math.sqrt(rho_times_scale_sq) / sqrt_rho


def calibrate_scale(
    make_event: Callable[[float], PrivacyEvent],
    *,
    epsilon: float,
    delta: float,
    guess: float,
    accountant: str,
) -> float:
    """Smallest noise scale s (to relative tolerance 1e-5) with ε(make_event(s), δ) ≤ epsilon.

    Brackets the root by doubling / halving from ``guess`` (so the accountant never sees a
    scale far below the answer, where its discretised loss distribution gets large), then
    hands the bracket to dp-accounting's ``calibrate_dp_mechanism``, which returns a scale whose
    ε does not exceed the target.
    """

    if accountant == "pld" and epsilon > MAX_PLD_EPSILON:
        raise PldRangeError(
            f"epsilon > {MAX_PLD_EPSILON:g} is not calibrated with PLD accounting; pass accountant='rdp' to the "
            "aggregator (Python: LNMax, GNMax or ConfidentGNMax(..., accountant='rdp'); the command line accepts "
            f"epsilon <= {MAX_PLD_EPSILON:g})"
        )

    def gap(scale: float) -> float:
        return accountant_epsilon(make_event(scale), delta=delta, accountant=accountant) - epsilon

    high = guess
    for _ in range(64):
        if gap(high) <= 0:
            break
        high *= 2.0
    else:  # pragma: no cover - ε decreases to 0 as the noise grows
        raise RuntimeError("could not find a noise scale meeting the target epsilon")
    low = high / 2.0
    for _ in range(64):
        if gap(low) > 0:
            break
        high, low = low, low / 2.0
    else:  # pragma: no cover
        raise RuntimeError("could not bracket the noise scale")
    scale = mechanism_calibration.calibrate_dp_mechanism(
        lambda: fresh_accountant(accountant),
        lambda s: make_event(s).to_dp_event(accountant=accountant),
        epsilon,
        delta,
        mechanism_calibration.ExplicitBracketInterval(low, high),
        tol=1e-5 * low,
    )
    return float(scale)
