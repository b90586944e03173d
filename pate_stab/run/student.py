"""The student (BTT18 Alg 5): trained on the queried public inputs and their released labels.

Post-processing of the release: only public tensors are passed on — the queries, the released
labels and the unlabelled rest of the public pool. ``student_method`` chooses how the pool is
used (:data:`~pate_stab.run.config.STUDENT_METHODS`):

- ``"supervised"``: the student's architecture on the answered queries, then
  ``pseudo_label_rounds`` of self-training on the rest of the pool;
- ``"spread"``: the answered labels are spread over the public pool's kNN graph
  (:func:`pate_stab.student.spreading.spread_labels`); the student trains on the answered
  queries plus every other pool point whose spread gives one class a share of at least
  ``spread_threshold`` (then the same self-training rounds, if any). ⊥ queries are pool points
  like the others: they take the label their neighbourhood's answers give them, or none;
- ``"fixmatch"``: a CNN on the pool's images (:func:`pate_stab.student.train_fixmatch`): the
  answered queries labelled, every other pool point (⊥ queries included) unlabelled.

The selectors of ``query_selection`` belong to the release stage (:mod:`pate_stab.run.release`;
the spread one is :class:`pate_stab.selection.spread.SpreadSelector`), which does not import this module.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial
from typing import Any

import torch
from torch import Tensor

from pate_stab.aggregation.votes import vote_histogram
from pate_stab.run.prepare import Prepared
from pate_stab.run.progress import accelerator_device
from pate_stab.run.student_base import (
    ReleasedLabels,
    spread_pseudo_labels,
    student_config,
    student_spec,
    student_targets,
)
from pate_stab.selection.adaptive_batches import answered_mask
from pate_stab.student import StudentTargets, train_student
from pate_stab.student.select import select_student_settings, selection_generator
from pate_stab.teachers import VotingTeachers

__all__ = [
    "FewLabelsWarning",
    "NoLabelsError",
    "ReleasedLabels",
    "check_labels_released",
    "fit_student",
    "released_label_warnings",
    "spread_pseudo_labels",
    "student_accuracies",
    "student_device",
    "student_config",
    "student_inputs",
    "student_spec",
    "student_targets",
    "teacher_accuracies",
]


class NoLabelsError(ValueError):
    """The release answered no query: a student would learn nothing (no student is written)."""


class FewLabelsWarning(UserWarning):
    """The student learns from fewer released labels than classes, or from labels of one class only."""


def _released_classes(release: ReleasedLabels) -> Tensor:
    answered = answered_mask(release.labels)
    labels = release.labels[answered]
    return (labels >= 0.5).long() if labels.is_floating_point() else labels.long()


def check_labels_released(release: ReleasedLabels, *, num_queries: int) -> None:
    """Raise :class:`NoLabelsError` when the release answered none of its queries (released outputs only)."""
    if _released_classes(release).numel() == 0:
        raise NoLabelsError(
            f"the release answered none of the {num_queries} queries (every answer ⊥): there is no label to train "
            "a student on, so no student was written and nothing but the ⊥ answers was released. The spend is "
            "recorded in the ledger (a rerun replays it). More teachers, a larger ε or another aggregator "
            "answer more (`pate-stab plan`); allow_empty_student (--allow-empty-student) keeps an untrained student"
        )


def released_label_warnings(release: ReleasedLabels, num_classes: int, class_names: Any = None) -> list[str]:
    """Plain sentences on a student that cannot learn every class: no released label, labels of one
    class only, or fewer labels (or classes among them) than the task's classes. Computed from the
    released outputs only (public)."""
    classes = _released_classes(release)
    n = int(classes.numel())
    names = list(class_names) if class_names is not None else [str(c) for c in range(num_classes)]
    seen = sorted(set(classes.tolist()))
    if n == 0:
        return ["the student was trained on no released label: its predictions are those of an untrained network"]
    if len(seen) == 1:
        return [f"the student was trained on {n} released label(s), all of class {names[seen[0]]!r}: it can only "
                "predict that class"]  # fmt: skip
    if n < num_classes or len(seen) < num_classes:
        missing = [names[c] for c in range(num_classes) if c not in seen]
        return [f"the student was trained on {n} released labels covering {len(seen)} of {num_classes} classes: "
                f"it never saw {', '.join(repr(m) for m in missing) or 'some classes'}"]  # fmt: skip
    return []


def student_device(prep: Prepared) -> str:
    """The device(s) of the student stage, for its stage line: the student trains on the run's
    accelerator; a spread student's label spreading computes where the pool graph is, named too when
    that differs (e.g. the CPU under an MPS accelerator, whose kernels the graph lacks)."""
    train = accelerator_device(prep.config.execution.accelerator)
    if prep.config.student.student_method == "spread" and prep.graph is not None and prep.graph_device != train:
        return f"{train}, {prep.graph_device} (spread)"
    return train


def _fit_fixmatch(prep: Prepared, release: ReleasedLabels, targets: StudentTargets, generator: torch.Generator) -> Any:
    config, task = prep.config, prep.task
    if release.soft:
        raise ValueError("student_method='fixmatch' takes hard labels; this release holds scores")
    if task.public_images is None:
        raise ValueError("student_method='fixmatch' needs an image data set (the public pool's images)")
    from pate_stab import student as student_pkg
    from pate_stab.models import FixMatchConfig, augmentation_settings

    preset = FixMatchConfig.gpu() if config.student.fixmatch_preset == "gpu" else FixMatchConfig.cpu()
    if config.student.fixmatch_steps is not None:
        preset = replace(preset, steps=config.student.fixmatch_steps)
    preset = replace(preset, **augmentation_settings(config.student.student_augment))  # type: ignore[arg-type]
    seeds = release.index[targets.index]
    labelled = torch.zeros(task.public_images.shape[0], dtype=torch.bool)
    labelled[seeds] = True
    return student_pkg.train_fixmatch(
        task.public_images[seeds],
        targets.targets,
        task.public_images[~labelled],
        num_classes=task.num_classes,
        config=preset,
        generator=generator,
        accelerator=config.execution.accelerator,
        progress_bar=config.execution.progress,
    )


def student_inputs(prep: Prepared) -> tuple[Tensor, Tensor]:
    """The (public pool, evaluation) inputs of this run's student: images for fixmatch, else the task's inputs."""
    task = prep.task
    if (
        prep.config.student.student_method == "fixmatch"
        and task.public_images is not None
        and task.eval_images is not None
    ):
        return task.public_images, task.eval_images
    return task.public_x, task.eval_x


def student_accuracies(prep: Prepared, student: Any, release: ReleasedLabels) -> dict[str, Any]:
    """The student's accuracy on the evaluation split and on the pool points left without a released label.

    The second set — pool points never queried or answered ⊥ — is larger and harder than the
    evaluation split (the releaser labels the points its teachers agree on); its true labels
    are read here for this measurement only. Each figure is None where its labels do not exist
    (no evaluation set; a pool without labels).
    """
    pool_x, eval_x = student_inputs(prep)
    task = prep.task
    unlabelled = torch.ones(pool_x.shape[0], dtype=torch.bool)
    unlabelled[release.index[answered_mask(release.labels)]] = False
    pool_acc = None
    if task.public_y is not None and bool(unlabelled.any()):
        pool_acc = student.accuracy(pool_x[unlabelled], task.public_y[unlabelled])
    return {
        "student": student.accuracy(eval_x, task.eval_y) if task.eval_y.numel() else None,
        "student_unlabelled_pool": pool_acc,
        "unlabelled_pool_size": int(unlabelled.sum()),
    }


def fit_student(
    prep: Prepared, release: ReleasedLabels, *, generator: torch.Generator, bottom_generator: torch.Generator
) -> tuple[Any, StudentTargets]:
    """Train the student on the queried public inputs and their released labels (BTT18 Alg 5).

    Only public tensors are passed on: the queries, the released labels and the unlabelled rest
    of the public pool (the ⊥ queries, then the pool points never queried), used as
    ``student_method`` says. With ``student_select: cv`` the student's learning rate (and spread
    threshold) are first chosen by cross-validation on the released labels
    (:mod:`pate_stab.student.select`); the student's ``selection`` holds the record.
    """
    config, task = prep.config, prep.task
    targets = student_targets(
        release.labels,
        soft=release.soft,
        num_classes=task.num_classes,
        bottom=config.student.bottom,
        generator=bottom_generator,
    )
    if config.student.student_method == "fixmatch":
        return _fit_fixmatch(prep, release, targets, generator), targets
    selection = None
    if config.student.student_select == "cv":
        selection = select_student_settings(
            release.index,
            release.labels,
            targets,
            public_x=task.public_x,
            spec=student_spec(config, task),
            method=config.student.student_method,
            configured={"student_lr": config.student.student_lr, "spread_threshold": config.student.spread_threshold},
            epochs=config.student.student_epochs,
            batch_size=config.student.student_batch_size,
            pseudo_labels=partial(spread_pseudo_labels, prep),
            generator=selection_generator(generator),
        )
        config = replace(config, **selection.settings)
    if config.student.student_method == "spread":
        seeds = release.index[targets.index]
        bottoms = release.index[~answered_mask(release.labels)]
        extra, extra_labels = spread_pseudo_labels(
            prep, seeds, targets, bottoms, threshold=config.student.spread_threshold
        )
        pool_index = torch.cat([seeds, extra])
        targets = StudentTargets(
            torch.arange(pool_index.numel()),
            torch.cat([targets.targets.to(extra_labels.dtype), extra_labels]),
            soft=targets.soft,
            num_bottom=targets.num_bottom,
        )
    else:
        pool_index = release.index
    query_x = task.public_x[pool_index]
    unused = torch.ones(query_x.shape[0], dtype=torch.bool)
    unused[targets.index] = False
    never_queried = torch.ones(task.public_x.shape[0], dtype=torch.bool)
    never_queried[pool_index] = False
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
        accelerator=config.execution.accelerator,
        progress_bar=config.execution.progress,
    )
    if selection is not None:
        student.selection = selection.record
    return student, targets


def teacher_accuracies(
    teachers: VotingTeachers, x: Tensor, y: Tensor, num_classes: int
) -> tuple[float | None, float | None]:
    """Mean teacher accuracy and plurality-vote accuracy (ties to the lowest class) on (x, y);
    (None, None) when (x, y) is empty (no evaluation set)."""
    if y.numel() == 0:
        return None, None
    votes = teachers.predict_votes(x)  # (k, n)
    plurality = vote_histogram(votes, num_classes).argmax(-1)
    return float((votes == y).double().mean()), float((plurality == y).double().mean())
