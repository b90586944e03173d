"""pate_stab.direct: private learners trained directly on the private data, beside the releasers.

DP-SGD (Abadi et al. 2016) with Opacus's Poisson sampler and RDP accountant: a linear head with
the clipped sum in closed form (:mod:`~pate_stab.direct.dpsgd`), or any module through Opacus's
engine (:mod:`~pate_stab.direct.opacus_engine`), e.g. Tramèr & Boneh 2021's tanh CNN on the raw images
(:mod:`~pate_stab.direct.cnn`, best on a GPU); the convex heads
themselves live in :mod:`pate_stab.erm` (one-vs-rest :class:`~pate_stab.erm.PrivateLinearHead`,
softmax :mod:`pate_stab.erm.multinomial`). The direct learners of a run are one registry
(:mod:`~pate_stab.direct.registry`: each learner's relation, unit, noise kind, plan and training,
:mod:`~pate_stab.direct.learners`); :mod:`pate_stab.run.direct` runs them as ``compare`` rows.
"""

from pate_stab.direct.cnn import CNN_DPSGD, TanhCNN, cnn_dpsgd_config, train_dpsgd_cnn
from pate_stab.direct.dpsgd import (
    DPSGDConfig,
    DPSGDLinear,
    SmallPrivateSetWarning,
    clipped_noisy_gradient,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
    dpsgd_schedule,
    train_dpsgd_linear,
)
from pate_stab.direct.opacus_engine import DPSGDModule, engine_schedule, train_dpsgd_module

__all__ = [
    "CNN_DPSGD",
    "DPSGDConfig",
    "DPSGDLinear",
    "DPSGDModule",
    "SmallPrivateSetWarning",
    "TanhCNN",
    "clipped_noisy_gradient",
    "cnn_dpsgd_config",
    "dpsgd_epsilon",
    "dpsgd_noise_multiplier",
    "dpsgd_schedule",
    "engine_schedule",
    "train_dpsgd_cnn",
    "train_dpsgd_linear",
    "train_dpsgd_module",
]
