"""DP-SGD on any ``torch.nn.Module`` through Opacus's parts (per-sample gradient hooks), e.g. a CNN on images.

The same algorithm and accounting as :mod:`pate_stab.direct.dpsgd` — Poisson sampling at rate
q = 1 / ⌈N / B⌉ (the rule of Opacus's ``DPDataLoader``, applied to the public size N, never to the
actual count n: :mod:`pate_stab.direct.dpsgd`'s "public size"), ⌈N / B⌉ steps an epoch, per-sample
clipping to ``max_grad_norm``, Gaussian noise σ·C, the sum divided by the expected batch size B,
σ from Opacus's ``get_noise_multiplier`` with the RDP accountant, add/remove neighbours — but the
per-sample gradients come from Opacus's ``GradSampleModule`` hooks, so any layer Opacus supports
works.

Opacus's ``PrivacyEngine.make_private`` is not used: it reads the actual count (``len(dataset)``)
for the sampling rate and for the divisor (``expected_batch_size = int(len(dataset) · q)``), both
private under add/remove. The parts are assembled here instead, each from public values:
Opacus's ``UniformWithReplacementSampler`` (each of the n records drawn with probability q),
``GradSampleModule`` (per-sample gradients of the summed loss), ``DPOptimizer`` (clipping, noise,
division by B) and an ``RDPAccountant`` fed by the optimizer's step hook (no ``PrivacyEngine`` is
made, so its "Secure RNG turned off" warning is never printed). The hooks are slow for the wide
linear head on a CPU, where :func:`pate_stab.direct.train_dpsgd_linear` computes the clipped sum
in closed form; this path is meant for GPU recipes (the students' CNN on the private images).
Modules with batch statistics (BatchNorm) are refused by Opacus: use GroupNorm.

References: Abadi et al. 2016, Alg 1; Mironov, Talwar & Zhang 2019 (sampled Gaussian RDP);
Yousefpour et al. 2021 (Opacus).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from pate_stab._checks import check_delta, check_epsilon, check_generator
from pate_stab.direct.dpsgd import (
    DPSGDConfig,
    check_dpsgd_inputs,
    check_public_size,
    dpsgd_epsilon,
    dpsgd_noise_multiplier,
    warn_if_small,
)

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


def engine_schedule(public_size: int, config: DPSGDConfig) -> tuple[float, int]:
    """(q, steps) of :func:`train_dpsgd_module` for the public size N: Opacus's loader rule
    q = 1 / ⌈N / B⌉ (B the expected batch size), ⌈N / B⌉ steps an epoch.

    Example:
        >>> engine_schedule(60000, DPSGDConfig(expected_batch_size=512, epochs=40))
        (0.00847457627118644, 4720)
    """
    batches = math.ceil(check_public_size(public_size, config) / config.expected_batch_size)
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
    public_size: int,
    device: str | torch.device = "cpu",
    secure_mode: bool = False,
) -> DPSGDModule:
    """Train ``make_module()`` on (x, y) by DP-SGD at (ε, δ) with Opacus's parts (module docstring).

    Args:
        make_module: builds the untrained network (its initialisation uses no private data).
        x: inputs (n, ...), e.g. images (n, C, H, W).
        y: class indices in [0, ``num_classes``).
        epsilon, delta: the target; σ is chosen so that the RDP accountant gives at most ε.
        generator: the Poisson sampling and the noise (CPU generator; with ``device`` a GPU the
            noise generator is created on it from a seed drawn from this one).
        config: settings fixed in advance (expected batch, epochs, learning rate, momentum, C).
        public_size: N, the private set's public size: q, steps, σ and the divisor B come from it.
        secure_mode: ``DPOptimizer(secure_mode=True)``: Opacus's noise against floating-point
            attacks (:func:`pate_stab.direct.dpsgd.gaussian_noise`), drawn from the generator given
            here (Opacus's ``PrivacyEngine(secure_mode=True)`` would also need ``torchcsprng``).

    Raises:
        ValueError: NaN/inf inputs, labels outside [0, C), ε ≤ 0, δ outside (0, 1), N smaller
            than the expected batch size, a layer Opacus cannot train.
    """
    from opacus import GradSampleModule
    from opacus.accountants import RDPAccountant
    from opacus.optimizers import DPOptimizer
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler
    from opacus.validators import ModuleValidator

    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    check_generator(generator)
    q, steps = engine_schedule(public_size, config)
    num_classes, xt, yt = check_dpsgd_inputs(x, y, num_classes=num_classes, config=config)
    xt = xt.float()
    n = xt.shape[0]
    warn_if_small(n, public_size, config)
    sigma = dpsgd_noise_multiplier(epsilon=epsilon, delta=delta, sample_rate=q, steps=steps)
    device = torch.device(device)
    module = make_module().to(device)
    ModuleValidator.validate(module, strict=True)  # e.g. BatchNorm: refused before any step
    noise_gen = (
        generator
        if device.type == "cpu"
        else torch.Generator(device=device).manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
    )
    # per-sample gradients of the summed loss; DPOptimizer clips them, sums, adds N(0, σ²C²) and
    # divides by expected_batch_size = B (loss_reduction "mean"), the public q N, never by n
    private = GradSampleModule(module, batch_first=True, loss_reduction="sum")
    optimizer = DPOptimizer(
        torch.optim.SGD(private.parameters(), lr=config.lr, momentum=config.momentum), noise_multiplier=sigma,
        max_grad_norm=config.max_grad_norm, expected_batch_size=config.expected_batch_size, loss_reduction="mean",
        generator=noise_gen, secure_mode=secure_mode,
    )  # fmt: skip
    accountant = RDPAccountant()
    optimizer.attach_step_hook(accountant.get_optimizer_hook_fn(sample_rate=q))
    # each of the n actual records is drawn with probability q (n: the sampler's loop bound only)
    sampler = UniformWithReplacementSampler(num_samples=n, sample_rate=q, generator=generator, steps=steps)
    loss_fn = nn.CrossEntropyLoss(reduction="sum")
    # the private set moves to the device once, and every batch is indexed there: no host→device
    # copy of images per step (60,000 MNIST-size images in float32 are 188 MB of device memory);
    # only each batch's index list, drawn on the CPU by the sampler, is copied per step
    xt, yt = xt.to(device), yt.to(device)
    private.train()
    taken = 0
    with warnings.catch_warnings():
        # torch's note on Opacus's hooks when the inputs need no gradient (they never do here)
        warnings.filterwarnings("ignore", message="Full backward hook is firing when gradients are computed")
        for batch in sampler:
            index = torch.as_tensor(batch, dtype=torch.int64).to(device)
            optimizer.zero_grad()
            # an empty batch still goes through: its clipped sum is zero and the step adds the noise
            loss_fn(private(xt[index]), yt[index]).backward()
            optimizer.step()
            taken += 1
    spent = float(accountant.get_epsilon(delta))
    planned = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta)
    if taken != steps or abs(spent - planned) > 1e-9 * max(1.0, planned):
        raise RuntimeError(f"Opacus took {taken} steps (planned {steps}) or accounted ε={spent}")
    return DPSGDModule(private._module, sigma, q, steps, spent, delta, config)  # noqa: SLF001 - Opacus's wrapper
