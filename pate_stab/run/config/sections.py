"""The sections of a run's configuration, one per stage: each a frozen dataclass holding its
settings (with what each means) and checking them on construction.

:class:`pate_stab.run.config.TransferConfig` is made of these sections (``config.release.epsilon``)
and checks what spans two of them (CNN teachers need images, label privacy and the threat model,
rounds and the aggregator, …). :data:`SECTIONS` maps each section's name in a recipe YAML to its
class; a setting's name is unique across the sections, so the flat name (``epsilon``) also finds it
(:data:`SECTION_OF`).

How the defaults were chosen (DESIGN.md fact 10; docs/settings.md, "How the settings were chosen"):
``graph_*`` in advance from Iscen et al. 2019 (:class:`GraphSettings`); the privacy settings (ε, δ,
T, m, calibration, relation) state the problem and tune nothing; ``dd_order`` / ``dd_sigma`` are
fixed before any vote; the teacher, selection, student and FixMatch defaults were set for the
synthetic demo when the code was written (FixMatch's τ, μ, λ_u from Sohn et al. 2020) and no record
says how — none may be tuned on pool or evaluation labels: fix them on another public task, or
(selection, student: post-processing) by cross-validation on released labels.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from pate_stab._checks import check_label_relation, check_pca_dim
from pate_stab.run.config.names import (
    ACCELERATORS,
    BOTTOMS,
    CALIBRATIONS,
    DATASETS,
    DIRECT_LEARNER_NAMES,
    FEATURES,
    FIXMATCH_PRESETS,
    LABEL_QUERIES,
    NEIGHBOURING_RELATIONS,
    NOISE_MODES,
    OWN_DATA_FIELDS,
    PARTITION_KEYS,
    PRIVACY_UNIT_DESCRIPTIONS,
    ROUND_FEATURES,
    RUN_AGGREGATORS,
    STOP_AFTER,
    STUDENT_AUGMENTS,
    STUDENT_METHODS,
    STUDENT_MODELS,
    STUDENT_SELECT,
    TEACHER_MODELS,
    THREAT_MODELS,
    Accelerator,
    Aggregator,
    Bottom,
    Calibration,
    Dataset,
    FeatureMap,
    FixmatchPreset,
    LabelQueries,
    Neighbouring,
    NoiseMode,
    PartitionKey,
    PrivacyUnit,
    QuerySelection,
    RoundFeatures,
    SelectionRepresentatives,
    StopAfter,
    StudentAugment,
    StudentMethod,
    StudentModel,
    StudentSelect,
    TeacherModel,
    ThreatModel,
)
from pate_stab.vocabulary import (
    GRAPH_ALPHA,
    GRAPH_NEIGHBORS,
    GRAPH_PCA_DIM,
    GRAPH_POWER,
    GRAPH_STEPS,
    SELECTION_COVERAGE,
    SELECTION_REPRESENTATIVES,
    SELECTION_ROUND_SIZE,
    check_query_selection,
    check_representatives,
)

__all__ = [
    "SECTIONS",
    "SECTION_OF",
    "DataSettings",
    "DirectSettings",
    "ExecutionSettings",
    "FeatureSettings",
    "GraphSettings",
    "ReleaseSettings",
    "RoundSettings",
    "SelectionSettings",
    "StudentSettings",
    "TeacherSettings",
    "check_cap",
]

# tuple settings written as lists by to_dict (JSON and YAML have no tuples)
_LIST_FIELDS = (
    "teacher_hidden", "teacher_channels", "student_hidden", "student_channels", "classes", "image_shape",
    "round_budget_shares",
)  # fmt: skip


class _Section:
    """What every section shares: its setting names, and its settings as a flat dict."""

    @classmethod
    def keys(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)  # type: ignore[call-overload]
        for name in _LIST_FIELDS:
            if isinstance(d.get(name), tuple):
                d[name] = list(d[name])
        return d


def _positive_ints(section: object, *names: str) -> None:
    for name in names:
        if not isinstance(getattr(section, name), int) or getattr(section, name) < 1:
            raise ValueError(f"{name} must be a positive integer, got {getattr(section, name)!r}")


def _optional_positive_int(name: str, value: Any) -> None:
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")


def _widths(section: object, name: str) -> None:
    widths = tuple(int(h) for h in getattr(section, name))
    if any(h < 1 for h in widths) or (name.endswith("channels") and len(widths) != 2):
        what = "two positive integers" if name.endswith("channels") else "positive integers"
        raise ValueError(f"{name} must be {what}, got {widths}")
    object.__setattr__(section, name, widths)


@dataclass(frozen=True)
class DataSettings(_Section):
    """The data set, the threat model, and the synthetic task's or the user's own files."""

    dataset: Dataset = "synthetic"
    data_dir: str | None = None
    download: bool = False
    threat_model: ThreatModel = "public-pool"
    # label-only: the expected share of training records whose labels are discarded; each record's
    # membership is a keyed hash of the record alone (1/6: PATE's 10,000 of MNIST's 60,000)
    label_only_share: float = 1.0 / 6.0
    num_private: int = 20000  # synthetic only
    num_public: int = 2000  # synthetic only; image data sets use PATE's 9,000
    num_eval: int = 2000  # synthetic only
    num_classes: int = 3  # synthetic only
    dim: int = 10  # synthetic only
    separation: float = 4.0  # synthetic only
    label_noise: float = 0.0  # synthetic only
    # dataset "files": the three sets' paths (a file by its suffix: .npz / .pt / .npy / .csv; a
    # folder: images), the CSV's public schema file, the declared classes (a count or names) and
    # the images' (channels, height, width); see pate_stab.data.own
    private: str | None = None
    public: str | None = None
    evaluation: str | None = None
    schema: str | None = None
    classes: int | tuple[str, ...] | None = None
    image_shape: tuple[int, int, int] | None = None
    # the public pool's file holds true labels (a CSV's label column, an .npz's y), declared by the
    # user: read for reporting only (label and pool accuracy). Undeclared, such a file is refused
    pool_labels: bool = False
    # CSV files' text encoding (None: UTF-8, a byte-order mark skipped); see pate_stab.data.table_rows
    encoding: str | None = None

    def __post_init__(self) -> None:
        if self.dataset not in DATASETS:
            raise ValueError(f"unknown dataset {self.dataset!r}; choose from {', '.join(DATASETS)}")
        self._check_own_data()
        if self.threat_model not in THREAT_MODELS:
            raise ValueError(f"threat_model must be one of {', '.join(THREAT_MODELS)}, got {self.threat_model!r}")
        if not (isinstance(self.label_only_share, int | float) and 0.0 < self.label_only_share < 1.0):
            raise ValueError(f"label_only_share must be in (0, 1), got {self.label_only_share!r}")

    def _check_own_data(self) -> None:
        if self.dataset == "files":
            missing = [k for k in ("private", "public") if not getattr(self, k)]
            if missing:
                flags = " ".join(f"--{k}" for k in missing)
                raise ValueError(f"dataset 'files' needs the paths of {' and '.join(missing)} ({flags})")
            if self.threat_model != "public-pool":
                raise ValueError("dataset 'files' brings its own public pool: use threat_model 'public-pool'")
        elif self.dataset != "arrays":
            given = [k for k in OWN_DATA_FIELDS if getattr(self, k) is not None]
            if given:
                raise ValueError(f"{', '.join(given)} apply to dataset 'files' only, not {self.dataset!r}")
        if isinstance(self.classes, list):
            object.__setattr__(self, "classes", tuple(str(c) for c in self.classes))
        if self.image_shape is not None:
            shape = tuple(self.image_shape)
            if len(shape) != 3 or not all(isinstance(v, int) and v > 0 for v in shape):
                raise ValueError(f"image_shape must be three positive integers (channels, height, width), got {shape}")
            object.__setattr__(self, "image_shape", shape)


@dataclass(frozen=True)
class FeatureSettings(_Section):
    """The feature stage (:mod:`pate_stab.features`): fitted on the public pool only, or on nothing."""

    features: FeatureMap = "raw"  # FEATURES
    # pca: components of the inputs; scattering / ssl: of the public projection (of each block's, for
    # scattering+ssl). An int is a count;
    # a float in (0, 1) keeps the fewest components holding that share of the public pool's variance
    pca_dim: int | float = 50
    whiten: bool = True
    scattering_j: int = 2  # scattering scales J (L = 8 angles)
    ssl_epochs: int = 20  # ssl: SimCLR epochs on the public pool

    def __post_init__(self) -> None:
        if self.features not in FEATURES:
            raise ValueError(f"features must be one of {', '.join(FEATURES)}, got {self.features!r}")
        _positive_ints(self, "scattering_j", "ssl_epochs")
        check_pca_dim("pca_dim", self.pca_dim)


@dataclass(frozen=True)
class TeacherSettings(_Section):
    """The teachers: how many, which model, and how each is trained on its shard."""

    num_teachers: int = 250
    # "propagate": label propagation over a kNN graph of the public pool's features (no training;
    # pate_stab.teachers.PropagationTeachers); the graph section applies to it only
    teacher_model: TeacherModel = "logistic"
    teacher_hidden: tuple[int, ...] = (64,)  # MLP widths, or the CNN's fully connected widths
    teacher_channels: tuple[int, int] = (64, 128)  # CNN only: the two convolution widths (PATE's)
    # None: sized in optimiser steps (pate_stab.teachers.training.teacher_epochs); a number is used as
    # given, with a ShortScheduleWarning when some teacher would make fewer than DEFAULT_MIN_STEPS steps
    teacher_epochs: int | None = None
    teacher_batch_size: int = 8
    teacher_lr: float = 1e-2
    teacher_weight_decay: float = 1e-3
    # label privacy, logistic / mlp teachers: rounds of self-training on every private and public input
    # (pate_stab.teachers.self_training: each teacher pseudo-labels them with its own predictions at least
    # this confident, keeps its shard's labels, and is refitted; one changed label still moves one teacher).
    # 0: none. The threshold is FixMatch's τ = 0.95 (Sohn et al. 2020), fixed in advance
    teacher_self_training_rounds: int = 0
    teacher_self_training_threshold: float = 0.95

    def __post_init__(self) -> None:
        if self.teacher_model not in TEACHER_MODELS:
            raise ValueError(f"teacher_model must be one of {', '.join(TEACHER_MODELS)}, got {self.teacher_model!r}")
        _positive_ints(self, "num_teachers")
        r = self.teacher_self_training_rounds
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ValueError(f"teacher_self_training_rounds must be a nonnegative integer, got {r!r}")
        t = self.teacher_self_training_threshold
        if not isinstance(t, int | float) or isinstance(t, bool) or not (0 < t <= 1):
            raise ValueError(f"teacher_self_training_threshold must lie in (0, 1], got {t!r}")
        _widths(self, "teacher_hidden")
        _widths(self, "teacher_channels")


@dataclass(frozen=True)
class GraphSettings(_Section):
    """The kNN graph of the propagation teachers, of spread selection and of the spread student.

    Fixed in advance from Iscen, Tolias, Avrithis & Chum (2019), "Label propagation for deep
    semi-supervised learning" (CVPR; the affinity max(cos, 0)^γ is theirs), as their public code
    (LP-DeepSSL, update_plabels) runs it: k = 50 neighbours, γ = 3, α = 0.99 (also Zhou et al.
    2004's α), 20 iterations of the solver (here: 20 terms of the series, the same number of sparse
    products), the graph on the features as they are (no extra PCA). No label of the pool or the
    evaluation split chose them. Their defaults and the selection section's round size and coverage
    are :mod:`pate_stab.vocabulary`'s: one place for the main job and ``release --votes``
    (:data:`pate_stab.selection.spread.SPREAD_DEFAULTS`).
    """

    graph_neighbors: int = GRAPH_NEIGHBORS  # kNN graph degree
    graph_power: float = GRAPH_POWER  # affinity exponent γ in max(cos, 0)^γ
    graph_alpha: float = GRAPH_ALPHA  # propagation weight α in [0, 1)
    graph_steps: int = GRAPH_STEPS  # terms of the series Σ (αS)^t
    graph_pca_dim: int | None = GRAPH_PCA_DIM  # public PCA of the features first (None: none)

    def __post_init__(self) -> None:
        _positive_ints(self, "graph_neighbors")
        if not isinstance(self.graph_steps, int) or self.graph_steps < 0:
            raise ValueError(f"graph_steps must be a nonnegative integer, got {self.graph_steps!r}")
        if self.graph_pca_dim is not None and (not isinstance(self.graph_pca_dim, int) or self.graph_pca_dim < 1):
            raise ValueError(f"graph_pca_dim must be a positive integer or None, got {self.graph_pca_dim!r}")
        p, a = self.graph_power, self.graph_alpha
        if not isinstance(p, int | float) or not math.isfinite(p) or p <= 0:
            raise ValueError(f"graph_power must be a positive finite number, got {p!r}")
        if not isinstance(a, int | float) or not (0 <= a < 1):
            raise ValueError(f"graph_alpha must lie in [0, 1), got {a!r}")


@dataclass(frozen=True)
class ReleaseSettings(_Section):
    """The private release: the aggregator, its budget and queries, and the relation it is stated for."""

    aggregator: Aggregator = "stability"  # RUN_AGGREGATORS, or a direct learner (DIRECT_LEARNER_NAMES)
    epsilon: float = 8.0
    delta: float = 1e-5
    max_unstable: int = 10
    num_queries: int = 500
    calibration: Calibration = "tight"
    gamma: float = 0.1  # soft labels
    confident_threshold: float = 0.6  # Confident-GNMax threshold as a fraction of k
    sigma_ratio: float = 2.0  # Confident-GNMax σ1/σ2 (also confident-private-knn's)
    # private-knn / confident-private-knn: each record's probability of being in a query's Poisson sample
    # (Zhu et al. 2020's MNIST γ, ``prob = 0.05`` in their digit_pytorch/knn.py); K is teachers.num_teachers
    knn_sampling_rate: float = 0.05
    allow_unanswerable: bool = False
    # the run folder's budget cap (DESIGN.md fact 12; pate_stab.run.report.open_ledger): the first run
    # records it in the ledger (None: that run's own total); a rerun may lower it, never raise it, and
    # a plan that does not fit is refused before any noise is drawn. Not part of the run's identity.
    budget_epsilon: float | None = None
    budget_delta: float | None = None
    # every aggregator's noise: "secure" (exact discrete Laplace / Gaussian from the OS's CSPRNG,
    # immune to the floating-point attack) or "seeded" (float noise from the run's seed, which
    # config.json publishes: reproducible research only, no privacy against anyone who knows it).
    # Part of the run's identity: a rerun with the other mode is refused.
    releaser_noise: NoiseMode = "secure"
    # the neighbouring relation the run's guarantee is stated for, and the partition key (see
    # TransferConfig.teachers_changed): content keys + replace_one need group privacy over two teachers.
    # A user's CSV schema that declares an id_column makes record_id the default (TransferConfig.__init__)
    neighbouring: Neighbouring = "add_remove"
    partition_key: PartitionKey = "content"
    # the privacy unit (DESIGN.md fact 13; docs/label_privacy.md): "record" (a record's inputs and label) or
    # "label" (label differential privacy: the private inputs are public, one changed label is the neighbour).
    # Under "label" the relation is replace-one of a label (``neighbouring: replace_one``, required), content
    # keys hash the inputs only (a changed label keeps its shard: one teacher moves), the features and the
    # propagation teachers' graph are fitted on the private and public inputs, and ``label_queries`` may ask
    # about the private inputs. Part of the run's identity and of its ledger's relation.
    privacy_unit: PrivacyUnit = "record"
    # label privacy only: what the releaser is asked about (LABEL_QUERIES): "pool" (the public pool),
    # "private" (the private inputs) or "both" (the private inputs, then the public pool)
    label_queries: LabelQueries = "pool"
    # PATE's data-dependent ε of the baselines, reported beside the enforced data-independent ε:
    # the smooth-sensitivity sanitisation's Rényi order and noise multiplier, fixed before any vote
    dd_order: float = 10.0
    dd_sigma: float = 5.0

    def __post_init__(self) -> None:
        if self.aggregator not in RUN_AGGREGATORS + DIRECT_LEARNER_NAMES:
            choices = ", ".join(RUN_AGGREGATORS + DIRECT_LEARNER_NAMES)
            raise ValueError(f"unknown aggregator {self.aggregator!r}; choose from {choices}")
        if self.calibration not in CALIBRATIONS:
            raise ValueError(f"calibration must be 'paper' or 'tight', got {self.calibration!r}")
        if self.releaser_noise not in NOISE_MODES:
            raise ValueError(f"releaser_noise must be one of {', '.join(NOISE_MODES)}, got {self.releaser_noise!r}")
        if self.neighbouring not in NEIGHBOURING_RELATIONS:
            choices = ", ".join(NEIGHBOURING_RELATIONS)
            raise ValueError(f"neighbouring must be one of {choices}, got {self.neighbouring!r}")
        check_cap(self.budget_epsilon, self.budget_delta)
        self._check_privacy_unit()
        if self.partition_key not in PARTITION_KEYS:
            raise ValueError(f"partition_key must be one of {', '.join(PARTITION_KEYS)}, got {self.partition_key!r}")
        _positive_ints(self, "num_queries", "max_unstable")
        for name in ("epsilon", "delta", "dd_sigma"):
            v = getattr(self, name)
            if not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"{name} must be a positive finite number, got {v!r}")
        if self.delta >= 1:
            raise ValueError(f"delta must lie in (0, 1), got {self.delta}")
        rate = self.knn_sampling_rate
        if not isinstance(rate, int | float) or isinstance(rate, bool) or not 0 < rate <= 1:
            raise ValueError(f"knn_sampling_rate must lie in (0, 1], got {rate!r}")
        if not isinstance(self.dd_order, int | float) or not math.isfinite(self.dd_order) or self.dd_order <= 1:
            raise ValueError(f"dd_order must be a Rényi order > 1, got {self.dd_order!r}")

    def _check_privacy_unit(self) -> None:
        if self.privacy_unit not in PRIVACY_UNIT_DESCRIPTIONS:
            choices = ", ".join(PRIVACY_UNIT_DESCRIPTIONS)
            raise ValueError(f"privacy_unit must be one of {choices}, got {self.privacy_unit!r}")
        if self.label_queries not in LABEL_QUERIES:
            raise ValueError(f"label_queries must be one of {', '.join(LABEL_QUERIES)}, got {self.label_queries!r}")
        if self.privacy_unit == "record":
            if self.label_queries != "pool":
                raise ValueError(
                    f"label_queries={self.label_queries!r} asks about the private inputs, which record privacy "
                    "protects: use privacy_unit: label (the inputs are then public) or label_queries: pool"
                )
            return
        check_label_relation(self.privacy_unit, self.neighbouring)  # the one rule of every entry point


@dataclass(frozen=True)
class SelectionSettings(_Section):
    """Which public inputs are queried, in which order (:mod:`pate_stab.selection`)."""

    # "first" (pool order), "student-confidence" (rounds chosen by a student fitted on the labels
    # released so far) or "spread" (the released labels and ⊥ spread over the pool graph, class by
    # class, with a share of each round for confident points not yet covered): all from public data
    # and released labels (post-processing)
    query_selection: QuerySelection = "first"
    # student-confidence / spread: first round's size and smallest round
    selection_round_size: int = SELECTION_ROUND_SIZE
    # spread: share of each round for confident, not yet covered points
    selection_coverage: float = SELECTION_COVERAGE
    # student-confidence / spread: which member stands for a k-means cluster in round 0 and class
    # discovery, "centroid" (nearest the centroid) or "dense" (the cluster's densest member); public data only
    selection_representatives: SelectionRepresentatives = SELECTION_REPRESENTATIVES

    def __post_init__(self) -> None:
        check_query_selection(self.query_selection)
        check_representatives(self.selection_representatives)
        _positive_ints(self, "selection_round_size")
        if not isinstance(self.selection_coverage, int | float) or not (0 <= self.selection_coverage <= 1):
            raise ValueError(f"selection_coverage must lie in [0, 1], got {self.selection_coverage!r}")


@dataclass(frozen=True)
class RoundSettings(_Section):
    """A release in rounds (:mod:`pate_stab.run.rounds`).

    Round r spends (ε·s_r, δ·s_r) of the run's budget (basic composition), s = round_budget_shares
    (None: equal shares), each round calibrated for num_queries queries; round 1 selects by
    query_selection, every later round by the predictions of the student trained on the earlier
    rounds (post-processing). ``rounds: 1``: one release.
    """

    rounds: int = 1
    round_budget_shares: tuple[float, ...] | None = None
    # the teachers' inputs in rounds r > 1: "same" (the run's features in every round) or "student"
    # (the last hidden layer of the student fitted on rounds < r, applied to the run's features of
    # the private and public rows; the propagation teachers are rebuilt on it with the same shards).
    # That student is post-processing of earlier releases, so the map is public; propagate teachers
    # and a dense student with a hidden layer only.
    round_features: RoundFeatures = "same"

    def __post_init__(self) -> None:
        if not isinstance(self.rounds, int) or isinstance(self.rounds, bool) or self.rounds < 1:
            raise ValueError(f"rounds must be a positive integer, got {self.rounds!r}")
        shares = self.round_budget_shares
        if shares is not None:
            shares = tuple(shares)
            if len(shares) != self.rounds:
                raise ValueError(f"round_budget_shares must hold one share per round ({self.rounds}), got {shares}")
            if not all(isinstance(v, int | float) and math.isfinite(v) and v > 0 for v in shares):
                raise ValueError(f"round_budget_shares must be positive numbers, got {shares}")
            if abs(math.fsum(shares) - 1.0) > 1e-9:
                raise ValueError(f"round_budget_shares must sum to 1, got {shares} (sum {math.fsum(shares)!r})")
            object.__setattr__(self, "round_budget_shares", tuple(float(v) for v in shares))
        if self.round_features not in ROUND_FEATURES:
            choices = ", ".join(ROUND_FEATURES)
            raise ValueError(f"round_features must be one of {choices}, got {self.round_features!r}")
        if self.round_features == "student" and self.rounds < 2:
            raise ValueError(
                f"round_features='student' changes the teachers of rounds 2, 3, …; got rounds={self.rounds}"
            )


@dataclass(frozen=True)
class StudentSettings(_Section):
    """The student: post-processing of the release, so a rerun may change these settings
    (:data:`~pate_stab.run.config.names.STUDENT_FIELDS`) and only refits the student."""

    student_model: StudentModel = "mlp"
    student_hidden: tuple[int, ...] = (64,)
    student_channels: tuple[int, int] = (64, 128)  # CNN student only
    student_epochs: int = 30
    student_batch_size: int = 32
    student_lr: float = 3e-3
    bottom: Bottom = "drop"  # what the student does with ⊥: drop those queries, or a random label
    pseudo_label_rounds: int = 0
    pseudo_label_threshold: float = 0.95
    student_method: StudentMethod = "supervised"  # STUDENT_METHODS
    spread_threshold: float = 0.5  # spread: least class share of a spread pseudo-label
    # how the settings above are chosen: "none" (as configured) or "cv" (student_lr and spread_threshold by
    # cross-validation on the released labels; STUDENT_SELECT, pate_stab.student.select)
    student_select: StudentSelect = "none"
    fixmatch_preset: FixmatchPreset = "cpu"  # fixmatch: pate_stab.models.FixMatchConfig preset
    fixmatch_steps: int | None = None  # fixmatch: optimiser steps (None: the preset's)
    # fixmatch: the weak/strong augmentations, a named per-data-set setting fixed in advance
    # (pate_stab.models.augment.AUGMENTATIONS: digits = 2 px shift, no flip; clothes = the same plus
    # horizontal flips; natural = FixMatch's flip + 12.5 % shift; none = no weak augmentation)
    student_augment: StudentAugment = "digits"
    # a release that answered no query leaves the student nothing to learn from: the run stops
    # (NoLabelsError) and writes no student, unless this is set (the student is then its initial network)
    allow_empty_student: bool = False

    def __post_init__(self) -> None:
        if self.student_model not in STUDENT_MODELS:
            raise ValueError(f"student_model must be one of {', '.join(STUDENT_MODELS)}, got {self.student_model!r}")
        if self.bottom not in BOTTOMS:
            raise ValueError(f"bottom must be one of {', '.join(BOTTOMS)}, got {self.bottom!r}")
        if self.student_method not in STUDENT_METHODS:
            raise ValueError(f"student_method must be one of {', '.join(STUDENT_METHODS)}, got {self.student_method!r}")
        self._check_student_select()
        if self.fixmatch_preset not in FIXMATCH_PRESETS:
            raise ValueError(f"fixmatch_preset must be 'cpu' or 'gpu', got {self.fixmatch_preset!r}")
        if self.student_augment not in STUDENT_AUGMENTS:
            choices = ", ".join(STUDENT_AUGMENTS)
            raise ValueError(f"student_augment must be one of {choices}, got {self.student_augment!r}")
        if self.fixmatch_steps is not None and (not isinstance(self.fixmatch_steps, int) or self.fixmatch_steps < 1):
            raise ValueError(f"fixmatch_steps must be a positive integer or None, got {self.fixmatch_steps!r}")
        if not isinstance(self.spread_threshold, int | float) or not (0 <= self.spread_threshold <= 1):
            raise ValueError(f"spread_threshold must lie in [0, 1], got {self.spread_threshold!r}")
        _widths(self, "student_hidden")
        _widths(self, "student_channels")

    def _check_student_select(self) -> None:
        if self.student_select not in STUDENT_SELECT:
            choices = ", ".join(STUDENT_SELECT)
            raise ValueError(f"student_select must be one of {choices}, got {self.student_select!r}")
        if self.student_select != "cv":
            return
        if self.student_method == "fixmatch":
            raise ValueError(
                "student_select='cv' chooses the settings of the supervised and spread students; the fixmatch "
                "student's are fixed in advance (Sohn et al. 2020): use student_select='none'"
            )
        if self.student_model == "cnn":
            raise ValueError("student_select='cv' fits dense students (logistic, mlp), got student_model='cnn'")
        if self.pseudo_label_rounds:
            raise ValueError(
                f"student_select='cv' scores students without self-training; got pseudo_label_rounds="
                f"{self.pseudo_label_rounds} (use 0)"
            )


@dataclass(frozen=True)
class DirectSettings(_Section):
    """The direct private learners (:mod:`pate_stab.run.direct`): a transfer's ``aggregator`` or
    ``compare --direct`` rows. Public settings, fixed before the run: never chosen on evaluation or
    pool labels."""

    # dpsgd-cnn: epochs of DP-SGD over the private images; None: Tramèr & Boneh 2021's 40
    # (pate_stab.direct.cnn.CNN_DPSGD). Fixed before the run; σ is computed for it
    dpsgd_cnn_epochs: int | None = None
    # DP-SGD (dpsgd-linear, dpsgd-cnn; add/remove): the private set's PUBLIC size N, from which the
    # sampling rate q = B / N, the steps, σ and the gradient divisor are computed (never from the
    # actual count, which is private under add/remove). None: the documented size of a bundled
    # data set's published training file (pate_stab.direct.public_size); own data need it. Never
    # compute it from the private data: use a rounded figure you would publish anyway.
    private_size_hint: int | None = None
    # DP-SGD's expected batch size B, epochs and learning rate (dpsgd-linear; dpsgd-cnn where set).
    # None: computed from the public size N by pate_stab.direct.dpsgd.default_batch_size (Tramèr &
    # Boneh 2021's sampling rate kept, B = 8192 for N ≥ 60,000), 40 epochs and lr 4 (theirs); the
    # CNN keeps its data set's settings (pate_stab.direct.cnn.CNN_DPSGD) with B at most that rule's.
    dpsgd_batch_size: int | None = None
    dpsgd_epochs: int | None = None
    dpsgd_lr: float | None = None

    def __post_init__(self) -> None:
        _optional_positive_int("private_size_hint", self.private_size_hint)
        _optional_positive_int("dpsgd_batch_size", self.dpsgd_batch_size)
        _optional_positive_int("dpsgd_epochs", self.dpsgd_epochs)
        if self.dpsgd_lr is not None and (
            not isinstance(self.dpsgd_lr, int | float) or isinstance(self.dpsgd_lr, bool)
            or not math.isfinite(self.dpsgd_lr) or self.dpsgd_lr <= 0
        ):  # fmt: skip
            raise ValueError(f"dpsgd_lr must be a positive number or None, got {self.dpsgd_lr!r}")
        _optional_positive_int("dpsgd_cnn_epochs", self.dpsgd_cnn_epochs)


@dataclass(frozen=True)
class ExecutionSettings(_Section):
    """Where and how far the run goes: none of these is part of the run's identity."""

    accelerator: Accelerator = "auto"  # Lightning's names (ACCELERATORS)
    progress: bool = False
    stop_after: StopAfter | None = None  # stop after that stage (resume later)
    # finish a run whose release was interrupted (a crash after some of its calls were recorded)
    # from the outputs its spend recorded, without drawing noise: the unrecorded remainder of the
    # num_queries queries is not asked, the report says "partial" (pate_stab.run.release)
    finish_from_ledger: bool = False

    def __post_init__(self) -> None:
        if self.accelerator not in ACCELERATORS:
            raise ValueError(f"accelerator must be one of {', '.join(ACCELERATORS)}, got {self.accelerator!r}")
        if self.stop_after is not None and self.stop_after not in STOP_AFTER:
            raise ValueError(f"stop_after must be None, 'teachers' or 'release', got {self.stop_after!r}")
        if not isinstance(self.finish_from_ledger, bool):
            raise ValueError(f"finish_from_ledger must be true or false, got {self.finish_from_ledger!r}")


SECTIONS: dict[str, type[_Section]] = {
    "data": DataSettings,
    "feature_stage": FeatureSettings,
    "teachers": TeacherSettings,
    "graph": GraphSettings,
    "release": ReleaseSettings,
    "selection": SelectionSettings,
    "release_rounds": RoundSettings,
    "student": StudentSettings,
    "direct": DirectSettings,
    "execution": ExecutionSettings,
}
"""Each section's name (in a recipe YAML, and the attribute of a TransferConfig) and class, in the
order a config lists them. Two names differ from the room they hold, since the flat name is one of
the settings: ``feature_stage`` holds ``features`` (the feature map), ``release_rounds`` holds
``rounds``."""
SECTION_OF: dict[str, str] = {key: name for name, cls in SECTIONS.items() for key in cls.keys()}
"""Each setting's section (a setting's name is unique across the sections)."""


def check_cap(cap_epsilon: float | None, cap_delta: float | None) -> None:
    """A user's budget cap: ε > 0 finite, δ in [0, 1), each or both None (ValueError otherwise)."""
    for name, value, top in (("budget_epsilon", cap_epsilon, math.inf), ("budget_delta", cap_delta, 1.0)):
        if value is None:
            continue
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or not (0 < value < top if name == "budget_epsilon" else 0 <= value < top):
            want = "a positive finite number" if name == "budget_epsilon" else "a number in [0, 1)"
            raise ValueError(f"{name} (the run's budget cap) must be {want}, got {value!r}")
