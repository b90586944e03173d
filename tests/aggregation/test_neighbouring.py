"""The neighbouring relation each guarantee holds under (DESIGN.md fact 1; audit defect D2).

Content-keyed shards: add/remove one record changes one teacher, replace-one can change two.
Record-id keys: a replacement keeps its shard. Replace-one over content keys is covered by
group privacy over two teachers (distance ⌊d/2⌋, doubled baseline sensitivities).
"""

from __future__ import annotations

import functools
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.votes import distance_to_instability, top_label
from pate_stab.audit.harness import dp_test
from pate_stab.teachers import partition_indices, record_keys_from_tensors
from tests._stats import assert_not_refuted, assert_refuted
from tests.aggregation.test_releasers import LAM, T, _hard_mechanism

# --------------------------------------------------------------------------- partition keys


def _shard_of(keys, k=50, seed=3):
    shards = partition_indices(keys, k, generator=torch.Generator().manual_seed(seed))
    owner = torch.empty(sum(s.numel() for s in shards), dtype=torch.int64)
    for j, s in enumerate(shards):
        owner[s] = j
    return owner


def test_replacing_a_content_keyed_record_can_move_it_to_another_teacher():
    gen = torch.Generator().manual_seed(0)
    x, y = torch.randn(400, 5, generator=gen), torch.randint(0, 3, (400,), generator=gen)
    before = _shard_of(record_keys_from_tensors(x, y))
    moved = 0
    for i in range(40):
        x2 = x.clone()
        x2[i] = torch.randn(5, generator=gen)  # replace record i
        after = _shard_of(record_keys_from_tensors(x2, y))
        changed = (after != before).nonzero().flatten().tolist()
        assert changed in ([], [i])  # only the replaced record can move ...
        moved += bool(changed)
    assert moved > 30  # ... and it usually does: its old and new teachers both change (k = 50)


def test_replacing_a_record_keeps_its_shard_under_record_id_keys():
    ids = torch.arange(400)
    assert torch.equal(_shard_of(ids), _shard_of(ids.clone()))  # the shard depends on the id alone


def test_removing_a_content_keyed_record_changes_one_shard():
    gen = torch.Generator().manual_seed(1)
    x, y = torch.randn(300, 4, generator=gen), torch.randint(0, 2, (300,), generator=gen)
    full = partition_indices(record_keys_from_tensors(x, y), 20, generator=torch.Generator().manual_seed(5))
    keep = torch.arange(300) != 17
    part = partition_indices(record_keys_from_tensors(x[keep], y[keep]), 20, generator=torch.Generator().manual_seed(5))
    original = torch.arange(300)[keep]
    differ = [j for j in range(20) if set(full[j].tolist()) - {17} != set(original[part[j]].tolist())]
    assert differ == []  # every shard keeps its records; only record 17's shard lost one


# --------------------------------------------------------------------------- distance with group size


def _two_vote_moves(counts):
    c = counts.numel()
    for a in range(c):
        for b in range(c):
            for a2 in range(c):
                for b2 in range(c):
                    new = counts.clone()
                    new[a] -= 1
                    new[b] += 1
                    new[a2] -= 1
                    new[b2] += 1
                    if (new >= 0).all():
                        yield new


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(0, 12), min_size=2, max_size=4))
def test_group_distance_has_sensitivity_one_under_two_moved_votes(row):
    counts = torch.tensor(row, dtype=torch.int64)
    d = int(distance_to_instability(counts.unsqueeze(0), group_size=2))
    label = int(top_label(counts.unsqueeze(0)))
    for new in _two_vote_moves(counts):
        d2 = int(distance_to_instability(new.unsqueeze(0), group_size=2))
        assert abs(d - d2) <= 1
        if int(top_label(new.unsqueeze(0))) != label:
            assert d == 0 and d2 == 0  # whenever two moved votes can change the argmax


def test_one_teacher_distance_moves_by_two_under_two_moved_votes():
    # why group privacy is needed: [9, 1] → [7, 3] moves the one-teacher distance 3 → 1
    a, b = torch.tensor([[9, 1]]), torch.tensor([[7, 3]])
    assert int(distance_to_instability(a)) - int(distance_to_instability(b)) == 2
    assert int(distance_to_instability(a, group_size=2)) - int(distance_to_instability(b, group_size=2)) == 1


# --------------------------------------------------------------------------- DP tests

# Two teachers change their votes: class 0 → 1 on seven queries and 1 → 0 on the last. Under a
# replace-one claim with content-keyed shards this is a neighbouring pair.
TWO_TEACHERS_A = [[9, 1, 0]] * 7 + [[7, 3, 0]]
TWO_TEACHERS_B = [[7, 3, 0]] * 7 + [[9, 1, 0]]


@pytest.mark.statistical
def test_replace_one_without_group_privacy_is_flagged():
    # α = 1e-6: the claimed (2T/λ)-DP for one changed teacher is refuted on a two-teacher pair
    mech = _hard_mechanism(functools.partial(distance_to_instability, group_size=1))
    gen = torch.Generator().manual_seed(41)
    res = dp_test(mech, TWO_TEACHERS_A, TWO_TEACHERS_B, epsilon=2 * T / LAM, generator=gen)
    assert_refuted(res)


@pytest.mark.statistical
def test_replace_one_with_group_privacy_holds():
    mech = _hard_mechanism(functools.partial(distance_to_instability, group_size=2))
    gen = torch.Generator().manual_seed(42)
    res = dp_test(mech, TWO_TEACHERS_A, TWO_TEACHERS_B, epsilon=2 * T / LAM, generator=gen)
    assert_not_refuted(res)


@pytest.mark.parametrize(
    "cls, kwargs, scales",
    [
        (LNMax, {}, ("noise_scale",)),
        (GNMax, {}, ("sigma",)),
        (ConfidentGNMax, {"threshold": 50.0}, ("sigma1", "sigma2")),
    ],
)
def test_baselines_double_their_noise_for_two_teachers(cls, kwargs, scales):
    one = cls.calibrate(epsilon=2.0, delta=1e-5, num_queries=100, noise="seeded", **kwargs)
    two = cls.calibrate(epsilon=2.0, delta=1e-5, num_queries=100, teachers_changed=2, noise="seeded", **kwargs)
    for name in scales:
        assert getattr(two, name) == pytest.approx(2 * getattr(one, name), rel=1e-12)
    assert two.certified_epsilon == pytest.approx(one.certified_epsilon, rel=1e-9)
    # the same noise claimed for two teachers certifies a larger ε
    same_noise = cls(
        **{n: getattr(one, n) for n in scales}, num_queries=100, delta=1e-5, teachers_changed=2, noise="seeded",
        **kwargs,
    )  # fmt: skip
    assert same_noise.certified_epsilon > 1.5 * one.certified_epsilon
    assert two.summary()["teachers_changed"] == 2


# --------------------------------------------------------------------------- the run states its relation


@pytest.mark.parametrize(
    "neighbouring, key, teachers",
    [("add_remove", "content", 1), ("replace_one", "content", 2), ("replace_one", "record_id", 1)],
)
def test_config_relation(neighbouring, key, teachers):
    from pate_stab.run import TransferConfig

    cfg = TransferConfig(neighbouring=neighbouring, partition_key=key)
    assert cfg.teachers_changed == teachers
    assert cfg.privacy_relation()["teachers_changed_per_neighbour"] == teachers


def test_default_run_states_add_remove_in_report_and_ledger(tmp_path):
    from pate_stab.run import TransferConfig, run_transfer

    cfg = TransferConfig(
        run_name="rel", checkpoints_dir=str(tmp_path), num_private=3000, num_public=200, num_eval=200,
        num_teachers=40, teacher_epochs=2, num_queries=50, epsilon=30.0, max_unstable=5, student_epochs=2,
        allow_unanswerable=True, allow_empty_student=True, accelerator="cpu",
    )  # fmt: skip
    report = run_transfer(cfg)
    header = json.loads((tmp_path / "rel" / "ledger.jsonl").read_text().splitlines()[0])
    assert header["neighbouring"] == report["ledger"]["neighbouring"] == report["privacy"]["neighbouring"]
    assert report["privacy"] == cfg.privacy_relation()
    assert report["privacy"]["neighbouring"] == "add_remove"
    q = report["queries"]
    assert q["seen"] + q["not_asked"] == cfg.num_queries and q["seen"] == q["answered"] + q["abstained"]
