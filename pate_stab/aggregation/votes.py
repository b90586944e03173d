"""Teacher outputs → vote histograms, γ-histograms, and the distance to instability.

Hard labels: teacher predictions ``(k, m)`` (class indices) become a vote histogram ``(m, C)``.
Soft labels (binary scores in [0, 1]): scores ``(k, m)`` become a γ-histogram ``(m, 1/γ)`` over
the γ-partition of BTT18 Def 5.1 / 5.2, or a ½-shifted γ-histogram ``(m, 1/γ − 1)``.

Neighbouring datasets (DESIGN.md facts 1–2): with a record-keyed partition, adding or removing
one record changes one shard, hence one teacher's output; so does replacing one record when the
keys are record ids. Replacing a record under content keys can move it to another shard and
change two teachers' outputs (``group_size=2`` in :func:`distance_to_instability`). In a vote
histogram that moves one vote: −1 in one class, +1 in another (ℓ1 change 2). In a γ-histogram
it moves one score from one bin to another (same). In a ½-shifted histogram a score may also
move into or out of a dropped half-bin, which changes one count by 1 only.

:func:`distance_to_instability` is the sensitivity-1 distance of DESIGN.md fact 2,
``max(0, ⌈gap/2⌉ − 1)``; :func:`paper_distance_to_instability` is BTT18 Alg 4 line 5 /
Alg 8 lines 3, 8, ``max(0, gap − 1)``, which has sensitivity 2 and is kept only so that tests
can demonstrate it.

References:
    [BTT18] Bassily, Thakkar, Thakurta. Model-Agnostic Private Learning via Stability, 2018.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pate_stab._checks import check_int, check_real, check_tensor

__all__ = [
    "vote_histogram",
    "gamma_histogram",
    "shifted_gamma_histogram",
    "num_bins",
    "bin_midpoints",
    "shifted_bin_values",
    "top_label",
    "vote_gap",
    "distance_to_instability",
    "paper_distance_to_instability",
]

_INVERSE_GAMMA_TOLERANCE = 1e-9
_MAX_BINS = 1 << 20
_ELEMENTS_PER_BLOCK = 1 << 22  # scores binned per block: bounds the temporaries at ~32 MiB each


# --------------------------------------------------------------------------- hard labels


def vote_histogram(predictions: Any, num_classes: int) -> torch.Tensor:
    """Count the teachers' votes for each query.

    Args:
        predictions: ``(k, m)`` integer tensor; ``predictions[j, t]`` is teacher j's class for
            query t, in ``{0, …, num_classes − 1}``.
        num_classes: C >= 1.

    Returns:
        ``(m, C)`` int64 tensor; row t sums to k.

    Raises:
        TypeError: ``predictions`` is not an integer tensor (floats and bools are rejected).
        ValueError: wrong number of dimensions, empty, or a label outside ``[0, C)``.
    """
    num_classes = check_int("num_classes", num_classes, minimum=1)
    predictions = check_tensor("predictions", predictions, ndim=2, floating=False)
    low, high = torch.aminmax(predictions)
    if int(low) < 0 or int(high) >= num_classes:
        raise ValueError(
            f"predictions must be class indices in [0, {num_classes}) (num_classes={num_classes}); "
            f"found values in [{int(low)}, {int(high)}]"
        )
    k, m = predictions.shape
    counts = torch.zeros(m, num_classes, dtype=torch.int64, device=predictions.device)
    ones = torch.ones(m, 1, dtype=torch.int64, device=predictions.device)
    # One scatter per teacher keeps memory at O(m·C) whatever k is (k = 250, m = 10⁶: ~1 s).
    for j in range(k):
        counts.scatter_add_(1, predictions[j].to(torch.int64).unsqueeze(1), ones)
    return counts


# --------------------------------------------------------------------------- soft labels


def num_bins(gamma: float) -> int:
    """n = 1/γ, the number of bins of the γ-partition (BTT18 Def 5.1 with 1/γ an integer).

    Raises:
        ValueError: γ is not in (0, 1/2], 1/γ is not an integer (within 1e-9), or 1/γ exceeds
            2^20 bins (a histogram that fine is a configuration error, not a discretisation).
    """
    gamma = check_real("gamma", gamma, low=0.0, high=0.5, low_inclusive=False)
    inverse = 1.0 / gamma
    if not inverse <= _MAX_BINS:
        raise ValueError(f"gamma={gamma!r} gives 1/gamma={inverse:.3g} bins; at most {_MAX_BINS} are supported")
    n = round(inverse)
    if abs(inverse - n) >= _INVERSE_GAMMA_TOLERANCE:
        raise ValueError(
            f"1/gamma must be an integer (BTT18 Def 5.1: the ½-shifted partition needs equal bins); "
            f"got gamma={gamma!r}, 1/gamma={inverse!r}"
        )
    return n


def _check_scores(scores: Any) -> torch.Tensor:
    scores = check_tensor("scores", scores, ndim=2, floating=True, finite=False)
    low, high = torch.aminmax(scores)  # NaN propagates to both
    if math.isnan(float(low)) or math.isnan(float(high)):
        raise ValueError("scores contains NaN entries")
    if not (float(low) >= 0.0 and float(high) <= 1.0):
        raise ValueError(f"scores must lie in [0, 1]; found values in [{float(low)}, {float(high)}]")
    return scores


def _binned_counts(scores: torch.Tensor, n: int, *, shifted: bool) -> torch.Tensor:
    """Histogram of each column of ``scores`` (k, m), processed in blocks of queries.

    Plain bins: ``min(⌊s·n⌋, n − 1)`` → n columns. Shifted bins: ``⌊s·n + ½⌋ − 1`` for
    ``⌊s·n + ½⌋ ∈ {1, …, n − 1}``, else no bin → n − 1 columns.
    """
    k, m = scores.shape
    num_columns = n - 1 if shifted else n
    counts = torch.zeros(m, num_columns + 1, dtype=torch.int64, device=scores.device)
    block = max(1, _ELEMENTS_PER_BLOCK // k)
    for start in range(0, m, block):
        x = scores[:, start : start + block].to(torch.float64) * n  # (k, b)
        if shifted:
            v = torch.floor(x + 0.5).to(torch.int64)
            # column num_columns collects the scores in the two dropped half-bins
            column = torch.where((v >= 1) & (v <= n - 1), v - 1, num_columns)
        else:
            column = torch.clamp(torch.floor(x), max=n - 1).to(torch.int64)
        counts[start : start + block].scatter_add_(1, column.T, torch.ones_like(column.T))
    return counts[:, :num_columns].contiguous()


def gamma_histogram(scores: Any, gamma: float) -> torch.Tensor:
    """The γ-histogram of each query's k scores (BTT18 Def 5.1, 5.2).

    With n = 1/γ, column ``v − 1`` counts the scores in bin ``I_v = [(v−1)γ, vγ)`` for
    v = 1, …, n − 1 and ``I_n = [(n−1)γ, 1]``. Def 5.1 writes every bin as a closed interval;
    closed intervals overlap at the interior edges, and a partition must put each score in
    exactly one bin (one teacher = one vote), so interior edges belong to the bin on their
    right. The bin of a score s is ``min(⌊s·n⌋, n − 1)`` evaluated in float64; a score within
    rounding of an edge lands on one side, always the same one for the same value, and that
    determinism is all the privacy analysis uses.

    Args:
        scores: ``(k, m)`` floating tensor of teacher scores in [0, 1] (NaN rejected).
        gamma: bin width γ ∈ (0, 1/2] with 1/γ an integer.

    Returns:
        ``(m, 1/γ)`` int64 tensor; each row sums to k.

    Raises:
        TypeError: ``scores`` is not a floating tensor.
        ValueError: wrong shape, NaN, a score outside [0, 1], or 1/γ not an integer.
    """
    n = num_bins(gamma)
    return _binned_counts(_check_scores(scores), n, shifted=False)


def shifted_gamma_histogram(scores: Any, gamma: float) -> torch.Tensor:
    """The ½-shifted γ-histogram of each query's k scores (BTT18 Def 5.1, 5.2).

    The γ-partition shifted right by γ/2, with the two half-bins at the ends removed (Def 5.1,
    1/γ an integer): with n = 1/γ, column ``v − 1`` counts the scores in
    ``[(v − ½)γ, (v + ½)γ)`` for v = 1, …, n − 1 (released value vγ, Alg 8 line 9). Scores in
    the dropped half-bins ``[0, γ/2)`` and ``[1 − γ/2, 1]`` count for no bin, so a row sums to
    at most k. The bin of s is ``⌊s·n + ½⌋`` in float64 (0 and n mean "dropped").

    Args:
        scores: ``(k, m)`` floating tensor of teacher scores in [0, 1] (NaN rejected).
        gamma: bin width γ ∈ (0, 1/2] with 1/γ an integer.

    Returns:
        ``(m, 1/γ − 1)`` int64 tensor.

    Raises:
        TypeError: ``scores`` is not a floating tensor.
        ValueError: wrong shape, NaN, a score outside [0, 1], or 1/γ not an integer.
    """
    n = num_bins(gamma)
    return _binned_counts(_check_scores(scores), n, shifted=True)


def bin_midpoints(gamma: float) -> torch.Tensor:
    """Released value of each γ-histogram bin: ``(2v − 1)γ/2`` for v = 1, …, 1/γ (Alg 8 line 5).

    Computed as ``(2v − 1) / (2n)`` with n = 1/γ; float64, shape ``(1/γ,)``.
    """
    n = num_bins(gamma)
    v = torch.arange(1, n + 1, dtype=torch.float64)
    return (2 * v - 1) / (2 * n)


def shifted_bin_values(gamma: float) -> torch.Tensor:
    """Released value of each ½-shifted bin: ``vγ`` for v = 1, …, 1/γ − 1 (Alg 8 line 9).

    Computed as ``v / n`` with n = 1/γ; float64, shape ``(1/γ − 1,)`` (the midpoint of each bin).
    """
    n = num_bins(gamma)
    return torch.arange(1, n, dtype=torch.float64) / n


# --------------------------------------------------------------------------- stability


def _check_counts(counts: Any) -> torch.Tensor:
    counts = check_tensor("counts", counts, ndim=2, floating=False)
    if bool((counts < 0).any()):
        raise ValueError("counts must be non-negative")
    return counts.to(torch.int64)


def top_label(counts: Any) -> torch.Tensor:
    """Argmax of each row, ties broken by the LOWEST class index (BTT18 Alg 4 line 5).

    Args:
        counts: ``(m, C)`` non-negative integer histogram.

    Returns:
        ``(m,)`` int64 class indices.
    """
    counts = _check_counts(counts)
    return torch.argmax(counts, dim=1)  # documented to return the first maximal index


def vote_gap(counts: Any) -> torch.Tensor:
    """Largest count minus second-largest count of each row, ``(m,)`` int64.

    The second-largest is taken over the other classes (a tie at the top gives gap 0). With a
    single class (C = 1) the second-largest count is taken to be 0, as if an empty competitor
    were present: the gap is the count itself, which still moves by at most 1 per changed
    teacher (cf. BTT18 Def 5.5, a one-bin histogram is d-stable for d < |S|). This is the case of
    the ½-shifted histogram at γ = 1/2, which has one bin.
    """
    counts = _check_counts(counts)
    if counts.shape[1] == 1:
        return counts[:, 0].clone()
    top2 = torch.topk(counts, 2, dim=1).values  # (m, 2), sorted descending
    return top2[:, 0] - top2[:, 1]


def distance_to_instability(counts: Any, *, group_size: int = 1) -> torch.Tensor:
    """Sensitivity-1 distance to instability ``max(0, ⌈gap/2⌉ − 1)`` (DESIGN.md fact 2).

    The number of votes that can move without changing :func:`top_label`: after d single-vote
    moves (each lowers the gap by at most 2) the gap is still ≥ 1. One moved vote changes it by
    at most 1, as the sparse-vector analysis (BTT18 Alg 3, Thm 3.6) requires, and it is 0
    whenever one moved vote can change the argmax (gap ≤ 2), as Lemma 3.4 requires. This
    replaces BTT18 Alg 4 line 5 / Alg 8 lines 3, 8 (``max(0, gap − 1)``, sensitivity 2).

    Group privacy (``group_size`` = g teachers changed by one neighbouring data set, e.g. g = 2
    for replace-one over content-keyed shards, DESIGN.md fact 1): ``⌊d / g⌋`` with d the distance
    above. g moved votes change d by at most g, hence ``⌊d/g⌋`` by at most 1 (sensitivity 1 again),
    and ``⌊d/g⌋ = 0`` exactly when d < g, i.e. gap ≤ 2g, which is when g moved votes can change
    the argmax. The releasers' analysis then holds unchanged for the g-teacher relation.

    Args:
        counts: ``(m, C)`` non-negative integer histogram (vote, γ- or ½-shifted histogram).
        group_size: g ≥ 1, the votes one neighbouring data set may move in each histogram.

    Returns:
        ``(m,)`` int64, non-negative. For C = 1 see :func:`vote_gap`.

    Example:
        counts ``[[7, 3, 0]]`` → gap 4 → distance 1 (with ``group_size=2``: 0).
    """
    g = check_int("group_size", group_size, minimum=1)
    gap = vote_gap(counts)
    return torch.div(torch.clamp((gap + 1) // 2 - 1, min=0), g, rounding_mode="floor")


def paper_distance_to_instability(counts: Any) -> torch.Tensor:
    """BTT18 Alg 4 line 5: ``max(0, gap − 1)``. Sensitivity 2 — do not use in a releaser.

    Kept so that tests can demonstrate DESIGN.md fact 2: one moved vote can change it by 2
    (e.g. ``[4, 0] → [3, 1]``: 3 → 1).
    """
    gap = vote_gap(counts)
    return torch.clamp(gap - 1, min=0)
