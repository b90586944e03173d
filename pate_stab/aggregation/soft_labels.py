"""The soft-label stability releaser: BTT18 Alg 6/7/8 for binary scores in [0, 1].

For each query the k teachers' scores form a γ-histogram (Def 5.1/5.2). Test 1: the noisy
distance to instability of that histogram against the noisy threshold; on a pass the midpoint
(2v−1)γ/2 of the top bin is released. On a failure the segment ends (fresh threshold) and
test 2 runs on the ½-shifted histogram; on a pass its bin value vγ is released, otherwise ⊥
(NaN). Every failed test ends a sparse-vector segment, so the counter rises by one per failed
test and the releaser halts after 2T failed tests (Alg 6's c += 2 for a ⊥ and c += 1 for a
rescue by the shifted histogram count exactly these). Calibrate with
``calibrate(..., soft_labels=True)``: 2T segments, 2m tests in the leak's union bound, and the
exact-leak threshold (Alg 6's w = λ log(4m/δ) misses the bound: DESIGN fact 3).

Distances use the sensitivity-1 definition of DESIGN fact 2 on both histograms.

Noise. ``noise="secure"`` (the default) runs the tests as exact integer comparisons with discrete
Laplace noise from the OS's CSPRNG (:func:`~pate_stab.aggregation.releaser.secure_sparse_vector`,
shared with the hard-label releaser): the distances of both histograms are integers, the
cutoff is the same 2T failed tests, and the integer threshold keeps each of the 2m tests'
leak within the calibration's ``leak_per_test``, so the certified (ε, δ) is unchanged.
``noise="seeded"`` draws float64 Laplace noise from the generator: reproducible research only, no
privacy against anyone who knows the seed.

Multi-class soft labels are not supported by this releaser: scores must be one probability per
teacher and query (shape (k, m)). For C classes, release each class's score as its own query
sequence with its own releaser and calibration; the runs compose (record each in the ledger).
"""

from __future__ import annotations

from typing import Any, Unpack

import torch

from pate_stab._checks import check_tensor
from pate_stab.aggregation.base import check_vote_totals
from pate_stab.aggregation.releaser import (
    ReleaseResult,
    ReleaserOptions,
    SparseVectorReleaser,
    calibration_summary,
)
from pate_stab.aggregation.votes import (
    bin_midpoints,
    distance_to_instability,
    gamma_histogram,
    shifted_bin_values,
    shifted_gamma_histogram,
    top_label,
)
from pate_stab.privacy.mechanisms.calibration import Calibration
from pate_stab.privacy.mechanisms.sparse_vector import NOT_PROCESSED, PASSED, SparseVector

__all__ = ["SoftLabelReleaser", "PLAIN", "SHIFTED", "BOTTOM"]

# status codes of a soft-label release
PLAIN, SHIFTED, BOTTOM = 1, 2, 0


class SoftLabelReleaser(SparseVectorReleaser):
    """BTT18 Alg 6 with Alg 8 as the per-query classifier, online and batch.

    Args:
        calibration: from ``calibrate(..., soft_labels=True)``.
        gamma: the discretisation γ, with 1/γ an integer (Def 5.1).
        generator: randomness for ``noise="seeded"`` (not used in secure mode).
        ledger, spend_id, noise, source: as for
            :class:`~pate_stab.aggregation.releaser.StabilityReleaser`.
        num_teachers: k, the rows of every call's scores (k, m): a call with another number of
            teachers' scores is refused before anything is spent. None: the first call's k, kept.

    :meth:`release` returns a :class:`ReleaseResult` whose ``labels`` are float64 scores (NaN for
    ⊥ and after halting) and whose ``status`` is 1 (plain histogram), 2 (½-shifted), 0 (⊥) or
    −1 (not processed).
    """

    mechanism = "stability_soft"
    soft_labels = True
    core = SparseVector

    def __init__(self, calibration: Calibration, *, gamma: float, **options: Unpack[ReleaserOptions]) -> None:
        super().__init__(calibration, **options)
        self.plain_values = bin_midpoints(gamma)  # validates γ
        self.shifted_values = shifted_bin_values(gamma)
        self.gamma = float(gamma)
        self.answered_plain = 0
        self.answered_shifted = 0
        self.abstained = 0

    def _counters(self) -> dict[str, Any]:
        if self._replayed is not None:
            return self._replayed
        return {
            "queries_seen": self._spend.queries_offered,
            "failed_tests": self._svt.num_failed,
            "answered_plain": self.answered_plain,
            "answered_shifted": self.answered_shifted,
            "abstained": self.abstained,
            "halted": self._svt.halted,
        }

    def release_one(self, scores: Any) -> float:
        """One query's teacher scores (k,) → released score or NaN."""
        col = check_tensor("scores", scores, ndim=1, floating=True)
        return float(self.release(col.unsqueeze(1)).labels[0])

    def release(self, scores: Any, *, query_ids: torch.Tensor | None = None) -> ReleaseResult:
        """Teacher scores (k, m) in [0, 1] → released scores (m,), in query order.

        Raises:
            BudgetExhaustedError: more queries than the calibration covers; nothing released.
            ValueError: NaN or out-of-range scores, bad shapes, 1/γ not an integer, another number
                of teachers (rows) than the releaser's k; nothing spent.
        """
        if isinstance(scores, torch.Tensor) and scores.dim() == 3:
            raise ValueError(
                "the soft-label releaser takes binary scores of shape (k, m); for C classes release each "
                "class's scores (k, m) as its own query sequence with its own releaser and calibration"
            )
        plain_hist = gamma_histogram(scores, self.gamma)  # (m, 1/γ); validates scores
        shifted_hist = shifted_gamma_histogram(scores, self.gamma)  # (m, 1/γ − 1)
        m = plain_hist.shape[0]
        # each query's γ-histogram counts its k scores: k must be the releaser's
        self.num_teachers = check_vote_totals(plain_hist.sum(dim=1), self.num_teachers, what="scores (k × m)")
        if self.halted:  # nothing is tested after the cutoff: no noise, nothing to record
            self._spend.skip(m)
            if self._replayed is not None:
                self._replayed = {**self._replayed, "queries_seen": self._spend.queries_offered}
            return ReleaseResult(
                torch.full((m,), float("nan"), dtype=torch.float64), torch.full((m,), NOT_PROCESSED, dtype=torch.int8)
            )
        g = self.teachers_changed
        plain_dist = distance_to_instability(plain_hist, group_size=g)  # (m,) int64, exact in both noise modes
        shifted_dist = distance_to_instability(shifted_hist, group_size=g)
        plain_out = self.plain_values[top_label(plain_hist)]
        shifted_out = self.shifted_values[top_label(shifted_hist)]

        def draw() -> tuple[ReleaseResult, dict[str, Any]]:
            out = torch.full((m,), float("nan"), dtype=torch.float64)
            status = torch.full((m,), NOT_PROCESSED, dtype=torch.int8)
            pos = 0
            while pos < m and not self._svt.halted:
                codes = self._svt.process_many(plain_dist[pos:], stop_after_failures=1)
                passed = int((codes == PASSED).sum())
                out[pos : pos + passed] = plain_out[pos : pos + passed]
                status[pos : pos + passed] = PLAIN
                self.answered_plain += passed
                j = pos + passed
                if j >= m or int(codes[passed]) == NOT_PROCESSED:
                    break
                # test 1 failed for query j: fresh threshold (drawn by the sparse vector), test 2
                if self._svt.halted:
                    status[j] = BOTTOM
                    self.abstained += 1
                    break
                if self._svt.process(int(shifted_dist[j])):
                    out[j] = shifted_out[j]
                    status[j] = SHIFTED
                    self.answered_shifted += 1
                else:
                    status[j] = BOTTOM
                    self.abstained += 1
                pos = j + 1
            return ReleaseResult(out, status), {**self._counters(), "queries_seen": self._spend.queries_offered + m}

        # the released scores depend on the teachers' scores only through the two histograms
        inputs = torch.cat([plain_hist, shifted_hist], dim=1)
        return self._spend_run(inputs, draw, query_ids)

    @property
    def queries_seen(self) -> int:
        """The queries processed: answered on either histogram, or ⊥ (those offered after halting are not)."""
        counters = self._counters()
        return int(counters["answered_plain"]) + int(counters["answered_shifted"]) + int(counters["abstained"])

    def summary(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "gamma": self.gamma,
            **calibration_summary(self.calibration),
            **self._spend.metadata_noise(),  # secure mode: the integer threshold and exact λ actually used
            "teachers_changed": self.teachers_changed,
            **{k: v for k, v in self._counters().items() if k != "queries_seen"},
            "answered": int(self._counters()["answered_plain"]) + int(self._counters()["answered_shifted"]),
            "queries_seen": self.queries_seen,
            "calibration_detail": self.calibration.to_dict(),
            "replayed_calls": self._spend.replayed_calls,
            "spend_id": self._spend.spend_id if self._spend.ledger is not None else None,
        }
