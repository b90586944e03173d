"""Teachers across processes and nodes with Lightning's DDP machinery: one slice of teachers per rank.

:func:`train_teachers_ddp` runs ``num_nodes × devices`` processes (ranks). Rank r trains the
teachers of slice r of ``0, …, k − 1`` (contiguous, sizes differing by at most one), by global
teacher index, exactly as ``train_teachers(..., teacher_indices=slice_r)`` would: teacher j gets
the j-th seed drawn from the caller's generator and walks its own shard in the order fixed by
(seed, epoch), so the joined ensemble is bit-for-bit the single-process vectorised one.

Why no gradients mix. Ordinary DDP replicates *one* model on every rank, wraps it in
``torch.nn.parallel.DistributedDataParallel`` — which broadcasts rank 0's parameters to every
rank at start and all-reduces (averages) the gradients after every backward — and gives each rank
a different part of the data. Here every rank holds *different teachers*, so both would be wrong:
the broadcast would overwrite rank r's teachers with rank 0's and the all-reduce would average
teacher j's gradient with other teachers' (one record would then move teachers outside its shard,
breaking the one-shard-per-teacher privacy argument). :class:`TeacherSliceStrategy` is therefore
Lightning's :class:`~lightning.pytorch.strategies.DDPStrategy` (launcher, cluster environments
— local, SLURM, torchrun —, process group over gloo on CPU or nccl on GPU, device per local
rank) with the ``DistributedDataParallel`` wrapper left out: no parameter broadcast, no gradient
hook, no gradient collective. Each rank's module holds only its slice (built in
``setup``, once the rank is known), and the step index loader is not split by a
``DistributedSampler``; every rank takes as many steps per epoch as the largest shard needs (as in
one process; a teacher whose shard is done is inactive), because Lightning broadcasts a one-element
termination flag every step. The other collectives are per epoch (the early-stopping decision: stop when
every rank's teachers have stopped, as one process would; the checkpoint barriers) and one gather
at the end: rank 0 receives every slice's stacked parameters and joins them by teacher index.

Launch. As with any Lightning DDP run the script is SPMD: every rank runs it and calls
:func:`train_teachers_ddp` with the same data, shards and an identically seeded generator (checked:
the teacher seeds are compared across ranks). On one machine, running the script once is enough
(Lightning's ``popen`` launcher starts the other local ranks by re-running it); on a cluster, start
it once per node (``srun`` under SLURM, ``torchrun``, or ``NODE_RANK``/``MASTER_ADDR`` by hand).
Global rank 0 returns the whole ensemble, the other ranks ``None`` (or, with ``assemble=False``,
every rank its own slice, written to ``run_dir/slices``: for k so large that rank 0 cannot hold
all teachers).

Checkpoints and resume. With ``run_dir``, rank r writes its slice's Lightning checkpoint at the end
of every epoch to ``run_dir/lightning/slice-<r>-of-<W>/epoch=<e>.ckpt`` (keeping the last two), and
rank 0 writes the joined ensemble (``config.json`` + ``weights.pt``) to ``run_dir``. ``resume=True``
continues every slice from the latest epoch that *all* slices of the same world size have (a crash
between two ranks' writes leaves them at most one epoch apart). Resuming needs the same world size
(the slices, hence the seeds per rank, depend on it; a mismatch is refused) and, across nodes, a
shared file system. Everything under ``run_dir`` is a model of the private data that no mechanism
paid for: the folders are private (0700) and the files owner-only (0600;
:mod:`pate_stab.privacy.ledger.private_files`).
"""

from __future__ import annotations

import contextlib
import math
import os
import re
from collections.abc import Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import lightning as L
import torch
import torch.distributed as dist
from lightning.pytorch.callbacks import Checkpoint
from lightning.pytorch.strategies import DDPStrategy
from torch import Tensor

from pate_stab._checks import check_int
from pate_stab.models.fitting import quiet_lightning
from pate_stab.models.networks import ModelSpec
from pate_stab.privacy.ledger.private_files import owner_only_umask, private_folder, tighten_private_tree
from pate_stab.rng import child_seed
from pate_stab.teachers.ensemble import TeacherEnsemble
from pate_stab.teachers.schedule import TrainConfig, check_schedule, teacher_epochs
from pate_stab.teachers.training import TeacherEnsembleModule, _trainer, check_training_inputs

__all__ = ["TeacherSliceStrategy", "rank_slice", "train_teachers_ddp"]

_EPOCH_FILE = re.compile(r"epoch=(\d+)\.ckpt")


def rank_slice(num_teachers: int, *, rank: int, world_size: int) -> Tensor:
    """Global teacher indices trained by ``rank``: contiguous block r of ``tensor_split``."""
    return torch.tensor_split(torch.arange(num_teachers), world_size)[rank]


def _slice_dir(root: Path, rank: int, world_size: int) -> Path:
    return root / f"slice-{rank:05d}-of-{world_size:05d}"


class TeacherSliceStrategy(DDPStrategy):
    """:class:`DDPStrategy` for disjoint teacher slices: processes and process group, no DDP wrapper.

    Args:
        resume_epoch: restore every rank from its slice's ``epoch=<e>.ckpt`` (see module doc).
        **kwargs: passed to :class:`DDPStrategy` (``process_group_backend``, ``timeout``, …).
    """

    def __init__(self, *, resume_epoch: int | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.resume_epoch = resume_epoch

    def configure_ddp(self) -> None:
        # No DistributedDataParallel: it would broadcast rank 0's teachers over every rank's and
        # average gradients across ranks, i.e. across different teachers.
        pass

    def save_checkpoint(self, checkpoint: dict[str, Any], filepath: Any, storage_options: Any | None = None) -> None:
        # DDP writes on rank 0 only (all ranks hold the same model); here each rank holds its own
        # teachers, so every rank writes its own file (written whole, then renamed into place).
        path = Path(filepath)
        tmp = path.with_name(path.name + ".tmp")
        self.checkpoint_io.save_checkpoint(checkpoint, tmp, storage_options=storage_options)
        os.chmod(tmp, 0o600)  # a model of the private data: owner only (private_files)
        os.replace(tmp, path)

    def load_checkpoint(self, checkpoint_path: Any, weights_only: bool | None = None) -> dict[str, Any]:
        # the path given to ``fit`` names rank 0's slice; each rank reads its own slice's file
        path = Path(checkpoint_path)
        mine = _slice_dir(path.parent.parent, self.global_rank, self.world_size) / path.name
        return super().load_checkpoint(mine, weights_only=weights_only)


class _SliceCheckpoint(Checkpoint):
    """Every rank writes its slice at the end of every epoch (after the module's epoch-end hook)."""

    def __init__(self, root: Path, keep: int = 2) -> None:
        self.root, self.keep = root, keep

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        directory = private_folder(_slice_dir(self.root, trainer.global_rank, trainer.world_size))
        trainer.save_checkpoint(directory / f"epoch={trainer.current_epoch:06d}.ckpt")
        for old in sorted(_epochs(directory))[: -self.keep]:
            (directory / f"epoch={old:06d}.ckpt").unlink(missing_ok=True)


def _epochs(directory: Path) -> set[int]:
    if not directory.is_dir():
        return set()
    return {int(m.group(1)) for f in directory.iterdir() if (m := _EPOCH_FILE.fullmatch(f.name))}


def latest_common_epoch(root: Path, world_size: int) -> int | None:
    """The latest epoch whose checkpoint every slice of ``world_size`` ranks has (None: none)."""
    common = set.intersection(*(_epochs(_slice_dir(root, r, world_size)) for r in range(world_size)))
    return max(common) if common else None


class _RankSliceModule(TeacherEnsembleModule):
    """Holds all k seeds and shards, but builds (in ``setup``) only this rank's slice of teachers."""

    def __init__(
        self,
        spec: ModelSpec,
        config: TrainConfig,
        seeds: Sequence[int],
        x: Tensor,
        y: Tensor,
        shards: Sequence[Tensor],
    ) -> None:
        super().__init__(spec, config, [], x, y, [])  # built empty: the rank is not known yet
        self.all_seeds, self.all_shards = [int(s) for s in seeds], list(shards)
        self.teacher_indices = torch.zeros(0, dtype=torch.int64)
        self.gathered: list[dict[str, Any]] | None = None
        self.assemble = True

    def setup(self, stage: str) -> None:
        trainer = self.trainer
        world, rank = trainer.world_size, trainer.global_rank
        # every rank must draw the same teacher seeds (same generator state): compare with rank 0
        same = trainer.strategy.broadcast(self.all_seeds, src=0) == self.all_seeds
        if not trainer.strategy.reduce_boolean_decision(same, all=True):
            raise ValueError("the ranks drew different teacher seeds: pass every rank the same generator")
        if len(self.all_seeds) < world:
            raise ValueError(f"{len(self.all_seeds)} teachers cannot be split over {world} ranks")
        self.teacher_indices = rank_slice(len(self.all_seeds), rank=rank, world_size=world)
        chosen = self.teacher_indices.tolist()
        self.build_teachers([self.all_seeds[j] for j in chosen], [self.all_shards[j] for j in chosen])
        # Lightning broadcasts a flag every step (SIGTERM), so all ranks must take the same number of
        # steps: that of the largest shard overall, as in one process (extra steps are inactive)
        b = self.config.batch_size
        self.steps_per_epoch = max([math.ceil(s.numel() / b) for s in self.all_shards] + [1])

    def on_fit_end(self) -> None:
        # rank 0 receives every slice: global indices, stacked parameters, per-teacher metrics
        part = {
            "teacher_indices": self.teacher_indices,
            "params": {n: p.detach().cpu() for n, p in self.params().items()},
            "history": self.history,
        }
        if not self.assemble or not dist.is_available() or not dist.is_initialized():
            self.gathered = [part]  # this rank's slice only
            return
        out: list[Any] | None = [None] * dist.get_world_size() if self.trainer.is_global_zero else None
        dist.gather_object(part, out, dst=0)
        self.gathered = out


def _join(spec: ModelSpec, parts: list[dict[str, Any]], meta: dict[str, Any]) -> TeacherEnsemble:
    idx = torch.cat([p["teacher_indices"] for p in parts])
    order = torch.argsort(idx)
    params = {n: torch.cat([p["params"][n] for p in parts])[order] for n in parts[0]["params"]}
    metrics: dict[str, Tensor] = {}
    if all(p["history"] for p in parts):  # (epochs, k) per key; every rank ran the same epochs
        keys = parts[0]["history"][0]
        metrics = {
            key: torch.cat([torch.stack([h[key] for h in p["history"]]) for p in parts], dim=1)[:, order]
            for key in keys
        }
    return TeacherEnsemble(spec, params, teacher_indices=idx[order], config=meta, metrics=metrics)


def train_teachers_ddp(
    x: Tensor,
    y: Tensor,
    shards: Sequence[Tensor],
    *,
    spec: ModelSpec,
    config: TrainConfig | None = None,
    generator: torch.Generator,
    devices: int = 2,
    num_nodes: int = 1,
    accelerator: str = "cpu",
    process_group_backend: str | None = None,
    run_dir: str | Path | None = None,
    resume: bool = False,
    progress_bar: bool = False,
    callbacks: Sequence[L.Callback] = (),
    assemble: bool = True,
) -> TeacherEnsemble | None:
    """Train one teacher per shard over ``num_nodes × devices`` processes, one teacher slice per rank.

    Called on every rank (SPMD, see the module docstring); the joined ensemble equals
    ``train_teachers(x, y, shards, spec=spec, config=config, generator=generator)`` bit for bit.

    Args:
        x, y, shards, spec, config, generator: as for :func:`~pate_stab.teachers.train_teachers`;
            identical on every rank (the generator identically seeded).
        devices: processes per node (CPU processes, or GPUs with ``accelerator="gpu"``).
        num_nodes: machines; the world size is ``num_nodes × devices`` and must not exceed k.
        accelerator: "cpu" or "gpu" (Lightning's names).
        process_group_backend: default "gloo" on CPU, "nccl" on GPU.
        run_dir: per-slice checkpoints and the joined ensemble (``checkpoints/<run>/teachers``).
        resume: continue from the latest epoch every slice has checkpointed under ``run_dir``.
        progress_bar: Lightning's bar (shown by rank 0).
        callbacks: extra Lightning callbacks (run on every rank).
        assemble: gather all slices on rank 0 (its memory must hold the whole ensemble). With
            ``False`` (for very large k) nothing is gathered: every rank returns its own slice and,
            with ``run_dir``, has written it to ``run_dir/slices/slice-<r>-of-<W>`` (join them with
            :meth:`TeacherEnsemble.concatenate`, or sum the slices' vote histograms).

    Returns:
        On global rank 0 the whole :class:`TeacherEnsemble` (CPU); on the other ranks ``None``.
        With ``assemble=False``, each rank's own slice.

    Raises:
        ValueError: bad inputs, more ranks than teachers, ranks with different seeds, or a
            checkpoint written by another world size or seeds.
    """
    config = config or TrainConfig()
    x, y = check_training_inputs(x, y, shards, spec=spec, generator=generator)
    devices = check_int("devices", devices, minimum=1)
    num_nodes = check_int("num_nodes", num_nodes, minimum=1)
    k = len(shards)
    if devices * num_nodes > k:
        raise ValueError(f"{devices * num_nodes} ranks for {k} teachers: every rank needs a teacher")
    if accelerator not in ("cpu", "gpu", "cuda"):
        raise ValueError(f"accelerator must be 'cpu' or 'gpu', got {accelerator!r}")
    backend = process_group_backend or ("gloo" if accelerator == "cpu" else "nccl")
    seeds = [child_seed(generator) for _ in range(k)]
    run_dir = Path(run_dir) if run_dir is not None else None
    ckpt_root = private_folder(run_dir / "lightning") if run_dir is not None else None
    if run_dir is not None:  # models of the private data: a private folder (0700) before anything is written
        private_folder(run_dir)
        tighten_private_tree(run_dir)
    resume_epoch = latest_common_epoch(ckpt_root, devices * num_nodes) if resume and ckpt_root is not None else None
    strategy = TeacherSliceStrategy(resume_epoch=resume_epoch, process_group_backend=backend)
    # every rank runs the epochs of the longest-training teacher overall (extra epochs inactive)
    check_schedule([int(s.numel()) for s in shards], config)
    trainer = _trainer(
        config,
        max_epochs=max(teacher_epochs([int(s.numel()) for s in shards], config)),
        accelerator=accelerator,
        devices=devices,
        progress_bar=progress_bar,
        callbacks=[*callbacks, *([_SliceCheckpoint(ckpt_root)] if ckpt_root is not None else [])],
        ckpt_dir=None,
        strategy=strategy,
        num_nodes=num_nodes,
        use_distributed_sampler=False,  # the loader yields step numbers; each rank needs all
        enable_checkpointing=ckpt_root is not None,
    )
    module = _RankSliceModule(spec, config, seeds, x, y, shards)
    module.assemble = assemble
    ckpt_path = (
        str(_slice_dir(ckpt_root, 0, devices * num_nodes) / f"epoch={resume_epoch:06d}.ckpt")
        if ckpt_root is not None and resume_epoch is not None
        else None
    )
    with quiet_lightning(True), owner_only_umask() if run_dir is not None else contextlib.nullcontext():
        trainer.fit(module, ckpt_path=ckpt_path)
    world = devices * num_nodes
    meta = {"train": asdict(config), "mode": "vectorized", "num_teachers_total": k, "seeds": seeds, "world_size": world}
    if not assemble:
        if module.gathered is None:
            raise RuntimeError("the fit ended without this rank's slice")
        part = _join(spec, module.gathered, meta)
        if run_dir is not None:
            part.save(_slice_dir(private_folder(run_dir / "slices"), trainer.global_rank, world))
        return part
    if not trainer.is_global_zero:
        return None
    if module.gathered is None:  # set on rank 0 by on_fit_end
        raise RuntimeError("the teacher slices were not gathered on rank 0")
    ensemble = _join(spec, module.gathered, meta)
    if run_dir is not None:
        ensemble.save(run_dir)
        tighten_private_tree(run_dir)
    return ensemble
