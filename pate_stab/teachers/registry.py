"""The teacher models' registry: :func:`make_teachers` builds a run's teachers by its ``teacher_model``.

One :class:`TeacherSpec` per model says what differs: whether it is trained (and reloaded from the run
folder on a rerun) or rebuilt from the data (``propagate``: nothing is trained), the architecture of its
heads, a check of the run's settings and inputs, and the function that makes the ensemble. The run
(:func:`pate_stab.run.prepare.prepare`) reads the spec and never branches on the model's name.

| model | teachers |
|---|---|
| ``logistic``, ``mlp``, ``cnn`` | one head per shard, trained together (:func:`~pate_stab.teachers.training.train_teachers`), or self-trained under label privacy (:func:`~pate_stab.teachers.self_training.self_train_teachers`) |
| ``fixmatch`` | PATE-FM: each teacher FixMatch on its shard's labels (:func:`~pate_stab.teachers.fixmatch.train_fixmatch_teachers`, settings :mod:`~pate_stab.teachers.fixmatch_settings`) |
| ``propagate`` | label propagation over the public graph from each shard's labels (:class:`~pate_stab.teachers.propagation.PropagationTeachers`) |
"""  # noqa: E501

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab.models.networks import ModelSpec
from pate_stab.privacy.ledger.private_files import write_private
from pate_stab.teachers.ensemble import TeacherEnsemble
from pate_stab.teachers.fixmatch import train_fixmatch_teachers
from pate_stab.teachers.fixmatch_settings import check_fixmatch_teachers, fixmatch_teacher_config
from pate_stab.teachers.propagation import PropagationSpec, PropagationTeachers
from pate_stab.teachers.self_training import self_train_teachers
from pate_stab.teachers.training import TrainConfig, train_teachers

__all__ = ["TEACHER_SPECS", "TeacherData", "TeacherSpec", "make_teachers", "teacher_spec", "teacher_train_config"]

Teachers = TeacherEnsemble | PropagationTeachers


@dataclass(frozen=True)
class TeacherData:
    """What the teachers are made from.

    Attributes:
        private_x, private_y: the private split.
        shards: the partition, one index tensor per teacher.
        num_classes: C.
        public_x: the run's public pool (the queries' inputs).
        pool_inputs: the public pool before ``label_queries`` may put the private inputs in it (the
            unlabelled inputs of FixMatch and self-training).
        graph_nodes: under label privacy the private and public inputs (a propagation graph spans them),
            else None.
        run_dir: the run folder (the teachers live in its ``teachers/``).
        generator: the teachers' randomness.
        device: the run's compute device (the propagation graph's).
    """

    private_x: Tensor
    private_y: Tensor
    shards: list[Tensor]
    num_classes: int
    public_x: Tensor
    pool_inputs: Tensor
    graph_nodes: Tensor | None
    run_dir: Path
    generator: torch.Generator
    device: str | torch.device


# (the run's settings, the data) → (the teachers, whether they were reloaded from the run folder)
MakeFn = Callable[[Any, TeacherData], tuple[Teachers, bool]]


@dataclass(frozen=True)
class TeacherSpec:
    """One teacher model.

    Attributes:
        name: the ``teacher_model`` value.
        make: builds the ensemble (trained or reloaded, or rebuilt).
        trains: its heads are trained (on the run's accelerator, with progress bars) and reloaded from the run
            folder on a rerun; False: rebuilt from the data each run, nothing trained.
        check: refuses the run's settings (``task`` None: before the data are read) or inputs it cannot use.
    """

    name: str
    make: MakeFn
    trains: bool = True
    check: Callable[[Any, Any], None] | None = None


def teacher_train_config(config: Any) -> TrainConfig:
    """The trained heads' settings (logistic, mlp, cnn) from the run's teachers section."""
    return TrainConfig(
        epochs=config.teachers.teacher_epochs,
        batch_size=config.teachers.teacher_batch_size,
        lr=config.teachers.teacher_lr,
        weight_decay=config.teachers.teacher_weight_decay,
    )


def _model_spec(config: Any, data: TeacherData, architecture: Any) -> ModelSpec:
    """The heads' architecture (``architecture``: logistic, mlp or cnn) with the run's widths."""
    in_shape = tuple(data.private_x.shape[1:])
    return ModelSpec(architecture, in_shape, data.num_classes, hidden=config.teachers.teacher_hidden,
                     channels=config.teachers.teacher_channels)  # fmt: skip


def _reloaded(config: Any, data: TeacherData, spec: ModelSpec) -> TeacherEnsemble | None:
    """The teachers a previous run of this folder trained, if it holds them; refused if they are other teachers."""
    teacher_dir = data.run_dir / "teachers"
    if not ((teacher_dir / "weights.pt").is_file() and (teacher_dir / "config.json").is_file()):
        return None
    teachers = TeacherEnsemble.load(teacher_dir)
    if teachers.num_teachers != config.teachers.num_teachers or teachers.spec != spec:
        raise ValueError(f"{teacher_dir} holds other teachers; remove the run folder to retrain")
    return teachers


def _heads(config: Any, data: TeacherData) -> tuple[Teachers, bool]:
    """``logistic`` / ``mlp`` / ``cnn``: one head per shard, trained together; self-trained where the run asks."""
    spec = _model_spec(config, data, config.teachers.teacher_model)
    reloaded = _reloaded(config, data, spec)
    if reloaded is not None:
        return reloaded, True
    if config.teachers.teacher_self_training_rounds:
        # label privacy only (checked by the config): each head self-trains on every private and public
        # input with its own pseudo-labels (pate_stab.teachers.self_training); the ensemble is saved once
        teachers, history = self_train_teachers(
            data.private_x,
            data.private_y,
            data.shards,
            public_x=data.pool_inputs,
            privacy_unit=config.release.privacy_unit,
            spec=spec,
            threshold=config.teachers.teacher_self_training_threshold,
            rounds=config.teachers.teacher_self_training_rounds,
            config=teacher_train_config(config),
            generator=data.generator,
            accelerator=config.execution.accelerator,
        )
        teachers.save(data.run_dir / "teachers")
        # the pseudo-label counts depend on the private labels: a private file
        write_private(data.run_dir / "private_self_training.json", json.dumps(history, indent=2))
        return teachers, False
    trained = train_teachers(
        data.private_x,
        data.private_y,
        data.shards,
        spec=spec,
        config=teacher_train_config(config),
        generator=data.generator,
        run_dir=data.run_dir / "teachers",
        resume=True,
        accelerator=config.execution.accelerator,
        progress_bar=config.execution.progress,
    )
    return trained, False


def _fixmatch(config: Any, data: TeacherData) -> tuple[Teachers, bool]:
    """PATE-FM: each teacher FixMatch on its shard's labels; unlabelled: every input under label privacy, its
    own shard's and the public pool's under record privacy (:mod:`pate_stab.teachers.fixmatch`)."""
    spec = _model_spec(config, data, "cnn")
    reloaded = _reloaded(config, data, spec)
    if reloaded is not None:
        return reloaded, True
    fixmatch = fixmatch_teacher_config(config, int(data.private_x.shape[0]), int(data.pool_inputs.shape[0]))
    teachers = train_fixmatch_teachers(
        data.private_x,
        data.private_y,
        data.shards,
        public_x=data.pool_inputs,
        privacy_unit=config.release.privacy_unit,
        spec=spec,
        config=fixmatch,
        generator=data.generator,
        run_dir=data.run_dir / "teachers",
        accelerator=config.execution.accelerator,
        progress_bar=config.execution.progress,
    )
    return teachers, False


def _propagate(config: Any, data: TeacherData) -> tuple[Teachers, bool]:
    """Nothing is trained: the graph (public features only; under label privacy the private and public inputs)
    and the private affinities are rebuilt on the run's GPU where it has one: the features move there once and
    the graph stays there."""
    graph = PropagationSpec(
        num_neighbors=config.graph.graph_neighbors,
        power=config.graph.graph_power,
        alpha=config.graph.graph_alpha,
        steps=config.graph.graph_steps,
        pca_dim=config.graph.graph_pca_dim,
    )
    if data.public_x.dim() != 2:
        raise ValueError(f"propagate teachers need feature vectors, got inputs of shape {tuple(data.public_x.shape)}")
    if data.graph_nodes is None:  # record privacy: the graph sees the public pool only
        teachers = PropagationTeachers(data.public_x, data.private_x, data.private_y, data.shards,
                                       num_classes=data.num_classes, spec=graph, device=data.device)  # fmt: skip
    else:
        teachers = PropagationTeachers(
            data.graph_nodes, data.private_x, data.private_y, data.shards, num_classes=data.num_classes, spec=graph,
            fitted_on="the private and public inputs (label privacy: inputs are public)", device=data.device,
        )  # fmt: skip
    return teachers, False


TEACHER_SPECS: dict[str, TeacherSpec] = {
    "logistic": TeacherSpec("logistic", _heads),
    "mlp": TeacherSpec("mlp", _heads),
    "cnn": TeacherSpec("cnn", _heads),
    "propagate": TeacherSpec("propagate", _propagate, trains=False),
    "fixmatch": TeacherSpec("fixmatch", _fixmatch, check=check_fixmatch_teachers),
}
"""Every teacher model (the names of the run's ``TEACHER_MODELS``)."""


def teacher_spec(name: str) -> TeacherSpec:
    """The teacher model's spec; ValueError naming the known ones for an unknown name."""
    spec = TEACHER_SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown teacher_model {name!r}; choose from {', '.join(TEACHER_SPECS)}")
    return spec


def make_teachers(spec: TeacherSpec, config: Any, data: TeacherData) -> tuple[Teachers, bool]:
    """The run's teachers by its ``teacher_model``'s ``spec``: (the ensemble, whether it was reloaded from the run
    folder). ``config``: the run's settings (a :class:`~pate_stab.run.config.TransferConfig`)."""
    return spec.make(config, data)
