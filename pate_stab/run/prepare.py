"""Stages 1–2 of the main job: data, a record-keyed partition, and the teachers (trained or reloaded).

:func:`prepare` loads the task, refuses more teachers than private records
(:func:`check_teachers_fit`) and a budget at which the run's stability releaser could not answer
anything (:class:`BudgetTooSmallError`), both before any training and before ``config.json`` is
written, checks that the run folder holds this configuration (or none, or one under which nothing
was trained or spent: :func:`nothing_trained_or_spent`) and was made with these data (a MAC of the splits in a private
file, :func:`~pate_stab.run.run_folder.check_data_identity`), partitions the private records by their key (content or
record id, DESIGN.md fact 1) and trains the teachers as one vectorised Lightning fit — or
reloads them. Votes on the public pool are computed later, only when a release asks for them.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from pate_stab.aggregation.plan import RunPlan, plan_for_config
from pate_stab.aggregation.private_knn import NeighbourIndex
from pate_stab.aggregation.registry import aggregator_spec, answerability
from pate_stab.data.own import OwnData
from pate_stab.features.propagation import PoolGraph
from pate_stab.privacy.ledger.data_budget import DataSet, data_set_of
from pate_stab.privacy.ledger.private_files import PRIVATE_KEY_NAME, tighten_private_tree
from pate_stab.rng import child_seed, seeded_generator
from pate_stab.run.config import (
    DIRECT_LEARNER_NAMES,
    IMAGE_DIRECT_LEARNERS,
    NOT_IDENTITY,
    PARTITION_KEYS,
    TransferConfig,
)
from pate_stab.run.data import Task, load_task
from pate_stab.run.features import EXTRACTED_FEATURES, extract_features, features_device
from pate_stab.run.progress import accelerator_device, compute_device, report_stage
from pate_stab.run.run_folder import (
    LOCK_NAME,
    PRIVATE_FOLDERS,
    PRIVATE_IDENTITY,
    check_data_identity,
    check_ledger_kept,
    claim_run_folder,
    write_published,
)
from pate_stab.selection.spread import SpreadSettings
from pate_stab.teachers import (
    PoolVotes,
    PropagationTeachers,
    TeacherEnsemble,
    partition_indices,
    record_keys_from_tensors,
)
from pate_stab.teachers.partition import RecordKeys
from pate_stab.teachers.registry import TeacherData, TeacherSpec, make_teachers, teacher_spec

__all__ = [
    "BudgetTooSmallError",
    "label_query_task",
    "query_pool_size",
    "Prepared",
    "check_answerable",
    "check_teachers_fit",
    "neighbour_index",
    "nothing_trained_or_spent",
    "partition_keys",
    "pool_graph",
    "prepare",
]


class BudgetTooSmallError(ValueError):
    """The stability releaser would answer (almost) nothing at this (ε, δ, m, T, k)."""


def check_answerable(config: TransferConfig, num_classes: int) -> dict[str, Any] | None:
    """For a halting (stability) aggregator: raise :class:`BudgetTooSmallError` if a unanimous
    vote of the run's k teachers would not be answered; return the requirement otherwise."""
    if config.release.aggregator in DIRECT_LEARNER_NAMES:  # a direct learner asks no teachers
        return None
    spec = aggregator_spec(config.release.aggregator)
    if spec.binary_only and num_classes != 2:
        raise ValueError(f"{config.release.aggregator} (BTT18 Alg 6/8) needs a binary task")
    # in rounds, the smallest round's budget must answer a unanimous vote
    share = min(config.round_shares)
    status = answerability(
        config.release.aggregator,
        config.aggregator_settings(config.release.epsilon * share, config.release.delta * share),
    )
    if status is None:
        return None
    if not status.answerable and not config.release.allow_unanswerable:
        raise BudgetTooSmallError(
            f"budget too small to answer anything: with ε={config.release.epsilon * share:g}, "
            f"δ={config.release.delta * share:g}"
            + (" (the smallest round's share)" if config.release_rounds.rounds > 1 else "")
            + ", "
            f"T={config.release.max_unstable}, m={config.release.num_queries} ({config.release.calibration} "
            "calibration) the "
            f"releaser needs about k={status.teachers_needed} teachers for a unanimous vote to be answered; you "
            f"have k={config.teachers.num_teachers}. Use more teachers, or ε ≥ {status.epsilon_needed:.3g} with "
            f"k={config.teachers.num_teachers}, or a smaller T or m, or a PATE aggregator, which labels every query "
            f"(--aggregator gnmax; `pate-stab plan` shows what each aggregator needs), or "
            "--allow-unanswerable to run anyway."
        )
    return {"teachers_needed_for_unanimous_answer": status.teachers_needed}


def query_pool_size(config: TransferConfig, task: Task) -> int:
    """How many inputs the releaser may be asked about: the public pool, or under label privacy
    the private inputs, or both (``label_queries``)."""
    n_private, n_public = int(task.private_x.shape[0]), int(task.public_x.shape[0])
    return {"pool": n_public, "private": n_private, "both": n_private + n_public}[config.release.label_queries]


def label_query_task(task: Task, label_queries: str) -> Task:
    """Under label privacy, the task whose query pool is ``label_queries``' inputs.

    ``"pool"``: unchanged. ``"private"``: the private inputs; ``"both"``: the private inputs, then
    the public pool. The inputs are public under label privacy, so every later stage (selection,
    votes, the student and its unlabelled data) treats them as the pool. Their labels are not:
    the new pool carries none (``public_y`` None: no published label accuracy), and its true
    labels are kept in ``pool_labels_private`` for private diagnostics only.
    """
    if label_queries == "pool":
        return task
    if label_queries not in ("private", "both"):
        raise ValueError(f"label_queries must be pool, private or both, got {label_queries!r}")
    both = label_queries == "both"
    pool_x = torch.cat([task.private_x, task.public_x]) if both else task.private_x
    images = None
    if task.private_images is not None and task.public_images is not None:
        images = torch.cat([task.private_images, task.public_images]) if both else task.private_images
    truth = None
    if not both or task.public_y is not None:
        truth = torch.cat([task.private_y, task.public_y]) if both and task.public_y is not None else task.private_y
    return replace(task, public_x=pool_x, public_y=None, public_images=images, pool_labels_private=truth)


def partition_keys(
    task: Task,
    partition_key: str,
    *,
    dataset: str = "the data",
    features_device: str = "cpu",
    privacy_unit: str = "record",
) -> RecordKeys:
    """The record keys the run's partition hashes (DESIGN.md fact 1).

    ``"content"``: each private record's bytes and label (under label privacy its bytes only, so
    that a changed label keeps its record's shard and moves one teacher: DESIGN.md fact 13), read
    from the record as loaded (``task.private_images``) wherever the task keeps it, so that a record's
    key is a function of the record alone. Features computed in batches may differ in their last bits with the other
    records of their batch and with the machine (cuBLAS and cuFFT choose kernels by the batch's
    shape; CPU kernels by the thread count and instruction set): a key read from them could move
    other records to other shards when one record is removed, breaking the one-shard argument, and
    gives another partition on another machine. Data without loaded images (tables, arrays) are keyed
    on their features, which are a per-record map computed on the CPU; features computed on a GPU
    (``features_device`` other than the CPU) without the records as loaded are refused. ``"record_id"``: the ids
    supplied with the data (``task.private_ids``), which a neighbouring data set keeps for every
    other record and a replacement keeps for the replaced one; never row numbers, which removing
    one record would shift for every later record (and so move every shard).

    Raises:
        ValueError: an unknown key; ``record_id`` without ids, with ids that are not one per
            private record, or with a repeated id (two records would share a key).
        TypeError: ids that are not a 1-D integer tensor.
    """
    n = task.private_x.shape[0]
    if partition_key == "content":
        with_label = privacy_unit != "label"  # label privacy: the inputs alone, a changed label keeps its shard
        if task.private_images is not None:  # the records as loaded, on every device
            return record_keys_from_tensors(task.private_images, *([task.private_y] if with_label else []))
        if features_device != "cpu":
            raise ValueError("content keys of features computed on a GPU need the private records as loaded")
        if not with_label:
            return record_keys_from_tensors(task.private_x)
        return record_keys_from_tensors(task.private_x, task.private_y)
    if partition_key != "record_id":
        raise ValueError(f"partition_key must be one of {', '.join(PARTITION_KEYS)}, got {partition_key!r}")
    ids = task.private_ids
    if ids is None:
        raise ValueError(
            f"partition_key: record_id needs record ids supplied with the data (an id column or array), and "
            f"{dataset!r} has none; row numbers are not ids (removing one record renumbers every later one). "
            "Supply ids or use partition_key: content"
        )
    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.is_floating_point() or ids.dtype == torch.bool:
        raise TypeError("record ids must be a 1-D integer tensor")
    if ids.shape[0] != n:
        raise ValueError(f"record ids: need one id per private record ({n}), got {ids.shape[0]}")
    values, counts = torch.unique(ids, return_counts=True)
    if bool((counts > 1).any()):
        repeated = values[counts > 1][:5].tolist()
        raise ValueError(f"record ids are not unique: {repeated} appear more than once")
    return ids.to(torch.int64)


@dataclass
class Prepared:
    """Everything up to the teachers; reused by every release of a run.

    ``votes`` computes the teachers' votes on a public pool point only when a release asks for
    it (:class:`~pate_stab.teachers.PoolVotes`).
    """

    config: TransferConfig
    run_dir: Path
    task: Task
    teachers: TeacherEnsemble | PropagationTeachers | None  # None: a direct learner's run has none
    votes: PoolVotes | None
    timings: dict[str, float]
    resumed_teachers: bool
    generators: dict[str, torch.Generator]
    resumed_features: bool | None = None  # scattering / ssl (/ both): read from the run folder's cache
    graph: PoolGraph | None = None  # the public pool's kNN graph, built on first use (pool_graph)
    graph_device: str = "cpu"  # where pool_graph put it (the run's compute device once it is built)
    selection_device: str | None = None  # where the last release's query selector computed (None: no selector)
    devices: dict[str, str] = field(default_factory=dict)  # each timed stage's device (private diagnostics)
    # the private data set in the data holder's budget (pate_stab.privacy.ledger.data_budget): every spend of
    # the run is counted there too
    data_set: DataSet | None = None
    neighbours: NeighbourIndex | None = None  # the private records' index (Private-kNN), built on first use


def neighbour_index(prep: Prepared) -> NeighbourIndex:
    """The private records' features and labels for the neighbour-vote aggregators (Private-kNN), on the
    run's compute device, built once per run: the run's privacy-free features (fitted on public data, or
    on every input under label privacy, where the inputs are public), flattened, searched exactly on a
    grid whose step is read from the public pool."""
    if prep.neighbours is None:
        task = prep.task
        # the exact search's grid step from the public pool (public inputs only; NeighbourIndex)
        resolution = NeighbourIndex.public_resolution(task.public_x.flatten(1).float())
        prep.neighbours = NeighbourIndex(task.private_x.flatten(1).float(), task.private_y,
                                         num_classes=task.num_classes, resolution=resolution,
                                         device=compute_device(prep.config.execution.accelerator))  # fmt: skip
    return prep.neighbours


def pool_graph(prep: Prepared) -> PoolGraph:
    """The public pool's kNN graph (public features only) on the run's compute device
    (:func:`~pate_stab.run.progress.compute_device`), where the query selection and the spread student
    spread labels over it: the propagation teachers' own graph (built there), or one built there once per
    run with the run's ``graph_*`` settings on the pool's (flattened) inputs, which move there once, whole.
    :attr:`Prepared.graph_device` names that device for the stage lines."""
    if prep.graph is None:
        device = compute_device(prep.config.execution.accelerator)
        # the teachers' graph is the pool's only where its nodes are the pool (label privacy's graph
        # also holds the private inputs; with label_queries "both" they are the pool)
        teachers = prep.teachers
        if isinstance(teachers, PropagationTeachers) and teachers.graph_nodes == prep.task.public_x.shape[0]:
            prep.graph = teachers.graph  # built on the run's compute device (prepare)
        else:
            prep.graph = SpreadSettings.of(prep.config).pool_graph(prep.task.public_x.flatten(1).float().to(device))
        prep.graph_device = device
    return prep.graph


PAST_DEFAULTS = {"releaser_noise": "seeded"}
"""Settings whose default changed: a config.json without the key was made under the old default."""


# what a run folder holds before anything is trained or spent: the configuration, the lock, the
# folder's secret key and data identity (private), the public features' caches, a ledger with no spend
_BEFORE_TRAINING = {
    "config.json", LOCK_NAME, PRIVATE_KEY_NAME, PRIVATE_IDENTITY, "features", "features.pt", "ledger.jsonl",
}  # fmt: skip


def nothing_trained_or_spent(run_dir: Path) -> bool:
    """True if ``run_dir`` holds no teachers, no student, no report and no spend.

    Such a folder only holds what a run writes before its first training step (``config.json``, the
    lock, the secret key and data identity, features fitted on public data) and at most a ledger
    header: nothing in it depends on the configuration's upstream settings beyond the features'
    caches, which are keyed on their options. Anything else, or a ledger line that is not a header
    or a budget record (or cannot be read), counts as trained or spent.
    """
    if not run_dir.is_dir():
        return True
    if any(p.name not in _BEFORE_TRAINING and not p.name.endswith(".tmp") for p in run_dir.iterdir()):
        return False
    ledger = run_dir / "ledger.jsonl"
    if not ledger.is_file():
        return True
    try:
        records = [json.loads(line) for line in ledger.read_text().splitlines() if line.strip()]
    except (UnicodeDecodeError, ValueError):
        return False
    return all(isinstance(r, dict) and r.get("kind") in ("header", "budget") for r in records)


def _check_run_dir(config: TransferConfig, run_dir: Path) -> None:
    """Refuse a run folder made with another configuration, unless nothing was trained or spent in it.

    A folder whose run was refused before its first training step (a setting that could only be
    judged once the data were read, a direct learner's missing public size, …) holds nothing that
    belongs to its configuration (:func:`nothing_trained_or_spent`): a corrected rerun replaces its
    ``config.json``. Otherwise the configuration must match, except in :data:`NOT_IDENTITY`.
    """
    check_ledger_kept(run_dir)  # a folder that spent and lost its ledger: refused before anything is written
    path = run_dir / "config.json"
    mine = {k: v for k, v in config.to_dict().items() if k not in NOT_IDENTITY}
    if path.is_file() and not nothing_trained_or_spent(run_dir):
        saved = json.loads(path.read_text())
        # a key added to TransferConfig after the folder was made had its default value then
        defaults = TransferConfig().to_dict() | PAST_DEFAULTS
        saved = {k: saved.get(k, defaults[k]) for k in defaults if k not in NOT_IDENTITY} | {
            k: v for k, v in saved.items() if k not in NOT_IDENTITY and k not in defaults
        }
        diff = sorted(k for k in set(mine) | set(saved) if mine.get(k) != saved.get(k))
        if diff:
            raise ValueError(
                f"{run_dir} holds a run with another configuration (differs in: {', '.join(diff)}); "
                "choose another run name or remove the folder"
            )
    claim_run_folder(run_dir)  # the run's first write: the folder's lock is taken here if not yet
    write_published(path, json.dumps(config.to_dict(), indent=2, sort_keys=True))


def check_teachers_fit(num_teachers: int, num_private: int) -> None:
    """Refuse more teachers than private records (before any partition or training).

    A partition of n records into k > n shards leaves at least k − n teachers without a record:
    they vote at chance, and a release would spend its budget on their noise. n is private under
    add/remove, so this refusal is shown to the data holder (the terminal, an exception) only and
    is raised before anything is trained, spent or published: no published file depends on it.
    """
    if num_teachers > num_private:
        raise ValueError(
            f"num_teachers={num_teachers} exceeds the {num_private} private records: at least "
            f"{num_teachers - num_private} teachers would get no record and vote at chance, and the release would "
            f"spend on them. Use at most {num_private} teachers (a few dozen records per teacher or more; `pate-stab "
            "plan` shows what each aggregator needs). This message holds the private size: it is for you, not for "
            "publication. Nothing was trained or spent"
        )


def prepare(
    config: TransferConfig,
    *,
    check_budget: bool = True,
    data: OwnData | None = None,
    on_plan: Callable[[RunPlan], None] | None = None,
    with_teachers: bool | None = None,
    with_features: bool | None = None,
    before_teachers: Callable[[Prepared], None] | None = None,
) -> Prepared:
    """Stages 1–2: data, partition, teachers (trained or reloaded); votes are computed on demand.

    ``data``: the user's checked arrays for ``dataset="arrays"`` (:func:`pate_stab.data.own.own_data`).
    Data is loaded and checked before the run folder is touched: bad input trains and spends nothing.
    ``on_plan`` receives the run's plan (:func:`~pate_stab.aggregation.plan.plan_for_config`) once the data
    is loaded, before the budget check and any training: it holds the private size n, so show it
    to the user, never publish it.

    ``with_teachers``: make the partition and the teachers (None: unless the run's aggregator is
    a direct learner, which asks none). ``with_features``: compute the extracted features
    (scattering, SSL; None: unless the run's aggregator trains on the images themselves,
    :data:`~pate_stab.run.config.IMAGE_DIRECT_LEARNERS`). A compare with direct learners only
    passes both (:mod:`pate_stab.run.compare`). Without teachers, ``teachers`` and ``votes`` are None.
    ``before_teachers`` receives the run without teachers once its features are computed, before the
    partition and any training: a compare checks its direct learners' inputs there.
    """
    if with_teachers is None:  # a direct learner, or neighbour votes (Private-kNN), ask no teachers
        with_teachers = (
            config.release.aggregator not in DIRECT_LEARNER_NAMES
            and aggregator_spec(config.release.aggregator).votes != "queries"
        )
    if with_features is None:
        with_features = config.release.aggregator not in IMAGE_DIRECT_LEARNERS
    teachers_spec = teacher_spec(config.teachers.teacher_model) if with_teachers else None
    if teachers_spec is not None and teachers_spec.check is not None:
        teachers_spec.check(config, None)  # refused before the data are read
    stages = _Stages()
    gens = _generators(config.seed)
    task = _load_data(config, data, gens["data"], stages)
    record_ids, data_set = _plan_and_folder(config, task, stages, on_plan=on_plan, check_budget=check_budget,
                                            teachers_spec=teachers_spec)  # fmt: skip
    resumed_features = None
    if config.feature_stage.features in EXTRACTED_FEATURES and with_features:
        task, resumed_features = _features(config, task, gens["features"], stages)
    graph_nodes = None
    pool_inputs = task.public_x  # the public pool, before label_queries may put the private inputs in it
    if config.release.privacy_unit == "label":
        # label privacy: every input is public. The propagation graph spans the private and public
        # inputs; the queries may be the private inputs themselves (label_queries)
        graph_nodes = torch.cat([task.private_x, task.public_x]) if task.private_x.dim() == 2 else None
        task = label_query_task(task, config.release.label_queries)
    common: dict[str, Any] = {
        "config": config, "run_dir": config.run_dir, "task": task, "timings": stages.timings, "generators": gens,
        "resumed_features": resumed_features, "data_set": data_set,
    }  # fmt: skip
    if before_teachers is not None:
        before_teachers(Prepared(**common, teachers=None, votes=None, resumed_teachers=False))
    if teachers_spec is None:
        # a direct learner trains on the private split itself: no partition, no teachers
        return Prepared(**common, teachers=None, votes=None, resumed_teachers=False, devices=stages.devices)
    shards = _partition(config, task, record_ids, gens["partition"], stages, with_features=with_features)
    t0 = time.perf_counter()
    device = compute_device(config.execution.accelerator)  # the graph's and the votes' device
    teacher_data = TeacherData(
        private_x=task.private_x, private_y=task.private_y, shards=shards, num_classes=task.num_classes,
        public_x=task.public_x, pool_inputs=pool_inputs, graph_nodes=graph_nodes, run_dir=config.run_dir,
        generator=gens["teachers"], device=device,
    )  # fmt: skip
    teachers, resumed = make_teachers(teachers_spec, config, teacher_data)
    if not teachers_spec.trains:  # rebuilt where the graph is
        trained_on = device
    else:
        trained_on = "cpu (reloaded)" if resumed else accelerator_device(config.execution.accelerator)
    stages.report("teachers", t0, trained_on)
    # the votes on the run's GPU where it has one: the pool moves there once, the weights on the first request
    progress = config.execution.progress if teachers_spec.trains else False
    votes = PoolVotes(teachers, task.public_x, task.num_classes, progress=progress, device=device)
    return Prepared(**common, teachers=teachers, votes=votes, resumed_teachers=resumed, devices=stages.devices)


@dataclass
class _Stages:
    """The stages' wall times and devices, reported as each ends (:func:`~pate_stab.run.progress.report_stage`)."""

    timings: dict[str, float] = field(default_factory=dict)
    devices: dict[str, str] = field(default_factory=dict)

    def report(self, name: str, started: float, device: str) -> None:
        report_stage(self.timings, name, time.perf_counter() - started, device, self.devices)


def _generators(seed: int) -> dict[str, torch.Generator]:
    """One generator per stage from the run's seed; appended names get new seeds, the earlier ones keep theirs."""
    names = (
        "data", "partition", "teachers", "release", "student", "bottom", "selection", "data_dependent", "features",
        "rounds",
    )  # fmt: skip
    root = seeded_generator(seed)
    return {n: torch.Generator().manual_seed(child_seed(root)) for n in names}


def _load_data(config: TransferConfig, data: OwnData | None, generator: torch.Generator, stages: _Stages) -> Task:
    """Stage "data": the private set, public pool and evaluation split."""
    t0 = time.perf_counter()
    task = load_task(config, generator=generator, data=data)
    pca_on_device = (
        config.feature_stage.features == "pca" and task.private_images is not None
    )  # images (pate_stab.run.data)
    pca_device = compute_device(config.execution.accelerator) if pca_on_device else "cpu"
    stages.report("data", t0, "cpu" if pca_device == "cpu" else f"cpu, {pca_device} (pca)")
    return task


def _plan_and_folder(
    config: TransferConfig,
    task: Task,
    stages: _Stages,
    *,
    on_plan: Callable[[RunPlan], None] | None,
    check_budget: bool,
    teachers_spec: TeacherSpec | None,
) -> tuple[RecordKeys | None, DataSet]:
    """Stage "plan": the plan (calibrations), the checks of the inputs and the budget, the run folder and the
    data's identity, before anything is trained. Returns the record ids (``partition_key: record_id``) and
    the private data set of the data holder's budget."""
    t0 = time.perf_counter()
    if (
        on_plan is not None and config.release.aggregator not in DIRECT_LEARNER_NAMES
    ):  # a direct learner has no teachers
        on_plan(plan_for_config(config, num_private=int(task.private_x.shape[0]), num_classes=task.num_classes))
    # record ids are checked before anything is written; content keys are read from the final inputs
    record_ids = None
    if config.release.partition_key == "record_id":
        record_ids = partition_keys(task, "record_id", dataset=config.data.dataset)
    if config.release.aggregator in IMAGE_DIRECT_LEARNERS and task.private_images is None:
        raise ValueError(
            f"{config.release.aggregator} trains a CNN on images; the private data of this run "
            f"({config.data.dataset!r}) are "
            "feature vectors or a table, not images"
        )
    if teachers_spec is not None:
        check_teachers_fit(config.teachers.num_teachers, int(task.private_x.shape[0]))
        if teachers_spec.check is not None:
            teachers_spec.check(config, task)
    if check_budget:
        check_answerable(config, task.num_classes)
    pool_size = query_pool_size(config, task)
    if teachers_spec is not None and config.release.num_queries > pool_size:  # without teachers no query is asked
        what = (
            "the public pool"
            if config.release.label_queries == "pool"
            else f"the queries (label_queries: {config.release.label_queries})"
        )
        raise ValueError(f"num_queries={config.release.num_queries} exceeds {what} ({pool_size} inputs)")
    data_set = _claim_folder(config, task)
    stages.report("plan", t0, "cpu")
    return record_ids, data_set


def _claim_folder(config: TransferConfig, task: Task) -> DataSet:
    """The run folder checked, the data's identity recorded (its MAC in a private file, pate_stab.run.run_folder),
    the private folders tightened and the feature map saved; the private data set of the holder's budget."""
    run_dir = config.run_dir
    _check_run_dir(config, run_dir)
    # a pool without labels stands as an empty label tensor; ids supplied with the data are part of it
    public_y = task.public_y if task.public_y is not None else torch.empty(0, dtype=torch.int64)
    splits = [task.private_x, task.private_y, task.public_x, public_y, task.eval_x, task.eval_y]
    if task.private_ids is not None:
        splits.append(task.private_ids)
    check_data_identity(run_dir, list(task.loaded) if task.loaded else splits, legacy=splits)
    # the data holder's budget is the private split's as loaded (inputs, labels), whatever the pool or folder
    data_set = data_set_of(list(task.loaded[:2]) if task.loaded else [task.private_x, task.private_y])
    for folder in PRIVATE_FOLDERS:  # working state from private data; a folder made before it was private
        tighten_private_tree(run_dir / folder)
    if "state" in task.feature_map:
        torch.save(task.feature_map["state"], run_dir / "features.pt")
    return data_set


def _features(config: TransferConfig, task: Task, generator: torch.Generator, stages: _Stages) -> tuple[Task, bool]:
    """Stage "features": the extracted features (scattering, SSL), computed or read from the run folder's cache."""
    t0 = time.perf_counter()
    task, resumed = extract_features(task, config, config.run_dir / "features", generator=generator)
    # on the run's GPU where it has one (scattering, the SSL encoder, their public projections); a
    # cache hit only reads the file
    stages.report("features", t0, "cpu (cached)" if resumed else features_device(config))
    return task, resumed


def _partition(
    config: TransferConfig,
    task: Task,
    record_ids: RecordKeys | None,
    generator: torch.Generator,
    stages: _Stages,
    *,
    with_features: bool,
) -> list[torch.Tensor]:
    """Stage "partition": the record-keyed shards, one per teacher."""
    t0 = time.perf_counter()
    # the device of the features the content keys would read (the public PCA of images, scattering, SSL)
    computed_on = (
        compute_device(config.execution.accelerator)
        if task.private_images is not None
        and (
            config.feature_stage.features == "pca"
            or (config.feature_stage.features in EXTRACTED_FEATURES and with_features)
        )
        else "cpu"
    )
    keys = (
        record_ids
        if record_ids is not None
        else partition_keys(
            task, config.release.partition_key, features_device=computed_on, privacy_unit=config.release.privacy_unit
        )
    )
    shards = partition_indices(keys, config.teachers.num_teachers, generator=generator)
    stages.report("partition", t0, "cpu")
    return shards
