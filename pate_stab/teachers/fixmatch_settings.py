"""A run's FixMatch teachers (``teacher_model: fixmatch``, PATE-FM): their settings and checks.

The teachers themselves are :func:`pate_stab.teachers.fixmatch.train_fixmatch_teachers`. A run
configures them with the existing teacher settings, read as follows (:func:`fixmatch_teacher_config`):

- ``teacher_channels`` / ``teacher_hidden``: the CNN (:class:`~pate_stab.models.networks.PateCNN`);
- ``teacher_batch_size``: B, labelled images per teacher per step; ``teacher_lr``,
  ``teacher_weight_decay``: SGD's (Nesterov momentum 0.9, cosine decay cos(7πk / 16K));
- ``teacher_epochs``: epochs as Malek et al.'s code counts them (``lib/fixmatch.py`` of
  facebookresearch/label_dp_antipodes, from kekmodel/FixMatch-pytorch: an epoch is
  ⌊N_u / B⌋ steps, N_u the unlabelled set); here N_u counts the inputs that are public under the
  run's unit — every private and public input under label privacy, the public pool under record
  privacy (a teacher's own shard adds its size, which is private then) — so every teacher makes
  the same number of steps, a function of public sizes only. None: their 40 epochs.
- fixed, from FixMatch (Sohn et al. 2020, §4 and App. B.1) as Malek et al. use it
  (``lib/pate/settings.py``: μ = 7, τ = 0.95, λ_u = 1, EMA decay 0.999, SGD momentum 0.9 Nesterov):
  :data:`FIXMATCH_TEACHER_FIXED`;
- the augmentation: by data set (:data:`TEACHER_AUGMENTATIONS`, the student's named settings of
  :data:`pate_stab.models.augment.AUGMENTATIONS`), fixed in advance; data sets not named there get
  ``"none"`` (no weak shift or flip; the strong chain is unchanged).

The teachers need images: ``features: raw`` and image data (:func:`check_fixmatch_teachers`, before
anything is written or trained).
"""

from __future__ import annotations

from typing import Any

from pate_stab.models.augment import augmentation_settings
from pate_stab.models.fixmatch import FixMatchConfig

__all__ = [
    "DEFAULT_TEACHER_EPOCHS",
    "FIXMATCH_TEACHER_FIXED",
    "TEACHER_AUGMENTATIONS",
    "check_fixmatch_teachers",
    "fixmatch_teacher_config",
    "unlabelled_size",
]

DEFAULT_TEACHER_EPOCHS = 40
"""Malek et al. 2021's teacher epochs (facebookresearch/label_dp_antipodes README, CIFAR-10: ``--epochs 40``)."""
FIXMATCH_TEACHER_FIXED: dict[str, Any] = {
    "mu": 7,
    "threshold": 0.95,
    "lambda_u": 1.0,
    "optimizer": "sgd",
    "momentum": 0.9,
    "ema": 0.999,
}
"""FixMatch's settings that a run does not change (Sohn et al. 2020; Malek et al. 2021's ``FixmatchConfig``)."""
TEACHER_AUGMENTATIONS = {"mnist": "digits", "svhn": "digits", "fashion_mnist": "clothes", "cifar10": "natural"}
"""The teachers' augmentation per bundled image data set (the student's named settings; others: ``none``)."""


def check_fixmatch_teachers(config: Any, task: Any = None) -> None:
    """Refuse FixMatch teachers without images (before the run folder is written or anything trained).

    ``config``: the run's settings (a :class:`~pate_stab.run.config.TransferConfig`); ``task``: its
    :class:`~pate_stab.run.data.Task` once loaded (``private_x``, ``public_x``)."""
    if config.teachers.teacher_model != "fixmatch":
        return
    if config.feature_stage.features != "raw":
        raise ValueError(
            f"teacher_model: fixmatch trains CNNs on the images themselves: use features: raw, got "
            f"features={config.feature_stage.features!r}"
        )
    if task is not None:
        for name, t in (("private", task.private_x), ("public", task.public_x)):
            if t.dim() != 4:
                raise ValueError(
                    f"teacher_model: fixmatch needs images (n, channels, height, width); the {name} inputs of "
                    f"this run have shape {tuple(t.shape)}"
                )


def unlabelled_size(config: Any, num_private: int, num_public: int) -> int:
    """N_u of the epoch's length: the inputs public under the run's unit (module docstring)."""
    return num_private + num_public if config.release.privacy_unit == "label" else num_public


def fixmatch_teacher_config(config: Any, num_private: int, num_public: int) -> FixMatchConfig:
    """The teachers' :class:`~pate_stab.models.FixMatchConfig` from the run's settings (module docstring).

    ``num_private`` is read under label privacy only (the private inputs are public then)."""
    epochs = DEFAULT_TEACHER_EPOCHS if config.teachers.teacher_epochs is None else config.teachers.teacher_epochs
    per_epoch = max(1, unlabelled_size(config, num_private, num_public) // config.teachers.teacher_batch_size)
    settings: dict[str, Any] = {
        "steps": epochs * per_epoch,
        "batch_size": config.teachers.teacher_batch_size,
        "lr": config.teachers.teacher_lr,
        "weight_decay": config.teachers.teacher_weight_decay,
        "channels": config.teachers.teacher_channels,
        "hidden": config.teachers.teacher_hidden,
        "log_every": max(1, min(100, epochs * per_epoch)),
        **FIXMATCH_TEACHER_FIXED,
        **augmentation_settings(TEACHER_AUGMENTATIONS.get(config.data.dataset, "none")),
    }
    return FixMatchConfig(**settings)
