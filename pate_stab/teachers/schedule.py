"""Teacher training schedules: the configuration, epochs per teacher, each epoch's data order.

Teacher j gets ``seeds[j]``; in epoch e it walks a fresh permutation of its own shard, drawn from
a generator seeded by ``(seeds[j], e)``, in ``ceil(n_j / B)`` batches of exactly B records (the
last batch wraps around: small shards are cycled, never padded with other records;
:func:`epoch_plan`).

Schedule. By default (``epochs=None``) the schedule is sized in optimiser steps: teacher j trains
``max(DEFAULT_EPOCHS, ceil(min_steps / ceil(n_j / B)))`` epochs over its own shard, so a teacher
on a dozen records makes ``min_steps`` steps (not the 10 of ten one-batch epochs) and a teacher
on a large shard still makes ten passes (:func:`teacher_epochs`). The number depends on the
teacher's own shard size only. An explicit ``epochs`` is respected as given, with a
:class:`ShortScheduleWarning` when some teacher would make fewer than ``min_steps`` steps.

Everything here depends on a teacher's own shard size, seed and the configuration only, so one
record changes the schedule of its own teacher only (DESIGN.md fact 2). The training itself is
:mod:`pate_stab.teachers.training`.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_nonnegative, check_positive

__all__ = [
    "DEFAULT_EPOCHS",
    "DEFAULT_MIN_STEPS",
    "ShortScheduleWarning",
    "TrainConfig",
    "check_schedule",
    "epoch_plan",
    "teacher_epochs",
]

_MIX = 0x9E3779B97F4A7C15  # odd constant for mixing (seed, epoch) into one generator seed
DEFAULT_EPOCHS = 10
"""Passes over a large shard in the default schedule (the earlier fixed default)."""
DEFAULT_MIN_STEPS = 300
"""Optimiser steps every teacher makes in the default schedule, whatever its shard size.

Fixed on a public task, by the training loss only (no evaluation or pool labels): logistic
teachers on 12 MNIST records each (``recipes/diagnostics/teacher_schedule.py``, Adam at 1e-3, B = 32) reach a
mean training loss of 1.39 after 10 steps, 0.068 after 100 and 0.013 after 300 (under 1 % of the
initial ln 10 = 2.30), and 0.002 after 1,000: 300 steps is where the loss has converged to within
1 % of its start, at a third of the cost of 1,000."""


class ShortScheduleWarning(UserWarning):
    """An explicit teacher schedule gives some teacher fewer optimiser steps than ``min_steps``."""


@dataclass(frozen=True)
class TrainConfig:
    """Training hyper-parameters shared by all teachers.

    Attributes:
        epochs: passes over each teacher's own shard; None (default): sized in steps, at least
            ``min_steps`` optimiser steps and at least :data:`DEFAULT_EPOCHS` passes per teacher
            (:func:`teacher_epochs`).
        min_steps: the steps the default schedule gives every teacher; with an explicit
            ``epochs``, the least number of steps below which training warns
            (:class:`ShortScheduleWarning`).
        batch_size: B, records per teacher per step.
        lr: learning rate.
        optimizer: "adam" or "sgd" (with ``momentum``).
        momentum: SGD momentum.
        weight_decay: L2 penalty added to the gradient.
        patience: per-teacher early stopping: stop a teacher after this many epochs without
            its training loss improving by ``min_delta`` (None: train every epoch).
        min_delta: see ``patience``.
    """

    epochs: int | None = None
    batch_size: int = 32
    lr: float = 1e-3
    optimizer: Literal["adam", "sgd"] = "adam"
    momentum: float = 0.9
    weight_decay: float = 0.0
    patience: int | None = None
    min_delta: float = 0.0
    min_steps: int = DEFAULT_MIN_STEPS

    def __post_init__(self) -> None:
        if self.epochs is not None:
            check_int("epochs", self.epochs, minimum=1)
        check_int("min_steps", self.min_steps, minimum=1)
        check_int("batch_size", self.batch_size, minimum=1)
        check_positive("lr", self.lr)
        check_nonnegative("momentum", self.momentum)
        check_nonnegative("weight_decay", self.weight_decay)
        check_nonnegative("min_delta", self.min_delta)
        if self.optimizer not in ("adam", "sgd"):
            raise ValueError(f"optimizer must be 'adam' or 'sgd', got {self.optimizer!r}")
        if self.patience is not None:
            check_int("patience", self.patience, minimum=1)


def teacher_epochs(shard_sizes: Sequence[int], config: TrainConfig) -> list[int]:
    """Epochs each teacher trains: ``config.epochs``, or by default
    ``max(DEFAULT_EPOCHS, ceil(min_steps / ceil(n_j / B)))`` — a function of teacher j's own shard
    size n_j only, so one record changes the schedule of its own teacher only.

    Pinned: B = 32, min_steps = 300: n_j = 12 → 300 epochs (one step each); n_j = 6,000 (188
    steps an epoch) → 10 epochs.
    """
    if config.epochs is not None:
        return [config.epochs] * len(shard_sizes)
    per_epoch = [max(math.ceil(int(n) / config.batch_size), 1) for n in shard_sizes]
    return [max(DEFAULT_EPOCHS, math.ceil(config.min_steps / s)) for s in per_epoch]


def check_schedule(shard_sizes: Sequence[int], config: TrainConfig) -> int:
    """The fewest optimiser steps a non-empty shard's teacher makes; warns when an explicit
    ``epochs`` gives some teacher fewer than ``config.min_steps`` (:class:`ShortScheduleWarning`)."""
    sizes = [int(n) for n in shard_sizes if int(n) > 0]
    if not sizes:
        return 0
    steps = min(e * math.ceil(n / config.batch_size) for e, n in zip(teacher_epochs(sizes, config), sizes, strict=True))
    if config.epochs is not None and steps < config.min_steps:
        warnings.warn(
            f"teacher schedule too short: with epochs={config.epochs} and batch_size={config.batch_size}, the "
            f"teachers on the smallest shards make {steps} optimiser steps (fewer than min_steps="
            f"{config.min_steps}), and teachers on a few records stay near chance. Leave epochs unset "
            "(TrainConfig(epochs=None), teacher_epochs: null) to size the schedule in steps, or raise epochs",
            ShortScheduleWarning,
            stacklevel=3,
        )
    return steps


def epoch_plan(shard: Tensor, *, seed: int, epoch: int, batch_size: int) -> Tensor:
    """Teacher's record indices for one epoch: (ceil(n_j / B), B) int64 (empty shard: (0, B)).

    A permutation of ``shard`` drawn from a generator seeded by (seed, epoch), read cyclically.
    """
    n = int(shard.numel())
    steps = math.ceil(n / batch_size)
    if n == 0:
        return torch.zeros(0, batch_size, dtype=torch.int64)
    gen = torch.Generator()
    gen.manual_seed((int(seed) ^ (_MIX * (epoch + 1))) % (2**63 - 1))
    perm = shard[torch.randperm(n, generator=gen)]
    return perm[torch.arange(steps * batch_size) % n].view(steps, batch_size)
