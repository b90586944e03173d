"""Record-keyed partition of the private data into k disjoint shards.

Neighbouring relation (DESIGN.md fact 1): two data sets are neighbours if one is obtained from
the other by adding or removing one record (add/remove; the papers' relation). Replacing one
record is a removal followed by an addition.

A record's shard is a function of the record alone: ``shard(r) = H_key(key(r)) mod k`` with
``H`` a keyed hash (BLAKE2b with a 128-bit secret key drawn from ``generator``) and ``key(r)`` a
stable identifier of the record (a database id) or, by default, the record's own bytes
(:func:`record_keys_from_tensors`). Adding or removing one record therefore changes the contents
of exactly one shard and leaves every other shard — and every other record's shard — as it
was. A replacement changes at most two shards (one when old and new record hash to the same
shard). Splitting by position (records ``[j·n/k, (j+1)·n/k)`` to teacher j) does not have this
property: removing one record shifts every later record and can change every shard.

Shard sizes are multinomial (about n/k ± √(n/k)), not exactly equal; that is the price of
making the assignment independent of the other records. The key must be the same for the
neighbouring data sets being compared (same generator state), and it is secret: whoever knows
it can tell which teacher saw a given record, which the privacy analysis does not need but a
deployment should not publish either. Identical records land in the same shard.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_real

__all__ = ["keyed_subset", "record_keys_from_tensors", "shard_of_records", "partition_indices"]

RecordKeys = Tensor | Sequence[bytes] | Sequence[str] | Sequence[int]


def record_keys_from_tensors(*tensors: Tensor) -> list[bytes]:
    """One key per record: the raw bytes of row i of every tensor (e.g. ``(x, y)``), joined.

    Use it when records have no stable id. Two records with equal content get equal keys.
    """
    if not tensors:
        raise ValueError("record_keys_from_tensors needs at least one tensor")
    n = tensors[0].shape[0]
    rows = []
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"expected tensors, got {type(t).__name__}")
        if t.shape[0] != n:
            raise ValueError(f"all tensors must have {n} rows, got {t.shape[0]}")
        arr = t.detach().cpu().contiguous().reshape(n, -1).numpy()
        rows.append(np.ascontiguousarray(arr).view(np.uint8).reshape(n, -1))
    joined = np.concatenate(rows, axis=1)
    return [joined[i].tobytes() for i in range(n)]


def _key_bytes(record_keys: RecordKeys) -> list[bytes]:
    if isinstance(record_keys, Tensor):
        if record_keys.dim() != 1 or record_keys.is_floating_point() or record_keys.dtype == torch.bool:
            raise TypeError("record_keys as a tensor must be a 1-D integer tensor of record ids")
        return [int(v).to_bytes(8, "little", signed=True) for v in record_keys.tolist()]
    out = []
    for key in record_keys:
        if isinstance(key, bytes):
            out.append(key)
        elif isinstance(key, str):
            out.append(key.encode("utf-8"))
        elif isinstance(key, int) and not isinstance(key, bool):
            out.append(key.to_bytes(8, "little", signed=True))
        else:
            raise TypeError(f"record keys must be bytes, str or int, got {type(key).__name__}")
    return out


def shard_of_records(record_keys: RecordKeys, num_teachers: int, *, generator: torch.Generator) -> Tensor:
    """The shard (teacher index) of every record: keyed hash of its key mod ``num_teachers``.

    Args:
        record_keys: one stable key per record — a 1-D int64 tensor of record ids, or a
            sequence of bytes / str / int (see :func:`record_keys_from_tensors`).
        num_teachers: k ≥ 1.
        generator: the 128-bit hash key is drawn from it (16 random bytes).

    Returns:
        int64 tensor of shape (n,) with values in {0, …, k − 1}.
    """
    num_teachers = check_int("num_teachers", num_teachers, minimum=1)
    check_generator(generator)
    secret = bytes(torch.randint(0, 256, (16,), generator=generator, dtype=torch.uint8).tolist())
    shards = [
        int.from_bytes(hashlib.blake2b(k, key=secret, digest_size=8).digest(), "little") % num_teachers
        for k in _key_bytes(record_keys)
    ]
    return torch.tensor(shards, dtype=torch.int64)


def partition_indices(record_keys: RecordKeys, num_teachers: int, *, generator: torch.Generator) -> list[Tensor]:
    """Disjoint shards keyed to records: ``shards[j]`` = indices of the records of teacher j.

    Every index in ``range(n)`` is in exactly one shard; each shard is sorted ascending. Adding
    or removing one record changes exactly one shard's set of records (module docstring).

    Example::

        shards = partition_indices(record_keys_from_tensors(x, y), 250, generator=g)

    Returns:
        ``num_teachers`` int64 index tensors (some may be empty when n is small).
    """
    shard = shard_of_records(record_keys, num_teachers, generator=generator)
    order = torch.argsort(shard, stable=True)
    counts = torch.bincount(shard, minlength=num_teachers).tolist()
    return list(torch.split(order, counts))


def keyed_subset(record_keys: RecordKeys, share: float, *, generator: torch.Generator) -> Tensor:
    """Which records fall in a subset of expected share ``share``, each decided by its key alone.

    Record r is in the subset iff ``H_key(key(r)) / 2^64 < share`` (the keyed hash of
    :func:`shard_of_records`, its own secret drawn from ``generator``). Adding or removing a
    record changes no other record's membership, unlike a random permutation of the n rows
    (whose every position moves with n). The subset's size is binomial(n, share).

    Returns:
        bool tensor of shape (n,).
    """
    share = check_real("share", share, low=0.0, high=1.0, low_inclusive=False, high_inclusive=False)
    check_generator(generator)
    secret = bytes(torch.randint(0, 256, (16,), generator=generator, dtype=torch.uint8).tolist())
    cut = int(share * 2**64)
    inside = [
        int.from_bytes(hashlib.blake2b(k, key=secret, digest_size=8, person=b"subset").digest(), "little") < cut
        for k in _key_bytes(record_keys)
    ]
    return torch.tensor(inside, dtype=torch.bool)
