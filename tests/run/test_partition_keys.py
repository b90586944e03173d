"""The run's partition keys against the relation its config records (DESIGN.md fact 1).

For every (``neighbouring``, ``partition_key``) pair, the teachers whose shard changes between a
data set and its neighbour — under the run's own key choice (:func:`partition_keys`) and
:func:`partition_indices` — must never exceed ``TransferConfig.teachers_changed``, which the
ledger and report state and the aggregators calibrate for; and that count must be reached.
"""

from __future__ import annotations

import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.run import TransferConfig
from pate_stab.run.data import Task
from pate_stab.run.prepare import partition_keys, prepare
from pate_stab.teachers import partition_indices

K = 10  # teachers
N = 120  # private records
PAIRS = list(itertools.product(("add_remove", "replace_one"), ("content", "record_id")))


def _task(x: torch.Tensor, y: torch.Tensor, ids: torch.Tensor | None) -> Task:
    empty = torch.zeros(0, x.shape[1])
    none = torch.zeros(0, dtype=torch.int64)
    return Task(x, y, empty, none, empty, none, 3, "public-pool", private_ids=ids)


def _teacher_data(task: Task, key: str, seed: int) -> list[frozenset[tuple[int, bytes, int]]]:
    """Each teacher's records, as (id, features, label), under the run's own key choice."""
    shards = partition_indices(partition_keys(task, key), K, generator=torch.Generator().manual_seed(seed))
    assert task.private_ids is not None
    records = [
        (int(task.private_ids[i]), task.private_x[i].numpy().tobytes(), int(task.private_y[i]))
        for i in range(task.private_x.shape[0])
    ]
    return [frozenset(records[i] for i in s.tolist()) for s in shards]


def _random_task(seed: int) -> Task:
    g = torch.Generator().manual_seed(seed)
    x, y = torch.randn(N, 4, generator=g), torch.randint(0, 3, (N,), generator=g)
    ids = torch.randperm(10**6, generator=g)[:N]  # ids supplied with the data, not row numbers
    return _task(x, y, ids)


def _neighbours(task: Task, neighbouring: str, i: int, seed: int) -> list[Task]:
    """The neighbours of ``task`` around record ``i`` under the relation."""
    g = torch.Generator().manual_seed(seed + 1)
    assert task.private_ids is not None
    x, y, ids = task.private_x, task.private_y, task.private_ids
    if neighbouring == "add_remove":
        keep = torch.arange(x.shape[0]) != i
        new_id = torch.tensor([int(ids.max()) + 1])
        added = _task(
            torch.cat([x[:i], torch.randn(1, 4, generator=g), x[i:]]),
            torch.cat([y[:i], torch.randint(0, 3, (1,), generator=g), y[i:]]),
            torch.cat([ids[:i], new_id, ids[i:]]),  # inserted in the middle: later rows shift
        )
        return [_task(x[keep], y[keep], ids[keep]), added]
    x2, y2 = x.clone(), y.clone()
    x2[i] = torch.randn(4, generator=g)  # replace record i's content; the record keeps its id
    y2[i] = (y[i] + 1) % 3
    return [_task(x2, y2, ids.clone())]


def _changed(a: list[frozenset], b: list[frozenset]) -> int:
    return sum(sa != sb for sa, sb in zip(a, b, strict=True))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), i=st.integers(0, N - 1), pair=st.sampled_from(PAIRS))
def test_teachers_changed_by_a_neighbour_never_exceed_the_recorded_count(seed, i, pair):
    neighbouring, key = pair
    recorded = TransferConfig(neighbouring=neighbouring, partition_key=key).teachers_changed
    task = _random_task(seed)
    before = _teacher_data(task, key, seed)
    for other in _neighbours(task, neighbouring, i, seed):
        changed = _changed(before, _teacher_data(other, key, seed))
        assert 1 <= changed <= recorded, (neighbouring, key, changed, recorded)
        if (neighbouring, key) != ("replace_one", "content"):
            assert changed == recorded == 1


@pytest.mark.parametrize("neighbouring, key", PAIRS)
def test_the_recorded_count_is_reached_and_calibrated_for(neighbouring, key):
    config = TransferConfig(neighbouring=neighbouring, partition_key=key)
    task = _random_task(0)
    before = _teacher_data(task, key, 0)
    worst = max(
        _changed(before, _teacher_data(other, key, 0))
        for i in range(30)
        for other in _neighbours(task, neighbouring, i, i)
    )
    assert worst == config.teachers_changed == config.privacy_relation()["teachers_changed_per_neighbour"]
    # what the aggregators calibrate for: group privacy over two teachers in the content/replace case
    assert config.aggregator_settings().teachers_changed == worst
    assert worst == (2 if (neighbouring, key) == ("replace_one", "content") else 1)


def test_record_id_keys_need_unique_supplied_ids():
    x, y = torch.randn(5, 2), torch.zeros(5, dtype=torch.int64)
    with pytest.raises(ValueError, match="record ids"):
        partition_keys(_task(x, y, None), "record_id")
    with pytest.raises(ValueError, match="not unique.*7"):
        partition_keys(_task(x, y, torch.tensor([1, 7, 3, 7, 5])), "record_id")
    with pytest.raises(ValueError, match="one id per private record"):
        partition_keys(_task(x, y, torch.tensor([1, 2, 3])), "record_id")
    with pytest.raises(TypeError, match="integer"):
        partition_keys(_task(x, y, torch.tensor([1.0, 2, 3, 4, 5])), "record_id")
    with pytest.raises(ValueError, match="partition_key"):
        partition_keys(_task(x, y, None), "row")
    # content keys need no ids
    assert len(partition_keys(_task(x, y, None), "content")) == 5


def test_a_run_without_record_ids_refuses_record_id_keys_before_training(tmp_path):
    config = TransferConfig(
        run_name="ids", checkpoints_dir=str(tmp_path), partition_key="record_id", num_private=300,
        num_public=50, num_eval=50, num_teachers=5, num_queries=10, allow_unanswerable=True,
    )  # fmt: skip
    with pytest.raises(ValueError, match="record ids.*'synthetic' has none"):
        prepare(config)
    assert not (tmp_path / "ids").exists()  # refused before the run folder was made


@pytest.mark.parametrize("key", ["record_id", "content"])
def test_end_to_end_removing_one_record_changes_one_propagation_teachers_votes(tmp_path, monkeypatch, key):
    """Through prepare(): the run's own data, keys, partition and propagation teachers."""
    import pate_stab.run.prepare as prepare_module

    real_load_task = prepare_module.load_task
    removed: list[int] = []

    def load_with_ids(config, *, generator, data=None):
        task = real_load_task(config, generator=generator, data=data)
        n = task.private_x.shape[0]
        task.private_ids = torch.randperm(10**6, generator=torch.Generator().manual_seed(1))[:n]
        if removed:  # the neighbour: record 5 removed, every later row shifts up by one
            keep = torch.arange(n) != removed[0]
            task.private_x, task.private_y = task.private_x[keep], task.private_y[keep]
            task.private_ids = task.private_ids[keep]
        return task

    monkeypatch.setattr(prepare_module, "load_task", load_with_ids)

    def votes(name):
        config = TransferConfig(
            run_name=name, checkpoints_dir=str(tmp_path), partition_key=key, num_private=600, num_public=120,
            num_eval=50, num_teachers=25, teacher_model="propagate", graph_neighbors=10, num_queries=20,
            allow_unanswerable=True,
        )  # fmt: skip
        prep = prepare(config)
        return prep.teachers.predict_votes(prep.task.public_x)  # (k, n_pool)

    full = votes("full")
    removed.append(5)
    neighbour = votes("removed")
    changed = int((full != neighbour).any(dim=1).sum())
    assert changed <= TransferConfig(partition_key=key).teachers_changed == 1
