"""Differentially private histogram density estimation on [0, 1] with private bin-size choice.

Chaudhuri & Vinterbo 2013, Alg 5 (a variant of Machanavajjhala et al.'s estimator): counts n_i
of the 1/h bins I_i = [(i-1)h, ih), noisy counts n~_i = max(0, n_i + (2/alpha) R_i) with R_i
standard Laplace (replacing one record moves two counts by one: l1-sensitivity 2), and density
f(x) = n~_i / (h n~) on bin i. The bin size is chosen by their Alg 2 with the validation score
q(f, V) = -int f^2 + (2/m) sum_j f(z_j) (eq. (6)) and the constants of Thm 6.

Neighbouring relation: replace one record. Data must lie in [0, 1] (a public, fixed range);
values outside raise unless ``clip=True`` clamps them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from pate_stab._checks import (
    check_delta,
    check_epsilon,
    check_generator,
    check_int,
    check_tensor,
)
from pate_stab.erm.validation import stability_constants_histogram, stability_validate
from pate_stab.privacy.noise.seeded import laplace

__all__ = [
    "PrivateHistogram",
    "private_histogram",
    "private_histogram_samples",
    "histogram_score",
    "private_histogram_density",
]

_DTYPE = torch.float64


@dataclass(frozen=True)
class PrivateHistogram:
    """Noisy counts n~_i of ``num_bins`` equal bins of [0, 1] (bin width h = 1/num_bins)."""

    counts: torch.Tensor
    num_bins: int

    @property
    def total(self) -> float:
        return float(self.counts.sum())

    def density(self, z: torch.Tensor) -> torch.Tensor:
        """f(z) = n~_i / (h n~) for z in bin i (uniform when every noisy count is 0)."""
        idx = _bin_index(z, self.num_bins)
        if self.total <= 0.0:
            return torch.ones_like(z, dtype=_DTYPE)
        return self.counts[idx] * self.num_bins / self.total

    def squared_integral(self) -> float:
        """int f^2 = sum_i n~_i^2 / (h n~^2)."""
        if self.total <= 0.0:
            return 1.0
        return float((self.counts**2).sum()) * self.num_bins / self.total**2


def _bin_index(z: torch.Tensor, num_bins: int) -> torch.Tensor:
    # Bins are [(i-1)h, ih); the point 1.0 goes to the last bin.
    return torch.clamp((z * num_bins).floor().long(), 0, num_bins - 1)


def _check_unit(name: str, z: object, clip: bool) -> torch.Tensor:
    z = check_tensor(name, z, ndim=1).to(_DTYPE)
    if bool(((z < 0) | (z > 1)).any()):
        if not clip:
            raise ValueError(f"{name}: values must lie in the public range [0, 1]; pass clip=True to clamp")
        z = z.clamp(0.0, 1.0)
    return z


def private_histogram(
    x: object, *, num_bins: int, epsilon: float, generator: torch.Generator, clip: bool = False
) -> PrivateHistogram:
    """Chaudhuri & Vinterbo 2013, Alg 5: epsilon-DP noisy histogram of data in [0, 1]."""
    noisy = private_histogram_samples(
        x, num_bins=num_bins, epsilon=epsilon, num_samples=1, generator=generator, clip=clip
    )
    return PrivateHistogram(counts=noisy[0], num_bins=noisy.shape[1])


def private_histogram_samples(
    x: object, *, num_bins: int, epsilon: float, num_samples: int, generator: torch.Generator, clip: bool = False
) -> torch.Tensor:
    """The noisy counts of ``num_samples`` independent runs of :func:`private_histogram`, (num_samples, num_bins).

    The vectorised form used by the statistical DP tests; one run draws exactly what
    :func:`private_histogram` draws: n~_i = max(0, n_i + Lap(2/epsilon)).
    """
    xt = _check_unit("x", x, clip)
    k = check_int("num_bins", num_bins, minimum=1)
    eps = check_epsilon(epsilon)
    runs = check_int("num_samples", num_samples, minimum=1)
    gen = check_generator(generator)
    counts = torch.bincount(_bin_index(xt, k).cpu(), minlength=k).to(_DTYPE)
    return torch.clamp(counts + laplace(2.0 / eps, (runs, k), generator=gen).cpu(), min=0.0)


def histogram_score(hist: PrivateHistogram, v: object) -> float:
    """q(f, V) = -int f^2 + (2/m) sum_j f(z_j) (Chaudhuri & Vinterbo 2013, eq. (6))."""
    vt = _check_unit("v", v, clip=True)
    return -hist.squared_integral() + 2.0 * float(hist.density(vt).mean())


def private_histogram_density(
    train: object,
    valid: object,
    *,
    bin_counts: Sequence[int],
    epsilon_train: float,
    epsilon_validation: float,
    delta: float,
    generator: torch.Generator,
    clip: bool = False,
) -> tuple[int, PrivateHistogram]:
    """End-to-end private histogram with a privately chosen bin size (Alg 2 + Alg 5 + Thm 6).

    Args:
        train, valid: disjoint samples in [0, 1].
        bin_counts: candidate numbers of bins 1/h.
        epsilon_train, epsilon_validation: alpha1, alpha2.
        delta: the delta of Thm 1 (the stability event fails with probability <= delta/k each).

    Returns:
        (chosen number of bins, the histogram retrained with fresh noise).
        (epsilon_train + epsilon_validation, delta)-DP (Thm 2).
    """
    xt = _check_unit("train", train, clip)
    vt = _check_unit("valid", valid, clip)
    delta = check_delta(delta)
    bins = [check_int("bin_counts", b, minimum=1) for b in bin_counts]
    if not bins:
        raise ValueError("bin_counts must not be empty")
    beta1, beta2 = stability_constants_histogram(
        h_min=1.0 / max(bins),
        num_params=len(bins),
        delta=delta,
        epsilon_train=epsilon_train,
        n=xt.numel(),
    )
    i, hist = stability_validate(
        bins,
        lambda b, g: private_histogram(xt, num_bins=b, epsilon=epsilon_train, generator=g),
        lambda h: histogram_score(h, vt),
        beta1=beta1,
        beta2=beta2,
        n=xt.numel(),
        m=vt.numel(),
        epsilon_validation=epsilon_validation,
        generator=generator,
    )
    return bins[i], hist
