"""The names a run's configuration chooses from: data sets, feature maps, teachers, aggregators
and direct learners, threat models, partition keys, student methods, …, and which settings a rerun
may change (:data:`STUDENT_FIELDS`).

Each vocabulary is written once, as a ``Literal`` type (the settings' annotations), and its table is
made from it: a tuple is ``typing.get_args`` of the type, a table of descriptions is refused on import
unless its keys are the type's values in order (:func:`_described`). The vocabularies that a part of the
pipeline below the configuration also reads (the relation, the privacy unit, the noise source, the ⊥
policy, the query selection) are written in the module that imports nothing above it and imported here:
:mod:`pate_stab.privacy.ledger.format`, :mod:`pate_stab.privacy.noise.secure`, :mod:`pate_stab.vocabulary`.
:class:`pate_stab.run.config.TransferConfig` checks its fields against these tables;
``pate_stab.run.config`` re-exports them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal, TypeVar, get_args

from pate_stab.privacy.ledger.format import NEIGHBOURING_RELATIONS, PRIVACY_UNITS, Neighbouring, PrivacyUnit
from pate_stab.privacy.noise.secure import NOISE_MODES, NoiseMode
from pate_stab.vocabulary import (
    BOTTOM_POLICIES,
    CALIBRATIONS,
    QUERY_SELECTIONS,
    REPRESENTATIVE_CHOICES,
    BottomPolicy,
    Calibration,
    QuerySelection,
    SelectionRepresentatives,
)

__all__ = [
    "ACCELERATORS",
    "BOTTOMS",
    "CALIBRATIONS",
    "DATASETS",
    "DIRECT_LEARNER_NAMES",
    "EXTRACTED_FEATURES",
    "FEATURES",
    "FEATURE_BLOCKS",
    "FEATURE_DATASETS",
    "FIXMATCH_PRESETS",
    "NEIGHBOURING_RELATIONS",
    "NOISE_MODES",
    "PRIVACY_UNITS",
    "QUERY_SELECTIONS",
    "REPRESENTATIVE_CHOICES",
    "STUDENT_AUGMENTS",
    "IMAGE_DIRECT_LEARNERS",
    "LABEL_DIRECT_LEARNERS",
    "LABEL_QUERIES",
    "NOT_IDENTITY",
    "OWN_DATA_FIELDS",
    "PARTITION_KEYS",
    "PRIVACY_UNIT_DESCRIPTIONS",
    "REPORT_FIELDS",
    "ROUND_FEATURES",
    "RUN_AGGREGATORS",
    "STUDENT_FIELDS",
    "STOP_AFTER",
    "STUDENT_METHODS",
    "STUDENT_MODELS",
    "STUDENT_SELECT",
    "TEACHER_MODELS",
    "THREAT_MODELS",
    "Accelerator",
    "Aggregator",
    "Bottom",
    "Calibration",
    "Dataset",
    "DirectLearner",
    "FeatureMap",
    "FixmatchPreset",
    "LabelQueries",
    "Neighbouring",
    "NoiseMode",
    "PartitionKey",
    "PrivacyUnit",
    "QuerySelection",
    "SelectionRepresentatives",
    "RoundFeatures",
    "RunAggregator",
    "StopAfter",
    "StudentAugment",
    "StudentMethod",
    "StudentModel",
    "StudentSelect",
    "TeacherModel",
    "ThreatModel",
]

# The choices as types (for the settings' annotations and a type checker); each table below is made from its type.
Dataset = Literal["synthetic", "mnist", "fashion_mnist", "svhn", "cifar10", "adult", "files", "arrays"]
ThreatModel = Literal["public-pool", "label-only"]
FeatureMap = Literal["raw", "pca", "scattering", "ssl", "scattering+ssl"]
TeacherModel = Literal["logistic", "mlp", "cnn", "propagate", "fixmatch"]
RunAggregator = Literal[
    "stability", "stability-soft", "lnmax", "gnmax", "confident-gnmax", "private-knn", "confident-private-knn"
]  # fmt: skip
DirectLearner = Literal[
    "objective-softmax", "output-softmax", "objective-ovr", "output-ovr", "dpsgd-linear", "dpsgd-cnn",
    "rr-lp1st", "rr-lp2st", "alibi",
]  # fmt: skip
Aggregator = Literal[RunAggregator, DirectLearner]  # a transfer's aggregator: a releaser or a direct learner
PartitionKey = Literal["content", "record_id"]
LabelQueries = Literal["pool", "private", "both"]
RoundFeatures = Literal["same", "student"]
StudentModel = Literal["logistic", "mlp", "cnn"]
Bottom = BottomPolicy  # pate_stab.vocabulary: the student reads it too
StudentMethod = Literal["supervised", "spread", "fixmatch"]
StudentSelect = Literal["none", "cv"]
FixmatchPreset = Literal["cpu", "gpu"]  # pate_stab.models.FixMatchConfig.cpu() / .gpu()
StudentAugment = Literal["digits", "clothes", "natural", "none"]  # pate_stab.models.augment.AUGMENTATIONS's keys
StopAfter = Literal["teachers", "release"]
Accelerator = Literal["auto", "cpu", "gpu", "cuda", "mps"]


_T = TypeVar("_T")


def _described(vocabulary: Any, descriptions: Mapping[str, _T]) -> dict[str, _T]:
    """``descriptions`` of each value of the ``Literal`` type ``vocabulary``, refused (TypeError, on import)
    unless its keys are the type's values in the type's order: the vocabulary is the type, written once."""
    names = get_args(vocabulary)
    if tuple(descriptions) != names:
        raise TypeError(f"descriptions of {names} given for {tuple(descriptions)}")
    return dict(descriptions)


STUDENT_AUGMENTS: tuple[str, ...] = get_args(StudentAugment)
"""The FixMatch student's augmentations, each a row of :data:`pate_stab.models.augment.AUGMENTATIONS`."""

DATASETS: tuple[str, ...] = get_args(Dataset)
"""Bundled loaders; ``"files"``: the user's own files (``private`` / ``public`` / ``evaluation`` paths);
``"arrays"``: the user's arrays in Python (:meth:`pate_stab.run.api.Data.arrays`)."""
OWN_DATA_FIELDS = ("private", "public", "evaluation", "schema", "classes", "image_shape", "encoding")
FEATURES = _described(
    FeatureMap,
    {
        "raw": "the inputs as they are (flattened unless the teachers are CNNs)",
        "pca": "PCA of the inputs fitted on the public pool (pca_dim components, optionally whitened)",
        "scattering": "wavelet scattering (data-independent), standardised and reduced to pca_dim by a PCA fitted on "
        "the public pool",
        "ssl": "a SimCLR encoder trained on the public pool's images (no labels), its embedding standardised "
        "(and reduced to pca_dim by a public PCA when pca_dim is smaller than the embedding)",
        "scattering+ssl": "both of the above, each as its own map (own cache file), each scaled to total variance 1 "
        "on the public pool, concatenated",
    },
)
"""The run's feature stage (:mod:`pate_stab.features`): fitted on the public pool only, or on nothing."""
FEATURE_BLOCKS = {"scattering": ("scattering",), "ssl": ("ssl",), "scattering+ssl": ("scattering", "ssl")}
"""The feature maps :mod:`pate_stab.run.features` extracts from images, each with its blocks (one
extractor each, in the order concatenated)."""
EXTRACTED_FEATURES = tuple(FEATURE_BLOCKS)
"""Features computed from images by the run's feature stage: they give vectors (no CNN teachers)."""
TEACHER_MODELS: tuple[str, ...] = get_args(TeacherModel)
"""Teachers: dense heads, PATE's CNN, label propagation (:mod:`pate_stab.teachers.propagation`), or CNNs trained
with FixMatch on their shard's labels and the unlabelled inputs the privacy unit allows (PATE-FM;
:mod:`pate_stab.teachers.fixmatch`, settings: :mod:`pate_stab.teachers.fixmatch_settings`)."""
STUDENT_MODELS: tuple[str, ...] = get_args(StudentModel)
BOTTOMS: tuple[str, ...] = BOTTOM_POLICIES
"""What the student does with ⊥: drops those queries, or gives them a random label."""
FIXMATCH_PRESETS: tuple[str, ...] = get_args(FixmatchPreset)
"""Each a :class:`pate_stab.models.FixMatchConfig` constructor (``FixMatchConfig.cpu()``, ``.gpu()``)."""
STOP_AFTER: tuple[str, ...] = get_args(StopAfter)
"""Stages a run may stop after (and resume from later)."""
ACCELERATORS: tuple[str, ...] = get_args(Accelerator)
"""Lightning's accelerator names the run understands (:func:`pate_stab.run.progress.accelerator_device`)."""
RUN_AGGREGATORS: tuple[str, ...] = get_args(RunAggregator)
"""The aggregators a run offers (the stability releasers take the run's ``calibration`` mode; the
Private-kNN rows ask no teachers: their votes are a query's nearest private records)."""
DIRECT_LEARNER_NAMES: tuple[str, ...] = get_args(DirectLearner)
"""Direct private learners trained on the private split (:mod:`pate_stab.run.direct`): ``compare --direct``
rows, or a transfer's ``aggregator`` (then no teachers are asked and no student is trained)."""
LABEL_DIRECT_LEARNERS = ("rr-lp1st", "rr-lp2st", "alibi")
"""Direct learners private in the labels only (ε-label-DP; Ghazi et al. 2021, Malek et al. 2021): valid
only when the run's privacy unit is ``label`` (the inputs public)."""
IMAGE_DIRECT_LEARNERS = ("dpsgd-cnn",)
"""Direct learners trained on the private images themselves (no feature stage); image data only."""
FEATURE_DATASETS = ("synthetic", "adult")
"""Bundled data sets without images (feature vectors, a table)."""
THREAT_MODELS = _described(
    ThreatModel,
    {
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
    },
)
PARTITION_KEYS = _described(
    PartitionKey,
    {
        "content": "the record's own bytes (features and label): a replaced record may move to another shard",
        "record_id": "an id supplied with each private record (an id column or array; never its row number), kept "
        "by a neighbouring data set and by a replacement; runs on data without ids refuse it",
    },
)
PRIVACY_UNIT_DESCRIPTIONS = _described(
    PrivacyUnit,
    {
        "record": "record privacy: a neighbouring data set differs in one private record (its inputs and its label)",
        "label": "label privacy: a neighbouring data set differs in one private record's label; the private inputs are "
        "public (label differential privacy; docs/label_privacy.md)",
    },
)
"""The privacy units (DESIGN.md fact 13), as the report and the ledger state them."""
LABEL_QUERIES = _described(
    LabelQueries,
    {
        "pool": "the public pool's inputs (as under record privacy)",
        "private": "the private records' inputs (public under label privacy); the student learns from them",
        "both": "the private records' inputs, then the public pool's",
    },
)
"""What the releaser is asked about (``label_queries``); ``private`` and ``both`` need label privacy."""
_WIDTH_FIELDS = ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels")
# the student is post-processing of the release: a rerun may change these and only refits the student
STUDENT_FIELDS = (
    "student_model",
    "student_hidden",
    "student_channels",
    "student_epochs",
    "student_batch_size",
    "student_lr",
    "bottom",
    "pseudo_label_rounds",
    "pseudo_label_threshold",
    "student_method",
    "spread_threshold",
    "fixmatch_preset",
    "fixmatch_steps",
    "student_augment",
    "student_select",
)
STUDENT_METHODS = _described(
    StudentMethod,
    {
        "supervised": "student_model on the answered queries (plus pseudo_label_rounds of self-training on the pool)",
        "spread": "label spreading of the answered labels over the public pool's kNN graph; student_model trained "
        "on the answered queries and the pool points the spread labels with share ≥ spread_threshold",
        "fixmatch": "a CNN on the public images: answered queries labelled, the rest of the pool unlabelled, "
        "FixMatch consistency (weak/strong augmentation, confidence threshold)",
    },
)
STUDENT_SELECT = _described(
    StudentSelect,
    {
        "none": "the student settings as configured",
        "cv": "student_lr (and, for the spread student, spread_threshold) chosen by 3-fold cross-validation on the "
        "released labels from a grid fixed in advance (pate_stab.student.select): post-processing, no spend",
    },
)
ROUND_FEATURES = _described(
    RoundFeatures,
    {
        "same": "the run's features in every round of a release in rounds",
        "student": "rounds r > 1: propagation teachers rebuilt on the last hidden layer of the student fitted on "
        "rounds < r (pate_stab.run.rounds)",
    },
)
# reporting only: PATE's data-dependent ε of the baselines (see pate_stab.aggregation.data_dependent)
REPORT_FIELDS = ("dd_order", "dd_sigma")
NOT_IDENTITY = (
    "checkpoints_dir", "accelerator", "progress", "stop_after", "allow_unanswerable", "allow_empty_student",
    "finish_from_ledger", "budget_epsilon", "budget_delta",
    *STUDENT_FIELDS, *REPORT_FIELDS,
)  # fmt: skip
