"""Data-independent accounting and calibration shared by PATE's aggregators (LNMax, GNMax, Confident-GNMax).

One query of an aggregator is a dp-accounting ``DpEvent``; the run is that event self-composed
``num_queries`` times, and a fresh accountant (PLD by default, or RDP) turns it into ε at the
target δ. :func:`calibrate_scale` searches the noise scale that certifies a target ε with
``dp_accounting.mechanism_calibration.calibrate_dp_mechanism``.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Literal

import torch
from dp_accounting import dp_event, mechanism_calibration, privacy_accountant
from dp_accounting.pld import pld_privacy_accountant
from dp_accounting.rdp import rdp_privacy_accountant

from pate_stab._validation import check_tensor

__all__ = [
    "AccountantName",
    "MAX_PLD_EPSILON",
    "ROWS_PER_CHUNK",
    "SQRT2",
    "accountant_epsilon",
    "calibrate_scale",
    "check_accountant",
    "check_pld_feasible",
    "check_vote_counts",
    "fresh_accountant",
    "zcdp_guess",
]

AccountantName = Literal["pld", "rdp"]
NEIGHBOURS = privacy_accountant.NeighboringRelation.ADD_OR_REMOVE_ONE
ROWS_PER_CHUNK = 1 << 18  # bounds the noise buffer at 2^18 · C float64 values
SQRT2 = math.sqrt(2.0)
MAX_PLD_EPSILON = 64.0
"""Largest ε (by the cheap RDP bound) that PLD accounting is asked to certify; see ``check_pld_feasible``."""


# --------------------------------------------------------------------------- accounting


def fresh_accountant(accountant: str) -> privacy_accountant.PrivacyAccountant:
    if accountant == "pld":
        return pld_privacy_accountant.PLDAccountant(NEIGHBOURS)
    if accountant == "rdp":
        return rdp_privacy_accountant.RdpAccountant(neighboring_relation=NEIGHBOURS)
    raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")


def accountant_epsilon(event: dp_event.DpEvent, delta: float, accountant: str) -> float:
    return float(fresh_accountant(accountant).compose(event).get_epsilon(delta))


def check_pld_feasible(event: dp_event.DpEvent, delta: float, accountant: str) -> None:
    """Refuse PLD accounting of very weak guarantees (memory grows with ε: ~3 GB at ε ≈ 100, m = 10⁶).

    The RDP bound is cheap; when it exceeds :data:`MAX_PLD_EPSILON` the guarantee is vacuous
    anyway, and the caller is told to use ``accountant="rdp"`` if the number is still wanted.
    """
    if accountant != "pld":
        return
    rdp_epsilon = accountant_epsilon(event, delta, "rdp")
    if rdp_epsilon > MAX_PLD_EPSILON:
        raise ValueError(
            f"noise too small for PLD accounting: the RDP bound is epsilon = {rdp_epsilon:.4g} > "
            f"{MAX_PLD_EPSILON:g} at delta = {delta:g}; use accountant='rdp' (or more noise / fewer queries)"
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
    make_event: Callable[[float], dp_event.DpEvent],
    *,
    epsilon: float,
    delta: float,
    guess: float,
    accountant: str,
) -> float:
    """Smallest noise scale s (to relative tolerance 1e-5) with ε(make_event(s), δ) ≤ epsilon.

    Brackets the root by doubling / halving from ``guess`` (so the accountant never sees a
    scale far below the answer, where its discretised loss distribution gets large), then
    hands the bracket to ``calibrate_dp_mechanism``, which returns a scale whose ε does not
    exceed the target.
    """

    if accountant == "pld" and epsilon > MAX_PLD_EPSILON:
        raise ValueError(f"epsilon > {MAX_PLD_EPSILON:g} is not calibrated with PLD accounting; use accountant='rdp'")

    def gap(scale: float) -> float:
        return accountant_epsilon(make_event(scale), delta, accountant) - epsilon

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
        make_event,
        epsilon,
        delta,
        mechanism_calibration.ExplicitBracketInterval(low, high),
        tol=1e-5 * low,
    )
    return float(scale)


# --------------------------------------------------------------------------- shared machinery


def check_vote_counts(counts: Any) -> torch.Tensor:
    counts = check_tensor("counts", counts, ndim=2, floating=False)
    if bool((counts < 0).any()):
        raise ValueError("counts must be non-negative vote counts")
    return counts.to(torch.float64)


def check_accountant(accountant: Any) -> str:
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    return str(accountant)
