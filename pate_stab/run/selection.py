"""Which public pool points to query, chosen from public information and released outputs only.

The releaser is calibrated for ``num_queries`` (m) queries; which m points of the public pool it
is asked about is free to choose, as long as the choice does not look at the private data. Two
strategies:

``"first"``
    the first m pool points in pool order, released in one batch (the pipeline's historical
    behaviour).

``"student-confidence"``
    release in rounds through ONE aggregator instance (one calibrated spend). A k-means
    clustering of the public pool (``5·round_size`` clusters, k-means++ start) gives a list of
    representatives — the pool point nearest to each centroid: typical points, spread over the
    pool; public data only. Round 0 takes the first ``round_size`` of them. After each round a
    cheap model — the student's architecture, trained by the student trainer — is fitted on the
    queries answered so far and their released labels, and the next round takes the
    not-yet-queried pool points it is most confident about, the most confident of each predicted
    class in turn (so the labelled set does not collapse onto the easiest class). A class with
    no answered query yet cannot be predicted by that model, so while u of the C classes are
    unseen, a share u/C of the round goes to the representatives farthest from every answered
    query (class discovery). For an aggregator that halts after
    T ⊥ (the stability releasers), round sizes follow the ⊥ released so far: a round is sized so
    that, at the last round's ⊥ rate, it is expected to use at most half of the ⊥ left before
    halting (never smaller than ``round_size``). For one that never halts (the PATE baselines)
    each round offers as many queries as all earlier rounds together (never fewer than
    ``round_size``). Selection stops after m queries, when the releaser halts, or when the pool
    is exhausted; a halted stability releaser answers nothing more, so no further query is
    offered to it.

``"spread"``
    the same rounds (k-means representatives first, the same round sizes and class discovery),
    but the selector is label spreading over the public pool's kNN graph
    (:func:`pate_stab.student.spreading.spread_labels`) instead of a trained model: the answered
    labels and the ⊥ answers are spread, ⊥ as an extra class, so points near earlier ⊥ — where
    the teachers disagree — are avoided, and points whose neighbourhood was answered are
    preferred. A round takes the points whose spread puts the most weight on one real class,
    the best of each predicted class in turn, skipping points whose strongest class is ⊥. To fight
    the bias towards the easiest, most typical points, a share ``coverage`` of each round goes
    to confident points (real-class share at least ``COVERAGE_CONFIDENCE``) that the spread
    reaches with the least mass: points far, along the graph, from every labelled point — the
    regions the labelled set does not cover yet, where the ensemble is still likely to agree.
    :class:`SpreadSelector` holds this selection whole — the pool graph, the spreading, the round
    size and coverage — with its settings' defaults in :data:`SPREAD_DEFAULTS`; the main job
    (:func:`pate_stab.run.release.release_labels`) and ``release --votes``
    (:func:`pate_stab.run.release_votes.release_votes`) both select through it.

Privacy. The selection is post-processing. Its only inputs are the public pool, the generator
(independent of the data) and the releaser's outputs on the queries already processed (labels
and ⊥). The teachers' votes are never an input: :func:`release_in_rounds` receives a ``release``
callable that takes pool positions and returns released outputs, and the votes on a point are
computed inside that callable, immediately before the releaser processes the point. Each query
is therefore chosen adaptively from previous outputs of the mechanism, which the releasers'
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
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_real, check_tensor
from pate_stab.features.propagation import PoolGraph
from pate_stab.student.spreading import spread_labels
from pate_stab.vocabulary import (
    GRAPH_ALPHA,
    GRAPH_NEIGHBORS,
    GRAPH_PCA_DIM,
    GRAPH_POWER,
    GRAPH_STEPS,
    QUERY_SELECTIONS,
    REPRESENTATIVE_CHOICES,
    SELECTION_COVERAGE,
    SELECTION_REPRESENTATIVES,
    SELECTION_ROUND_SIZE,
    check_query_selection,
    check_representatives,
)

__all__ = [
    "QUERY_SELECTIONS",
    "SELECTION_PRIVACY",
    "SPREAD_DEFAULTS",
    "SelectionResult",
    "SpreadSelector",
    "SpreadSettings",
    "check_query_selection",
    "confident_per_class",
    "per_class_order",
    "kmeans_representatives",
    "dense_representatives",
    "REPRESENTATIVE_CHOICES",
    "check_representatives",
    "next_round_size",
    "release_in_rounds",
]

# QUERY_SELECTIONS and REPRESENTATIVE_CHOICES (which point stands for a k-means cluster), the checks of both and
# the spread selection's defaults are pate_stab.vocabulary's, which the run's configuration reads too
DENSITY_NEIGHBOURS = 10  # "dense": the k of the k-th-nearest-neighbour distance (fixed in advance)
COVERAGE_CONFIDENCE = 0.9  # "spread": least real-class share of a coverage pick
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


def _kmeans_centroids(x: Tensor, num: int, generator: torch.Generator, iterations: int) -> Tensor:
    """(num, d) centroids of Lloyd's algorithm from a k-means++ start (Arthur & Vassilvitskii 2007)."""
    check_generator(generator)
    first = int(torch.randint(x.shape[0], (1,), generator=generator))
    centroids = x[first : first + 1].clone()  # (1, d), grows to (num, d)
    nearest = torch.cdist(x, centroids).squeeze(1) ** 2  # (n,) squared distance to the nearest centroid
    for _ in range(1, num):
        weights = nearest if bool((nearest > 0).any()) else torch.ones_like(nearest)
        pick = int(torch.multinomial(weights, 1, generator=generator))
        centroids = torch.cat([centroids, x[pick : pick + 1]])
        nearest = torch.minimum(nearest, ((x - x[pick]) ** 2).sum(1))
    for _ in range(iterations):
        assign = torch.cdist(x, centroids).argmin(1)  # (n,)
        sums = torch.zeros_like(centroids).index_add_(0, assign, x)
        counts = torch.bincount(assign, minlength=num).unsqueeze(1).double()
        centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)
    return centroids


def kmeans_representatives(x: Tensor, num: int, *, generator: torch.Generator, iterations: int = 20) -> Tensor:
    """Positions of ``num`` distinct rows of ``x`` nearest to the centroids of a k-means clustering.

    Lloyd's algorithm from a k-means++ start (Arthur & Vassilvitskii 2007: each initial centroid
    is a row drawn with probability ∝ its squared distance to the nearest one already chosen);
    each centroid is represented by its nearest row not already taken, so the result has
    ``min(num, len(x))`` distinct positions. Public data only.

    Args:
        x: (n, d) float features.
        num: number of clusters / representatives, ≥ 1.
        generator: draws the k-means++ start.
        iterations: Lloyd iterations.

    Returns:
        int64 positions into ``x``, in centroid order.
    """
    x = check_tensor("x", x, ndim=2, floating=True).double()
    centroids = _kmeans_centroids(x, min(check_int("num", num, minimum=1), x.shape[0]), generator, iterations)
    order = torch.cdist(centroids, x).argsort(dim=1, stable=True)  # (num, n) nearest rows first
    taken: set[int] = set()
    picks = []
    for row in order.tolist():
        pick = next(i for i in row if i not in taken)
        taken.add(pick)
        picks.append(pick)
    return torch.tensor(picks, dtype=torch.int64)


def dense_representatives(
    x: Tensor, num: int, *, generator: torch.Generator, iterations: int = 20, neighbours: int = DENSITY_NEIGHBOURS
) -> Tensor:
    """Positions of the densest member of each cluster of the k-means clustering of ``x``.

    The same clustering as :func:`kmeans_representatives` (the same generator draws give the same
    centroids, in the same order). Each cluster is represented by the member with the smallest
    distance to its ``neighbours``-th nearest other member of the same cluster — the k-nearest-neighbour
    density estimate (Loftsgaarden & Quesenberry 1965), highest density first — instead of the
    member nearest the centroid. A centroid of a cluster that straddles two classes can lie in the
    low-density valley between them, where an ensemble disagrees; the cluster's mode lies inside
    one class under the cluster assumption (Chapelle, Weston & Schölkopf 2003: class boundaries
    run through low-density regions). Distances within the cluster only (an interior point's
    within-cluster neighbours are its neighbours in ``x``; a border point's are farther, which
    only favours interior points). A cluster with at most ``neighbours`` members, or an empty one,
    falls back to the member nearest its centroid not already taken. Public data only: the
    features of the candidates, no label and no vote.

    Args:
        x: (n, d) float features.
        num: number of clusters / representatives, ≥ 1.
        generator: draws the k-means++ start.
        iterations: Lloyd iterations.
        neighbours: k of the k-th-nearest-neighbour distance, ≥ 1.

    Returns:
        int64 distinct positions into ``x``, in centroid order.
    """
    x = check_tensor("x", x, ndim=2, floating=True).double()
    neighbours = check_int("neighbours", neighbours, minimum=1)
    centroids = _kmeans_centroids(x, min(check_int("num", num, minimum=1), x.shape[0]), generator, iterations)
    assign = torch.cdist(x, centroids).argmin(1)  # (n,)
    taken: set[int] = set()
    picks = []
    for c in range(centroids.shape[0]):
        members = torch.nonzero(assign == c).flatten()
        if members.numel() > neighbours:
            block = x[members]
            # the k-th other member's distance, in row blocks (memory O(1024 · n_c)); column 0 is itself
            radius = torch.cat([torch.cdist(block[i : i + 1024], block).kthvalue(neighbours + 1, dim=1).values
                                for i in range(0, members.numel(), 1024)])  # fmt: skip
            order = members[radius.argsort(stable=True)].tolist()
        else:
            order = []
        fallback = torch.cdist(centroids[c : c + 1], x).squeeze(0).argsort(stable=True).tolist()
        pick = next(i for i in order + fallback if i not in taken)
        taken.add(pick)
        picks.append(pick)
    return torch.tensor(picks, dtype=torch.int64)


def confident_per_class(proba: Tensor, size: int) -> Tensor:
    """Positions of ``size`` rows of ``proba`` (n, C): the most confident of each predicted class in turn.

    Confidence is the top class probability. Classes take turns (class 0's most confident row,
    class 1's, …, then each class's second, …); a class with no rows left is skipped. Ties keep
    row order.
    """
    proba = check_tensor("proba", proba, ndim=2, floating=True, nonempty=False)
    confidence, guess = proba.max(1)
    return per_class_order(guess, confidence, size, num_classes=proba.shape[1])


def per_class_order(guess: Tensor, score: Tensor, size: int, *, num_classes: int) -> Tensor:
    """Positions of ``size`` rows: the highest ``score`` of each class of ``guess`` in turn.

    Classes take turns (class 0's best row, class 1's, …, then each class's second, …); a class
    with no rows left is skipped. Ties keep row order.
    """
    guess = check_tensor("guess", guess, ndim=1, floating=False, nonempty=False)
    score = check_tensor("score", score, ndim=1, floating=True, nonempty=False)
    if guess.shape != score.shape:
        raise ValueError(f"guess has {guess.numel()} rows, score {score.numel()}")
    size = min(check_int("size", size, minimum=0), guess.shape[0])
    queues = []
    for c in range(num_classes):
        rows = torch.nonzero(guess == c).flatten()
        queues.append(rows[score[rows].argsort(descending=True, stable=True)].tolist())
    picks: list[int] = []
    depth = 0
    while len(picks) < size:
        for queue in queues:
            if depth < len(queue) and len(picks) < size:
                picks.append(queue[depth])
        depth += 1
    return torch.tensor(picks, dtype=torch.int64)


@dataclass(frozen=True)
class _Picks:
    index: Tensor
    coverage: int


def _spread_picks(real: Tensor, bottom: Tensor, mass: Tensor, size: int, *, coverage: float) -> _Picks:
    """Rows to query given spread shares: real (n, C), bottom (n,) ⊥'s share, mass (n,).

    A row is eligible when its strongest class is a real class (not ⊥). First ``⌈coverage·size⌉``
    rows among the eligible with a real-class share ≥ :data:`COVERAGE_CONFIDENCE`, least mass
    first; then the eligible by real-class share; then, if the round is not full, the rest by
    real-class share minus ⊥'s. Each group is taken class by class (:func:`per_class_order`).
    """
    size = min(size, real.shape[0])
    num_classes = real.shape[1]
    confidence, guess = real.max(1)
    eligible = confidence > bottom
    picked = torch.zeros(real.shape[0], dtype=torch.bool)
    order: list[Tensor] = []

    def take(mask: Tensor, score: Tensor, count: int) -> int:
        rows = torch.nonzero(mask & ~picked).flatten()
        chosen = rows[per_class_order(guess[rows], score[rows], count, num_classes=num_classes)]
        picked[chosen] = True
        order.append(chosen)
        return int(chosen.numel())

    covered = take(eligible & (confidence >= COVERAGE_CONFIDENCE), -mass, math.ceil(coverage * size))
    taken = covered + take(eligible, confidence, size - covered)
    take(~eligible, confidence - bottom, size - taken)
    return _Picks(torch.cat(order), covered)


def next_round_size(*, round_size: int, bottom_left: int, last_bottom: int, last_size: int) -> int:
    """Size of the next round: at the last round's ⊥ rate, expect at most half the ⊥ left.

    The rate is estimated as (⊥ + 1) / (size + 2) (add-one smoothing); the size is
    ⌊bottom_left / (2·rate)⌋, and at least ``round_size``. Example: 20 ⊥ allowed, 4 used, last
    round 2 ⊥ in 20 → rate 3/22, size ⌊16 / (6/22)⌋ = 58.
    """
    rate = (last_bottom + 1) / (last_size + 2)
    return max(round_size, math.floor(max(bottom_left, 0) / (2 * rate)))


def release_in_rounds(
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
    """Choose up to ``num_queries`` pool points and have them released, round by round.

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
        index = torch.arange(m)
        labels = release(index)
        count = int(answered_mask(labels).sum())
        return SelectionResult(
            index, labels, [{"criterion": "pool order", "size": m, "answered": count, "unanswered": m - count}]
        )
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
    representatives = choose(flat, REPRESENTATIVES_PER_ROUND * round_size, generator=gen)
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
        pick, record = _round_pick(
            flat, representatives, queried, candidates, index_parts, label_parts, size,
            strategy=strategy, confidence=confidence, spread=spread, coverage=coverage,
        )  # fmt: skip
        labels = release(pick)
        if labels.shape != pick.shape:
            raise ValueError(f"release returned shape {tuple(labels.shape)} for {pick.numel()} queries")
        queried[pick] = True
        index_parts.append(pick)
        label_parts.append(labels)
        count = int(answered_mask(labels).sum())
        size = int(pick.numel())
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
        rows = _spread_picks(proba[rest], shares[candidates[rest], -1], mass[candidates[rest]],
                             size - explore, coverage=coverage)  # fmt: skip
        return torch.cat([explored, candidates[rest][rows.index]]), {
            "criterion": "spread per class", "explored": int(explore), "coverage": rows.coverage,
        }  # fmt: skip
    pick = torch.cat([explored, candidates[rest][confident_per_class(proba[rest], size - explore)]])
    return pick, {"criterion": "confidence per class", "explored": int(explore)}


@dataclass(frozen=True)
class SpreadSettings:
    """The settings of the ``"spread"`` selection: the public pool's kNN graph, the spreading, the rounds.

    The field names are the main job's configuration keys (:class:`~pate_stab.run.config.TransferConfig`,
    whose defaults for them are :data:`SPREAD_DEFAULTS`). The graph settings are fixed in advance from
    Iscen, Tolias, Avrithis & Chum (2019), "Label propagation for deep semi-supervised learning" (CVPR;
    the affinity max(cos, 0)^γ is theirs), as their public code (LP-DeepSSL, ``update_plabels``) runs
    it: k = 50 neighbours, γ = 3, α = 0.99 (also Zhou et al. 2004's α), 20 iterations of the solver
    (here: 20 terms of the series, the same number of sparse products), the graph on the features as
    they are (no extra PCA). No label of the pool or the evaluation split chose them, nor the round
    size and coverage.
    """

    graph_neighbors: int = GRAPH_NEIGHBORS  # kNN graph degree
    graph_power: float = GRAPH_POWER  # affinity exponent γ in max(cos, 0)^γ
    graph_alpha: float = GRAPH_ALPHA  # propagation weight α in [0, 1)
    graph_steps: int = GRAPH_STEPS  # terms of the series Σ (αS)^t
    graph_pca_dim: int | None = GRAPH_PCA_DIM  # public PCA of the features before the graph (None: none)
    selection_round_size: int = SELECTION_ROUND_SIZE  # the first round's size and the smallest round
    selection_coverage: float = SELECTION_COVERAGE  # share of each round for confident, not yet covered points
    # which member stands for a k-means cluster in round 0 and class discovery: "centroid" or "dense"
    selection_representatives: str = SELECTION_REPRESENTATIVES

    @classmethod
    def of(cls, config: Any) -> SpreadSettings:
        """The settings of a run's configuration: any object with these attributes (a ``TransferConfig``)."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls)})

    def pool_graph(self, x: Tensor) -> PoolGraph:
        """The kNN graph of the public points' (n, d) inputs ``x`` (public data only), built where ``x`` is."""
        return PoolGraph(
            num_neighbors=self.graph_neighbors, power=self.graph_power, alpha=self.graph_alpha,
            steps=self.graph_steps, pca_dim=self.graph_pca_dim,
        ).fit(x)  # fmt: skip


SPREAD_DEFAULTS = SpreadSettings()
"""The spread selection's defaults: the main job's (``TransferConfig``'s) and ``release --votes``'."""


class SpreadSelector:
    """The ``"spread"`` selection (module docstring): one object for the main job and ``release --votes``.

    It holds the public pool's kNN graph and its :class:`SpreadSettings`. Called with (queried
    positions, released outputs), it spreads the answered labels and the ⊥ (an extra class C; a soft
    output counts as the class it rounds to) over the graph
    (:func:`pate_stab.student.spreading.spread_labels`, α and steps from the settings) and returns the
    (n, C + 1) shares over the whole pool (⊥ last) and the (n,) mass, on the CPU: the
    :data:`SpreadFn` of :func:`release_in_rounds`. :meth:`select` runs the rounds with the settings'
    round size and coverage. Post-processing: public inputs and released outputs only.

    Args:
        graph: the public pool's fitted kNN graph; the spreading computes where it is.
        num_classes: C, the released labels' declared range.
        settings: where its α and steps, round size and coverage come from.
        on_spread: called after each spread (the main job records the selection's device with it).
    """

    def __init__(
        self,
        graph: PoolGraph,
        *,
        num_classes: int,
        settings: SpreadSettings = SPREAD_DEFAULTS,
        on_spread: Callable[[], None] | None = None,
    ) -> None:
        if graph.adjacency is None:
            raise ValueError("the spread selection needs a fitted pool graph")
        self.graph = graph
        self.adjacency: Tensor = graph.adjacency
        self.num_classes = check_int("num_classes", num_classes, minimum=2)
        self.settings = settings
        self.on_spread = on_spread

    @classmethod
    def from_inputs(
        cls, pool_x: Tensor, *, num_classes: int, settings: SpreadSettings = SPREAD_DEFAULTS, device: Any = None
    ) -> SpreadSelector:
        """A selector on the graph of the public points' inputs ``pool_x`` (rows flattened), built on
        ``device`` (default: where ``pool_x`` is)."""
        x = check_tensor("pool_x", pool_x, floating=True).flatten(1).float()
        return cls(settings.pool_graph(x if device is None else x.to(device)), num_classes=num_classes,
                   settings=settings)  # fmt: skip

    def __call__(self, index: Tensor, labels: Tensor) -> tuple[Tensor, Tensor]:
        c = self.num_classes
        hard = (labels >= 0.5).long() if labels.is_floating_point() else labels.long()
        classes = torch.where(answered_mask(labels), hard, torch.full_like(hard, c))  # ⊥ → class C
        # spread where the graph is (the round's seeds move there); the selection reads the shares on the CPU
        proba, mass = spread_labels(self.adjacency, index, classes, num_classes=c + 1,
                                    alpha=self.settings.graph_alpha, steps=self.settings.graph_steps)  # fmt: skip
        if self.on_spread is not None:
            self.on_spread()
        return proba.cpu(), mass.cpu()

    def select(
        self,
        pool_x: Tensor,
        *,
        num_queries: int,
        release: Callable[[Tensor], Tensor],
        halted: Callable[[], bool],
        max_unstable: int | None,
        generator: torch.Generator,
    ) -> SelectionResult:
        """The spread selection of up to ``num_queries`` of the pool ``pool_x`` (the graph's nodes):
        :func:`release_in_rounds` with this selector, its round size and its coverage."""
        return release_in_rounds(
            pool_x, num_queries=num_queries, strategy="spread", release=release, halted=halted, spread=self,
            coverage=self.settings.selection_coverage, round_size=self.settings.selection_round_size,
            max_unstable=max_unstable, generator=generator,
            representatives=self.settings.selection_representatives,
        )  # fmt: skip
