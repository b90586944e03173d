"""PATE's data-dependent privacy analysis, and the smooth-sensitivity release of its ε.

The aggregators of :mod:`pate_stab.aggregation.baselines` are certified *data-independently*
before any query is answered. PATE's papers also bound the privacy cost of a run from the vote
histograms it actually saw: a query on which the teachers agree strongly leaks little, because
the noisy answer is almost always the plurality on every neighbouring dataset. This module is
that analysis, as pure functions on ``(n, C)`` integer vote histograms:

- GNMax [PSM+18, Thm 6 with Prop 7 (bound on q) and Prop 10 (choice of μ1, μ2)]; the
  data-dependent RDP is used at an order only where it is valid and smaller than the
  data-independent α/σ² [PSM+18, Prop 8].
- Confident-GNMax [PSM+18, Alg 1, §4.2]: every query pays the threshold check with σ1 (its
  data-dependent RDP, a function of the largest count only), answered queries also pay GNMax
  with σ2.
- LNMax [PAE+17, Thm 3 with Lemma 4 (bound on q)], in RDP form.
- The smooth sensitivity of the data-dependent RDP [PSM+18, App. B; Algs 3–5, Prop 13] and its
  release with the Gaussian noise scaled to smooth sensitivity (GNSS) [PSM+18, Thm 23].

Conventions (the same as :mod:`pate_stab.aggregation.baselines`). One changed record changes
one teacher, so a histogram row moves by −1 in one class and +1 in another: the count vector has
ℓ2 sensitivity √2 and the largest count moves by at most 1. GNMax adds N(0, σ²) to every count,
so one query is the Gaussian mechanism with RDP α/σ² (``GaussianDpEvent(σ/√2)``); the threshold
check adds N(0, σ1²) to the largest count, RDP α/(2σ1²) (``GaussianDpEvent(σ1)``). These are
exactly PSM+18's conventions (tensorflow/privacy ``research/pate_2018/core.py``:
``rdp_data_independent_gaussian`` is α/σ², the threshold uses σ√2). LNMax adds Lap(b) to every
count (``noise_scale`` b); with ℓ1 sensitivity 2 one query is (2/b)-DP, i.e. PAE+17's
Lap(1/γ) with γ = 1/b and per-query pure ε₀ = 2γ.

RDP → (ε, δ). ``conversion="pate2018"`` (default) is the conversion of [PSM+18] and of
``core.compute_eps_from_delta``: ε = RDP(α) + log(1/δ)/(α − 1) [Mironov 2017, Prop 3]; for
LNMax it equals PAE+17's moments-accountant ε = (Σ α(l) + log(1/δ))/l with l = α − 1.
``conversion="improved"`` is ε = RDP(α) + log((α − 1)/α) − (log δ + log α)/(α − 1)
[Canonne, Kamath & Steinke 2020, Prop 12], never larger. ε is minimised over a fixed grid of
orders chosen before the data are seen (:data:`DEFAULT_ORDERS`).

The data-dependent ε is a function of the private votes: it is *not* differentially private and
must not be published as is. :func:`data_dependent_summary` publishes it through GNSS, whose own
RDP cost is added.

Where this module departs from the reference implementation (the first three give values at
least as large as the reference's):

- The smooth sensitivity of a sum over queries uses, for each query, the running maximum over
  distances ≤ d of its local-sensitivity bounds (a dataset at distance d may move some
  histograms by fewer than d votes); the reference's script sums the per-distance arrays as they
  are. The two agree when every array is non-decreasing.
- The threshold check's local-sensitivity array also covers distance max(v0, k − v0) (the last
  reachable value of the largest count), which the reference's loop stops one short of.
- The value sanitised for a GNMax step is β_σ (:func:`gnmax_rdp_smooth`), the function whose
  local sensitivity Algs 3–5 bound; the reference adds :func:`gnmax_rdp`'s value, which can be
  smaller than β_σ for small σ and α.
- Conditions C5–C6 are checked on a grid (:func:`check_smooth_sensitivity_conditions`) rather
  than by a symbolic derivative; the summary refuses to sanitise when they fail.
- The sanitisation order, β and σ_ss are arguments fixed in advance; the reference's scripts
  choose them by looking at the votes, which its own comments say cannot be released.

References:
    [PAE+17] Papernot, Abadi, Erlingsson, Goodfellow, Talwar. Semi-supervised knowledge transfer
        for deep learning from private training data. ICLR 2017 (arXiv:1610.05755).
    [PSM+18] Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson. Scalable private learning
        with PATE. ICLR 2018 (arXiv:1802.08908; appendices of the arXiv version).
    Reference implementation: tensorflow/privacy, ``research/pate_2018/core.py`` and
    ``smooth_sensitivity.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch
from scipy import optimize, special

from pate_stab._validation import (
    check_delta,
    check_generator,
    check_int,
    check_positive,
    check_real,
    check_tensor,
)
from pate_stab.privacy.noise import gaussian

__all__ = [
    "DEFAULT_ORDERS",
    "AggregatorKind",
    "Conversion",
    "rdp_to_epsilon",
    "gnmax_log_q",
    "gnmax_rdp_data_independent",
    "gnmax_rdp",
    "threshold_log_pr_answered",
    "threshold_rdp_data_independent",
    "threshold_rdp",
    "lnmax_log_q",
    "lnmax_rdp_data_independent",
    "lnmax_rdp",
    "gnmax_data_dependent_rdp",
    "confident_gnmax_data_dependent_rdp",
    "lnmax_data_dependent_rdp",
    "gnmax_log_q0",
    "gnmax_rdp_smooth",
    "gnmax_local_sensitivity",
    "threshold_local_sensitivity",
    "check_smooth_sensitivity_conditions",
    "smooth_sensitivity",
    "gnss_rdp",
    "DataDependentSummary",
    "data_dependent_summary",
]

FloatArray = npt.NDArray[np.float64]
AggregatorKind = Literal["lnmax", "gnmax", "confident_gnmax"]
Conversion = Literal["pate2018", "improved"]

DEFAULT_ORDERS: FloatArray = np.concatenate((np.arange(2.0, 100.5, 0.5), np.logspace(2.0, math.log10(500.0), 100)))
"""The "long list" of Rényi orders of tensorflow/privacy ``ICLR2018/smooth_sensitivity_table.py``:
2, 2.5, …, 100, then 100 log-spaced orders up to 500."""

_LOG_Q_FLOOR = -700.0  # exp(−700) ≈ 1e-304: below it q underflows in float64


# --------------------------------------------------------------------------- validation


def _check_counts(counts: Any) -> npt.NDArray[np.int64]:
    """``(n, C)`` vote histograms with C ≥ 2, non-negative integer entries and one row sum (k ≥ 1)."""
    tensor = check_tensor("counts", counts, ndim=2)
    if tensor.dtype == torch.bool:
        raise TypeError("counts must hold integer vote counts, got dtype torch.bool")
    if tensor.is_floating_point():
        if not bool((tensor == tensor.round()).all()):
            raise ValueError("counts must be integer vote counts, got non-integer values")
    if bool((tensor < 0).any()):
        raise ValueError("counts must be non-negative vote counts")
    array = tensor.detach().cpu().to(torch.int64).numpy()
    if array.shape[1] < 2:
        raise ValueError(f"counts must have at least 2 classes (columns), got shape {array.shape}")
    sums = array.sum(axis=1)
    if sums[0] < 1 or bool((sums != sums[0]).any()):
        raise ValueError(
            "every row of counts must sum to the same number of teachers k >= 1 (one vote per teacher); "
            f"got row sums from {int(sums.min())} to {int(sums.max())}"
        )
    return array


def _check_orders(orders: Any) -> FloatArray:
    """A non-empty 1-D array of finite Rényi orders α > 1."""
    if orders is None:
        return DEFAULT_ORDERS.copy()
    tensor = check_tensor("orders", orders, ndim=(0, 1))
    array = np.atleast_1d(tensor.detach().cpu().to(torch.float64).numpy())
    if not bool((array > 1.0).all()):
        raise ValueError(f"orders must all be > 1, got min {float(array.min())}")
    return array


def _check_order(order: Any) -> float:
    return check_real("order", order, low=1.0, low_inclusive=False)


def _check_answered(answered: Any, num_queries: int) -> npt.NDArray[np.bool_]:
    tensor = check_tensor("answered", answered, ndim=1, nonempty=False)
    if tensor.dtype != torch.bool:
        raise TypeError(f"answered must be a boolean mask, got dtype {tensor.dtype}")
    if tensor.shape[0] != num_queries:
        raise ValueError(f"answered must have one entry per query ({num_queries}), got shape {tuple(tensor.shape)}")
    return tensor.detach().cpu().numpy()


def _check_conversion(conversion: Any) -> str:
    if conversion not in ("pate2018", "improved"):
        raise ValueError(f"conversion must be 'pate2018' or 'improved', got {conversion!r}")
    return str(conversion)


def _check_log_q(log_q: Any) -> FloatArray:
    try:
        array = np.atleast_1d(np.asarray(log_q, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"log_q must be a real scalar or 1-D array, got {type(log_q).__name__}") from exc
    if array.ndim != 1 or np.isnan(array).any() or (array > 0).any():
        raise ValueError("log_q must be a scalar or 1-D array of log-probabilities (<= 0, not NaN)")
    return array


# --------------------------------------------------------------------------- numerics


def _log1mexp(x: FloatArray) -> FloatArray:
    """log(1 − eˣ) for x ≤ 0, stable at both ends (−inf at x = 0)."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(x < -math.log(2.0), np.log1p(-np.exp(x)), np.log(-np.expm1(x)))


def _log_q_from_gaps(log_terms: FloatArray, num_classes: int) -> FloatArray:
    """logsumexp over the non-plurality classes, capped at log(1 − 1/C) (the plurality wins w.p. ≥ 1/C)."""
    log_q = special.logsumexp(log_terms, axis=1)
    return np.asarray(np.minimum(log_q, math.log(1.0 - 1.0 / num_classes)), dtype=np.float64)


def _gaps_without_plurality(counts: npt.NDArray[np.int64]) -> FloatArray:
    """``(n, C−1)`` gaps n_{i*} − n_j ≥ 0 to every class but the plurality i* (first maximum)."""
    n, c = counts.shape
    top = counts.argmax(axis=1)
    keep = np.ones((n, c), dtype=bool)
    keep[np.arange(n), top] = False
    gaps = counts[np.arange(n), top][:, None] - counts
    return np.asarray(gaps[keep].reshape(n, c - 1), dtype=np.float64)


# --------------------------------------------------------------------------- RDP → DP


def _epsilon_at_orders(rdp: FloatArray, orders: FloatArray, delta: float, conversion: str) -> FloatArray:
    if conversion == "pate2018":
        return np.asarray(rdp - math.log(delta) / (orders - 1.0), dtype=np.float64)
    return np.asarray(
        rdp + np.log((orders - 1.0) / orders) - (math.log(delta) + np.log(orders)) / (orders - 1.0), dtype=np.float64
    )


def rdp_to_epsilon(*, rdp: Any, orders: Any, delta: float, conversion: Conversion = "pate2018") -> tuple[float, float]:
    """The smallest ε over the orders of an RDP curve, and the order that attains it.

    ``"pate2018"``: ε = RDP(α) + log(1/δ)/(α − 1) [Mironov 2017, Prop 3], as in [PSM+18] and
    ``core.compute_eps_from_delta``. ``"improved"``: ε = RDP(α) + log((α−1)/α) −
    (log δ + log α)/(α − 1) [Canonne, Kamath & Steinke 2020, Prop 12].

    Example: ``rdp_to_epsilon(rdp=[1.0], orders=[11.0], delta=1e-5)`` = (1 + log(1e5)/10, 11.0).

    Raises:
        ValueError: mismatched lengths, an order ≤ 1, a negative or NaN RDP value, δ ∉ (0, 1).
    """
    orders_array = _check_orders(orders)
    rdp_array = np.atleast_1d(np.asarray(rdp, dtype=np.float64))
    if rdp_array.shape != orders_array.shape:
        raise ValueError(f"rdp and orders must have the same length, got {rdp_array.shape} and {orders_array.shape}")
    if np.isnan(rdp_array).any() or (rdp_array < 0).any():
        raise ValueError("rdp must be non-negative and not NaN")
    delta = check_delta(delta)
    eps = _epsilon_at_orders(rdp_array, orders_array, delta, _check_conversion(conversion))
    best = int(np.argmin(eps))
    return float(eps[best]), float(orders_array[best])


# --------------------------------------------------------------------------- GNMax


def gnmax_log_q(*, counts: Any, sigma: float) -> FloatArray:
    """Upper bound on log P[GNMax ≠ plurality] for each histogram row [PSM+18, Prop 7].

    q ≤ Σ_{j ≠ i*} P[N(0, 2σ²) ≥ n_{i*} − n_j] (union bound), capped at 1 − 1/C.

    Example: ``gnmax_log_q(counts=[[10, 0]], sigma=5.0)`` = [log Φ̄(10/√50)] ≈ [−2.5428].

    Returns:
        ``(n,)`` float64 natural logarithms.
    """
    return _gnmax_log_q(_check_counts(counts), check_positive("sigma", sigma))


def _gnmax_log_q(array: npt.NDArray[np.int64], sigma: float) -> FloatArray:
    gaps = _gaps_without_plurality(array)
    return _log_q_from_gaps(special.log_ndtr(-gaps / (math.sqrt(2.0) * sigma)), array.shape[1])


def gnmax_rdp_data_independent(*, sigma: float, orders: Any = None) -> FloatArray:
    """Data-independent RDP of one GNMax query: α/σ² [PSM+18, Prop 8] (Gaussian, ℓ2 sensitivity √2).

    Example: ``gnmax_rdp_data_independent(sigma=40.0, orders=[20.0])`` = [0.0125].
    """
    sigma = check_positive("sigma", sigma)
    return np.asarray(_check_orders(orders) / sigma**2, dtype=np.float64)


def _gnmax_rdp(log_q: FloatArray, sigma: float, orders: FloatArray) -> FloatArray:
    """``(n, A)`` RDP of GNMax given bounds log q (n,), [PSM+18, Thm 6 with Prop 10's μ1, μ2]."""
    variance = sigma**2
    lq = log_q[:, None]  # (n, 1)
    alpha = orders[None, :]  # (1, A)
    independent = np.broadcast_to(alpha / variance, (lq.shape[0], alpha.shape[1]))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        mu2 = sigma * np.sqrt(-lq)  # Prop 10
        mu1 = mu2 + 1.0
        eps1 = mu1 / variance  # RDP of the Gaussian mechanism at order μ1
        eps2 = mu2 / variance
        # Thm 6's conditions: q ≤ e^{(μ2−1)ε2} / (μ1/(μ1−1) · μ2/(μ2−1))^{μ2} (Lemma 9) and q < e^{−ε2}
        valid_q = (lq <= (mu2 - 1.0) * eps2 - mu2 * (np.log1p(1.0 / (mu1 - 1.0)) + np.log1p(1.0 / (mu2 - 1.0)))) & (
            -lq > eps2
        )
        mask = (mu1 > alpha) & (mu2 > 1.0) & valid_q & np.isfinite(lq)
        log1q = _log1mexp(lq)  # log(1 − q)
        log_a = (alpha - 1.0) * (log1q - _log1mexp((lq + eps2) * (1.0 - 1.0 / mu2)))
        log_b = (alpha - 1.0) * (eps1 - lq / (mu1 - 1.0))
        dependent = np.logaddexp(log1q + log_a, lq + log_b) / (alpha - 1.0)
        out = np.where(mask, np.minimum(independent, dependent), independent)
    out = np.where(np.isneginf(lq), 0.0, out)  # a deterministic output costs nothing
    return np.asarray(out, dtype=np.float64)


def gnmax_rdp(*, log_q: Any, sigma: float, orders: Any = None) -> FloatArray:
    """RDP of one GNMax query from a bound on q = P[output ≠ plurality] [PSM+18, Thm 6].

    With μ2 = σ√(log 1/q), μ1 = μ2 + 1 (Prop 10) and εᵢ = μᵢ/σ² (the Gaussian's RDP at μᵢ), when
    μ1 > α, μ2 > 1 and q satisfies Lemma 9's condition and q < e^{−ε2}, the mechanism is
    (α, ε)-RDP with ε = (1/(α−1)) log((1−q)A^{α−1} + q B^{α−1}), A = (1−q)/(1 − (q e^{ε2})^{(μ2−1)/μ2}),
    B = e^{ε1}/q^{1/(μ1−1)}. The result is the smaller of that and α/σ² (Prop 8) at each order,
    as ``core.rdp_gaussian``; q = 0 costs 0.

    Example: ``gnmax_rdp(log_q=-50.0, sigma=5.0, orders=[2.0])`` ≈ [[6.146e-21]]
    (data-independent: 0.08).

    Args:
        log_q: scalar or ``(n,)`` upper bounds on log q (≤ 0), e.g. from :func:`gnmax_log_q`.
        sigma: the Gaussian standard deviation σ on every count.
        orders: Rényi orders α > 1 (default :data:`DEFAULT_ORDERS`).

    Returns:
        ``(n, A)`` float64 (``(1, A)`` for a scalar ``log_q``).
    """
    sigma = check_positive("sigma", sigma)
    return _gnmax_rdp(_check_log_q(log_q), sigma, _check_orders(orders))


# --------------------------------------------------------------------------- threshold check


def threshold_log_pr_answered(*, counts: Any, threshold: float, sigma1: float) -> FloatArray:
    """log P[max_j n_j + N(0, σ1²) ≥ T] for each row [PSM+18, Alg 1 step 1].

    Example: ``threshold_log_pr_answered(counts=[[200, 50]], threshold=200.0, sigma1=150.0)`` = [log ½].

    Returns:
        ``(n,)`` float64.
    """
    array = _check_counts(counts)
    threshold = check_real("threshold", threshold)
    sigma1 = check_positive("sigma1", sigma1)
    return np.asarray(special.log_ndtr((array.max(axis=1) - threshold) / sigma1), dtype=np.float64)


def threshold_rdp_data_independent(*, sigma1: float, orders: Any = None) -> FloatArray:
    """Data-independent RDP of the threshold check: α/(2σ1²) (Gaussian, sensitivity 1 of the max count).

    Example: ``threshold_rdp_data_independent(sigma1=150.0, orders=[20.0])`` ≈ [4.444e-4].
    """
    sigma1 = check_positive("sigma1", sigma1)
    return np.asarray(_check_orders(orders) / (2.0 * sigma1**2), dtype=np.float64)


def threshold_rdp(*, log_pr_answered: Any, sigma1: float, orders: Any = None) -> FloatArray:
    """Data-dependent RDP of the threshold check [PSM+18, §4.2 with Thm 6].

    The check releases one bit whose less likely value has probability
    q = min(p, 1 − p), p = P[answered]. It is a Gaussian mechanism of sensitivity 1, i.e. GNMax's
    analysis with σ√2 in place of σ (``core.compute_rdp_threshold``): Thm 6 with that q and σ1√2.

    Example: ``threshold_rdp(log_pr_answered=-1e-9, sigma1=150.0, orders=[20.0])`` ≈ [[1.102e-10]]
    (data-independent: 4.4e-4; a check that almost surely passes costs almost nothing).

    Returns:
        ``(n, A)`` float64.
    """
    sigma1 = check_positive("sigma1", sigma1)
    log_p = _check_log_q(log_pr_answered)
    log_q = np.minimum(log_p, _log1mexp(log_p))
    return _gnmax_rdp(log_q, math.sqrt(2.0) * sigma1, _check_orders(orders))


# --------------------------------------------------------------------------- LNMax


def lnmax_log_q(*, counts: Any, noise_scale: float) -> FloatArray:
    """Upper bound on log P[LNMax ≠ plurality] for each row [PAE+17, Lemma 4].

    With Lap(b) on every count (b = 1/γ), q ≤ Σ_{j ≠ i*} (2 + γ g_j)/(4 e^{γ g_j}),
    g_j = n_{i*} − n_j, capped at 1 − 1/C (``core.compute_logq_laplace``).

    Example: ``lnmax_log_q(counts=[[10, 0]], noise_scale=2.0)`` = [log(7/(4e⁵))] ≈ [−4.4404].

    Returns:
        ``(n,)`` float64.
    """
    array = _check_counts(counts)
    noise_scale = check_positive("noise_scale", noise_scale)
    g = _gaps_without_plurality(array) / noise_scale
    return _log_q_from_gaps(np.log(2.0 + g) + math.log(0.25) - g, array.shape[1])


def lnmax_rdp_data_independent(*, noise_scale: float, orders: Any = None) -> FloatArray:
    """Data-independent RDP of one LNMax query: min(ε₀²α/2, ε₀), ε₀ = 2/b.

    A pure ε₀-DP mechanism is (ε₀²/2)-zCDP [Bun & Steinke 2016, Prop 1.4] and (α, ε₀)-RDP
    [Mironov 2017, Prop 3's premise]; PAE+17's 2γ²l(l+1) is the first bound as a log moment.

    Example: ``lnmax_rdp_data_independent(noise_scale=20.0, orders=[11.0])`` = [0.055].
    """
    noise_scale = check_positive("noise_scale", noise_scale)
    eps0 = 2.0 / noise_scale
    orders_array = _check_orders(orders)
    return np.asarray(np.minimum(0.5 * eps0**2 * orders_array, eps0), dtype=np.float64)


def lnmax_rdp(*, log_q: Any, noise_scale: float, orders: Any = None) -> FloatArray:
    """RDP of one LNMax query from a bound on q [PAE+17, Thm 3], as ``core.rdp_pure_eps``.

    For an ε₀-DP mechanism (ε₀ = 2γ = 2/b) with q < 1/(e^{ε₀} + 1) (= (e^{2γ} − 1)/(e^{4γ} − 1)),
    the log moment at l = α − 1 is at most log((1 − q)((1 − q)/(1 − e^{ε₀}q))^l + q e^{ε₀ l});
    the RDP at α is that over l, and never more than :func:`lnmax_rdp_data_independent`.

    Example: ``lnmax_rdp(log_q=-20.0, noise_scale=20.0, orders=[11.0])`` ≈ [[5.709e-10]] (data-independent: 0.055).

    Returns:
        ``(n, A)`` float64.
    """
    noise_scale = check_positive("noise_scale", noise_scale)
    lq = _check_log_q(log_q)[:, None]  # (n, 1)
    orders_array = _check_orders(orders)
    alpha = orders_array[None, :]  # (1, A)
    eps0 = 2.0 / noise_scale
    independent = np.minimum(0.5 * eps0**2 * alpha, eps0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log1q = _log1mexp(lq)
        applies = lq <= -np.logaddexp(eps0, 0.0)  # q ≤ 1/(e^{ε₀} + 1), so e^{ε₀} q < 1
        log_1_minus_eq = _log1mexp(eps0 + np.minimum(lq, -eps0))  # log(1 − e^{ε₀} q) where it applies
        log_t = np.logaddexp(log1q + (log1q - log_1_minus_eq) * (alpha - 1.0), lq + eps0 * (alpha - 1.0))
        out = np.where(applies, np.minimum(independent, log_t / (alpha - 1.0)), independent)
    return np.asarray(np.broadcast_to(out, (lq.shape[0], alpha.shape[1])), dtype=np.float64)


# --------------------------------------------------------------------------- composition over a run


def gnmax_data_dependent_rdp(*, counts: Any, sigma: float, orders: Any = None) -> FloatArray:
    """Data-dependent RDP of a GNMax run: Σ over rows of :func:`gnmax_rdp` at :func:`gnmax_log_q`.

    RDP composes additively [Mironov 2017, Prop 1]; [PSM+18, §3].

    Returns:
        ``(A,)`` float64.
    """
    return _gnmax_rdp(gnmax_log_q(counts=counts, sigma=sigma), float(sigma), _check_orders(orders)).sum(axis=0)


def confident_gnmax_data_dependent_rdp(
    *, counts: Any, answered: Any, threshold: float, sigma1: float, sigma2: float, orders: Any = None
) -> FloatArray:
    """Data-dependent RDP of a Confident-GNMax run [PSM+18, Alg 1, §4.2].

    Every query pays :func:`threshold_rdp` (σ1); the queries the run answered (``answered``, the
    released ⊥ pattern: ``labels != -1``) also pay :func:`gnmax_rdp` (σ2). Adaptive composition:
    whether step 2 runs is the output of step 1, already paid for.

    Args:
        counts: ``(n, C)`` vote histograms, one row per query asked.
        answered: ``(n,)`` boolean mask of the answered queries.

    Returns:
        ``(A,)`` float64.
    """
    array = _check_counts(counts)
    mask = _check_answered(answered, array.shape[0])
    orders_array = _check_orders(orders)
    step1 = threshold_rdp(
        log_pr_answered=threshold_log_pr_answered(counts=array, threshold=threshold, sigma1=sigma1),
        sigma1=sigma1,
        orders=orders_array,
    ).sum(axis=0)
    if not mask.any():
        return np.asarray(step1, dtype=np.float64)
    step2 = gnmax_data_dependent_rdp(counts=array[mask], sigma=sigma2, orders=orders_array)
    return np.asarray(step1 + step2, dtype=np.float64)


def lnmax_data_dependent_rdp(*, counts: Any, noise_scale: float, orders: Any = None) -> FloatArray:
    """Data-dependent RDP of an LNMax run: Σ over rows of :func:`lnmax_rdp` at :func:`lnmax_log_q`.

    [PAE+17, Thm 2 (composability of the log moments) and Thm 3.]

    Returns:
        ``(A,)`` float64.
    """
    orders_array = _check_orders(orders)
    log_q = lnmax_log_q(counts=counts, noise_scale=noise_scale)
    return lnmax_rdp(log_q=log_q, noise_scale=noise_scale, orders=orders_array).sum(axis=0)


# --------------------------------------------------------------------------- smooth sensitivity: GNMax


def _gnmax_dependent_bound(log_q: FloatArray, sigma: float, order: float) -> FloatArray:
    """Thm 6's bound at one order without its validity checks (the caller compares log q with log q0)."""
    variance = sigma**2
    with np.errstate(divide="ignore", invalid="ignore"):
        mu2 = sigma * np.sqrt(-log_q)
        mu1 = mu2 + 1.0
        eps1 = mu1 / variance
        eps2 = mu2 / variance
        log1q = _log1mexp(log_q)
        log_a = (order - 1.0) * (log1q - _log1mexp((log_q + eps2) * (1.0 - 1.0 / mu2)))
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
    return _log_q0(check_positive("sigma", sigma), _check_order(order))


def _beta_gnmax(log_q: FloatArray, sigma: float, order: float) -> FloatArray:
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
    return _beta_gnmax(_check_log_q(log_q), sigma, _check_order(order))


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
    log_q = max(log_q, _LOG_Q_FLOOR)
    q = math.exp(log_q)
    values = _beta_gnmax(
        np.array([log_q, _safe_log(_bu(q, sigma, num_classes)), _safe_log(_bl(q, sigma, num_classes))]), sigma, order
    )
    return float(max(values[1] - values[0], values[0] - values[2]))


def _row_log_q(votes: npt.NDArray[np.int64], sigma: float) -> float:
    return float(_gnmax_log_q(votes[None, :], sigma)[0])


@lru_cache(maxsize=65536)
def _gnmax_ls_row(sorted_votes: tuple[int, ...], sigma: float, order: float) -> tuple[float, ...]:
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
    row = _check_counts(check_tensor("votes", votes, ndim=1).unsqueeze(0))[0]
    sigma = check_positive("sigma", sigma)
    order = _check_order(order)
    return np.array(_gnmax_ls_row(tuple(sorted(row.tolist(), reverse=True)), sigma, order), dtype=np.float64)


# --------------------------------------------------------------------------- smooth sensitivity: threshold


@lru_cache(maxsize=256)
def _threshold_rdp_by_max(num_teachers: int, threshold: float, sigma1: float, order: float) -> FloatArray:
    """``(k + 1,)`` threshold-check RDP at order α for every value v = 0..k of the largest count."""
    values = np.arange(num_teachers + 1, dtype=np.float64)
    log_p = special.log_ndtr((values - threshold) / sigma1)
    log_q = np.minimum(log_p, _log1mexp(log_p))
    return _gnmax_rdp(log_q, math.sqrt(2.0) * sigma1, np.array([order]))[:, 0]


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
    row = _check_counts(check_tensor("votes", votes, ndim=1).unsqueeze(0))[0]
    threshold = check_real("threshold", threshold)
    sigma1 = check_positive("sigma1", sigma1)
    order = _check_order(order)
    return _threshold_ls(row, threshold, sigma1, order)


def _threshold_ls(row: npt.NDArray[np.int64], threshold: float, sigma1: float, order: float) -> FloatArray:
    k = int(row.sum())
    rdp = _threshold_rdp_by_max(k, threshold, sigma1, order)
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
    grid = -np.geomspace(-_LOG_Q_FLOOR, -log_q0, 4000)  # increasing log q up to log q0
    beta = _beta_gnmax(np.minimum(grid, np.nextafter(log_q0, -np.inf)), sigma, order)
    tolerance = 1e-10 * max(1.0, order / sigma**2)
    cond5 = bool((np.diff(beta) >= -tolerance).all())
    if not cond5:
        return False, False
    # C6: β_σ(bu(q)) − β_σ(q) non-decreasing on (0, bl(q0)).
    log_bl_q0 = _safe_log(_bl(math.exp(log_q0), sigma, num_classes))
    grid6 = -np.geomspace(-_LOG_Q_FLOOR, -log_bl_q0, 4000)
    q = np.exp(grid6)
    bu = np.minimum(
        1.0, (num_classes - 1) / 2.0 * special.erfc(-1.0 / sigma + special.erfcinv(2.0 * q / (num_classes - 1)))
    )
    with np.errstate(divide="ignore"):
        delta_beta = _beta_gnmax(np.log(bu), sigma, order) - _beta_gnmax(grid6, sigma, order)
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
    order = _check_order(order)
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
    order = _check_order(order)
    if not order < 1.0 / (2.0 * beta):
        raise ValueError(f"order must be < 1/(2 beta) = {1.0 / (2.0 * beta):.6g} for GNSS (Thm 23), got {order}")
    return order * math.exp(2.0 * beta) / ss_sigma**2 + (beta * order - 0.5 * math.log1p(-2.0 * order * beta)) / (
        order - 1.0
    )


# --------------------------------------------------------------------------- summary of a run


@dataclass(frozen=True)
class DataDependentSummary:
    """Privacy of one aggregator run, data-independent and data-dependent [PAE+17; PSM+18].

    ε values are at ``delta`` with the RDP → DP ``conversion``. Fields marked *raw* are
    functions of the private votes and are not differentially private; only the ``sanitised_*``
    fields (and everything data-independent) may be published. The sanitisation fields are
    ``None`` for LNMax, for which neither reference gives a smooth-sensitivity analysis.
    """

    aggregator_kind: str
    num_queries: int
    """Queries asked (rows of the histogram)."""
    num_answered: int
    """Queries answered (all of them except for Confident-GNMax)."""
    num_teachers: int
    num_classes: int
    delta: float
    conversion: str
    data_independent_epsilon: float
    """ε of the same run with every per-query RDP at its data-independent value. For
    Confident-GNMax: the check on every query, GNMax on the answered ones only (the
    ``baselines.ConfidentGNMax`` certificate is fixed before the run, charges GNMax on every
    query and uses PLD accounting, so it is larger)."""
    data_independent_order: float
    data_dependent_epsilon: float
    """Raw: ε from the data-dependent RDP, minimised over ``orders``."""
    data_dependent_order: float
    ss_order: float | None = None
    """The Rényi order α fixed for the smooth-sensitivity release."""
    ss_beta: float | None = None
    ss_sigma: float | None = None
    data_dependent_rdp_at_ss_order: float | None = None
    """Raw: the data-dependent RDP at ``ss_order`` (with β_σ for GNMax), the value sanitised."""
    smooth_sensitivity: float | None = None
    """Raw: the β-smooth sensitivity of ``data_dependent_rdp_at_ss_order``."""
    sanitisation_noise_std: float | None = None
    """Raw: ``ss_sigma · smooth_sensitivity``, the standard deviation of the noise added."""
    sanitisation_rdp: float | None = None
    """RDP at ``ss_order`` of the GNSS release itself (Thm 23), added to the total."""
    sanitised_rdp: float | None = None
    """Released: ``data_dependent_rdp_at_ss_order`` + Gaussian noise, floored at 0."""
    sanitised_epsilon: float | None = None
    """Released: ε at ``ss_order`` of ``sanitised_rdp + sanitisation_rdp``."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _require(name: str, value: Any, kind: str) -> Any:
    if value is None:
        raise ValueError(f"{name} is required for aggregator_kind={kind!r}")
    return value


def _forbid(names: dict[str, Any], kind: str) -> None:
    given = sorted(name for name, value in names.items() if value is not None)
    if given:
        raise ValueError(f"{', '.join(given)} not used by aggregator_kind={kind!r}")


def data_dependent_summary(
    counts: Any,
    *,
    aggregator_kind: AggregatorKind,
    delta: float,
    sigma: float | None = None,
    sigma1: float | None = None,
    sigma2: float | None = None,
    threshold: float | None = None,
    answered: Any = None,
    noise_scale: float | None = None,
    orders: Any = None,
    conversion: Conversion = "pate2018",
    ss_order: float | None = None,
    ss_beta: float | None = None,
    ss_sigma: float | None = None,
    generator: torch.Generator | None = None,
) -> DataDependentSummary:
    """Data-independent and data-dependent ε of a run, and the GNSS-sanitised data-dependent ε.

    Per aggregator (parameters as in :mod:`pate_stab.aggregation.baselines`):

    - ``"lnmax"``: ``noise_scale`` (Laplace b). Raw data-dependent ε only [PAE+17, Thm 3].
    - ``"gnmax"``: ``sigma``. Data-dependent RDP [PSM+18, Thm 6]; sanitised at ``ss_order``.
    - ``"confident_gnmax"``: ``threshold``, ``sigma1``, ``sigma2`` and ``answered`` (the released
      ⊥ pattern, ``labels != -1``). The check is paid on every query, GNMax on answered ones;
      the data-independent ε is that same composition at α/(2σ1²) and α/σ2².

    Sanitisation (GNMax kinds) [PSM+18, App. C]: at the fixed order α = ``ss_order``, the raw
    RDP f(D) = Σ per-query RDP (β_σ for GNMax steps) is released as f(D) + SS_β(D)·σ_ss·Z,
    Z ~ N(0, 1) (float64, from ``generator``), SS_β the β-smooth sensitivity of f built from the
    per-query local-sensitivity bounds, and the release's own RDP (:func:`gnss_rdp`) is added
    before converting to ε. ``ss_order``, ``ss_beta`` and ``ss_sigma`` must be chosen without
    looking at the votes (the reference's optimisation of them over the votes is not
    releasable). ``ss_beta`` defaults to 0.4/α, inside the reference's range [0.3/α, 0.495/α).
    Conditions C5–C6 are checked for the GNMax σ at that order.

    Args:
        counts: ``(n, C)`` integer vote histograms (one row per query asked; rows sum to k).
        aggregator_kind: ``"lnmax"``, ``"gnmax"`` or ``"confident_gnmax"``.
        delta: δ ∈ (0, 1).
        orders: Rényi orders for the ε minimisations (default :data:`DEFAULT_ORDERS`).
        conversion: ``"pate2018"`` (default; as the reference) or ``"improved"``; see
            :func:`rdp_to_epsilon`.
        generator: source of the sanitisation noise (required for the GNMax kinds).

    Returns:
        :class:`DataDependentSummary`.

    Raises:
        TypeError / ValueError: bad counts, σ ≤ 0, δ ∉ (0, 1), a missing or superfluous
            parameter for the aggregator, conditions C5–C6 failing, ``ss_order`` ≥ 1/(2β).
    """
    array = _check_counts(counts)
    delta = check_delta(delta)
    orders_array = _check_orders(orders)
    conversion_name = _check_conversion(conversion)
    n, num_classes = array.shape
    num_teachers = int(array[0].sum())
    num_answered = n
    sanitise: list[tuple[FloatArray, npt.NDArray[np.int64], float]] = []  # (per-query RDP, rows, σ) of GNMax steps
    threshold_parts: tuple[float, float] | None = None  # (T, σ1) of the Confident-GNMax check

    if aggregator_kind == "lnmax":
        _forbid(
            {"sigma": sigma, "sigma1": sigma1, "sigma2": sigma2, "threshold": threshold, "answered": answered}, "lnmax"
        )
        _forbid({"ss_order": ss_order, "ss_beta": ss_beta, "ss_sigma": ss_sigma, "generator": generator}, "lnmax")
        b = check_positive("noise_scale", _require("noise_scale", noise_scale, "lnmax"))
        rdp = lnmax_data_dependent_rdp(counts=array, noise_scale=b, orders=orders_array)
        rdp_independent = n * lnmax_rdp_data_independent(noise_scale=b, orders=orders_array)
    elif aggregator_kind == "gnmax":
        _forbid({"sigma1": sigma1, "sigma2": sigma2, "threshold": threshold, "answered": answered}, "gnmax")
        _forbid({"noise_scale": noise_scale}, "gnmax")
        s = check_positive("sigma", _require("sigma", sigma, "gnmax"))
        rdp = gnmax_data_dependent_rdp(counts=array, sigma=s, orders=orders_array)
        rdp_independent = n * gnmax_rdp_data_independent(sigma=s, orders=orders_array)
        sanitise.append((gnmax_log_q(counts=array, sigma=s), array, s))
    elif aggregator_kind == "confident_gnmax":
        _forbid({"sigma": sigma, "noise_scale": noise_scale}, "confident_gnmax")
        t = check_real("threshold", _require("threshold", threshold, "confident_gnmax"))
        s1 = check_positive("sigma1", _require("sigma1", sigma1, "confident_gnmax"))
        s2 = check_positive("sigma2", _require("sigma2", sigma2, "confident_gnmax"))
        mask = _check_answered(_require("answered", answered, "confident_gnmax"), n)
        num_answered = int(mask.sum())
        rdp = confident_gnmax_data_dependent_rdp(
            counts=array, answered=mask, threshold=t, sigma1=s1, sigma2=s2, orders=orders_array
        )
        rdp_independent = n * threshold_rdp_data_independent(
            sigma1=s1, orders=orders_array
        ) + num_answered * gnmax_rdp_data_independent(sigma=s2, orders=orders_array)
        threshold_parts = (t, s1)
        if num_answered:
            sanitise.append((gnmax_log_q(counts=array[mask], sigma=s2), array[mask], s2))
    else:
        raise ValueError(f"aggregator_kind must be 'lnmax', 'gnmax' or 'confident_gnmax', got {aggregator_kind!r}")

    eps_ind = _epsilon_at_orders(rdp_independent, orders_array, delta, conversion_name)
    eps_dep = _epsilon_at_orders(rdp, orders_array, delta, conversion_name)
    i_ind, i_dep = int(np.argmin(eps_ind)), int(np.argmin(eps_dep))
    common = {
        "aggregator_kind": aggregator_kind,
        "num_queries": n,
        "num_answered": num_answered,
        "num_teachers": num_teachers,
        "num_classes": num_classes,
        "delta": delta,
        "conversion": conversion_name,
        "data_independent_epsilon": float(eps_ind[i_ind]),
        "data_independent_order": float(orders_array[i_ind]),
        "data_dependent_epsilon": float(eps_dep[i_dep]),
        "data_dependent_order": float(orders_array[i_dep]),
    }
    if aggregator_kind == "lnmax":
        return DataDependentSummary(**common)

    order = _check_order(_require("ss_order", ss_order, aggregator_kind))
    beta = 0.4 / order if ss_beta is None else check_positive("ss_beta", ss_beta)
    sigma_ss = check_positive("ss_sigma", _require("ss_sigma", ss_sigma, aggregator_kind))
    gen = check_generator(_require("generator", generator, aggregator_kind))
    sanitisation_rdp = gnss_rdp(beta=beta, ss_sigma=sigma_ss, order=order)  # also checks α < 1/(2β)

    raw = 0.0
    ls_total = np.zeros(num_teachers + 1)
    if threshold_parts is not None:
        t, s1 = threshold_parts
        by_max = _threshold_rdp_by_max(num_teachers, t, s1, order)
        raw += float(by_max[array.max(axis=1)].sum())
        for row in array:
            ls_total += np.maximum.accumulate(_threshold_ls(row, t, s1, order))
    for log_q, rows, s in sanitise:
        check_smooth_sensitivity_conditions(sigma=s, num_classes=num_classes, order=order)
        raw += float(_beta_gnmax(log_q, s, order).sum())
        for row in rows:
            ls_total += np.maximum.accumulate(_gnmax_ls_row(tuple(sorted(row.tolist(), reverse=True)), s, order))
    ss = float(np.max(ls_total * np.exp(-beta * np.arange(num_teachers + 1))))
    noise_std = sigma_ss * ss
    noisy = raw + noise_std * float(gaussian(1.0, (), generator=gen))
    sanitised_rdp = max(0.0, noisy)
    sanitised_eps = float(
        _epsilon_at_orders(np.array([sanitised_rdp + sanitisation_rdp]), np.array([order]), delta, conversion_name)[0]
    )
    return DataDependentSummary(
        **common,
        ss_order=order,
        ss_beta=beta,
        ss_sigma=sigma_ss,
        data_dependent_rdp_at_ss_order=raw,
        smooth_sensitivity=ss,
        sanitisation_noise_std=noise_std,
        sanitisation_rdp=sanitisation_rdp,
        sanitised_rdp=sanitised_rdp,
        sanitised_epsilon=sanitised_eps,
    )
