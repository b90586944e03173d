"""Stage 3 of the main job: one aggregator releases labels for the run's queries.

:func:`release_labels` builds the aggregator from the registry
(:func:`~pate_stab.aggregation.registry.make_releaser`), chooses the queries by
``config.query_selection`` (:func:`~pate_stab.selection.adaptive_batches.release_in_adaptive_batches`: one aggregator
instance, one calibrated spend for ``num_queries`` queries, however many rounds), and records the
result. The teachers' votes on a pool point are computed (``prep.votes``) only inside the release
call that hands the point to the aggregator, so selection never sees the votes of a point it has
not had released. The selectors are the release stage's: ``"spread"`` is
:class:`~pate_stab.selection.spread.SpreadSelector` on the run's pool graph (:func:`spread_selector`; the
same object ``release --votes`` selects through), ``"student-confidence"`` the student's architecture
fitted on the answered queries (:func:`selector_confidence`, from :mod:`pate_stab.run.student_base`).
This module does not import the student stage (:mod:`pate_stab.run.student`).

Replay. The spend id is ``<run>:<aggregator>:eps=<repr(ε)>`` (exact: two different ε never share
one; ledgers written with ``eps=<ε:g>`` still replay where that form is exact). The aggregator records each call's
outputs with its spend before they leave; the whole release — labels, the queried pool positions
and the rounds — is then stored with ``record_result``. A rerun returns the stored release; a
rerun after a crash before ``record_result`` replays the recorded calls (same selection, no
fresh noise) and a call that was never recorded is refused (``ReplayedSpendError``).

Finishing an interrupted release (``finish_from_ledger``). A crash (SIGKILL, power loss) in the
middle of a release leaves its spend and the outputs of the calls made so far in the ledger, and
no result; a plain rerun replays those calls and is refused at the first unrecorded one. With
``finish_from_ledger`` the rerun replays the recorded calls (the same selection, checked call by
call against the recorded query positions) and stops where the record stops: the remainder of the
``num_queries`` queries is not asked, no noise is drawn and nothing is written to the ledger (its
bytes stay as they are). The release is marked partial (:attr:`Release.partial`). Its outputs are
the ones the paid release had already produced — an online mechanism stopped early by its caller,
which the releasers' analyses cover (an interactive mechanism's guarantee holds for a caller that
stops at any point) — so they keep that spend's (ε, δ); the student trained on them and the report
are post-processing. The partial marker and the number of recorded calls are read from the ledger,
which is published already.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor
from tqdm import tqdm

from pate_stab.aggregation.data_dependent import THEIRS_KEY, data_dependent_figures, theirs_figure
from pate_stab.aggregation.registry import aggregator_spec, make_releaser
from pate_stab.errors import ReplayedSpendError
from pate_stab.privacy.ledger.privacy_ledger import LedgerEntry, PrivacyLedger
from pate_stab.run.config import TransferConfig
from pate_stab.run.prepare import Prepared, neighbour_index, pool_graph
from pate_stab.run.progress import accelerator_device
from pate_stab.run.student_base import student_config, student_spec, student_targets
from pate_stab.selection.adaptive_batches import (
    SELECTION_PRIVACY,
    ConfidenceFn,
    SelectionResult,
    answered_mask,
    release_in_adaptive_batches,
)
from pate_stab.selection.spread import SpreadSelector, SpreadSettings
from pate_stab.student import train_student

if TYPE_CHECKING:
    from pate_stab.teachers import PoolVotes

STEERED = "steered"
"""The selection of a later round of a release in rounds (:mod:`pate_stab.run.rounds`)."""

__all__ = [
    "SELECTOR_MIN_STEPS",
    "STEERED",
    "Release",
    "label_accuracy",
    "recorded_spend_id",
    "release_data_dependent",
    "release_device",
    "release_labels",
    "release_spend_id",
    "selection_report",
    "selector_confidence",
    "spread_selector",
]

SELECTOR_MIN_STEPS = 300  # optimiser steps of the student-confidence selector, at least


@dataclass
class Release:
    """One aggregator's output on its queries: labels (int64, −1 ⊥) or scores (float, NaN ⊥).

    ``index`` holds the queries' positions in the public pool, in release order (``labels[i]``
    belongs to pool point ``index[i]``); ``selection`` says how they were chosen.
    """

    aggregator: str
    labels: Tensor
    soft: bool
    summary: dict[str, Any]
    spend_id: str
    reused: bool
    index: Tensor
    selection: dict[str, Any]
    partial: dict[str, Any] | None = None  # finish_from_ledger: the interrupted release (module docstring)


PARTIAL_RELEASE_NOTE = (
    "This release was finished from the labels its interrupted run had recorded, so the remaining queries were not "
    "asked, nothing was spent or drawn again, and the certified (ε, δ) is that of the whole recorded spend "
    "(README: Run the main job)."
)
"""The note of a release finished from the ledger (``partial_release``; ``finish_from_ledger``)."""
FINISH_HINT = (
    "To finish the run from the outputs recorded so far without spending or drawing noise, rerun with "
    "--finish-from-ledger (finish_from_ledger: true): the unrecorded queries are then not asked and the report "
    "marks the release partial"
)


def _replay(
    prep: Prepared, aggregator: str, soft: bool, spend_id: str, payload: dict[str, Any], strategy: str | None = None
) -> Release:
    """The release recorded with ``spend_id``: labels, summary and which pool points they label
    (``strategy``: the selection it must have been made with; default the run's ``query_selection``)."""
    if soft:
        labels = torch.tensor([math.nan if v is None else v for v in payload["labels"]], dtype=torch.float64)
    else:
        labels = torch.tensor(payload["labels"], dtype=torch.int64)
    # a release recorded before query selection existed queried the pool in order
    selection = payload.get("selection", {"strategy": "first"})
    strategy = prep.config.selection.query_selection if strategy is None else strategy
    if selection["strategy"] != strategy:
        raise ValueError(f"{spend_id} was released with query_selection={selection['strategy']!r}, not {strategy!r}")
    # a summary without a noise field was released when PATE's aggregators always drew seeded noise
    noise = payload["summary"].get("noise", "seeded")
    if noise != prep.config.release.releaser_noise:
        raise ValueError(
            f"{spend_id} was released with releaser_noise={noise!r}, not {prep.config.release.releaser_noise!r}: its "
            "labels carry that mode's guarantee (set releaser_noise to it, or start a new run)"
        )
    index = torch.tensor(selection["index"], dtype=torch.int64) if "index" in selection else torch.arange(len(labels))
    return Release(aggregator, labels, soft, payload["summary"], spend_id, True, index, selection)


def release_spend_id(run_name: str, aggregator: str, epsilon: float, repeat: int = 0) -> str:
    """The ledger spend id of a run's release: ``<run>:<aggregator>:eps=<repr(ε)>[:rep=<repeat>]``.

    ``repr`` of a float is its shortest exact decimal form, so two different ε never share a
    spend id (``:g`` kept six digits: 1.0000001 and 1.0000002 replayed one release).
    """
    eps = float(epsilon)
    if not math.isfinite(eps) or eps <= 0:
        raise ValueError(f"epsilon must be a positive finite number, got {epsilon!r}")
    return f"{run_name}:{aggregator}:eps={eps!r}" + (f":rep={repeat}" if repeat else "")


def recorded_spend_id(ledger: PrivacyLedger, run_name: str, aggregator: str, epsilon: float, repeat: int = 0) -> str:
    """The spend id under which ``ledger`` holds this release: :func:`release_spend_id`, or the
    ``eps=<ε:g>`` form of older ledgers where that form is exact (it parses back to ``epsilon``)."""
    spend_id = release_spend_id(run_name, aggregator, epsilon, repeat)
    legacy = f"{run_name}:{aggregator}:eps={float(epsilon):g}" + (f":rep={repeat}" if repeat else "")
    if ledger.entry(spend_id) is None and float(f"{float(epsilon):g}") == float(epsilon) and ledger.entry(legacy):
        return legacy
    return spend_id


def release_labels(
    prep: Prepared,
    ledger: PrivacyLedger,
    *,
    aggregator: str,
    epsilon: float,
    generator: torch.Generator,
    selection_generator: torch.Generator | None = None,
    repeat: int = 0,
    delta: float | None = None,
    spend_id: str | None = None,
    steered: Callable[[], Tensor] | None = None,
    finishable: bool = False,
) -> Release:
    """Run one aggregator on the run's queries, spending through ``ledger`` (or replay its record).

    Args:
        prep: the prepared run (task, teachers, votes on demand).
        ledger: the run's ledger.
        aggregator: a registry name offered by runs (:data:`~pate_stab.run.config.RUN_AGGREGATORS`).
        epsilon: the release's target ε (δ, m, T and the rest from the run's config).
        generator: the aggregator's noise (the stability releasers ignore it in secure mode).
        selection_generator: randomness of the selection (k-means start, selector training);
            required unless ``query_selection == "first"``.
        repeat: which repetition of this (aggregator, ε) release (a separate spend; its spend id
            ends in ``:rep=<repeat>`` from the second on).
        delta: the release's δ (default the run's); a round of a release in rounds spends a share.
        spend_id: the ledger spend id (default :func:`recorded_spend_id`); each round has its own.
        steered: a later round of a release in rounds (:mod:`pate_stab.run.rounds`): returns the
            pool positions to offer, in order, computed from public data and earlier releases
            only; called only when the round is not replayed. The first ``num_queries`` of them
            are offered in one batch (selection ``"steered"``).
        finishable: the caller can finish an interrupted release (``finish_from_ledger``, a
            transfer): a rerun refused at an unrecorded call then says how.
    """
    config = prep.config
    spec = aggregator_spec(aggregator)
    if spec.binary_only and prep.task.num_classes != 2:
        raise ValueError(f"{aggregator} needs a binary task")
    if spend_id is None:
        spend_id = recorded_spend_id(ledger, config.run_name, aggregator, epsilon, repeat)
    strategy = STEERED if steered is not None else config.selection.query_selection
    recorded = ledger.entry(spend_id)
    if recorded is not None and recorded.has_result:
        return _replay(prep, aggregator, spec.soft, spend_id, recorded.result, strategy)
    finish_calls = _finish_calls(config, recorded, spend_id, steered)
    if steered is None and config.selection.query_selection != "first" and selection_generator is None:
        raise TypeError(f"query_selection={config.selection.query_selection!r} needs a selection_generator")

    order = steered() if steered is not None else None  # public data and earlier releases only
    queries = spec.votes == "queries"  # neighbour votes: the aggregator reads the queries' public features
    rel = make_releaser(aggregator, config.aggregator_settings(epsilon, delta), generator=generator, ledger=ledger,
                        spend_id=spend_id, neighbours=neighbour_index(prep) if queries else None)  # fmt: skip

    # one bar over the m queries, advanced as each round is released (votes have their own bar)
    bar = tqdm(
        total=config.release.num_queries,
        desc=f"release {aggregator}",
        unit="query",
        disable=not config.execution.progress,
    )

    calls = 0
    stopped = False  # finish_from_ledger: the record ended; nothing more is asked

    def release(index: Tensor) -> Tensor:
        nonlocal calls, stopped
        if finish_calls is not None and calls >= finish_calls:
            stopped = True  # never asked: no votes read, no noise drawn, nothing recorded
            if spec.soft:
                return torch.full((int(index.numel()),), math.nan, dtype=torch.float64)
            return torch.full((int(index.numel()),), -1, dtype=torch.int64)
        if queries:
            inputs = prep.task.public_x[index].flatten(1).float()
        else:
            votes = _pool_votes(prep)
            inputs = votes.scores(index) if spec.votes == "scores" else votes.histograms(index)
        labels = rel.release(inputs, query_ids=index).labels  # the ledger records the pool positions
        calls += 1
        bar.update(int(index.numel()))
        return labels

    with bar, _naming_the_finish_option(finishable and recorded is not None and finish_calls is None):
        selected = _offer(prep, order, release, lambda: rel.halted or stopped, halts=spec.halts,
                          selection_generator=selection_generator)  # fmt: skip
    if stopped:  # keep the recorded calls only: one call per selection round
        selected = _recorded_prefix(selected, calls)
    labels = selected.labels
    summary, partial = _release_summary(
        rel.summary(), selected, stopped=stopped, calls=calls, num_queries=config.release.num_queries
    )
    selection = _selection_record(config, strategy, selected)
    if partial is not None:  # finishing writes nothing to the ledger: its record stays as the crash left it
        return Release(aggregator, labels, spec.soft, summary, spend_id, True, selected.index, selection, partial)
    stored = [None if math.isnan(v) else v for v in labels.tolist()] if spec.soft else labels.tolist()
    ledger.record_result(spend_id, {"labels": stored, "summary": summary, "selection": selection})
    return Release(aggregator, labels, spec.soft, summary, spend_id, False, selected.index, selection)


def _pool_votes(prep: Prepared) -> PoolVotes:
    """The teachers' votes on the pool, which a release from votes reads; a run without teachers has none."""
    if prep.votes is None:
        raise ValueError("this run has no teachers (a direct learner's run): there are no votes to release from")
    return prep.votes


def _finish_calls(
    config: TransferConfig, recorded: LedgerEntry | None, spend_id: str, steered: Callable[[], Tensor] | None
) -> int | None:
    """finish_from_ledger: how many recorded calls to replay; nothing is asked after them (module docstring)."""
    if not config.execution.finish_from_ledger or steered is not None:
        return None
    if recorded is None:
        raise ValueError(
            f"finish_from_ledger: the ledger holds no spend {spend_id!r}, so there are no recorded outputs to "
            "finish from (nothing was spent or drawn now); run without finish_from_ledger to release"
        )
    return len(recorded.outputs)


def _release_summary(
    summary: dict[str, Any], selected: SelectionResult, *, stopped: bool, calls: int, num_queries: int
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The releaser's summary with what was not asked, and the record of a finished (interrupted) release."""
    offered = int(selected.index.numel())
    # of the queries offered, the releaser processed ``queries_seen`` (answered or ⊥); the rest
    # came after it halted and were not asked
    seen = int(summary["queries_seen"])
    summary["abstained"] = seen - int(summary["answered"])
    summary["not_asked"] = offered - seen
    if not stopped:
        return summary, None
    summary["not_asked"] = num_queries - seen  # the unrecorded remainder of the m queries the spend paid for
    partial = {"interrupted": True, "recorded_calls": calls, "queries_released": offered, "note": PARTIAL_RELEASE_NOTE}
    return summary, partial


def _offer(
    prep: Prepared,
    order: Tensor | None,
    release: Callable[[Tensor], Tensor],
    halted: Callable[[], bool],
    *,
    halts: bool,
    selection_generator: torch.Generator | None,
) -> SelectionResult:
    """Offer the run's queries to ``release``: a steered round's ``order`` in one batch, the spread
    selection (:func:`spread_selector`), or
    :func:`~pate_stab.selection.adaptive_batches.release_in_adaptive_batches` ("first", "student-confidence")."""
    config = prep.config
    max_unstable = config.release.max_unstable if halts else None  # the baselines never halt
    if order is not None:
        return _release_in_order(order[: config.release.num_queries], release)
    if config.selection.query_selection == "spread":
        assert selection_generator is not None  # release_labels checked it
        return spread_selector(prep).select(prep.task.public_x, num_queries=config.release.num_queries, release=release,
                                            halted=halted, max_unstable=max_unstable,
                                            generator=selection_generator)  # fmt: skip
    return release_in_adaptive_batches(
        prep.task.public_x,
        num_queries=config.release.num_queries,
        strategy=config.selection.query_selection,
        release=release,
        halted=halted,
        confidence=selector_confidence(prep, selection_generator)
        if selection_generator is not None and config.selection.query_selection == "student-confidence"
        else None,
        round_size=config.selection.selection_round_size,
        max_unstable=max_unstable,
        generator=selection_generator,
        representatives=config.selection.selection_representatives,
    )


def _selection_record(config: TransferConfig, strategy: str, selected: SelectionResult) -> dict[str, Any]:
    """How a release's queries were chosen, for the ledger's result (the pool positions included)."""
    selection: dict[str, Any] = {"strategy": strategy, "offered": int(selected.index.numel()),
                                 "rounds": selected.rounds}  # fmt: skip
    if strategy not in ("first", STEERED):
        selection["round_size"] = config.selection.selection_round_size
        if strategy == "spread":
            selection["coverage"] = config.selection.selection_coverage
        if config.selection.selection_representatives != "centroid":  # the default leaves earlier records unchanged
            selection["representatives"] = config.selection.selection_representatives
    if strategy != "first":
        selection["index"] = selected.index.tolist()
    return selection


@contextlib.contextmanager
def _naming_the_finish_option(resumed: bool) -> Iterator[None]:
    """A rerun refused at an unrecorded call (``ReplayedSpendError``) says how to finish the run."""
    try:
        yield
    except ReplayedSpendError as exc:
        if not resumed:
            raise
        raise ReplayedSpendError(f"{exc} {FINISH_HINT}.") from exc


def _recorded_prefix(selected: SelectionResult, calls: int) -> SelectionResult:
    """The rounds of ``selected`` that the ledger recorded (the first ``calls``; one release call each)."""
    rounds = selected.rounds[:calls]
    cut = sum(int(r["size"]) for r in rounds)
    return SelectionResult(selected.index[:cut], selected.labels[:cut], rounds)


def _release_in_order(order: Tensor, release: Callable[[Tensor], Tensor]) -> SelectionResult:
    """Offer ``order`` (pool positions chosen before any of their votes is read) in one batch."""
    order = order.to(torch.int64)
    if order.numel() != order.unique().numel():
        raise ValueError("a steered round must offer each pool point at most once")
    if order.numel() == 0:
        raise ValueError("a steered round has no pool point left to ask about")
    labels = release(order)
    answered = int(answered_mask(labels).sum())
    rounds = [{"criterion": STEERED, "size": int(order.numel()), "answered": answered,
               "unanswered": int(order.numel()) - answered}]  # fmt: skip
    return SelectionResult(order, labels, rounds)


def selector_confidence(prep: Prepared, generator: torch.Generator) -> ConfidenceFn:
    """The selector of ``"student-confidence"``: the student's architecture, fitted on the answered
    queries (⊥ dropped) and their released labels, scores the candidate pool points.

    It trains with the student's hyper-parameters, but for at least ``SELECTOR_MIN_STEPS``
    optimiser steps (a few dozen labels make one batch per epoch). Post-processing: public
    inputs and released outputs only; no pseudo-labelling.
    """
    config, task = prep.config, prep.task
    spec = student_spec(config, task)
    base = student_config(config, pseudo_labels=False)

    def confidence(index: Tensor, labels: Tensor, candidates: Tensor) -> Tensor:
        targets = student_targets(
            labels, soft=labels.is_floating_point(), num_classes=task.num_classes, bottom="drop", generator=None
        )
        batches = math.ceil(targets.index.numel() / base.batch_size)
        cheap = replace(base, epochs=max(base.epochs, math.ceil(SELECTOR_MIN_STEPS / batches)))
        model = train_student(
            task.public_x[index],
            targets,
            spec=spec,
            config=cheap,
            generator=generator,
            accelerator=config.execution.accelerator,
            progress_bar=False,
        )
        prep.selection_device = accelerator_device(config.execution.accelerator)
        return model.predict_proba(task.public_x[candidates])  # (n_candidates, C)

    return confidence


def spread_selector(prep: Prepared) -> SpreadSelector:
    """The run's ``"spread"`` selector: :class:`~pate_stab.selection.spread.SpreadSelector` on the pool
    graph (:func:`~pate_stab.run.prepare.pool_graph`, on the run's compute device, built once) with the
    run's graph and selection settings; each spread records that device for the release's stage line."""

    def used() -> None:
        prep.selection_device = prep.graph_device

    return SpreadSelector(pool_graph(prep), num_classes=prep.task.num_classes, settings=SpreadSettings.of(prep.config),
                          on_spread=used)  # fmt: skip


def release_device(prep: Prepared) -> str:
    """The device(s) of the release that just ended, for its stage line: the releaser computes on the
    CPU; a query selector that ran (spread over the pool graph, or the student-confidence model) is
    named with its device when that is not the CPU. Reading it clears the record for the next release."""
    used, prep.selection_device = prep.selection_device, None
    return "cpu" if used in (None, "cpu") else f"cpu, {used} (selection)"


def selection_report(release: Release) -> dict[str, Any]:
    """How the release's queries were chosen (the pool positions stay in the ledger)."""
    return {**{k: v for k, v in release.selection.items() if k != "index"}, "privacy": SELECTION_PRIVACY}


def label_accuracy(release: Release, truth: Tensor | None) -> tuple[float | None, float | None]:
    """Accuracy on answered queries (None if none) and over all queries (⊥ counts as wrong).

    ``truth`` holds the true labels of the release's queries, in release order
    (``task.public_y[release.index]``; for evaluation only); None (a pool without labels) gives
    (None, None).
    """
    if truth is None:
        return None, None
    if release.soft:
        answered = ~torch.isnan(release.labels)
        guess = (release.labels >= 0.5).long()
    else:
        answered = release.labels != -1
        guess = release.labels
    correct = (guess == truth) & answered
    n = int(answered.sum())
    return (float(correct.sum()) / n if n else None), float(correct.sum()) / max(truth.numel(), 1)


def release_data_dependent(prep: Prepared, release: Release, *, generator: torch.Generator) -> dict[str, Any]:
    """PATE's data-dependent ε of one of a run's releases, with the run's settings
    (:func:`~pate_stab.aggregation.data_dependent.data_dependent_figures`), and, for Private-kNN,
    :func:`~pate_stab.aggregation.data_dependent.theirs_figure` (which ``split_data_dependent`` keeps private).

    The votes of the processed queries are read only for aggregators that have a data-dependent
    analysis (the PATE baselines).
    """
    config, s = prep.config, release.summary
    seen = int(s.get("queries_seen", release.index.numel()))
    if aggregator_spec(release.aggregator).data_dependent is not None:
        counts = _pool_votes(prep).histograms(release.index[:seen])
    else:
        counts = torch.zeros(0, 2, dtype=torch.int64)
    out = data_dependent_figures(
        release.aggregator,
        s,
        counts,
        release.labels[:seen],
        delta=config.release.delta,
        teachers_changed=config.teachers_changed,
        order=config.release.dd_order,
        sigma=config.release.dd_sigma,
        generator=generator,
    )
    theirs = theirs_figure(s, release.labels[:seen], delta=config.release.delta)
    if theirs is not None:
        out[THEIRS_KEY] = theirs
    return out
