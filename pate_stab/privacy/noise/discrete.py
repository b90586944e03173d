"""Exact discrete noise from a source of random bits: the discrete Laplace and discrete Gaussian.

* :func:`discrete_laplace` draws integer noise with ``P[X = x] ∝ exp(−|x| / scale)`` exactly,
  by Canonne, Kamath & Steinke 2020 ("The discrete Gaussian for differential privacy"),
  Algorithm 2, with Bernoulli(exp(−γ)) trials of their Algorithm 1 done in exact integer
  arithmetic (γ rational).
* :func:`discrete_gaussian` draws integer noise with ``P[X = x] ∝ exp(−x² / (2σ²))`` exactly, by
  CKS20 Algorithm 3 (discrete Laplace proposals with scale t = ⌊σ⌋ + 1, accepted with probability
  exp(−(|Y| − σ²/t)² / (2σ²)) by exact Bernoulli trials), σ² an exact rational
  (:func:`exact_sigma_sq_at_least`).

Scales are exact rationals: a float ``scale`` is replaced by the nearest fraction with denominator
at most 2^20 (:func:`exact_scale`), and that value is the one sampled from. Random bits come from
a :class:`RandomSource`: :class:`SystemRandomSource` (``os.urandom``, the default) or
:class:`SeededRandomSource` (reproducible research and tests only). Why these samplers, and what
privacy they give, is in :mod:`pate_stab.privacy.noise.secure`, which exports every name here.
"""

from __future__ import annotations

import math
import os
from fractions import Fraction
from typing import Protocol

import numpy as np
import torch

from pate_stab._checks import check_int, check_positive

__all__ = [
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
    "random_source",
    "randbelow",
]

_MAX_DENOMINATOR = 1 << 20
_TWO63 = 1 << 63
_VECTOR_BOUND = 1 << 62  # randbelow's bounds stay below this; larger ones take the big-integer path


class RandomSource(Protocol):
    """Uniform random 63-bit integers."""

    def uint63(self, n: int) -> np.ndarray:  # pragma: no cover - protocol
        """``n`` independent uniform integers in [0, 2^63), as int64."""
        ...


class SystemRandomSource:
    """Random bits from ``os.urandom`` (the OS's CSPRNG); never reproducible."""

    def uint63(self, n: int) -> np.ndarray:
        words = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        return (words >> np.uint64(1)).astype(np.int64)


class SeededRandomSource:
    """Random bits from a seeded PCG64 — reproducible research and tests only, NOT secure."""

    def __init__(self, seed: int) -> None:
        self._rng = np.random.Generator(np.random.PCG64(check_int("seed", seed, minimum=0)))

    def uint63(self, n: int) -> np.ndarray:
        return self._rng.integers(0, np.iinfo(np.int64).max, size=n, dtype=np.int64, endpoint=True)


def random_source(source: RandomSource | None) -> RandomSource:
    """``source``, checked, or the OS's CSPRNG (:class:`SystemRandomSource`) when None."""
    if source is None:
        return SystemRandomSource()
    if not hasattr(source, "uint63"):
        raise TypeError(f"source must be a RandomSource, got {type(source).__name__}")
    return source


def randbelow(bound: np.ndarray, source: RandomSource) -> np.ndarray:
    """Uniform integers in [0, bound) for each entry of ``bound`` (1 <= bound < 2^62), exactly."""
    bound = bound.astype(np.int64)
    out = np.empty_like(bound)
    pending = np.arange(bound.size)
    while pending.size:
        b = bound[pending]
        r = source.uint63(pending.size)
        # accept r < 2^63 − (2^63 mod b): then r mod b is exactly uniform on [0, b)
        rem = ((np.int64(1 << 62) % b) * 2) % b  # 2^63 mod b without overflowing int64
        ok = r <= np.iinfo(np.int64).max - rem
        out[pending[ok]] = r[ok] % b[ok]
        pending = pending[~ok]
    return out


def _bernoulli_exp(num: np.ndarray, den: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for integers 0 <= num <= den (CKS20 Alg 1, γ ∈ [0, 1]).

    Draw A_k ~ Bernoulli(γ/k) for k = 1, 2, … until the first A_k = 0; return 1 iff that k is odd.
    Each A_k is ``randbelow(den·k) < num``: exact.
    """
    result = np.zeros(num.shape, dtype=bool)
    alive = np.arange(num.size)
    k = 1
    while alive.size:
        a = randbelow(np.full(alive.size, den * k, dtype=np.int64), source) < num[alive]
        stopped = alive[~a]
        result[stopped] = k % 2 == 1
        alive = alive[a]
        k += 1
    return result


def exact_scale(scale: float | Fraction | int) -> Fraction:
    """The exact rational scale the samplers use for ``scale`` (denominator <= 2^20)."""
    if isinstance(scale, Fraction):
        value = scale
    else:
        value = Fraction(check_positive("scale", scale)).limit_denominator(_MAX_DENOMINATOR)
    if not value > 0:
        raise ValueError(f"scale must be > 0, got {scale!r}")
    if value.numerator >= 1 << 40 or value.denominator > _MAX_DENOMINATOR:
        raise ValueError(f"scale {scale!r} is out of the supported range (0, 2^40)")
    return value


def exact_scale_at_least(scale: float | Fraction | int) -> Fraction:
    """The smallest multiple of 2^-20 that is >= ``scale``: an exact rational never below it.

    For a noise scale that a calibration certified: a sparse-vector segment is (2/λ)-DP, so
    rounding λ up keeps the certified ε, where the nearest fraction (:func:`exact_scale`) may
    round down by less than 2^-20. (The leak grows with λ: compute the threshold at the rounded
    value, as the releasers do.) Example: 0.1 → 52429/524288.
    """
    if isinstance(scale, Fraction):
        return exact_scale(scale)
    value = Fraction(check_positive("scale", scale))  # the float's exact binary value
    return exact_scale(Fraction(math.ceil(value * _MAX_DENOMINATOR), _MAX_DENOMINATOR))


def discrete_laplace(scale: float | Fraction | int, size: int, *, source: RandomSource | None = None) -> torch.Tensor:
    """Exact discrete Laplace noise: P[X = x] = (1 − q)/(1 + q) · q^{|x|}, q = exp(−1/scale).

    Canonne, Kamath & Steinke 2020, Algorithm 2 with scale = t/s: draw U uniform on {0, …, t−1}
    and keep it with probability exp(−U/t); draw V ~ Geometric(1 − e^{−1}) by Bernoulli(e^{−1})
    trials; Y = ⌊(U + t·V)/s⌋; a fair sign B; reject (B = 1, Y = 0); return (1 − 2B)·Y.

    Args:
        scale: the scale t > 0 (for an integer query with sensitivity Δ, t = Δ/ε).
        size: number of samples.
        source: random bits (default: the OS's CSPRNG).

    Returns:
        ``(size,)`` int64 tensor.

    Example: scale 1 gives P[X = 0] = (1 − e^{−1})/(1 + e^{−1}) ≈ 0.4621.
    """
    frac = exact_scale(scale)
    size = check_int("size", size, minimum=0)
    src = random_source(source)
    t, s = frac.numerator, frac.denominator  # CKS20 Alg 2 samples Lap_Z(t/s)
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        n = pending.size
        u = randbelow(np.full(n, t, dtype=np.int64), src) if t > 1 else np.zeros(n, dtype=np.int64)
        keep = _bernoulli_exp(u, t, src)
        idx, u = pending[keep], u[keep]
        v = np.zeros(idx.size, dtype=np.int64)
        going = np.arange(idx.size)
        while going.size:  # V: number of Bernoulli(e^{-1}) successes before the first failure
            hit = _bernoulli_exp(np.ones(going.size, dtype=np.int64), 1, src)
            v[going[hit]] += 1
            going = going[hit]
        y = (u + t * v) // s
        sign = (src.uint63(idx.size) & 1).astype(bool)
        accept = ~(sign & (y == 0))
        out[idx[accept]] = np.where(sign[accept], -y[accept], y[accept])
        done = np.zeros(size, dtype=bool)
        done[idx[accept]] = True
        pending = pending[~done[pending]]
    return torch.from_numpy(out)


def discrete_laplace_pmf(x: int, scale: float | Fraction | int) -> float:
    """P[X = x] for :func:`discrete_laplace` with this scale."""
    q = math.exp(-1.0 / float(exact_scale(scale)))
    return (1.0 - q) / (1.0 + q) * q ** abs(int(x))


def discrete_laplace_tail(z: int, scale: float | Fraction | int) -> float:
    """P[X > z] for :func:`discrete_laplace` with this scale (z an integer)."""
    q = math.exp(-1.0 / float(exact_scale(scale)))
    z = int(z)
    if z >= 0:
        return q ** (z + 1) / (1.0 + q)
    return 1.0 - q ** (-z) / (1.0 + q)


def _randbelow_int(bound: int, source: RandomSource) -> int:
    """One uniform integer in [0, bound) for any integer bound >= 1 (63-bit words, rejection)."""
    words = -(-bound.bit_length() // 63)
    span = 1 << (63 * words)
    limit = span - span % bound  # accept r < limit: r mod bound is exactly uniform
    while True:
        r = 0
        for w in source.uint63(words).tolist():
            r = (r << 63) | int(w)
        if r < limit:
            return r % bound


def _bernoulli_exp_int(num: int, den: int, source: RandomSource, k: int = 1) -> bool:
    """Bernoulli(exp(−num/den)) for 0 <= num <= den, any integer sizes (CKS20 Alg 1), from trial k on."""
    while _randbelow_int(den * k, source) < num:
        k += 1
    return k % 2 == 1


def _bernoulli_exp_small(num: np.ndarray, den: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(−num/den)) for integers 0 <= num <= den (CKS20 Alg 1), vectorised.

    As :func:`_bernoulli_exp`; an entry whose trial bound den·k would leave int64 finishes in exact
    big-integer arithmetic (:func:`_bernoulli_exp_int`).
    """
    result = np.zeros(num.shape, dtype=bool)
    alive = np.arange(num.size)
    k = 1
    while alive.size:
        if den * k >= _VECTOR_BOUND:
            for i in alive.tolist():
                result[i] = _bernoulli_exp_int(int(num[i]), den, source, k)
            break
        a = randbelow(np.full(alive.size, den * k, dtype=np.int64), source) < num[alive]
        result[alive[~a]] = k % 2 == 1
        alive = alive[a]
        k += 1
    return result


def _bernoulli_exp_rational(num: list[int], den: int, source: RandomSource) -> np.ndarray:
    """Bernoulli(exp(−num_i/den)) for non-negative integers num_i (any size), exactly (CKS20 Alg 1).

    exp(−γ) = exp(−1)^⌊γ⌋ · exp(−(γ − ⌊γ⌋)): ⌊γ⌋ Bernoulli(e^{−1}) trials that must all succeed,
    then one Bernoulli(exp(−frac)) trial; all vectorised over the entries.
    """
    whole = np.array([n // den for n in num], dtype=object)
    frac = [n % den for n in num]
    ok = np.ones(len(num), dtype=bool)
    pending = np.flatnonzero(whole > 0)
    while pending.size:  # the Bernoulli(e^{-1}) trials of the integer part
        hit = _bernoulli_exp_small(np.ones(pending.size, dtype=np.int64), 1, source)
        ok[pending[~hit]] = False
        whole[pending[hit]] -= 1
        pending = pending[hit][whole[pending[hit]] > 0]
    rest = np.flatnonzero(ok)
    if rest.size == 0:
        return ok
    if den < _VECTOR_BOUND:
        ok[rest] = _bernoulli_exp_small(np.array([frac[i] for i in rest.tolist()], dtype=np.int64), den, source)
    else:
        ok[rest] = [_bernoulli_exp_int(frac[i], den, source) for i in rest.tolist()]
    return ok


def exact_sigma_sq_at_least(sigma: float | Fraction | int) -> Fraction:
    """σ'² >= σ², an exact rational with a power-of-two denominator: the variance parameter sampled.

    The denominator is the largest power of two <= 2^20 that keeps the rejection test of
    :func:`discrete_gaussian` in int64 arithmetic where possible (``2·σ'²·d·t² < 2^56``); σ'² is
    σ² rounded up to it, so σ'² >= σ² exactly (for a float σ, its exact binary value). A larger
    σ'² only lowers the Rényi divergence α‖v‖²/(2σ'²): a calibrated σ stays valid.
    Example: 5.0 → 25 (already exact).
    """
    value = sigma if isinstance(sigma, Fraction) else Fraction(check_positive("sigma", sigma))
    if not value > 0:
        raise ValueError(f"sigma must be > 0, got {sigma!r}")
    sq = value * value
    if sq >= 1 << 80:
        raise ValueError(f"sigma {sigma!r} is out of the supported range (0, 2^40)")
    t = math.isqrt(math.floor(sq)) + 1
    d = _MAX_DENOMINATOR
    while d > 1 and 2 * math.ceil(sq * d) * d * t * t >= 1 << 56:
        d //= 2
    return Fraction(math.ceil(sq * d), d)


def discrete_gaussian(sigma: float | Fraction | int, size: int, *, source: RandomSource | None = None) -> torch.Tensor:
    """Exact discrete Gaussian noise: P[X = x] = exp(−x²/(2σ'²)) / Σ_y exp(−y²/(2σ'²)) on ℤ.

    Canonne, Kamath & Steinke 2020, Algorithm 3 with σ'² = :func:`exact_sigma_sq_at_least` (σ) and
    t = ⌊σ'⌋ + 1: draw Y ~ DLap(t) (:func:`discrete_laplace`, exact) and accept it with probability
    exp(−(|Y| − σ'²/t)²/(2σ'²)), a Bernoulli(exp(−γ)) with γ = (|Y|·t·d − n)²/(2·n·d·t²) for
    σ'² = n/d, decided in exact integer arithmetic (Alg 1). Rejected draws are redrawn; every
    batch of draws reads its random words in one call to the source.

    Privacy (an integer query, neighbours differing by v ∈ ℤ^C, independent coordinates): Rényi
    divergence <= α·‖v‖₂²/(2σ'²) at every order, CKS20 Prop 5 and Thm 14 — the continuous
    Gaussian's RDP, so the RDP accountant on ``GaussianDpEvent`` is valid; the continuous PLD is not.

    Args:
        sigma: σ > 0 (rounded up to the exact σ'² above; σ < 2^40).
        size: number of samples.
        source: random bits (default: the OS's CSPRNG).

    Returns:
        ``(size,)`` int64 tensor.

    Example: σ = 1 gives P[X = 0] = 1/Σ_y e^{−y²/2} ≈ 0.3989.
    """
    sq = exact_sigma_sq_at_least(sigma)
    size = check_int("size", size, minimum=0)
    src = random_source(source)
    n, d = sq.numerator, sq.denominator
    t = math.isqrt(n // d) + 1
    den = 2 * n * d * t * t
    out = np.empty(size, dtype=np.int64)
    pending = np.arange(size)
    while pending.size:
        y = discrete_laplace(t, pending.size, source=src).numpy()
        gap = [abs(v) * t * d - n for v in y.tolist()]
        keep = _bernoulli_exp_rational([g * g for g in gap], den, src)
        out[pending[keep]] = y[keep]
        pending = pending[~keep]
    return torch.from_numpy(out)


def _log_theta(sq: float, shift: float = 0.0) -> float:
    """log Σ_{y ∈ ℤ} exp(−(y − shift)²/(2σ²)), summed to double precision (|y − shift| <= 40σ + 2)."""
    sigma = math.sqrt(sq)
    span = int(math.ceil(40.0 * sigma)) + 2
    ys = np.arange(-span, span + 1, dtype=np.float64) - shift
    e = -(ys**2) / (2.0 * sq)
    top = float(e.max())
    return top + math.log(float(np.exp(e - top).sum()))


def discrete_gaussian_pmf(x: int | np.ndarray, sigma: float | Fraction | int) -> np.ndarray:
    """P[X = x] for :func:`discrete_gaussian` with this σ (at its exact σ'²), as float64."""
    sq = float(exact_sigma_sq_at_least(sigma))
    xs = np.asarray(x, dtype=np.float64)
    return np.asarray(np.exp(-(xs**2) / (2.0 * sq) - _log_theta(sq)), dtype=np.float64)


def discrete_gaussian_tail_bound(gap: float | np.ndarray, sigma: float, *, differences: int = 1) -> np.ndarray:
    """Upper bound on P[S >= gap] for S a sum of ``differences`` ∈ {1, 2} ±-signed N_Z(0, σ²) draws.

    The discrete Gaussian is sub-Gaussian with the continuous Gaussian's moment bound
    E[e^{sX}] <= e^{s²σ²/2} (σ²-sub-Gaussian, CKS20 §2), so a sum of j independent ones has E[e^{sS}] <=
    e^{j s²σ²/2}, and Chernoff's bound gives P[S >= g] <= exp(−g²/(2jσ²)) for g > 0 (1 for g <= 0).
    For GNMax (j = 2: the difference of two noisy counts) this is exp(−g²/(4σ²)) where the continuous
    analysis (PSM+18 Prop 7) uses Φ̄(g/(√2σ)) <= ½·exp(−g²/(4σ²)). Natural-log form:
    :func:`pate_stab.privacy.pate.rdp.discrete_log_tail`.
    """
    if differences not in (1, 2):
        raise ValueError(f"differences must be 1 or 2, got {differences!r}")
    g = np.asarray(gap, dtype=np.float64)
    s = check_positive("sigma", sigma)
    return np.asarray(np.where(g > 0, np.exp(-(np.maximum(g, 0.0) ** 2) / (2.0 * differences * s * s)), 1.0))


def exact_laplace_parameter(noise_scale: float) -> Fraction:
    """a = N·2^{−k} <= 1/b with 2^19 <= N < 2^20, the largest such: the discrete Laplace parameter used.

    The discrete Laplace sampled with scale t = 1/a >= b has P[X = x] ∝ exp(−a|x|) with a exactly a
    double, so dp-accounting's ``DiscreteLaplaceDpEvent(noise_parameter=a)`` describes the very
    distribution sampled. Example: b = 2 → a = 1/2.
    """
    inv = 1 / Fraction(check_positive("noise_scale", noise_scale))
    e = inv.numerator.bit_length() - inv.denominator.bit_length()  # floor(log2(1/b)) or one more
    if Fraction(2) ** e > inv:
        e -= 1
    scale = Fraction(2) ** (19 - e)  # inv · scale ∈ [2^19, 2^20)
    a = Fraction(math.floor(inv * scale)) / scale
    exact_scale(1 / a)  # the sampler's range: raises for b outside it
    return a
