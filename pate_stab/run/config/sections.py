"""The sections of a run's configuration, one per stage: each a frozen dataclass holding its
settings (with what each means) and checking them on construction.

:class:`pate_stab.run.config.TransferConfig` is made of these sections (``config.release.epsilon``)
and checks what spans two of them (CNN teachers need images, label privacy and the threat model,
rounds and the aggregator, …). :data:`SECTIONS` maps each section's name in a recipe YAML to its
class; a setting's name is unique across the sections, so the flat name (``epsilon``) also finds it
(:data:`SECTION_OF`). The sections of the stages before the release (``data``, ``feature_stage``,
``teachers``, ``graph``) and what every section shares are written in
:mod:`pate_stab.run.config.data_sections`; every section is imported from here.

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
from dataclasses import dataclass

from pate_stab._checks import check_label_relation
from pate_stab.run.config.data_sections import (
    DataSettings,
    FeatureSettings,
    GraphSettings,
    Section,
    TeacherSettings,
    check_optional_positive_int,
    check_positive_ints,
    check_widths,
)
from pate_stab.run.config.names import (
    ACCELERATORS,
    BOTTOMS,
    CALIBRATIONS,
    DIRECT_LEARNER_NAMES,
    FIXMATCH_PRESETS,
    LABEL_QUERIES,
    NEIGHBOURING_RELATIONS,
    NOISE_MODES,
    PARTITION_KEYS,
    PRIVACY_UNIT_DESCRIPTIONS,
    ROUND_FEATURES,
    RUN_AGGREGATORS,
    STOP_AFTER,
    STUDENT_AUGMENTS,
    STUDENT_METHODS,
    STUDENT_MODELS,
    STUDENT_SELECT,
    Accelerator,
    Aggregator,
    Bottom,
    Calibration,
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
)
from pate_stab.vocabulary import (
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


@dataclass(frozen=True)
class ReleaseSettings(Section):
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
        check_positive_ints(self, "num_queries", "max_unstable")
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
class SelectionSettings(Section):
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
        check_positive_ints(self, "selection_round_size")
        if not isinstance(self.selection_coverage, int | float) or not (0 <= self.selection_coverage <= 1):
            raise ValueError(f"selection_coverage must lie in [0, 1], got {self.selection_coverage!r}")


@dataclass(frozen=True)
class RoundSettings(Section):
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
class StudentSettings(Section):
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
        check_widths(self, "student_hidden")
        check_widths(self, "student_channels")

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
class DirectSettings(Section):
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
        check_optional_positive_int("private_size_hint", self.private_size_hint)
        check_optional_positive_int("dpsgd_batch_size", self.dpsgd_batch_size)
        check_optional_positive_int("dpsgd_epochs", self.dpsgd_epochs)
        if self.dpsgd_lr is not None and (
            not isinstance(self.dpsgd_lr, int | float) or isinstance(self.dpsgd_lr, bool)
            or not math.isfinite(self.dpsgd_lr) or self.dpsgd_lr <= 0
        ):  # fmt: skip
            raise ValueError(f"dpsgd_lr must be a positive number or None, got {self.dpsgd_lr!r}")
        check_optional_positive_int("dpsgd_cnn_epochs", self.dpsgd_cnn_epochs)


@dataclass(frozen=True)
class ExecutionSettings(Section):
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


SECTIONS: dict[str, type[Section]] = {
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
