"""Noise samplers: float64 from a torch.Generator, exact discrete noise from the OS's CSPRNG.

Modules:

- ``discrete``: Exact discrete noise from a source of random bits: the discrete Laplace and discrete
  Gaussian.
- ``lattice``: Exact noise for a real vector of bounded ℓ2 sensitivity: discrete Laplace on a
  power-of-two lattice.
- ``secure``: Secure noise: exact discrete Laplace noise and the snapping mechanism, from the OS's
  CSPRNG.
- ``seeded``: Noise samplers: float64, from an explicit ``torch.Generator``, validated arguments.
"""

from pate_stab.privacy.noise.seeded import (
    UnitLaplaceStream,
    exponential,
    gaussian,
    l2_laplace_vector,
    l2_laplace_vectors,
    laplace,
)

__all__ = ["exponential", "laplace", "gaussian", "l2_laplace_vector", "l2_laplace_vectors", "UnitLaplaceStream"]
