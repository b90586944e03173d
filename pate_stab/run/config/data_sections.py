"""The sections of the stages before the release — ``data``, ``feature_stage``, ``teachers``, ``graph`` —
and what every section shares (:class:`Section` and the checks of its settings).

The sections of the release and after it, :data:`~pate_stab.run.config.sections.SECTIONS` and
:data:`~pate_stab.run.config.sections.SECTION_OF` are in :mod:`pate_stab.run.config.sections`, which is
where every section is imported from.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from typing import Any

from pate_stab._checks import check_pca_dim
from pate_stab.run.config.names import (
    DATASETS,
    FEATURES,
    OWN_DATA_FIELDS,
    TEACHER_MODELS,
    THREAT_MODELS,
    Dataset,
    FeatureMap,
    TeacherModel,
    ThreatModel,
)
from pate_stab.vocabulary import GRAPH_ALPHA, GRAPH_NEIGHBORS, GRAPH_PCA_DIM, GRAPH_POWER, GRAPH_STEPS

__all__ = [
    "DataSettings",
    "FeatureSettings",
    "GraphSettings",
    "Section",
    "TeacherSettings",
    "check_optional_positive_int",
    "check_positive_ints",
    "check_widths",
]

# tuple settings written as lists by to_dict (JSON and YAML have no tuples)
_LIST_FIELDS = (
    "teacher_hidden", "teacher_channels", "student_hidden", "student_channels", "classes", "image_shape",
    "round_budget_shares",
)  # fmt: skip


class Section:
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


def check_positive_ints(section: object, *names: str) -> None:
    """Each of the section's ``names`` a positive integer (ValueError otherwise)."""
    for name in names:
        if not isinstance(getattr(section, name), int) or getattr(section, name) < 1:
            raise ValueError(f"{name} must be a positive integer, got {getattr(section, name)!r}")


def check_optional_positive_int(name: str, value: Any) -> None:
    """``value`` a positive integer or None (ValueError otherwise)."""
    if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 1):
        raise ValueError(f"{name} must be a positive integer or None, got {value!r}")


def check_widths(section: object, name: str) -> None:
    """The layer widths ``name`` as a tuple of positive integers (two for a CNN's ``*_channels``)."""
    widths = tuple(int(h) for h in getattr(section, name))
    if any(h < 1 for h in widths) or (name.endswith("channels") and len(widths) != 2):
        what = "two positive integers" if name.endswith("channels") else "positive integers"
        raise ValueError(f"{name} must be {what}, got {widths}")
    object.__setattr__(section, name, widths)


@dataclass(frozen=True)
class DataSettings(Section):
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
class FeatureSettings(Section):
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
        check_positive_ints(self, "scattering_j", "ssl_epochs")
        check_pca_dim("pca_dim", self.pca_dim)


@dataclass(frozen=True)
class TeacherSettings(Section):
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
        check_positive_ints(self, "num_teachers")
        r = self.teacher_self_training_rounds
        if not isinstance(r, int) or isinstance(r, bool) or r < 0:
            raise ValueError(f"teacher_self_training_rounds must be a nonnegative integer, got {r!r}")
        t = self.teacher_self_training_threshold
        if not isinstance(t, int | float) or isinstance(t, bool) or not (0 < t <= 1):
            raise ValueError(f"teacher_self_training_threshold must lie in (0, 1], got {t!r}")
        check_widths(self, "teacher_hidden")
        check_widths(self, "teacher_channels")


@dataclass(frozen=True)
class GraphSettings(Section):
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
        check_positive_ints(self, "graph_neighbors")
        if not isinstance(self.graph_steps, int) or self.graph_steps < 0:
            raise ValueError(f"graph_steps must be a nonnegative integer, got {self.graph_steps!r}")
        if self.graph_pca_dim is not None and (not isinstance(self.graph_pca_dim, int) or self.graph_pca_dim < 1):
            raise ValueError(f"graph_pca_dim must be a positive integer or None, got {self.graph_pca_dim!r}")
        p, a = self.graph_power, self.graph_alpha
        if not isinstance(p, int | float) or not math.isfinite(p) or p <= 0:
            raise ValueError(f"graph_power must be a positive finite number, got {p!r}")
        if not isinstance(a, int | float) or not (0 <= a < 1):
            raise ValueError(f"graph_alpha must lie in [0, 1), got {a!r}")
