"""The hard-label stability releaser: BTT18 Alg 4 (sub-sample and aggregate + Alg 3), multi-class.

For each public query the k teachers' votes form a histogram; the released label is its argmax
(ties to the lowest class index) when the noisy distance to instability clears the noisy
threshold, and ⊥ (−1) otherwise. The distance is the sensitivity-1 ``max(0, ⌈gap/2⌉ − 1)`` of
DESIGN.md fact 2, not Alg 4 line 5's ``max(0, gap − 1)`` (sensitivity 2). The mechanism halts
after the T-th ⊥ (see :mod:`pate_stab.privacy.mechanisms.sparse_vector`) and releases nothing afterwards.

Neighbouring relation (DESIGN fact 1). With ``teachers_changed=1`` (default) the guarantee
holds for neighbouring data sets that differ in one teacher's shard: add/remove one record with a
record-keyed partition, or replace one record when the partition keys are record ids (a
replacement keeps its id, hence its shard). Replacing a record under content keys can move it
to another shard and change two teachers; ``teachers_changed=2`` then covers it by group privacy
at the level of the distance (:func:`~pate_stab.aggregation.votes.distance_to_instability` with
``group_size=2``: sensitivity 1 when two votes move, 0 whenever two moved votes can change the
argmax), so the calibration's (ε, δ) holds unchanged for the two-teacher relation.

Privacy: the whole run — up to ``num_queries`` queries and T ⊥ — is (ε, δ)-DP with the
calibration's certified values (BTT18 Cor 3.10 with the corrections of DESIGN facts 2–4). The
spend and the first call's labels are recorded in one durable ledger line before those labels
leave the releaser; every later call's labels are recorded before they leave; a releaser built
again under a recorded spend id replays them and never draws again
(:class:`~pate_stab.aggregation.base.LedgerRelease`).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, TypedDict, Unpack

import torch

from pate_stab._checks import check_generator, check_tensor
from pate_stab.aggregation.base import (
    ABSTAIN,
    LedgerRelease,
    ReleaseResult,
    check_num_teachers,
    check_teachers_changed,
    check_vote_totals,
)
from pate_stab.aggregation.votes import distance_to_instability, top_label
from pate_stab.privacy.accounting.events import ApproxDpEvent, ComposedEvent, PrivacyEvent, SparseVectorEvent
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import Calibration, calibration_leak, check_calibration
from pate_stab.privacy.mechanisms.sparse_vector import SparseVector
from pate_stab.privacy.mechanisms.stability import OnlineQueryRelease
from pate_stab.privacy.noise.secure import (
    NOISE_MODES,
    SEEDED_NOISE_WARNING,
    RandomSource,
    exact_scale_at_least,
    secure_threshold_for_leak,
)

__all__ = ["ABSTAIN", "NOISE_MODES", "ReleaseResult", "StabilityReleaser", "releaser_event", "secure_sparse_vector"]


def releaser_event(calibration: Calibration) -> PrivacyEvent:
    """What a stability releaser run does: the sparse-vector segments plus the leak's δ.

    The leak is recomputed from (λ, w) and the number of tests (:func:`calibration_leak`),
    never read from the calibration's stored ``leak_per_test``; the ledger then checks that the
    event implies the certified (ε, δ) it records.
    """
    check_calibration(calibration)
    tests, per_test = calibration_leak(calibration)
    leak = tests * per_test
    return ComposedEvent(
        events=(
            SparseVectorEvent(noise_scale=calibration.noise_scale, num_segments=calibration.num_segments),
            ApproxDpEvent(epsilon=0.0, delta=leak, reason="distance-to-instability leak (DESIGN fact 3)"),
        )
    )


def calibration_summary(calibration: Calibration) -> dict[str, Any]:
    """The calibration fields every releaser summary reports."""
    return {
        "calibration": calibration.mode,
        "epsilon": calibration.certified_epsilon,
        "delta": calibration.certified_delta,
        "noise_scale": calibration.noise_scale,
        "threshold": calibration.threshold,
        "max_unstable": calibration.max_unstable,
        "num_queries": calibration.num_queries,
    }


def check_noise_mode(noise: Any, generator: torch.Generator | None) -> str:
    """A releaser's ``noise`` argument: "seeded" needs a generator, "secure" ignores it."""
    if noise not in NOISE_MODES:
        raise ValueError(f"noise must be 'secure' or 'seeded', got {noise!r}")
    if noise == "seeded" and generator is None:
        raise TypeError("generator is required with noise='seeded'")
    return str(noise)


def secure_parameters(calibration: Calibration) -> tuple[int, Any]:
    """The integer threshold and exact scale a releaser's sparse vector uses in secure mode.

    * Noise: exact discrete Laplace, DLap(λ') on thresholds and DLap(2λ') on distances, with
      λ' >= λ the calibration's scale rounded up to an exact rational
      (:func:`~pate_stab.privacy.noise.secure.exact_scale_at_least`): each segment is
      (2/λ')-DP with 2/λ' <= 2/λ, so the certified ε holds.
    * Threshold: the smallest integer w whose exact leak P[DLap(2λ') − DLap(λ') > w] (DESIGN
      fact 3 for integer noise) is at most ``calibration.leak_per_test``, the leak of the float
      threshold. So the calibration's certified δ = δ_sv + num_tests · leak_per_test, which the
      ledger records, bounds the secure run too.
    """
    noise_scale = exact_scale_at_least(calibration.noise_scale)
    _, leak = calibration_leak(calibration)  # the float threshold's leak, recomputed from (λ, w)
    return secure_threshold_for_leak(probability=leak, noise_scale=noise_scale), noise_scale


def secure_sparse_vector(calibration: Calibration, *, source: RandomSource | None = None) -> SparseVector:
    """The sparse vector a releaser runs in secure mode, within ``calibration``'s certificate.

    :class:`~pate_stab.privacy.mechanisms.sparse_vector.SparseVector` with secure noise at
    :func:`secure_parameters` and a cutoff of ``calibration.num_segments`` failed tests (T for
    hard labels, 2T for soft labels).
    """
    threshold, noise_scale = secure_parameters(calibration)
    return SparseVector(
        threshold=threshold, noise_scale=noise_scale, max_unstable=calibration.num_segments, noise="secure",
        source=source,
    )  # fmt: skip


def noise_summary(svt: SparseVector | OnlineQueryRelease) -> dict[str, Any]:
    """The noise fields of a releaser's summary and ledger spend (secure mode: what it really uses)."""
    if svt.noise == "seeded":
        return {"noise": "seeded", "noise_warning": SEEDED_NOISE_WARNING}
    lam = Fraction(svt.noise_scale)  # secure noise: already an exact rational
    return {"noise": "secure", "threshold": svt.threshold, "noise_scale_exact": f"{lam.numerator}/{lam.denominator}"}


def releaser_noise(
    calibration: Calibration,
    *,
    mechanism: str,
    soft_labels: bool,
    core: Callable[..., Any],
    noise: Any,
    generator: torch.Generator | None,
    source: RandomSource | None,
    ledger: PrivacyLedger | None,
    spend_id: str | None,
    teachers_changed: int = 1,
) -> tuple[str, Any, LedgerRelease]:
    """A releaser's noise mode, sparse vector and ledger spend (both releasers build them so).

    Checks that ``calibration`` is a :class:`Calibration` for the releaser's kind of labels and
    builds the sparse vector ``core`` (:class:`~pate_stab.privacy.mechanisms.sparse_vector.SparseVector` or
    :class:`~pate_stab.privacy.mechanisms.stability.OnlineQueryRelease` around it) with the calibration's
    scale, threshold and cutoff (``num_segments``: T failed tests for hard labels, 2T for soft) and
    its noise source — secure at :func:`secure_parameters`, seeded on ``generator`` at the
    calibration's float (λ, w) — and the ``mechanism``'s
    spend, whose metadata records the noise actually used and the teachers one neighbouring
    data set may change (``teachers_changed``).
    """
    if not isinstance(calibration, Calibration):
        raise TypeError(f"calibration must be a Calibration, got {type(calibration).__name__}")
    if calibration.soft_labels and not soft_labels:
        raise ValueError("this calibration is for the soft-label releaser (soft_labels=True)")
    if soft_labels and not calibration.soft_labels:
        raise ValueError("this calibration is for hard labels; use calibrate(..., soft_labels=True)")
    mode = check_noise_mode(noise, generator)
    if mode == "secure":
        threshold, noise_scale = secure_parameters(calibration)
        svt = core(threshold=threshold, noise_scale=noise_scale, max_unstable=calibration.num_segments,
                   noise="secure", source=source)  # fmt: skip
    else:
        svt = core(threshold=calibration.threshold, noise_scale=calibration.noise_scale,
                   max_unstable=calibration.num_segments, noise="seeded",
                   generator=check_generator(generator))  # fmt: skip
    spend = LedgerRelease(
        ledger=ledger,
        spend_id=spend_id,
        mechanism=mechanism,
        epsilon=calibration.certified_epsilon,
        delta=calibration.certified_delta,
        event=releaser_event(calibration),
        metadata={"calibration": calibration.to_dict(), **noise_summary(svt), "teachers_changed": teachers_changed},
        num_queries=calibration.num_queries,
    )
    return mode, svt, spend


class ReleaserOptions(TypedDict, total=False):
    """The keyword arguments both stability releasers take (see :class:`StabilityReleaser`)."""

    generator: torch.Generator | None
    ledger: PrivacyLedger | None
    spend_id: str | None
    noise: str
    source: RandomSource | None
    teachers_changed: int
    num_teachers: int | None


class SparseVectorReleaser:
    """What both stability releasers share: the noise and ledger set-up, counters and replay.

    A subclass names its ``mechanism``, whether it releases soft labels, the sparse-vector class it
    runs (``core``, in either noise mode), and its counters (:meth:`_counters`); the set-up is
    :func:`releaser_noise` and the spend :class:`~pate_stab.aggregation.base.LedgerRelease`.
    """

    mechanism = "stability"
    soft_labels = False
    core: Callable[..., Any] = OnlineQueryRelease

    def __init__(
        self,
        calibration: Calibration,
        *,
        generator: torch.Generator | None = None,
        ledger: PrivacyLedger | None = None,
        spend_id: str | None = None,
        noise: str = "secure",
        source: RandomSource | None = None,
        teachers_changed: int = 1,
        num_teachers: int | None = None,
    ) -> None:
        self.teachers_changed = check_teachers_changed(teachers_changed)
        self.num_teachers = check_num_teachers(num_teachers)  # k; None: set by the first call
        self.noise, self._svt, self._spend = releaser_noise(
            calibration, mechanism=self.mechanism, soft_labels=self.soft_labels, core=self.core, noise=noise,
            generator=generator, source=source, ledger=ledger, spend_id=spend_id,
            teachers_changed=self.teachers_changed,
        )  # fmt: skip
        self.calibration = calibration
        self._replayed: dict[str, Any] | None = None  # counters of the last replayed call

    def _counters(self) -> dict[str, Any]:
        raise NotImplementedError

    def bind_ledger(self, ledger: PrivacyLedger, *, spend_id: str) -> None:
        """Spend through ``ledger`` under ``spend_id`` (:meth:`LedgerRelease.bind`: before the first call only)."""
        self._spend.bind(ledger, spend_id)

    @property
    def halted(self) -> bool:
        return bool(self._counters()["halted"])

    def _spend_run(
        self,
        inputs: torch.Tensor,
        draw: Callable[[], tuple[ReleaseResult, dict[str, Any]]],
        query_ids: torch.Tensor | None,
    ) -> ReleaseResult:
        """Draw (or replay) one call through the ledger spend; a replayed call's counters are kept."""
        result, state, replayed = self._spend.run(inputs, draw, query_ids=query_ids)
        if replayed:
            self._replayed = state
        return result


class StabilityReleaser(SparseVectorReleaser):
    """BTT18 Alg 4, multi-class, online (:meth:`release_one`) and batch (:meth:`release`).

    Args:
        calibration: from ``calibrate(..., soft_labels=False)`` in either mode.
        generator: randomness (two child generators are spawned from it).
        ledger: optional :class:`PrivacyLedger`; the whole run's certified (ε, δ) is spent, with
            the first call's labels, before those labels are returned.
        spend_id: the ledger id of this run. A releaser built again with a recorded id returns
            the recorded labels call by call and refuses (``ReplayedSpendError``) any call that
            was not recorded: it is never charged twice and never draws twice.
        noise: ``"secure"`` (the default: exact discrete Laplace on the integer distances, random
            bits from the OS's CSPRNG or ``source``; immune to the floating-point attack on
            Laplace noise, Mironov 2012), set up by :func:`secure_sparse_vector` so that the
            calibration's (ε, δ) still holds; ``generator`` is not used) or ``"seeded"`` (float64
            Laplace from ``generator``: reproducible research only, no privacy against anyone who
            knows the seed).
        source: random bits for secure mode (default: the OS).
        teachers_changed: teachers one neighbouring data set may change (1, or 2 for replace-one
            over content-keyed shards; module docstring).
        num_teachers: k, the teachers whose votes every query has: a call whose histogram rows sum
            to another total is refused before anything is spent
            (:func:`~pate_stab.aggregation.base.check_vote_totals`). None: the first call's k, kept.

    Batch and online forms give identical labels for the same generator (seeded noise), however
    the queries are split into calls.
    """

    mechanism = "stability_hard"
    soft_labels = False
    core = OnlineQueryRelease

    def __init__(self, calibration: Calibration, **options: Unpack[ReleaserOptions]) -> None:
        super().__init__(calibration, **options)
        self._oqr = self._svt  # Alg 3 on the distances (seeded or secure); read by the counters

    def _counters(self) -> dict[str, Any]:
        if self._replayed is not None:
            return self._replayed
        return {
            "queries_seen": self._oqr.num_seen,
            "answered": self._oqr.num_passed,
            "abstained": self._oqr.num_failed,
            "halted": self._oqr.halted,
        }

    @property
    def queries_seen(self) -> int:
        return int(self._counters()["queries_seen"])

    def release_one(self, counts: Any) -> int:
        """One query's vote histogram (C,) → its label or −1 (⊥ or halted)."""
        row = check_tensor("counts", counts, ndim=1, floating=False)
        return int(self.release(row.unsqueeze(0)).labels[0])

    def release(self, counts: Any, *, query_ids: torch.Tensor | None = None) -> ReleaseResult:
        """Vote histograms (m, C) → labels (m,) with −1 for ⊥, in query order.

        ``query_ids``: the queries' public positions (e.g. pool indices); the ledger records
        them instead of any digest of the votes (:class:`~pate_stab.aggregation.base.LedgerRelease`).

        Raises:
            BudgetExhaustedError: more queries than the calibration covers; nothing released.
            ReplayedSpendError: the spend id is recorded but this call is not; nothing released.
            ValueError / TypeError: bad histograms (negative, non-integer, wrong rank, rows that do
                not sum to the releaser's k); nothing spent.
        """
        counts = check_tensor("counts", counts, ndim=2, floating=False, nonempty=False)
        if counts.shape[1] < 2:
            raise ValueError(f"counts must have at least 2 classes, got shape {tuple(counts.shape)}")
        if bool((counts < 0).any()):
            raise ValueError("counts must be non-negative")
        m = counts.shape[0]
        if m == 0:
            raise ValueError("counts is empty (shape (0, C)): no query to release; nothing was spent")
        counts = counts.to(torch.int64)
        self.num_teachers = check_vote_totals(counts.sum(dim=1), self.num_teachers)
        if self.halted:  # nothing is tested after the cutoff: no noise, nothing to record
            self._spend.skip(m)
            return ReleaseResult(torch.full((m,), ABSTAIN, dtype=torch.int64), torch.full((m,), -1, dtype=torch.int8))

        def draw() -> tuple[ReleaseResult, dict[str, Any]]:
            dist = distance_to_instability(counts, group_size=self.teachers_changed)  # (m,) int64, both modes
            labels, status = self._oqr.release(top_label(counts), dist)
            return ReleaseResult(labels, status), self._counters()

        return self._spend_run(counts, draw, query_ids)

    def summary(self) -> dict[str, Any]:
        """Counters and the certified privacy, as plain values."""
        counters = self._counters()
        return {
            "mechanism": self.mechanism,
            **calibration_summary(self.calibration),
            **self._spend.metadata_noise(),  # secure mode: the integer threshold and exact λ actually used
            "teachers_changed": self.teachers_changed,
            "queries_seen": int(counters["queries_seen"]),
            "answered": int(counters["answered"]),
            "abstained": int(counters["abstained"]),
            "halted": bool(counters["halted"]),
            "calibration_detail": self.calibration.to_dict(),
            "replayed_calls": self._spend.replayed_calls,
            "spend_id": self._spend.spend_id if self._spend.ledger is not None else None,
        }
