"""Distance to instability (BTT18 Alg 2, after Smith & Thakurta 2013) and online query release (Alg 3).

Alg 2 releases f(D) when dist_f(D) + Lap(1/ε) > Γ and ⊥ otherwise. With dist_f(D) the largest k
such that f is constant on every dataset within k records of D, the test is ε-DP (sensitivity 1),
and when f can change on a neighbour (dist = 0) the release happens with probability
P[Lap(1/ε) > Γ] = e^{−εΓ}/2, which Γ = log(1/δ)/ε bounds by δ/2 (Thm 3.2).

Alg 3 runs this test once per query inside sparse vector: threshold ŵ = w + Lap(λ), query noise
Lap(2λ) (Alg 2 with ε = 1/(2λ)), a fresh ŵ after every ⊥, halting at the cutoff. The privacy of the
⊤/⊥ pattern is that of :class:`~pate_stab.privacy.mechanisms.sparse_vector.SparseVector`; releasing the
exact answer on ⊤ adds the leak δ of :mod:`pate_stab.privacy.mechanisms.calibration` (DESIGN fact 3).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import torch

from pate_stab._checks import (
    check_generator,
    check_int,
    check_nonnegative,
    check_positive,
    check_real,
    check_tensor,
)
from pate_stab.privacy.mechanisms.sparse_vector import PASSED, SparseVector
from pate_stab.privacy.noise.discrete import RandomSource
from pate_stab.privacy.noise.seeded import laplace

__all__ = ["stability_release", "OnlineQueryRelease"]


def stability_release(
    answer: Any,
    *,
    distance: float,
    threshold: float,
    epsilon: float,
    generator: torch.Generator,
) -> Any | None:
    """BTT18 Alg 2: return ``answer`` if ``distance + Lap(1/epsilon) > threshold``, else None (⊥).

    Args:
        answer: f(D), released unchanged when the test passes.
        distance: dist_f(D) >= 0, a sensitivity-1 lower bound on the distance to instability
            that is 0 whenever a neighbour can change f.
        threshold: Γ; Thm 3.2 uses Γ = log(1/δ)/ε for (ε, δ)-DP.
        epsilon: ε of the noisy test.
        generator: randomness.

    Example: with distance 30, Γ = log(1e5)/1 ≈ 11.5 and ε = 1 the answer is released except with
    probability e^{-(30 − 11.5)}/2 ≈ 4.6e-9.
    """
    distance = check_nonnegative("distance", distance)
    threshold = check_real("threshold", threshold)
    epsilon = check_positive("epsilon", epsilon)
    check_generator(generator)
    noisy = distance + float(laplace(1.0 / epsilon, generator=generator))
    return answer if noisy > threshold else None


class OnlineQueryRelease:
    """BTT18 Alg 3: online query release via distance to instability and sparse vector.

    Each query comes with its exact answer f_i(D) (an integer code here) and its distance to
    instability; the answer is released on ⊤ and replaced by ``bottom`` on ⊥. The mechanism
    halts after ``max_unstable`` ⊥ (see :mod:`pate_stab.privacy.mechanisms.sparse_vector` for the exact
    cutoff) and releases nothing afterwards.

    Args:
        noise_scale: λ (from :func:`pate_stab.privacy.mechanisms.calibration.calibrate`).
        threshold: w (idem; an integer with secure noise).
        max_unstable: T, the number of failed tests before halting.
        noise, generator, source: the sparse vector's noise source
            (:class:`~pate_stab.privacy.mechanisms.sparse_vector.SparseVector`): secure (exact discrete
            Laplace; distances must be integers) or seeded (float64 from ``generator``).
        bottom: the code returned for ⊥ and for queries after halting (default −1).
    """

    def __init__(
        self,
        *,
        noise_scale: float | Fraction,
        threshold: float | int,
        max_unstable: int,
        noise: str | None = None,
        generator: torch.Generator | None = None,
        source: RandomSource | None = None,
        bottom: int = -1,
    ) -> None:
        self._svt = SparseVector(
            threshold=threshold, noise_scale=noise_scale, max_unstable=max_unstable, noise=noise,
            generator=generator, source=source,
        )  # fmt: skip
        self.bottom = bottom

    @property
    def noise(self) -> str:
        return self._svt.noise

    @property
    def noise_scale(self) -> float | Fraction:
        return self._svt.noise_scale

    @property
    def threshold(self) -> float | int:
        return self._svt.threshold

    @property
    def halted(self) -> bool:
        return self._svt.halted

    @property
    def num_seen(self) -> int:
        return self._svt.num_seen

    @property
    def num_failed(self) -> int:
        return self._svt.num_failed

    @property
    def num_passed(self) -> int:
        return self._svt.num_passed

    def release_one(self, answer: int, distance: float) -> int:
        """One query: the answer on ⊤, ``bottom`` on ⊥. Raises HaltedError after the cutoff."""
        if self._svt.exact:  # secure noise: an integer distance
            return answer if self._svt.process(check_int("distance", distance, minimum=0)) else self.bottom
        return answer if self._svt.process(check_nonnegative("distance", distance)) else self.bottom

    def release(self, answers: torch.Tensor, distances: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Many queries in order; identical to calling :meth:`release_one` on each.

        Returns:
            (released, status): released answers (int64, ``bottom`` for ⊥ and after halting) and
            the sparse-vector codes (int8: 1 ⊤, 0 ⊥, −1 not processed).
        """
        answers = check_tensor("answers", answers, ndim=1, floating=False, nonempty=False)
        if self._svt.exact:  # secure noise: integer distances, an exact integer test
            distances = check_tensor("distances", distances, ndim=1, floating=False, nonempty=False)
        else:
            distances = check_tensor("distances", distances, ndim=1, nonempty=False).to(torch.float64)
        if answers.shape != distances.shape:
            raise ValueError(f"answers {tuple(answers.shape)} and distances {tuple(distances.shape)} differ in shape")
        if bool((distances < 0).any()):
            raise ValueError("distances must be non-negative")
        status = self._svt.process_many(distances)
        bottom = torch.full_like(answers, self.bottom, dtype=torch.int64)
        released = torch.where(status == PASSED, answers.to(torch.int64), bottom)
        return released, status
