"""FixMatch teachers (PATE-FM): each teacher a CNN trained with FixMatch on its own shard's labels.

Malek, Mironov, Prasad, Shilov & Tramèr 2021, "Antipodes of Label Differential Privacy: PATE and
ALIBI" (NeurIPS), §3: under label privacy the inputs are public, so every PATE teacher may use all
of them unlabelled; each teacher is trained with FixMatch (Sohn et al. 2020) on its shard's labels
plus every input unlabelled. The loss, the augmentations and the learning-rate schedule are the
FixMatch student's, shared through :mod:`pate_stab.models` (:func:`~pate_stab.models.fixmatch.fixmatch_losses`,
:mod:`pate_stab.models.augment`); this module only feeds each teacher its own data and trains S
teachers together.

What teacher j reads:

- labelled: the images of shard j and **shard j's labels only**. A stack's module is handed the
  labels of its own teachers' shards (``labels[s] = y[shard_s]``) and nothing else of ``y``; shards
  that share a record are refused (:func:`stack_inputs`).
- unlabelled, by the run's privacy unit (:data:`UNLABELLED`): under ``"label"`` every private input
  and every public input (they are public); under ``"record"`` its own shard's inputs and the public
  pool only — another shard's private inputs are private then, and teacher j never indexes them.

Privacy argument. Teacher j's trajectory is a function of its seeds (initialisation, data order,
augmentation: drawn per teacher from the caller's generator in teacher order), its labelled shard,
its unlabelled set and the settings. Under label privacy, one changed label changes one shard's
labels, so one teacher; the unlabelled set (all inputs) is the same on both sides. Under record
privacy, one added, removed or changed record changes one shard, and only that shard's teacher reads
its input or label. Stacking does not couple teachers: the loss is the sum of the teachers' own
losses, the forward pass is ``vmap`` over their stacked parameters
(:func:`~pate_stab.models.stacked.stacked_forward`), and SGD (or AdamW), weight decay, the
schedule and the weight average are elementwise, so each teacher's slice moves as it would alone
(``tests/teachers/test_fixmatch_teachers.py`` checks that a changed label moves one teacher's
weights and votes, bit for bit the others').

Stacks. S teachers (:func:`teachers_per_stack`: as many as the accelerator's free memory holds, at
most :data:`CPU_STACK` on a CPU) are one Lightning fit; the stacks run one after another, and S = 1
is the sequential mode. Every teacher makes the same ``config.steps`` steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import lightning as L
import torch
from torch import Tensor, nn
from torch.utils.data import DataLoader, Dataset

from pate_stab._checks import check_generator, check_int, check_tensor
from pate_stab.models.fitting import fit_module
from pate_stab.models.fixmatch import FixMatchBatches, FixMatchConfig, fixmatch_losses, fixmatch_lr_factor
from pate_stab.models.networks import ModelSpec, build_model
from pate_stab.models.stacked import init_stacked_parameters, stacked_forward
from pate_stab.privacy.ledger.private_files import owner_only_umask, private_folder, tighten_private_tree
from pate_stab.rng import child_seed
from pate_stab.teachers.ensemble import TeacherEnsemble, _param_key

__all__ = [
    "CPU_STACK",
    "UNLABELLED",
    "FixMatchTeacherModule",
    "StackInputs",
    "stack_inputs",
    "teachers_per_stack",
    "train_fixmatch_teachers",
]

UNLABELLED = {
    "label": "every private and public input (label privacy: the inputs are public)",
    "record": "the teacher's own shard's inputs and the public pool (record privacy: other shards' inputs are private)",
}
"""Each teacher's unlabelled images, by the run's privacy unit."""
CPU_STACK = 8
"""Teachers per stack on a CPU (vmap there runs the teachers' convolutions as one grouped convolution;
more gains little and holds every stacked teacher's activations at once)."""
MEMORY_SHARE = 0.5
"""Share of the accelerator's free memory a stack's activations may take (:func:`teachers_per_stack`)."""


def teachers_per_stack(
    spec: ModelSpec, config: FixMatchConfig, num_teachers: int, device: str | torch.device = "cpu"
) -> int:
    """How many FixMatch teachers to train together on ``device``.

    On a GPU: :data:`MEMORY_SHARE` of its free memory over one teacher's memory per step. A step
    pushes B + 2μB images through the teacher (labelled weak, unlabelled weak without gradient,
    unlabelled strong); each image keeps every layer output of the CNN (and about as much again
    for its gradient), in float32; the teacher's parameters, gradient, momentum and weight
    average are four copies of its weights. On a CPU: at most :data:`CPU_STACK`. Never more than
    ``num_teachers``, never fewer than one. A function of the settings and the device only.
    """
    num_teachers = check_int("num_teachers", num_teachers, minimum=1)
    device = torch.device(device)
    if device.type != "cuda":
        return min(num_teachers, CPU_STACK)
    c, h, w = spec.input_shape
    c1, c2 = spec.channels
    per_image = c1 * h * w + c1 * (h // 2) * (w // 2) + c2 * (h // 2) * (w // 2) + c2 * (h // 4) * (w // 4)
    per_image += sum(spec.hidden) + spec.num_classes
    images = config.batch_size * (1 + 2 * config.mu)
    weights = sum(p.numel() for p in build_model(spec).parameters())
    per_teacher = 4 * (2 * per_image * images + 4 * weights)  # bytes
    free, _ = torch.cuda.mem_get_info(device)
    return max(1, min(num_teachers, int(MEMORY_SHARE * free) // per_teacher))


@dataclass
class StackInputs:
    """What one stack of teachers is given (:func:`stack_inputs`).

    Attributes:
        images: (N, C, H, W) the images the stack may read: under label privacy every private then
            public input; under record privacy the stack's own shards' inputs, then the public pool.
        labelled_rows: per teacher, the rows of ``images`` that hold its shard.
        labels: per teacher, its shard's labels (in the order of ``labelled_rows``) — no other label.
        unlabelled_rows: per teacher, the rows of ``images`` it reads unlabelled (:data:`UNLABELLED`).
    """

    images: Tensor
    labelled_rows: list[Tensor]
    labels: list[Tensor]
    unlabelled_rows: list[Tensor]


def _check_shards(shards: Sequence[Tensor], n: int) -> list[Tensor]:
    out = []
    seen = torch.zeros(n, dtype=torch.bool)
    for j, shard in enumerate(shards):
        shard = torch.as_tensor(shard).long().flatten().cpu()
        if shard.numel() and (int(shard.min()) < 0 or int(shard.max()) >= n):
            raise ValueError(f"shard {j} holds rows outside [0, {n - 1}]")
        if shard.unique().numel() != shard.numel() or bool(seen[shard].any()):
            raise ValueError(
                f"shard {j} shares a record with another shard or repeats one: teachers must see disjoint shards "
                "(a teacher would read another shard's label)"
            )
        seen[shard] = True
        out.append(shard)
    return out


def stack_inputs(
    x: Tensor,
    y: Tensor,
    shards: Sequence[Tensor],
    public_x: Tensor,
    *,
    privacy_unit: Literal["record", "label"],
) -> StackInputs:
    """The images, labelled rows, labels and unlabelled rows of the teachers on ``shards`` (a stack).

    ``shards`` must be disjoint and lie within ``x`` (checked: a shared record would give one
    teacher another shard's label). Each teacher's labels are ``y[shard]``: nothing else of ``y``
    leaves this function. Under ``"record"`` the images are the stack's shards' inputs and the
    public pool, and teacher s's unlabelled rows are its own shard's and the pool's; under
    ``"label"`` every input of ``x`` and ``public_x``, all of them unlabelled for every teacher.
    """
    if privacy_unit not in UNLABELLED:
        raise ValueError(f"privacy_unit must be one of {', '.join(UNLABELLED)}, got {privacy_unit!r}")
    shards = _check_shards(shards, x.shape[0])
    labels = [y[shard].clone() for shard in shards]
    if privacy_unit == "label":
        images = torch.cat([x, public_x])
        every = torch.arange(images.shape[0])
        return StackInputs(images, list(shards), labels, [every for _ in shards])
    own = torch.cat(list(shards)) if shards else torch.zeros(0, dtype=torch.int64)
    images = torch.cat([x[own], public_x])
    pool = torch.arange(own.numel(), images.shape[0])
    rows, start = [], 0
    for shard in shards:
        rows.append(torch.arange(start, start + shard.numel()))
        start += shard.numel()
    return StackInputs(images, rows, labels, [torch.cat([r, pool]) for r in rows])


class FixMatchTeacherModule(L.LightningModule):
    """S FixMatch teachers with stacked parameters; teacher s reads only its rows of ``inputs``.

    Each step, teacher s draws B labelled and μB unlabelled indices from its own stream (the
    student's :class:`~pate_stab.models.fixmatch.FixMatchBatches`, seeded by its data seed) over its
    labelled and unlabelled rows; the images move to the device once (a plain attribute, never in
    the state dict); the loss is the sum over teachers of :func:`fixmatch_losses`. The weight
    average (EMA) is kept per teacher as the student keeps it.
    """

    def __init__(
        self,
        spec: ModelSpec,
        config: FixMatchConfig,
        seeds: Sequence[tuple[int, int, int]],
        inputs: StackInputs,
    ) -> None:
        super().__init__()
        if len(seeds) != len(inputs.labels):
            raise ValueError(f"{len(seeds)} seeds for {len(inputs.labels)} teachers")
        self.spec, self.config = spec, config
        self.base = build_model(spec).requires_grad_(False)
        stacked = init_stacked_parameters(spec, [s[0] for s in seeds])
        self.names = list(stacked)
        self.stacked = nn.ParameterDict({_param_key(n): nn.Parameter(p) for n, p in stacked.items()})
        self.inputs = inputs  # plain attribute: not in the state dict
        self._images: Tensor = inputs.images
        self._labels: list[Tensor] = list(inputs.labels)
        self._streams: list[Iterator[tuple[Tensor, Tensor]]] = [
            iter(
                FixMatchBatches(int(lr.numel()), int(ur.numel()), batch_size=config.batch_size, mu=config.mu, seed=s[1])
            )
            for lr, ur, s in zip(inputs.labelled_rows, inputs.unlabelled_rows, seeds, strict=True)
        ]
        self.augment_generators = [torch.Generator().manual_seed(s[2]) for s in seeds]
        self.ema: dict[str, Tensor] | None = None
        self._trained = torch.ones(len(seeds))  # 0 for a teacher with an empty shard (set on the device at fit start)
        self._window: list[Tensor] = []

    def params(self) -> dict[str, Tensor]:
        return {n: self.stacked[_param_key(n)] for n in self.names}

    def on_fit_start(self) -> None:
        self._images = self._images.to(self.device)
        self._trained = torch.tensor([float(r.numel() > 0) for r in self.inputs.labelled_rows], device=self.device)
        self._labels = [t.to(self.device) for t in self._labels]
        if self.config.ema > 0:
            self.ema = {n: p.detach().clone() for n, p in self.params().items()}

    def training_step(self, step: Tensor, batch_idx: int) -> Tensor:
        x_l, y_l, x_u = [], [], []
        for s, stream in enumerate(self._streams):
            i, j = next(stream)  # (B,), (μB,) positions in teacher s's labelled and unlabelled rows
            if self.inputs.labelled_rows[s].numel():
                x_l.append(self.inputs.labelled_rows[s][i])
                y_l.append(self._labels[s][i.to(self.device)])
            else:  # an empty shard: a stand-in batch whose loss counts zero (the teacher is not trained)
                x_l.append(self.inputs.unlabelled_rows[s][:1].expand(self.config.batch_size))
                y_l.append(torch.zeros(self.config.batch_size, dtype=torch.int64, device=self.device))
            x_u.append(self.inputs.unlabelled_rows[s][j])
        rows_l = torch.stack(x_l).to(self.device)  # (S, B)
        rows_u = torch.stack(x_u).to(self.device)  # (S, μB)
        base, params = self.base, self.params()
        terms = fixmatch_losses(
            lambda xb: stacked_forward(base, params, xb, shared_input=False),
            self._images[rows_l], torch.stack(y_l), self._images[rows_u],
            config=self.config, generators=self.augment_generators,
        )  # fmt: skip  # (4, S)
        self._window.append(terms.detach())
        # the sum over teachers: each teacher's gradient is its own loss's (zero for an empty shard's)
        return (terms[0] * self._trained).sum()

    def on_train_batch_end(self, outputs: Any, batch: Any, batch_idx: int) -> None:
        if self.ema is None:
            return
        step = self.global_step
        decay = min(self.config.ema, (1 + step) / (10 + step))
        with torch.no_grad():
            for n, p in self.params().items():
                self.ema[n].lerp_(p, 1 - decay)

    def configure_optimizers(self) -> Any:
        cfg = self.config
        optimizer: torch.optim.Optimizer
        # elementwise optimisers over the stacked tensors: each teacher's slice moves as it would alone
        # (every teacher steps at every step, so AdamW's shared step count is each teacher's own)
        if cfg.optimizer == "sgd":
            optimizer = torch.optim.SGD(
                self.stacked.parameters(), lr=cfg.lr, momentum=cfg.momentum, nesterov=cfg.momentum > 0,
                weight_decay=cfg.weight_decay,
            )  # fmt: skip
        else:
            optimizer = torch.optim.AdamW(self.stacked.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda k: fixmatch_lr_factor(k, cfg.steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}

    def train_dataloader(self) -> DataLoader:
        steps = cast("Dataset[Tensor]", torch.arange(self.config.steps))  # a tensor is a map-style dataset
        return DataLoader(steps, batch_size=None, shuffle=False)

    def weights(self) -> dict[str, Tensor]:
        """The teachers' prediction weights on the CPU: the weight average when ``config.ema > 0``."""
        source = self.ema if self.ema is not None else {n: p.detach() for n, p in self.params().items()}
        return {n: t.detach().cpu() for n, t in source.items()}

    def metrics(self) -> dict[str, Tensor]:
        """Each teacher's mean loss, L_s, L_u and mask rate over its last ``log_every`` steps, (1, S)."""
        if not self._window:
            return {}
        means = torch.stack(self._window[-self.config.log_every :]).mean(0).cpu()  # (4, S)
        return {name: means[i : i + 1] for i, name in enumerate(("loss", "loss_s", "loss_u", "mask_rate"))}


def train_fixmatch_teachers(
    x: Tensor,
    y: Tensor,
    shards: Sequence[Tensor],
    *,
    public_x: Tensor,
    privacy_unit: Literal["record", "label"],
    spec: ModelSpec,
    config: FixMatchConfig,
    generator: torch.Generator,
    stack_size: int | None = None,
    teacher_indices: Sequence[int] | Tensor | None = None,
    run_dir: str | Path | None = None,
    accelerator: str = "auto",
    progress_bar: bool = False,
) -> TeacherEnsemble:
    """Train one FixMatch teacher per shard (PATE-FM, Malek et al. 2021 §3), S at a time.

    Args:
        x: private images (n, C, H, W) float; y: their labels (n,) in [0, C).
        shards: k disjoint index tensors (:func:`pate_stab.teachers.partition_indices`).
        public_x: the public pool's images (N, C, H, W), unlabelled for every teacher.
        privacy_unit: ``"label"`` (every private input unlabelled for every teacher) or ``"record"``
            (a teacher's own shard's inputs and the pool only): :data:`UNLABELLED`.
        spec: the teachers' CNN (``ModelSpec("cnn", …)``).
        config: FixMatch's settings (:class:`~pate_stab.models.FixMatchConfig`), one for every teacher.
        generator: three seeds per teacher (initialisation, data order, augmentation) are drawn from
            it in teacher order, whichever teachers are trained and however they are stacked.
        stack_size: teachers per stack (None: :func:`teachers_per_stack` for the accelerator).
        teacher_indices: train only these teachers (to split the ensemble across devices).
        run_dir: where the ensemble is written (a private folder, owner-only files).
        accelerator, progress_bar: passed to ``lightning.Trainer``.

    Returns:
        A :class:`~pate_stab.teachers.TeacherEnsemble` of CNNs (the weight averages), on the CPU.
    """
    if not isinstance(config, FixMatchConfig):
        raise TypeError(f"config must be a FixMatchConfig, got {type(config).__name__}")
    check_generator(generator)
    if spec.kind != "cnn":
        raise ValueError(f"FixMatch teachers are CNNs: spec.kind must be 'cnn', got {spec.kind!r}")
    x = check_tensor("x", x, ndim=4, floating=True).float()
    public_x = check_tensor("public_x", public_x, ndim=4, floating=True, nonempty=False).float()
    y = check_tensor("y", y, ndim=1, floating=False).long()
    if x.shape[0] != y.shape[0]:
        raise ValueError(f"x has {x.shape[0]} rows but y has {y.shape[0]}")
    for name, t in (("x", x), ("public_x", public_x)):
        if tuple(t.shape[1:]) != spec.input_shape:
            raise ValueError(
                f"{name} holds images of shape {tuple(t.shape[1:])}, the teachers' CNN expects {spec.input_shape}"
            )
    if y.numel() and not (0 <= int(y.min()) and int(y.max()) < spec.num_classes):
        raise ValueError(f"labels must lie in [0, {spec.num_classes - 1}]")
    if privacy_unit not in UNLABELLED:
        raise ValueError(f"privacy_unit must be one of {', '.join(UNLABELLED)}, got {privacy_unit!r}")
    k = check_int("number of shards", len(shards), minimum=1)
    shards = _check_shards(shards, x.shape[0])
    seeds = [(child_seed(generator), child_seed(generator), child_seed(generator)) for _ in range(k)]
    chosen = torch.arange(k) if teacher_indices is None else torch.as_tensor(teacher_indices, dtype=torch.int64)
    if chosen.numel() == 0 or int(chosen.min()) < 0 or int(chosen.max()) >= k:
        raise ValueError(f"teacher_indices must be non-empty and lie in [0, {k - 1}]")
    on_gpu = str(accelerator).lower() in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    device = "cuda" if on_gpu else "cpu"
    size = teachers_per_stack(spec, config, chosen.numel(), device) if stack_size is None else stack_size
    size = check_int("stack_size", size, minimum=1)
    parts: list[dict[str, Tensor]] = []
    metrics: list[dict[str, Tensor]] = []
    run_dir = Path(run_dir) if run_dir is not None else None
    if run_dir is not None:
        private_folder(run_dir)
    with owner_only_umask() if run_dir is not None else contextlib.nullcontext():
        for start in range(0, chosen.numel(), size):
            members = chosen[start : start + size].tolist()
            inputs = stack_inputs(x, y, [shards[j] for j in members], public_x, privacy_unit=privacy_unit)
            module = FixMatchTeacherModule(spec, config, [seeds[j] for j in members], inputs)
            fit_module(module, None, accelerator=accelerator, progress_bar=progress_bar, max_steps=config.steps)
            parts.append(module.weights())
            metrics.append(module.metrics())
    params = {n: torch.cat([p[n] for p in parts]) for n in parts[0]}
    joined = {key: torch.cat([m[key] for m in metrics], dim=1) for key in metrics[0]} if all(metrics) else {}
    meta = {
        "train": {"method": "fixmatch", **config.to_dict(), "unlabelled": UNLABELLED[privacy_unit]},
        "mode": f"stacks of {size}",
        "num_teachers_total": k,
        "seeds": [list(seeds[j]) for j in chosen.tolist()],
    }
    ensemble = TeacherEnsemble(spec, params, teacher_indices=chosen, config=meta, metrics=joined)
    if run_dir is not None:
        ensemble.save(run_dir)
        tighten_private_tree(run_dir)
    return ensemble
