"""Fast exact simulation of BTT18 §4's releaser and learners for realizable halfspaces in R² (V = 3).

The maximum-vertical-margin ERM of each shard on a window of its points that is certified not to
change it, the near queries in a band around the teachers' lines, and the student's ERM, built on
:mod:`pate_stab.repro.pac_sim` (the section below says how each is sampled exactly). The agnostic
halfspaces simulated, homogeneous ones (V = 2), are in :mod:`pate_stab.repro.pac_sim_homogeneous`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from pate_stab.repro.pac_sim import (
    distance_to_instability_np,
)

__all__ = [
    "line_disagreement",
    "max_vertical_margin",
    "halfspace_realizable_lines",
    "near_vote_range",
    "HalfspaceQueries",
    "halfspace_near_queries",
    "halfspace_student",
]


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
# halfspaces simulated are the homogeneous ones (V = 2), in :mod:`pate_stab.repro.pac_sim_homogeneous`.


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
    band_lo, band_hi = _vote_band(alpha, beta, edges, o_lo, o_hi)
    if (band_lo < -0.5).any() or (band_hi > 0.5).any():
        raise ValueError("the teachers' vote band leaves the square: use more points per shard")
    margin = float(margin_points) * bins / max(m, 1)
    margin_lo = np.minimum(margin, band_lo + 0.5)  # a margin that reaches the edge leaves nothing unseen
    margin_hi = np.minimum(margin, 0.5 - band_hi)
    lower_m = band_lo - margin_lo
    flat = _region_areas(band_lo, band_hi, margin_lo, margin_hi, width).ravel()
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


def _vote_band(
    alpha: np.ndarray, beta: np.ndarray, edges: np.ndarray, o_lo: int, o_hi: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per u-bin, the v band outside which the vote count is certainly far (:func:`halfspace_near_queries`):
    the o_lo-th smallest of the lines' lowest values in the bin, and the (o_hi + 1)-th smallest of their highest."""
    bins = edges.shape[0] - 1
    band_lo, band_hi = np.empty(bins), np.empty(bins)
    for b in range(bins):
        va, vb = alpha * edges[b] + beta, alpha * edges[b + 1] + beta
        lo_j, hi_j = np.minimum(va, vb), np.maximum(va, vb)
        band_lo[b] = np.partition(lo_j, o_lo - 1)[o_lo - 1]
        band_hi[b] = np.partition(hi_j, o_hi)[o_hi]
    return band_lo, np.maximum(band_hi, band_lo)


def _region_areas(
    band_lo: np.ndarray, band_hi: np.ndarray, margin_lo: np.ndarray, margin_hi: np.ndarray, width: float
) -> np.ndarray:
    """(bins, 5) areas per bin: band, lower margin, upper margin, wrong below (v ∈ [0, band_lo − margin)),
    wrong above (v ∈ [band_hi + margin, 0))."""
    lower_m = band_lo - margin_lo
    upper_m = band_hi + margin_hi
    return (
        np.stack(
            [
                band_hi - band_lo,
                margin_lo,
                margin_hi,
                np.maximum(lower_m, 0.0),  # majority 0, target 1
                np.maximum(-upper_m, 0.0),  # majority 1, target 0
            ],
            axis=1,
        )
        * width
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
