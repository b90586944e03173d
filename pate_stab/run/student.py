"""The student (BTT18 Alg 5): trained on the queried public inputs and their released labels.

Post-processing of the release: only public tensors are passed on — the queries, the released
labels and (semi-supervised mode) the unlabelled rest of the public pool. The selector of
``query_selection="student-confidence"`` is the student's architecture too
(:func:`selector_confidence`), fitted on the answered queries only.
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import Any, Protocol

import torch
from torch import Tensor

from pate_stab.aggregation.votes import vote_histogram
from pate_stab.run.config import TransferConfig
from pate_stab.run.data import Task
from pate_stab.run.prepare import Prepared
from pate_stab.run.selection import ConfidenceFn
from pate_stab.student import StudentConfig, StudentTargets, hard_targets, soft_targets, train_student
from pate_stab.teachers import ModelSpec, VotingTeachers

__all__ = [
    "SELECTOR_MIN_STEPS",
    "ReleasedLabels",
    "fit_student",
    "selector_confidence",
    "student_config",
    "student_spec",
    "student_targets",
    "teacher_accuracies",
]

SELECTOR_MIN_STEPS = 300  # optimiser steps of the student-confidence selector, at least


class ReleasedLabels(Protocol):
    """What the student learns from: a release's labels, whether they are scores, and their pool positions."""

    labels: Tensor
    soft: bool
    index: Tensor


def student_spec(config: TransferConfig, task: Task) -> ModelSpec:
    """The student's architecture for this run's task."""
    return ModelSpec(
        config.student_model,
        tuple(task.public_x.shape[1:]),
        task.num_classes,
        hidden=config.student_hidden,
        channels=config.student_channels,
    )


def student_config(config: TransferConfig, *, pseudo_labels: bool) -> StudentConfig:
    """The student's training settings (pseudo-labelling only for the student itself, not the selector)."""
    return StudentConfig(
        epochs=config.student_epochs,
        batch_size=config.student_batch_size,
        lr=config.student_lr,
        pseudo_label_rounds=config.pseudo_label_rounds if pseudo_labels else 0,
        pseudo_label_threshold=config.pseudo_label_threshold,
    )


def student_targets(
    labels: Tensor, *, soft: bool, num_classes: int, bottom: str, generator: torch.Generator | None
) -> StudentTargets:
    """Released labels → the student's training targets (⊥ dropped or replaced at random)."""
    if soft:
        return soft_targets(labels, bottom=bottom, generator=generator)  # type: ignore[arg-type]
    return hard_targets(labels, num_classes=num_classes, bottom=bottom, generator=generator)  # type: ignore[arg-type]


def selector_confidence(prep: Prepared, generator: torch.Generator) -> ConfidenceFn:
    """The selector of ``"student-confidence"``: the student's architecture, fitted on the answered
    queries (⊥ dropped) and their released labels, scores the candidate pool points.

    It trains with the student's hyper-parameters, but for at least ``SELECTOR_MIN_STEPS``
    optimiser steps (a few dozen labels make one batch per epoch). Post-processing: public
    inputs and released outputs only; no pseudo-labelling.
    """
    config, task = prep.config, prep.task
    spec = student_spec(config, task)
    base = student_config(config, pseudo_labels=False)

    def confidence(index: Tensor, labels: Tensor, candidates: Tensor) -> Tensor:
        targets = student_targets(
            labels, soft=labels.is_floating_point(), num_classes=task.num_classes, bottom="drop", generator=None
        )
        batches = math.ceil(targets.index.numel() / base.batch_size)
        cheap = replace(base, epochs=max(base.epochs, math.ceil(SELECTOR_MIN_STEPS / batches)))
        model = train_student(
            task.public_x[index],
            targets,
            spec=spec,
            config=cheap,
            generator=generator,
            accelerator=config.accelerator,
            progress_bar=False,
        )
        return model.predict_proba(task.public_x[candidates])  # (n_candidates, C)

    return confidence


def fit_student(
    prep: Prepared, release: ReleasedLabels, *, generator: torch.Generator, bottom_generator: torch.Generator
) -> tuple[Any, StudentTargets]:
    """Train the student on the queried public inputs and their released labels (BTT18 Alg 5).

    Only public tensors are passed on: the queries, the released labels and (semi-supervised
    mode) the unlabelled rest of the public pool: the ⊥ queries, then the pool points never
    queried.
    """
    config, task = prep.config, prep.task
    targets = student_targets(
        release.labels,
        soft=release.soft,
        num_classes=task.num_classes,
        bottom=config.bottom,
        generator=bottom_generator,
    )
    query_x = task.public_x[release.index]
    unused = torch.ones(query_x.shape[0], dtype=torch.bool)
    unused[targets.index] = False
    never_queried = torch.ones(task.public_x.shape[0], dtype=torch.bool)
    never_queried[release.index] = False
    unlabelled = torch.cat([query_x[unused], task.public_x[never_queried]])
    spec = student_spec(config, task)
    settings = student_config(config, pseudo_labels=True)
    student = train_student(
        query_x,
        targets,
        spec=spec,
        config=settings,
        generator=generator,
        unlabelled_x=unlabelled,
        accelerator=config.accelerator,
        progress_bar=config.progress,
    )
    return student, targets


def teacher_accuracies(teachers: VotingTeachers, x: Tensor, y: Tensor, num_classes: int) -> tuple[float, float]:
    """Mean teacher accuracy and plurality-vote accuracy (ties to the lowest class) on (x, y)."""
    votes = teachers.predict_votes(x)  # (k, n)
    plurality = vote_histogram(votes, num_classes).argmax(-1)
    return float((votes == y).double().mean()), float((plurality == y).double().mean())
