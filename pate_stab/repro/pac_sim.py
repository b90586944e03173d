"""Fast exact simulation of BTT18 §4's releaser and learners: 1-D classes, halfspaces in R².

Halfspaces in R², general ones (V = 3) realizable and homogeneous ones (V = 2) agnostic, are in
:mod:`pate_stab.repro.pac_sim_halfspaces`, built on the parts here.

The PAC curves of Thm 4.3 / 4.4 / 4.6 / 4.7 need n over several decades (10⁶ … 10⁹) and m up to
10⁶ queries; drawing every point is out of reach on a CPU. For 1-D classes with x uniform on
[0, 1] only what happens near each target boundary b matters, and that can be sampled exactly:

* **Shards.** A keyed hash of the record id puts each record in a uniformly random shard, so
  the shard sizes are Multinomial(n, 1/k) (:func:`shard_sizes`).
* **Realizable teachers.** A shard's threshold ERM (:func:`~pate_stab.theory.erm_classes.threshold_erm`)
  is the midpoint between its largest negative and smallest positive point. Near b those are
  the extremes of Binomial(size, b) and size − that uniform points, whose distances to b are
  b·(1 − U^{1/a}) and (1 − b)·(1 − U^{1/c}) (order statistics of uniforms), computed with
  ``expm1`` in float64 as *offsets from b*, so nothing is lost to rounding at n = 10⁹
  (:func:`realizable_offsets`). An interval's two endpoints are two such boundaries: with both
  far apart (0.25, 0.75) and every shard holding points between them, the interval ERM's error
  is the sum of the two one-sided errors and decouples (the interior's positives fix the block).
* **Agnostic teachers** (label noise η): the ERM is the argmin of a random walk with drift
  (1 − 2η) away from b; it lies in a window holding ``window`` expected points of the shard on
  each side except with probability about (η/(1−η))^{window(1−2η)}. :func:`agnostic_offsets`
  draws the window's points per shard and runs the exact ERM on them.
* **Queries.** The public queries are uniform on [0, 1], m of them. The vote count is a step
  function of x with steps at the teachers' offsets; where the distance to instability
  (:func:`~pate_stab.aggregation.votes.distance_to_instability`) is at least the cutoff D = w +
  x_p (the releaser's threshold plus the p-upper quantile of its noise difference, as in
  :func:`~pate_stab.theory.pac.num_teachers_for_agreement`) a query is answered with the
  majority except with probability ≤ p. :func:`near_queries` draws only the queries below that
  cutoff (Binomial(m, near length) of them, uniform within the near steps) and counts the far
  queries whose majority is wrong (Binomial(m, that length)) instead of drawing them. The
  sparse vector's state changes only at ⊥ answers, and far queries are not ⊥ except with
  probability ≤ m·p, so releasing the near queries alone, in a random order, has the law of
  releasing all m (up to that probability, which the recipe reports).
* **Student** (Alg 5): ERM on the answered queries. Far queries carry the majority label and
  a threshold cannot cross one without an error and no gain, so the ERM on the near answered
  queries plus the nearest far query on each side (weighted to be uncrossable) is the ERM on all.

Everything is float64. Non-private ERM on all n points is the same computation with k = 1; its
expected error in the realizable case is, in the Poisson limit, 1/(2n) per boundary (the
nearest points on both sides are Exp(n) away, their difference Laplace(1/n), the midpoint's error
half its absolute value): :func:`realizable_erm_error_limit`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from pate_stab.theory.erm_classes import threshold_erm

__all__ = [
    "shard_sizes",
    "realizable_offsets",
    "agnostic_offsets",
    "segmented_threshold_erm",
    "realizable_erm_error_limit",
    "NearQueries",
    "near_queries",
    "student_offset",
    "distance_to_instability_np",
    "sorted_window_points",
]


def shard_sizes(n: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """(k,) sizes of a uniformly random (keyed-hash) partition of n records into k shards."""
    if k < 1 or n < 0:
        raise ValueError(f"need k >= 1 and n >= 0, got n={n}, k={k}")
    return rng.multinomial(n, np.full(k, 1.0 / k))


def _extreme_distance(count: np.ndarray, width: float, rng: np.random.Generator) -> np.ndarray:
    """Distance from an end of an interval of length ``width`` to the nearest of ``count`` uniform points.

    width·(1 − U^{1/count}) = −width·expm1(log U / count); +inf where count = 0.
    """
    u = rng.random(count.shape[0])
    safe = np.maximum(count, 1)
    d = -width * np.expm1(np.log(u) / safe)
    return np.where(count > 0, d, np.inf)


def realizable_offsets(sizes: np.ndarray, below: float, rng: np.random.Generator) -> np.ndarray:
    """Offsets t_j − b of the realizable threshold ERM of each shard, for a boundary at b = ``below``.

    The shard's points below b (Binomial(size, b)) are labelled 0, the rest 1 (positives above b;
    for the right end of an interval, mirror the axis). The ERM cut is the midpoint between the
    largest 0 and the smallest 1: offset (d_above − d_below)/2. A shard with no point below
    has t = −inf (all ones), with none above +inf, as :func:`threshold_erm` returns.
    """
    if not 0.0 < below < 1.0:
        raise ValueError("below must be in (0, 1)")
    a = rng.binomial(sizes, below)
    c = sizes - a
    d_lo = _extreme_distance(a, below, rng)
    d_hi = _extreme_distance(c, 1.0 - below, rng)
    off = 0.5 * (d_hi - d_lo)
    off = np.where(a == 0, -np.inf, off)
    return np.where(c == 0, np.inf, off)


def segmented_threshold_erm(x_sorted: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """0–1 ERM threshold of each segment of already sorted points, without sorting.

    ``x_sorted`` holds segment after segment (``counts[j]`` points each, ascending within a
    segment), ``y`` their labels. Same rule as :func:`~pate_stab.theory.erm_classes.threshold_erm`:
    the cut after position p (points ≤ p predicted 0) costs zeros + Σ_{≤p}(2y − 1); the first
    minimising cut wins, the empty prefix (t = −inf) when no cut is below 0; the cut is the
    midpoint to the next point, +inf after the segment's last point. Returns (k,) thresholds.
    """
    k = counts.shape[0]
    ends = np.cumsum(counts)
    starts = ends - counts
    cs = np.cumsum(2 * y.astype(np.int64) - 1)
    base = np.where(starts > 0, cs[np.maximum(starts - 1, 0)], 0)
    prefix = cs - np.repeat(base, counts)
    t = np.full(k, -np.inf)
    has = counts > 0
    if not has.any():
        return t
    mins = np.full(k, np.iinfo(np.int64).max)
    mins[has] = np.minimum.reduceat(prefix, starts[has])
    use = has & (mins < 0)
    # the first position of each segment's minimum: hits are in order, segments too
    hp = np.flatnonzero(prefix == np.repeat(mins, counts))
    sh = np.searchsorted(ends, hp, side="right")
    lead = np.ones(hp.shape[0], dtype=bool)
    lead[1:] = sh[1:] != sh[:-1]
    first = np.full(k, prefix.shape[0])
    first[sh[lead]] = hp[lead]
    f = first[use]
    last = f + 1 >= ends[use]
    nxt = np.minimum(f + 1, x_sorted.shape[0] - 1)
    t[use] = np.where(last, np.inf, 0.5 * (x_sorted[f] + x_sorted[nxt]))
    return t


def agnostic_offsets(
    sizes: np.ndarray,
    noise: float,
    rng: np.random.Generator,
    *,
    window: float = 16.0,
) -> tuple[np.ndarray, float]:
    """Offsets of the 0–1 ERM threshold of each shard under label noise η, from its window only.

    Shard j gets Binomial(size_j, 2W) points in [−W, W], W = window/mean size (``window``
    expected points per side), drawn already sorted (uniform order statistics as normalised
    cumulative sums of Exp(1) spacings), clean label 1[offset ≥ 0] flipped w.p. η, and
    :func:`segmented_threshold_erm` on them. A cut at ±inf (one label throughout the window) is
    put at the window edge ∓W. Returns (offsets, W).
    """
    half = float(window) / max(float(sizes.mean()), 1.0)
    if 2 * half >= 1.0:
        raise ValueError("window covers the whole domain: use more points per shard")
    counts = rng.binomial(sizes, 2 * half)
    x = sorted_window_points(counts, half, rng)
    y = (x >= 0).astype(np.int64)
    y = np.where(rng.random(x.shape[0]) < noise, 1 - y, y)
    t = segmented_threshold_erm(x, y, counts)
    return np.clip(t, -half, half), half


def sorted_window_points(counts: np.ndarray, half: float, rng: np.random.Generator) -> np.ndarray:
    """``counts[j]`` uniform points on [−half, half] per shard, shard after shard, ascending within each.

    Drawn already sorted: uniform order statistics as normalised cumulative sums of Exp(1) spacings.
    """
    k = counts.shape[0]
    # c_j + 1 spacings per shard; point i of shard j at −W + 2W·(E_1 + … + E_i)/(E_1 + … + E_{c_j+1})
    spc = rng.exponential(size=int(counts.sum()) + k)
    cs = np.cumsum(spc)
    ends1 = np.cumsum(counts + 1)
    starts1 = ends1 - (counts + 1)
    before = np.where(starts1 > 0, cs[np.maximum(starts1 - 1, 0)], 0.0)
    total = cs[ends1 - 1] - before
    within = (cs - np.repeat(before, counts + 1)) / np.repeat(total, counts + 1)
    # the last cumulative sum of each shard is the normaliser, not a point
    return -half + 2.0 * half * np.delete(within, ends1 - 1)


def realizable_erm_error_limit(n: float, boundaries: int = 1) -> float:
    """E|t̂ − b| of the midpoint ERM on n uniform points, Poisson limit: 1/(2n) per boundary."""
    return boundaries / (2.0 * n)


def distance_to_instability_np(ones: np.ndarray, k: int) -> np.ndarray:
    """max(0, ⌈|2·ones − k|/2⌉ − 1): the releaser's distance (DESIGN fact 2) for binary votes."""
    gap = np.abs(2 * ones.astype(np.int64) - k)
    return np.maximum((gap + 1) // 2 - 1, 0)


@dataclass
class NearQueries:
    """Queries near one boundary that the releaser must see, and the far ones counted instead.

    Attributes:
        offsets: (N,) query offsets from b (in the boundary's orientation: label 1 for offset ≥ 0).
        ones: (N,) teachers voting 1 at each query.
        clean: (N,) target labels.
        far_wrong: far queries whose majority vote is wrong (answered wrong w.p. ≥ 1 − p each).
        near_length: total length of the near steps; lo, hi: their span.
    """

    offsets: np.ndarray
    ones: np.ndarray
    clean: np.ndarray
    far_wrong: int
    near_length: float
    lo: float
    hi: float


def near_queries(offsets: np.ndarray, m: int, cutoff: float, rng: np.random.Generator) -> NearQueries:
    """Draw the queries (uniform density m per unit length) whose distance is below ``cutoff``.

    ``offsets`` are the teachers' thresholds minus b in the orientation where label 1 is
    offset ≥ 0 (a teacher votes 1 at x iff its offset ≤ x); ±inf allowed.
    """
    k = offsets.shape[0]
    srt = np.sort(offsets)
    finite = srt[np.isfinite(srt)]
    brk = np.unique(np.concatenate([finite, [0.0]]))
    # segment i = [brk[i], brk[i+1]); ones there = #{offset <= brk[i]}
    ones = np.searchsorted(srt, brk[:-1], side="right")
    lengths = np.diff(brk)
    dist = distance_to_instability_np(ones, k)
    clean = (brk[:-1] >= 0).astype(np.int64)
    majority = (2 * ones > k).astype(np.int64)
    near = dist < cutoff
    far_wrong_len = float(lengths[(~near) & (majority != clean)].sum())
    # the unbounded ends: below all teachers 0 votes for 1, above all k votes: both far and right
    # (checked, so that a teacher set with a near end is an error, not a silent miss)
    if distance_to_instability_np(np.array([0]), k)[0] < cutoff:
        raise ValueError("cutoff exceeds the distance of a unanimous vote: k too small for this cutoff")
    near_len = float(lengths[near].sum())
    count = int(rng.binomial(m, min(1.0, near_len))) if near_len > 0 else 0
    far_wrong = int(rng.binomial(m, min(1.0, far_wrong_len))) if far_wrong_len > 0 else 0
    if count:
        idx = np.nonzero(near)[0]
        w = lengths[idx] / near_len
        seg = idx[rng.choice(idx.shape[0], size=count, p=w)]
        q = brk[seg] + rng.random(count) * lengths[seg]
        q_ones = ones[seg]
        q_clean = clean[seg]
    else:
        q = np.empty(0)
        q_ones = np.empty(0, dtype=np.int64)
        q_clean = np.empty(0, dtype=np.int64)
    lo = float(brk[:-1][near].min()) if near.any() else 0.0
    hi = float(brk[1:][near].max()) if near.any() else 0.0
    return NearQueries(q, q_ones, q_clean, far_wrong, near_len, lo, hi)


def student_offset(
    nq: NearQueries, labels: np.ndarray, teacher_offsets: np.ndarray, m: int, rng: np.random.Generator
) -> float:
    """Offset of the student's ERM threshold (Alg 5: ⊥ dropped) near one boundary.

    The answered near queries plus the nearest far query on each side of the near span (label of
    the majority there, repeated so that no cut crosses it, which on the full query set costs an
    error for nothing: the far side holds no near query). With no near span, the sentinels sit
    around the majority vote's own switch point.
    """
    if nq.near_length > 0:
        lo, hi = nq.lo, nq.hi
    else:
        srt = np.sort(teacher_offsets)
        mid = srt[(srt.shape[0] - 1) // 2]
        lo = hi = float(mid) if np.isfinite(mid) else 0.0
    left = lo - rng.exponential(1.0 / m)
    right = hi + rng.exponential(1.0 / m)
    ans = labels >= 0
    reps = int(ans.sum()) + 1
    x = np.concatenate([nq.offsets[ans], np.full(reps, left), np.full(reps, right)])
    y = np.concatenate([labels[ans], np.zeros(reps, dtype=np.int64), np.ones(reps, dtype=np.int64)])
    t, _ = threshold_erm(torch.from_numpy(x), torch.from_numpy(y.astype(np.int64)))
    return float(np.clip(t.numpy()[0], left, right))
