"""Stages 1–2 of the main job: data, a record-keyed partition, and the teachers (trained or reloaded).

:func:`prepare` loads the task, refuses a budget at which the run's stability releaser could not
answer anything (:class:`BudgetTooSmallError`, before any training), checks that the run folder
holds this configuration (or none), partitions the private records by their key (content or
record id, DESIGN.md fact 1) and trains the teachers as one vectorised Lightning fit — or
reloads them. Votes on the public pool are computed later, only when a release asks for them.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from pate_stab.aggregation.registry import aggregator_spec, answerability
from pate_stab.features.propagation import PoolGraph
from pate_stab.rng import child_seed, seeded_generator
from pate_stab.run.config import DIRECT_LEARNER_NAMES, NOT_IDENTITY, TransferConfig
from pate_stab.run.data import Task, load_task
from pate_stab.run.features import EXTRACTED_FEATURES, extract_features
from pate_stab.teachers import (
    ModelSpec,
    PoolVotes,
    PropagationSpec,
    PropagationTeachers,
    TeacherEnsemble,
    TrainConfig,
    partition_indices,
    record_keys_from_tensors,
    train_teachers,
)

__all__ = ["BudgetTooSmallError", "Prepared", "check_answerable", "pool_graph", "prepare"]


class BudgetTooSmallError(ValueError):
    """The stability releaser would answer (almost) nothing at this (ε, δ, m, T, k)."""


def check_answerable(config: TransferConfig, num_classes: int) -> dict[str, Any] | None:
    """For a halting (stability) aggregator: raise :class:`BudgetTooSmallError` if a unanimous
    vote of the run's k teachers would not be answered; return the requirement otherwise."""
    if config.aggregator in DIRECT_LEARNER_NAMES:  # a direct learner asks no teachers
        return None
    spec = aggregator_spec(config.aggregator)
    if spec.binary_only and num_classes != 2:
        raise ValueError(f"{config.aggregator} (BTT18 Alg 6/8) needs a binary task")
    status = answerability(config.aggregator, config.aggregator_settings())
    if status is None:
        return None
    if not status.answerable and not config.allow_unanswerable:
        raise BudgetTooSmallError(
            f"budget too small to answer anything: with ε={config.epsilon:g}, δ={config.delta:g}, "
            f"T={config.max_unstable}, m={config.num_queries} ({config.calibration} calibration) the "
            f"releaser needs about k={status.teachers_needed} teachers for a unanimous vote to be answered; you "
            f"have k={config.num_teachers}. Use more teachers, or ε ≥ {status.epsilon_needed:.3g} with "
            f"k={config.num_teachers}, or a smaller T or m (or --allow-unanswerable to run anyway)."
        )
    return {"teachers_needed_for_unanimous_answer": status.teachers_needed}


@dataclass
class Prepared:
    """Everything up to the teachers; reused by every release of a run.

    ``votes`` computes the teachers' votes on a public pool point only when a release asks for
    it (:class:`~pate_stab.teachers.PoolVotes`).
    """

    config: TransferConfig
    run_dir: Path
    task: Task
    teachers: TeacherEnsemble | PropagationTeachers
    votes: PoolVotes
    timings: dict[str, float]
    resumed_teachers: bool
    generators: dict[str, torch.Generator]
    resumed_features: bool | None = None  # scattering / ssl: read from the run folder's cache
    graph: PoolGraph | None = None  # the public pool's kNN graph, built on first use (pool_graph)


def pool_graph(prep: Prepared) -> PoolGraph:
    """The public pool's kNN graph (public features only): the propagation teachers' own graph, or
    one built with the run's ``graph_*`` settings on the pool's (flattened) inputs, once per run."""
    if prep.graph is None:
        if isinstance(prep.teachers, PropagationTeachers):
            prep.graph = prep.teachers.graph
        else:
            c = prep.config
            prep.graph = PoolGraph(
                num_neighbors=c.graph_neighbors, power=c.graph_power, alpha=c.graph_alpha, steps=c.graph_steps,
                pca_dim=c.graph_pca_dim,
            ).fit(prep.task.public_x.flatten(1).float())  # fmt: skip
    return prep.graph


def _check_run_dir(config: TransferConfig, run_dir: Path) -> None:
    path = run_dir / "config.json"
    mine = {k: v for k, v in config.to_dict().items() if k not in NOT_IDENTITY}
    if path.is_file():
        saved = json.loads(path.read_text())
        # a key added to TransferConfig after the folder was made had its default value then
        defaults = TransferConfig().to_dict()
        saved = {k: saved.get(k, defaults[k]) for k in defaults if k not in NOT_IDENTITY} | {
            k: v for k, v in saved.items() if k not in NOT_IDENTITY and k not in defaults
        }
        diff = sorted(k for k in set(mine) | set(saved) if mine.get(k) != saved.get(k))
        if diff:
            raise ValueError(
                f"{run_dir} holds a run with another configuration (differs in: {', '.join(diff)}); "
                "choose another run name or remove the folder"
            )
    run_dir.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(config.to_dict(), indent=2, sort_keys=True))


def prepare(config: TransferConfig, *, check_budget: bool = True) -> Prepared:
    """Stages 1–2: data, partition, teachers (trained or reloaded); votes are computed on demand."""
    timings: dict[str, float] = {}
    run_dir = config.run_dir
    # appended names get new seeds; the earlier ones keep theirs
    names = ("data", "partition", "teachers", "release", "student", "bottom", "selection", "data_dependent", "features")
    root = seeded_generator(config.seed)
    gens = {n: torch.Generator().manual_seed(child_seed(root)) for n in names}

    t0 = time.perf_counter()
    task = load_task(config, generator=gens["data"])
    timings["data"] = time.perf_counter() - t0
    if check_budget:
        check_answerable(config, task.num_classes)
    if config.num_queries > task.public_x.shape[0]:
        raise ValueError(f"num_queries={config.num_queries} exceeds the public pool ({task.public_x.shape[0]} inputs)")
    _check_run_dir(config, run_dir)
    if "state" in task.feature_map:
        torch.save(task.feature_map["state"], run_dir / "features.pt")
    resumed_features = None
    if config.features in EXTRACTED_FEATURES:
        t0 = time.perf_counter()
        task, resumed_features = extract_features(task, config, run_dir / "features", generator=gens["features"])
        timings["features"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if config.partition_key == "record_id":
        keys: Any = torch.arange(task.private_x.shape[0], dtype=torch.int64)
    else:
        keys = record_keys_from_tensors(task.private_x, task.private_y)
    shards = partition_indices(keys, config.num_teachers, generator=gens["partition"])
    timings["partition"] = time.perf_counter() - t0

    t0 = time.perf_counter()
    if config.teacher_model == "propagate":
        graph = PropagationSpec(
            num_neighbors=config.graph_neighbors,
            power=config.graph_power,
            alpha=config.graph_alpha,
            steps=config.graph_steps,
            pca_dim=config.graph_pca_dim,
        )
        if task.public_x.dim() != 2:
            shape = tuple(task.public_x.shape)
            raise ValueError(f"propagate teachers need feature vectors, got inputs of shape {shape}")
        # nothing is trained: the graph (public features only) and the private affinities are rebuilt
        teachers: TeacherEnsemble | PropagationTeachers = PropagationTeachers(
            task.public_x, task.private_x, task.private_y, shards, num_classes=task.num_classes, spec=graph
        )
        timings["teachers"] = time.perf_counter() - t0
        votes = PoolVotes(teachers, task.public_x, task.num_classes)
        return Prepared(config, run_dir, task, teachers, votes, timings, False, gens, resumed_features)
    in_shape = tuple(task.private_x.shape[1:])
    spec = ModelSpec(
        config.teacher_model,
        in_shape,
        task.num_classes,
        hidden=config.teacher_hidden,
        channels=config.teacher_channels,
    )
    teacher_dir = run_dir / "teachers"
    resumed = (teacher_dir / "weights.pt").is_file() and (teacher_dir / "config.json").is_file()
    if resumed:
        teachers = TeacherEnsemble.load(teacher_dir)
        if teachers.num_teachers != config.num_teachers or teachers.spec != spec:
            raise ValueError(f"{teacher_dir} holds other teachers; remove the run folder to retrain")
    else:
        train = TrainConfig(
            epochs=config.teacher_epochs,
            batch_size=config.teacher_batch_size,
            lr=config.teacher_lr,
            weight_decay=config.teacher_weight_decay,
        )
        teachers = train_teachers(
            task.private_x,
            task.private_y,
            shards,
            spec=spec,
            config=train,
            generator=gens["teachers"],
            run_dir=teacher_dir,
            resume=True,
            accelerator=config.accelerator,
            progress_bar=config.progress,
        )
    timings["teachers"] = time.perf_counter() - t0
    votes = PoolVotes(teachers, task.public_x, task.num_classes, progress=config.progress)
    return Prepared(config, run_dir, task, teachers, votes, timings, resumed, gens, resumed_features)
