"""A FixMatch student: a CNN trained on a few labelled public images and many unlabelled ones.

The configuration, the loss (stated there), the learning-rate schedule and the index batches are
:mod:`pate_stab.models.fixmatch` (shared with the FixMatch teachers); this module wraps them in a
Lightning module for one student.

The student sees public inputs and released labels only, so everything here is post-processing
of the release. Prediction uses an exponential moving average (EMA) of the weights when
``config.ema > 0``, as the paper's evaluation does.

References:
    Sohn, Berthelot, Li, Zhang, Carlini, Cubuk, Kurakin, Zhang & Raffel, "FixMatch: Simplifying
    Semi-Supervised Learning with Consistency and Confidence", NeurIPS 2020: Sec. 2.2 (loss,
    Eq. 2–4), Sec. 2.3 (augmentations), Sec. 4 and App. B.1 (SGD with Nesterov momentum 0.9,
    lr 0.03 with cosine decay lr·cos(7πk / 16K), weight decay 5e-4, B = 64, μ = 7, τ = 0.95,
    λ_u = 1, EMA of the weights for evaluation).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import lightning as L
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader

from pate_stab._checks import check_generator, check_int, check_tensor
from pate_stab.models.fitting import fit_module
from pate_stab.models.fixmatch import FixMatchBatches, FixMatchConfig, fixmatch_losses, fixmatch_lr_factor
from pate_stab.models.networks import ModelSpec
from pate_stab.rng import child_seed
from pate_stab.student.training import StudentPredictions, initialised_network

__all__ = ["FixMatchModule", "FixMatchStudent", "train_fixmatch"]


class FixMatchModule(L.LightningModule):
    """Wraps an injected network; one FixMatch step per batch; keeps the EMA copy and history.

    The images live in the module, not in the batches: ``data`` = (labelled images, their labels,
    unlabelled images) moves to the training device once, at the first step, and each batch is a
    pair of index tensors (labelled, unlabelled) into it, so no image crosses between host and
    device per step (only the B + μB indices do). The public pool is small next to a GPU's memory
    (60,000 MNIST-size images in float32: 188 MB). The augmentations then run on the device, one
    call per batch; their random numbers are still drawn on the CPU generator (a handful per
    image, see :mod:`pate_stab.models.augment`), so a seed gives the same draws on any device.
    """

    def __init__(
        self, network: nn.Module, *, config: FixMatchConfig, augment_seed: int, data: tuple[Tensor, Tensor, Tensor]
    ) -> None:
        super().__init__()
        self.network = network
        self._data = data  # a plain attribute: not in the state dict, moved by _data_on only
        self._data_device: torch.device | None = None  # where _data_on last moved it
        self.config = config
        self.ema_network: nn.Module | None = None
        if config.ema > 0:
            self.ema_network = copy.deepcopy(network).requires_grad_(False)
        self.augment_generator = torch.Generator()
        self.augment_generator.manual_seed(augment_seed)
        self.history: list[dict[str, Any]] = []
        self._window: list[Tensor] = []  # per step: (loss, loss_s, loss_u, mask_rate)

    def forward(self, x: Tensor) -> Tensor:
        return self.network(x)

    def _data_on(self, device: torch.device) -> tuple[Tensor, Tensor, Tensor]:
        """The images and labels on ``device``, moved there on the first call only."""
        if self._data_device != device:
            self._data = tuple(t.to(device) for t in self._data)  # type: ignore[assignment]
            self._data_device = device
        return self._data

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        i, j = batch  # (B,), (μB,) indices into the labelled and unlabelled images
        all_x_l, all_y_l, all_x_u = self._data_on(self.device)
        x_l, y_l, x_u = all_x_l[i], all_y_l[i], all_x_u[j]  # (B, C, H, W), (B,), (μB, C, H, W)
        # one model: a stack of one (fixmatch_losses is shared with the stacked FixMatch teachers)
        terms = fixmatch_losses(
            lambda x: self.network(x[0]).unsqueeze(0), x_l[None], y_l[None], x_u[None],
            config=self.config, generators=[self.augment_generator],
        )[:, 0]  # fmt: skip
        self._window.append(terms.detach())
        return terms[0]

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        step = self.global_step  # optimiser steps done, this one included
        if self.ema_network is not None:
            decay = min(self.config.ema, (1 + step) / (10 + step))
            with torch.no_grad():
                for p_ema, p in zip(self.ema_network.parameters(), self.network.parameters(), strict=True):
                    p_ema.lerp_(p, 1 - decay)
        if step % self.config.log_every == 0 or step == self.config.steps:
            means = torch.stack(self._window).mean(0).tolist()
            self._window = []
            lr = self.trainer.optimizers[0].param_groups[0]["lr"]
            names = ("loss", "loss_s", "loss_u", "mask_rate")
            self.history.append({"step": step, **dict(zip(names, means, strict=True)), "lr": lr})

    def configure_optimizers(self) -> Any:
        cfg = self.config
        params = self.network.parameters()
        optimizer: torch.optim.Optimizer
        if cfg.optimizer == "sgd":
            optimizer = torch.optim.SGD(
                params, lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0, weight_decay=cfg.weight_decay
            )
        else:
            optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: fixmatch_lr_factor(k, cfg.steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


@dataclass
class FixMatchStudent(StudentPredictions):
    """A trained FixMatch student.

    Attributes:
        spec: the CNN's architecture.
        network: the network used for prediction — the EMA weights when ``config.ema > 0``.
        config: how it was trained.
        history: one record per ``config.log_every`` steps: step, loss, loss_s, loss_u,
            mask_rate (share of unlabelled images at or above the threshold) and lr.
    """

    spec: ModelSpec
    network: nn.Module
    config: FixMatchConfig
    history: list[dict[str, Any]] = field(default_factory=list)


def _check_images(name: str, x: Any) -> Tensor:
    x = check_tensor(name, x, floating=True, nonempty=False)
    if x.dim() != 4:
        raise ValueError(f"{name} must be images (n, C, H, W), got shape {tuple(x.shape)}")
    if min(x.shape[2:]) < 4:
        raise ValueError(f"{name} must be images of at least 4 × 4 pixels for the CNN, got {tuple(x.shape[2:])}")
    return x.float()


def _check_labels(labels: Any, *, n: int, num_classes: int) -> Tensor:
    y = check_tensor("labels", labels, finite=False, nonempty=False)
    if y.is_floating_point() or y.dtype == torch.bool:
        raise ValueError(
            f"labels must be hard class indices (an integer tensor), got dtype {y.dtype}; "
            "FixMatch takes no soft or probability labels"
        )
    if y.dim() != 1 or y.shape[0] != n:
        raise ValueError(f"labels must have shape ({n},) to match labelled_x, got {tuple(y.shape)}")
    if n and not (int(y.min()) >= 0 and int(y.max()) < num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes - 1}], got range [{int(y.min())}, {int(y.max())}]")
    return y.long()


def train_fixmatch(
    labelled_x: Tensor,
    labels: Tensor,
    unlabelled_x: Tensor,
    *,
    num_classes: int,
    config: FixMatchConfig | None = None,
    generator: torch.Generator,
    accelerator: str = "auto",
    progress_bar: bool = False,
) -> FixMatchStudent:
    """Train a CNN student with FixMatch on public images (Sohn et al. 2020, Sec. 2.2).

    Args:
        labelled_x: public images with a released label, (n, C, H, W) float (any range).
        labels: their class indices, (n,) integer in [0, num_classes).
        unlabelled_x: unlabelled public images, (N, C, H, W) like ``labelled_x`` (N = 0: the
            supervised term alone).
        num_classes: C ≥ 2.
        config: hyper-parameters (default :class:`FixMatchConfig()`; see ``FixMatchConfig.cpu``
            and ``FixMatchConfig.gpu``).
        generator: the initialisation, data-order and augmentation seeds are drawn from it.
        accelerator, progress_bar: passed to ``lightning.Trainer``.

    Returns:
        A :class:`FixMatchStudent` (network on CPU). With no labelled image it holds the
        initialised network untrained, and its history says so.

    Raises:
        TypeError: a non-tensor, non-floating images, a wrong config or generator type.
        ValueError: images that are not (n, C, H, W) or hold NaN / ±inf, images of different
            shapes, labels that are not integers, not of length n or outside [0, num_classes).
    """
    config = FixMatchConfig() if config is None else config
    if not isinstance(config, FixMatchConfig):
        raise TypeError(f"config must be a FixMatchConfig, got {type(config).__name__}")
    check_generator(generator)
    num_classes = check_int("num_classes", num_classes, minimum=2)
    x_l = _check_images("labelled_x", labelled_x)
    x_u = _check_images("unlabelled_x", unlabelled_x)
    if x_l.shape[1:] != x_u.shape[1:]:
        raise ValueError(
            f"labelled_x and unlabelled_x must hold images of one shape, got {tuple(x_l.shape[1:])} "
            f"and {tuple(x_u.shape[1:])}"
        )
    y_l = _check_labels(labels, n=x_l.shape[0], num_classes=num_classes)
    spec = ModelSpec("cnn", tuple(x_l.shape[1:]), num_classes, hidden=config.hidden, channels=config.channels)
    init_seed, data_seed, augment_seed = child_seed(generator), child_seed(generator), child_seed(generator)
    network = initialised_network(spec, init_seed)
    if x_l.shape[0] == 0:
        history = [{"step": 0, "trained": False, "reason": "no labelled images"}]
        return FixMatchStudent(spec, network, config, history)
    if config.lambda_u == 0:
        x_u = x_u[:0]
    module = FixMatchModule(network, config=config, augment_seed=augment_seed, data=(x_l, y_l, x_u))
    batches = FixMatchBatches(x_l.shape[0], x_u.shape[0], batch_size=config.batch_size, mu=config.mu, seed=data_seed)
    fit_module(module, DataLoader(batches, batch_size=None), accelerator=accelerator, progress_bar=progress_bar,
               max_steps=config.steps)  # fmt: skip
    predictor = module.ema_network if module.ema_network is not None else module.network
    return FixMatchStudent(spec, predictor.cpu().eval(), config, module.history)
