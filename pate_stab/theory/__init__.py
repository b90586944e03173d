"""Sample-complexity and parameter formulas of BTT18, and what the calibration implies for k.

Each function names the statement it implements. These are the paper's settings, kept to
compare against; :func:`teachers_for_unanimous_answer` gives the k the calibration actually needs.
"""

from __future__ import annotations

import math

from pate_stab._checks import check_delta, check_epsilon, check_int, check_probability, check_real
from pate_stab.privacy.mechanisms.calibration import Calibration, threshold_for_leak

__all__ = [
    "paper_num_teachers",
    "soft_label_num_teachers",
    "corollary_max_unstable",
    "teachers_for_unanimous_answer",
]


def paper_num_teachers(*, epsilon: float, delta: float, num_queries: int, max_unstable: int, beta: float) -> float:
    """k of BTT18 Alg 4 line 1 (Thm 3.11): 136 · log(4mT / min(δ, β/2)) · √(T log(2/δ)) / ε.

    Pinned: ε = 3, δ = 1e-5, m = 1000, T = 10, β = 0.05 → 136 · log(4e4/1e-5) · √(10 log 2e5)/3
    ≈ 136 · 22.11 · 11.05 / 3 ≈ 11,073.
    """
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    m = check_int("num_queries", num_queries, minimum=1)
    t = check_int("max_unstable", max_unstable, minimum=1)
    b = check_probability("beta", beta, open_interval=True)
    return 136.0 * math.log(4.0 * m * t / min(d, b / 2.0)) * math.sqrt(t * math.log(2.0 / d)) / eps


def soft_label_num_teachers(*, epsilon: float, delta: float, num_queries: int, max_unstable: int, beta: float) -> float:
    """k of BTT18 Thm 5.14: 136 · log(8mT / min(β, δ)) · √(2T log(2/δ)) / ε."""
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    m = check_int("num_queries", num_queries, minimum=1)
    t = check_int("max_unstable", max_unstable, minimum=1)
    b = check_probability("beta", beta, open_interval=True)
    return 136.0 * math.log(8.0 * m * t / min(b, d)) * math.sqrt(2.0 * t * math.log(2.0 / d)) / eps


def corollary_max_unstable(*, num_queries: int, alpha: float, beta: float, best_error: float = 0.0) -> int:
    """T of BTT18 Cor 4.1 (Thm 4.3 with γ = 0): ⌈3((γ + α)m + √(m log(m/β)/2))⌉.

    Args:
        num_queries: m; alpha: the teachers' excess error; beta: failure probability;
        best_error: γ, the error of the best hypothesis (0 when realizable).
    Pinned: m = 1000, α = 0.01, β = 0.05, γ = 0 → ⌈3(10 + √(1000·log(2e4)/2))⌉ = ⌈3(10 + 70.36)⌉ = 242.
    """
    m = check_int("num_queries", num_queries, minimum=1)
    a = check_probability("alpha", alpha)
    b = check_probability("beta", beta, open_interval=True)
    g = check_real("best_error", best_error, low=0.0, high=1.0)
    return math.ceil(3.0 * ((g + a) * m + math.sqrt(m * math.log(m / b) / 2.0)))


def teachers_for_unanimous_answer(
    calibration: Calibration, *, fail_probability: float = 0.05, teachers_changed: int = 1
) -> int:
    """Smallest k for which a unanimous vote is answered with probability >= 1 − fail_probability.

    A unanimous vote of k teachers has gap k and distance ⌈k/2⌉ − 1 (DESIGN fact 2). It passes
    when dist + Lap(2λ) − Lap(λ) > w; the noise difference is symmetric with tail
    P[Lap(2λ) − Lap(λ) > x] (the leak law), so the condition is dist >= w + x_β with x_β the
    β-upper quantile. For the soft-label releaser the first (plain) histogram test is used.
    With ``teachers_changed`` = g the releaser tests ⌊(⌈k/2⌉ − 1)/g⌋ (group privacy over g
    teachers), so ⌈k/2⌉ − 1 must reach g times the distance.
    """
    g = check_int("teachers_changed", teachers_changed, minimum=1)
    b = check_probability("fail_probability", fail_probability, open_interval=True)
    margin = threshold_for_leak(probability=b, noise_scale=calibration.noise_scale)
    need = calibration.threshold + margin  # dist must be >= need (continuous noise: > is a.s. the same)
    dist = math.ceil(need)
    return 2 * (g * dist + 1) - 1 if dist > 0 else 1  # smallest k with ⌊(⌈k/2⌉ − 1)/g⌋ >= dist
