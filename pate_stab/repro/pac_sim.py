"""Fast exact simulation of BTT18 §4's releaser and learners: 1-D classes, halfspaces in R².

Halfspaces: general ones (V = 3) realizable, homogeneous ones (V = 2) agnostic (see their
sections at the end of the module).

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
    "line_disagreement",
    "max_vertical_margin",
    "halfspace_realizable_lines",
    "near_vote_range",
    "HalfspaceQueries",
    "halfspace_near_queries",
    "halfspace_student",
    "realizable_offsets",
    "agnostic_offsets",
    "segmented_threshold_erm",
    "realizable_erm_error_limit",
    "NearQueries",
    "near_queries",
    "student_offset",
    "distance_to_instability_np",
    "wrap_turns",
    "homogeneous_disagreement",
    "homogeneous_error",
    "homogeneous_erm",
    "window_direction_erm",
    "homogeneous_agnostic_directions",
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
    x = _sorted_window_points(counts, half, rng)
    y = (x >= 0).astype(np.int64)
    y = np.where(rng.random(x.shape[0]) < noise, 1 - y, y)
    t = segmented_threshold_erm(x, y, counts)
    return np.clip(t, -half, half), half


def _sorted_window_points(counts: np.ndarray, half: float, rng: np.random.Generator) -> np.ndarray:
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


# ---------------------------------------------------------------------------------------------
# Halfspaces in R² (V = 3), realizable
# ---------------------------------------------------------------------------------------------
#
# Domain [0, 1]², target 1[x₂ ≥ ½]. Points are written (u, v) = (x₁, x₂ − ½): uniform on
# [0, 1] × [−½, ½], label 1[v ≥ 0]. A teacher's halfspace is 1[v ≥ αu + β] (a line v = αu + β;
# every consistent halfspace is an ERM of the realizable class, V = 3, and the rule below picks
# one). Its disagreement with the target is the area between the two lines over u ∈ [0, 1]
# (:func:`line_disagreement`, exact).
#
# ERM rule (a tie-break among the consistent halfspaces): the maximum *vertical* margin,
# argmax_α G(α), G(α) = min_{y=1}(v − αu) − max_{y=0}(v − αu), β the midpoint of the gap. G is
# concave (a min of linear functions minus a max of linear ones), so bisection on its
# subgradient finds α*. The rule is equivariant under shears x₂ ↦ x₂ + a·x₁ + c (vertical
# distances and areas are preserved), so a tilted target x₂ ≥ ½ + a(x₁ − ½) gives the same
# errors as long as the window below stays inside the square; the horizontal target keeps the
# (u, v) domain a rectangle, which the window's growth up to the whole square needs.
#
# Window: each shard draws only its points with |v| ≤ W (W = ``window``/size: ``window``
# expected points per side), Multinomial(size; W, W, 1 − 2W) of them. The window's α* is the
# full sample's α* when the points outside cannot bind at α* — positives outside have
# v − α*u > W − max(α*, 0), negatives < −W + max(−α*, 0) — which is checked per shard
# (:func:`_window_binds`). A shard that fails gets the points of a 4× wider window added (the
# annulus points drawn conditionally on lying outside the old window, so the shard's sample
# keeps its law) and is solved again, up to the whole square (W = ½), where nothing is outside.
#
# Agnostic halfspaces of this (non-homogeneous, V = 3) class are not simulated: under label noise
# the 0–1 ERM can be moved by points outside any window (no certificate like the one above
# exists), and the exact 0–1 ERM of a shard in R² (an angular sweep, O(p² log p) for p points) at
# the 10⁵–10⁶ shards Alg 4 line 1 prescribes is beyond this CPU simulation. The agnostic
# halfspaces simulated are the homogeneous ones (V = 2), at the end of this module.


def line_disagreement(alpha: np.ndarray, beta: np.ndarray) -> np.ndarray:
    """∫₀¹ |αu + β| du: the area where 1[v ≥ αu + β] and 1[v ≥ 0] disagree (float64, exact).

    No sign change on [0, 1]: |β + α/2|; a root inside: (β² + (α + β)²)/(2|α|).
    """
    a = np.asarray(alpha, dtype=np.float64)
    b = np.asarray(beta, dtype=np.float64)
    e = b + a
    cross = (b * e) < 0
    safe = np.where(cross, np.abs(a), 1.0)
    return np.where(cross, (b * b + e * e) / (2.0 * safe), np.abs(b + 0.5 * a))


def _segment_extreme(vals: np.ndarray, seg: np.ndarray, k: int, *, lowest: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per segment (``seg`` sorted): min (``lowest``) or max of ``vals`` (±inf if empty), and where."""
    ext = np.full(k, np.inf if lowest else -np.inf)
    pos = np.full(k, -1)
    if vals.shape[0]:
        starts = np.flatnonzero(np.r_[True, seg[1:] != seg[:-1]])
        red = np.minimum.reduceat(vals, starts) if lowest else np.maximum.reduceat(vals, starts)
        ext[seg[starts]] = red
        hit = np.flatnonzero(vals == ext[seg])
        pos[seg[hit]] = hit
    return ext, pos


def _prune(u: np.ndarray, v: np.ndarray, seg: np.ndarray, lo: np.ndarray, hi: np.ndarray, k: int, lowest: bool):
    """Keep the points that can attain the segment's min (max) of v − αu for some α in [lo, hi].

    A point strictly above (below) the attaining point at lo, or at hi, at both ends of the
    bracket never attains it inside (the difference of two linear functions is monotone).
    """
    sgn = 1.0 if lowest else -1.0
    keep = np.ones(u.shape[0], dtype=bool)
    for ref in (lo, hi):
        _, at = _segment_extreme(sgn * (v - ref[seg] * u), seg, k, lowest=True)
        ru, rv = u[at[seg]], v[at[seg]]
        d_lo = sgn * ((v - lo[seg] * u) - (rv - lo[seg] * ru))
        d_hi = sgn * ((v - hi[seg] * u) - (rv - hi[seg] * ru))
        keep &= ~((d_lo > 0) & (d_hi > 0))
    return keep


def _first_two(u: np.ndarray, v: np.ndarray, seg: np.ndarray, k: int) -> tuple[np.ndarray, ...]:
    """Per segment (≤ 2 points each, ``seg`` sorted): its first and second point (the first twice if one)."""
    cnt = np.bincount(seg, minlength=k)
    start = np.cumsum(cnt) - cnt
    first = np.minimum(start, max(u.shape[0] - 1, 0))
    second = np.where(cnt >= 2, start + 1, first)
    return u[first], v[first], u[second], v[second], cnt


def max_vertical_margin(
    u_pos: np.ndarray, v_pos: np.ndarray, c_pos: np.ndarray,
    u_neg: np.ndarray, v_neg: np.ndarray, c_neg: np.ndarray,
    bracket: np.ndarray, *, iters: int = 64, prune_every: int = 2, finish_after: int = 6,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """Per segment (shard): α* = argmax G(α) on [−bracket, bracket], β*, and the gap's ends.

    Points come segment after segment (``c_pos[j]`` positives and ``c_neg[j]`` negatives of
    segment j). Bisection on G's subgradient; every ``prune_every`` steps the points that cannot
    attain the min / max inside the current bracket are dropped (:func:`_prune`). Once a segment
    has at most two candidates per class, G on the bracket has at most one breakpoint per
    class, and α* is the best of the bracket's ends and those breakpoints (exact); segments that
    never get there stop at the bracket's midpoint after ``iters`` steps. Returns (α*, β* =
    (P + N)/2, P = min_pos(v − α*u), N = max_neg(v − α*u)); P = +inf or N = −inf when a
    segment has no point of that class.
    """
    k = c_pos.shape[0]
    seg_p0, seg_n0 = np.repeat(np.arange(k), c_pos), np.repeat(np.arange(k), c_neg)
    alpha = np.full(k, np.nan)
    alpha[(c_pos == 0) | (c_neg == 0)] = 0.0  # one class only: G is ±inf, α* = 0 by convention
    act = np.flatnonzero(np.isnan(alpha))  # the segments still searched; points carry local ids
    local = np.full(k, -1)
    local[act] = np.arange(act.size)
    kp0, kn0 = local[seg_p0] >= 0, local[seg_n0] >= 0
    up, vp, sp = u_pos[kp0], v_pos[kp0], local[seg_p0[kp0]]
    un, vn, sn = u_neg[kn0], v_neg[kn0], local[seg_n0[kn0]]
    lo, hi = -bracket[act].astype(np.float64), bracket[act].astype(np.float64)
    for it in range(iters):
        if not act.size:
            break
        ka = act.size
        if it % prune_every == 0:
            kp = _prune(up, vp, sp, lo, hi, ka, True)
            up, vp, sp = up[kp], vp[kp], sp[kp]
            kn = _prune(un, vn, sn, lo, hi, ka, False)
            un, vn, sn = un[kn], vn[kn], sn[kn]
            if it >= finish_after:
                cp, cn = np.bincount(sp, minlength=ka), np.bincount(sn, minlength=ka)
                fin = (cp <= 2) & (cn <= 2)
                if fin.any():
                    fp, fn_ = fin[sp], fin[sn]
                    idx = np.flatnonzero(fin)
                    renum = np.full(ka, -1)
                    renum[idx] = np.arange(idx.size)
                    pu1, pv1, pu2, pv2, pc = _first_two(up[fp], vp[fp], renum[sp[fp]], idx.size)
                    nu1, nv1, nu2, nv2, nc = _first_two(un[fn_], vn[fn_], renum[sn[fn_]], idx.size)
                    flo, fhi = lo[idx], hi[idx]
                    with np.errstate(divide="ignore", invalid="ignore"):
                        bp = np.where((pc == 2) & (pu1 != pu2), (pv1 - pv2) / (pu1 - pu2), flo)
                        bn = np.where((nc == 2) & (nu1 != nu2), (nv1 - nv2) / (nu1 - nu2), flo)
                    cands = np.stack([flo, fhi, np.clip(bp, flo, fhi), np.clip(bn, flo, fhi)], axis=1)
                    g = np.minimum(
                        pv1[:, None] - cands * pu1[:, None], pv2[:, None] - cands * pu2[:, None]
                    ) - np.maximum(nv1[:, None] - cands * nu1[:, None], nv2[:, None] - cands * nu2[:, None])
                    alpha[act[idx]] = cands[np.arange(idx.size), np.argmax(g, axis=1)]
                    keep = ~fin
                    renum = np.cumsum(keep) - 1
                    kp, kn = keep[sp], keep[sn]
                    up, vp, sp = up[kp], vp[kp], renum[sp[kp]]
                    un, vn, sn = un[kn], vn[kn], renum[sn[kn]]
                    act, lo, hi = act[keep], lo[keep], hi[keep]
                    continue
        mid = 0.5 * (lo + hi)
        _, ip = _segment_extreme(vp - mid[sp] * up, sp, ka, lowest=True)
        _, ineg = _segment_extreme(vn - mid[sn] * un, sn, ka, lowest=False)
        # subgradient of G at mid: −u(argmin positive) + u(argmax negative); > 0: the optimum is right of mid
        right = un[ineg] - up[ip] > 0
        lo = np.where(right, mid, lo)
        hi = np.where(right, hi, mid)
    if act.size:
        alpha[act] = 0.5 * (lo + hi)
    p, _ = _segment_extreme(v_pos - alpha[seg_p0] * u_pos, seg_p0, k, lowest=True)
    n, _ = _segment_extreme(v_neg - alpha[seg_n0] * u_neg, seg_n0, k, lowest=False)
    both = np.isfinite(p) & np.isfinite(n)
    beta = np.where(both, 0.5 * (np.where(both, p, 0.0) + np.where(both, n, 0.0)), np.where(np.isfinite(p), p, n))
    return alpha, beta, p, n


def _window_binds(alpha: np.ndarray, p: np.ndarray, n: np.ndarray, half: np.ndarray, bracket: np.ndarray) -> np.ndarray:
    """True where points outside |v| ≤ half might bind at α* (or α* sits at the bracket's edge)."""
    ok_pos = half - np.maximum(alpha, 0.0) >= p
    ok_neg = -half + np.maximum(-alpha, 0.0) <= n
    inside = np.abs(alpha) < bracket * (1.0 - 1e-9)
    whole = half >= 0.5
    return ~(whole | (ok_pos & ok_neg & inside & np.isfinite(p) & np.isfinite(n)))


def halfspace_realizable_lines(
    sizes: np.ndarray, rng: np.random.Generator, *, window: float = 4.0, grow: float = 4.0
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Lines (α_j, β_j) of each shard's max-vertical-margin ERM (see the section comment above).

    Returns (α, β, info) with info = {"rounds": window growths used, "whole": shards that needed
    the whole square, "points": points drawn}.
    """
    sizes = np.asarray(sizes, dtype=np.int64)
    k = sizes.shape[0]
    half = np.minimum(0.5, float(window) / np.maximum(sizes, 1).astype(np.float64))
    # the shard's points with |v| ≤ half, drawn per class: Multinomial(size; half, half, 1 − 2·half)
    counts = rng.binomial(sizes, 2.0 * half)
    pos = rng.binomial(counts, 0.5)
    neg = counts - pos
    pts_u = [rng.random(int(pos.sum())), rng.random(int(neg.sum()))]
    pts_v = [rng.random(int(pos.sum())) * np.repeat(half, pos), -rng.random(int(neg.sum())) * np.repeat(half, neg)]
    owner = [np.repeat(np.arange(k), pos), np.repeat(np.arange(k), neg)]
    alpha = np.zeros(k)
    beta = np.zeros(k)
    todo = np.arange(k)
    outside = sizes - counts  # points not yet drawn (|v| > half)
    rounds = 0
    drawn = int(counts.sum())
    while todo.size:
        sel_p = np.isin(owner[0], todo)
        sel_n = np.isin(owner[1], todo)
        remap = np.full(k, -1)
        remap[todo] = np.arange(todo.size)
        op, on = remap[owner[0][sel_p]], remap[owner[1][sel_n]]
        ip, inn = np.argsort(op, kind="stable"), np.argsort(on, kind="stable")
        cp = np.bincount(op, minlength=todo.size)
        cn = np.bincount(on, minlength=todo.size)
        br = 4.0 * half[todo] + 1.0 / np.maximum(sizes[todo], 1)
        a, b, p, n = max_vertical_margin(
            pts_u[0][sel_p][ip], pts_v[0][sel_p][ip], cp, pts_u[1][sel_n][inn], pts_v[1][sel_n][inn], cn, br
        )
        alpha[todo], beta[todo] = a, b
        bad = _window_binds(a, p, n, half[todo], br)
        # a whole-square shard with one class only: every point on one side; the ERM line at the edge
        empty = (half[todo] >= 0.5) & ~(np.isfinite(p) & np.isfinite(n))
        alpha[todo[empty]] = 0.0
        beta[todo[empty]] = np.where(np.isfinite(p[empty]), -0.5, 0.5)
        todo = todo[bad]
        if not todo.size:
            break
        rounds += 1
        old = half[todo]
        new = np.minimum(0.5, old * grow)
        # annulus old < |v| ≤ new, per side, among the points outside the old window
        q = (new - old) / np.maximum(1.0 - 2.0 * old, 1e-300)
        add_p = rng.binomial(outside[todo], np.minimum(q, 1.0))
        add_n = rng.binomial(outside[todo] - add_p, np.minimum(q / np.maximum(1.0 - q, 1e-300), 1.0))
        outside[todo] -= add_p + add_n
        drawn += int(add_p.sum() + add_n.sum())
        ro, rn = np.repeat(old, add_p), np.repeat(old, add_n)
        wo, wn = np.repeat(new - old, add_p), np.repeat(new - old, add_n)
        pts_u[0] = np.concatenate([pts_u[0], rng.random(ro.shape[0])])
        pts_v[0] = np.concatenate([pts_v[0], ro + rng.random(ro.shape[0]) * wo])
        owner[0] = np.concatenate([owner[0], np.repeat(todo, add_p)])
        pts_u[1] = np.concatenate([pts_u[1], rng.random(rn.shape[0])])
        pts_v[1] = np.concatenate([pts_v[1], -(rn + rng.random(rn.shape[0]) * wn)])
        owner[1] = np.concatenate([owner[1], np.repeat(todo, add_n)])
        half[todo] = new
    info = {"rounds": rounds, "whole": int((half >= 0.5).sum()), "points": drawn}
    return alpha, beta, info


@dataclass
class HalfspaceQueries:
    """Queries near the teachers' vote boundary (drawn), and the far ones counted or kept for the student.

    Attributes:
        u, v, ones, clean: the near queries (distance to instability below the cutoff).
        far_wrong: far queries whose majority vote is wrong.
        far_u, far_v, far_label: far queries kept for the student (band and margins), majority labels.
        margin_lo, margin_hi: per-bin heights of the margins below and above the band (up to the
            square's edge); band_lo, band_hi: per bin.
        candidates: queries whose votes were counted exactly.
    """

    u: np.ndarray
    v: np.ndarray
    ones: np.ndarray
    clean: np.ndarray
    far_wrong: int
    far_u: np.ndarray
    far_v: np.ndarray
    far_label: np.ndarray
    margin_lo: np.ndarray
    margin_hi: np.ndarray
    band_lo: np.ndarray
    band_hi: np.ndarray
    candidates: int


def near_vote_range(k: int, cutoff: float) -> tuple[int, int]:
    """(o_lo, o_hi): the vote counts for 1 whose distance to instability is below ``cutoff`` (contiguous)."""
    o = np.arange(k + 1)
    near = distance_to_instability_np(o, k) < cutoff
    if near[0] or near[-1]:
        raise ValueError("cutoff exceeds the distance of a unanimous vote: k too small for this cutoff")
    idx = np.nonzero(near)[0]
    return int(idx[0]), int(idx[-1])


def halfspace_near_queries(
    alpha: np.ndarray,
    beta: np.ndarray,
    m: int,
    cutoff: float,
    rng: np.random.Generator,
    *,
    bins: int = 32,
    margin_points: float = 16.0,
) -> HalfspaceQueries:
    """Queries uniform on [0, 1]² (m of them) against k teacher lines v = α_j u + β_j.

    A teacher votes 1 at (u, v) iff v ≥ α_j u + β_j. Per u-bin [u_a, u_b) each line lies in
    [lo_j, hi_j] (its values at the bin's ends), so #{hi_j ≤ v} ≤ ones(u, v) ≤ #{lo_j ≤ v}:
    below band_lo = the o_lo-th smallest lo_j the votes are certainly ≤ o_lo − 1 (far, majority
    0), from band_hi = the (o_hi + 1)-th smallest hi_j up certainly ≥ o_hi + 1 (far, majority 1),
    with [o_lo, o_hi] the near vote counts (:func:`near_vote_range`). Only the queries in the
    band get their votes counted exactly (against the lines that cross the band; the ones below
    it vote 1); those whose distance is below the cutoff are the near queries. Queries in a
    margin of ``margin_points`` expected queries per bin above and below the band are drawn too
    (the student's ERM needs the far queries next to the boundary); further out only the ones
    whose majority is wrong (v ≥ 0 below the band, v < 0 above it) are counted. All counts are
    one Multinomial(m; region areas) draw.
    """
    k = alpha.shape[0]
    o_lo, o_hi = near_vote_range(k, cutoff)
    edges = np.linspace(0.0, 1.0, bins + 1)
    width = 1.0 / bins
    band_lo, band_hi = np.empty(bins), np.empty(bins)
    for b in range(bins):
        va, vb = alpha * edges[b] + beta, alpha * edges[b + 1] + beta
        lo_j, hi_j = np.minimum(va, vb), np.maximum(va, vb)
        band_lo[b] = np.partition(lo_j, o_lo - 1)[o_lo - 1]
        band_hi[b] = np.partition(hi_j, o_hi)[o_hi]
    band_hi = np.maximum(band_hi, band_lo)
    if (band_lo < -0.5).any() or (band_hi > 0.5).any():
        raise ValueError("the teachers' vote band leaves the square: use more points per shard")
    margin = float(margin_points) * bins / max(m, 1)
    margin_lo = np.minimum(margin, band_lo + 0.5)  # a margin that reaches the edge leaves nothing unseen
    margin_hi = np.minimum(margin, 0.5 - band_hi)
    # regions per bin: band, lower margin, upper margin, wrong below (v ∈ [0, band_lo − margin)), wrong above
    lower_m = band_lo - margin_lo
    upper_m = band_hi + margin_hi
    areas = (
        np.stack(
            [
                band_hi - band_lo,
                margin_lo,
                margin_hi,
                np.maximum(lower_m, 0.0),  # v ∈ [0, band_lo − margin): majority 0, target 1
                np.maximum(-upper_m, 0.0),  # v ∈ [band_hi + margin, 0): majority 1, target 0
            ],
            axis=1,
        )
        * width
    )
    flat = areas.ravel()
    if flat.sum() > 1.0:
        raise ValueError("the band covers more than the square")
    draw = rng.multinomial(m, np.append(flat, 1.0 - flat.sum()))[:-1].reshape(bins, 5)
    far_wrong = int(draw[:, 3].sum() + draw[:, 4].sum())
    us, vs, ones_l, far_u, far_v, far_lab = [], [], [], [], [], []
    for b in range(bins):
        nb = int(draw[b, 0])
        if nb:
            u = edges[b] + rng.random(nb) * width
            v = band_lo[b] + rng.random(nb) * (band_hi[b] - band_lo[b])
            va, vb = alpha * edges[b] + beta, alpha * edges[b + 1] + beta
            lo_j, hi_j = np.minimum(va, vb), np.maximum(va, vb)
            below = hi_j < band_lo[b]
            cross = (~below) & (lo_j < band_hi[b])
            base = int(below.sum())
            ones = base + (alpha[cross][None, :] * u[:, None] + beta[cross][None, :] <= v[:, None]).sum(axis=1)
            us.append(u)
            vs.append(v)
            ones_l.append(ones)
        for col, lo_v, lab, hgt in ((1, lower_m[b], 0, margin_lo[b]), (2, band_hi[b], 1, margin_hi[b])):
            c = int(draw[b, col])
            if c:
                far_u.append(edges[b] + rng.random(c) * width)
                far_v.append(lo_v + rng.random(c) * hgt)
                far_lab.append(np.full(c, lab, dtype=np.int64))
    u = np.concatenate(us) if us else np.empty(0)
    v = np.concatenate(vs) if vs else np.empty(0)
    ones = np.concatenate(ones_l).astype(np.int64) if ones_l else np.empty(0, dtype=np.int64)
    near = distance_to_instability_np(ones, k) < cutoff
    majority = (2 * ones > k).astype(np.int64)
    clean = (v >= 0).astype(np.int64)
    fu = np.concatenate([*far_u, u[~near]]) if far_u or (~near).any() else np.empty(0)
    fv = np.concatenate([*far_v, v[~near]]) if far_v or (~near).any() else np.empty(0)
    fl = np.concatenate([*far_lab, majority[~near]]) if far_lab or (~near).any() else np.empty(0, dtype=np.int64)
    far_wrong += int((fl != (fv >= 0)).sum())
    return HalfspaceQueries(
        u[near],
        v[near],
        ones[near],
        clean[near],
        far_wrong,
        fu,
        fv,
        fl.astype(np.int64),
        margin_lo,
        margin_hi,
        band_lo,
        band_hi,
        int(u.shape[0]),
    )


def halfspace_student(hq: HalfspaceQueries, labels: np.ndarray) -> tuple[float, float, bool, bool]:
    """The student's (Alg 5) ERM line on the answered near queries and the kept far queries.

    The same max-vertical-margin rule as the teachers. Far queries outside the margins do not
    bind when the check of :func:`_window_binds`' kind holds per bin (returned: ``verified``);
    ``separable``: the labels admit a consistent line (gap > 0), so the rule is a 0–1 ERM.
    Returns (α, β, separable, verified).
    """
    ans = labels >= 0
    u = np.concatenate([hq.u[ans], hq.far_u])
    v = np.concatenate([hq.v[ans], hq.far_v])
    y = np.concatenate([labels[ans].astype(np.int64), hq.far_label])
    pos, neg = y == 1, y == 0
    span = float(np.max(np.abs(np.concatenate([hq.band_lo - hq.margin_lo, hq.band_hi + hq.margin_hi]))))
    br = np.array([8.0 * span + 1e-12])
    a, b, p, n = max_vertical_margin(
        u[pos], v[pos], np.array([int(pos.sum())]), u[neg], v[neg], np.array([int(neg.sum())]), br
    )
    alpha, beta = float(a[0]), float(b[0])
    separable = bool(p[0] > n[0])
    bins = hq.band_lo.shape[0]
    edges = np.linspace(0.0, 1.0, bins + 1)
    # unseen queries: below band_lo − margin (labelled 0) or above band_hi + margin (labelled 1), per bin
    line_lo = np.minimum(alpha * edges[:-1], alpha * edges[1:])
    line_hi = np.maximum(alpha * edges[:-1], alpha * edges[1:])
    edge_lo = hq.band_lo - hq.margin_lo <= -0.5  # nothing unseen below
    edge_hi = hq.band_hi + hq.margin_hi >= 0.5
    ok_neg = (edge_lo | (hq.band_lo - hq.margin_lo - line_lo <= n[0])).all()
    ok_pos = (edge_hi | (hq.band_hi + hq.margin_hi - line_hi >= p[0])).all()
    verified = bool(ok_neg and ok_pos and abs(alpha) < br[0] * (1 - 1e-9))
    return alpha, beta, separable, verified


# ---------------------------------------------------------------------------------------------
# Homogeneous halfspaces in R² (V = 2), agnostic
# ---------------------------------------------------------------------------------------------
#
# Class: h_τ(x) = 1[⟨w_τ, x⟩ ≥ 0], w_τ = (cos 2πτ, sin 2πτ), halfspaces through the origin (VC
# dimension 2). Directions and angles are in *turns* (fraction of the circle, wrapped to [−½, ½):
# θ = 2πτ), so that queries uniform on the circle have density m per unit, as on [0, 1] for
# the 1-D classes. Inputs are rotationally symmetric (standard Gaussian, or uniform on the disc:
# a point enters only through its angle φ, uniform on the circle), the target is τ* = 0 (rotation
# invariance makes that no loss), and labels are the target's, flipped with probability η (the
# random label noise of the 1-D agnostic classes; γ = η).
#
# * Error against the distribution (exact, float64): h_τ and h_τ* disagree on two opposite wedges
#   of |τ − τ*| turns each, so P(h_τ ≠ h_τ*) = 2|τ − τ*| (= |θ − θ*|/π), and err(h_τ) = η + (1 −
#   2η)·2|τ − τ*| (:func:`homogeneous_disagreement`, :func:`homogeneous_error`).
# * Exact 0–1 ERM of a shard (:func:`homogeneous_erm`): a point is classified correctly on an arc
#   of half a turn (its label 1: τ ∈ [φ − ¼, φ + ¼]; label 0: the other half), so the empirical
#   error of τ changes only at φ ± ¼. Sorting the 2p events and a cumulative sum of their ±1
#   steps gives the error on every arc between events (the first arc's by direct count); the
#   ERM is the midpoint of the first minimal arc of [−½, ½). Vectorised over shards, O(p log p).
# * Window (:func:`homogeneous_agnostic_directions`): for τ in [−W, W] the error changes only at
#   points within W of the target's two boundary angles ±¼, so a shard's error on that range is
#   a constant plus a walk over those points. Writing a point's offset from its boundary as x
#   (φ = ¼ + x or −¼ + x), direction τ labels it 1 iff x ≤ τ (upper) or x ≥ τ (lower): with the
#   upper points' labels complemented, that is the threshold ERM of
#   :func:`segmented_threshold_erm` on the merged offsets (:func:`window_direction_erm`). The
#   window holds ``window`` expected points on each side of 0 (both boundaries together), as
#   for :func:`agnostic_offsets`, whose walk it is (with the upper labels complemented, the clean
#   merged label is 1[x ≥ 0]); the full ERM leaves it with the same small probability, and an
#   ERM at the window's edge is clipped there (measured in the tests).
# * Queries: near the lower boundary (−¼ + r) teacher j votes 1 iff r ≥ τ_j, the orientation of
#   :func:`near_queries` with offsets τ_j; near the upper one (¼ + q) iff q ≤ τ_j, the same with
#   mirrored offsets −τ_j and query −q. Both boundaries see the same teachers; a query's vote
#   count is exact. The student (Alg 5) is the same threshold ERM on both boundaries' answered
#   near queries merged (upper labels complemented) plus the nearest far query on each side.


def wrap_turns(x: np.ndarray | float) -> np.ndarray:
    """An angle in turns wrapped to [−½, ½) (exact for dyadic inputs)."""
    a = np.asarray(x, dtype=np.float64)
    return a - np.floor(a + 0.5)


def homogeneous_disagreement(direction: np.ndarray | float, target: float = 0.0) -> np.ndarray:
    """P_x(h_τ(x) ≠ h_τ*(x)) = 2|τ − τ*| (turns, wrapped) for rotationally symmetric x: |θ − θ*|/π."""
    return 2.0 * np.abs(wrap_turns(np.asarray(direction, dtype=np.float64) - target))


def homogeneous_error(direction: np.ndarray | float, noise: float, target: float = 0.0) -> np.ndarray:
    """err(h_τ) = η + (1 − 2η)·2|τ − τ*| under labels h_τ*(x) flipped with probability η (float64)."""
    if not 0.0 <= noise < 0.5:
        raise ValueError(f"noise must be in [0, 0.5), got {noise}")
    return noise + (1.0 - 2.0 * noise) * homogeneous_disagreement(direction, target)


def homogeneous_erm(
    phi: np.ndarray, y: np.ndarray, counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact 0–1 ERM direction of each shard over all directions (the angular sweep above).

    ``phi`` (turns) and labels ``y`` come shard after shard (``counts[j]`` points of shard j, any
    order). Candidates are the midpoints of the arcs of [−½, ½) between consecutive distinct
    event angles φ_i ± ¼ (wrapped), −½ and ½ closing the first and last arc; the first arc of
    minimal error wins. A shard without points gets τ = 0. Returns (τ̂, its error count, and the
    arc's ends lo, hi).
    """
    phi = np.asarray(phi, dtype=np.float64)
    y = np.asarray(y).astype(np.int64)
    counts = np.asarray(counts, dtype=np.int64)
    if phi.shape != y.shape or int(counts.sum()) != phi.shape[0] or (counts < 0).any():
        raise ValueError("phi and y must hold counts.sum() points, counts >= 0")
    k = counts.shape[0]
    seg = np.repeat(np.arange(k), counts)
    step = np.where(y == 1, -1, 1)  # at φ − ¼ a label-1 point becomes correct, a label-0 point wrong
    ev = np.concatenate([wrap_turns(phi - 0.25), wrap_turns(phi + 0.25)])
    st = np.concatenate([step, -step])
    es = np.concatenate([seg, seg])
    order = np.lexsort((ev, es))
    ev, st, es = ev[order], st[order], es[order]
    n_ev = ev.shape[0]
    ecount = 2 * counts
    ends = np.cumsum(ecount)
    starts = ends - ecount
    has = counts > 0
    nxt = np.full(n_ev, 0.5)
    if n_ev:
        nxt[:-1] = ev[1:]
        nxt[ends[has] - 1] = 0.5  # the last event's arc runs to ½
    # the error before the first event: each point's two steps cancel, so it is the error after
    # the last event, on the arc [last event, ½) (never empty), counted directly at its midpoint
    hi0 = np.where(has, ev[np.minimum(starts, max(n_ev - 1, 0))] if n_ev else 0.5, 0.5)
    lo_last = np.where(has, ev[np.maximum(ends - 1, 0)] if n_ev else -0.5, -0.5)
    mid_last = 0.5 * (lo_last + 0.5)
    pred = np.abs(wrap_turns(phi - mid_last[seg])) <= 0.25
    err0 = np.bincount(seg, weights=(pred != (y == 1)), minlength=k).astype(np.int64)
    cs = np.cumsum(st)
    base = np.where(starts > 0, cs[np.maximum(starts - 1, 0)], 0) if n_ev else np.zeros(k, dtype=np.int64)
    after = err0[es] + cs - base[es]  # error on the arc after each event
    big = np.iinfo(np.int64).max
    cand = np.where(nxt > ev, after, big)  # an arc of zero length (tied events) is no candidate
    best_after = np.full(k, big)
    if n_ev:
        best_after[has] = np.minimum.reduceat(cand, starts[has])
    cand0 = np.where(hi0 > -0.5, err0, big)
    best = np.minimum(cand0, best_after)
    use0 = cand0 == best
    hit = cand == best[es]
    first = np.full(k, n_ev)
    np.minimum.at(first, es[hit], np.arange(n_ev)[hit])
    f = np.minimum(first, max(n_ev - 1, 0))
    lo = np.where(use0, -0.5, ev[f] if n_ev else -0.5)
    hi = np.where(use0, hi0, nxt[f] if n_ev else 0.5)
    return 0.5 * (lo + hi), best, lo, hi


def window_direction_erm(offsets: np.ndarray, upper: np.ndarray, y: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """ERM direction of each shard over the window, from its points near the boundaries ±¼.

    ``offsets`` x of the points from their boundary (ascending within each shard, shard after
    shard), ``upper`` True for points at ¼ + x, False for −¼ + x, labels ``y``. The threshold
    ERM of the merged offsets with the upper labels complemented (see the section comment);
    ±inf where one merged label wins throughout (the caller clips to the window).
    """
    merged = np.where(upper, 1 - np.asarray(y, dtype=np.int64), np.asarray(y, dtype=np.int64))
    return segmented_threshold_erm(offsets, merged, counts)


def homogeneous_agnostic_directions(
    sizes: np.ndarray, noise: float, rng: np.random.Generator, *, window: float = 10.0
) -> tuple[np.ndarray, float]:
    """ERM direction τ_j (turns) of each shard under label noise η, from its window only.

    Shard j gets Binomial(size_j, 4W) points within W of the boundaries ±¼ (W = window/(2·mean
    size): ``window`` expected points on each side of 0, both boundaries together), each at either
    boundary with probability ½, offsets drawn sorted, the target's label flipped w.p. η, and
    :func:`window_direction_erm`; a cut at ±inf is put at the window's edge. Returns (τ, W).
    """
    if not 0.0 <= noise < 0.5:
        raise ValueError(f"noise must be in [0, 0.5), got {noise}")
    half = float(window) / (2.0 * max(float(np.mean(sizes)), 1.0))
    if 4 * half >= 1.0:
        raise ValueError("window covers the whole circle: use more points per shard")
    counts = rng.binomial(sizes, 4 * half)
    x = _sorted_window_points(counts, half, rng)
    upper = np.asarray(rng.random(x.shape[0]) < 0.5)
    clean = np.where(upper, x <= 0, x >= 0).astype(np.int64)
    y = np.where(rng.random(x.shape[0]) < noise, 1 - clean, clean)
    t = window_direction_erm(x, upper, y, counts)
    return np.clip(t, -half, half), half
