"""PATE's data-dependent RDP bounds of one query, and RDP → (ε, δ).

The aggregators of :mod:`pate_stab.aggregation.baselines` are certified *data-independently*
before any query is answered. PATE's papers also bound the privacy cost of a run from the vote
histograms it actually saw: a query on which the teachers agree strongly leaks little, because
the noisy answer is almost always the plurality on every neighbouring dataset. This module holds
the per-query bounds, as pure functions on ``(n, C)`` integer vote histograms; their sums over a
run and the sanitised release are in :mod:`pate_stab.privacy.pate.data_dependent`, the smooth
sensitivity in :mod:`pate_stab.privacy.pate.smooth_sensitivity`.

- GNMax [PSM+18, Thm 6 with Prop 7 (bound on q) and Prop 10 (choice of μ1, μ2)]; the
  data-dependent RDP is used at an order only where it is valid and smaller than the
  data-independent α/σ² [PSM+18, Prop 8].
- The Confident-GNMax threshold check [PSM+18, Alg 1, §4.2]: its data-dependent RDP is a function
  of the largest count only.
- LNMax [PAE+17, Thm 3 with Lemma 4 (bound on q)], in RDP form.
- Secure (discrete Gaussian) noise: Thm 6 needs only the mechanism's RDP at two orders, which
  the discrete Gaussian on integer counts shares with the continuous one [CKS20, Prop 5, Thm
  14], and an upper bound on q; Prop 7's bound uses continuous Gaussian tails, so under discrete
  noise q is bounded with the discrete Gaussian's sub-Gaussian moment bound instead
  (:func:`gnmax_log_q_discrete`, :func:`threshold_log_q_discrete`): a looser but valid q, hence a
  valid (larger) data-dependent RDP. [CKS20] Canonne, Kamath & Steinke, The discrete Gaussian for
  differential privacy, NeurIPS 2020 (arXiv:2004.00010).

The module is kept whole (about 450 lines) because each bound is read beside the paper's
statement it implements and the others it is combined with; the sums, sanitisation and smooth
sensitivity already live in their own modules.

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

The shared argument checks (``check_counts``, ``check_orders``, …) and unchecked cores
(``gnmax_rdp_unchecked``, …) are public to the other PATE modules of this package but not part
of ``__all__``. The module is a little over 450 lines because the per-query bounds of the three
aggregators and the one RDP → (ε, δ) conversion they share are read together (the run sums of
:mod:`pate_stab.privacy.pate.data_dependent` and the smooth sensitivity build on all of them).

References:
    [PAE+17] Papernot, Abadi, Erlingsson, Goodfellow, Talwar. Semi-supervised knowledge transfer
        for deep learning from private training data. ICLR 2017 (arXiv:1610.05755).
    [PSM+18] Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson. Scalable private learning
        with PATE. ICLR 2018 (arXiv:1802.08908; appendices of the arXiv version).
    Reference implementation: tensorflow/privacy, ``research/pate_2018/core.py``.
"""

from __future__ import annotations

import math
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch
from scipy import special

from pate_stab._checks import check_delta, check_positive, check_real, check_tensor

__all__ = [
    "DEFAULT_ORDERS",
    "AggregatorKind",
    "Conversion",
    "rdp_to_epsilon",
    "gnmax_log_q",
    "gnmax_log_q_discrete",
    "gnmax_rdp_data_independent",
    "gnmax_rdp",
    "threshold_log_pr_answered",
    "threshold_log_q_discrete",
    "threshold_rdp_data_independent",
    "threshold_rdp",
    "lnmax_log_q",
    "lnmax_rdp_data_independent",
    "lnmax_rdp",
]

FloatArray = npt.NDArray[np.float64]
AggregatorKind = Literal["lnmax", "gnmax", "confident_gnmax"]
Conversion = Literal["pate2018", "improved"]

DEFAULT_ORDERS: FloatArray = np.concatenate((np.arange(2.0, 100.5, 0.5), np.logspace(2.0, math.log10(500.0), 100)))
"""The "long list" of Rényi orders of tensorflow/privacy ``ICLR2018/smooth_sensitivity_table.py``:
2, 2.5, …, 100, then 100 log-spaced orders up to 500."""

LOG_Q_FLOOR = -700.0  # exp(−700) ≈ 1e-304: below it q underflows in float64


# --------------------------------------------------------------------------- validation


def check_counts(counts: Any) -> npt.NDArray[np.int64]:
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


def check_orders(orders: Any) -> FloatArray:
    """A non-empty 1-D array of finite Rényi orders α > 1."""
    if orders is None:
        return DEFAULT_ORDERS.copy()
    tensor = check_tensor("orders", orders, ndim=(0, 1))
    array = np.atleast_1d(tensor.detach().cpu().to(torch.float64).numpy())
    if not bool((array > 1.0).all()):
        raise ValueError(f"orders must all be > 1, got min {float(array.min())}")
    return array


def check_order(order: Any) -> float:
    return check_real("order", order, low=1.0, low_inclusive=False)


def check_answered(answered: Any, num_queries: int) -> npt.NDArray[np.bool_]:
    tensor = check_tensor("answered", answered, ndim=1, nonempty=False)
    if tensor.dtype != torch.bool:
        raise TypeError(f"answered must be a boolean mask, got dtype {tensor.dtype}")
    if tensor.shape[0] != num_queries:
        raise ValueError(f"answered must have one entry per query ({num_queries}), got shape {tuple(tensor.shape)}")
    return tensor.detach().cpu().numpy()


def check_conversion(conversion: Any) -> str:
    if conversion not in ("pate2018", "improved"):
        raise ValueError(f"conversion must be 'pate2018' or 'improved', got {conversion!r}")
    return str(conversion)


def check_log_q(log_q: Any) -> FloatArray:
    try:
        array = np.atleast_1d(np.asarray(log_q, dtype=np.float64))
    except (TypeError, ValueError) as exc:
        raise TypeError(f"log_q must be a real scalar or 1-D array, got {type(log_q).__name__}") from exc
    if array.ndim != 1 or np.isnan(array).any() or (array > 0).any():
        raise ValueError("log_q must be a scalar or 1-D array of log-probabilities (<= 0, not NaN)")
    return array


# --------------------------------------------------------------------------- numerics


def log1mexp(x: FloatArray) -> FloatArray:
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


def epsilon_at_orders(rdp: FloatArray, orders: FloatArray, delta: float, conversion: str) -> FloatArray:
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
    orders_array = check_orders(orders)
    rdp_array = np.atleast_1d(np.asarray(rdp, dtype=np.float64))
    if rdp_array.shape != orders_array.shape:
        raise ValueError(f"rdp and orders must have the same length, got {rdp_array.shape} and {orders_array.shape}")
    if np.isnan(rdp_array).any() or (rdp_array < 0).any():
        raise ValueError("rdp must be non-negative and not NaN")
    delta = check_delta(delta)
    eps = epsilon_at_orders(rdp_array, orders_array, delta, check_conversion(conversion))
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
    return gnmax_log_q_unchecked(check_counts(counts), check_positive("sigma", sigma))


def gnmax_log_q_unchecked(array: npt.NDArray[np.int64], sigma: float) -> FloatArray:
    gaps = _gaps_without_plurality(array)
    return _log_q_from_gaps(special.log_ndtr(-gaps / (math.sqrt(2.0) * sigma)), array.shape[1])


def gnmax_log_q_discrete(*, counts: Any, sigma: float) -> FloatArray:
    """Upper bound on log P[GNMax ≠ plurality] per row under discrete Gaussian noise N_Z(0, σ²).

    The discrete analogue of [PSM+18, Prop 7]: with ties broken to the lowest class, the answer
    differs from the plurality i* (first maximum) only if some j has n_j + Z_j >= n_{i*} + Z_{i*},
    so q <= Σ_{j ≠ i*} P[Z_j − Z_{i*} >= g_j], g_j = n_{i*} − n_j. N_Z(0, σ²) satisfies
    E[e^{tZ}] <= e^{t²σ²/2} (it is σ²-sub-Gaussian, CKS20 §2); for the difference of two independent draws
    E[e^{t(Z_j − Z_i)}] <= e^{t²σ²}, and Chernoff's bound at t = g/(2σ²) gives
    P[Z_j − Z_i >= g] <= exp(−g²/(4σ²)) for g > 0 (1 for g = 0); the sum is capped at 1.
    (The continuous bound Φ̄(g/(√2σ)) is at most half of it.)

    Example: ``gnmax_log_q_discrete(counts=[[10, 0]], sigma=5.0)`` = [−1.0].

    Returns:
        ``(n,)`` float64 natural logarithms (<= 0).
    """
    array = check_counts(counts)
    sigma = check_positive("sigma", sigma)
    gaps = _gaps_without_plurality(array)
    log_terms = np.where(gaps > 0, -(gaps**2) / (4.0 * sigma**2), 0.0)
    return np.asarray(np.minimum(special.logsumexp(log_terms, axis=1), 0.0), dtype=np.float64)


def gnmax_rdp_data_independent(*, sigma: float, orders: Any = None) -> FloatArray:
    """Data-independent RDP of one GNMax query: α/σ² [PSM+18, Prop 8] (Gaussian, ℓ2 sensitivity √2).

    Example: ``gnmax_rdp_data_independent(sigma=40.0, orders=[20.0])`` = [0.0125].
    """
    sigma = check_positive("sigma", sigma)
    return np.asarray(check_orders(orders) / sigma**2, dtype=np.float64)


def gnmax_rdp_unchecked(
    log_q: FloatArray, sigma: float, orders: FloatArray, *, variance: float | None = None
) -> FloatArray:
    """``(n, A)`` RDP of GNMax given bounds log q (n,), [PSM+18, Thm 6 with Prop 10's μ1, μ2].

    ``variance`` is σ² computed by the caller where σ is itself a product (the threshold check's
    σ1√2: 2σ1² exactly, so that the cap α/variance is the data-independent α/(2σ1²) to the bit).
    """
    variance = sigma**2 if variance is None else variance
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
        log1q = log1mexp(lq)  # log(1 − q)
        log_a = (alpha - 1.0) * (log1q - log1mexp((lq + eps2) * (1.0 - 1.0 / mu2)))
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
    return gnmax_rdp_unchecked(check_log_q(log_q), sigma, check_orders(orders))


# --------------------------------------------------------------------------- threshold check


def threshold_log_pr_answered(*, counts: Any, threshold: float, sigma1: float) -> FloatArray:
    """log P[max_j n_j + N(0, σ1²) ≥ T] for each row [PSM+18, Alg 1 step 1].

    Example: ``threshold_log_pr_answered(counts=[[200, 50]], threshold=200.0, sigma1=150.0)`` = [log ½].

    Returns:
        ``(n,)`` float64.
    """
    array = check_counts(counts)
    threshold = check_real("threshold", threshold)
    sigma1 = check_positive("sigma1", sigma1)
    return np.asarray(special.log_ndtr((array.max(axis=1) - threshold) / sigma1), dtype=np.float64)


def threshold_log_q_discrete(*, counts: Any, threshold: float, sigma1: float) -> FloatArray:
    """Upper bound on log P[the check's less likely outcome] per row under N_Z(0, σ1²) noise.

    With a = max_j n_j − T: if a >= 0 the likely outcome is "answered" and q = P[Z < −a]; if a < 0
    it is ⊥ and q = P[Z >= −a]. The discrete Gaussian is symmetric, so each is < ½, and by its
    sub-Gaussian moment bound (CKS20 §2) with Chernoff, P[Z >= |a|] <= exp(−a²/(2σ1²)):
    q <= min(½, exp(−a²/(2σ1²))). It replaces the continuous min(p, 1 − p) of
    :func:`threshold_rdp` (Thm 6 takes any likely outcome and any upper bound on q).

    Example: ``threshold_log_q_discrete(counts=[[200, 50]], threshold=100.0, sigma1=50.0)`` = [−2.0].

    Returns:
        ``(n,)`` float64.
    """
    array = check_counts(counts)
    threshold = check_real("threshold", threshold)
    sigma1 = check_positive("sigma1", sigma1)
    a = array.max(axis=1).astype(np.float64) - threshold
    return np.asarray(np.minimum(-math.log(2.0), -(a**2) / (2.0 * sigma1**2)), dtype=np.float64)


def threshold_rdp_data_independent(*, sigma1: float, orders: Any = None) -> FloatArray:
    """Data-independent RDP of the threshold check: α/(2σ1²) (Gaussian, sensitivity 1 of the max count).

    Example: ``threshold_rdp_data_independent(sigma1=150.0, orders=[20.0])`` ≈ [4.444e-4].
    """
    sigma1 = check_positive("sigma1", sigma1)
    return np.asarray(check_orders(orders) / (2.0 * sigma1**2), dtype=np.float64)


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
    log_p = check_log_q(log_pr_answered)
    log_q = np.minimum(log_p, log1mexp(log_p))
    return gnmax_rdp_unchecked(log_q, math.sqrt(2.0) * sigma1, check_orders(orders), variance=2.0 * sigma1**2)


# --------------------------------------------------------------------------- LNMax


def lnmax_log_q(*, counts: Any, noise_scale: float) -> FloatArray:
    """Upper bound on log P[LNMax ≠ plurality] for each row [PAE+17, Lemma 4].

    With Lap(b) on every count (b = 1/γ), q ≤ Σ_{j ≠ i*} (2 + γ g_j)/(4 e^{γ g_j}),
    g_j = n_{i*} − n_j, capped at 1 − 1/C (``core.compute_logq_laplace``).

    Example: ``lnmax_log_q(counts=[[10, 0]], noise_scale=2.0)`` = [log(7/(4e⁵))] ≈ [−4.4404].

    Returns:
        ``(n,)`` float64.
    """
    array = check_counts(counts)
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
    orders_array = check_orders(orders)
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
    lq = check_log_q(log_q)[:, None]  # (n, 1)
    orders_array = check_orders(orders)
    alpha = orders_array[None, :]  # (1, A)
    eps0 = 2.0 / noise_scale
    independent = np.minimum(0.5 * eps0**2 * alpha, eps0)
    with np.errstate(divide="ignore", invalid="ignore"):
        log1q = log1mexp(lq)
        applies = lq <= -np.logaddexp(eps0, 0.0)  # q ≤ 1/(e^{ε₀} + 1), so e^{ε₀} q < 1
        log_1_minus_eq = log1mexp(eps0 + np.minimum(lq, -eps0))  # log(1 − e^{ε₀} q) where it applies
        log_t = np.logaddexp(log1q + (log1q - log_1_minus_eq) * (alpha - 1.0), lq + eps0 * (alpha - 1.0))
        out = np.where(applies, np.minimum(independent, log_t / (alpha - 1.0)), independent)
    return np.asarray(np.broadcast_to(out, (lq.shape[0], alpha.shape[1])), dtype=np.float64)
