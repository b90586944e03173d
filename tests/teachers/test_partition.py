import pytest
import torch

from pate_stab.rng import seeded_generator
from pate_stab.teachers import partition_indices, record_keys_from_tensors, shard_of_records


def _contiguous(n, k):
    """Split by position: the layout this module replaces (teacher j gets a block of indices)."""
    return list(torch.tensor_split(torch.arange(n), k))


def _shard_contents(keys, shards):
    return [frozenset(keys[i] for i in s.tolist()) for s in shards]


def _records(n, seed=0):
    x = torch.randn(n, 3, generator=seeded_generator(seed))
    y = torch.randint(0, 4, (n,), generator=seeded_generator(seed + 1))
    return x, y


def test_disjoint_and_covering():
    x, y = _records(1000)
    shards = partition_indices(record_keys_from_tensors(x, y), 37, generator=seeded_generator(5))
    assert len(shards) == 37
    allidx = torch.cat(shards)
    assert torch.equal(allidx.sort().values, torch.arange(1000))  # coverage, no repeats
    sizes = torch.tensor([len(s) for s in shards]).float()
    assert sizes.mean() == pytest.approx(1000 / 37)


def test_deterministic_given_generator_and_key_dependent():
    ids = torch.arange(500)
    a = shard_of_records(ids, 10, generator=seeded_generator(1))
    b = shard_of_records(ids, 10, generator=seeded_generator(1))
    c = shard_of_records(ids, 10, generator=seeded_generator(2))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize("position", [0, 217, 499])
def test_one_record_changes_one_shard_add_remove_replace(position):
    k = 20
    x, y = _records(500)
    keys = record_keys_from_tensors(x, y)
    before = _shard_contents(keys, partition_indices(keys, k, generator=seeded_generator(9)))

    # remove one record
    removed = keys[:position] + keys[position + 1 :]
    after = _shard_contents(removed, partition_indices(removed, k, generator=seeded_generator(9)))
    assert sum(a != b for a, b in zip(before, after, strict=True)) == 1

    # add one record (at the front, where positional schemes shift everything)
    xn, yn = torch.full((1, 3), 7.5), torch.tensor([2])
    added = record_keys_from_tensors(xn, yn) + keys
    after = _shard_contents(added, partition_indices(added, k, generator=seeded_generator(9)))
    assert sum(a != b for a, b in zip(before, after, strict=True)) == 1

    # replace one record: a removal then an addition, at most two shards
    replaced = list(keys)
    replaced[position] = record_keys_from_tensors(xn, yn)[0]
    after = _shard_contents(replaced, partition_indices(replaced, k, generator=seeded_generator(9)))
    assert 1 <= sum(a != b for a, b in zip(before, after, strict=True)) <= 2


def test_contiguous_split_breaks_add_remove():
    k = 20
    x, y = _records(500)
    keys = record_keys_from_tensors(x, y)
    before = _shard_contents(keys, _contiguous(500, k))
    removed = keys[1:]
    after = _shard_contents(removed, _contiguous(499, k))
    changed = sum(a != b for a, b in zip(before, after, strict=True))
    assert changed > 1  # every block boundary shifts
    assert changed == k


def test_record_ids_and_string_keys():
    shards = partition_indices(["alice", "bob", "carol"], 2, generator=seeded_generator(0))
    assert sorted(torch.cat(shards).tolist()) == [0, 1, 2]
    with pytest.raises(TypeError):
        partition_indices(torch.tensor([0.5, 1.5]), 2, generator=seeded_generator(0))
    with pytest.raises(ValueError, match="num_teachers"):
        partition_indices(torch.arange(3), 0, generator=seeded_generator(0))
