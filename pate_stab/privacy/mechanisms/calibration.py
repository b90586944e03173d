"""Calibration of the stability releasers: noise scale λ, threshold w and the δ split.

Two modes, both certifying (ε, δ)-DP for ``num_queries`` queries and ``max_unstable`` (T) ⊥:

``"paper"``
    BTT18's λ: Alg 3/4 (hard labels) λ = √(32 T log(2/δ)) / ε; Alg 6 (soft labels)
    λ = √(64 T log(2/δ)) / ε. The sparse vector gets δ/2 and the leak gets δ/2 (proof of Thm 3.6).
    The threshold is the paper's own where it meets the leak bound (Alg 3's w = 2λ log(2m/δ)
    does), and the exact-leak threshold where it does not (Alg 6's w = λ log(4m/δ) leaks about
    √(δ/m) per query: DESIGN fact 3). The certified ε is the smaller of advanced composition
    (the paper's analysis) and optimal composition, both of T segments of (2/λ)-DP.

``"tight"``
    The smallest λ for which optimal composition of the segments — dp-accounting's PLD of T
    pure (2/λ)-DP mechanisms, which by Kairouz, Oh & Viswanath 2015 dominates any T adaptively
    composed (2/λ)-DP mechanisms — certifies ε at the sparse vector's share of δ; the threshold
    from the exact leak bound.

The leak (DESIGN fact 3). A query whose answer can change on a neighbour has dist = 0 and passes
with probability P[Lap(2λ) − Lap(λ) > w] = (2/3)e^{−w/2λ} − (1/6)e^{−w/λ} (w >= 0; the law of a
sum of independent Laplace variables with scales 2λ and λ). A union bound over every test that
can run (m for hard labels, 2m for soft labels, which test twice) gives the leak's share of δ.

Soft labels (Alg 6/8): each failed test (plain or ½-shifted histogram) ends a segment, so the
cutoff is 2T failed tests and 2T segments are composed.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from functools import lru_cache
from typing import Any, Literal

from pate_stab._checks import check_delta, check_epsilon, check_int, check_positive, check_probability, check_real
from pate_stab.privacy.accounting.composition import (
    advanced_composition_epsilon,
    epsilon_for_delta,
    optimal_homogeneous_composition_delta,
)
from pate_stab.privacy.accounting.events import SparseVectorEvent

__all__ = [
    "Calibration",
    "calibrate",
    "leak_probability",
    "threshold_for_leak",
    "sparse_vector_pld_epsilon",
    "paper_noise_scale",
    "paper_threshold",
    "calibration_leak",
    "check_calibration",
]

Mode = Literal["paper", "tight"]
_PLD_INTERVAL = 1e-4


def leak_probability(*, threshold: float, noise_scale: float) -> float:
    """P[Lap(2λ) − Lap(λ) > w]: the pass probability of a query with distance 0 (DESIGN fact 3).

    Closed form for w >= 0: (2/3)e^{−w/2λ} − (1/6)e^{−w/λ}. Pinned: w = 2λ·log(2000/1e-5)
    gives (2/3)(1e-5/2000) − (1/6)(1e-5/2000)^2 ≈ 3.3333e-9.
    """
    w = check_real("threshold", threshold, low=0.0)
    lam = check_positive("noise_scale", noise_scale)
    u = math.exp(-w / (2.0 * lam))
    return (2.0 / 3.0) * u - (1.0 / 6.0) * u * u


def threshold_for_leak(*, probability: float, noise_scale: float) -> float:
    """The smallest w >= 0 with P[Lap(2λ) − Lap(λ) > w] <= ``probability`` (exact inverse).

    With u = e^{−w/2λ}: (1/6)u² − (2/3)u + p = 0, so u = 6p / (2 + √(4 − 6p)) (the root in
    (0, 1], written without cancellation) and w = −2λ log u. For p >= 1/2, w = 0.
    """
    p = check_probability("probability", probability, open_interval=True)
    lam = check_positive("noise_scale", noise_scale)
    if p >= 0.5:
        return 0.0
    u = 6.0 * p / (2.0 + math.sqrt(4.0 - 6.0 * p))
    return -2.0 * lam * math.log(u)


@lru_cache(maxsize=4096)
def sparse_vector_pld_epsilon(*, noise_scale: float, num_segments: int, delta: float) -> float:
    """ε at ``delta`` of ``num_segments`` sparse-vector segments, each (2/λ)-DP, by dp-accounting's PLD.

    The pessimistic PLD of a generic (2/λ)-DP mechanism is self-composed; losses are rounded up
    to multiples of 1e-4, so the result bounds the optimal-composition ε (Kairouz et al. 2015)
    from above. Pinned: λ = 20, 10 segments, δ = 1e-5 → about 0.994 (basic composition: 1.0).
    """
    event = SparseVectorEvent(noise_scale=noise_scale, num_segments=num_segments)
    return epsilon_for_delta(event, delta=check_delta(delta), value_discretization_interval=_PLD_INTERVAL)


def paper_noise_scale(*, epsilon: float, delta: float, max_unstable: int, soft_labels: bool = False) -> float:
    """BTT18's λ: √(32 T log(2/δ))/ε (Alg 3, 4) or √(64 T log(2/δ))/ε (Alg 6).

    Pinned: ε = 3, δ = 1e-5, T = 10, hard labels → √(320·log(2e5))/3 ≈ 20.83.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    t = check_int("max_unstable", max_unstable, minimum=1)
    factor = 64.0 if soft_labels else 32.0
    return math.sqrt(factor * t * math.log(2.0 / d)) / eps


def paper_threshold(*, noise_scale: float, delta: float, num_queries: int, soft_labels: bool = False) -> float:
    """BTT18's w: 2λ log(2m/δ) (Alg 3) or λ log(4m/δ) (Alg 6; does not meet the leak bound)."""
    lam = check_positive("noise_scale", noise_scale)
    d = check_delta(delta)
    m = check_int("num_queries", num_queries, minimum=1)
    if soft_labels:
        return lam * math.log(4.0 * m / d)
    return 2.0 * lam * math.log(2.0 * m / d)


@dataclass(frozen=True)
class Calibration:
    """Settings of a stability releaser and the privacy they certify.

    Attributes:
        mode: "paper" or "tight".
        soft_labels: True for the soft-label releaser (two tests per query).
        epsilon, delta: the target.
        num_queries: m, the most queries the releaser will see.
        max_unstable: T, unstable queries allowed.
        num_segments: failed tests before halting (T hard, 2T soft) = segments composed.
        num_tests: tests that can leak (m hard, 2m soft).
        noise_scale: λ (threshold noise Lap(λ), distance noise Lap(2λ)).
        threshold: w used by the releaser.
        paper_threshold: the paper's w for the same λ.
        threshold_corrected: True when w differs from the paper's because the paper's misses the
            leak bound (paper mode) or because the exact bound is used (tight mode).
        delta_sparse_vector, delta_leak: the split of δ.
        leak_per_test: P[a distance-0 query passes] at this (λ, w).
        certified_epsilon: ε certified for the ⊤/⊥ pattern (hence for the whole release).
        certified_delta: delta_sparse_vector + num_tests · leak_per_test (<= delta).
        composition: which analysis gives certified_epsilon.
    """

    mode: str
    soft_labels: bool
    epsilon: float
    delta: float
    num_queries: int
    max_unstable: int
    num_segments: int
    num_tests: int
    noise_scale: float
    threshold: float
    paper_threshold: float
    threshold_corrected: bool
    delta_sparse_vector: float
    delta_leak: float
    leak_per_test: float
    certified_epsilon: float
    certified_delta: float
    composition: str

    def __post_init__(self) -> None:
        check_calibration(self)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def __str__(self) -> str:
        kind = "soft" if self.soft_labels else "hard"
        return (
            f"Calibration({self.mode}, {kind} labels, m={self.num_queries}, T={self.max_unstable}: "
            f"λ={self.noise_scale:.4g}, w={self.threshold:.4g}"
            f"{' (corrected; paper ' + format(self.paper_threshold, '.4g') + ')' if self.threshold_corrected else ''}, "
            f"certifies ε={self.certified_epsilon:.4g} ({self.composition}), δ={self.certified_delta:.3g})"
        )


def calibration_leak(calibration: Calibration) -> tuple[int, float]:
    """(tests, leak per test) recomputed from the calibration's (m, soft_labels, λ, w) alone.

    Nothing stored in the calibration is trusted: a test can leak with probability
    P[Lap(2λ) − Lap(λ) > w] (DESIGN fact 3), and m (hard) or 2m (soft) tests can run.
    """
    tests = 2 * calibration.num_queries if calibration.soft_labels else calibration.num_queries
    return tests, leak_probability(threshold=calibration.threshold, noise_scale=calibration.noise_scale)


def check_calibration(calibration: Calibration) -> None:
    """Raise ValueError unless (λ, w, T, m) really certify the calibration's (ε, δ).

    Run whenever a :class:`Calibration` is made (including ``dataclasses.replace``), so a
    calibration edited after :func:`calibrate` — a lowered threshold or noise scale, a changed
    cutoff — is refused instead of recorded with a δ or ε it does not have. Recomputes the
    cutoff and number of tests from (T, m, soft_labels), the leak from (λ, w), the certified δ
    from them, and the sparse vector's ε (optimal composition by dp-accounting's PLD, or in
    paper mode the better of that and advanced composition).
    """
    c = calibration
    lam = check_positive("noise_scale", c.noise_scale)
    check_real("threshold", c.threshold, low=0.0)
    t = check_int("max_unstable", c.max_unstable, minimum=1)
    m = check_int("num_queries", c.num_queries, minimum=1)
    d = check_delta(c.delta)
    segments = 2 * t if c.soft_labels else t
    if c.num_segments != segments:
        raise ValueError(f"calibration cutoff num_segments={c.num_segments} but T={t} needs {segments}")
    tests, leak = calibration_leak(c)
    if c.num_tests != tests:
        raise ValueError(f"calibration num_tests={c.num_tests} but m={m} gives {tests} tests")
    delta_sv = check_delta(c.delta_sparse_vector, "delta_sparse_vector")
    total_delta = delta_sv + tests * leak
    slack = 1 + 1e-12
    if total_delta > c.certified_delta * slack or c.certified_delta > d * slack:
        raise ValueError(
            f"calibration does not hold: λ={lam:.6g}, w={c.threshold:.6g} leak {leak:.3g} per test, so "
            f"δ = {delta_sv:.3g} + {tests}·leak = {total_delta:.3g}, not the recorded certified δ "
            f"{c.certified_delta:.3g} (target {d:.3g}); use calibrate()"
        )
    eps_sv = sparse_vector_pld_epsilon(noise_scale=lam, num_segments=segments, delta=delta_sv)
    if c.mode == "paper":
        eps_sv = min(eps_sv, advanced_composition_epsilon(epsilon0=2.0 / lam, num=segments, delta_prime=delta_sv))
    if eps_sv > c.certified_epsilon * slack or c.certified_epsilon > check_epsilon(c.epsilon) * slack:
        raise ValueError(
            f"calibration does not hold: {segments} sparse-vector segments at λ={lam:.6g} are "
            f"ε = {eps_sv:.6g}-DP at δ = {delta_sv:.3g}, not the recorded certified ε "
            f"{c.certified_epsilon:.6g} (target {c.epsilon:.6g}); use calibrate()"
        )


@lru_cache(maxsize=256)
def _tight_noise_scale(epsilon: float, delta_sv: float, segments: int) -> float:
    """Smallest λ whose composed ``segments`` (2/λ)-DP segments are (ε, δ_sv)-DP.

    Depends on (ε, δ_sv, T) only, not on m; the search takes seconds for T in the thousands, so
    results are cached (a pure function of its arguments).

    Bisection (to relative 1e-7) on the exact optimal-composition δ; the result is then
    confirmed with dp-accounting's pessimistic PLD, raising λ in steps of 1e-4 (relative) until
    the PLD certifies ε too, so the reported certificate comes from dp-accounting.
    """

    def ok(lam: float) -> bool:
        return optimal_homogeneous_composition_delta(epsilon0=2.0 / lam, num=segments, epsilon=epsilon) <= delta_sv

    lo = 2.0 / (epsilon * 50.0)  # ε0 = 50ε: certainly too little noise
    hi = 2.0 * segments / epsilon  # basic composition: T·(2/λ) = ε
    while ok(lo):
        lo /= 2.0
    while hi / lo > 1.0 + 1e-7:
        mid = math.sqrt(lo * hi)
        if ok(mid):
            hi = mid
        else:
            lo = mid
    lam = hi
    for _ in range(1000):
        if sparse_vector_pld_epsilon(noise_scale=lam, num_segments=segments, delta=delta_sv) <= epsilon:
            return lam
        lam *= 1.0 + 1e-4
    raise RuntimeError("PLD accounting did not confirm the optimal-composition λ")  # pragma: no cover


def threshold_within_delta(w: float, *, noise_scale: float, delta_sv: float, tests: int, delta: float) -> float:
    """``w``, raised by the least float steps needed so that δ_sv + tests · leak(w) <= δ holds as
    computed (the exact inverse and the δ split each round, and the sum may land a few ulps
    above δ; the certificate must not)."""
    step = max(w, noise_scale) * 2.0**-52
    while delta_sv + tests * leak_probability(threshold=w, noise_scale=noise_scale) > delta:
        w += step
        step *= 2.0
    return w


def calibrate(
    *,
    epsilon: float,
    delta: float,
    num_queries: int,
    max_unstable: int,
    mode: Mode = "paper",
    soft_labels: bool = False,
    delta_split: float = 0.5,
) -> Calibration:
    """Noise scale, threshold and δ split for the stability releaser (BTT18 Alg 3/4 or 6/8).

    Args:
        epsilon, delta: the target (ε, δ); δ in (0, 1).
        num_queries: m, the most queries the releaser will answer or refuse.
        max_unstable: T, the unstable queries allowed (the cutoff is T failed tests for hard
            labels, 2T for soft labels).
        mode: "paper" or "tight" (see the module docstring).
        soft_labels: calibrate the soft-label releaser (2T segments, 2m tests).
        delta_split: the sparse vector's share of δ; the leak gets the rest (0.5 in the paper).

    Returns:
        A :class:`Calibration`.

    Raises:
        ValueError: bad arguments, or a paper calibration whose λ does not certify ε (this
            happens for large ε, where advanced composition is loose; use mode="tight").

    Example (pinned): ε = 3, δ = 1e-5, m = 1000, T = 10, hard labels, paper mode: λ ≈ 20.83,
    w = 2λ log(2e8) ≈ 796.2.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    m = check_int("num_queries", num_queries, minimum=1)
    t = check_int("max_unstable", max_unstable, minimum=1)
    if t > m:
        raise ValueError(f"max_unstable (T={t}) cannot exceed num_queries (m={m})")
    split = check_probability("delta_split", delta_split, open_interval=True)
    if mode not in ("paper", "tight"):
        raise ValueError(f"mode must be 'paper' or 'tight', got {mode!r}")
    if not isinstance(soft_labels, bool):
        raise TypeError(f"soft_labels must be a bool, got {type(soft_labels).__name__}")

    segments = 2 * t if soft_labels else t
    tests = 2 * m if soft_labels else m
    delta_sv = split * d
    delta_leak = d - delta_sv
    per_test = delta_leak / tests

    if mode == "paper":
        if split != 0.5:
            raise ValueError("mode='paper' uses the paper's δ split (delta_split=0.5)")
        lam = paper_noise_scale(epsilon=eps, delta=d, max_unstable=t, soft_labels=soft_labels)
        eps_adv = advanced_composition_epsilon(epsilon0=2.0 / lam, num=segments, delta_prime=delta_sv)
        eps_pld = sparse_vector_pld_epsilon(noise_scale=lam, num_segments=segments, delta=delta_sv)
        certified, composition = (
            (eps_adv, "advanced composition") if eps_adv <= eps_pld else (eps_pld, "optimal composition (PLD)")
        )
        if certified > eps * (1 + 1e-12):
            raise ValueError(
                f"the paper's λ = {lam:.4g} certifies only ε = {certified:.4g} > {eps} "
                "(advanced composition is loose at large ε); use mode='tight'"
            )
        w_paper = paper_threshold(noise_scale=lam, delta=d, num_queries=m, soft_labels=soft_labels)
        if leak_probability(threshold=w_paper, noise_scale=lam) <= per_test:
            w, corrected = w_paper, False
        else:
            w, corrected = threshold_for_leak(probability=per_test, noise_scale=lam), True
    else:
        lam = _tight_noise_scale(eps, delta_sv, segments)
        certified = sparse_vector_pld_epsilon(noise_scale=lam, num_segments=segments, delta=delta_sv)
        composition = "optimal composition (PLD)"
        w_paper = paper_threshold(noise_scale=lam, delta=d, num_queries=m, soft_labels=soft_labels)
        w, corrected = threshold_for_leak(probability=per_test, noise_scale=lam), True
    w = threshold_within_delta(w, noise_scale=lam, delta_sv=delta_sv, tests=tests, delta=d)
    corrected = corrected or w != w_paper
    leak = leak_probability(threshold=w, noise_scale=lam)
    return Calibration(
        mode=mode,
        soft_labels=soft_labels,
        epsilon=eps,
        delta=d,
        num_queries=m,
        max_unstable=t,
        num_segments=segments,
        num_tests=tests,
        noise_scale=lam,
        threshold=w,
        paper_threshold=w_paper,
        threshold_corrected=corrected,
        delta_sparse_vector=delta_sv,
        delta_leak=delta_leak,
        leak_per_test=leak,
        certified_epsilon=certified,
        certified_delta=delta_sv + tests * leak,
        composition=composition,
    )
