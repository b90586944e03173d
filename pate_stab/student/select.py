"""The student's settings chosen by cross-validation on the released labels (``student_select: cv``).

What a user of a release has is the public pool and the released labels; the pool's true labels
and the evaluation split are not theirs to tune on. This chooses ``student_lr`` (and, for the
spread student, ``spread_threshold``) from those alone: K-fold cross-validation over the
answered queries. Post-processing of the release (BTT18 Alg 5 trains any non-private learner on
its output), so it spends nothing; its inputs are the public inputs, the public pool graph and
the released labels, and its record (grid, scores, choice) may be published.

The procedure, fixed before any run:

- folds: the answered (non-⊥) queries are split into :data:`SELECT_FOLDS` folds, stratified by
  released class (a score counts as the class it rounds to), at random from the student's seed;
  ⊥ queries are never held out (with ``bottom: random`` their random labels stay in training);
- a fold's student: the run's student method with the fold's held-out queries hidden — for
  ``"spread"`` they are not seeds of the spread (unanswered pool points, as the never-queried
  ones) and neither they nor any pseudo-label on them enter the training set; for
  ``"supervised"`` they are left out of the training set;
- score: the fold's student's accuracy on the held-out released labels; a setting's score is
  the mean over the folds. The choice is the first setting of the grid (in :func:`settings_grid`
  order) with the highest mean score; the final student is then trained on all released labels
  with it (:func:`pate_stab.run.student.fit_student`, which calls :func:`select_student_settings`
  with the run's public pool, student architecture and spread).

  When the released labels cannot tell the settings apart (a few confident answers that every
  fold's student fits: all scores 1.0), the first grid point is chosen by this rule; the record
  shows the tied scores, so a reader sees that the data decided nothing.

The grid (:data:`SPREAD_THRESHOLDS` × :data:`STUDENT_LRS`) is small and fixed in advance: three
learning rates a factor ≈ 3 apart around Adam's usual 1e-3–1e-2, and three class-share
thresholds from permissive to strict around the default 0.5. The other student settings (model
width, epochs, batch size) are not chosen here: they stay as configured. The grid × folds
students are trained together as one stacked model (:func:`~pate_stab.student.stacked.train_stacked_students`),
each as it would be fitted alone.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch
from torch import Tensor

from pate_stab.rng import child_seed
from pate_stab.student.stacked import StudentGroup, train_stacked_students
from pate_stab.student.targets import StudentTargets

if TYPE_CHECKING:
    from pate_stab.student.stacked import ModelSpec

__all__ = [
    "SELECT_FOLDS",
    "SPREAD_THRESHOLDS",
    "STUDENT_LRS",
    "StudentSelection",
    "best_setting",
    "select_student_settings",
    "selection_generator",
    "settings_grid",
    "stratified_folds",
]

SELECT_FOLDS = 3
SPREAD_THRESHOLDS = (0.3, 0.5, 0.7)
STUDENT_LRS = (1e-3, 3e-3, 1e-2)
_SELECT_MIX = 0x5DEECE66D  # separates the selection's seeds from the final student's (same parent)

# (seed pool positions, their targets, ⊥ pool positions, threshold) → pool positions and labels the spread adds
PseudoLabelFn = Callable[..., tuple[Tensor, Tensor]]


@dataclass(frozen=True)
class StudentSelection:
    """The chosen settings (TransferConfig field → value) and the publishable record of the choice."""

    settings: dict[str, Any]
    record: dict[str, Any]


def settings_grid(student_method: str) -> list[dict[str, float]]:
    """The settings cross-validated for ``student_method``, in the order ties are broken."""
    if student_method == "spread":
        return [{"spread_threshold": t, "student_lr": lr} for t in SPREAD_THRESHOLDS for lr in STUDENT_LRS]
    if student_method == "supervised":
        return [{"student_lr": lr} for lr in STUDENT_LRS]
    raise ValueError(f"student_select='cv' chooses supervised and spread students' settings, not {student_method!r}")


def selection_generator(generator: torch.Generator) -> torch.Generator:
    """The selection's generator, derived from the student's without drawing from it (the final
    student then starts from the same seeds as with ``student_select: none``)."""
    clone = torch.Generator(device=generator.device)
    clone.set_state(generator.get_state())
    return torch.Generator().manual_seed(child_seed(clone) ^ _SELECT_MIX)


def stratified_folds(classes: Tensor, folds: int, *, generator: torch.Generator) -> Tensor:
    """Fold of each item (n,) int64 in [0, folds): a random order, sorted stably by class, dealt round robin."""
    n = classes.numel()
    perm = torch.randperm(n, generator=generator)
    order = perm[torch.argsort(classes[perm], stable=True)]
    fold = torch.empty(n, dtype=torch.int64)
    fold[order] = torch.arange(n) % folds
    return fold


def best_setting(mean_scores: list[float]) -> int:
    """Index of the highest mean score; ties go to the first in grid order."""
    if not mean_scores or not all(math.isfinite(v) for v in mean_scores):
        raise ValueError(f"mean_scores must be finite numbers, got {mean_scores}")
    return max(range(len(mean_scores)), key=lambda i: (mean_scores[i], -i))


def _answered(labels: Tensor) -> Tensor:
    """True where a release answered (hard: label ≠ −1; soft: score not NaN)."""
    return ~torch.isnan(labels) if labels.is_floating_point() else labels != -1


def _hard(values: Tensor) -> Tensor:
    """Released classes, or the class a score rounds to (≥ 0.5 → 1)."""
    return (values >= 0.5).long() if values.is_floating_point() else values.long()


def select_student_settings(
    release_index: Tensor,
    release_labels: Tensor,
    targets: StudentTargets,
    *,
    public_x: Tensor,
    spec: ModelSpec,
    method: str,
    configured: Mapping[str, float],
    epochs: int,
    batch_size: int,
    pseudo_labels: PseudoLabelFn,
    generator: torch.Generator,
) -> StudentSelection:
    """Cross-validate the grid of :func:`settings_grid` on the released labels (module docstring).

    Args:
        release_index: the released queries' pool positions.
        release_labels: their released labels (−1 / NaN for ⊥).
        targets: the student's training targets built from them (``bottom`` applied).
        public_x: the public pool's inputs.
        spec: the student's architecture (a ``ModelSpec``).
        method: the student method, ``"spread"`` or ``"supervised"``.
        configured: the configured ``student_lr`` and ``spread_threshold`` (kept when too few answers).
        epochs: the student's epochs.
        batch_size: the student's batch size.
        pseudo_labels: for ``"spread"``: (seed positions, their targets, ⊥ positions, ``threshold=``) →
            the pool positions and labels the spread adds (the run's spread over its pool graph).
        generator: folds and the students' seeds (use :func:`selection_generator`).

    Returns:
        The chosen settings and the record: ``grid``, ``fold_scores`` (per setting, per fold),
        ``mean_scores``, ``chosen``, ``answered``, ``held_out`` and ``train_sizes`` (per fold, per
        spread threshold). With fewer answered queries than folds nothing is cross-validated: the
        configured settings are kept and the record says so under ``skipped``.
    """
    grid = settings_grid(method)
    answered = _answered(release_labels)[targets.index]  # (t,) over the training targets
    entries = torch.nonzero(answered).flatten()
    record: dict[str, Any] = {
        "method": "cv",
        "folds": SELECT_FOLDS,
        "stratified_by": "released class",
        "score": "accuracy on the held-out fold's released labels (answered queries only), mean over folds",
        "grid": grid,
        "answered": int(entries.numel()),
    }
    kept = {key: float(configured[key]) for key in grid[0]}
    if entries.numel() < SELECT_FOLDS:
        record |= {"chosen": kept, "skipped": f"fewer answered queries than folds ({SELECT_FOLDS})"}
        return StudentSelection(kept, record)
    classes = _hard(targets.targets[entries])
    fold = stratified_folds(classes, SELECT_FOLDS, generator=generator)
    thresholds = SPREAD_THRESHOLDS if method == "spread" else (None,)
    groups, held, sizes = _fold_groups(
        release_index, release_labels, targets, entries, classes, fold,
        thresholds=thresholds, pseudo_labels=pseudo_labels, generator=generator,
    )  # fmt: skip
    stacked = train_stacked_students(public_x, groups, spec=spec, lrs=STUDENT_LRS, epochs=epochs, batch_size=batch_size)
    # fold_scores[threshold index][lr index][fold]
    scores = [[[0.0] * SELECT_FOLDS for _ in STUDENT_LRS] for _ in thresholds]
    for f, (held_pos, held_y) in enumerate(held):
        for t_idx in range(len(thresholds)):
            predicted = stacked.logits(f * len(thresholds) + t_idx, public_x[held_pos]).argmax(-1)  # (L, n)
            for l_idx in range(len(STUDENT_LRS)):
                scores[t_idx][l_idx][f] = float((predicted[l_idx] == held_y).double().mean())
    fold_scores = [scores[t][lr] for t in range(len(thresholds)) for lr in range(len(STUDENT_LRS))]  # grid order
    mean_scores = [sum(s) / SELECT_FOLDS for s in fold_scores]
    best = best_setting(mean_scores)
    record |= {
        "held_out": [int(h.numel()) for h, _ in held],
        "train_sizes": sizes,
        "fold_scores": fold_scores,
        "mean_scores": mean_scores,
        "chosen": grid[best],
    }
    return StudentSelection(dict(grid[best]), record)


def _fold_groups(
    release_index: Tensor,
    release_labels: Tensor,
    targets: StudentTargets,
    entries: Tensor,
    classes: Tensor,
    fold: Tensor,
    *,
    thresholds: tuple[float | None, ...],
    pseudo_labels: PseudoLabelFn,
    generator: torch.Generator,
) -> tuple[list[StudentGroup], list[tuple[Tensor, Tensor]], list[list[int]]]:
    """The students of the folds × thresholds (a fold's held-out queries neither train nor seed the spread),
    per fold its held-out pool positions and their released classes, and per fold × threshold the training size."""
    pool_of_target = release_index[targets.index]  # pool position of each training target
    bottoms = release_index[~_answered(release_labels)]
    groups: list[StudentGroup] = []
    held: list[tuple[Tensor, Tensor]] = []  # per fold: held-out pool positions, their released classes
    sizes: list[list[int]] = []
    for f in range(SELECT_FOLDS):
        init_seed, data_seed = child_seed(generator), child_seed(generator)
        out = entries[fold == f]
        train = torch.ones(targets.index.numel(), dtype=torch.bool)
        train[out] = False
        held_pos = pool_of_target[out]
        held.append((held_pos, classes[fold == f]))
        seeds, seed_targets = pool_of_target[train], targets.targets[train]
        fold_targets = StudentTargets(torch.arange(seeds.numel()), seed_targets, targets.soft, targets.num_bottom)
        sizes.append([])
        for threshold in thresholds:
            positions, labels = seeds, seed_targets
            if threshold is not None:
                extra, extra_labels = pseudo_labels(seeds, fold_targets, bottoms, threshold=threshold)
                keep = ~torch.isin(extra, held_pos)  # a held-out query takes no pseudo-label either
                positions = torch.cat([seeds, extra[keep]])
                labels = torch.cat([seed_targets.to(extra_labels.dtype), extra_labels[keep]])
            groups.append(StudentGroup(positions, labels, init_seed, data_seed))
            sizes[-1].append(int(positions.numel()))
    return groups, held, sizes
