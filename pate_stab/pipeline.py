"""Knowledge transfer end to end: private data → teachers → private release → student → report.

:func:`run_transfer` runs the main job of the toolkit (DESIGN.md, "The pipeline"):

1. data: the private training set, the public query pool and the evaluation split
   (``threat_model="public-pool"``, BTT18 §4.2 scenario (i)); or, with
   ``threat_model="label-only"`` (scenario (ii)), part of the training set has its labels
   discarded and becomes the public pool;
2. a record-keyed partition into k shards and k teachers (vectorised Lightning training);
3. one aggregator — the stability releaser (hard labels, BTT18 Alg 4; soft labels, Alg 6/8) or
   PATE's LNMax / GNMax / Confident-GNMax — spending through the run's privacy ledger, asked
   about ``num_queries`` public inputs: the first ones in pool order (``query_selection="first"``)
   or, with ``"student-confidence"``, ones chosen round by round from public data and the
   outputs released so far (:mod:`pate_stab.selection`); the teachers' votes on an input are
   computed only when the releaser processes it;
5. the student (BTT18 Alg 5) on the queried inputs and their released labels (post-processing);
6. evaluation on the held-out split, and ``report.json``.

A run lives in ``<checkpoints_dir>/<run_name>/``: ``config.json``, ``features.pt`` (the PCA fitted
on the public pool, if used), ``teachers/``, ``ledger.jsonl``, ``student.pt`` and ``report.json``.

Resume. Rerunning the same run folder reuses the trained teachers (``teachers/weights.pt``, or
Lightning's ``last.ckpt`` of an interrupted fit) and the recorded releases: every release has a
deterministic ledger ``spend_id`` (run, aggregator, ε), the released labels — and, with query
selection, the pool positions they belong to and the rounds — are stored in the ledger with
``record_result`` before the student sees them, and a rerun reads them back instead of selecting
and drawing noise again — no second spend. A rerun that changes only the student's settings
reuses the teachers and the releases and refits the student (post-processing: no privacy cost);
a rerun that changes anything upstream of the student is refused.
With the same seed, two runs give the same report (wall times, paths and resume flags aside).

The pipeline's :func:`prepare` / :func:`release_labels` / :func:`fit_student` stages are reused
by :func:`pate_stab.comparison.run_compare` (all aggregators on the same votes).
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

from pate_stab.aggregation.baselines import BaselineReleaser
from pate_stab.aggregation.compare import make_aggregator
from pate_stab.aggregation.releaser import NOISE_MODES, StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.aggregation.votes import vote_histogram
from pate_stab.data import (
    load_adult,
    load_cifar10,
    load_fashion_mnist,
    load_mnist,
    load_svhn,
    make_gaussian_mixture,
    pate_split,
    random_split_indices,
    standardize,
)
from pate_stab.privacy.calibration import Calibration, calibrate
from pate_stab.privacy.ledger import NEIGHBOURING_RELATIONS, PrivacyLedger
from pate_stab.rng import child_seed, seeded_generator
from pate_stab.selection import (
    QUERY_SELECTIONS,
    SELECTION_PRIVACY,
    ConfidenceFn,
    check_query_selection,
    release_in_rounds,
)
from pate_stab.student import StudentConfig, StudentTargets, hard_targets, soft_targets, train_student
from pate_stab.teachers import (
    ModelSpec,
    PoolVotes,
    PublicFeatures,
    TeacherEnsemble,
    TrainConfig,
    partition_indices,
    record_keys_from_tensors,
    train_teachers,
)
from pate_stab.theory import teachers_for_unanimous_answer

__all__ = [
    "AGGREGATORS",
    "DATASETS",
    "QUERY_SELECTIONS",
    "BudgetTooSmallError",
    "Task",
    "TransferConfig",
    "Prepared",
    "Release",
    "load_task",
    "prepare",
    "release_labels",
    "fit_student",
    "run_transfer",
    "stability_requirement",
]

DATASETS = ("synthetic", "mnist", "fashion_mnist", "svhn", "cifar10", "adult")
AGGREGATORS = ("stability", "stability-soft", "lnmax", "gnmax", "confident-gnmax")
THREAT_MODELS = {
    "public-pool": (
        "BTT18 §4.2 scenario (i): the whole training set (features and labels) is private; the "
        "learner also has an unlabelled public pool from the same distribution. The certified "
        "(ε, δ) protects every private record."
    ),
    "label-only": (
        "BTT18 §4.2 scenario (ii): only labels are private and there is no public pool. Part of "
        "the training set had its labels discarded and serves as the public pool; its features "
        "are treated as public. The certified (ε, δ) protects the labels (every record of the "
        "labelled part); the features of the pool records are not protected."
    ),
}
PARTITION_KEYS = {
    "content": "the record's own bytes (features and label): a replaced record may move to another shard",
    "record_id": "the record's row number in the private split, kept by a replacement (a stable record id)",
}
SELECTOR_MIN_STEPS = 300  # optimiser steps of the student-confidence selector, at least
# stages whose config fields must match for a run folder to be reused
_WIDTH_FIELDS = ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels")
# the student is post-processing of the release: a rerun may change these and only refits the student
_STUDENT_FIELDS = (
    "student_model",
    "student_hidden",
    "student_channels",
    "student_epochs",
    "student_batch_size",
    "student_lr",
    "bottom",
    "pseudo_label_rounds",
    "pseudo_label_threshold",
)
_NOT_IDENTITY = ("checkpoints_dir", "accelerator", "progress", "stop_after", "allow_unanswerable", *_STUDENT_FIELDS)


class BudgetTooSmallError(ValueError):
    """The stability releaser would answer (almost) nothing at this (ε, δ, m, T, k)."""


@dataclass(frozen=True)
class TransferConfig:
    """Everything a transfer run needs; a recipe YAML holds these keys.

    Defaults describe a small synthetic task; see ``recipes/*.yaml`` for data sets.
    """

    run_name: str = "transfer"
    checkpoints_dir: str = "checkpoints"
    seed: int = 0
    # data
    dataset: str = "synthetic"
    data_dir: str | None = None
    download: bool = False
    threat_model: Literal["public-pool", "label-only"] = "public-pool"
    label_only_pool: int = 10000  # training records whose labels are discarded (label-only)
    num_private: int = 20000  # synthetic only
    num_public: int = 2000  # synthetic only; image data sets use PATE's 9,000
    num_eval: int = 2000  # synthetic only
    num_classes: int = 3  # synthetic only
    dim: int = 10  # synthetic only
    separation: float = 4.0  # synthetic only
    label_noise: float = 0.0  # synthetic only
    # privacy: the neighbouring relation the run's guarantee is stated for, and the partition key
    # (see teachers_changed): content keys + replace_one need group privacy over two teachers
    neighbouring: Literal["add_remove", "replace_one"] = "add_remove"
    partition_key: Literal["content", "record_id"] = "content"
    features: Literal["raw", "pca"] = "raw"
    pca_dim: int = 50
    whiten: bool = True
    # teachers
    num_teachers: int = 250
    teacher_model: Literal["logistic", "mlp", "cnn"] = "logistic"
    teacher_hidden: tuple[int, ...] = (64,)  # MLP widths, or the CNN's fully connected widths
    teacher_channels: tuple[int, int] = (64, 128)  # CNN only: the two convolution widths (PATE's)
    teacher_epochs: int = 20
    teacher_batch_size: int = 8
    teacher_lr: float = 1e-2
    teacher_weight_decay: float = 1e-3
    # release
    aggregator: str = "stability"
    epsilon: float = 8.0
    delta: float = 1e-5
    max_unstable: int = 10
    num_queries: int = 500
    calibration: Literal["paper", "tight"] = "tight"
    gamma: float = 0.1  # soft labels
    confident_threshold: float = 0.6  # Confident-GNMax threshold as a fraction of k
    sigma_ratio: float = 2.0  # Confident-GNMax σ1/σ2
    allow_unanswerable: bool = False
    # the stability releasers' noise: "seeded" (float Laplace from the run's seed: reproducible
    # research) or "secure" (exact discrete Laplace from the OS's CSPRNG, immune to the
    # floating-point attack; see StabilityReleaser). The baselines always draw float noise.
    releaser_noise: Literal["seeded", "secure"] = "seeded"
    # which public inputs are queried: "first" (pool order) or "student-confidence" (rounds chosen
    # from public data and released labels; see pate_stab.selection)
    query_selection: str = "first"
    selection_round_size: int = 20  # student-confidence: first round's size and smallest round
    # student
    student_model: Literal["logistic", "mlp", "cnn"] = "mlp"
    student_hidden: tuple[int, ...] = (64,)
    student_channels: tuple[int, int] = (64, 128)  # CNN student only
    student_epochs: int = 30
    student_batch_size: int = 32
    student_lr: float = 3e-3
    bottom: Literal["drop", "random"] = "drop"
    pseudo_label_rounds: int = 0
    pseudo_label_threshold: float = 0.95
    # execution
    accelerator: str = "auto"
    progress: bool = False
    stop_after: Literal["teachers", "release"] | None = None

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose from {', '.join(DATASETS)}")
        if self.aggregator not in AGGREGATORS:
            raise ValueError(f"unknown aggregator {self.aggregator!r}; choose from {', '.join(AGGREGATORS)}")
        if self.threat_model not in THREAT_MODELS:
            raise ValueError(f"threat_model must be one of {', '.join(THREAT_MODELS)}, got {self.threat_model!r}")
        if self.calibration not in ("paper", "tight"):
            raise ValueError(f"calibration must be 'paper' or 'tight', got {self.calibration!r}")
        if self.releaser_noise not in NOISE_MODES:
            raise ValueError(f"releaser_noise must be one of {', '.join(NOISE_MODES)}, got {self.releaser_noise!r}")
        if self.neighbouring not in NEIGHBOURING_RELATIONS:
            choices = ", ".join(NEIGHBOURING_RELATIONS)
            raise ValueError(f"neighbouring must be one of {choices}, got {self.neighbouring!r}")
        if self.partition_key not in PARTITION_KEYS:
            raise ValueError(f"partition_key must be one of {', '.join(PARTITION_KEYS)}, got {self.partition_key!r}")
        if self.features not in ("raw", "pca"):
            raise ValueError(f"features must be 'raw' or 'pca', got {self.features!r}")
        if self.stop_after not in (None, "teachers", "release"):
            raise ValueError(f"stop_after must be None, 'teachers' or 'release', got {self.stop_after!r}")
        if not self.run_name or "/" in self.run_name or self.run_name in (".", ".."):
            raise ValueError(f"run_name must be a plain folder name, got {self.run_name!r}")
        check_query_selection(self.query_selection)
        for name in ("num_teachers", "num_queries", "max_unstable", "pca_dim", "selection_round_size"):
            if not isinstance(getattr(self, name), int) or getattr(self, name) < 1:
                raise ValueError(f"{name} must be a positive integer, got {getattr(self, name)!r}")
        for name in ("epsilon", "delta"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        if self.delta >= 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta}")
        for name in _WIDTH_FIELDS:
            widths = tuple(int(h) for h in getattr(self, name))
            if any(h < 1 for h in widths) or (name.endswith("channels") and len(widths) != 2):
                what = "two positive integers" if name.endswith("channels") else "positive integers"
                raise ValueError(f"{name} must be {what}, got {widths}")
            object.__setattr__(self, name, widths)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TransferConfig:
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown configuration keys: {', '.join(unknown)}")
        return cls(**data)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for name in _WIDTH_FIELDS:
            d[name] = list(getattr(self, name))
        return d

    @property
    def run_dir(self) -> Path:
        return Path(self.checkpoints_dir) / self.run_name

    @property
    def teachers_changed(self) -> int:
        """Teachers one neighbouring data set can change (DESIGN.md fact 1).

        Add/remove one record changes one shard with either key. Replace-one changes one shard
        when the key is a record id (the replacement keeps it) and up to two under content keys
        (the replacement may hash elsewhere); the aggregators then use group privacy over two
        teachers (:func:`~pate_stab.aggregation.votes.distance_to_instability` with
        ``group_size=2``, doubled sensitivities for the PATE baselines).
        """
        return 2 if (self.neighbouring, self.partition_key) == ("replace_one", "content") else 1

    def privacy_relation(self) -> dict[str, Any]:
        """The guarantee's relation, as the report and the ledger state it."""
        return {
            "neighbouring": self.neighbouring,
            "partition_key": self.partition_key,
            "partition_key_description": PARTITION_KEYS[self.partition_key],
            "teachers_changed_per_neighbour": self.teachers_changed,
        }


# --------------------------------------------------------------------------- data


@dataclass
class Task:
    """Inputs are already in the teachers' feature space; labels of ``public_y`` are for reporting."""

    private_x: Tensor
    private_y: Tensor
    public_x: Tensor
    public_y: Tensor
    eval_x: Tensor
    eval_y: Tensor
    num_classes: int
    threat_model: str
    feature_map: dict[str, Any] = field(default_factory=dict)


def _require_dir(config: TransferConfig) -> Path:
    if config.data_dir is None:
        raise FileNotFoundError(f"dataset {config.dataset!r} needs a data directory (data_dir / --data-dir)")
    path = Path(config.data_dir)
    if not path.is_dir() and not config.download:
        raise FileNotFoundError(f"data directory {path} does not exist")
    return path


def _raw_splits(config: TransferConfig, generator: torch.Generator) -> tuple[list[Tensor], int]:
    """(private_x, private_y, public_x, public_y, eval_x, eval_y), num_classes; public-pool scenario."""
    if config.dataset == "synthetic":
        n = config.num_private + config.num_public + config.num_eval
        x, y = make_gaussian_mixture(
            n,
            num_classes=config.num_classes,
            dim=config.dim,
            separation=config.separation,
            noise_rate=config.label_noise,
            generator=generator,
        )
        a, b = config.num_private, config.num_private + config.num_public
        return [x[:a], y[:a], x[a:b], y[a:b], x[b:], y[b:]], config.num_classes
    path = _require_dir(config)
    if config.dataset == "adult":
        data = load_adult(path, standardize=False, norm=None)
        n_train = 32561  # adult.data rows; adult.test follows (official split)
        test_x, test_y = data.x[n_train:], data.y[n_train:]
        half = test_x.shape[0] // 2
        return [data.x[:n_train], data.y[:n_train], test_x[:half], test_y[:half], test_x[half:], test_y[half:]], 2
    loader = {"mnist": load_mnist, "fashion_mnist": load_fashion_mnist, "svhn": load_svhn, "cifar10": load_cifar10}
    splits = pate_split(loader[config.dataset](path, download=config.download))
    s = splits
    return [s.private.x, s.private.y, s.public.x, s.public.y, s.evaluation.x, s.evaluation.y], splits.num_classes


def load_task(config: TransferConfig, *, generator: torch.Generator) -> Task:
    """The three splits in the teachers' input space (features fitted on public data only).

    Raises:
        FileNotFoundError: missing data directory or files.
    """
    (px, py, ux, uy, ex, ey), num_classes = _raw_splits(config, generator)
    if config.threat_model == "label-only":
        # BTT18 §4.2 (ii): no public pool; discard the labels of part of the training set
        n_pool = min(config.label_only_pool, px.shape[0] - config.num_teachers)
        if n_pool < 1:
            raise ValueError("label_only_pool leaves no records for the teachers")
        pool, keep = random_split_indices(px.shape[0], [n_pool, px.shape[0] - n_pool], generator=generator)
        ux, uy, px, py = px[pool], py[pool], px[keep], py[keep]
    feature_map: dict[str, Any] = {"kind": config.features}
    if config.dataset == "adult":
        # z-scores with statistics of the public pool only (never of the private part)
        mean, std = ux.mean(0), ux.std(0)
        px, ux, ex = (standardize(t, mean=mean, std=std) for t in (px, ux, ex))
        feature_map["standardized_on"] = "public pool"
    if config.features == "pca":
        feats = PublicFeatures.fit(ux, dim=config.pca_dim, whiten=config.whiten)  # public pool only
        px, ux, ex = feats.transform(px), feats.transform(ux), feats.transform(ex)
        feature_map.update(feats.meta)
        feature_map["state"] = feats.state_dict()
    elif config.teacher_model != "cnn":
        px, ux, ex = px.flatten(1), ux.flatten(1), ex.flatten(1)
    return Task(px, py, ux, uy, ex, ey, num_classes, config.threat_model, feature_map)


# --------------------------------------------------------------------------- stability requirement


def stability_requirement(
    *,
    epsilon: float,
    delta: float,
    num_queries: int,
    max_unstable: int,
    mode: str,
    soft_labels: bool,
    teachers_changed: int = 1,
) -> tuple[Calibration, int]:
    """The calibration and the k a unanimous vote needs to be answered w.p. 0.95."""
    cal = calibrate(
        epsilon=epsilon,
        delta=delta,
        num_queries=num_queries,
        max_unstable=max_unstable,
        mode=mode,  # type: ignore[arg-type]
        soft_labels=soft_labels,
    )
    return cal, teachers_for_unanimous_answer(cal, teachers_changed=teachers_changed)


def epsilon_needed(
    *,
    num_teachers: int,
    delta: float,
    num_queries: int,
    max_unstable: int,
    mode: str,
    soft_labels: bool,
    teachers_changed: int = 1,
) -> float:
    """Smallest ε (to 1 %) at which ``num_teachers`` unanimous teachers are answered w.p. 0.95."""

    def ok(eps: float) -> bool:
        return (
            stability_requirement(
                epsilon=eps,
                delta=delta,
                num_queries=num_queries,
                max_unstable=max_unstable,
                mode=mode,
                soft_labels=soft_labels,
                teachers_changed=teachers_changed,
            )[1]
            <= num_teachers
        )

    lo, hi = 0.01, 1.0
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > 1e4:
            return math.inf
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return hi


def check_answerable(config: TransferConfig, num_classes: int) -> dict[str, Any] | None:
    """For the stability releasers: raise :class:`BudgetTooSmallError` if a unanimous vote of
    the run's k teachers would not be answered; return the requirement otherwise."""
    if not config.aggregator.startswith("stability"):
        return None
    soft = config.aggregator == "stability-soft"
    if soft and num_classes != 2:
        raise ValueError("the soft-label releaser (BTT18 Alg 6/8) needs a binary task")
    _, need = stability_requirement(
        epsilon=config.epsilon,
        delta=config.delta,
        num_queries=config.num_queries,
        max_unstable=config.max_unstable,
        mode=config.calibration,
        soft_labels=soft,
        teachers_changed=config.teachers_changed,
    )
    info = {"teachers_needed_for_unanimous_answer": need}
    if need > config.num_teachers and not config.allow_unanswerable:
        eps = epsilon_needed(
            num_teachers=config.num_teachers,
            delta=config.delta,
            num_queries=config.num_queries,
            max_unstable=config.max_unstable,
            mode=config.calibration,
            soft_labels=soft,
            teachers_changed=config.teachers_changed,
        )
        raise BudgetTooSmallError(
            f"budget too small to answer anything: with ε={config.epsilon:g}, δ={config.delta:g}, "
            f"T={config.max_unstable}, m={config.num_queries} ({config.calibration} calibration) the "
            f"releaser needs about k={need} teachers for a unanimous vote to be answered; you have "
            f"k={config.num_teachers}. Use more teachers, or ε ≥ {eps:.3g} with k={config.num_teachers}, "
            "or a smaller T or m (or --allow-unanswerable to run anyway)."
        )
    return info


# --------------------------------------------------------------------------- teachers and votes


@dataclass
class Prepared:
    """Everything up to the teachers; reused by every release of a run.

    ``votes`` computes the teachers' votes on a public pool point only when a release asks for
    it (:class:`~pate_stab.teachers.PoolVotes`).
    """

    config: TransferConfig
    run_dir: Path
    task: Task
    teachers: TeacherEnsemble
    votes: PoolVotes
    timings: dict[str, float]
    resumed_teachers: bool
    generators: dict[str, torch.Generator]


def _check_run_dir(config: TransferConfig, run_dir: Path) -> None:
    path = run_dir / "config.json"
    mine = {k: v for k, v in config.to_dict().items() if k not in _NOT_IDENTITY}
    if path.is_file():
        saved = json.loads(path.read_text())
        # a key added to TransferConfig after the folder was made had its default value then
        defaults = TransferConfig().to_dict()
        saved = {k: saved.get(k, defaults[k]) for k in defaults if k not in _NOT_IDENTITY} | {
            k: v for k, v in saved.items() if k not in _NOT_IDENTITY and k not in defaults
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
    names = ("data", "partition", "teachers", "release", "student", "bottom", "selection")
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

    t0 = time.perf_counter()
    if config.partition_key == "record_id":
        keys: Any = torch.arange(task.private_x.shape[0], dtype=torch.int64)
    else:
        keys = record_keys_from_tensors(task.private_x, task.private_y)
    shards = partition_indices(keys, config.num_teachers, generator=gens["partition"])
    timings["partition"] = time.perf_counter() - t0

    t0 = time.perf_counter()
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
    votes = PoolVotes(teachers, task.public_x, task.num_classes)
    return Prepared(config, run_dir, task, teachers, votes, timings, resumed, gens)


# --------------------------------------------------------------------------- release


@dataclass
class Release:
    """One aggregator's output on its queries: labels (int64, −1 ⊥) or scores (float, NaN ⊥).

    ``index`` holds the queries' positions in the public pool, in release order (``labels[i]``
    belongs to pool point ``index[i]``); ``selection`` says how they were chosen.
    """

    aggregator: str
    labels: Tensor
    soft: bool
    summary: dict[str, Any]
    spend_id: str
    reused: bool
    index: Tensor
    selection: dict[str, Any]


def _make_aggregator(name: str, config: TransferConfig, epsilon: float, m: int, k: int, soft: bool) -> Any:
    return make_aggregator(
        name,
        epsilon=epsilon,
        delta=config.delta,
        num_queries=m,
        num_teachers=k,
        max_unstable=config.max_unstable,
        mode=config.calibration,
        soft_labels=soft,
        confident_threshold=config.confident_threshold * k,
        sigma_ratio=config.sigma_ratio,
        teachers_changed=config.teachers_changed,
    )


def _replay(prep: Prepared, aggregator: str, soft: bool, spend_id: str, payload: dict[str, Any]) -> Release:
    """The release recorded with ``spend_id``: labels, summary and which pool points they label."""
    if soft:
        labels = torch.tensor([math.nan if v is None else v for v in payload["labels"]], dtype=torch.float64)
    else:
        labels = torch.tensor(payload["labels"], dtype=torch.int64)
    # a release recorded before query selection existed queried the pool in order
    selection = payload.get("selection", {"strategy": "first"})
    if selection["strategy"] != prep.config.query_selection:
        raise ValueError(
            f"{spend_id} was released with query_selection={selection['strategy']!r}, "
            f"not {prep.config.query_selection!r}"
        )
    index = torch.tensor(selection["index"], dtype=torch.int64) if "index" in selection else torch.arange(len(labels))
    return Release(aggregator, labels, soft, payload["summary"], spend_id, True, index, selection)


def _student_spec(config: TransferConfig, task: Task) -> ModelSpec:
    return ModelSpec(
        config.student_model,
        tuple(task.public_x.shape[1:]),
        task.num_classes,
        hidden=config.student_hidden,
        channels=config.student_channels,
    )


def _student_config(config: TransferConfig, *, pseudo_labels: bool) -> StudentConfig:
    return StudentConfig(
        epochs=config.student_epochs,
        batch_size=config.student_batch_size,
        lr=config.student_lr,
        pseudo_label_rounds=config.pseudo_label_rounds if pseudo_labels else 0,
        pseudo_label_threshold=config.pseudo_label_threshold,
    )


def _targets(
    labels: Tensor, *, soft: bool, num_classes: int, bottom: str, generator: torch.Generator | None
) -> StudentTargets:
    if soft:
        return soft_targets(labels, bottom=bottom, generator=generator)  # type: ignore[arg-type]
    return hard_targets(labels, num_classes=num_classes, bottom=bottom, generator=generator)  # type: ignore[arg-type]


def _confidence(prep: Prepared, generator: torch.Generator) -> ConfidenceFn:
    """The selector of ``"student-confidence"``: the student's architecture, fitted on the answered
    queries (⊥ dropped) and their released labels, scores the candidate pool points.

    It trains with the student's hyper-parameters, but for at least ``SELECTOR_MIN_STEPS``
    optimiser steps (a few dozen labels make one batch per epoch). Post-processing: public
    inputs and released outputs only; no pseudo-labelling.
    """
    config, task = prep.config, prep.task
    spec = _student_spec(config, task)
    base = _student_config(config, pseudo_labels=False)

    def confidence(index: Tensor, labels: Tensor, candidates: Tensor) -> Tensor:
        targets = _targets(
            labels, soft=labels.is_floating_point(), num_classes=task.num_classes, bottom="drop", generator=None
        )
        batches = math.ceil(targets.index.numel() / base.batch_size)
        cheap = replace(base, epochs=max(base.epochs, math.ceil(SELECTOR_MIN_STEPS / batches)))
        model = train_student(
            task.public_x[index],
            targets,
            spec=spec,
            config=cheap,
            generator=generator,
            accelerator=config.accelerator,
            progress_bar=False,
        )
        return model.predict_proba(task.public_x[candidates])  # (n_candidates, C)

    return confidence


def release_labels(
    prep: Prepared,
    ledger: PrivacyLedger,
    *,
    aggregator: str,
    epsilon: float,
    generator: torch.Generator,
    selection_generator: torch.Generator | None = None,
) -> Release:
    """Run one aggregator on the run's queries, spending through ``ledger`` (or reuse its record).

    The queries are chosen by ``config.query_selection`` (:func:`pate_stab.selection.release_in_rounds`):
    one aggregator instance, one calibrated spend for ``num_queries`` queries, however many rounds.
    The teachers' votes on a pool point are computed (``prep.votes``) only inside the release
    call that hands the point to the aggregator, so selection never sees the votes of a point
    it has not had released.

    The spend id is ``<run>:<aggregator>:eps=<ε>``; the released labels — with the queried pool
    positions and the rounds when selection is on — are stored with the spend (``record_result``)
    before they are returned, so a rerun reuses them: no fresh selection or noise, no second spend.

    Args:
        selection_generator: randomness of the selection (k-means start, selector training);
            required unless ``query_selection == "first"``.
    """
    config = prep.config
    soft = aggregator == "stability-soft"
    if soft and prep.task.num_classes != 2:
        raise ValueError("the soft-label releaser needs a binary task")
    spend_id = f"{config.run_name}:{aggregator}:eps={epsilon:g}"
    recorded = {e.spend_id: e for e in ledger.entries()}.get(spend_id)
    if recorded is not None and recorded.has_result:
        return _replay(prep, aggregator, soft, spend_id, recorded.result)
    if config.query_selection != "first" and selection_generator is None:
        raise TypeError(f"query_selection={config.query_selection!r} needs a selection_generator")

    k, m = config.num_teachers, config.num_queries
    votes = prep.votes
    agg = _make_aggregator(aggregator, config, epsilon, m, k, soft)
    # the stability releasers' noise: seeded from ``generator``, or secure (OS randomness)
    secure = config.releaser_noise == "secure"
    noise_kw: dict[str, Any] = {"noise": config.releaser_noise, "generator": None if secure else generator}
    # every aggregator spends through the ledger itself: the spend and each call's outputs are
    # recorded before the outputs leave; a rerun under the same spend id replays them
    rel: StabilityReleaser | SoftLabelReleaser | BaselineReleaser
    if aggregator == "stability":
        rel = StabilityReleaser(
            agg, ledger=ledger, spend_id=spend_id, teachers_changed=config.teachers_changed, **noise_kw
        )
    elif soft:
        rel = SoftLabelReleaser(
            agg, gamma=config.gamma, ledger=ledger, spend_id=spend_id, teachers_changed=config.teachers_changed,
            **noise_kw,
        )  # fmt: skip
    else:
        rel = BaselineReleaser(agg, generator=generator, ledger=ledger, spend_id=spend_id)

    def release(index: Tensor) -> Tensor:
        return rel.release(votes.scores(index) if soft else votes.histograms(index)).labels

    halted, summarize = (lambda: rel.halted), rel.summary
    selected = release_in_rounds(
        prep.task.public_x,
        num_queries=m,
        strategy=config.query_selection,
        release=release,
        halted=halted,
        confidence=None if selection_generator is None else _confidence(prep, selection_generator),
        round_size=config.selection_round_size,
        max_unstable=config.max_unstable if aggregator.startswith("stability") else None,  # the baselines never halt
        generator=selection_generator,
    )
    labels, offered = selected.labels, int(selected.index.numel())
    summary = summarize()
    if soft:
        summary["answered"] = summary["answered_plain"] + summary["answered_shifted"]
    if aggregator.startswith("stability"):
        summary["calibration_detail"] = agg.to_dict()
    # offered = asked; of those, the ones the releaser processed and refused are ⊥, and the
    # ones it never processed (after halting) were not asked
    if soft:  # the soft releaser counts the queries it processed as answered (plain or ½-shifted) or ⊥
        seen = int(summary["answered"]) + int(summary["abstained"])
    else:
        seen = int(summary.get("queries_seen", offered))
    summary["queries_seen"] = seen
    summary["abstained"] = seen - int(summary["answered"])
    summary["not_asked"] = offered - seen
    selection: dict[str, Any] = {"strategy": config.query_selection, "offered": offered, "rounds": selected.rounds}
    if config.query_selection != "first":
        selection["round_size"] = config.selection_round_size
        selection["index"] = selected.index.tolist()
    stored = [None if math.isnan(v) else v for v in labels.tolist()] if soft else labels.tolist()
    ledger.record_result(spend_id, {"labels": stored, "summary": summary, "selection": selection})
    return Release(aggregator, labels, soft, summary, spend_id, False, selected.index, selection)


def _noise_report(summary: dict[str, Any]) -> dict[str, Any]:
    """The release's noise: seeded floats, or secure with the integer threshold and exact λ' used."""
    if summary.get("noise") != "secure":
        return {"noise": "seeded"}
    return {key: summary[key] for key in ("noise", "threshold", "noise_scale_exact")}


def selection_report(release: Release) -> dict[str, Any]:
    """How the release's queries were chosen (the pool positions stay in the ledger)."""
    return {**{k: v for k, v in release.selection.items() if k != "index"}, "privacy": SELECTION_PRIVACY}


def label_accuracy(release: Release, truth: Tensor) -> tuple[float | None, float]:
    """Accuracy on answered queries (None if none) and over all queries (⊥ counts as wrong).

    ``truth`` holds the true labels of the release's queries, in release order
    (``task.public_y[release.index]``; for evaluation only).
    """
    if release.soft:
        answered = ~torch.isnan(release.labels)
        guess = (release.labels >= 0.5).long()
    else:
        answered = release.labels != -1
        guess = release.labels
    correct = (guess == truth) & answered
    n = int(answered.sum())
    return (float(correct.sum()) / n if n else None), float(correct.sum()) / max(truth.numel(), 1)


# --------------------------------------------------------------------------- student


def fit_student(prep: Prepared, release: Release, *, generator: torch.Generator, bottom_generator: torch.Generator):
    """Train the student on the queried public inputs and their released labels (BTT18 Alg 5).

    Only public tensors are passed on: the queries, the released labels and (semi-supervised
    mode) the unlabelled rest of the public pool: the ⊥ queries, then the pool points never
    queried.
    """
    config, task = prep.config, prep.task
    targets = _targets(
        release.labels,
        soft=release.soft,
        num_classes=task.num_classes,
        bottom=config.bottom,
        generator=bottom_generator,
    )
    query_x = task.public_x[release.index]
    unused = torch.ones(query_x.shape[0], dtype=torch.bool)
    unused[targets.index] = False
    never_queried = torch.ones(task.public_x.shape[0], dtype=torch.bool)
    never_queried[release.index] = False
    unlabelled = torch.cat([query_x[unused], task.public_x[never_queried]])
    spec = _student_spec(config, task)
    student_config = _student_config(config, pseudo_labels=True)
    student = train_student(
        query_x,
        targets,
        spec=spec,
        config=student_config,
        generator=generator,
        unlabelled_x=unlabelled,
        accelerator=config.accelerator,
        progress_bar=config.progress,
    )
    return student, targets


def teacher_accuracies(teachers: TeacherEnsemble, x: Tensor, y: Tensor, num_classes: int) -> tuple[float, float]:
    """Mean teacher accuracy and plurality-vote accuracy (ties to the lowest class) on (x, y)."""
    votes = teachers.predict_votes(x)  # (k, n)
    plurality = vote_histogram(votes, num_classes).argmax(-1)
    return float((votes == y).double().mean()), float((plurality == y).double().mean())


def open_ledger(
    run_dir: Path, *, run_name: str, budget_epsilon: float, budget_delta: float, neighbouring: str
) -> PrivacyLedger:
    """The run's ledger; its header states the neighbouring relation the run's releases hold under."""
    return PrivacyLedger(
        run_dir / "ledger.jsonl",
        budget_epsilon=budget_epsilon,
        budget_delta=budget_delta,
        run_id=run_name,
        neighbouring=neighbouring,
    )


# --------------------------------------------------------------------------- the main job


def _clean(value: Any) -> Any:
    """JSON-safe: NaN/inf → None, tuples → lists, tensors → lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    if isinstance(value, Tensor):
        return _clean(value.tolist())
    return value


def run_transfer(config: TransferConfig) -> dict[str, Any]:
    """Run (or resume) one transfer and return its report (also written to ``report.json``).

    Raises:
        BudgetTooSmallError: the stability releaser would answer nothing (before any training).
        FileNotFoundError: data directory or files missing.
        ValueError: bad configuration, or a run folder made with another configuration.
    """
    start = time.perf_counter()
    prep = prepare(config)
    report: dict[str, Any] = {"run": config.run_name, "run_dir": str(prep.run_dir), "status": "teachers trained"}
    if config.stop_after == "teachers":
        return report
    ledger = open_ledger(
        prep.run_dir,
        run_name=config.run_name,
        budget_epsilon=config.epsilon,
        budget_delta=config.delta,
        neighbouring=config.neighbouring,
    )
    try:
        t0 = time.perf_counter()
        release = release_labels(
            prep,
            ledger,
            aggregator=config.aggregator,
            epsilon=config.epsilon,
            generator=prep.generators["release"],
            selection_generator=prep.generators["selection"],
        )
        prep.timings["release"] = time.perf_counter() - t0
        prep.timings["votes"] = prep.votes.seconds  # part of the release time
        if config.stop_after == "release":
            report["status"] = "released"
            return report
        t0 = time.perf_counter()
        student, targets = fit_student(
            prep, release, generator=prep.generators["student"], bottom_generator=prep.generators["bottom"]
        )
        torch.save(student.state_dict(), prep.run_dir / "student.pt")
        prep.timings["student"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        task = prep.task
        acc_answered, acc_all = label_accuracy(release, task.public_y[release.index])
        teacher_mean, plurality = teacher_accuracies(prep.teachers, task.eval_x, task.eval_y, task.num_classes)
        student_acc = student.accuracy(task.eval_x, task.eval_y)
        prep.timings["evaluation"] = time.perf_counter() - t0
        s = release.summary
        report = {
            "run": config.run_name,
            "run_dir": str(prep.run_dir),
            "status": "complete",
            "dataset": config.dataset,
            "threat_model": {"name": task.threat_model, "description": THREAT_MODELS[task.threat_model]},
            "num_classes": task.num_classes,
            "sizes": {
                "private": int(task.private_x.shape[0]),
                "public_pool": int(task.public_x.shape[0]),
                "evaluation": int(task.eval_x.shape[0]),
            },
            "features": {k: v for k, v in task.feature_map.items() if k != "state"},
            "num_teachers": config.num_teachers,
            "teacher_model": {**prep.teachers.spec.to_dict(), "train": prep.teachers.config.get("train")},
            "aggregator": config.aggregator,
            "calibration": s.get(
                "calibration_detail", {k: v for k, v in s.items() if k not in ("queries_seen", "answered", "abstained")}
            ),
            "noise": _noise_report(s),
            "target_epsilon": config.epsilon,
            "target_delta": config.delta,
            "epsilon": s["epsilon"],
            "delta": s["delta"],
            "queries": {
                "seen": int(s.get("queries_seen", config.num_queries)),
                "answered": int(s["answered"]),
                "abstained": int(s["abstained"]),
                "not_asked": int(s.get("not_asked", 0)),
                "halted": bool(s.get("halted", False)),
            },
            "privacy": config.privacy_relation(),
            "query_selection": selection_report(release),
            "label_accuracy_answered": acc_answered,
            "label_accuracy_all_queries": acc_all,
            "student": {
                "model": student.spec.to_dict(),
                "config": student.config.to_dict(),
                "bottom": config.bottom,
                "trained_on": int(targets.index.numel()),
                "history": student.history,
                "test_accuracy": student_acc,
            },
            "teachers": {
                "mean_accuracy": teacher_mean,
                "plurality_accuracy": plurality,
                "evaluated_on": "evaluation split",
            },
            "wall_time_s": {**prep.timings, "total": time.perf_counter() - start},
            "resumed": {"teachers": prep.resumed_teachers, "release": release.reused},
            "ledger": {**ledger.report(), "spend_id": release.spend_id},
            "seed": config.seed,
        }
        report = _clean(report)
        (prep.run_dir / "report.json").write_text(json.dumps(report, indent=2, sort_keys=True))
        return report
    finally:
        ledger.close()
