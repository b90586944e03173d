"""Training k teachers with Lightning: one vectorised fit, or one fit per teacher.

Data order. Teacher j gets ``seeds[j]`` (drawn from the caller's generator in teacher order).
In epoch e it walks a fresh permutation of its own shard, drawn from a generator seeded by
``(seeds[j], e)``, in ``ceil(n_j / B)`` batches of exactly B records (the last batch wraps
around to the start of the permutation, so small shards are cycled, never padded with other
records). A vectorised step gives every teacher one batch; a teacher whose epoch is already
done (its shard is smaller than the largest) is inactive for the remaining steps — its
optimiser does not move it. So teacher j's trajectory depends on its own shard, seed and the
configuration only: perturbing, adding or removing records of another shard leaves it
bit-for-bit unchanged, and the sequential mode (one Lightning fit per teacher, same seeds)
reproduces it up to floating-point summation order. Epochs are chosen per teacher in the
same way: optional early stopping is decided per teacher on its own training loss.

Schedule: the configuration, epochs per teacher and each epoch's data order are in
:mod:`pate_stab.teachers.schedule` (exported here too). This module (about 460 lines) keeps the
Lightning module together with the two fits that drive it (vectorised and sequential) and their
shared trainer set-up, which the several-process fit (:mod:`pate_stab.teachers.distributed`) reuses.

Checkpoints and resume. With ``run_dir`` (convention: ``checkpoints/<run>/teachers``), the
vectorised fit writes a Lightning checkpoint ``lightning/last.ckpt`` at the end of every epoch
(every ⌈epochs / 20⌉-th epoch when a fit runs more than 20; stacked parameters, optimiser state,
per-teacher early-stopping state; never the private data) and the finished ensemble as
``config.json`` + ``weights.pt``. ``resume=True`` continues from ``last.ckpt``; because every
epoch's data order is a function of (seed, epoch), the resumed run equals the uninterrupted one.

Several devices. Teachers are independent, so the ensemble splits by teacher index: run
``train_teachers(..., teacher_indices=range(a, b), accelerator="gpu", devices=[r])`` in one
process per device r (or per rank of a multi-process launch, with slice r of the indices) and
join the parts with :meth:`TeacherEnsemble.concatenate`. The seeds depend only on the global
teacher index, so the joined ensemble is the one a single device would have trained. Lightning's
DDP launcher does this for you across processes and nodes in
:func:`pate_stab.teachers.distributed.train_teachers_ddp` (one teacher slice per rank, no gradient
all-reduce: plain data-parallel DDP would replicate all k teachers on every device and average
gradients, which is not what teachers need).
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any, Literal, cast

import lightning as L
import torch
import torch.nn.functional as F
from lightning.pytorch.core.optimizer import LightningOptimizer
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from pate_stab._checks import (
    check_generator,
    check_int,
    check_tensor,
)
from pate_stab.models.fitting import quiet_lightning
from pate_stab.models.networks import ModelSpec, build_model
from pate_stab.models.stacked import init_stacked_parameters, stacked_forward
from pate_stab.models.stacked_optim import StackedAdam, StackedSGD
from pate_stab.privacy.ledger.private_files import owner_only_umask, private_folder, tighten_private_tree
from pate_stab.rng import child_seed
from pate_stab.teachers.ensemble import TeacherEnsemble, _param_key
from pate_stab.teachers.schedule import (
    DEFAULT_EPOCHS,
    DEFAULT_MIN_STEPS,
    ShortScheduleWarning,
    TrainConfig,
    check_schedule,
    epoch_plan,
    teacher_epochs,
)

__all__ = [
    "DEFAULT_EPOCHS",
    "DEFAULT_MIN_STEPS",
    "ShortScheduleWarning",
    "TrainConfig",
    "TeacherEnsembleModule",
    "check_schedule",
    "epoch_plan",
    "teacher_epochs",
    "train_teachers",
]

CHECKPOINTS_PER_FIT = 20


class TeacherEnsembleModule(L.LightningModule):
    """Trains ``len(seeds)`` teachers at once; teacher j sees only ``x[shards[j]]``.

    ``y``: the labels (n,), or per-teacher targets (k, n) where teacher j's target for row i is
    ``y[j, i]`` and teacher j reads row j only (:mod:`pate_stab.teachers.self_training`).

    The network is injected through ``spec`` and rebuilt here; the private tensors ``x``, ``y``
    are plain attributes (never in ``state_dict``, so never in a checkpoint). Per-teacher
    metrics of every finished epoch are kept in ``self.history``.
    """

    # per-teacher state (k,), registered as buffers by build_teachers
    stopped: Tensor
    best_loss: Tensor
    wait: Tensor

    def __init__(
        self,
        spec: ModelSpec,
        config: TrainConfig,
        seeds: Sequence[int],
        x: Tensor,
        y: Tensor,
        shards: Sequence[Tensor],
    ) -> None:
        super().__init__()
        self.spec, self.config = spec, config
        self.x, self.y = x, y
        self.build_teachers(seeds, shards)

    def build_teachers(self, seeds: Sequence[int], shards: Sequence[Tensor]) -> None:
        """Create the stacked parameters and per-teacher state of teachers ``seeds``/``shards``."""
        if len(seeds) != len(shards):
            raise ValueError(f"{len(seeds)} seeds for {len(shards)} shards")
        self.seeds = [int(s) for s in seeds]
        self.shards = [s.long().cpu() for s in shards]
        k, config, spec = len(self.seeds), self.config, self.spec
        self.base = build_model(spec)
        for p in self.base.parameters():
            p.requires_grad_(False)
        stacked = init_stacked_parameters(spec, self.seeds)
        self.names = list(stacked)
        self.stacked = nn.ParameterDict({_param_key(n): nn.Parameter(p) for n, p in stacked.items()})
        self.steps_per_epoch = max([math.ceil(s.numel() / config.batch_size) for s in self.shards] + [1])
        # teacher j trains epochs_j epochs (its own shard size only); inactive afterwards
        self.epoch_limit = torch.tensor(teacher_epochs([s.numel() for s in self.shards], config), dtype=torch.int64)
        self.register_buffer("stopped", torch.zeros(k, dtype=torch.bool))
        self.register_buffer("best_loss", torch.full((k,), math.inf, dtype=torch.float64))
        self.register_buffer("wait", torch.zeros(k, dtype=torch.int64))
        self.history: list[dict[str, Tensor]] = []
        self._plan_epoch = -1

    # -- data -------------------------------------------------------------------------------
    def train_dataloader(self) -> DataLoader:
        steps = cast("Dataset[Tensor]", torch.arange(self.steps_per_epoch))  # a tensor is a map-style dataset
        return DataLoader(steps, batch_size=None, shuffle=False)

    def on_fit_start(self) -> None:
        self.x, self.y = self.x.to(self.device), self.y.to(self.device)
        self.epoch_limit = self.epoch_limit.to(self.device)

    @property
    def max_epochs(self) -> int:
        """The epochs of the longest-training teacher (the Trainer's ``max_epochs``)."""
        return int(self.epoch_limit.max()) if self.epoch_limit.numel() else 1

    def _build_plan(self, epoch: int) -> None:
        k, b, s = len(self.seeds), self.config.batch_size, self.steps_per_epoch
        idx = torch.zeros(k, s, b, dtype=torch.int64)
        active = torch.zeros(k, s, dtype=torch.bool)
        for j, (shard, seed) in enumerate(zip(self.shards, self.seeds, strict=True)):
            plan = epoch_plan(shard, seed=seed, epoch=epoch, batch_size=b)
            idx[j, : plan.shape[0]] = plan
            if plan.shape[0]:
                idx[j, plan.shape[0] :] = plan[0]  # filler for inactive steps; never applied
            active[j, : plan.shape[0]] = True
        self.plan_idx, self.plan_active = idx.to(self.device), active.to(self.device)
        self._plan_epoch = epoch

    # -- training ---------------------------------------------------------------------------
    def params(self) -> dict[str, Tensor]:
        return {n: self.stacked[_param_key(n)] for n in self.names}

    def configure_optimizers(self) -> torch.optim.Optimizer:
        c, k = self.config, len(self.seeds)
        if c.optimizer == "adam":
            return StackedAdam(self.stacked.parameters(), num_teachers=k, lr=c.lr, weight_decay=c.weight_decay)
        return StackedSGD(
            self.stacked.parameters(),
            num_teachers=k,
            lr=c.lr,
            momentum=c.momentum,
            weight_decay=c.weight_decay,
        )

    def on_train_epoch_start(self) -> None:
        k = len(self.seeds)
        self._loss_sum = torch.zeros(k, dtype=torch.float64, device=self.device)
        self._correct = torch.zeros(k, dtype=torch.float64, device=self.device)
        self._seen = torch.zeros(k, dtype=torch.float64, device=self.device)

    def training_step(self, step: Tensor, batch_idx: int) -> Tensor:
        if self._plan_epoch != self.current_epoch:
            self._build_plan(self.current_epoch)
        s = int(step)
        idx = self.plan_idx[:, s]  # (k, B)
        active = self.plan_active[:, s] & ~self.stopped  # (k,)
        active = active & (self.current_epoch < self.epoch_limit)
        # (k, B, ...), (k, B); index_select copies whole rows (several times faster than x[idx])
        flat = idx.reshape(-1)
        xb = self.x.index_select(0, flat).view(*idx.shape, *self.x.shape[1:])
        if self.y.dim() == 2:  # per-teacher targets (k, n): teacher j reads row j only (self-training)
            yb = torch.gather(self.y, 1, idx).long()
        else:
            yb = self.y.index_select(0, flat).view(idx.shape)
        logits = stacked_forward(self.base, self.params(), xb, shared_input=False)  # (k, B, C)
        k, b, c = logits.shape
        per_example = F.cross_entropy(logits.reshape(k * b, c), yb.reshape(-1), reduction="none")
        per_teacher = per_example.view(k, b).mean(1)  # (k,)
        stacked = cast(StackedAdam | StackedSGD, cast(LightningOptimizer, self.optimizers()).optimizer)
        stacked.active = active  # the one stacked optimiser of configure_optimizers
        with torch.no_grad():
            w = active.to(torch.float64)
            self._loss_sum += per_teacher.detach().double() * w
            self._correct += (logits.argmax(-1) == yb).double().mean(1) * w
            self._seen += w
        # the sum (not the mean) over teachers: each teacher's gradient is its own loss's
        loss = per_teacher.sum()
        self.log("loss_mean", per_teacher.detach().mean(), prog_bar=True, on_step=True, on_epoch=False)
        return loss

    def on_train_epoch_end(self) -> None:
        seen = self._seen.clamp_min(1)
        epoch_loss, epoch_acc = self._loss_sum / seen, self._correct / seen
        trained = self._seen > 0
        self.history.append({"train_loss": epoch_loss.cpu(), "train_acc": epoch_acc.cpu(), "trained": trained.cpu()})
        self.log("train_acc_mean", epoch_acc[trained].mean() if trained.any() else 0.0, prog_bar=True)
        if self.config.patience is not None:
            improved = trained & (epoch_loss < self.best_loss - self.config.min_delta)
            self.best_loss = torch.where(improved, epoch_loss, self.best_loss)
            self.wait = torch.where(improved, torch.zeros_like(self.wait), self.wait + trained.long())
            self.stopped |= self.wait >= self.config.patience
            # several processes (teachers_ddp): stop only when every rank's teachers have stopped,
            # so all ranks run the same epochs as one process would (identity in one process)
            if self.trainer.strategy.reduce_boolean_decision(bool(self.stopped.all()), all=True):
                self.trainer.should_stop = True

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        checkpoint["teacher_history"] = self.history
        checkpoint["teacher_seeds"] = self.seeds

    def on_load_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        if checkpoint.get("teacher_seeds", self.seeds) != self.seeds:
            raise ValueError("checkpoint was written for other teacher seeds; refusing to resume")
        self.history = list(checkpoint.get("teacher_history", []))

    def to_ensemble(self, teacher_indices: Tensor, config: dict[str, Any]) -> TeacherEnsemble:
        metrics = {}
        if self.history:
            metrics = {key: torch.stack([h[key] for h in self.history]) for key in self.history[0]}
        return TeacherEnsemble(
            self.spec,
            {n: p.detach() for n, p in self.params().items()},
            teacher_indices=teacher_indices,
            config=config,
            metrics=metrics,
        )


class StepProgress(L.Callback):
    """One progress bar over a whole teacher fit: the vectorised steps of every epoch up to the
    longest-training teacher's last (``total``), so that it shows what it counts toward and an
    ETA (Lightning's own bar restarts each epoch). Shared by the fits of the sequential mode.

    Early stopping can end a fit before ``total``: the bar then closes short of it.
    """

    def __init__(self, total: int, desc: str) -> None:
        from tqdm import tqdm

        self.bar = tqdm(total=total, desc=desc, unit="step", dynamic_ncols=True)

    def on_train_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        # a fit resumed from a checkpoint starts after the epochs already done
        done = int(trainer.current_epoch) * int(getattr(module, "steps_per_epoch", 0))
        if done > self.bar.n:
            self.bar.update(done - self.bar.n)

    def on_train_batch_end(self, trainer: L.Trainer, module: L.LightningModule, *args: Any) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


def _trainer(
    config: TrainConfig,
    *,
    accelerator: str,
    devices: Any,
    progress_bar: bool,
    callbacks: list[L.Callback],
    ckpt_dir: Path | None,
    max_epochs: int | None = None,
    **trainer_kwargs: Any,
) -> L.Trainer:
    callbacks = list(callbacks)
    if ckpt_dir is not None:
        from lightning.pytorch.callbacks import ModelCheckpoint

        # at most about CHECKPOINTS_PER_FIT checkpoints (a schedule sized in steps can run hundreds
        # of one-step epochs on tiny shards); a resumed fit redoes at most the epochs since the last
        every = max(1, math.ceil((max_epochs or config.epochs or 1) / CHECKPOINTS_PER_FIT))
        callbacks.append(ModelCheckpoint(dirpath=ckpt_dir, save_last=True, save_top_k=1, every_n_epochs=every))
    trainer_kwargs.setdefault("enable_checkpointing", ckpt_dir is not None)
    return L.Trainer(
        max_epochs=max_epochs if max_epochs is not None else config.epochs,
        accelerator=accelerator,
        devices=devices,
        logger=False,
        enable_progress_bar=progress_bar,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=callbacks,
        deterministic=False,
        **trainer_kwargs,
    )


def check_training_inputs(
    x: Tensor, y: Tensor, shards: Sequence[Tensor], *, spec: ModelSpec, generator: torch.Generator
) -> tuple[Tensor, Tensor]:
    """Validate the private data against ``spec`` (shared by the one- and several-process fits).

    Returns:
        ``(x, y)`` with ``y`` as int64.
    """
    check_generator(generator)
    x = check_tensor("x", x, floating=True)
    y = check_tensor("y", y, ndim=1, floating=False).long()
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x has {x.shape[0]} rows but y has {y.shape[0]}")
    if tuple(x.shape[1:]) != spec.input_shape and math.prod(x.shape[1:]) != math.prod(spec.input_shape):
        raise ValueError(f"x rows have shape {tuple(x.shape[1:])}, spec expects {spec.input_shape}")
    if y.numel() and not (0 <= int(y.min()) and int(y.max()) < spec.num_classes):
        raise ValueError(f"labels must lie in [0, {spec.num_classes - 1}]")
    check_int("number of shards", len(shards), minimum=1)
    return x, y


def train_teachers(
    x: Tensor,
    y: Tensor,
    shards: Sequence[Tensor],
    *,
    spec: ModelSpec,
    config: TrainConfig | None = None,
    generator: torch.Generator,
    mode: Literal["vectorized", "sequential"] = "vectorized",
    teacher_indices: Sequence[int] | Tensor | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    accelerator: str = "auto",
    devices: Any = 1,
    progress_bar: bool = False,
    callbacks: Sequence[L.Callback] = (),
) -> TeacherEnsemble:
    """Train one teacher per shard; teacher j sees only ``x[shards[j]], y[shards[j]]``.

    Args:
        x: private inputs (n, …) float32, matching ``spec.input_shape``.
        y: int64 labels (n,) in {0, …, C − 1}.
        shards: k disjoint index tensors (:func:`pate_stab.teachers.partition_indices`).
        spec: teacher architecture.
        config: training hyper-parameters (default :class:`TrainConfig()`).
        generator: k teacher seeds are drawn from it, in teacher order.
        mode: "vectorized" (one fit of all teachers with stacked parameters) or
            "sequential" (one Lightning fit per teacher; same seeds, same data order).
        teacher_indices: train only these global teacher indices (to split across devices).
        run_dir: where to write checkpoints and the ensemble (``checkpoints/<run>/teachers``).
        resume: continue from ``run_dir/lightning/last.ckpt`` if it exists (vectorised mode).
        accelerator, devices: passed to ``lightning.Trainer`` ("auto" picks a GPU if present).
        progress_bar: show Lightning's progress bar.
        callbacks: extra Lightning callbacks.

    Returns:
        The trained :class:`TeacherEnsemble` (parameters on CPU).

    Example::

        shards = partition_indices(record_keys_from_tensors(x, y), 100, generator=g1)
        teachers = train_teachers(x, y, shards, spec=ModelSpec("mlp", (20,), 3), generator=g2)
        votes = teachers.predict_votes(public_x)  # (100, m) int64
    """
    config = config or TrainConfig()
    x, y = check_training_inputs(x, y, shards, spec=spec, generator=generator)
    k = len(shards)
    if mode not in ("vectorized", "sequential"):
        raise ValueError(f"mode must be 'vectorized' or 'sequential', got {mode!r}")
    seeds = [child_seed(generator) for _ in range(k)]
    chosen = torch.arange(k) if teacher_indices is None else torch.as_tensor(teacher_indices, dtype=torch.int64)
    if chosen.numel() == 0 or int(chosen.min()) < 0 or int(chosen.max()) >= k:
        raise ValueError(f"teacher_indices must be non-empty and lie in [0, {k - 1}]")
    sub_seeds = [seeds[int(j)] for j in chosen]
    sub_shards = [shards[int(j)] for j in chosen]
    check_schedule([int(torch.as_tensor(s).numel()) for s in sub_shards], config)
    run_dir = Path(run_dir) if run_dir is not None else None
    meta = {"train": asdict(config), "mode": mode, "num_teachers_total": k, "seeds": sub_seeds}
    # with progress_bar: one bar over all steps of the fit (StepProgress), not Lightning's per-epoch bar
    common = {
        "accelerator": accelerator,
        "devices": devices,
        "progress_bar": False,
        "callbacks": list(callbacks),
    }
    bar = None
    if progress_bar:
        sizes = [int(torch.as_tensor(sh).numel()) for sh in sub_shards]
        per_teacher = teacher_epochs(sizes, config)
        if mode == "vectorized":  # every step moves all teachers; the fit runs to the longest schedule
            steps = max([math.ceil(n / config.batch_size) for n in sizes] + [1])
            total = steps * (max(per_teacher) if per_teacher else 1)
        else:
            total = sum(max(math.ceil(n / config.batch_size), 1) * e for n, e in zip(sizes, per_teacher, strict=True))
        bar = StepProgress(total, desc=f"teachers ({len(sub_shards)}, {mode})")
        common["callbacks"].append(bar)

    if run_dir is not None:
        # models of the private data without a mechanism: a private folder before Lightning writes
        # into it, owner-only files while it does, and whatever it wrote tightened after
        private_folder(run_dir)
        tighten_private_tree(run_dir)  # a folder made before its files were private
    try:
        with quiet_lightning(True), owner_only_umask() if run_dir is not None else contextlib.nullcontext():
            ensemble = _fit(x, y, spec, config, mode, chosen, sub_seeds, sub_shards, run_dir, resume, meta, common)
    finally:
        if bar is not None:
            bar.close()
    if run_dir is not None:
        ensemble.save(run_dir)
        tighten_private_tree(run_dir)
    return ensemble


def _fit(
    x: Tensor,
    y: Tensor,
    spec: ModelSpec,
    config: TrainConfig,
    mode: str,
    chosen: Tensor,
    sub_seeds: list[int],
    sub_shards: list[Tensor],
    run_dir: Path | None,
    resume: bool,
    meta: dict[str, Any],
    common: dict[str, Any],
) -> TeacherEnsemble:
    if mode == "vectorized":
        module = TeacherEnsembleModule(spec, config, sub_seeds, x, y, sub_shards)
        ckpt_dir = private_folder(run_dir / "lightning") if run_dir is not None else None
        trainer = _trainer(config, ckpt_dir=ckpt_dir, max_epochs=module.max_epochs, **common)
        last = ckpt_dir / "last.ckpt" if ckpt_dir is not None else None
        ckpt_path = str(last) if resume and last is not None and last.is_file() else None
        trainer.fit(module, ckpt_path=ckpt_path)
        ensemble = module.to_ensemble(chosen, meta)
    else:
        parts = []
        for j, seed, shard in zip(chosen.tolist(), sub_seeds, sub_shards, strict=True):
            module = TeacherEnsembleModule(spec, config, [seed], x, y, [shard])
            _trainer(config, ckpt_dir=None, max_epochs=module.max_epochs, **common).fit(module)
            parts.append(module.to_ensemble(torch.tensor([j]), meta))
        same_len = len({p.metrics.get("train_loss", torch.empty(0)).shape[0] for p in parts}) == 1
        metrics = (
            {key: torch.cat([p.metrics[key] for p in parts], dim=1) for key in parts[0].metrics} if same_len else {}
        )
        params = {n: torch.cat([p.params[n] for p in parts]) for n in parts[0].params}
        ensemble = TeacherEnsemble(spec, params, teacher_indices=chosen, config=meta, metrics=metrics)
    return ensemble
