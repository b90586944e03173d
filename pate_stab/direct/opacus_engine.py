"""DP-SGD on any ``torch.nn.Module`` through Opacus's engine (per-sample gradient hooks), e.g. a CNN on images.

The same algorithm and accounting as :mod:`pate_stab.direct.dpsgd` — Poisson sampling at rate
q = 1 / ⌈n / expected batch⌉ (Opacus's loader), per-sample clipping to ``max_grad_norm``, Gaussian noise σ·C, σ from
Opacus's ``get_noise_multiplier`` with the RDP accountant, add/remove neighbours — but the
per-sample gradients come from Opacus's ``PrivacyEngine.make_private`` (``GradSampleModule``
hooks), so any layer Opacus supports works. That is slow for the wide linear head on a CPU, where
:func:`pate_stab.direct.train_dpsgd_linear` computes the clipped sum in closed form; this path is
meant for GPU recipes (the students' CNN on the private images). Modules with batch statistics
(BatchNorm) are refused by Opacus: use GroupNorm.

References: Abadi et al. 2016, Alg 1; Mironov, Talwar & Zhang 2019 (sampled Gaussian RDP);
Yousefpour et al. 2021 (Opacus).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from pate_stab._validation import check_delta, check_epsilon, check_generator
from pate_stab.direct.dpsgd import DPSGDConfig, check_dpsgd_inputs, dpsgd_epsilon, dpsgd_noise_multiplier

__all__ = ["DPSGDModule", "engine_schedule", "train_dpsgd_module"]


@dataclass
class DPSGDModule:
    """A module trained by DP-SGD and its guarantee (add/remove one record)."""

    module: nn.Module
    noise_multiplier: float
    sample_rate: float
    steps: int
    epsilon: float  # Opacus's accountant after the steps taken, at ``delta``
    delta: float
    config: DPSGDConfig


def engine_schedule(n: int, config: DPSGDConfig) -> tuple[float, int]:
    """(q, steps) of :func:`train_dpsgd_module` on n records: Opacus's Poisson loader samples at
    q = 1 / ⌈n / B⌉ (B the expected batch size) and takes ⌈n / B⌉ steps an epoch.

    Example:
        >>> engine_schedule(60000, DPSGDConfig(expected_batch_size=512, epochs=40))
        (0.00847457627118644, 4720)
    """
    batches = math.ceil(n / config.expected_batch_size)
    return 1.0 / batches, batches * config.epochs


def train_dpsgd_module(
    make_module: Callable[[], nn.Module],
    x: object,
    y: object,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    generator: torch.Generator,
    config: DPSGDConfig,
    device: str | torch.device = "cpu",
) -> DPSGDModule:
    """Train ``make_module()`` on (x, y) by DP-SGD at (ε, δ) with Opacus's engine.

    Args:
        make_module: builds the untrained network (its initialisation uses no private data).
        x: inputs (n, ...), e.g. images (n, C, H, W).
        y: class indices in [0, ``num_classes``).
        epsilon, delta: the target; σ is chosen so that the RDP accountant gives at most ε.
        generator: the Poisson sampling and the noise (CPU generator; with ``device`` a GPU the
            noise generator is created on it from a seed drawn from this one).
        config: settings fixed in advance (expected batch, epochs, learning rate, momentum, C).

    Raises:
        ValueError: NaN/inf inputs, labels outside [0, C), ε ≤ 0, δ outside (0, 1), fewer records
            than the expected batch size.
    """
    from opacus import PrivacyEngine

    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    check_generator(generator)
    num_classes, xt, yt = check_dpsgd_inputs(x, y, num_classes=num_classes, config=config)
    xt = xt.float()
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(xt, yt), batch_size=config.expected_batch_size,
                                         generator=generator)  # fmt: skip
    q, steps = engine_schedule(xt.shape[0], config)
    if len(loader) * config.epochs != steps:  # Opacus's loader: q = 1 / len(loader), len(loader) steps an epoch
        raise RuntimeError(f"the loader has {len(loader)} batches, the schedule {steps // config.epochs}")
    sigma = dpsgd_noise_multiplier(epsilon=epsilon, delta=delta, sample_rate=q, steps=steps)
    device = torch.device(device)
    module = make_module().to(device)
    optimizer = torch.optim.SGD(module.parameters(), lr=config.lr, momentum=config.momentum)
    noise_gen = (
        generator
        if device.type == "cpu"
        else torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
    )
    engine = PrivacyEngine(accountant="rdp")
    private, optimizer, loader = engine.make_private(
        module=module, optimizer=optimizer, data_loader=loader, noise_multiplier=sigma,
        max_grad_norm=config.max_grad_norm, poisson_sampling=True, noise_generator=noise_gen,
    )  # fmt: skip
    loss_fn = nn.CrossEntropyLoss()
    private.train()
    taken = 0
    for _ in range(config.epochs):
        for xb, yb in loader:  # Poisson batches: len(loader) = round(1 / q) per epoch
            optimizer.zero_grad()
            if xb.shape[0]:
                loss_fn(private(xb.to(device)), yb.to(device)).backward()
            optimizer.step()  # an empty batch still adds the noise
            taken += 1
    spent = float(engine.get_epsilon(delta))
    planned = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta)
    if taken != steps or abs(spent - planned) > 1e-9 * max(1.0, planned):
        raise RuntimeError(f"Opacus took {taken} steps (planned {steps}) or accounted ε={spent}")
    return DPSGDModule(private._module, sigma, q, steps, spent, delta, config)  # noqa: SLF001 - Opacus's wrapper
