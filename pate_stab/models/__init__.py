"""pate_stab.models: the model code that the teachers and the students share.

Model definitions (:mod:`~pate_stab.models.networks`), stacked models — k networks as one, their
initialisation and forward pass (:mod:`~pate_stab.models.stacked`) and per-model optimisers
(:mod:`~pate_stab.models.stacked_optim`) —, Lightning fits without noise
(:mod:`~pate_stab.models.fitting`), and FixMatch's configuration, loss, batches and augmentations
(:mod:`~pate_stab.models.fixmatch`, :mod:`~pate_stab.models.augment`). It sits below
:mod:`pate_stab.teachers` and :mod:`pate_stab.student`, which both use it and never import each
other; it imports neither of them.

Usage::

    spec = ModelSpec("mlp", (784,), 10, hidden=(128,))
    params = init_stacked_parameters(spec, seeds=range(250))  # 250 networks, slice j from seed j
    logits = stacked_forward(build_model(spec), params, x, shared_input=True)  # (250, B, 10)

The names below are imported on first use (PEP 562): reading a :class:`ModelSpec` (``pate-stab
predict``) loads no Lightning.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports

if TYPE_CHECKING:
    from pate_stab.models.augment import (
        AUGMENTATIONS,
        augmentation_settings,
        cutout_size,
        strong_augment,
        weak_augment,
    )
    from pate_stab.models.fitting import fit_module, quiet_lightning
    from pate_stab.models.fixmatch import FixMatchBatches, FixMatchConfig, fixmatch_losses, fixmatch_lr_factor
    from pate_stab.models.networks import ModelSpec, PateCNN, build_model, init_layout, init_parameters
    from pate_stab.models.stacked import init_stacked_parameters, stacked_forward
    from pate_stab.models.stacked_optim import StackedAdam, StackedSGD

_LAZY = {
    "AUGMENTATIONS": "pate_stab.models.augment",
    "augmentation_settings": "pate_stab.models.augment",
    "cutout_size": "pate_stab.models.augment",
    "strong_augment": "pate_stab.models.augment",
    "weak_augment": "pate_stab.models.augment",
    "fit_module": "pate_stab.models.fitting",
    "quiet_lightning": "pate_stab.models.fitting",
    "FixMatchBatches": "pate_stab.models.fixmatch",
    "FixMatchConfig": "pate_stab.models.fixmatch",
    "fixmatch_losses": "pate_stab.models.fixmatch",
    "fixmatch_lr_factor": "pate_stab.models.fixmatch",
    "ModelSpec": "pate_stab.models.networks",
    "PateCNN": "pate_stab.models.networks",
    "build_model": "pate_stab.models.networks",
    "init_layout": "pate_stab.models.networks",
    "init_parameters": "pate_stab.models.networks",
    "init_stacked_parameters": "pate_stab.models.stacked",
    "stacked_forward": "pate_stab.models.stacked",
    "StackedAdam": "pate_stab.models.stacked_optim",
    "StackedSGD": "pate_stab.models.stacked_optim",
}

__all__ = [
    "AUGMENTATIONS",
    "FixMatchBatches",
    "FixMatchConfig",
    "ModelSpec",
    "PateCNN",
    "StackedAdam",
    "StackedSGD",
    "augmentation_settings",
    "build_model",
    "cutout_size",
    "fit_module",
    "fixmatch_losses",
    "fixmatch_lr_factor",
    "init_layout",
    "init_parameters",
    "init_stacked_parameters",
    "quiet_lightning",
    "stacked_forward",
    "strong_augment",
    "weak_augment",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
