"""Gradual release by noise reduction (Koufogiannis, Han & Pappas 2015; Ligett et al. 2017, Alg 1).

Given a vector v with ℓ1 sensitivity Δ and privacy levels ε_1 < … < ε_T, Alg 1 draws

    v̂_T = v + Lap(Δ/ε_T)                                   (i.i.d. per coordinate)
    for t = T−1, …, 1, independently for EACH coordinate j:
        with probability (ε_t/ε_{t+1})²:  v̂_t[j] = v̂_{t+1}[j]
        otherwise:                        v̂_t[j] = v̂_{t+1}[j] + Lap(Δ/ε_t)

Why it works: the characteristic function of Lap(b) is 1/(1 + b²s²), and for b' = Δ/ε_{t+1} <
b = Δ/ε_t, (1 + b'²s²)/(1 + b²s²) = (b'/b)² + (1 − (b'/b)²)/(1 + b²s²): adding "0 with
probability (b'/b)², else Lap(b)" to a Lap(b') variable gives a Lap(b) variable. So every v̂_t is
marginally v + Lap(Δ/ε_t) coordinate-wise i.i.d., and v̂_1, …, v̂_{t−1} are computed from v̂_t
and fresh randomness only: releasing the prefix (v̂_1, …, v̂_t) is post-processing of the
ε_t-DP Laplace mechanism v̂_t, hence ε_t-DP (Ligett et al. Thm 2.7) — not ε_1 + … + ε_t.

The coin is drawn per coordinate. With one coin shared by all coordinates, each coordinate is
still marginally Laplace, but the coordinates of v̂_t − v are no longer independent (they stay
unchanged together), so v̂_t is not the Laplace mechanism and its ℓ1-sensitivity analysis does
not apply. A test checks the joint "unchanged" pattern.

:func:`noise_reduction` returns all T releases; :class:`NoiseReduction` hands out prefixes one
level at a time and tracks the privacy loss of what has left (ε of the last level released);
:func:`noise_reduction_samples` is the vectorised form (many independent runs) for tests.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pate_stab._checks import check_generator, check_int, check_positive, check_tensor
from pate_stab.errors import HaltedError
from pate_stab.privacy.noise.seeded import laplace

__all__ = ["check_increasing_epsilons", "noise_reduction", "noise_reduction_samples", "NoiseReduction"]

_DTYPE = torch.float64


def check_increasing_epsilons(epsilons: Sequence[float] | torch.Tensor, name: str = "epsilons") -> torch.Tensor:
    """ε_1 < ε_2 < … < ε_T, each finite and > 0, as a float64 tensor (T,).

    Raises:
        TypeError: not a sequence of real numbers.
        ValueError: empty, NaN/inf, a value ≤ 0, or not strictly increasing.
    """
    if not isinstance(epsilons, torch.Tensor):
        try:
            epsilons = torch.as_tensor([float(e) for e in epsilons], dtype=_DTYPE)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"{name} must be a sequence of real numbers") from exc
    eps = check_tensor(name, epsilons, ndim=1, finite=False).to(_DTYPE)
    for i, e in enumerate(eps.tolist()):
        check_positive(f"{name}[{i}]", e)
    if eps.numel() > 1 and not bool((eps[1:] > eps[:-1]).all()):
        raise ValueError(f"{name} must be strictly increasing (ε_1 < … < ε_T), got {eps.tolist()}")
    return eps


def _check_value(value: object) -> torch.Tensor:
    v = check_tensor("value", value, nonempty=True)
    if not v.is_floating_point():
        v = v.to(_DTYPE)
    return v.to(_DTYPE)


def noise_reduction_samples(
    value: torch.Tensor | Sequence[float] | float,
    *,
    sensitivity: float,
    epsilons: Sequence[float] | torch.Tensor,
    num_samples: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``num_samples`` independent runs of Alg 1 at once.

    Args:
        value: v, any shape (a scalar is treated as shape ()).
        sensitivity: Δ, the ℓ1 sensitivity of v (over all its coordinates).
        epsilons: ε_1 < … < ε_T.
        num_samples: number of independent runs R.
        generator: randomness.

    Returns:
        float64 tensor (R, T, *value.shape); [:, t−1] is v̂_t.

    Raises:
        ValueError / TypeError: NaN or infinite values, bad Δ, ε's not increasing, bad R.
    """
    v = _check_value(value)
    delta = check_positive("sensitivity", sensitivity)
    eps = check_increasing_epsilons(epsilons)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    check_generator(generator)
    t_count = eps.numel()
    shape = (num_samples, *v.shape)
    out = torch.empty((num_samples, t_count, *v.shape), dtype=_DTYPE)
    current = v.expand(shape) + laplace(delta / float(eps[-1]), shape, generator=generator)
    out[:, t_count - 1] = current
    for t in range(t_count - 2, -1, -1):
        keep_prob = (float(eps[t]) / float(eps[t + 1])) ** 2
        # One coin per coordinate (and per run): see the module docstring.
        keep = torch.rand(shape, generator=generator, dtype=_DTYPE) < keep_prob
        step = laplace(delta / float(eps[t]), shape, generator=generator)
        current = torch.where(keep, current, current + step)
        out[:, t] = current
    return out


def noise_reduction(
    value: torch.Tensor | Sequence[float] | float,
    *,
    sensitivity: float,
    epsilons: Sequence[float] | torch.Tensor,
    generator: torch.Generator,
) -> torch.Tensor:
    """Noise reduction, Ligett et al. 2017 Alg 1 (after Koufogiannis et al. 2015).

    Releasing any prefix (v̂_1, …, v̂_t) of the output is ε_t-DP (Thm 2.7) when ``value`` has ℓ1
    sensitivity ``sensitivity``; see the module docstring. Pinned example: with ε = (0.5, 1) and
    Δ = 1, v̂_2 − v ~ Lap(1) and v̂_1 − v ~ Lap(2), and P[v̂_1 = v̂_2] = 1/4 per coordinate.

    Args:
        value: v (any shape), finite.
        sensitivity: Δ > 0, ℓ1 sensitivity of v.
        epsilons: strictly increasing ε_1 < … < ε_T, finite and > 0.
        generator: randomness.

    Returns:
        float64 tensor (T, *value.shape): row t−1 is v̂_t.
    """
    return noise_reduction_samples(
        value, sensitivity=sensitivity, epsilons=epsilons, num_samples=1, generator=generator
    )[0]


class NoiseReduction:
    """Alg 1 with lazy release: prefixes (v̂_1, …, v̂_t) leave one level at a time.

    All T levels are drawn at construction (the chain runs from the least private level down),
    but only released levels leave the object; :attr:`epsilon_spent` is ε_t of the last level
    released (Thm 2.7), 0 before the first release.

    Args:
        value, sensitivity, epsilons, generator: as in :func:`noise_reduction`.
    """

    def __init__(
        self,
        value: torch.Tensor | Sequence[float] | float,
        *,
        sensitivity: float,
        epsilons: Sequence[float] | torch.Tensor,
        generator: torch.Generator,
    ) -> None:
        self.epsilons = check_increasing_epsilons(epsilons)
        self.sensitivity = check_positive("sensitivity", sensitivity)
        self._levels = noise_reduction(value, sensitivity=self.sensitivity, epsilons=self.epsilons, generator=generator)
        self.num_released = 0

    @property
    def num_levels(self) -> int:
        return int(self.epsilons.numel())

    @property
    def epsilon_spent(self) -> float:
        """ε of the prefix released so far (ε_t after t levels; 0 before any)."""
        return 0.0 if self.num_released == 0 else float(self.epsilons[self.num_released - 1])

    def next(self) -> torch.Tensor:
        """Release the next level v̂_{t+1}; raises :class:`HaltedError` after level T."""
        if self.num_released >= self.num_levels:
            raise HaltedError(f"all {self.num_levels} levels have been released")
        out = self._levels[self.num_released].clone()
        self.num_released += 1
        return out

    def prefix(self, t: int) -> torch.Tensor:
        """Release (v̂_1, …, v̂_t) as a (t, *shape) tensor; costs ε_t in total."""
        t = check_int("t", t, minimum=1, maximum=self.num_levels)
        self.num_released = max(self.num_released, t)
        return self._levels[:t].clone()
