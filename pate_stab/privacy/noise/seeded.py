"""Noise samplers: float64, from an explicit ``torch.Generator``, validated arguments.

All samplers return float64 tensors. Exponential noise is drawn by inversion as
``-mean * log1p(-U)`` with ``U`` uniform on [0, 1), which is always finite; Laplace noise with
scale b is the difference of two independent Exp(b) draws (the Laplace law, Dwork & Roth 2014,
Def 3.3, is exactly that difference). Gaussian noise comes from ``torch.randn``.

:class:`UnitLaplaceStream` hands out unit-scale Laplace values in a fixed order from blocks of a
fixed size, so that an online mechanism taking one value at a time and a batch mechanism taking
many consume identical noise for the same generator.

Floating point (what the seeded, reproducible mode releases). These samplers compute in float64
and are subject to Mironov 2012's attack: the set of doubles ``f(D) + laplace(b)`` can take
depends on f(D). For example every output of ``1 + z`` in (0, 1/2) is a multiple of 2^-53
(Sterbenz), while ``0 + z`` returns the sampler's double z itself; with b = 1 about 7 % of the
outputs of ``0 + laplace(1)`` are off that grid and so name their input with certainty
(measured in ``tests/reliability/test_secure_noise.py``, also on the noisy counts of
:func:`pate_stab.erm.density.private_histogram`). The uniforms lie on a 2^-53 grid, so the
support is also bounded: |laplace(b)| <= 53·ln 2·b ≈ 36.7b. Mechanisms that release a noisy
value computed here (noise reduction, histograms, covariance and output perturbation) inherit
this; the stability releasers release only the outcomes of noisy comparisons. Where it matters
use :mod:`pate_stab.privacy.noise.secure` (exact discrete Laplace, snapping).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pate_stab._checks import check_generator, check_int, check_positive

__all__ = [
    "exponential",
    "laplace",
    "gaussian",
    "l2_laplace_vector",
    "l2_laplace_vectors",
    "UnitLaplaceStream",
]

_DTYPE = torch.float64
Size = int | Sequence[int] | torch.Size


def _shape(size: Size) -> tuple[int, ...]:
    if isinstance(size, int):
        return (check_int("size", size, minimum=0),)
    return tuple(check_int("size", s, minimum=0) for s in size)


def _uniform(shape: tuple[int, ...], generator: torch.Generator) -> torch.Tensor:
    return torch.rand(shape, generator=generator, dtype=_DTYPE, device=generator.device)


def exponential(mean: float, size: Size = (), *, generator: torch.Generator) -> torch.Tensor:
    """Exponential noise with the given mean (rate 1/mean), float64.

    Args:
        mean: the mean b > 0; density (1/b) e^{-x/b} on x >= 0.
        size: output shape.
        generator: source of randomness.
    """
    mean = check_positive("mean", mean)
    check_generator(generator)
    u = _uniform(_shape(size), generator)
    return -mean * torch.log1p(-u)


def laplace(scale: float, size: Size = (), *, generator: torch.Generator) -> torch.Tensor:
    """Laplace noise Lap(scale): density (1/2b) e^{-|x|/b}, float64.

    Args:
        scale: the Laplace scale b > 0 (for sensitivity Δ and privacy ε, b = Δ/ε).
        size: output shape.
        generator: source of randomness.
    """
    scale = check_positive("scale", scale)
    check_generator(generator)
    shape = _shape(size)
    u = _uniform((2, *shape), generator)
    e = -torch.log1p(-u)
    return scale * (e[0] - e[1])


def gaussian(sigma: float, size: Size = (), *, generator: torch.Generator) -> torch.Tensor:
    """Gaussian noise N(0, sigma^2), float64."""
    sigma = check_positive("sigma", sigma)
    check_generator(generator)
    return sigma * torch.randn(_shape(size), generator=generator, dtype=_DTYPE, device=generator.device)


def l2_laplace_vectors(scale: float, dim: int, *, num_samples: int, generator: torch.Generator) -> torch.Tensor:
    """``num_samples`` independent vectors b in R^dim with density ∝ exp(-||b||_2 / scale), shape (num, dim).

    Sampled exactly: in polar coordinates the density of r = ||b|| is proportional to
    r^{dim-1} e^{-r/scale}, i.e. Gamma(dim, scale), which for an integer shape is the sum of
    ``dim`` independent Exp(scale) draws; the direction is uniform on the sphere (a normalised
    standard Gaussian). Used by output and objective perturbation (Chaudhuri et al. 2011, Alg 1
    and 2; Chaudhuri & Vinterbo 2013, Alg 4), where scale = 2 / (n λ ε), and vectorised over
    samples by the statistical DP tests.

    Raises:
        ValueError: ``scale`` not positive and finite; ``dim`` or ``num_samples`` < 1.
    """
    scale = check_positive("scale", scale)
    dim = check_int("dim", dim, minimum=1)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    check_generator(generator)
    shape = (dim,) if num_samples == 1 else (num_samples, dim)  # one vector: the unbatched draw order
    radius = exponential(scale, shape, generator=generator).sum(dim=-1, keepdim=True)
    direction = torch.randn(shape, generator=generator, dtype=_DTYPE, device=generator.device)
    norm = torch.linalg.vector_norm(direction, dim=-1, keepdim=True)
    # A zero direction has probability zero; redraw those rows so the direction is always defined.
    while bool((norm == 0).any()):
        bad = (norm == 0).reshape(-1)
        fresh = torch.randn((int(bad.sum()), dim), generator=generator, dtype=_DTYPE, device=generator.device)
        direction = direction.reshape(-1, dim)
        direction[bad] = fresh
        direction = direction.reshape(shape)
        norm = torch.linalg.vector_norm(direction, dim=-1, keepdim=True)
    if num_samples == 1:  # the operation order of the unbatched sampler, so its draws stay bit-identical
        return (radius * direction / norm).reshape(1, dim)
    return direction * (radius / norm)


def l2_laplace_vector(scale: float, dim: int, *, generator: torch.Generator) -> torch.Tensor:
    """One vector of :func:`l2_laplace_vectors`, shape (dim,)."""
    return l2_laplace_vectors(scale, dim, num_samples=1, generator=generator)[0]


class UnitLaplaceStream:
    """Unit-scale Laplace values handed out in a fixed order.

    Values are generated in blocks of ``block_size`` from ``generator``; ``take(n)`` returns the
    next ``n`` values whatever the sizes of earlier requests, so a mechanism that takes values
    one at a time and one that takes them in bulk see the same sequence. ``peek`` looks ahead
    without consuming. Each value is used once: ``take`` advances past it.

    The stream owns its generator: a mechanism with two noise roles (threshold and query noise)
    uses two streams with independent generators, so the order in which roles draw does not
    change the values.
    """

    def __init__(self, generator: torch.Generator, block_size: int = 4096) -> None:
        self._generator = check_generator(generator)
        self._block_size = check_int("block_size", block_size, minimum=1)
        self._buffer = torch.empty(0, dtype=_DTYPE, device=generator.device)
        self._consumed = 0

    @property
    def consumed(self) -> int:
        """How many values have been taken so far."""
        return self._consumed

    def _fill(self, n: int) -> None:
        if self._buffer.numel() >= n:
            return
        missing = n - self._buffer.numel()
        blocks = -(-missing // self._block_size)
        parts = [self._buffer]
        for _ in range(blocks):
            parts.append(laplace(1.0, (self._block_size,), generator=self._generator))
        self._buffer = torch.cat(parts)

    def peek(self, n: int) -> torch.Tensor:
        """The next ``n`` values, without consuming them."""
        n = check_int("n", n, minimum=0)
        self._fill(n)
        return self._buffer[:n].clone()

    def advance(self, n: int) -> None:
        """Consume ``n`` values (after a ``peek``)."""
        n = check_int("n", n, minimum=0)
        self._fill(n)
        self._buffer = self._buffer[n:]
        self._consumed += n

    def take(self, n: int) -> torch.Tensor:
        """Consume and return the next ``n`` values."""
        values = self.peek(n)
        self.advance(n)
        return values

    def take_one(self) -> float:
        """Consume and return the next value as a float."""
        self._fill(1)
        value = float(self._buffer[0])
        self._buffer = self._buffer[1:]
        self._consumed += 1
        return value
