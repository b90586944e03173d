"""PAC sample-complexity settings of BTT18 §4 and the soft-label bound of Thm 5.14, as numbers.

* :func:`teacher_excess_error` — the α that Cor 4.1 / Thm 4.3–4.4 plug in for a teacher trained on
  n′ = n/k points of a VC class: the paper's rate form (α = V/n′ realizable, √(V/n′) agnostic;
  "Explicit misclassification rate" after Lemma 4.2, logs dropped) or a textbook VC bound with
  explicit constants.
* :func:`prescribed_num_teachers` — the fixed point k = k(T(α(n/k))) of Alg 4 line 1 (paper) or
  of the tight calibration, with T from Cor 4.1; says when no k ≤ n exists.
* :func:`balanced_num_queries` / :func:`theorem_error_rate` — the trade-off of Thm 4.3/4.4:
  m ≈ (n/V)^{4/3} queries at error ≈ (V/n)^{2/3} (realizable), m ≈ (n/V)^{4/5} at ≈ (V/n)^{2/5}
  above γ (agnostic).
* :func:`soft_label_radius`, :func:`soft_label_gamma` — Thm 5.14's 8α√(2n′) + ν/2 and
  γ = 16α√(2n′) + ν; :func:`on_average_stability` estimates α of Def 5.7 from paired runs.
* :func:`loglog_slope` — least-squares slope of log y on log x.
* :func:`bootstrap_loglog_slope` — that slope fitted to the per-point means over seeds, with a
  percentile bootstrap interval that resamples the seeds of every point independently.
* :func:`bootstrap_log_regression` — log(mean y) regressed on several regressors (e.g. log(k/n)
  and log n) by least squares, with the same bootstrap over seeds for every coefficient.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

import numpy as np
import torch

from pate_stab._checks import check_delta, check_epsilon, check_int, check_probability, check_real
from pate_stab.privacy.mechanisms.calibration import (
    Calibration,
    calibrate,
    threshold_for_leak,
)
from pate_stab.theory import corollary_max_unstable, paper_num_teachers

__all__ = [
    "REALIZABLE_QUERY_EXPONENT",
    "REALIZABLE_ERROR_EXPONENT",
    "AGNOSTIC_QUERY_EXPONENT",
    "AGNOSTIC_ERROR_EXPONENT",
    "teacher_excess_error",
    "balanced_num_queries",
    "theorem_error_rate",
    "num_teachers_for_agreement",
    "tight_calibration",
    "TeacherSetting",
    "prescribed_num_teachers",
    "soft_label_radius",
    "soft_label_gamma",
    "lattice_gamma",
    "on_average_stability",
    "loglog_slope",
    "SlopeFit",
    "bootstrap_loglog_slope",
    "RegressionFit",
    "bootstrap_log_regression",
]

REALIZABLE_QUERY_EXPONENT = 4.0 / 3.0  # Thm 4.3: m ≈ (n/V)^{4/3}
REALIZABLE_ERROR_EXPONENT = -2.0 / 3.0  # at error ≈ (V/n)^{2/3}
AGNOSTIC_QUERY_EXPONENT = 4.0 / 5.0  # Thm 4.4: m ≈ (n/V)^{4/5}
AGNOSTIC_ERROR_EXPONENT = -2.0 / 5.0  # at error − γ ≈ (V/n)^{2/5}


def teacher_excess_error(
    *,
    num_samples: float,
    vc_dim: int,
    realizable: bool,
    beta: float = 0.05,
    constants: Literal["rate", "vc"] = "rate",
) -> float:
    """α of a teacher (ERM on ``num_samples`` = n′ points of a class of VC dimension V).

    ``constants="rate"``: the paper's rates with logs and constants dropped (BTT18 §4.1, the
    paragraph after Lemma 4.2): α = V/n′ (realizable), α = √(V/n′) (agnostic); β is unused.
    ``constants="vc"``: explicit bounds holding with probability 1 − β — realizable
    α = (2/n′)(V log₂(2en′/V) + log₂(2/β)) (Blumer et al. 1989), agnostic
    α = 2√((8/n′)(V ln(2en′/V) + ln(4/β))) (twice Vapnik's uniform deviation).
    Values are capped at 1. Pinned: n′ = 100, V = 1, rate → 0.01 (realizable), 0.1 (agnostic).
    """
    n = check_real("num_samples", num_samples, low=0.0)
    v = check_int("vc_dim", vc_dim, minimum=1)
    b = check_probability("beta", beta, open_interval=True)
    if constants not in ("rate", "vc"):
        raise ValueError(f"constants must be 'rate' or 'vc', got {constants!r}")
    if n <= v:
        return 1.0
    if constants == "rate":
        a = v / n if realizable else math.sqrt(v / n)
    elif realizable:
        a = (2.0 / n) * (v * math.log2(2.0 * math.e * n / v) + math.log2(2.0 / b))
    else:
        a = 2.0 * math.sqrt((8.0 / n) * (v * math.log(2.0 * math.e * n / v) + math.log(4.0 / b)))
    return min(1.0, a)


def balanced_num_queries(*, num_samples: float, vc_dim: int, realizable: bool, scale: float = 1.0) -> float:
    """m of Thm 4.3 / 4.4 up to logs: scale·(n/V)^{4/3} (realizable) or scale·(n/V)^{4/5} (agnostic)."""
    n = check_real("num_samples", num_samples, low=0.0)
    v = check_int("vc_dim", vc_dim, minimum=1)
    expo = REALIZABLE_QUERY_EXPONENT if realizable else AGNOSTIC_QUERY_EXPONENT
    return check_real("scale", scale, low=0.0) * (n / v) ** expo


def theorem_error_rate(*, num_samples: float, vc_dim: int, realizable: bool) -> float:
    """Error of Thm 4.3 / 4.4 up to logs and constants: (V/n)^{2/3} or (V/n)^{2/5} (excess over γ)."""
    n = check_real("num_samples", num_samples, low=0.0)
    v = check_int("vc_dim", vc_dim, minimum=1)
    if n <= 0:
        return math.inf
    expo = REALIZABLE_ERROR_EXPONENT if realizable else AGNOSTIC_ERROR_EXPONENT
    return (n / v) ** expo


def num_teachers_for_agreement(calibration: Calibration, *, agreement: float, fail_probability: float) -> int:
    """Smallest k for which a query with ≥ agreement·k votes in one class passes w.p. ≥ 1 − fail_probability.

    With at least ⌈a·k⌉ of k binary votes on one side the gap is ≥ 2⌈a·k⌉ − k and the distance
    (DESIGN fact 2) ≥ ⌈gap/2⌉ − 1; the test passes when dist + Lap(2λ) − Lap(λ) > w, which holds
    w.p. ≥ 1 − p once dist ≥ w + x_p, x_p the p-upper quantile of the (symmetric) noise difference.
    agreement = 1 is :func:`~pate_stab.theory.teachers_for_unanimous_answer`; agreement = 2/3 is
    the k/3-stable queries of Cor 4.1 / Thm 3.11.
    """
    a = check_real("agreement", agreement, low=0.5, high=1.0)
    if not a > 0.5:
        raise ValueError("agreement must be > 1/2")
    p = check_probability("fail_probability", fail_probability, open_interval=True)
    need = calibration.threshold + threshold_for_leak(probability=p, noise_scale=calibration.noise_scale)

    def dist(k: int) -> int:
        gap = 2 * math.ceil(a * k - 1e-12) - k
        return max(0, math.ceil(gap / 2) - 1)

    # dist(k) <= (a − ½)k + 1, so no k below (need − 1)/(a − ½) qualifies; scan up from there
    # (dist is not monotone step to step when a < 1, so a bisection could miss the smallest k).
    k = max(1, math.floor((need - 1.0) / (a - 0.5)) - 2)
    while dist(k) < need:
        k += 1
    return k


@dataclass(frozen=True)
class TeacherSetting:
    """Outcome of :func:`prescribed_num_teachers`.

    Attributes:
        mode: "paper" or "tight".
        feasible: a fixed point with k ≤ n and T < m exists (the releaser is usable at all).
        reason: why not, when infeasible.
        num_teachers: k (the last iterate when infeasible).
        max_unstable: T of Cor 4.1 at the teachers' α.
        teacher_alpha: α(n/k).
        shard_size: n/k.
        iterations: fixed-point iterations used.
    """

    mode: str
    feasible: bool
    reason: str
    num_teachers: int
    max_unstable: int
    teacher_alpha: float
    shard_size: float
    iterations: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def tight_calibration(*, epsilon: float, delta: float, num_queries: int, max_unstable: int) -> Calibration:
    """``calibrate(..., mode="tight")`` for hard labels with the δ split ½ (the releaser's default).

    λ depends on (ε, δ, T) only and :func:`~pate_stab.privacy.mechanisms.calibration.calibrate` caches its
    search, so scanning m for fixed (ε, δ, T) costs one search.
    """
    return calibrate(epsilon=epsilon, delta=delta, num_queries=num_queries, max_unstable=max_unstable, mode="tight")


@lru_cache(maxsize=1024)
def _k_for(mode: str, *, t: int, m: int, epsilon: float, delta: float, beta: float, agreement: float) -> int:
    if mode == "paper":
        return math.ceil(paper_num_teachers(epsilon=epsilon, delta=delta, num_queries=m, max_unstable=t, beta=beta))
    cal = tight_calibration(epsilon=epsilon, delta=delta, num_queries=m, max_unstable=t)
    return num_teachers_for_agreement(cal, agreement=agreement, fail_probability=beta / (2 * m))


def prescribed_num_teachers(
    *,
    num_samples: int,
    num_queries: int,
    vc_dim: int,
    realizable: bool,
    best_error: float = 0.0,
    epsilon: float,
    delta: float,
    beta: float = 0.05,
    mode: Literal["paper", "tight"] = "paper",
    agreement: float = 2.0 / 3.0,
    constants: Literal["rate", "vc"] = "rate",
    round_up_ratio: float | None = None,
    max_iterations: int = 200,
) -> TeacherSetting:
    """The k and T that BTT18 Thm 4.3 / 4.4 prescribe for n private points and m queries.

    T = Cor 4.1's ⌈3((γ + α)m + √(m log(m/β)/2))⌉ with α = :func:`teacher_excess_error` at n/k and
    confidence β/k; k from T by Alg 4 line 1 (``mode="paper"``) or, for the tight calibration,
    the smallest k for which ``agreement``-majority queries pass w.p. 1 − β/(2m)
    (:func:`num_teachers_for_agreement`). k depends on T and T on k; the iteration starts at
    α = 0 and increases monotonically; it stops at a fixed point or when k > n or T ≥ m.
    ``round_up_ratio`` (e.g. 1.1) rounds T up to the next power of that ratio, so that many
    settings share a few calibrations (the tight one is slow for large T); a larger T than
    Cor 4.1's is still a valid cutoff (the bound T/m only loosens). Results are cached.

    Pinned (see the tests): n = 10⁷, m = 1000, V = 1, realizable, ε = 3, δ = 1e-5, β = 0.05,
    paper mode → T = 242 (α·m ≈ 3 is below the Hoeffding term) and k ≈ 56,000.
    """
    n = check_int("num_samples", num_samples, minimum=1)
    m = check_int("num_queries", num_queries, minimum=1)
    v = check_int("vc_dim", vc_dim, minimum=1)
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    b = check_probability("beta", beta, open_interval=True)
    g = check_real("best_error", best_error, low=0.0, high=1.0)
    if mode not in ("paper", "tight"):
        raise ValueError(f"mode must be 'paper' or 'tight', got {mode!r}")
    alpha = 0.0
    k_prev = -1
    k = 1
    t = 1
    for it in range(1, check_int("max_iterations", max_iterations, minimum=1) + 1):
        t = corollary_max_unstable(num_queries=m, alpha=alpha, beta=b, best_error=g)
        if round_up_ratio is not None:
            r = check_real("round_up_ratio", round_up_ratio, low=1.0)
            t = max(t, math.ceil(r ** math.ceil(math.log(t) / math.log(r) - 1e-9))) if r > 1 else t
        if t >= m:
            return TeacherSetting(mode, False, f"T = {t} >= m = {m} (Cor 4.1 bound vacuous)", k, t, alpha, n / k, it)
        k = _k_for(mode, t=t, m=m, epsilon=eps, delta=d, beta=b, agreement=agreement)
        if k > n:
            return TeacherSetting(mode, False, f"k = {k} > n = {n}", k, t, alpha, n / k, it)
        if k == k_prev:
            return TeacherSetting(mode, True, "", k, t, alpha, n / k, it)
        k_prev = k
        alpha = teacher_excess_error(
            num_samples=n / k, vc_dim=v, realizable=realizable, beta=b / k, constants=constants
        )
    return TeacherSetting(mode, False, "no fixed point within max_iterations", k, t, alpha, n / k, max_iterations)


def soft_label_radius(*, alpha: float, shard_size: float, nu: float) -> float:
    """BTT18 Thm 5.14's accuracy radius 8α√(2n′) + ν/2. Pinned: α = 0.001, n′ = 200, ν = 0.05 → 0.185."""
    a = check_real("alpha", alpha, low=0.0)
    n = check_real("shard_size", shard_size, low=0.0)
    v = check_real("nu", nu, low=0.0, high=0.5)
    return 8.0 * a * math.sqrt(2.0 * n) + v / 2.0


def soft_label_gamma(*, alpha: float, shard_size: float, nu: float) -> float:
    """BTT18 Thm 5.14 / Lemma 5.13's discretisation γ = 16α√(2n′) + ν (before rounding to 1/integer)."""
    a = check_real("alpha", alpha, low=0.0)
    n = check_real("shard_size", shard_size, low=0.0)
    v = check_real("nu", nu, low=0.0, high=0.5)
    return 16.0 * a * math.sqrt(2.0 * n) + v


def lattice_gamma(gamma: float) -> float:
    """The smallest γ′ ≥ γ with 1/γ′ an integer ≥ 2 (Def 5.1 assumes 1/γ ∈ ℕ; γ ≤ 1/2)."""
    g = check_real("gamma", gamma, low=0.0)
    if not g > 0:
        raise ValueError("gamma must be > 0")
    return 1.0 / max(2, math.floor(1.0 / g + 1e-12))


def on_average_stability(scores: torch.Tensor, scores_replaced: torch.Tensor) -> tuple[torch.Tensor, float]:
    """Estimate α of BTT18 Def 5.7 from paired runs of a learner.

    Args:
        scores: (P, m) predictions h_D(x) of P runs on independent data sets D ~ 𝒟^{n′}.
        scores_replaced: (P, m) predictions h_{D^{(j)}}(x) of the same runs (same coins) with one
            entry j, drawn uniformly from [n′], replaced by a fresh z′_j.

    Returns:
        ``(alpha_per_query, alpha)``: √(mean over runs of |h_D(x) − h_{D^{(j)}}(x)|²) for each of
        the m points (an unbiased estimate of α(x)² under the square root, since a uniform j
        averages (1/n′)Σ_j), and its maximum over the points (Def 5.7 asks for every x).
    """
    if scores.shape != scores_replaced.shape or scores.ndim != 2:
        raise ValueError("scores and scores_replaced must both be (P, m)")
    per_query = (scores.to(torch.float64) - scores_replaced.to(torch.float64)).pow(2).mean(0).sqrt()
    return per_query, float(per_query.max())


def loglog_slope(x: Any, y: Any) -> tuple[float, float]:
    """Least-squares fit log y = slope·log x + intercept over points with x, y > 0 and finite.

    Returns (slope, intercept); NaN when fewer than two usable points.
    """
    xa = np.asarray(x, dtype=np.float64)
    ya = np.asarray(y, dtype=np.float64)
    ok = np.isfinite(xa) & np.isfinite(ya) & (xa > 0) & (ya > 0)
    if ok.sum() < 2:
        return math.nan, math.nan
    slope, intercept = np.polyfit(np.log(xa[ok]), np.log(ya[ok]), 1)
    return float(slope), float(intercept)


@dataclass(frozen=True)
class SlopeFit:
    """Slope of log(mean y) on log x and its percentile bootstrap interval (``level``, e.g. 0.95)."""

    slope: float
    low: float
    high: float
    level: float
    reps: int


def bootstrap_loglog_slope(
    x: Any, per_point: list[Any], *, reps: int = 2000, level: float = 0.95, seed: int = 0
) -> SlopeFit:
    """Slope of log(mean of ``per_point[i]``) on log ``x[i]``, with a bootstrap interval over seeds.

    Each point's values are independent seeds; a bootstrap replicate resamples every point's
    seeds with replacement (points independently, as their seeds are), recomputes the means and
    refits the least-squares slope. The interval is the replicates' (1 − level)/2 and
    (1 + level)/2 quantiles (percentile bootstrap, Efron & Tibshirani 1993, §13.3). Replicates
    with a non-positive mean at some point are dropped (log undefined); NaN when fewer than two
    points or no usable replicate.
    """
    xa = np.asarray(x, dtype=np.float64)
    if xa.ndim != 1 or len(per_point) != xa.shape[0]:
        raise ValueError("x must be 1-D with one array of seed values per point")
    lv = check_real("level", level, low=0.0, high=1.0)
    r = check_int("reps", reps, minimum=1)
    vals = [np.asarray(v, dtype=np.float64).ravel() for v in per_point]
    if any(v.size == 0 for v in vals) or xa.shape[0] < 2:
        return SlopeFit(math.nan, math.nan, math.nan, lv, r)
    slope, _ = loglog_slope(xa, [v.mean() for v in vals])
    rng = np.random.default_rng(seed)
    lx = np.log(xa)
    means = np.stack([v[rng.integers(0, v.size, size=(r, v.size))].mean(axis=1) for v in vals], axis=1)  # (r, P)
    ok = (means > 0).all(axis=1)
    if not ok.any():
        return SlopeFit(slope, math.nan, math.nan, lv, r)
    ly = np.log(means[ok])
    xc = lx - lx.mean()
    slopes = (ly - ly.mean(axis=1, keepdims=True)) @ xc / (xc @ xc)
    lo, hi = np.quantile(slopes, [(1.0 - lv) / 2.0, (1.0 + lv) / 2.0])
    return SlopeFit(slope, float(lo), float(hi), lv, r)


@dataclass(frozen=True)
class RegressionFit:
    """Coefficients of log(mean y) on the columns of a design matrix, with percentile bootstrap intervals.

    ``names``, ``coef``, ``low`` and ``high`` are aligned (one entry per column, the intercept
    included when the design has one); ``level`` is e.g. 0.95; ``reps`` the replicates used
    (those with a non-positive mean at some point are dropped).
    """

    names: tuple[str, ...]
    coef: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    level: float
    reps: int

    def to_dict(self) -> dict[str, Any]:
        return {
            name: {"coef": c, "ci_low": lo, "ci_high": hi}
            for name, c, lo, hi in zip(self.names, self.coef, self.low, self.high, strict=True)
        } | {"level": self.level, "reps": self.reps}


def bootstrap_log_regression(
    design: Any,
    per_point: list[Any],
    *,
    names: tuple[str, ...],
    reps: int = 2000,
    level: float = 0.95,
    seed: int = 0,
) -> RegressionFit:
    """Least squares of log(mean of ``per_point[i]``) on row i of ``design``, bootstrapped over seeds.

    ``design`` is (P, q) (add a column of ones for an intercept), ``per_point[i]`` the seed values
    of point i. A replicate resamples every point's seeds with replacement (points independently,
    as their seeds are), recomputes the means and refits; the interval of each coefficient is the
    replicates' (1 − level)/2 and (1 + level)/2 quantiles (percentile bootstrap, Efron &
    Tibshirani 1993, §13.3), as in :func:`bootstrap_loglog_slope`, which is the case q = 2,
    design (1, log x). Replicates with a non-positive mean at some point are dropped. Raises
    ValueError when the design is not (P, q) with P ≥ q, its columns are dependent, or a point
    has no value.
    """
    x = np.asarray(design, dtype=np.float64)
    if x.ndim != 2 or x.shape[0] != len(per_point) or x.shape[1] != len(names):
        raise ValueError("design must be (P, q) with one array of seed values per row and one name per column")
    if x.shape[0] < x.shape[1] or np.linalg.matrix_rank(x) < x.shape[1]:
        raise ValueError(f"the design's {x.shape[1]} columns are not identifiable from {x.shape[0]} points")
    lv = check_real("level", level, low=0.0, high=1.0)
    r = check_int("reps", reps, minimum=1)
    vals = [np.asarray(v, dtype=np.float64).ravel() for v in per_point]
    if any(v.size == 0 for v in vals):
        raise ValueError("every point needs at least one seed value")
    pinv = np.linalg.pinv(x)  # (q, P): coefficients = pinv @ log(means)
    means = np.array([v.mean() for v in vals])
    if not (means > 0).all():
        raise ValueError("every point's mean must be positive (log)")
    coef = pinv @ np.log(means)
    rng = np.random.default_rng(seed)
    boot = np.stack([v[rng.integers(0, v.size, size=(r, v.size))].mean(axis=1) for v in vals], axis=1)  # (r, P)
    ok = (boot > 0).all(axis=1)
    fits = np.log(boot[ok]) @ pinv.T  # (r_ok, q)
    if fits.shape[0] == 0:
        nan = (math.nan,) * x.shape[1]
        return RegressionFit(tuple(names), tuple(float(c) for c in coef), nan, nan, lv, 0)
    lo, hi = np.quantile(fits, [(1.0 - lv) / 2.0, (1.0 + lv) / 2.0], axis=0)
    return RegressionFit(
        tuple(names),
        tuple(float(c) for c in coef),
        tuple(float(v) for v in lo),
        tuple(float(v) for v in hi),
        lv,
        int(fits.shape[0]),
    )
