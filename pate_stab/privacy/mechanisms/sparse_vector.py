"""Sparse vector with a cutoff (BTT18 Alg 1), and InteractiveAboveThreshold (Ligett et al. Alg 2) as a configuration.

Sparse vector (Bassily, Thakkar & Thakurta 2018, Alg 1; Dwork & Roth 2014, §3.6). Queries have
sensitivity 1. A noisy threshold ŵ = w + Lap(λ) is drawn; each query value q is compared as
q + Lap(2λ) > ŵ. A pass outputs ⊤. A failure outputs ⊥, increments the counter and draws a fresh
threshold. The run between two threshold draws ends at its first ⊥ and is one AboveThreshold
instance, which is (2/λ)-DP; the mechanism composes the segments.

Cutoff, exactly: the mechanism halts right after the ``max_unstable``-th ⊥ (T) and answers
nothing after it, so at most T segments run and the accountant composes T of them. (Alg 1 as
printed loops "while c ≤ T", which would allow a (T+1)-th ⊥, i.e. T+1 segments, while its λ is
set for T; halting at the T-th ⊥ makes the count and the calibration agree.)

Outputs are coded as ``1`` (⊤, passed), ``0`` (⊥, failed) and ``-1`` (not processed: halted).

Noise source, a parameter (DESIGN facts 5 and 9). One class, :class:`SparseVector`, runs the
mechanism in both noise modes; only where the noise comes from differs:

* ``noise="secure"`` (:class:`SecureLaplaceNoise`): exact discrete Laplace, DLap(λ) on thresholds
  and DLap(2λ) on queries, from the OS's CSPRNG (or a ``source=``), with λ an exact rational and an
  integer threshold; query values must be integers (vote counts, distances to instability) and
  the test ``value + Q > threshold + V`` is exact integer arithmetic. The privacy proof of the
  continuous version (shift the threshold noise by 1, the failing query's noise by 2) uses only
  the ratio bound P[X = x]/P[X = x + j] <= exp(|j|/scale), which DLap satisfies on ℤ, so each
  segment is (2/λ)-DP as above. Choose the integer threshold with
  :func:`pate_stab.privacy.noise.secure.secure_threshold_for_leak` (the continuous threshold
  formula does not apply).
* ``noise="seeded"`` (:class:`SeededLaplaceNoise`): float64 Laplace from a torch ``generator``:
  reproducible research only, no privacy against anyone who knows the seed.

Noise layout. Threshold noise and query noise are two streams (seeded: two
:class:`~pate_stab.privacy.noise.seeded.UnitLaplaceStream`\\ s on child generators spawned from the
generator passed in; secure: two buffers of draws from the one source). Query t (counting from
the first query the object sees) uses the t-th query-noise value; the j-th threshold uses the
j-th threshold-noise value; a value is used once and never again. The online form
(:meth:`SparseVector.process`) and the batch form (:meth:`SparseVector.process_many`) therefore
give identical outputs for the same noise, however a stream of queries is split into calls.

:func:`above_threshold_scan` is the vectorised core (many independent runs at once, noise given):
:class:`SparseVector` runs every query through it in both modes, and so do the statistical tests
that need 10^5 runs (:mod:`pate_stab.audit.releaser_cases`), with noise from
:func:`sparse_vector_noise`, the bulk form of the same two noise sources.

InteractiveAboveThreshold (Ligett et al. 2017, Alg 2) is not a second mechanism: it is the sparse
vector with T = 1 run on negated queries (:func:`interactive_above_threshold`), so it takes either
noise source too.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction

import torch

from pate_stab._checks import check_generator, check_int, check_positive, check_real, check_tensor
from pate_stab.errors import HaltedError
from pate_stab.privacy.noise.discrete import (
    RandomSource,
    SeededRandomSource,
    discrete_laplace,
    exact_scale,
    exact_scale_at_least,
    random_source,
)
from pate_stab.privacy.noise.seeded import UnitLaplaceStream, laplace
from pate_stab.rng import spawn_generators

__all__ = [
    "PASSED",
    "FAILED",
    "NOT_PROCESSED",
    "ScanResult",
    "above_threshold_scan",
    "SparseVectorNoise",
    "SeededLaplaceNoise",
    "SecureLaplaceNoise",
    "sparse_vector_noise",
    "SparseVector",
    "interactive_above_threshold",
]

PASSED, FAILED, NOT_PROCESSED = 1, 0, -1
_WINDOW = 1 << 16


@dataclass(frozen=True)
class ScanResult:
    """Result of :func:`above_threshold_scan` for R independent runs.

    Attributes:
        outputs: (R, m) int8 — 1 ⊤, 0 ⊥, −1 not processed (halted earlier).
        num_failed: (R,) int64 — number of ⊥ in this scan.
        halted: (R,) bool — the run reached its cutoff.
    """

    outputs: torch.Tensor
    num_failed: torch.Tensor
    halted: torch.Tensor


def above_threshold_scan(
    values: torch.Tensor,
    query_noise: torch.Tensor,
    threshold_noise: torch.Tensor,
    *,
    threshold: float,
    max_failures: int,
) -> ScanResult:
    """Run sparse vector on R independent runs of m queries each, with the noise given.

    Query i of run r passes when ``values[r, i] + query_noise[r, i] > threshold +
    threshold_noise[r, s]``, where s is the number of ⊥ run r has output before query i. A run
    halts after its ``max_failures``-th ⊥.

    Args:
        values: (R, m) or (m,) query values (float64).
        query_noise: same shape, already scaled (Lap(2λ) in Alg 1).
        threshold_noise: (R, S) or (S,) with S >= 1 threshold-noise values, already scaled
            (Lap(λ)); only the first ``min(S, max_failures)`` are used.
        threshold: the public threshold w (an integer when values and noise are integers: the
            test is then exact integer arithmetic).
        max_failures: the number of ⊥ after which a run halts (>= 1).

    Returns:
        :class:`ScanResult`. Cost O(S · R · m) in the worst case, O(m + S · window) per run.
    """
    max_failures = check_int("max_failures", max_failures, minimum=1)
    exact = not (values.is_floating_point() or query_noise.is_floating_point() or threshold_noise.is_floating_point())
    threshold = check_int("threshold", threshold) if exact else check_real("threshold", threshold)
    squeeze = values.dim() == 1
    if squeeze:
        values, query_noise, threshold_noise = values[None], query_noise[None], threshold_noise[None]
    if values.shape != query_noise.shape or values.dim() != 2:
        raise ValueError(f"values {tuple(values.shape)} and query_noise {tuple(query_noise.shape)} must match (R, m)")
    if threshold_noise.dim() != 2 or threshold_noise.shape[0] != values.shape[0] or threshold_noise.shape[1] < 1:
        raise ValueError(f"threshold_noise must have shape (R, S>=1), got {tuple(threshold_noise.shape)}")
    runs, m = values.shape
    device = values.device
    noisy = values + query_noise
    outputs = torch.full((runs, m), NOT_PROCESSED, dtype=torch.int8, device=device)
    start = torch.zeros(runs, dtype=torch.int64, device=device)  # next query to process
    num_failed = torch.zeros(runs, dtype=torch.int64, device=device)
    segments = min(threshold_noise.shape[1], max_failures)
    cols = torch.arange(m, device=device)
    for s in range(segments):
        active = start < m
        if not bool(active.any()):
            break
        level = threshold + threshold_noise[:, s]  # (R,)
        # Find each active run's first failure at or after its start, window by window.
        first_fail = torch.full((runs,), m, dtype=torch.int64, device=device)
        searching = active.clone()
        lo = int(start[active].min())
        while bool(searching.any()) and lo < m:
            hi = min(m, lo + max(_WINDOW, 1))
            win = cols[lo:hi]
            fails = (noisy[:, lo:hi] <= level[:, None]) & (win[None, :] >= start[:, None]) & searching[:, None]
            found = fails.any(dim=1)
            idx = lo + torch.argmax(fails.to(torch.int8), dim=1)
            first_fail = torch.where(found, idx, first_fail)
            searching = searching & ~found
            lo = hi
        # Queries start..first_fail-1 pass; first_fail (if < m) fails.
        passed = (cols[None, :] >= start[:, None]) & (cols[None, :] < first_fail[:, None]) & active[:, None]
        outputs[passed] = PASSED
        failed_now = active & (first_fail < m)
        rows = torch.nonzero(failed_now).flatten()
        outputs[rows, first_fail[rows]] = FAILED
        num_failed += failed_now.to(torch.int64)
        start = torch.where(failed_now, first_fail + 1, torch.where(active, torch.full_like(start, m), start))
    halted = num_failed >= max_failures
    # Runs that are neither halted nor finished ran out of threshold draws: not allowed.
    if bool(((start < m) & ~halted).any()):
        raise ValueError("threshold_noise has fewer values than the runs need (pass max_failures of them)")
    if squeeze:
        return ScanResult(outputs[0], num_failed[0], halted[0])
    return ScanResult(outputs, num_failed, halted)


class SparseVectorNoise:
    """Where a sparse vector's noise comes from: two streams, threshold noise Lap(λ) and query noise Lap(2λ).

    ``peek(role, n)`` returns the next ``n`` values of a stream (``"threshold"`` or ``"query"``),
    already scaled, without consuming them; ``advance(role, n)`` consumes them. A consumed value is
    never handed out again. ``exact``: integer noise (the test is exact integer arithmetic).
    """

    exact: bool = False
    mode: str = ""

    def peek(self, role: str, n: int) -> torch.Tensor:
        raise NotImplementedError

    def advance(self, role: str, n: int) -> None:
        raise NotImplementedError

    def take(self, role: str, n: int) -> torch.Tensor:
        """Consume and return the next ``n`` values of ``role``."""
        values = self.peek(role, n)
        self.advance(role, n)
        return values


class SeededLaplaceNoise(SparseVectorNoise):
    """Float64 Laplace from a torch generator (research only: no privacy against whoever knows the seed).

    Two :class:`UnitLaplaceStream`\\ s on child generators spawned from ``generator``; values are
    λ·U (threshold) and 2λ·U (query) with U unit Laplace.
    """

    mode = "seeded"

    def __init__(self, noise_scale: float, generator: torch.Generator) -> None:
        self.noise_scale = check_positive("noise_scale", noise_scale)
        check_generator(generator)
        threshold_gen, query_gen = spawn_generators(generator, 2)
        self._streams = {"threshold": UnitLaplaceStream(threshold_gen), "query": UnitLaplaceStream(query_gen)}
        self._scales = {"threshold": self.noise_scale, "query": 2.0 * self.noise_scale}

    def peek(self, role: str, n: int) -> torch.Tensor:
        return self._scales[role] * self._streams[role].peek(n)

    def advance(self, role: str, n: int) -> None:
        self._streams[role].advance(n)


class SecureLaplaceNoise(SparseVectorNoise):
    """Exact discrete Laplace, DLap(λ) (threshold) and DLap(2λ) (query), from the OS's CSPRNG or ``source``.

    λ is an exact rational (:func:`~pate_stab.privacy.noise.discrete.exact_scale`); draws are made
    as a stream needs them (:meth:`_draw`) and kept until used, each value used once.
    """

    exact = True
    mode = "secure"

    def __init__(self, noise_scale: float | Fraction | int, source: RandomSource | None = None) -> None:
        self.noise_scale = exact_scale(noise_scale)
        self._source = random_source(source)
        self._buffers = {"threshold": torch.empty(0, dtype=torch.int64), "query": torch.empty(0, dtype=torch.int64)}
        self._scales = {"threshold": self.noise_scale, "query": 2 * self.noise_scale}

    def _draw(self, scale: Fraction, n: int) -> torch.Tensor:
        """``n`` fresh DLap(scale) values from the source (int64)."""
        return discrete_laplace(scale, n, source=self._source).to(torch.int64)

    def peek(self, role: str, n: int) -> torch.Tensor:
        n = check_int("n", n, minimum=0)
        buffer = self._buffers[role]
        if buffer.numel() < n:
            buffer = torch.cat([buffer, self._draw(self._scales[role], n - buffer.numel())])
            self._buffers[role] = buffer
        return buffer[:n].clone()

    def advance(self, role: str, n: int) -> None:
        self.peek(role, n)
        self._buffers[role] = self._buffers[role][n:]


def sparse_vector_noise(
    noise: str,
    *,
    noise_scale: float,
    threshold_shape: tuple[int, ...],
    query_shape: tuple[int, ...],
    generator: torch.Generator,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Threshold noise (scale λ) and query noise (scale 2λ) in bulk, drawn as in mode ``noise``.

    The bulk form of the two noise sources, for statistical tests that run
    :func:`above_threshold_scan` on 10^5 independent runs. ``"seeded"``: float64 Laplace from
    ``generator``. ``"secure"``: int64 DLap at λ' = ``exact_scale_at_least(λ)``, the rounded-up
    rational scale the secure releasers use, from a seeded source whose seed is drawn from
    ``generator`` (reproducible; the mechanism itself reads the OS).
    """
    if noise == "seeded":
        return (
            laplace(noise_scale, threshold_shape, generator=generator),
            laplace(2 * noise_scale, query_shape, generator=generator),
        )
    if noise != "secure":
        raise ValueError(f"noise must be 'seeded' or 'secure', got {noise!r}")
    lam = exact_scale_at_least(noise_scale)
    src = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=generator)))
    n_t, n_q = torch.Size(threshold_shape).numel(), torch.Size(query_shape).numel()
    return (
        discrete_laplace(lam, n_t, source=src).reshape(threshold_shape),
        discrete_laplace(2 * lam, n_q, source=src).reshape(query_shape),
    )


def _noise_source(
    noise: str | None, noise_scale: float | Fraction, generator: torch.Generator | None, source: RandomSource | None
) -> SparseVectorNoise:
    if noise is None:
        noise = "secure" if generator is None else "seeded"
    if noise == "seeded":
        if source is not None:
            raise TypeError("source is for noise='secure'; seeded noise comes from generator")
        if generator is None:
            raise TypeError("generator is required with noise='seeded'")
        return SeededLaplaceNoise(float(noise_scale), generator)
    if noise == "secure":
        if generator is not None:
            raise TypeError("generator is for noise='seeded'; secure noise comes from the OS (or source)")
        return SecureLaplaceNoise(noise_scale, source)
    raise ValueError(f"noise must be 'secure' or 'seeded', got {noise!r}")


class SparseVector:
    """Sparse vector with cutoff (BTT18 Alg 1), online and batch, its noise source a parameter.

    Args:
        threshold: the public threshold w (an integer with secure noise).
        noise_scale: λ; thresholds get Lap(λ), queries Lap(2λ). Each segment is (2/λ)-DP for
            sensitivity-1 queries (Dwork & Roth 2014, Thm 3.23 with λ = 2/ε). Secure noise uses
            λ as an exact rational (:func:`~pate_stab.privacy.noise.discrete.exact_scale`).
        max_unstable: T, the number of ⊥ after which the mechanism halts.
        noise: ``"secure"`` (exact discrete Laplace from ``source``, default the OS) or
            ``"seeded"`` (float64 Laplace from ``generator``; research only). None: seeded when a
            generator is given, secure otherwise.
        generator: seeded noise; two child generators are spawned from it at construction.
        source: random bits for secure noise (default: the OS's CSPRNG).

    The privacy cost of a whole run is that of ``max_unstable`` segments and is known before the
    first query; :mod:`pate_stab.privacy.mechanisms.calibration` sets λ and w, and the caller records the
    spend before releasing anything.
    """

    def __init__(
        self,
        *,
        threshold: float | int,
        noise_scale: float | Fraction | int,
        max_unstable: int,
        noise: str | None = None,
        generator: torch.Generator | None = None,
        source: RandomSource | None = None,
    ) -> None:
        self._noise = _noise_source(noise, noise_scale, generator, source)
        self.noise = self._noise.mode
        self.exact = self._noise.exact
        self.threshold: float | int = (
            check_int("threshold", threshold) if self.exact else check_real("threshold", threshold)
        )
        self.noise_scale: float | Fraction = (
            self._noise.noise_scale
            if isinstance(self._noise, SecureLaplaceNoise)
            else check_positive("noise_scale", noise_scale)
        )
        self.max_unstable = check_int("max_unstable", max_unstable, minimum=1)
        self._threshold_noise = self._noise.take("threshold", 1)  # Alg 1 line 1
        self.num_failed = 0
        self.num_seen = 0
        self.num_passed = 0

    @property
    def halted(self) -> bool:
        return self.num_failed >= self.max_unstable

    def process(self, value: float | int) -> bool:
        """Test one query value; True is ⊤, False is ⊥. Raises HaltedError after the cutoff."""
        if self.halted:
            raise HaltedError(f"sparse vector halted after {self.max_unstable} failed queries")
        if self.exact:
            one = torch.tensor([check_int("value", value)], dtype=torch.int64)
        else:
            one = torch.tensor([check_real("value", value)], dtype=torch.float64)
        return int(self.process_many(one)[0]) == PASSED

    def process_many(self, values: torch.Tensor, *, stop_after_failures: int | None = None) -> torch.Tensor:
        """Test a sequence of query values; returns int8 codes (1 ⊤, 0 ⊥, −1 not processed).

        Identical to calling :meth:`process` on each value in order. With
        ``stop_after_failures`` the call returns after that many ⊥ in this call (the remaining
        values are left unprocessed, coded −1, and consume no noise), so a caller can interleave
        other queries, e.g. the soft-label releaser's second test. Secure noise takes integer
        values only.
        """
        if self.exact:
            values = check_tensor("values", values, ndim=1, floating=False, nonempty=False).to(torch.int64)
        else:
            values = check_tensor("values", values, ndim=1, nonempty=False).to(torch.float64)
        m = values.numel()
        out = torch.full((m,), NOT_PROCESSED, dtype=torch.int8)
        if self.halted or m == 0:
            return out
        left = self.max_unstable - self.num_failed
        if stop_after_failures is not None:
            left = min(left, check_int("stop_after_failures", stop_after_failures, minimum=1))
        query_noise = self._noise.peek("query", m)
        thresholds = torch.cat([self._threshold_noise, self._noise.peek("threshold", left - 1)])
        res = above_threshold_scan(values, query_noise, thresholds, threshold=self.threshold, max_failures=left)
        processed = int((res.outputs != NOT_PROCESSED).sum())
        failed = int(res.num_failed)
        self._noise.advance("query", processed)
        self.num_seen += processed
        self.num_passed += processed - failed
        self.num_failed += failed
        # Every ⊥ but a halting one draws the next threshold (Alg 1).
        draws = failed - 1 if self.halted else failed
        if draws > 0:
            drawn = self._noise.take("threshold", draws)
            if not self.halted:
                self._threshold_noise = drawn[-1:]
        return res.outputs


def interactive_above_threshold(
    *,
    epsilon: float,
    threshold: float | int,
    sensitivity: float,
    noise: str | None = None,
    generator: torch.Generator | None = None,
    source: RandomSource | None = None,
) -> SparseVector:
    """InteractiveAboveThreshold (Ligett, Neel, Roth, Waggoner & Wu 2017, Alg 2) as a :class:`SparseVector`.

    Alg 2 draws Ŵ = W + Lap(2Δ/ε) and halts at the first query with f_t + Lap(4Δ/ε) ≥ Ŵ. The
    sparse vector with threshold −W, λ = 2Δ/ε and cutoff T = 1, run on the negated queries
    g_t = −f_t, halts at its first ⊥, g_t + Lap(2λ) ≤ −W + Lap(λ): negating both sides gives
    f_t − Lap(2λ) ≥ W − Lap(λ), which is Alg 2's stopping event in law (Laplace noise is
    symmetric). g_t has the sensitivity Δ of f_t, and one segment at λ = 2Δ/ε is then
    (2Δ/λ) = ε-DP (the sparse vector's 2/λ for sensitivity 1, scaled by Δ). With
    (ε_1, …, ε_T)-prefix-private queries the outcome (t, f_t) is (ε + ε_t)-ex-post DP (their
    Lemma 2.8).

    Pass the negated queries to :meth:`SparseVector.process_many` (or :meth:`SparseVector.process`);
    the first ⊥ (:data:`FAILED`) is Alg 2's stopping point, after which the mechanism is halted.

    Args:
        epsilon: ε of the stopping rule.
        threshold: W, on the scale of f_t (an integer with secure noise).
        sensitivity: Δ, the ℓ1 sensitivity of each f_t.
        noise, generator, source: the noise source, as for :class:`SparseVector` (seeded when a
            generator is given, else exact discrete Laplace from the OS or ``source``, with λ
            rounded up to :func:`~pate_stab.privacy.noise.discrete.exact_scale_at_least`; the
            queries and W must then be integers).
    """
    epsilon = check_positive("epsilon", epsilon)
    sensitivity = check_positive("sensitivity", sensitivity)
    noise_scale: float | Fraction = 2.0 * sensitivity / epsilon
    if noise == "secure" or (noise is None and generator is None):
        noise_scale = exact_scale_at_least(noise_scale)  # rounded up: the segment stays ε-DP
    return SparseVector(
        threshold=-threshold,
        noise_scale=noise_scale,
        max_unstable=1,
        noise=noise,
        generator=generator,
        source=source,
    )
