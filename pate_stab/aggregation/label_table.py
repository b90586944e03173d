"""Every aggregator on the same votes at the same certified (ε, δ): one table.

The stability releaser (hard labels, paper and tight calibration) and PATE's LNMax, GNMax and
Confident-GNMax are each calibrated to the target (ε, δ) for the same number of queries with
data-independent accounting, run on the same vote histograms, and scored against the true
labels of the public queries. The true labels are used for evaluation only: no mechanism sees
them. Each run draws exact noise from the OS (``noise="secure"``, the default) or, for
reproducible research, from its own child generator (``noise="seeded"``: the table then says that
its rows carry no privacy against anyone who knows the seed).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import torch

from pate_stab._checks import check_delta, check_epsilon, check_generator, check_int, check_tensor
from pate_stab.aggregation.base import ABSTAIN
from pate_stab.aggregation.registry import AggregatorSettings, aggregator_spec, make_releaser
from pate_stab.aggregation.votes import vote_histogram
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.noise.secure import SEEDED_NOISE_WARNING, check_noise
from pate_stab.rng import spawn_generators

__all__ = ["AggregatorRow", "compare_aggregators", "TABLE_AGGREGATORS", "format_table"]

TABLE_AGGREGATORS = ("stability-paper", "stability-tight", "lnmax", "gnmax", "confident-gnmax")
"""The default rows: every aggregator that takes vote histograms, both stability calibrations."""


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
    noise: str = "secure"

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


def compare_aggregators(
    predictions: Any,
    true_labels: Any,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    max_unstable: int,
    generator: torch.Generator | None = None,
    aggregators: Sequence[str] = TABLE_AGGREGATORS,
    confident_threshold: float | None = None,
    ledger: PrivacyLedger | None = None,
    run_id: str = "compare",
    noise: str = "secure",
) -> list[AggregatorRow]:
    """Run the aggregators on the same teacher votes and return one row each.

    Args:
        predictions: (k, m) teacher class predictions on the public queries.
        true_labels: (m,) true labels of the queries (evaluation only).
        num_classes: C.
        epsilon, delta: the target each aggregator is calibrated to for m queries.
        max_unstable: T for the stability releaser.
        generator: seeded noise only (required then): one child generator per aggregator.
        aggregators: which to run (registry names taking vote histograms; see
            :data:`~pate_stab.aggregation.registry.AGGREGATORS`).
        confident_threshold: Confident-GNMax's threshold on the max count (default 0.6·k).
        ledger: optional; every aggregator's spend is recorded there with its labels before they
            are used (each run is a separate release of the same votes, so they compose). A
            second call on the same ledger and ``run_id`` replays the recorded labels (same
            rows, nothing spent or drawn again), whatever ``generator``.
        run_id: prefix of the ledger spend ids.
        noise: ``"secure"`` (default) or ``"seeded"`` (reproducible research only).

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
    mode = check_noise(noise)
    if mode == "seeded" or generator is not None:
        check_generator(generator)
    for name in aggregators:
        if aggregator_spec(name).votes != "histogram":
            raise ValueError(f"{name} does not take vote histograms; choose from {TABLE_AGGREGATORS}")
    k, m = preds.shape
    counts = vote_histogram(preds, num_classes)
    gens: list[torch.Generator | None] = (
        list(spawn_generators(generator, len(aggregators))) if generator is not None else [None] * len(aggregators)
    )
    rows: list[AggregatorRow] = []
    settings = AggregatorSettings(
        epsilon=eps,
        delta=d,
        num_queries=m,
        num_teachers=k,
        max_unstable=t,
        confident_fraction=0.6 if confident_threshold is None else float(confident_threshold) / k,
        noise=mode,
    )
    for name, gen in zip(aggregators, gens, strict=True):
        rel = make_releaser(name, settings, generator=gen, ledger=ledger, spend_id=f"{run_id}-{name}")
        labels = rel.release(counts).labels
        s = rel.summary()
        calibration = s.get("calibration", "data-independent")
        row = _row(name, calibration, s["epsilon"], s["delta"], labels, rel.queries_seen, truth)
        rows.append(replace(row, noise=s.get("noise", "seeded")))
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
    if any(r.noise == "seeded" for r in rows):
        lines.append(f"WARNING: {SEEDED_NOISE_WARNING}")
    return "\n".join(lines)
