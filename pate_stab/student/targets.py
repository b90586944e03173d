"""Released labels → student training targets (BTT18 Alg 5, post-processing only).

The releasers return one entry per public query: a class index or −1 for ⊥ (hard labels),
a score in [0, 1] or NaN for ⊥ (soft labels). Alg 5 trains a non-private learner on the
queries with these labels. What to do with ⊥ is a choice: drop the query, or — as in the
proof of BTT18 Thm 4.6, which views the releaser as a classifier h_priv — replace ⊥ by a
uniformly random label. Both are post-processing of the release and cost no privacy.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_tensor
from pate_stab.vocabulary import BOTTOM_POLICIES, BottomPolicy

__all__ = ["BottomPolicy", "StudentTargets", "hard_targets", "soft_targets"]


@dataclass(frozen=True)
class StudentTargets:
    """Which queries the student trains on and their targets.

    Attributes:
        index: int64 (n,) positions in the query sequence.
        targets: int64 class indices (hard) or float32 scores in [0, 1] (soft), shape (n,).
        soft: True for score targets (BCE), False for class targets (cross-entropy).
        num_bottom: ⊥ among the queries (dropped or replaced).
    """

    index: Tensor
    targets: Tensor
    soft: bool
    num_bottom: int


def _check_policy(bottom: str) -> None:
    if bottom not in BOTTOM_POLICIES:
        raise ValueError(f"bottom must be {' or '.join(map(repr, BOTTOM_POLICIES))}, got {bottom!r}")


def hard_targets(
    labels: Tensor,
    *,
    num_classes: int,
    bottom: BottomPolicy = "drop",
    generator: torch.Generator | None = None,
) -> StudentTargets:
    """Released class labels (m,) with −1 for ⊥ → the student's training set.

    Args:
        labels: int64 (m,) released labels, −1 for ⊥.
        num_classes: C ≥ 2.
        bottom: "drop" the ⊥ queries, or "random": replace each by a uniform label (BTT18 §4.2).
        generator: needed for ``bottom="random"``.
    """
    labels = check_tensor("labels", labels, ndim=1, floating=False, nonempty=False).to(torch.int64)
    num_classes = check_int("num_classes", num_classes, minimum=2)
    _check_policy(bottom)
    if bool(((labels < -1) | (labels >= num_classes)).any()):
        raise ValueError(f"labels must lie in {{-1, 0, …, {num_classes - 1}}}")
    is_bottom = labels == -1
    num_bottom = int(is_bottom.sum())
    if bottom == "drop":
        index = torch.nonzero(~is_bottom).flatten()
        return StudentTargets(index, labels[index], soft=False, num_bottom=num_bottom)
    gen = check_generator(generator)
    fill = torch.randint(0, num_classes, (labels.numel(),), generator=gen)
    return StudentTargets(
        torch.arange(labels.numel()), torch.where(is_bottom, fill, labels), soft=False, num_bottom=num_bottom
    )


def soft_targets(
    scores: Tensor,
    *,
    bottom: BottomPolicy = "drop",
    generator: torch.Generator | None = None,
) -> StudentTargets:
    """Released binary scores (m,) in [0, 1] with NaN for ⊥ → the student's training set.

    With ``bottom="random"`` a ⊥ becomes a uniformly random hard label, 0.0 or 1.0.
    """
    if not isinstance(scores, Tensor) or not scores.is_floating_point() or scores.dim() != 1:
        raise TypeError("scores must be a 1-D floating tensor (NaN for ⊥)")
    _check_policy(bottom)
    is_bottom = torch.isnan(scores)
    finite = scores[~is_bottom]
    if bool(((finite < 0) | (finite > 1)).any()):
        raise ValueError("released scores must lie in [0, 1]")
    num_bottom = int(is_bottom.sum())
    if bottom == "drop":
        index = torch.nonzero(~is_bottom).flatten()
        return StudentTargets(index, scores[index].float(), soft=True, num_bottom=num_bottom)
    gen = check_generator(generator)
    fill = torch.randint(0, 2, (scores.numel(),), generator=gen).to(scores.dtype)
    return StudentTargets(
        torch.arange(scores.numel()), torch.where(is_bottom, fill, scores).float(), soft=True, num_bottom=num_bottom
    )
