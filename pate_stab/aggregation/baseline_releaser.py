"""A PATE aggregator with its generator and its one ledger spend: the registry's surface for the baselines."""

from __future__ import annotations

from typing import Any

import torch

from pate_stab._checks import check_generator
from pate_stab.aggregation.base import ABSTAIN, LedgerRelease, ReleaseResult, check_num_teachers, check_vote_totals
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.pate_accounting import check_vote_counts
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger

__all__ = ["BaselineReleaser"]


class BaselineReleaser:
    """A PATE aggregator with its noise generator and its one ledger spend.

    The same surface as the stability releasers (``release`` → :class:`ReleaseResult`,
    ``halted``, ``queries_seen``, ``summary``), and the same spend rules
    (:class:`~pate_stab.aggregation.base.LedgerRelease`): the aggregator's data-independent
    (ε, δ) for ``num_queries`` queries is spent, with its event (the per-query event composed
    ``num_queries`` times, :meth:`~pate_stab.aggregation.pate_aggregator.PateAggregator.event`),
    with the first call's labels in one durable ledger line; later calls' labels are recorded before
    they leave; a releaser built again
    under a recorded spend id replays the recorded labels and never draws again.

    Args:
        aggregator: a calibrated :class:`LNMax`, :class:`GNMax` or :class:`ConfidentGNMax`; its
            ``noise`` says where the noise comes from (secure: its own exact samplers and source).
        generator: the seeded noise (float64, never reused); required with ``noise="seeded"``,
            not used with secure noise.
        ledger: optional :class:`~pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger`.
        spend_id: the release's ledger id (None: a fresh one).
        num_teachers: k, the teachers whose votes every query has (Confident-GNMax's threshold is
            set for it): a call whose histogram rows sum to another total is refused before
            anything is spent (:func:`~pate_stab.aggregation.base.check_vote_totals`). None: the
            first call's k, kept.
    """

    def __init__(
        self,
        aggregator: LNMax | GNMax | ConfidentGNMax,
        *,
        generator: torch.Generator | None = None,
        ledger: PrivacyLedger | None = None,
        spend_id: str | None = None,
        num_teachers: int | None = None,
    ) -> None:
        if not isinstance(aggregator, LNMax | GNMax | ConfidentGNMax):
            raise TypeError(f"aggregator must be LNMax, GNMax or ConfidentGNMax, got {type(aggregator).__name__}")
        self.aggregator = aggregator
        self.num_teachers = check_num_teachers(num_teachers)  # k; None: set by the first call
        self.mechanism = aggregator.name
        self.noise = aggregator.noise
        if self.noise == "seeded":
            self._generator: torch.Generator | None = check_generator(generator)
        else:
            self._generator = None
        counters = ("queries_seen", "answered", "abstained")
        self._spend = LedgerRelease(
            ledger=ledger,
            spend_id=spend_id,
            mechanism=aggregator.name,
            epsilon=aggregator.certified_epsilon,
            delta=aggregator.certified_delta,
            event=aggregator.event(),  # what the run does; the ledger checks it implies (ε, δ)
            metadata={k: v for k, v in aggregator.summary().items() if k not in counters},
            num_queries=aggregator.num_queries,
        )

    def bind_ledger(self, ledger: PrivacyLedger, *, spend_id: str) -> None:
        """Spend through ``ledger`` under ``spend_id`` (:meth:`LedgerRelease.bind`: before the first call only)."""
        self._spend.bind(ledger, spend_id)

    @property
    def halted(self) -> bool:
        """PATE's aggregators answer every query they are certified for: never halted."""
        return False

    @property
    def queries_seen(self) -> int:
        return self.aggregator.queries_seen

    def release(self, counts: Any, *, query_ids: torch.Tensor | None = None) -> ReleaseResult:
        """Vote histograms (m, C) → labels (m,), −1 for ⊥ (Confident-GNMax); status 1 answered, 0 ⊥.

        Raises:
            ValueError / TypeError: bad histograms (negative, non-integer, wrong rank, rows that do
                not sum to the releaser's k); nothing spent or drawn.
            BudgetExhaustedError / ReplayedSpendError: as :meth:`LedgerRelease.run`.
        """
        check_vote_counts(counts)
        counts = torch.as_tensor(counts).to(torch.int64)
        self.num_teachers = check_vote_totals(counts.sum(dim=1), self.num_teachers)
        agg = self.aggregator

        def draw() -> tuple[ReleaseResult, dict[str, Any]]:
            labels = agg.release(counts, generator=self._generator)
            status = (labels != ABSTAIN).to(torch.int8)
            return ReleaseResult(labels, status), {"queries_seen": agg.queries_seen, "answered": agg.answered}

        result, state, replayed = self._spend.run(counts, draw, query_ids=query_ids)
        if replayed:
            agg.queries_seen, agg.answered = int(state["queries_seen"]), int(state["answered"])
        return result

    def summary(self) -> dict[str, Any]:
        return {
            **self.aggregator.summary(),
            "halted": False,
            "replayed_calls": self._spend.replayed_calls,
            "spend_id": self._spend.spend_id if self._spend.ledger is not None else None,
        }
