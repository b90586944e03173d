"""pate_stab.teachers: record-keyed shards, the teacher ensemble, vectorised Lightning training.

Usage (``ModelSpec``: :mod:`pate_stab.models`, the model code shared with the students)::

    shards = partition_indices(record_keys_from_tensors(x, y), 250, generator=g_part)
    teachers = train_teachers(x, y, shards, spec=ModelSpec("mlp", (784,), 10), generator=g_teach)
    votes = teachers.predict_votes(public_x)  # (250, m) int64; predict_scores: (250, m, 10)

Across processes and nodes (one teacher slice per rank, run on every rank)::

    teachers = train_teachers_ddp(x, y, shards, spec=spec, generator=g_teach, devices=4, num_nodes=2)

The names below are imported on first use (PEP 562): a module of the package loads without the
others (``pate-stab predict`` reads a student without Lightning's training code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports

if TYPE_CHECKING:
    from pate_stab.features.pca import PublicFeatures  # the features stage's; also exported here (run.data)
    from pate_stab.teachers.distributed import train_teachers_ddp
    from pate_stab.teachers.ensemble import TeacherEnsemble
    from pate_stab.teachers.partition import (
        keyed_subset,
        partition_indices,
        record_keys_from_tensors,
        shard_of_records,
    )
    from pate_stab.teachers.pool_votes import PoolVotes, VotingTeachers
    from pate_stab.teachers.propagation import PropagationSpec, PropagationTeachers
    from pate_stab.teachers.training import (
        DEFAULT_MIN_STEPS,
        ShortScheduleWarning,
        TeacherEnsembleModule,
        TrainConfig,
        epoch_plan,
        teacher_epochs,
        train_teachers,
    )

_LAZY = {
    "PublicFeatures": "pate_stab.features.pca",
    "train_teachers_ddp": "pate_stab.teachers.distributed",
    "TeacherEnsemble": "pate_stab.teachers.ensemble",
    "keyed_subset": "pate_stab.teachers.partition",
    "partition_indices": "pate_stab.teachers.partition",
    "record_keys_from_tensors": "pate_stab.teachers.partition",
    "shard_of_records": "pate_stab.teachers.partition",
    "PoolVotes": "pate_stab.teachers.pool_votes",
    "VotingTeachers": "pate_stab.teachers.pool_votes",
    "PropagationSpec": "pate_stab.teachers.propagation",
    "PropagationTeachers": "pate_stab.teachers.propagation",
    "DEFAULT_MIN_STEPS": "pate_stab.teachers.training",
    "ShortScheduleWarning": "pate_stab.teachers.training",
    "TeacherEnsembleModule": "pate_stab.teachers.training",
    "TrainConfig": "pate_stab.teachers.training",
    "epoch_plan": "pate_stab.teachers.training",
    "teacher_epochs": "pate_stab.teachers.training",
    "train_teachers": "pate_stab.teachers.training",
}

__all__ = [
    "DEFAULT_MIN_STEPS",
    "PoolVotes",
    "PropagationSpec",
    "PropagationTeachers",
    "PublicFeatures",
    "ShortScheduleWarning",
    "TeacherEnsemble",
    "TeacherEnsembleModule",
    "TrainConfig",
    "VotingTeachers",
    "epoch_plan",
    "keyed_subset",
    "partition_indices",
    "record_keys_from_tensors",
    "shard_of_records",
    "teacher_epochs",
    "train_teachers",
    "train_teachers_ddp",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
