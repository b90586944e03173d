"""pate_stab.teachers."""

from pate_stab.teachers.partition import (
    partition_indices,
    record_keys_from_tensors,
    shard_of_records,
)

__all__ = ["partition_indices", "record_keys_from_tensors", "shard_of_records"]
