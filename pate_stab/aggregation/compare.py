"""Every aggregator on the same votes at the same certified (ε, δ): one table.

The stability releaser (hard labels, paper and tight calibration) and PATE's LNMax, GNMax and
Confident-GNMax are each calibrated to the target (ε, δ) for the same number of queries with
data-independent accounting, run on the same vote histograms, and scored against the true
labels of the public queries. The true labels are used for evaluation only: no mechanism sees
them. Each run draws its noise from its own child generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import torch

from pate_stab._validation import check_delta, check_epsilon, check_generator, check_int, check_tensor
from pate_stab.aggregation.baselines import BaselineReleaser, ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.releaser import ABSTAIN, StabilityReleaser
from pate_stab.aggregation.votes import vote_histogram
from pate_stab.privacy.calibration import Calibration, calibrate
from pate_stab.privacy.ledger import PrivacyLedger
from pate_stab.rng import spawn_generators

__all__ = ["AggregatorRow", "compare_aggregators", "make_aggregator", "AGGREGATORS", "format_table"]

AGGREGATORS = ("stability-paper", "stability-tight", "lnmax", "gnmax", "confident-gnmax")


@dataclass(frozen=True)
class AggregatorRow:
    """One line of the comparison table."""

    mechanism: str
    calibration: str
    epsilon: float
    delta: float
    queries_seen: int
    answered: int
    label_accuracy_answered: float
    label_accuracy_overall: float

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _row(name: str, calibration: str, eps: float, delta: float, labels: torch.Tensor, seen: int, truth: torch.Tensor):
    answered_mask = labels != ABSTAIN
    answered = int(answered_mask.sum())
    correct = int((labels[answered_mask] == truth[answered_mask]).sum())
    m = truth.numel()
    return AggregatorRow(
        mechanism=name,
        calibration=calibration,
        epsilon=float(eps),
        delta=float(delta),
        queries_seen=seen,
        answered=answered,
        label_accuracy_answered=correct / answered if answered else float("nan"),
        label_accuracy_overall=correct / m,
    )


def make_aggregator(
    name: str,
    *,
    epsilon: float,
    delta: float,
    num_queries: int,
    num_teachers: int,
    max_unstable: int,
    mode: str = "tight",
    soft_labels: bool = False,
    confident_threshold: float | None = None,
    sigma_ratio: float = 2.0,
    teachers_changed: int = 1,
) -> Calibration | LNMax | GNMax | ConfidentGNMax:
    """An aggregator calibrated to (ε, δ) for ``num_queries`` queries.

    ``name`` is one of "stability" (calibration ``mode``), "stability-paper",
    "stability-tight", "stability-soft" (soft labels, calibration ``mode``), "lnmax", "gnmax",
    "confident-gnmax". For the stability releasers the :class:`Calibration` is returned (build
    the releaser from it); the baselines come back ready to ``release``. Confident-GNMax's
    threshold on the max count defaults to 0.6·k. ``teachers_changed`` = 2 calibrates the
    baselines for two changed teachers (doubled sensitivity); the stability releasers take it
    at construction instead (their calibration does not change).
    """
    if name.startswith("stability"):
        suffix = name.partition("-")[2]
        if suffix in ("paper", "tight"):
            mode = suffix
        elif suffix == "soft":
            soft_labels = True
        elif suffix:
            raise ValueError(f"unknown aggregator {name!r}")
        return calibrate(
            epsilon=epsilon,
            delta=delta,
            num_queries=num_queries,
            max_unstable=max_unstable,
            mode=mode,  # type: ignore[arg-type]
            soft_labels=soft_labels,
        )
    if name == "lnmax":
        return LNMax.calibrate(
            epsilon=epsilon, delta=delta, num_queries=num_queries, teachers_changed=teachers_changed
        )
    if name == "gnmax":
        return GNMax.calibrate(
            epsilon=epsilon, delta=delta, num_queries=num_queries, teachers_changed=teachers_changed
        )
    if name == "confident-gnmax":
        thr = 0.6 * num_teachers if confident_threshold is None else float(confident_threshold)
        return ConfidentGNMax.calibrate(
            epsilon=epsilon,
            delta=delta,
            num_queries=num_queries,
            threshold=thr,
            sigma_ratio=sigma_ratio,
            teachers_changed=teachers_changed,
        )
    raise ValueError(f"unknown aggregator {name!r}")


def compare_aggregators(
    predictions: Any,
    true_labels: Any,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    max_unstable: int,
    generator: torch.Generator,
    aggregators: Sequence[str] = AGGREGATORS,
    confident_threshold: float | None = None,
    ledger: PrivacyLedger | None = None,
    run_id: str = "compare",
) -> list[AggregatorRow]:
    """Run the aggregators on the same teacher votes and return one row each.

    Args:
        predictions: (k, m) teacher class predictions on the public queries.
        true_labels: (m,) true labels of the queries (evaluation only).
        num_classes: C.
        epsilon, delta: the target each aggregator is calibrated to for m queries.
        max_unstable: T for the stability releaser.
        generator: randomness; one child generator per aggregator.
        aggregators: which to run (names in :data:`AGGREGATORS`).
        confident_threshold: Confident-GNMax's threshold on the max count (default 0.6·k).
        ledger: optional; every aggregator's spend is recorded there with its labels before they
            are used (each run is a separate release of the same votes, so they compose). A
            second call on the same ledger and ``run_id`` replays the recorded labels (same
            rows, nothing spent or drawn again), whatever ``generator``.
        run_id: prefix of the ledger spend ids.

    Returns:
        A list of :class:`AggregatorRow`, in the order of ``aggregators``.
    """
    preds = check_tensor("predictions", predictions, ndim=2, floating=False)
    truth = check_tensor("true_labels", true_labels, ndim=1, floating=False).to(torch.int64)
    if preds.shape[1] != truth.numel():
        raise ValueError(f"predictions cover {preds.shape[1]} queries but true_labels has {truth.numel()}")
    num_classes = check_int("num_classes", num_classes, minimum=2)
    eps = check_epsilon(epsilon)
    d = check_delta(delta)
    t = check_int("max_unstable", max_unstable, minimum=1)
    check_generator(generator)
    unknown = [a for a in aggregators if a not in AGGREGATORS]
    if unknown:
        raise ValueError(f"unknown aggregators {unknown}; choose from {AGGREGATORS}")
    k, m = preds.shape
    counts = vote_histogram(preds, num_classes)
    gens = spawn_generators(generator, len(aggregators))
    rows = []
    for name, gen in zip(aggregators, gens, strict=True):
        spend_id = f"{run_id}-{name}"
        agg = make_aggregator(
            name,
            epsilon=eps,
            delta=d,
            num_queries=m,
            num_teachers=k,
            max_unstable=t,
            confident_threshold=confident_threshold,
        )
        if isinstance(agg, Calibration):
            rel = StabilityReleaser(agg, generator=gen, ledger=ledger, spend_id=spend_id)
            labels = rel.release(counts).labels
            rows.append(
                _row(name, agg.mode, agg.certified_epsilon, agg.certified_delta, labels, rel.queries_seen, truth)
            )
            continue
        labels = BaselineReleaser(agg, generator=gen, ledger=ledger, spend_id=spend_id).release(counts).labels
        rows.append(_row(name, "data-independent", agg.certified_epsilon, agg.certified_delta, labels, m, truth))
    return rows


def format_table(rows: Sequence[AggregatorRow]) -> str:
    """A fixed-width text table of the rows."""
    head = (
        f"{'mechanism':<17}{'calib.':<17}{'ε':>7}{'δ':>10}{'seen':>8}{'answered':>10}{'acc(ans)':>10}{'acc(all)':>10}"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        lines.append(
            f"{r.mechanism:<17}{r.calibration:<17}{r.epsilon:>7.3f}{r.delta:>10.2e}{r.queries_seen:>8}"
            f"{r.answered:>10}{r.label_accuracy_answered:>10.4f}{r.label_accuracy_overall:>10.4f}"
        )
    return "\n".join(lines)
