"""FixMatch's training ingredients, shared by the FixMatch student and the FixMatch teachers.

:class:`FixMatchConfig` (the hyper-parameters), :func:`fixmatch_losses` (the loss of S models at
once, each on its own batch), :func:`fixmatch_lr_factor` (the cosine learning-rate decay) and
:class:`FixMatchBatches` (endless labelled / unlabelled index batches). The student
(:mod:`pate_stab.student.fixmatch`) trains one CNN with them, the teachers
(:mod:`pate_stab.teachers.fixmatch`) stacks of S CNNs; the augmentations are
:mod:`pate_stab.models.augment`.

Each step draws a labelled batch of B images and an unlabelled batch of μ·B images. The
supervised term is the cross-entropy on weakly augmented labelled images. For each unlabelled
image the network's prediction on a weak augmentation is a pseudo-label when its top
probability is at least τ; the unsupervised term is the cross-entropy of the network on a
strong augmentation of the same image to that pseudo-label, averaged over all μ·B images with
the ones below τ masked out. The loss is L_s + λ_u · L_u; the pseudo-labels carry no gradient.

References:
    Sohn, Berthelot, Li, Zhang, Carlini, Cubuk, Kurakin, Zhang & Raffel, "FixMatch: Simplifying
    Semi-Supervised Learning with Consistency and Confidence", NeurIPS 2020: Sec. 2.2 (loss,
    Eq. 2–4), Sec. 2.3 (augmentations), Sec. 4 and App. B.1 (SGD with Nesterov momentum 0.9,
    lr 0.03 with cosine decay lr·cos(7πk / 16K), weight decay 5e-4, B = 64, μ = 7, τ = 0.95,
    λ_u = 1, EMA of the weights for evaluation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import IterableDataset

from pate_stab._checks import check_int, check_nonnegative, check_positive, check_real
from pate_stab.models.augment import strong_augment, weak_augment

__all__ = ["FixMatchBatches", "FixMatchConfig", "fixmatch_losses", "fixmatch_lr_factor"]


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
            whose labels survive a mirror; see :data:`~pate_stab.models.augment.AUGMENTATIONS`).
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


def fixmatch_lr_factor(step: int, total: int) -> float:
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


class FixMatchBatches(IterableDataset):
    """Endless (labelled, unlabelled) index batches: each set is read in successive random
    permutations (every image once per pass; a pass shorter than a batch is repeated within it).
    The images stay in the training module (the student's
    :class:`~pate_stab.student.fixmatch.FixMatchModule`, the teachers'
    :class:`~pate_stab.teachers.fixmatch.FixMatchTeacherModule`), which indexes them on its device."""

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
