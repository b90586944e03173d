"""The main job's configuration: every setting of a transfer run, checked on construction.

:class:`TransferConfig` is made of sections, one per stage of the run
(:mod:`pate_stab.run.config.sections`): ``data``, ``feature_stage``, ``teachers``, ``graph``,
``release``, ``selection``, ``release_rounds``, ``student``, ``direct`` and ``execution``, beside the
run's ``run_name``, ``checkpoints_dir`` and ``seed``. A recipe YAML holds the sections
(``release: {epsilon: 2}``) or, as before, the flat names (``epsilon: 2``)
(``pate-stab transfer --config recipes/configs/mnist_quick.yaml``); the command line's flags and
``--set`` (``--set release.epsilon=2`` or ``--set epsilon=2``) override them. :data:`STUDENT_FIELDS`
are the settings a rerun of a finished run folder may change (the student is post-processing); any
other change is refused (:func:`pate_stab.run.prepare.prepare`).

Flat names are the YAML's and the command line's shorthand: ``TransferConfig(epsilon=2)`` sorts
``epsilon`` into its section, and ``dataclasses.replace(config, epsilon=2)`` replaces it there. The
code reads a setting by its section, ``config.release.epsilon``; :meth:`TransferConfig.setting` reads
one by a name given at run time (``"epsilon"`` or ``"release.epsilon"``). A flat read,
``config.epsilon``, still works and warns (:class:`DeprecationWarning`): the test suite turns that
warning into an error inside ``pate_stab``, so the package itself never reads flat.
``to_dict()`` is flat (the form of ``config.json``); ``to_dict(nested=True)`` gives the sections.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pate_stab.aggregation.registry import AggregatorSettings
from pate_stab.run.config.names import (
    EXTRACTED_FEATURES,
    FEATURE_DATASETS,
    IMAGE_DIRECT_LEARNERS,
    PARTITION_KEYS,
    PRIVACY_UNIT_DESCRIPTIONS,
)
from pate_stab.run.config.sections import (
    SECTION_OF,
    SECTIONS,
    DataSettings,
    DirectSettings,
    ExecutionSettings,
    FeatureSettings,
    GraphSettings,
    ReleaseSettings,
    RoundSettings,
    SelectionSettings,
    StudentSettings,
    TeacherSettings,
)

__all__ = ["TOP_LEVEL", "TransferConfig", "flat_key", "flat_settings"]

TOP_LEVEL = ("run_name", "checkpoints_dir", "seed")
"""The settings outside every section: the run's folder and its seed."""


def flat_key(key: str) -> str:
    """The flat name of a setting given flat (``epsilon``) or with its section (``release.epsilon``).

    Raises:
        ValueError: an unknown name (naming the known ones), or a setting under another section.
    """
    section, dot, name = key.rpartition(".")
    if not dot:
        if key in TOP_LEVEL or key in SECTION_OF:
            return key
        close = difflib.get_close_matches(key, [*TOP_LEVEL, *SECTION_OF], n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"unknown configuration keys: {key}{hint}; sections: {', '.join(SECTIONS)}")
    if section not in SECTIONS:
        raise ValueError(f"unknown configuration section {section!r} in {key!r}; sections: {', '.join(SECTIONS)}")
    if name not in SECTIONS[section].keys():
        owner = SECTION_OF.get(name)
        where = f" ({name} belongs to {owner}: {owner}.{name})" if owner else ""
        raise ValueError(
            f"unknown configuration key {key}{where}; section {section} holds: {', '.join(SECTIONS[section].keys())}"
        )
    return name


def _declared_id_column(flat: Mapping[str, Any]) -> str | None:
    """The id column a user's CSV schema declares (``dataset: files`` with ``schema``), or None; a schema
    that cannot be read is left to the data's own checks (:func:`pate_stab.data.own.load_files`)."""
    data = flat.get("data")
    dataset = flat.get("dataset", getattr(data, "dataset", None))
    schema = flat.get("schema", getattr(data, "schema", None))
    if dataset != "files" or not schema:
        return None
    from pate_stab.data.table_schema import TabularSchema

    try:
        sch = schema if isinstance(schema, TabularSchema) else TabularSchema.from_file(schema)
    except (OSError, ValueError):
        return None
    return sch.id_column


def flat_settings(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` (a recipe's keys: sections as mappings, flat names, ``section.name``) with every setting
    under its flat name; section objects (:data:`SECTIONS`) are kept as given.

    Raises:
        ValueError: an unknown key (naming it and its section's keys), a section that is not a
            mapping, or a setting given twice (flat and in its section, naming both).
    """
    out: dict[str, Any] = {}
    origin: dict[str, str] = {}
    unknown = []
    for key, value in data.items():
        if key in SECTIONS and isinstance(value, SECTIONS[key]):
            out[key] = value
            continue
        if key in SECTIONS:
            if value is None:  # an empty section (its settings all commented out in a YAML)
                continue
            if not isinstance(value, Mapping):
                raise ValueError(f"{key} is a section: give its settings as a mapping ({key}: {{...}}), got {value!r}")
            items = [(f"{key}.{name}", v) for name, v in value.items()]
        else:
            items = [(key, value)]
        for given, v in items:
            try:
                name = flat_key(str(given))
            except ValueError:
                if "." in str(given):
                    raise
                unknown.append(str(given))
                continue
            if name in origin:
                raise ValueError(f"{name} is given twice, as {origin[name]} and as {given}: keep one")
            origin[name] = str(given)
            out[name] = v
    if unknown:
        close = [m for k in unknown for m in difflib.get_close_matches(k, [*TOP_LEVEL, *SECTION_OF], n=1)]
        hint = f" (did you mean {', '.join(close)}?)" if close else ""
        raise ValueError(f"unknown configuration keys: {', '.join(sorted(unknown))}{hint}; sections: "
                         f"{', '.join(SECTIONS)}")  # fmt: skip
    return out


@dataclass(frozen=True, init=False)
class TransferConfig:
    """Everything a transfer run needs, in sections (:mod:`pate_stab.run.config.sections`).

    Made from flat settings (``TransferConfig(dataset="mnist", epsilon=2.0)``), from sections
    (``TransferConfig(release=ReleaseSettings(epsilon=2.0))`` or ``release={"epsilon": 2.0}``), or
    both; a flat setting beside its section's object replaces that field (what
    ``dataclasses.replace(config, epsilon=2.0)`` does), beside its section's mapping it is refused
    as given twice. Read ``config.release.epsilon`` (``config.epsilon`` works and warns).  Defaults
    describe a small synthetic task; see ``recipes/configs/*.yaml`` for data sets and each section
    for how its defaults were chosen.
    """

    run_name: str = "transfer"
    checkpoints_dir: str = "checkpoints"
    seed: int = 0
    data: DataSettings = field(default_factory=DataSettings)
    feature_stage: FeatureSettings = field(default_factory=FeatureSettings)
    teachers: TeacherSettings = field(default_factory=TeacherSettings)
    graph: GraphSettings = field(default_factory=GraphSettings)
    release: ReleaseSettings = field(default_factory=ReleaseSettings)
    selection: SelectionSettings = field(default_factory=SelectionSettings)
    release_rounds: RoundSettings = field(default_factory=RoundSettings)
    student: StudentSettings = field(default_factory=StudentSettings)
    direct: DirectSettings = field(default_factory=DirectSettings)
    execution: ExecutionSettings = field(default_factory=ExecutionSettings)

    def __init__(self, **settings: Any) -> None:
        flat = flat_settings(settings)
        if "partition_key" not in flat and "release" not in flat and _declared_id_column(flat):
            # DESIGN.md fact 1: a schema that declares record ids keys the partition by them, unless the
            # user chooses the key (partition_key: content)
            flat["partition_key"] = "record_id"
        object.__setattr__(self, "run_name", flat.pop("run_name", "transfer"))
        object.__setattr__(self, "checkpoints_dir", flat.pop("checkpoints_dir", "checkpoints"))
        object.__setattr__(self, "seed", flat.pop("seed", 0))
        for name, cls in SECTIONS.items():
            given = flat.pop(name, None)
            own = {k: flat.pop(k) for k in cls.keys() if k in flat}
            section = cls(**own) if given is None else replace(given, **own) if own else given  # type: ignore[type-var]
            object.__setattr__(self, name, section)
        self.__post_init__()

    def __getattr__(self, name: str) -> Any:
        """A setting by its flat name (``config.epsilon``, deprecated shorthand for ``config.release.epsilon``)."""
        section = SECTION_OF.get(name)
        holder = self.__dict__.get(section) if section is not None else None
        if holder is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        warnings.warn(
            f"config.{name} is shorthand for config.{section}.{name}: read the setting by its section "
            "(flat names are for the YAML and the command line)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(holder, name)

    def setting(self, name: str) -> Any:
        """The setting ``name``, given flat (``"epsilon"``) or with its section (``"release.epsilon"``), or a
        top-level one (``"seed"``): for code that holds a setting's name, not its section.

        Raises:
            ValueError: an unknown name (naming the sections), or a setting under another section.
        """
        key = flat_key(name)
        if key in TOP_LEVEL:
            return getattr(self, key)
        return getattr(getattr(self, SECTION_OF[key]), key)

    def __post_init__(self) -> None:
        """The checks that span two sections (each section checks its own settings)."""
        data, release, rounds, student = self.data, self.release, self.release_rounds, self.student
        if release.aggregator in IMAGE_DIRECT_LEARNERS and data.dataset in FEATURE_DATASETS:
            raise ValueError(
                f"{release.aggregator} trains a CNN on images; dataset {data.dataset!r} has none (feature vectors or "
                "a table): use dpsgd-linear or a convex head"
            )
        if release.privacy_unit == "label" and data.threat_model != "public-pool":
            raise ValueError(
                "privacy_unit: label keeps every private input and asks about them itself (label_queries); the "
                f"label-only threat model's discarded-label pool is not used with it: use threat_model: public-pool, "
                f"got {data.threat_model!r}"
            )
        if self.teachers.teacher_model == "cnn" and self.feature_stage.features in EXTRACTED_FEATURES:
            raise ValueError(f"CNN teachers need images; features={self.feature_stage.features!r} gives vectors")
        if self.teachers.teacher_self_training_rounds:
            if release.privacy_unit != "label":
                raise ValueError(
                    "teacher_self_training_rounds pseudo-labels every private input, which only label privacy makes "
                    "public to every teacher: use privacy_unit: label or 0 rounds, got privacy_unit="
                    f"{release.privacy_unit!r}"
                )
            if self.teachers.teacher_model not in ("logistic", "mlp"):
                raise ValueError(
                    "teacher_self_training_rounds is for the vectorised heads (teacher_model: logistic or mlp), got "
                    f"teacher_model={self.teachers.teacher_model!r}"
                )
        if self.execution.finish_from_ledger and rounds.rounds != 1:
            raise ValueError(
                f"finish_from_ledger finishes a release made in one round; this run has rounds={rounds.rounds}"
            )
        if not self.run_name or "/" in self.run_name or self.run_name in (".", ".."):
            raise ValueError(f"run_name must be a plain folder name, got {self.run_name!r}")
        if rounds.rounds > 1 and release.aggregator != "stability":
            raise ValueError(
                f"rounds > 1 is implemented for the stability aggregator only, got aggregator={release.aggregator!r}"
            )
        if rounds.round_features == "student":
            if self.teachers.teacher_model != "propagate":
                raise ValueError(
                    "round_features='student' rebuilds the propagation teachers on the student's representation; "
                    f"got teacher_model={self.teachers.teacher_model!r} (use teacher_model: propagate)"
                )
            if student.student_method == "fixmatch" or student.student_model != "mlp" or not student.student_hidden:
                raise ValueError(
                    "round_features='student' takes the last hidden layer of a dense student: use student_model: "
                    f"mlp with student_hidden set and a supervised or spread student_method (got student_model="
                    f"{student.student_model!r}, student_hidden={tuple(student.student_hidden)}, "
                    f"student_method={student.student_method!r})"
                )

    @property
    def round_shares(self) -> tuple[float, ...]:
        """Each round's share of (ε, δ): ``round_budget_shares``, or equal shares."""
        rounds = self.release_rounds
        if rounds.round_budget_shares is not None:
            return rounds.round_budget_shares
        return tuple(1.0 / rounds.rounds for _ in range(rounds.rounds))

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TransferConfig:
        """A configuration from a recipe's keys: sections as mappings, flat names, or both (:func:`flat_settings`)."""
        return cls(**flat_settings(data))

    def to_dict(self, nested: bool = False) -> dict[str, Any]:
        """The settings by their flat names (``config.json``'s form), or by section (``nested=True``)."""
        top = {"run_name": self.run_name, "checkpoints_dir": self.checkpoints_dir, "seed": self.seed}
        if nested:
            return top | {name: getattr(self, name).to_dict() for name in SECTIONS}
        return top | {k: v for name in SECTIONS for k, v in getattr(self, name).to_dict().items()}

    @property
    def run_dir(self) -> Path:
        return Path(self.checkpoints_dir) / self.run_name

    @property
    def teachers_changed(self) -> int:
        """Teachers one neighbouring data set can change (DESIGN.md fact 1).

        Add/remove one record changes one shard with either key (record ids are supplied with the
        data, so no other record's id changes; :func:`pate_stab.run.prepare.partition_keys` refuses
        data without them). Replace-one changes one shard when the key is a record id (the
        replacement keeps it) and up to two under content keys
        (the replacement may hash elsewhere); the aggregators then use group privacy over two
        teachers (:func:`~pate_stab.aggregation.votes.distance_to_instability` with
        ``group_size=2``, doubled sensitivities for the PATE baselines). Under label privacy a
        neighbour changes one label and keeps the inputs, which are all a content key hashes
        (:func:`pate_stab.run.prepare.partition_keys`): one teacher, with either key.
        """
        if self.release.privacy_unit == "label":
            # content keys hash the inputs only under label privacy: a changed label keeps its shard
            return 1
        return 2 if (self.release.neighbouring, self.release.partition_key) == ("replace_one", "content") else 1

    def privacy_relation(self) -> dict[str, Any]:
        """The guarantee's relation, as the report and the ledger state it."""
        key_description = PARTITION_KEYS[self.release.partition_key]
        if self.release.privacy_unit == "label" and self.release.partition_key == "content":
            key_description = "the record's inputs only (label privacy: a changed label keeps the record's shard)"
        return {
            "privacy_unit": self.release.privacy_unit,
            "privacy_unit_description": PRIVACY_UNIT_DESCRIPTIONS[self.release.privacy_unit],
            "neighbouring": self.release.neighbouring,
            "partition_key": self.release.partition_key,
            "partition_key_description": key_description,
            "teachers_changed_per_neighbour": self.teachers_changed,
            **({"label_queries": self.release.label_queries} if self.release.privacy_unit == "label" else {}),
        }

    def aggregator_settings(self, epsilon: float | None = None, delta: float | None = None) -> AggregatorSettings:
        """The registry's settings for this run's aggregators at ``epsilon`` and ``delta`` (default: the run's)."""
        r = self.release
        return AggregatorSettings(
            epsilon=r.epsilon if epsilon is None else float(epsilon),
            delta=r.delta if delta is None else float(delta),
            num_queries=r.num_queries,
            num_teachers=self.teachers.num_teachers,
            max_unstable=r.max_unstable,
            calibration=r.calibration,
            gamma=r.gamma,
            confident_fraction=r.confident_threshold,
            sigma_ratio=r.sigma_ratio,
            teachers_changed=self.teachers_changed,
            noise=r.releaser_noise,
            sampling_rate=r.knn_sampling_rate,
            privacy_unit=r.privacy_unit,
            neighbouring=r.neighbouring,
        )
