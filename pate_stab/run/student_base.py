"""What the student stage and its settings' cross-validation share: the release's shape, the
student's architecture, its training settings and targets, and the spread of released labels over
the public pool's graph.

Post-processing only: public inputs, the pool graph (public features) and released labels.
:mod:`pate_stab.run.student` (the student), :mod:`pate_stab.student.select` (its settings by
cross-validation on the released labels) and the release's ``"student-confidence"`` selector
(:func:`pate_stab.run.release.selector_confidence`, the student's architecture on the answered
queries) build on it, so the release stage never imports the student stage.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from pate_stab.models import ModelSpec
from pate_stab.run.config import TransferConfig
from pate_stab.run.data import Task
from pate_stab.run.prepare import Prepared, pool_graph
from pate_stab.student import StudentConfig, StudentTargets, hard_targets, soft_targets
from pate_stab.student.spreading import label_rows, spread_scores

__all__ = ["ReleasedLabels", "spread_pseudo_labels", "student_config", "student_spec", "student_targets"]


class ReleasedLabels(Protocol):
    """What the student learns from: a release's labels, whether they are scores, and their pool positions."""

    labels: Tensor
    soft: bool
    index: Tensor


def student_spec(config: TransferConfig, task: Task) -> ModelSpec:
    """The student's architecture for this run's task."""
    return ModelSpec(
        config.student.student_model,
        tuple(task.public_x.shape[1:]),
        task.num_classes,
        hidden=config.student.student_hidden,
        channels=config.student.student_channels,
    )


def student_config(config: TransferConfig, *, pseudo_labels: bool) -> StudentConfig:
    """The student's training settings (pseudo-labelling only for the student itself, not the selector)."""
    return StudentConfig(
        epochs=config.student.student_epochs,
        batch_size=config.student.student_batch_size,
        lr=config.student.student_lr,
        pseudo_label_rounds=config.student.pseudo_label_rounds if pseudo_labels else 0,
        pseudo_label_threshold=config.student.pseudo_label_threshold,
    )


def student_targets(
    labels: Tensor, *, soft: bool, num_classes: int, bottom: str, generator: torch.Generator | None
) -> StudentTargets:
    """Released labels → the student's training targets (⊥ dropped or replaced at random)."""
    if soft:
        return soft_targets(labels, bottom=bottom, generator=generator)  # type: ignore[arg-type]
    return hard_targets(labels, num_classes=num_classes, bottom=bottom, generator=generator)  # type: ignore[arg-type]


def spread_pseudo_labels(
    prep: Prepared,
    seeds: Tensor,
    targets: StudentTargets,
    bottoms: Tensor | None = None,
    *,
    threshold: float | None = None,
) -> tuple[Tensor, Tensor]:
    """Pool points other than ``seeds`` whose spread class share is ≥ ``threshold``, and their labels.

    The ⊥ answers take part as an extra class: a point near queries the teachers could not agree
    on gets a share of ⊥, which lowers its real-class share, so fewer of the hard points around
    them are pseudo-labelled (a point whose strongest share is ⊥ never is).

    Args:
        seeds: pool positions of the training targets (``targets.index`` mapped to the pool).
        targets: the released training targets (hard classes or binary scores).
        bottoms: pool positions of the ⊥ answers (none: no ⊥ class).
        threshold: the least class share (None: the run's ``spread_threshold``).

    Returns:
        (positions, labels): int64 pool positions and their labels (int64 classes, or float
        scores — the spread's share of class 1 — for soft targets).
    """
    config, c = prep.config, prep.task.num_classes
    adjacency = pool_graph(prep).adjacency
    assert adjacency is not None
    bottoms = torch.empty(0, dtype=torch.int64) if bottoms is None else bottoms[~torch.isin(bottoms, seeds)]
    rows = label_rows(targets.targets, c)
    bottom_rows = torch.eye(c + 1)[c].expand(bottoms.numel(), -1)  # ⊥: class C
    rows = torch.cat([torch.cat([rows, torch.zeros(rows.shape[0], 1)], 1), bottom_rows])
    seeds_all = torch.cat([seeds, bottoms])
    # spread where the graph is (the seed rows move there); the (n, C + 1) scores come back once
    scores = spread_scores(
        adjacency, seeds_all, rows, alpha=config.graph.graph_alpha, steps=config.graph.graph_steps
    ).cpu()
    mass = scores.sum(1)
    share = scores[:, :c] / mass.clamp(min=1e-30).unsqueeze(1)  # (n, C): real classes' shares of all mass
    confidence, guess = share.max(1)
    threshold = config.student.spread_threshold if threshold is None else threshold
    keep = (confidence >= threshold) & (mass > 0) & (confidence > scores[:, c] / mass.clamp(min=1e-30))
    keep[seeds] = False
    keep[bottoms] = False
    positions = torch.nonzero(keep).flatten()
    labels = (share[positions, 1] / share[positions].sum(1)).float() if targets.soft else guess[positions]
    return positions, labels
