"""A FixMatch student: a CNN trained on a few labelled public images and many unlabelled ones.

Each step draws a labelled batch of B images and an unlabelled batch of μ·B images. The
supervised term is the cross-entropy on weakly augmented labelled images. For each unlabelled
image the network's prediction on a weak augmentation is a pseudo-label when its top
probability is at least τ; the unsupervised term is the cross-entropy of the network on a
strong augmentation of the same image to that pseudo-label, averaged over all μ·B images with
the ones below τ masked out. The loss is L_s + λ_u · L_u; the pseudo-labels carry no gradient.

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
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import lightning as L
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, IterableDataset

from pate_stab._checks import (
    check_generator,
    check_int,
    check_nonnegative,
    check_positive,
    check_real,
    check_tensor,
)
from pate_stab.rng import child_seed
from pate_stab.student.augment import strong_augment, weak_augment
from pate_stab.student.training import StudentPredictions, fit_module, initialised_network
from pate_stab.teachers.models import ModelSpec

__all__ = ["FixMatchConfig", "FixMatchModule", "FixMatchStudent", "fixmatch_losses", "train_fixmatch"]


@dataclass(frozen=True)
class FixMatchConfig:
    """FixMatch hyper-parameters (defaults: the paper's, with μ = 3 and a small CNN for CPUs).

    Attributes:
        steps: optimiser steps K.
        batch_size: labelled images per step B.
        mu: unlabelled images per labelled image μ (μ·B unlabelled images per step).
        threshold: pseudo-label confidence τ in (0, 1].
        lambda_u: weight λ_u of the unlabelled term (0: supervised training on the labelled
            images only, with weak augmentation; the unlabelled images are then not read).
        optimizer: "sgd" (Nesterov momentum, the paper's) or "adam" (AdamW, decoupled decay).
        lr: initial learning rate; both optimisers decay it as lr·cos(7πk / 16K).
        momentum: SGD momentum (ignored by Adam).
        weight_decay: SGD's L2 penalty / AdamW's decoupled decay.
        channels: widths of the CNN's two 5×5 convolutions (:class:`PateCNN`).
        hidden: widths of the CNN's fully connected layers before the output.
        ema: decay of the weight average used for prediction (0: predict with the raw weights).
            The decay at step k is min(ema, (1 + k) / (10 + k)), so short runs average too.
        weak_shift: the weak augmentation's largest translation in pixels.
        hflip: both augmentations mirror each image left–right with probability 1/2 (for data
            whose labels survive a mirror; see :data:`~pate_stab.student.augment.AUGMENTATIONS`).
        log_every: steps per history record (means over the window).
    """

    steps: int = 3000
    batch_size: int = 64
    mu: int = 3
    threshold: float = 0.95
    lambda_u: float = 1.0
    optimizer: Literal["sgd", "adam"] = "sgd"
    lr: float = 0.03
    momentum: float = 0.9
    weight_decay: float = 5e-4
    channels: tuple[int, int] = (32, 64)
    hidden: tuple[int, ...] = (128,)
    ema: float = 0.999
    weak_shift: int = 2
    hflip: bool = False
    log_every: int = 100

    def __post_init__(self) -> None:
        check_int("steps", self.steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_int("mu", self.mu, minimum=1)
        check_real("threshold", self.threshold, low=0.0, high=1.0, low_inclusive=False)
        check_nonnegative("lambda_u", self.lambda_u)
        if self.optimizer not in ("sgd", "adam"):
            raise ValueError(f"optimizer must be 'sgd' or 'adam', got {self.optimizer!r}")
        check_positive("lr", self.lr)
        check_real("momentum", self.momentum, low=0.0, high=1.0, high_inclusive=False)
        check_nonnegative("weight_decay", self.weight_decay)
        object.__setattr__(self, "channels", tuple(self.channels))
        object.__setattr__(self, "hidden", tuple(self.hidden))
        if len(self.channels) != 2:
            raise ValueError(f"channels must hold the two convolution widths, got {self.channels}")
        for name, widths in (("channels", self.channels), ("hidden", self.hidden)):
            for width in widths:
                check_int(name, width, minimum=1)
        check_real("ema", self.ema, low=0.0, high=1.0, high_inclusive=False)
        check_int("weak_shift", self.weak_shift, minimum=0)
        if not isinstance(self.hflip, bool):
            raise TypeError(f"hflip must be True or False, got {self.hflip!r}")
        check_int("log_every", self.log_every, minimum=1)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def cpu(cls, **overrides: Any) -> FixMatchConfig:
        """Preset for one CPU core: 3000 steps of B = 32, μ = 3 with a (32, 64)-channel CNN and
        one 128-wide fully connected layer; about 0.09 s per step on one core for 28 × 28 images
        (under 5 minutes in all). ``overrides`` replace single fields."""
        settings: dict[str, Any] = {"steps": 3000, "batch_size": 32, "mu": 3, "channels": (32, 64), "hidden": (128,)}
        return cls(**(settings | overrides))

    @classmethod
    def gpu(cls, **overrides: Any) -> FixMatchConfig:
        """Preset for one GPU: 20,000 steps of the paper's B = 64, μ = 7 with PATE's (64, 128)
        CNN and fully connected layers (384, 192). ``overrides`` replace single fields."""
        settings: dict[str, Any] = {
            "steps": 20_000,
            "batch_size": 64,
            "mu": 7,
            "channels": (64, 128),
            "hidden": (384, 192),
            "log_every": 500,
        }
        return cls(**(settings | overrides))


def _lr_factor(step: int, total: int) -> float:
    """FixMatch's cosine decay cos(7πk / 16K) (App. B.1)."""
    return math.cos(7 * math.pi * step / (16 * total))


def fixmatch_losses(
    forward: Callable[[Tensor], Tensor],
    x_l: Tensor,
    y_l: Tensor,
    x_u: Tensor,
    *,
    config: FixMatchConfig,
    generators: Sequence[torch.Generator],
) -> Tensor:
    """FixMatch's loss of S models at once, each on its own batch (Sohn et al. 2020, Eq. 2–4).

    Model s: the supervised term is the mean cross-entropy on its weakly augmented labelled images;
    its pseudo-labels are its own predictions on a weak augmentation of its unlabelled images
    where their top probability is at least τ (no gradient); the unsupervised term is the mean,
    over all μB images with those below τ masked out, of the cross-entropy of its predictions on
    a strong augmentation to those pseudo-labels. Nothing of model s's terms reads another
    model's batch or outputs, so the sum of the S losses has, for model s's parameters, the
    gradient of model s's own loss.

    Args:
        forward: maps images (S, n, C, H, W) to logits (S, n, K), model s on batch s.
        x_l: labelled images (S, B, C, H, W); y_l: their classes (S, B).
        x_u: unlabelled images (S, μB, C, H, W) (μB = 0: the supervised term alone).
        config: τ, λ_u and the augmentations' settings.
        generators: one per model; model s's augmentations draw from ``generators[s]`` in the
            order weak (labelled), weak (unlabelled), strong (unlabelled), as one model alone would.

    Returns:
        (4, S): each model's loss L_s + λ_u·L_u, L_s, L_u and mask rate (share of its unlabelled
        images at or above τ).
    """
    cfg = config
    weak = {"max_shift": cfg.weak_shift, "hflip": cfg.hflip}
    models, batch = y_l.shape

    def each(augment: Callable[..., Tensor], x: Tensor, **settings: Any) -> Tensor:
        return torch.stack([augment(x[s], generator=g, **settings) for s, g in enumerate(generators)])

    logits = forward(each(weak_augment, x_l, **weak))  # (S, B, K)
    loss_s = F.cross_entropy(logits.flatten(0, 1), y_l.flatten(), reduction="none").view(models, batch).mean(1)
    loss_u = mask_rate = torch.zeros(models, device=x_l.device)
    if cfg.lambda_u > 0 and x_u.shape[1]:
        with torch.no_grad():
            probs = forward(each(weak_augment, x_u, **weak)).softmax(-1)
            confidence, pseudo = probs.max(-1)  # (S, μB), (S, μB)
            mask = (confidence >= cfg.threshold).float()
        logits_strong = forward(each(strong_augment, x_u, hflip=cfg.hflip))  # (S, μB, K)
        per_image = F.cross_entropy(logits_strong.flatten(0, 1), pseudo.flatten(), reduction="none")
        loss_u = (per_image.view(mask.shape) * mask).mean(1)
        mask_rate = mask.mean(1)
    return torch.stack([loss_s + cfg.lambda_u * loss_u, loss_s, loss_u, mask_rate])


class FixMatchModule(L.LightningModule):
    """Wraps an injected network; one FixMatch step per batch; keeps the EMA copy and history.

    The images live in the module, not in the batches: ``data`` = (labelled images, their labels,
    unlabelled images) moves to the training device once, at the first step, and each batch is a
    pair of index tensors (labelled, unlabelled) into it, so no image crosses between host and
    device per step (only the B + μB indices do). The public pool is small next to a GPU's memory
    (60,000 MNIST-size images in float32: 188 MB). The augmentations then run on the device, one
    call per batch; their random numbers are still drawn on the CPU generator (a handful per
    image, see :mod:`pate_stab.student.augment`), so a seed gives the same draws on any device.
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
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: _lr_factor(k, cfg.steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class _Batches(IterableDataset):
    """Endless (labelled, unlabelled) index batches: each set is read in successive random
    permutations (every image once per pass; a pass shorter than a batch is repeated within it).
    The images stay in :class:`FixMatchModule`, which indexes them on its device."""

    def __init__(self, n_labelled: int, n_unlabelled: int, *, batch_size: int, mu: int, seed: int) -> None:
        self.n_labelled, self.n_unlabelled = n_labelled, n_unlabelled
        self.batch_size, self.mu, self.seed = batch_size, mu, seed

    def __iter__(self) -> Iterator[tuple[Tensor, Tensor]]:
        gen = torch.Generator()
        gen.manual_seed(self.seed)
        labelled = _index_stream(self.n_labelled, self.batch_size, gen)
        unlabelled = _index_stream(self.n_unlabelled, self.mu * self.batch_size, gen)
        while True:
            yield next(labelled), next(unlabelled)


def _index_stream(n: int, size: int, generator: torch.Generator) -> Iterator[Tensor]:
    buffer = torch.empty(0, dtype=torch.long)
    while True:
        if n == 0:
            yield buffer
            continue
        while buffer.numel() < size:
            buffer = torch.cat([buffer, torch.randperm(n, generator=generator)])
        yield buffer[:size]
        buffer = buffer[size:]


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
    batches = _Batches(x_l.shape[0], x_u.shape[0], batch_size=config.batch_size, mu=config.mu, seed=data_seed)
    fit_module(module, DataLoader(batches, batch_size=None), accelerator=accelerator, progress_bar=progress_bar,
               max_steps=config.steps)  # fmt: skip
    predictor = module.ema_network if module.ema_network is not None else module.network
    return FixMatchStudent(spec, predictor.cpu().eval(), config, module.history)
