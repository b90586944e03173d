"""Fast exact simulation of BTT18 §4's releaser and learners for agnostic homogeneous halfspaces in R² (V = 2).

The exact 0–1 ERM of a shard by an angular sweep, the window walk of
:mod:`pate_stab.repro.pac_sim` around the target's two boundary angles, and the near queries on
both boundaries (the section below says how each is sampled exactly).
"""

from __future__ import annotations

import numpy as np

from pate_stab.repro.pac_sim import segmented_threshold_erm, sorted_window_points

__all__ = [
    "wrap_turns",
    "homogeneous_disagreement",
    "homogeneous_error",
    "homogeneous_erm",
    "window_direction_erm",
    "homogeneous_agnostic_directions",
]


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
    x = sorted_window_points(counts, half, rng)
    upper = np.asarray(rng.random(x.shape[0]) < 0.5)
    clean = np.where(upper, x <= 0, x >= 0).astype(np.int64)
    y = np.where(rng.random(x.shape[0]) < noise, 1 - clean, clean)
    t = window_direction_erm(x, upper, y, counts)
    return np.clip(t, -half, half), half
