"""The main job's configuration, one package: :class:`TransferConfig` and what it is made of.

- :mod:`~pate_stab.run.config.names`: each vocabulary once (a ``Literal``, its values by
  ``typing.get_args``) and which settings a rerun may change;
- :mod:`~pate_stab.run.config.sections`: the sections, one frozen dataclass per stage, each checking its
  settings (those of the stages before the release written in :mod:`~pate_stab.run.config.data_sections`);
- :mod:`~pate_stab.run.config.transfer_config`: :class:`TransferConfig`, the sections and the checks that
  span two, and the flat names of the YAML and the command line.

The package imports no algorithm (selection, teachers, student, features, releasers, …): what it checks a
setting against is a vocabulary of :mod:`~pate_stab.run.config.names` or of the privacy core
(``tests/test_import_graph.py`` holds it to that).
"""

from __future__ import annotations

from pate_stab.run.config.names import (
    DATASETS,
    DIRECT_LEARNER_NAMES,
    EXTRACTED_FEATURES,
    FEATURE_DATASETS,
    FEATURES,
    IMAGE_DIRECT_LEARNERS,
    LABEL_DIRECT_LEARNERS,
    LABEL_QUERIES,
    NOT_IDENTITY,
    OWN_DATA_FIELDS,
    PARTITION_KEYS,
    PRIVACY_UNIT_DESCRIPTIONS,
    REPORT_FIELDS,
    RUN_AGGREGATORS,
    STUDENT_FIELDS,
    STUDENT_METHODS,
    STUDENT_SELECT,
    TEACHER_MODELS,
    THREAT_MODELS,
)
from pate_stab.run.config.sections import SECTIONS, check_cap
from pate_stab.run.config.transfer_config import TOP_LEVEL, TransferConfig, flat_key, flat_settings

__all__ = [
    "DATASETS",
    "DIRECT_LEARNER_NAMES",
    "EXTRACTED_FEATURES",
    "FEATURES",
    "FEATURE_DATASETS",
    "IMAGE_DIRECT_LEARNERS",
    "LABEL_DIRECT_LEARNERS",
    "LABEL_QUERIES",
    "NOT_IDENTITY",
    "OWN_DATA_FIELDS",
    "PARTITION_KEYS",
    "PRIVACY_UNIT_DESCRIPTIONS",
    "REPORT_FIELDS",
    "RUN_AGGREGATORS",
    "SECTIONS",
    "STUDENT_FIELDS",
    "STUDENT_METHODS",
    "STUDENT_SELECT",
    "TEACHER_MODELS",
    "THREAT_MODELS",
    "TOP_LEVEL",
    "TransferConfig",
    "check_cap",
    "flat_key",
    "flat_settings",
]
