"""pate_stab.selection: which public pool points to query, chosen from public information and released outputs only.

The releaser is calibrated for ``num_queries`` (m) queries; which m points of the public pool it
is asked about is free to choose, as long as the choice does not look at the private data. Three
strategies (:data:`QUERY_SELECTIONS`):

``"first"``
    the first m pool points in pool order, released in one batch (the pipeline's historical
    behaviour).

``"student-confidence"``
    release in adaptive batches ("rounds") through ONE aggregator instance (one calibrated spend,
    :func:`release_in_adaptive_batches`). A k-means clustering of the public pool
    (``5·round_size`` clusters, k-means++ start) gives a list of representatives — the pool point
    nearest to each centroid: typical points, spread over the pool; public data only
    (:mod:`~pate_stab.selection.representatives`). Round 0 takes the first ``round_size`` of them.
    After each round a cheap model — the student's architecture, trained by the student trainer —
    is fitted on the queries answered so far and their released labels, and the next round takes
    the not-yet-queried pool points it is most confident about, the most confident of each
    predicted class in turn (so the labelled set does not collapse onto the easiest class). A class
    with no answered query yet cannot be predicted by that model, so while u of the C classes are
    unseen, a share u/C of the round goes to the representatives farthest from every answered
    query (class discovery). For an aggregator that halts after T ⊥ (the stability releasers),
    round sizes follow the ⊥ released so far: a round is sized so that, at the last round's ⊥
    rate, it is expected to use at most half of the ⊥ left before halting (never smaller than
    ``round_size``). For one that never halts (the PATE baselines) each round offers as many
    queries as all earlier rounds together (never fewer than ``round_size``). Selection stops after
    m queries, when the releaser halts, or when the pool is exhausted; a halted stability releaser
    answers nothing more, so no further query is offered to it.

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
    regions the labelled set does not cover yet, where the ensemble is still likely to agree
    (:mod:`~pate_stab.selection.picks`). :class:`SpreadSelector` (:mod:`~pate_stab.selection.spread`)
    holds this selection whole — the pool graph, the spreading, the round size and coverage — with
    its settings' defaults in :data:`SPREAD_DEFAULTS`; the main job
    (:func:`pate_stab.run.release.release_labels`) and ``release --votes``
    (:func:`pate_stab.run.release_votes.release_votes`) both select through it.

The adaptive batches all belong to one spend; they are not :func:`pate_stab.run.rounds.release_rounds`'s
rounds (R separate releases, each with its own spend). Why choosing queries from released outputs is
post-processing: :mod:`~pate_stab.selection.adaptive_batches`.

| module | what |
|---|---|
| :mod:`~pate_stab.selection.representatives` | k-means representatives: nearest the centroid, or densest |
| :mod:`~pate_stab.selection.picks` | per-class orders: the most confident of each class in turn; the spread's picks |
| :mod:`~pate_stab.selection.adaptive_batches` | :func:`release_in_adaptive_batches`: the rounds within one spend |
| :mod:`~pate_stab.selection.spread` | :class:`SpreadSelector` and its :class:`SpreadSettings` |

The names below are imported on first use (PEP 562), so that the run's configuration can check a
setting's name without loading the spreading code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports

if TYPE_CHECKING:
    from pate_stab.selection.adaptive_batches import (
        SELECTION_PRIVACY,
        SelectionResult,
        answered_mask,
        next_round_size,
        release_in_adaptive_batches,
    )
    from pate_stab.selection.picks import confident_per_class, per_class_order, spread_picks
    from pate_stab.selection.representatives import dense_representatives, kmeans_representatives
    from pate_stab.selection.spread import SPREAD_DEFAULTS, SpreadSelector, SpreadSettings
    from pate_stab.vocabulary import (
        QUERY_SELECTIONS,
        REPRESENTATIVE_CHOICES,
        check_query_selection,
        check_representatives,
    )

_LAZY = {
    "QUERY_SELECTIONS": "pate_stab.vocabulary",
    "SELECTION_PRIVACY": "pate_stab.selection.adaptive_batches",
    "SelectionResult": "pate_stab.selection.adaptive_batches",
    "answered_mask": "pate_stab.selection.adaptive_batches",
    "check_query_selection": "pate_stab.vocabulary",
    "next_round_size": "pate_stab.selection.adaptive_batches",
    "release_in_adaptive_batches": "pate_stab.selection.adaptive_batches",
    "confident_per_class": "pate_stab.selection.picks",
    "per_class_order": "pate_stab.selection.picks",
    "spread_picks": "pate_stab.selection.picks",
    "REPRESENTATIVE_CHOICES": "pate_stab.vocabulary",
    "check_representatives": "pate_stab.vocabulary",
    "dense_representatives": "pate_stab.selection.representatives",
    "kmeans_representatives": "pate_stab.selection.representatives",
    "SPREAD_DEFAULTS": "pate_stab.selection.spread",
    "SpreadSelector": "pate_stab.selection.spread",
    "SpreadSettings": "pate_stab.selection.spread",
}

__all__ = [
    "QUERY_SELECTIONS",
    "REPRESENTATIVE_CHOICES",
    "SELECTION_PRIVACY",
    "SPREAD_DEFAULTS",
    "SelectionResult",
    "SpreadSelector",
    "SpreadSettings",
    "answered_mask",
    "check_query_selection",
    "check_representatives",
    "confident_per_class",
    "dense_representatives",
    "kmeans_representatives",
    "next_round_size",
    "per_class_order",
    "release_in_adaptive_batches",
    "spread_picks",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
