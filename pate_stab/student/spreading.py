"""Label spreading over the public pool's kNN graph: released labels → scores on every pool point.

Zhou, Bousquet, Lal, Weston & Schölkopf (2004), "Learning with local and global consistency":
with S the normalised affinity of the pool's kNN graph (:class:`pate_stab.features.PoolGraph`,
built from public features only) and Y the one-hot rows of the labelled pool points (zero
elsewhere), the scores F = Σ_{t ≤ T} (αS)^t Y spread every label along the graph. Row i of F,
normalised to sum 1, is a distribution over classes for pool point i; its total mass says how
much labelled evidence reaches i (0 for points the series never reaches).

Two users, both post-processing of the release (inputs: public features, released outputs):

- the ``"spread"`` query selection (:mod:`pate_stab.selection`) spreads the answered labels
  and the ⊥ answers, ⊥ as an extra class, to choose points whose neighbourhood the teachers
  answered and not those near earlier ⊥;
- the ``"spread"`` student (:func:`pate_stab.run.student.fit_student`) spreads the answered
  labels to the whole pool and trains the student on the confident part.

The spreading computes where the graph is (the run's GPU when it has one): only the seeds' rows
move there; callers bring the (n, C) result back to the CPU once if they need it there.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_real, check_tensor

__all__ = ["label_rows", "spread_labels", "spread_scores"]


def spread_scores(adjacency: Tensor, seeds: Tensor, targets: Tensor, *, alpha: float, steps: int) -> Tensor:
    """F = Σ_{t ≤ T} (αS)^t Y for seed rows Y (unnormalised).

    Args:
        adjacency: S, sparse or dense (n, n), the normalised pool graph.
        seeds: int64 (s,) pool positions of the labelled points (no repeats).
        targets: (s, C) float: each seed's label distribution (one-hot for a hard label).
        alpha: α in [0, 1).
        steps: T ≥ 0.

    Returns:
        (n, C) float32 nonnegative scores, on the device of ``adjacency``.
    """
    alpha = check_real("alpha", alpha, low=0.0, high=1.0, high_inclusive=False)
    steps = check_int("steps", steps, minimum=0)
    seeds = check_tensor("seeds", seeds, ndim=1, floating=False, nonempty=False).long()
    targets = check_tensor("targets", targets, ndim=2, floating=True, nonempty=False).float()
    n = adjacency.shape[0]
    if targets.shape[0] != seeds.shape[0]:
        raise ValueError(f"{seeds.shape[0]} seeds but {targets.shape[0]} target rows")
    if seeds.numel() and (int(seeds.min()) < 0 or int(seeds.max()) >= n):
        raise ValueError(f"seeds must lie in [0, {n - 1}]")
    if seeds.unique().numel() != seeds.numel():
        raise ValueError("seeds must not repeat")
    if bool((targets < 0).any()):
        raise ValueError("targets must be nonnegative")
    # on the graph's device: the small seed rows move there (the graph stays where it is)
    y = torch.zeros(n, targets.shape[1], device=adjacency.device)
    y[seeds.to(adjacency.device)] = targets.to(adjacency.device)
    f = y.clone()
    for _ in range(steps):
        f = alpha * (adjacency @ f) + y
    return f


def label_rows(labels: Tensor, num_classes: int) -> Tensor:
    """Seed rows Y (n, C) float32: one-hot rows for int64 classes, (1 − s, s) for binary scores s."""
    labels = check_tensor("labels", labels, ndim=1, nonempty=False)
    if labels.is_floating_point():
        if num_classes != 2:
            raise ValueError("score labels need num_classes == 2")
        if bool(((labels < 0) | (labels > 1)).any()):  # NaN compares False: caught by check_tensor
            raise ValueError("score labels must lie in [0, 1]")
        return torch.stack([1 - labels.float(), labels.float()], dim=1)
    if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes - 1}]")
    return torch.nn.functional.one_hot(labels.long(), num_classes).float()


def spread_labels(
    adjacency: Tensor,
    seeds: Tensor,
    labels: Tensor,
    *,
    num_classes: int,
    alpha: float = 0.99,
    steps: int = 50,
) -> tuple[Tensor, Tensor]:
    """Spread hard labels (int64, in [0, C)) or binary scores (float, in [0, 1]) over the pool graph.

    Returns:
        ``(proba, mass)``: (n, C) rows of F normalised to sum 1 (uniform where the mass is 0) and
        (n,) the rows' total mass, on the device of ``adjacency``.
    """
    c = check_int("num_classes", num_classes, minimum=2)
    f = spread_scores(adjacency, seeds, label_rows(labels, c), alpha=alpha, steps=steps)
    mass = f.sum(1)
    proba = torch.where(mass.unsqueeze(1) > 0, f / mass.clamp(min=1e-30).unsqueeze(1), torch.full_like(f, 1.0 / c))
    return proba, mass
