"""Empirical risk minimisers for the PAC-curve concept classes, for many shards at once.

Concept classes (VC dimension V):

* thresholds on [0, 1], ``h_t(x) = 1[x ≥ t]`` (V = 1);
* intervals on [0, 1], ``h_{a,b}(x) = 1[a ≤ x ≤ b]``, the empty set included (V = 2);
* halfspaces in R^d with offset, ``h_{w,b}(x) = 1[⟨w, x⟩ + b ≥ 0]`` (V = d + 1).

Thresholds and intervals get *exact* 0–1-loss ERM for every shard in one pass: the points are
sorted once by (shard, x); with s = 2y − 1, cutting a shard's sorted sequence before position i
costs ``#zeros + prefix_s(i)`` errors (threshold), and an interval covering the block (i, j] costs
``#ones − (prefix_s(j) − prefix_s(i))`` errors, so the best interval is a maximum-sum block
(segmented running minimum of the prefix sums). Cuts are allowed only between distinct x values
(ties in float32 data cannot be separated by any threshold). Total cost O(n log n) for the sort
and O(n) for the rest, with no Python loop over shards. Chosen endpoints are midpoints between
neighbouring points (±inf at a shard's ends). Ties between equally good cuts go to the first.

Halfspaces are fitted by L2-regularised logistic regression (a convex surrogate of ERM), all
shards at once: shards are padded to a common length with zero-weight rows and a fixed number of
Newton steps is taken on the stacked (k, d+1) weights with batched matmuls and solves.

Shards are given as a shard id per point (``shard[i]`` in {0, …, k−1}); a shard with no points
gets the ERM of the empty sample (threshold −inf: all ones; interval: empty set).
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from pate_stab._checks import check_int, check_positive

__all__ = [
    "sort_by_shard",
    "threshold_erm",
    "interval_erm",
    "predict_threshold",
    "predict_interval",
    "threshold_vote_counts",
    "interval_vote_counts",
    "logistic_erm",
    "predict_halfspace",
    "halfspace_vote_counts",
]


def _as_numpy_1d(x: Tensor | np.ndarray, name: str) -> np.ndarray:
    arr = x.detach().cpu().numpy() if isinstance(x, Tensor) else np.asarray(x)
    arr = arr.reshape(-1) if arr.ndim == 2 and arr.shape[1] == 1 else arr
    if arr.ndim != 1:
        raise ValueError(f"{name} must be 1-D (or (n, 1)), got shape {arr.shape}")
    return arr


def _check_inputs(x: Tensor | np.ndarray, y: Tensor | np.ndarray, shard: Tensor | np.ndarray | None, k: int):
    xs = _as_numpy_1d(x, "x").astype(np.float64)
    ys = _as_numpy_1d(y, "y").astype(np.int64)
    if xs.shape != ys.shape:
        raise ValueError(f"x and y must have the same length, got {xs.shape[0]} and {ys.shape[0]}")
    if not np.isfinite(xs).all():
        raise ValueError("x must be finite")
    if ys.size and not np.isin(ys, (0, 1)).all():
        raise ValueError("y must be binary labels in {0, 1}")
    k = check_int("num_shards", k, minimum=1)
    sh = np.zeros(xs.shape[0], dtype=np.int64) if shard is None else _as_numpy_1d(shard, "shard").astype(np.int64)
    if sh.shape != xs.shape:
        raise ValueError("shard must have one entry per point")
    if sh.size and (sh.min() < 0 or sh.max() >= k):
        raise ValueError(f"shard ids must lie in [0, {k})")
    return xs, ys, sh, k


def sort_by_shard(x: np.ndarray, shard: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Order sorting the points by (shard, x), and the start offset of each shard (k + 1,)."""
    order = np.argsort(x, kind="stable")
    key = shard[order].astype(np.uint16 if k <= np.iinfo(np.uint16).max else np.int64)
    order = order[np.argsort(key, kind="stable")]  # radix sort for uint16 keys
    starts = np.zeros(k + 1, dtype=np.int64)
    np.cumsum(np.bincount(shard, minlength=k), out=starts[1:])
    return order, starts


def _segment_prefix(values: np.ndarray, starts: np.ndarray, seg: np.ndarray) -> np.ndarray:
    """Inclusive prefix sums restarting at every segment start."""
    total = np.cumsum(values)
    before = np.concatenate(([0], total))[starts[:-1]]  # sum of everything before each segment
    return total - before[seg]


def _first_argbest(score: np.ndarray, seg: np.ndarray, k: int, *, maximize: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per segment: the best score and the first position attaining it (−1 for empty segments)."""
    t = torch.from_numpy(score)
    s = torch.from_numpy(seg)
    fill = -np.inf if maximize else np.inf
    best = torch.full((k,), fill, dtype=t.dtype)
    best.scatter_reduce_(0, s, t, reduce="amax" if maximize else "amin", include_self=True)
    pos = torch.arange(score.shape[0], dtype=torch.int64)
    hit = t == best[s]
    first = torch.full((k,), score.shape[0], dtype=torch.int64)
    first.scatter_reduce_(0, s[hit], pos[hit], reduce="amin", include_self=True)
    first[first == score.shape[0]] = -1
    return best.numpy(), first.numpy()


def _midpoint_after(xs_sorted: np.ndarray, pos: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Cut value between sorted position ``pos`` and the next one; +inf when ``pos`` ends its shard."""
    nxt = np.minimum(pos + 1, xs_sorted.shape[0] - 1)
    out = 0.5 * (xs_sorted[pos] + xs_sorted[nxt])
    return np.where(pos + 1 >= ends, np.inf, out)


def threshold_erm(
    x: Tensor | np.ndarray, y: Tensor | np.ndarray, shard: Tensor | np.ndarray | None = None, num_shards: int = 1
) -> tuple[Tensor, Tensor]:
    """Exact 0–1 ERM over thresholds ``1[x ≥ t]`` for every shard.

    Args:
        x: (n,) or (n, 1) points; y: (n,) labels in {0, 1}; shard: (n,) shard ids (default: one shard).
        num_shards: k.

    Returns:
        ``(t, errors)``: float64 thresholds (k,) and the int64 number of training errors (k,).
    """
    xs, ys, sh, k = _check_inputs(x, y, shard, num_shards)
    n = xs.shape[0]
    order, starts = sort_by_shard(xs, sh, k)
    xo, so, seg = xs[order], (2 * ys[order] - 1), sh[order]
    zeros = np.bincount(sh, weights=(ys == 0), minlength=k).astype(np.int64)
    # Cut after sorted position p (points ≤ p predicted 0): errors = zeros + prefix_s(p).
    prefix = _segment_prefix(so, starts, seg)
    ends = starts[1:][seg]
    valid = (np.arange(n) + 1 >= ends) | (xo < np.roll(xo, -1))  # next point in the shard is larger
    score = np.where(valid, prefix, np.iinfo(np.int64).max).astype(np.float64)
    best, first = _first_argbest(score, seg, k, maximize=False)
    # The empty prefix (all ones, t = −inf) costs `zeros`, i.e. a prefix score of 0.
    use_cut = (first >= 0) & (best < 0)
    t = np.full(k, -np.inf)
    t[use_cut] = _midpoint_after(xo, first[use_cut], starts[1:][use_cut])
    errors = zeros + np.where(use_cut, best, 0).astype(np.int64)
    return torch.from_numpy(t), torch.from_numpy(errors)


def interval_erm(
    x: Tensor | np.ndarray, y: Tensor | np.ndarray, shard: Tensor | np.ndarray | None = None, num_shards: int = 1
) -> tuple[Tensor, Tensor, Tensor]:
    """Exact 0–1 ERM over intervals ``1[a ≤ x ≤ b]`` (empty interval included) for every shard.

    Returns:
        ``(a, b, errors)``: float64 (k,) endpoints (an empty interval is a = b = +inf) and int64
        training errors (k,).
    """
    xs, ys, sh, k = _check_inputs(x, y, shard, num_shards)
    n = xs.shape[0]
    order, starts = sort_by_shard(xs, sh, k)
    xo, so, seg = xs[order], (2 * ys[order] - 1), sh[order]
    ones = np.bincount(sh, weights=(ys == 1), minlength=k).astype(np.int64)
    prefix = _segment_prefix(so, starts, seg)  # C(p): sum of s over the shard up to p, inclusive
    ends = starts[1:][seg]
    valid = (np.arange(n) + 1 >= ends) | (xo < np.roll(xo, -1))
    # M(p) = min(0, min over valid q ≤ p in the shard of C(q)): segmented running minimum, made
    # to restart at every shard by giving later shards offsets far below earlier ones.
    big = 2 * n + 2
    offset = -seg.astype(np.int64) * big
    masked = np.where(valid, prefix, n + 1) + offset
    running = np.minimum.accumulate(masked) - offset
    running = np.minimum(running, 0)
    gain = np.where(valid, prefix - running, -1).astype(np.float64)  # block (q, p] with q the argmin
    best, end = _first_argbest(gain, seg, k, maximize=True)
    use = (end >= 0) & (best > 0)
    a = np.full(k, np.inf)
    b = np.full(k, np.inf)
    if use.any():
        e = end[use]
        shard_ids = np.nonzero(use)[0]
        low_value = running[e]  # the minimum the best block starts after
        # start: the first valid q ≤ e in the shard with C(q) == low_value, or the shard start if 0.
        pos = np.arange(n)
        ebig = np.full(k, -1, dtype=np.int64)
        ebig[shard_ids] = e
        lowv = np.zeros(k, dtype=np.int64)
        lowv[shard_ids] = low_value
        cand = valid & (pos <= ebig[seg]) & (prefix == lowv[seg]) & use[seg]
        first_q = np.full(k, n, dtype=np.int64)
        np.minimum.at(first_q, seg[cand], pos[cand])
        q = first_q[shard_ids]
        from_start = (low_value == 0) | (q == n)
        a_vals = np.where(from_start, -np.inf, 0.0)
        inner = ~from_start
        a_vals[inner] = _midpoint_after(xo, q[inner], starts[1:][shard_ids][inner])
        a[use] = a_vals
        b[use] = _midpoint_after(xo, e, starts[1:][shard_ids])
    errors = ones - np.where(use, best, 0).astype(np.int64)
    return torch.from_numpy(a), torch.from_numpy(b), torch.from_numpy(errors)


def predict_threshold(t: Tensor, x: Tensor) -> Tensor:
    """(k,) thresholds, (m,) points → (k, m) int64 predictions."""
    return (x.reshape(1, -1).to(torch.float64) >= t.reshape(-1, 1)).long()


def predict_interval(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    """(k,) endpoints, (m,) points → (k, m) int64 predictions."""
    xx = x.reshape(1, -1).to(torch.float64)
    return ((xx >= a.reshape(-1, 1)) & (xx <= b.reshape(-1, 1))).long()


def threshold_vote_counts(t: Tensor, x: Tensor) -> Tensor:
    """Vote histogram (m, 2) of k threshold teachers at m points in O((k + m) log k).

    Votes for 1 at x = #{j : t_j ≤ x}.
    """
    ts = torch.sort(t.to(torch.float64)).values
    ones = torch.searchsorted(ts, x.reshape(-1).to(torch.float64), right=True)
    return torch.stack([t.numel() - ones, ones], dim=1)


def interval_vote_counts(a: Tensor, b: Tensor, x: Tensor) -> Tensor:
    """Vote histogram (m, 2) of k interval teachers (a ≤ b for every teacher) at m points.

    Votes for 1 at x = #{a_j ≤ x} − #{b_j < x}, valid because b_j < x implies a_j ≤ x.
    """
    if bool((a > b).any()):
        raise ValueError("interval_vote_counts needs a <= b for every teacher (empty: a = b = +inf)")
    xx = x.reshape(-1).to(torch.float64)
    ones = torch.searchsorted(torch.sort(a.to(torch.float64)).values, xx, right=True) - torch.searchsorted(
        torch.sort(b.to(torch.float64)).values, xx, right=False
    )
    return torch.stack([a.numel() - ones, ones], dim=1)


def logistic_erm(
    x: Tensor,
    y: Tensor,
    shard: Tensor | None = None,
    num_shards: int = 1,
    *,
    ridge: float = 1e-3,
    newton_steps: int = 20,
    max_step: float = 10.0,
) -> Tensor:
    """L2-regularised logistic regression for every shard at once (batched Newton).

    Minimises, per shard j, (1/n_j) Σ log(1 + exp(−s_i (⟨w, x_i⟩ + b))) + (ridge/2)‖(w, b)‖²
    with ``newton_steps`` Newton steps from 0, each step's length capped at ``max_step``.

    Args:
        x: (n, d) points; y: (n,) labels in {0, 1}; shard: (n,) ids in [0, k).

    Returns:
        (k, d + 1) float64 weights, the last column the offset b.
    """
    if x.ndim != 2:
        raise ValueError(f"x must be (n, d), got shape {tuple(x.shape)}")
    n, d = x.shape
    k = check_int("num_shards", num_shards, minimum=1)
    ridge = check_positive("ridge", ridge)
    steps = check_int("newton_steps", newton_steps, minimum=1)
    sh = torch.zeros(n, dtype=torch.int64) if shard is None else shard.reshape(-1).long()
    counts = torch.bincount(sh, minlength=k)
    width = int(counts.max()) if n else 1
    order = torch.argsort(sh, stable=True)
    starts = torch.zeros(k + 1, dtype=torch.int64)
    starts[1:] = torch.cumsum(counts, 0)
    slot = torch.arange(n) - starts[sh[order]]
    feats = torch.zeros(k, max(width, 1), d + 1, dtype=torch.float32)
    signs = torch.zeros(k, max(width, 1), dtype=torch.float32)  # 0 marks padding
    feats[sh[order], slot, :d] = x[order].to(torch.float32)
    feats[sh[order], slot, d] = 1.0
    signs[sh[order], slot] = 2.0 * y[order].to(torch.float32) - 1.0
    mask = (signs != 0).to(torch.float32)
    per = counts.clamp_min(1).to(torch.float32).reshape(k, 1)
    w = torch.zeros(k, d + 1, dtype=torch.float32)
    eye = torch.eye(d + 1, dtype=torch.float32)
    for _ in range(steps):
        # elementwise products and sums instead of bmm: the per-shard matrices are tiny (d+1 ≤ ~10)
        margin = signs * (feats * w.unsqueeze(1)).sum(2)  # (k, width)
        p = torch.sigmoid(-margin) * mask  # derivative weight of each loss term
        grad = -((p * signs).unsqueeze(2) * feats).sum(1) / per + ridge * w  # (k, d+1)
        curv = (torch.sigmoid(margin) * p).unsqueeze(2)  # σ(m)σ(−m) on real rows
        hess = torch.einsum("kni,knj->kij", feats * curv, feats) / per.unsqueeze(2) + ridge * eye
        step = torch.linalg.solve(hess, grad.unsqueeze(2)).squeeze(2)
        norm = step.norm(dim=1, keepdim=True)
        w = w - step * torch.clamp(max_step / norm.clamp_min(1e-30), max=1.0)
    return w.to(torch.float64)


def predict_halfspace(weights: Tensor, x: Tensor) -> Tensor:
    """(k, d+1) weights, (m, d) points → (k, m) int64 predictions 1[⟨w, x⟩ + b ≥ 0]."""
    xx = x.to(torch.float64)
    return ((weights[:, :-1] @ xx.T + weights[:, -1:]) >= 0).long()


def halfspace_vote_counts(weights: Tensor, x: Tensor, *, block: int = 4096) -> Tensor:
    """Vote histogram (m, 2) of k halfspace teachers, in blocks of queries (bounded memory)."""
    k = weights.shape[0]
    ones = torch.cat([predict_halfspace(weights, x[i : i + block]).sum(0) for i in range(0, x.shape[0], block)])
    return torch.stack([k - ones, ones], dim=1)
