"""Release in adaptive batches within ONE spend: each round's queries chosen from the outputs of the earlier rounds.

:func:`release_in_adaptive_batches` runs the ``"first"``, ``"student-confidence"`` and ``"spread"``
selections (:mod:`pate_stab.selection`). All its rounds go through one aggregator instance calibrated
for m queries: they are batches of one release, not :func:`pate_stab.run.rounds.release_rounds`'s
rounds (R separate releases, each with its own spend).

Privacy. The selection is post-processing. Its only inputs are the public pool, the generator
(independent of the data) and the releaser's outputs on the queries already processed (labels
and ⊥). The teachers' votes are never an input: :func:`release_in_adaptive_batches` receives a
``release`` callable that takes pool positions and returns released outputs, and the votes on a
point are computed inside that callable, immediately before the releaser processes the point. Each
query is therefore chosen adaptively from previous outputs of the mechanism, which the releasers'
analyses allow: each sparse-vector segment is an AboveThreshold instance, private for
adaptively chosen sensitivity-1 queries (Dwork & Roth 2014, Thm 3.23; BTT18 Alg 3 and 4 take
"queries chosen online", Thm 3.6), and both the advanced composition of the paper calibration
and the optimal composition of the tight one hold for adaptively composed segments (Kairouz, Oh,
Viswanath 2015); the distance-to-instability leak is bounded for each test conditionally on the
past, so the union bound over at most m tests still holds (DESIGN fact 3); and the PATE baselines are
data-independent self-compositions of m per-query mechanisms, which hold under adaptive
composition. No more than m queries are offered, and all of them go through one aggregator
instance whose (ε, δ) is spent once: the certified guarantee is exactly that of the same
aggregator on m queries in pool order.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_real, check_tensor
from pate_stab.selection.picks import confident_per_class, spread_picks
from pate_stab.selection.representatives import dense_representatives, kmeans_representatives
from pate_stab.vocabulary import QUERY_SELECTIONS, check_query_selection, check_representatives

__all__ = [
    "QUERY_SELECTIONS",
    "REPRESENTATIVES_PER_ROUND",
    "SELECTION_PRIVACY",
    "ConfidenceFn",
    "SelectionResult",
    "SpreadFn",
    "answered_mask",
    "check_query_selection",
    "next_round_size",
    "release_in_adaptive_batches",
]

# QUERY_SELECTIONS and its check are pate_stab.vocabulary's, which the run's configuration reads too
REPRESENTATIVES_PER_ROUND = 5  # k-means representatives computed: this many times round_size
SELECTION_PRIVACY = (
    "post-processing: queries are chosen from the public pool and the outputs already released; "
    "the teachers' votes on a point are computed only when the releaser processes it; one "
    "aggregator instance and one spend, calibrated for num_queries queries, answers every round "
    "(adaptively chosen queries are covered by the sparse-vector and composition analyses)"
)

# (queried positions, their released outputs, candidate positions) → (n_candidates, C) probabilities
ConfidenceFn = Callable[[Tensor, Tensor, Tensor], Tensor]
# (queried positions, their released outputs) → over the whole pool: (n, C + 1) spread shares, the
# last column ⊥'s, and (n,) the spread's mass
SpreadFn = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class SelectionResult:
    """The queries offered to the releaser, in release order, and what it released for them.

    Attributes:
        index: int64 (n,) positions in the public pool, n ≤ m, no repeats.
        labels: the released outputs for ``index`` (int64 with −1 for ⊥, or float64 with NaN).
        rounds: one record per round: ``criterion``, ``size``, ``answered`` and ``unanswered``
            (⊥, or not processed because the releaser halted during the round), and for the
            confidence rounds how many representatives were ``explored``.
    """

    index: Tensor
    labels: Tensor
    rounds: list[dict[str, Any]] = field(default_factory=list)


def answered_mask(labels: Tensor) -> Tensor:
    """True where a release answered (hard: label ≠ −1; soft: score not NaN)."""
    return ~torch.isnan(labels) if labels.is_floating_point() else labels != -1


def next_round_size(*, round_size: int, bottom_left: int, last_bottom: int, last_size: int) -> int:
    """Size of the next round: at the last round's ⊥ rate, expect at most half the ⊥ left.

    The rate is estimated as (⊥ + 1) / (size + 2) (add-one smoothing); the size is
    ⌊bottom_left / (2·rate)⌋, and at least ``round_size``. Example: 20 ⊥ allowed, 4 used, last
    round 2 ⊥ in 20 → rate 3/22, size ⌊16 / (6/22)⌋ = 58.
    """
    rate = (last_bottom + 1) / (last_size + 2)
    return max(round_size, math.floor(max(bottom_left, 0) / (2 * rate)))


def release_in_adaptive_batches(
    pool_x: Tensor,
    *,
    num_queries: int,
    strategy: str,
    release: Callable[[Tensor], Tensor],
    halted: Callable[[], bool],
    confidence: ConfidenceFn | None = None,
    spread: SpreadFn | None = None,
    coverage: float = 0.0,
    round_size: int = 20,
    max_unstable: int | None = None,
    generator: torch.Generator | None = None,
    representatives: str = "centroid",
) -> SelectionResult:
    """Choose up to ``num_queries`` pool points and have them released in adaptive batches (rounds), one spend.

    Args:
        pool_x: (n, …) the public pool (flattened for k-means).
        num_queries: m, the number of queries the aggregator is calibrated for; never exceeded.
        strategy: one of :data:`QUERY_SELECTIONS`.
        release: pool positions (int64, (b,)) → released outputs for them, in that order; the
            only way selection learns anything about the private data. Called once per round,
            always on points never offered before.
        halted: True once the releaser answers nothing more (the stability releaser after its
            T-th ⊥); selection then stops.
        confidence: for "student-confidence": (queried positions, released outputs, candidate
            positions) → class probabilities of the candidates, from a model fitted on the
            answered queries only.
        spread: for "spread": (queried positions, released outputs) → the spread's shares over
            the whole pool, (n, C + 1) with ⊥ last, and its (n,) mass.
        coverage: for "spread": share of each round (after class discovery) given to confident
            points the spread reaches with the least mass, in [0, 1].
        round_size: size of round 0 and the smallest later round.
        max_unstable: T, the ⊥ the releaser allows before halting (paces the rounds); None for
            an aggregator that never halts (each round then doubles the queries offered).
        generator: randomness of the k-means initialisation ("student-confidence" / "spread").
        representatives: which member stands for each k-means cluster in round 0 and in class
            discovery: ``"centroid"`` (the member nearest the centroid,
            :func:`kmeans_representatives`) or ``"dense"`` (the cluster's densest member,
            :func:`dense_representatives`). Public data only either way.

    Returns:
        A :class:`SelectionResult`.

    Raises:
        ValueError: unknown strategy, or m larger than the pool.
    """
    strategy = check_query_selection(strategy)
    pool_x = check_tensor("pool_x", pool_x, floating=True)
    n = pool_x.shape[0]
    m = check_int("num_queries", num_queries, minimum=1)
    if m > n:
        raise ValueError(f"num_queries={m} exceeds the public pool ({n} inputs)")
    if strategy == "first":
        return _pool_order(m, release)
    round_size = check_int("round_size", round_size, minimum=1)
    if max_unstable is not None:
        max_unstable = check_int("max_unstable", max_unstable, minimum=1)
    gen = check_generator(generator)
    if strategy == "student-confidence" and confidence is None:
        raise TypeError("strategy 'student-confidence' needs a confidence function")
    if strategy == "spread" and spread is None:
        raise TypeError("strategy 'spread' needs a spread function")
    coverage = check_real("coverage", coverage, low=0.0, high=1.0)
    choose = dense_representatives if check_representatives(representatives) == "dense" else kmeans_representatives
    flat = pool_x.flatten(1)
    # typical points spread over the pool, in k-means++ order (public data only)
    chosen = choose(flat, REPRESENTATIVES_PER_ROUND * round_size, generator=gen)
    pick = partial(_round_pick, flat, chosen, strategy=strategy, confidence=confidence, spread=spread,
                   coverage=coverage)  # fmt: skip
    return _release_rounds(n, m, release=release, halted=halted, pick=pick, round_size=round_size,
                           max_unstable=max_unstable)  # fmt: skip


def _pool_order(m: int, release: Callable[[Tensor], Tensor]) -> SelectionResult:
    """The ``"first"`` selection: the first m pool points, released in one batch."""
    index = torch.arange(m)
    labels = release(index)
    count = int(answered_mask(labels).sum())
    return SelectionResult(
        index, labels, [{"criterion": "pool order", "size": m, "answered": count, "unanswered": m - count}]
    )


def _release_rounds(
    n: int,
    m: int,
    *,
    release: Callable[[Tensor], Tensor],
    halted: Callable[[], bool],
    pick: Callable[..., tuple[Tensor, dict[str, Any]]],
    round_size: int,
    max_unstable: int | None,
) -> SelectionResult:
    """The rounds of an adaptive selection on a pool of ``n``: ``pick`` chooses each round's points (from
    the queried mask, the candidates, the positions and outputs so far and the round's size), ``release``
    answers them; at most ``m`` in all, until the releaser halts or the pool is exhausted."""
    queried = torch.zeros(n, dtype=torch.bool)
    index_parts: list[Tensor] = []
    label_parts: list[Tensor] = []
    rounds: list[dict[str, Any]] = []
    size = round_size
    while not halted():
        offered = sum(p.numel() for p in index_parts)
        candidates = torch.nonzero(~queried).flatten()
        size = min(size, m - offered, candidates.numel())
        if size < 1:
            break
        picked, record = pick(queried, candidates, index_parts, label_parts, size)
        labels = release(picked)
        if labels.shape != picked.shape:
            raise ValueError(f"release returned shape {tuple(labels.shape)} for {picked.numel()} queries")
        queried[picked] = True
        index_parts.append(picked)
        label_parts.append(labels)
        count = int(answered_mask(labels).sum())
        size = int(picked.numel())
        rounds.append({**record, "size": size, "answered": count, "unanswered": size - count})
        if max_unstable is None:
            size = max(round_size, sum(r["size"] for r in rounds))
        else:
            size = next_round_size(
                round_size=round_size,
                bottom_left=max_unstable - sum(r["unanswered"] for r in rounds),
                last_bottom=rounds[-1]["unanswered"],
                last_size=rounds[-1]["size"],
            )
    if not index_parts:
        return SelectionResult(torch.empty(0, dtype=torch.int64), torch.empty(0, dtype=torch.int64), rounds)
    return SelectionResult(torch.cat(index_parts), torch.cat(label_parts), rounds)


def _round_pick(
    flat: Tensor,
    representatives: Tensor,
    queried: Tensor,
    candidates: Tensor,
    index_parts: list[Tensor],
    label_parts: list[Tensor],
    size: int,
    *,
    strategy: str,
    confidence: ConfidenceFn | None,
    spread: SpreadFn | None,
    coverage: float,
) -> tuple[Tensor, dict[str, Any]]:
    """The pool positions of the next round (``size`` of the not yet queried ``candidates``) and its record.

    Before any answer: the free k-means representatives, then the rest in pool order. After: a
    share of the round for each class not answered yet goes to the representatives farthest from
    every answered query (class discovery), the rest by the selector (module docstring).
    """
    n = flat.shape[0]
    free = representatives[~queried[representatives]]
    answered_parts = [p[answered_mask(q)] for p, q in zip(index_parts, label_parts, strict=True)]
    answered_index = torch.cat(answered_parts) if answered_parts else torch.empty(0, dtype=torch.int64)
    if answered_index.numel() == 0:
        pick = torch.cat([free, candidates[~torch.isin(candidates, free)]])[:size]
        return pick, {"criterion": "k-means representatives"}
    index_so_far, labels_so_far = torch.cat(index_parts), torch.cat(label_parts)
    if spread is not None and strategy == "spread":
        shares, mass = spread(index_so_far, labels_so_far)  # (n, C + 1), (n,)
        if shares.shape[0] != n or mass.shape != (n,):
            shapes = f"{tuple(shares.shape)}, {tuple(mass.shape)}"
            raise ValueError(f"spread returned shapes {shapes} for a pool of {n}")
        proba = shares[candidates, :-1]  # (n_candidates, C): real classes
    else:
        assert confidence is not None
        proba = confidence(index_so_far, labels_so_far, candidates)  # (n_candidates, C)
    if proba.shape[0] != candidates.numel():
        raise ValueError(f"confidence returned {proba.shape[0]} rows for {candidates.numel()} candidates")
    # classes without an answered query cannot be predicted: look for them among the
    # representatives farthest from every answered query, a share of the round per class
    answered_labels = labels_so_far[answered_mask(labels_so_far)]
    if answered_labels.is_floating_point():
        answered_labels = (answered_labels >= 0.5).long()
    unseen = proba.shape[1] - int(answered_labels.unique().numel())
    explore = min(math.ceil(size * unseen / proba.shape[1]), free.numel())
    novelty = torch.cdist(flat[free].double(), flat[answered_index].double()).min(1).values
    explored = free[novelty.argsort(descending=True, stable=True)[:explore]]
    rest = ~torch.isin(candidates, explored)
    if strategy == "spread":
        rows = spread_picks(proba[rest], shares[candidates[rest], -1], mass[candidates[rest]],
                             size - explore, coverage=coverage)  # fmt: skip
        return torch.cat([explored, candidates[rest][rows.index]]), {
            "criterion": "spread per class", "explored": int(explore), "coverage": rows.coverage,
        }  # fmt: skip
    pick = torch.cat([explored, candidates[rest][confident_per_class(proba[rest], size - explore)]])
    return pick, {"criterion": "confidence per class", "explored": int(explore)}
