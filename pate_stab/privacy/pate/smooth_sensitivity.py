"""Smooth sensitivity of PATE's data-dependent RDP, and the GNSS release of a value [PSM+18].

The data-dependent RDP of :mod:`pate_stab.privacy.pate.rdp` is a function of the private votes.
To publish it, PSM+18 bound its local sensitivity at every distance (App. B; Algs 3–5 for GNMax
through β_σ of Thm 6, Prop 13 for the bounds on q after one vote move; the threshold check as a
function of the largest count), take the smooth sensitivity [Nissim, Raskhodnikova & Smith 2007],
and add Gaussian noise scaled to it (GNSS), whose own RDP is [PSM+18, Thm 23].

Departures from the reference implementation (each gives values at least as large):

- The threshold check's local-sensitivity array also covers distance max(v0, k − v0) (the last
  reachable value of the largest count), which the reference's loop stops one short of.
- The value whose local sensitivity Algs 3–5 bound is β_σ (:func:`gnmax_rdp_smooth`).
- Conditions C5–C6 are checked on a grid (:func:`check_smooth_sensitivity_conditions`) rather
  than by a symbolic derivative.

References:
    [PSM+18] Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson. Scalable private learning
        with PATE. ICLR 2018 (arXiv:1802.08908; appendices of the arXiv version).
    Reference implementation: tensorflow/privacy, ``research/pate_2018/smooth_sensitivity.py``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from scipy import optimize, special

from pate_stab._checks import check_int, check_positive, check_real, check_tensor
from pate_stab.privacy.pate.rdp import (
    LOG_Q_FLOOR,
    FloatArray,
    check_counts,
    check_log_q,
    check_order,
    gnmax_log_q_unchecked,
    gnmax_rdp_unchecked,
    log1mexp,
)

__all__ = [
    "gnmax_log_q0",
    "gnmax_rdp_smooth",
    "gnmax_local_sensitivity",
    "threshold_local_sensitivity",
    "check_smooth_sensitivity_conditions",
    "smooth_sensitivity",
    "gnss_rdp",
]


# --------------------------------------------------------------------------- smooth sensitivity: GNMax


def _gnmax_dependent_bound(log_q: FloatArray, sigma: float, order: float) -> FloatArray:
    """Thm 6's bound at one order without its validity checks (the caller compares log q with log q0)."""
    variance = sigma**2
    with np.errstate(divide="ignore", invalid="ignore"):
        mu2 = sigma * np.sqrt(-log_q)
        mu1 = mu2 + 1.0
        eps1 = mu1 / variance
        eps2 = mu2 / variance
        log1q = log1mexp(log_q)
        log_a = (order - 1.0) * (log1q - log1mexp((log_q + eps2) * (1.0 - 1.0 / mu2)))
        log_b = (order - 1.0) * (eps1 - log_q / (mu1 - 1.0))
        return np.asarray(np.logaddexp(log1q + log_a, log_q + log_b) / (order - 1.0), dtype=np.float64)


def _thm6_conditions(log_q: float, sigma: float, order: float) -> bool:
    mu2 = sigma * math.sqrt(-log_q)
    mu1 = mu2 + 1.0
    if mu1 < order or mu2 <= 1.0:
        return False
    eps2 = mu2 / sigma**2
    return log_q <= (mu2 - 1.0) * eps2 - mu2 * math.log(mu1 / (mu1 - 1.0) * mu2 / (mu2 - 1.0))


@lru_cache(maxsize=1024)
def _log_q0(sigma: float, order: float) -> float:
    independent = order / sigma**2

    def excess(log_q: float) -> float:
        return float(_gnmax_dependent_bound(np.array([log_q]), sigma, order)[0]) - independent

    upper = min(-((1.0 + 1.0 / sigma) ** 2), -(((order - 0.99) / sigma) ** 2), -1.0 / sigma**2)
    if not _thm6_conditions(upper, sigma, order):  # pragma: no cover - holds by the choice of `upper`
        raise ValueError(f"Thm 6's conditions fail at the natural bound on q0 (sigma={sigma}, order={order})")
    if excess(upper) < 0:
        return upper
    lower = 2.0 * upper
    while excess(lower) > 0:
        if lower < -1e4:
            raise ValueError(f"could not bracket q0 for sigma={sigma}, order={order}")
        lower *= 1.5
    root = float(optimize.brentq(excess, lower, upper, xtol=1e-12, rtol=1e-14))
    if not _thm6_conditions(root, sigma, order):  # pragma: no cover
        raise ValueError(f"Thm 6's conditions fail at q0 (sigma={sigma}, order={order})")
    return root


def gnmax_log_q0(*, sigma: float, order: float) -> float:
    """log q0: below it GNMax's data-dependent bound (Thm 6) is used, above it α/σ² [PSM+18, App. B.4].

    q0 is the largest q ≤ the natural bound min(e^{−(1+1/σ)²}, e^{−((α−0.99)/σ)²}, e^{−1/σ²}) where
    Thm 6's bound meets α/σ² (root found by Brent's method), or that bound itself if Thm 6 is
    already smaller there (``smooth_sensitivity.compute_logq0_gnmax``).

    Example: ``gnmax_log_q0(sigma=40.0, order=20.0)`` ≈ −3.15687.
    """
    return _log_q0(check_positive("sigma", sigma), check_order(order))


def beta_gnmax_unchecked(log_q: FloatArray, sigma: float, order: float) -> FloatArray:
    """β_σ(q): Thm 6 for q < q0, α/σ² otherwise, 0 at q = 0."""
    log_q0 = _log_q0(sigma, order)
    safe = np.minimum(log_q, log_q0)
    out = np.where(log_q < log_q0, _gnmax_dependent_bound(safe, sigma, order), order / sigma**2)
    return np.asarray(np.where(np.isneginf(log_q), 0.0, out), dtype=np.float64)


def gnmax_rdp_smooth(*, log_q: Any, sigma: float, order: float) -> FloatArray:
    """The per-query GNMax RDP whose smooth sensitivity is bounded: β_σ(q) [PSM+18, App. B.4].

    β_σ(q) is Thm 6's bound for q < q0 (:func:`gnmax_log_q0`) and α/σ² for q ≥ q0. Under
    conditions C5–C6 (:func:`check_smooth_sensitivity_conditions`) it equals :func:`gnmax_rdp`
    wherever q0 is a crossing point; where Thm 6 is already smaller at the natural bound on q0
    (small σ and α), :func:`gnmax_rdp` can be smaller above q0 and β_σ is the larger, valid,
    value. This is the function :func:`data_dependent_summary` sanitises.

    Returns:
        ``(n,)`` float64.
    """
    sigma = check_positive("sigma", sigma)
    return beta_gnmax_unchecked(check_log_q(log_q), sigma, check_order(order))


def _bl(q: float, sigma: float, num_classes: int) -> float:
    """Smallest q a single vote move can lead to, given q [PSM+18, App. B.4, Prop 13]."""
    return float((num_classes - 1) / 2.0 * special.erfc(1.0 / sigma + special.erfcinv(2.0 * q / (num_classes - 1))))


def _bu(q: float, sigma: float, num_classes: int) -> float:
    """Largest q a single vote move can lead to, given q [PSM+18, App. B.4, Prop 13]."""
    value = (num_classes - 1) / 2.0 * special.erfc(-1.0 / sigma + special.erfcinv(2.0 * q / (num_classes - 1)))
    return float(min(1.0, value))


def _safe_log(x: float) -> float:
    return math.log(x) if x > 0 else -math.inf


def _gnmax_ls_at(log_q: float, sigma: float, num_classes: int, order: float) -> float:
    """Alg 3 of [PSM+18, App. B.4]: a bound on the local sensitivity of β_σ at a histogram with q."""
    log_q0 = _log_q0(sigma, order)
    log_q1 = _safe_log(_bl(math.exp(log_q0), sigma, num_classes))
    if log_q1 <= log_q <= log_q0:
        log_q = log_q1
    # C6: the bound is non-decreasing in q below bl(q0), so clamping tiny q upwards is conservative.
    log_q = max(log_q, LOG_Q_FLOOR)
    q = math.exp(log_q)
    values = beta_gnmax_unchecked(
        np.array([log_q, _safe_log(_bu(q, sigma, num_classes)), _safe_log(_bl(q, sigma, num_classes))]), sigma, order
    )
    return float(max(values[1] - values[0], values[0] - values[2]))


def _row_log_q(votes: npt.NDArray[np.int64], sigma: float) -> float:
    return float(gnmax_log_q_unchecked(votes[None, :], sigma)[0])


@lru_cache(maxsize=65536)
def gnmax_local_sensitivity_row(sorted_votes: tuple[int, ...], sigma: float, order: float) -> tuple[float, ...]:
    """Algs 4–5 of [PSM+18, App. B.4], walking the votes from the given row (sorted, descending)."""
    num_classes = len(sorted_votes)
    num_teachers = int(sum(sorted_votes))
    log_q0 = _log_q0(sigma, order)
    log_q1 = _safe_log(_bl(math.exp(log_q0), sigma, num_classes))
    plateau = _gnmax_ls_at(log_q1, sigma, num_classes, order)
    out = np.full(num_teachers + 1, plateau)
    votes = np.array(sorted_votes, dtype=np.int64)
    log_q = _row_log_q(votes, sigma)
    if log_q1 <= log_q <= log_q0:
        return tuple(out.tolist())
    out[0] = _gnmax_ls_at(log_q, sigma, num_classes, order)
    go_left = log_q > log_q0  # q too large: widen the gap (q decreases); else narrow it
    d = 0
    while (go_left and log_q > log_q0 and votes[1] > 0) or (not go_left and log_q < log_q1):
        d += 1
        if d > num_teachers:  # pragma: no cover - k moves reach every histogram
            break
        if go_left:
            votes[0] += 1
            votes[1] -= 1
            i = 1
            while i < num_classes - 1 and votes[i] < votes[i + 1]:
                votes[i], votes[i + 1] = votes[i + 1], votes[i]
                i += 1
        else:
            votes[0] -= 1
            votes[1] += 1
        log_q = _row_log_q(votes, sigma)
        out[d] = _gnmax_ls_at(log_q, sigma, num_classes, order)
    return tuple(out.tolist())


def gnmax_local_sensitivity(*, votes: Any, sigma: float, order: float) -> FloatArray:
    """Bounds on the local sensitivity of β_σ (one GNMax query) at distance d = 0, …, k [PSM+18, Algs 3–5].

    Entry d bounds max |β_σ(q(y')) − β_σ(q(y))| over histograms y within d single-vote moves of
    ``votes`` and their neighbours y'. The walk moves votes between the two largest classes
    towards the plateau [q1, q0] (q1 = bl(q0)), where the bound is largest under C5–C6
    [Prop 13]; entries past the walk are the plateau value.

    Args:
        votes: ``(C,)`` one histogram row (k = its sum).
        sigma: GNMax's σ.
        order: the Rényi order α.

    Returns:
        ``(k + 1,)`` float64.
    """
    row = check_counts(check_tensor("votes", votes, ndim=1).unsqueeze(0))[0]
    sigma = check_positive("sigma", sigma)
    order = check_order(order)
    return np.array(
        gnmax_local_sensitivity_row(tuple(sorted(row.tolist(), reverse=True)), sigma, order), dtype=np.float64
    )


# --------------------------------------------------------------------------- smooth sensitivity: threshold


@lru_cache(maxsize=256)
def threshold_rdp_by_max(num_teachers: int, threshold: float, sigma1: float, order: float) -> FloatArray:
    """``(k + 1,)`` threshold-check RDP at order α for every value v = 0..k of the largest count."""
    values = np.arange(num_teachers + 1, dtype=np.float64)
    log_p = special.log_ndtr((values - threshold) / sigma1)
    log_q = np.minimum(log_p, log1mexp(log_p))
    return gnmax_rdp_unchecked(log_q, math.sqrt(2.0) * sigma1, np.array([order]), variance=2.0 * sigma1**2)[:, 0]


def threshold_local_sensitivity(*, votes: Any, threshold: float, sigma1: float, order: float) -> FloatArray:
    """Local sensitivity of the threshold check's RDP at distance d = 0, …, k [PSM+18, App. B.4].

    The RDP depends on the largest count v only, and a vote move changes v by at most 1, so the
    local sensitivity at a histogram with largest count v is
    LS(v) = max(|r(v ± 1) − r(v)|) (r over 0..k, exact). Entry d is max(LS(v0 − d), LS(v0 + d))
    over the values in range (0 past both ends): a histogram within distance d has largest count
    v with |v − v0| ≤ d, whose term is counted at distance |v − v0| with the larger weight e^{−β|v−v0|}.

    Args:
        votes: ``(C,)`` one histogram row (k = its sum).

    Returns:
        ``(k + 1,)`` float64.
    """
    row = check_counts(check_tensor("votes", votes, ndim=1).unsqueeze(0))[0]
    threshold = check_real("threshold", threshold)
    sigma1 = check_positive("sigma1", sigma1)
    order = check_order(order)
    return threshold_local_sensitivity_row(row, threshold, sigma1, order)


def threshold_local_sensitivity_row(
    row: npt.NDArray[np.int64], threshold: float, sigma1: float, order: float
) -> FloatArray:
    k = int(row.sum())
    rdp = threshold_rdp_by_max(k, threshold, sigma1, order)
    steps = np.abs(np.diff(rdp))  # (k,) |r(v+1) − r(v)|
    ls_by_value = np.maximum(np.concatenate(([0.0], steps)), np.concatenate((steps, [0.0])))  # (k + 1,)
    v0 = int(row.max())
    d = np.arange(k + 1)
    up = np.where(v0 + d <= k, ls_by_value[np.minimum(v0 + d, k)], 0.0)
    down = np.where(v0 - d >= 0, ls_by_value[np.maximum(v0 - d, 0)], 0.0)
    return np.asarray(np.maximum(up, down), dtype=np.float64)


# --------------------------------------------------------------------------- smooth sensitivity and GNSS


@lru_cache(maxsize=256)
def _conditions_hold(sigma: float, num_classes: int, order: float) -> tuple[bool, bool]:
    log_q0 = _log_q0(sigma, order)
    # C5: β_σ non-decreasing on (0, q0); a grid in log q, denser near q0.
    grid = -np.geomspace(-LOG_Q_FLOOR, -log_q0, 4000)  # increasing log q up to log q0
    beta = beta_gnmax_unchecked(np.minimum(grid, np.nextafter(log_q0, -np.inf)), sigma, order)
    tolerance = 1e-10 * max(1.0, order / sigma**2)
    cond5 = bool((np.diff(beta) >= -tolerance).all())
    if not cond5:
        return False, False
    # C6: β_σ(bu(q)) − β_σ(q) non-decreasing on (0, bl(q0)).
    log_bl_q0 = _safe_log(_bl(math.exp(log_q0), sigma, num_classes))
    grid6 = -np.geomspace(-LOG_Q_FLOOR, -log_bl_q0, 4000)
    q = np.exp(grid6)
    bu = np.minimum(
        1.0, (num_classes - 1) / 2.0 * special.erfc(-1.0 / sigma + special.erfcinv(2.0 * q / (num_classes - 1)))
    )
    with np.errstate(divide="ignore"):
        delta_beta = beta_gnmax_unchecked(np.log(bu), sigma, order) - beta_gnmax_unchecked(grid6, sigma, order)
    cond6 = bool((np.diff(delta_beta) >= -tolerance).all())
    return cond5, cond6


def check_smooth_sensitivity_conditions(*, sigma: float, num_classes: int, order: float) -> None:
    """Check conditions C5 and C6 of [PSM+18, App. B.4.2], on which Algs 3–5 rely.

    C5: β_σ is non-decreasing in q on (0, q0). C6: β_σ(bu(q)) − β_σ(q) is non-decreasing on
    (0, bl(q0)). Checked numerically on 4,000 log-spaced values of q from e^{−700} to the end of
    each interval (the reference checks them by numeric minimisation of a symbolic derivative);
    a grid check, not a proof.

    Raises:
        ValueError: a condition fails: the local sensitivity bounds are not valid for these
            parameters and the smooth-sensitivity release must not be used.
    """
    sigma = check_positive("sigma", sigma)
    num_classes = check_int("num_classes", num_classes, minimum=2)
    order = check_order(order)
    cond5, cond6 = _conditions_hold(sigma, num_classes, order)
    if not (cond5 and cond6):
        failed = "C5" if not cond5 else "C6"
        raise ValueError(
            f"condition {failed} of PATE 2018 App. B.4.2 fails for sigma={sigma}, num_classes={num_classes}, "
            f"order={order}: the smooth sensitivity bound does not hold; choose another order or sigma"
        )


def smooth_sensitivity(*, local_sensitivity: Any, beta: float) -> float:
    """β-smooth sensitivity from local-sensitivity bounds at distance d: max_d e^{−βd} LS(d).

    [Nissim, Raskhodnikova & Smith 2007, Def 2.1 and Prop 3.1; PSM+18, App. C.] ``local_sensitivity[d]``
    must bound the local sensitivity at every dataset within distance d (it is made non-decreasing
    here, so a bound "at distance exactly d" is also accepted).

    Example: ``smooth_sensitivity(local_sensitivity=[1.0, 3.0], beta=1.0)`` = 3/e ≈ 1.1036.
    """
    ls = check_tensor("local_sensitivity", local_sensitivity, ndim=1).detach().cpu().to(torch.float64).numpy()
    if (ls < 0).any():
        raise ValueError("local_sensitivity must be non-negative")
    beta = check_positive("beta", beta)
    running = np.maximum.accumulate(ls)
    return float(np.max(running * np.exp(-beta * np.arange(ls.shape[0]))))


def gnss_rdp(*, beta: float, ss_sigma: float, order: float) -> float:
    """RDP of releasing f(D) + SS_β(D) · σ · N(0, 1) (GNSS) [PSM+18, Thm 23].

    For 1 < α < 1/(2β): α e^{2β}/σ² + (βα − ½ log(1 − 2αβ))/(α − 1).

    Example: ``gnss_rdp(beta=0.01, ss_sigma=10.0, order=20.0)`` ≈ 0.2280 (0.2040 from the noise, 0.0240 from β).

    Raises:
        ValueError: the order is outside (1, 1/(2β)).
    """
    beta = check_positive("beta", beta)
    ss_sigma = check_positive("ss_sigma", ss_sigma)
    order = check_order(order)
    if not order < 1.0 / (2.0 * beta):
        raise ValueError(f"order must be < 1/(2 beta) = {1.0 / (2.0 * beta):.6g} for GNSS (Thm 23), got {order}")
    return order * math.exp(2.0 * beta) / ss_sigma**2 + (beta * order - 0.5 * math.log1p(-2.0 * order * beta)) / (
        order - 1.0
    )
