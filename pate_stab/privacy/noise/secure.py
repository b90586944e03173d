"""Secure noise: exact discrete Laplace noise and the snapping mechanism, from the OS's CSPRNG.

Why. Floating-point Laplace noise ``f(D) + b·log(U)`` has a *porous* support: the set of doubles
that ``f(D) + noise`` can take depends on f(D), so a single output can reveal which of two
neighbouring inputs produced it, whatever ε claims (Mironov 2012, "On significance of the
least significant bits for differential privacy"). The samplers here avoid floating point where
the privacy argument lives:

* :func:`discrete_laplace` draws integer noise with ``P[X = x] ∝ exp(−|x| / scale)`` exactly,
  by Canonne, Kamath & Steinke 2020 ("The discrete Gaussian for differential privacy"),
  Algorithm 2, with Bernoulli(exp(−γ)) trials of their Algorithm 1 done in exact integer
  arithmetic (γ rational). Added to an integer query of sensitivity Δ it is (Δ/scale)-DP, and
  the support of ``f(D) + X`` is all of ℤ for every D: nothing porous. Vote counts and
  distances to instability are integers, so the releasers can use it directly (the secure noise
  source of :class:`pate_stab.privacy.mechanisms.sparse_vector.SparseVector`).
* :func:`discrete_gaussian` draws integer noise with ``P[X = x] ∝ exp(−x² / (2σ²))`` exactly, by
  CKS20 Algorithm 3 (discrete Laplace proposals with scale t = ⌊σ⌋ + 1, accepted with probability
  exp(−(|Y| − σ²/t)² / (2σ²)) by exact Bernoulli trials), σ² an exact rational
  (:func:`exact_sigma_sq_at_least`). For an integer vector query whose neighbours differ by v,
  independent N_Z(0, σ²) coordinates give Rényi divergence at most α·‖v‖₂²/(2σ²) at every order
  α > 1, the continuous Gaussian's value (CKS20 Prop 5 with independence across coordinates, their
  Thm 14): ρ = ‖v‖₂²/(2σ²)-zCDP, so RDP accounting of a ``GaussianDpEvent`` holds for it. PLD
  accounting of the continuous Gaussian does not (the discrete loss distribution differs).
* :func:`snapping` is Mironov 2012's snapping mechanism for real outputs (sensitivity 1):
  ``clamp_B(round_Λ(clamp_B(f(D)) + S·λ·ln U*))`` with U* uniform on the doubles of (0, 1]
  (full precision, variable exponent) and Λ the smallest power of two >= λ. Its outputs are
  multiples of Λ in [−B, B]; Mironov's Theorem 1 gives (1/λ + 2^{−49}·B/λ)-DP for
  λ < B < 2^46·λ (assuming a correctly rounded log; numpy's is accurate to about 1 ulp).

Randomness. Every sampler takes ``source=``: :class:`SystemRandomSource` (the default) reads
``os.urandom`` and cannot be replayed; :class:`SeededRandomSource` replays a seed and is for
reproducible research and tests only — whoever knows the seed can subtract the noise, exactly
as with the seeded torch generators of :mod:`pate_stab.privacy.noise.seeded` (every release draws from
the OS by default; seeded noise is the explicit research option, :data:`SEEDED_NOISE_WARNING`).

Scales are handled as exact rationals: a float ``scale`` is replaced by the nearest fraction
with denominator at most 2^20 (:func:`exact_scale`), and that value is the one sampled from;
claim ε from it. The samplers themselves are in :mod:`pate_stab.privacy.noise.discrete`
(exported here); this module holds the noise modes, the integer threshold of the secure sparse
vector and snapping.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache

import numpy as np
import torch

from pate_stab._checks import check_int, check_positive, check_real
from pate_stab.privacy.noise.discrete import (
    RandomSource,
    SeededRandomSource,
    SystemRandomSource,
    discrete_gaussian,
    discrete_gaussian_pmf,
    discrete_gaussian_tail_bound,
    discrete_laplace,
    discrete_laplace_pmf,
    discrete_laplace_tail,
    exact_laplace_parameter,
    exact_scale,
    exact_scale_at_least,
    exact_sigma_sq_at_least,
    random_source,
)
from pate_stab.vocabulary import NOISE_MODES, NoiseMode

__all__ = [
    "NoiseMode",
    "RandomSource",
    "SystemRandomSource",
    "SeededRandomSource",
    "exact_scale",
    "exact_scale_at_least",
    "discrete_laplace",
    "discrete_laplace_pmf",
    "discrete_laplace_tail",
    "discrete_gaussian",
    "discrete_gaussian_pmf",
    "discrete_gaussian_tail_bound",
    "exact_sigma_sq_at_least",
    "exact_laplace_parameter",
    "NOISE_MODES",
    "SEEDED_NOISE_WARNING",
    "check_noise",
    "secure_leak_probability",
    "secure_threshold_for_leak",
    "snapping",
    "snapping_epsilon",
    "snapping_support_contains",
]

SEEDED_NOISE_WARNING = (
    "seeded noise: this release carries NO privacy against anyone who knows the seed "
    "(the run's seed is in config.json); use secure noise for anything published"
)
"""What every summary, report, ledger spend and table row of a seeded release says (DESIGN fact 9)."""


def check_noise(noise: object) -> str:
    """A release's ``noise`` argument: ``"secure"`` or ``"seeded"`` (ValueError otherwise)."""
    if noise not in NOISE_MODES:
        raise ValueError(f"noise must be 'secure' or 'seeded', got {noise!r}")
    return str(noise)


def secure_leak_probability(*, threshold: int, noise_scale: float | Fraction | int) -> float:
    """P[Q − V > threshold] with Q ~ DLap(2λ), V ~ DLap(λ): how often a distance-0 query passes.

    The integer counterpart of :func:`pate_stab.privacy.mechanisms.calibration.leak_probability` (DESIGN
    fact 3) for :class:`~pate_stab.privacy.mechanisms.sparse_vector.SparseVector` with secure noise. Summed over V
    to relative precision ~1e-15.
    """
    threshold = check_int("threshold", threshold)
    lam = exact_scale(noise_scale)
    q_v = math.exp(-1.0 / float(lam))
    span = int(math.ceil(float(lam) * 45.0)) + 1  # q_v^span < 1e-19
    total = 0.0
    for v in range(-span, span + 1):
        total += (1.0 - q_v) / (1.0 + q_v) * q_v ** abs(v) * discrete_laplace_tail(threshold + v, 2 * lam)
    return total


@lru_cache(maxsize=256)
def secure_threshold_for_leak(*, probability: float, noise_scale: float | Fraction | int) -> int:
    """The smallest integer threshold w with ``secure_leak_probability(w, λ) <= probability``.

    A pure function of its arguments, cached: releasers built on the same calibration reuse it.
    """
    probability = check_real("probability", probability, low=0.0, high=1.0, low_inclusive=False)
    lam = float(exact_scale(noise_scale))
    lo, hi = 0, max(1, int(math.ceil(2 * lam * (math.log(1.0 / probability) + 2))))
    while secure_leak_probability(threshold=hi, noise_scale=noise_scale) > probability:
        hi *= 2
    while lo < hi:
        mid = (lo + hi) // 2
        if secure_leak_probability(threshold=mid, noise_scale=noise_scale) <= probability:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _power_of_two_at_least(x: float) -> float:
    mant, exp = math.frexp(x)  # x = mant · 2^exp, mant in [0.5, 1)
    return math.ldexp(1.0, exp - 1) if mant == 0.5 else math.ldexp(1.0, exp)


def _bit_length(x: np.ndarray) -> np.ndarray:
    """Bit length of each non-negative int64 (0 for 0), in exact integer arithmetic."""
    x = x.copy()
    length = np.zeros(x.shape, dtype=np.int64)
    for shift in (32, 16, 8, 4, 2, 1):
        big = x >= (np.int64(1) << np.int64(shift))
        length[big] += shift
        x[big] >>= np.int64(shift)
    return length + (x > 0)


def _uniform_full_precision(size: int, source: RandomSource) -> np.ndarray:
    """U* uniform on (0, 1) rounded to doubles with full precision (Mironov 2012, Sec 5.2).

    The binary exponent is geometric (leading zero bits of a random bit stream), the 52-bit
    mantissa uniform: U* = (1 + m/2^52)·2^{−e} with P[e] = 2^{−e}.
    """
    exponent = np.ones(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:  # count leading zeros, 62 random bits at a time
        bits = source.uint63(pending.size) >> np.int64(1)  # 62-bit words
        nz = bits != 0
        lead = 62 - _bit_length(bits)
        exponent[pending] += lead
        pending = pending[~nz & (exponent[pending] < 1070)]
    mantissa = (source.uint63(size) >> np.int64(11)).astype(np.float64)  # 52 bits
    return np.ldexp(1.0 + mantissa * 2.0**-52, -exponent)


def snapping(
    value: float, *, noise_scale: float, bound: float, size: int, source: RandomSource | None = None
) -> torch.Tensor:
    """Mironov 2012's snapping mechanism for a sensitivity-1 real query, ``size`` independent runs.

    ``clamp_B(round_Λ(clamp_B(value) + S·λ·ln U*))`` with S a fair sign, U* from
    :func:`_uniform_full_precision`, Λ = the smallest power of two >= λ. Privacy:
    :func:`snapping_epsilon`.

    Args:
        value: f(D), a query with sensitivity 1 (scale the query for other sensitivities).
        noise_scale: λ, with λ < B < 2^46·λ.
        bound: B, the clamping bound.
        size: number of runs.
        source: random bits (default: the OS's CSPRNG).

    Returns:
        ``(size,)`` float64 tensor of multiples of Λ in [−B, B].
    """
    value = check_real("value", value)
    lam = check_positive("noise_scale", noise_scale)
    bound = check_positive("bound", bound)
    if not lam < bound < 2.0**46 * lam:
        raise ValueError(f"need noise_scale < bound < 2^46·noise_scale, got noise_scale={lam}, bound={bound}")
    size = check_int("size", size, minimum=0)
    src = random_source(source)
    big_lambda = _power_of_two_at_least(lam)
    u = _uniform_full_precision(size, src)
    sign = np.where((src.uint63(size) & 1).astype(bool), 1.0, -1.0)
    x = min(max(value, -bound), bound) + sign * (lam * np.log(u))
    snapped = np.round(x / big_lambda) * big_lambda  # division by a power of two is exact
    return torch.from_numpy(np.clip(snapped, -bound, bound))


def snapping_epsilon(*, noise_scale: float, bound: float) -> float:
    """ε of :func:`snapping` for a sensitivity-1 query: 1/λ + 2^{−49}·B/λ (Mironov 2012, Thm 1)."""
    lam = check_positive("noise_scale", noise_scale)
    bound = check_positive("bound", bound)
    return 1.0 / lam + 2.0**-49 * bound / lam


def snapping_support_contains(outputs: torch.Tensor, *, noise_scale: float, bound: float) -> torch.Tensor:
    """Which outputs lie in the snapping mechanism's support (multiples of Λ in [−B, B]).

    The support is the same for every input value, which is the point of snapping.
    """
    big_lambda = _power_of_two_at_least(check_positive("noise_scale", noise_scale))
    bound = check_positive("bound", bound)
    out = outputs.to(torch.float64)
    on_grid = torch.remainder(out, big_lambda) == 0
    return (on_grid | (out.abs() == bound)) & (out.abs() <= bound)
