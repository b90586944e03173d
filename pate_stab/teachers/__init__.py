"""pate_stab.teachers: record-keyed shards, teacher models, vectorised Lightning training.

Usage::

    shards = partition_indices(record_keys_from_tensors(x, y), 250, generator=g_part)
    teachers = train_teachers(x, y, shards, spec=ModelSpec("mlp", (784,), 10), generator=g_teach)
    votes = teachers.predict_votes(public_x)  # (250, m) int64; predict_scores: (250, m, 10)

Across processes and nodes (one teacher slice per rank, run on every rank)::

    teachers = train_teachers_ddp(x, y, shards, spec=spec, generator=g_teach, devices=4, num_nodes=2)
"""

from pate_stab.features.pca import PublicFeatures  # the features stage's; also exported here (run.data)
from pate_stab.teachers.distributed import train_teachers_ddp
from pate_stab.teachers.ensemble import (
    TeacherEnsemble,
    init_stacked_parameters,
    stacked_forward,
)
from pate_stab.teachers.models import (
    ModelSpec,
    PateCNN,
    build_model,
    init_parameters,
)
from pate_stab.teachers.partition import (
    keyed_subset,
    partition_indices,
    record_keys_from_tensors,
    shard_of_records,
)
from pate_stab.teachers.pool_votes import PoolVotes, VotingTeachers
from pate_stab.teachers.propagation import PropagationSpec, PropagationTeachers
from pate_stab.teachers.stacked_optim import StackedAdam, StackedSGD
from pate_stab.teachers.training import (
    DEFAULT_MIN_STEPS,
    ShortScheduleWarning,
    TeacherEnsembleModule,
    TrainConfig,
    epoch_plan,
    teacher_epochs,
    train_teachers,
)

__all__ = [
    "DEFAULT_MIN_STEPS",
    "ModelSpec",
    "PateCNN",
    "PoolVotes",
    "PropagationSpec",
    "PropagationTeachers",
    "PublicFeatures",
    "ShortScheduleWarning",
    "StackedAdam",
    "StackedSGD",
    "TeacherEnsemble",
    "TeacherEnsembleModule",
    "TrainConfig",
    "VotingTeachers",
    "build_model",
    "epoch_plan",
    "init_parameters",
    "init_stacked_parameters",
    "keyed_subset",
    "partition_indices",
    "record_keys_from_tensors",
    "shard_of_records",
    "stacked_forward",
    "teacher_epochs",
    "train_teachers",
    "train_teachers_ddp",
]
