"""One-run canary audit of the knowledge-transfer pipeline (pate_stab.audit.transfer_canary).

Fast tier: the canary construction, and on a tiny setting the correct releaser is not refuted
while the plurality vote released without noise is (from the labels and from the student).
Slow tier: the recipe-sized audit of the correct releaser in both noise modes.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from pate_stab.aggregation.votes import vote_gap, vote_histogram
from pate_stab.audit.transfer_canary import audit_transfer, make_canary_task, nearest_neighbour_votes
from pate_stab.teachers.partition import shard_of_records

TINY = {"num_canaries": 40, "num_teachers": 21, "num_private": 600, "num_task_queries": 50}


def test_each_canary_breaks_a_tie_and_moves_one_vote():
    task = make_canary_task(**TINY, generator=torch.Generator().manual_seed(0))
    votes = nearest_neighbour_votes(task)
    canary_queries = task.query_canary >= 0
    counts = vote_histogram(votes[:, canary_queries], 2)
    assert torch.equal(counts.argmax(1), task.secrets)  # the noiseless plurality is the coin
    assert bool((vote_gap(counts) == 1).all())  # distance 0 under both versions
    # the shards are the record-keyed partition's
    assert torch.equal(
        task.shard,
        shard_of_records(task.key, task.num_teachers, generator=torch.Generator().manual_seed(task.partition_seed)),
    )
    # removing one included canary changes exactly one teacher's vote, on its own query only
    i = int(torch.nonzero(task.secrets == 1)[0])
    record = int(torch.nonzero(task.canary == i)[0])  # the canary comes before the helpers
    assert task.y[record] == 1 and task.offset[record] == 10.0
    keep = torch.ones(task.key.numel(), dtype=torch.bool)
    keep[record] = False
    smaller = dataclasses.replace(
        task,
        x=task.x[keep],
        canary=task.canary[keep],
        offset=task.offset[keep],
        y=task.y[keep],
        key=task.key[keep],
        shard=task.shard[keep],
    )
    changed = nearest_neighbour_votes(smaller) != votes
    assert int(changed.sum()) == 1
    teacher, query = (int(v) for v in torch.nonzero(changed)[0])
    assert teacher == int(task.shard[record]) and int(task.query_canary[query]) == i


def test_helpers_land_in_the_intended_shards():
    task = make_canary_task(**TINY, generator=torch.Generator().manual_seed(1))
    helpers = (task.canary >= 0) & (task.offset > 0)
    per_canary = torch.bincount(task.canary[helpers], minlength=40)
    included = task.secrets.sum()
    assert int(per_canary.sum()) == 40 * task.num_teachers + int(included)
    for i in range(3):  # every teacher holds exactly one record at canary i, its own teacher two if included
        shards = torch.bincount(task.shard[task.canary == i], minlength=task.num_teachers)
        assert int(shards.max()) == 1 + int(task.secrets[i]) and int(shards.min()) == 1
    with pytest.raises(ValueError, match="odd"):
        make_canary_task(num_canaries=4, num_teachers=4, generator=torch.Generator())


@pytest.mark.statistical
def test_correct_releaser_is_not_refuted_and_noiseless_plurality_is():
    """95 % one-run audits: a correct claim is refuted with probability at most 5 % (fixed seeds here)."""
    correct = audit_transfer(
        "stability", **TINY, epsilon=1.0, student_epochs=None, generator=torch.Generator().manual_seed(2)
    )
    assert not correct["violates"] and correct["canary_queries_answered"] == 0
    broken = audit_transfer(
        "plurality", **TINY, epsilon=1.0, student_epochs=20, generator=torch.Generator().manual_seed(2)
    )
    assert broken["claimed_epsilon"] == pytest.approx(correct["claimed_epsilon"])
    assert broken["canary_queries_answered"] == 40  # every released canary label is its coin (see above)
    assert broken["labels"]["epsilon_lower_bound"] > broken["claimed_epsilon"]
    assert broken["student"]["epsilon_lower_bound"] > broken["claimed_epsilon"]  # the student carries it too
    assert broken["violates"]


def test_bad_arguments():
    with pytest.raises(ValueError, match="variant"):
        audit_transfer("stable", **TINY, epsilon=1.0, generator=torch.Generator())
    with pytest.raises(ValueError, match="epsilon"):
        audit_transfer("stability", **TINY, epsilon=float("nan"), generator=torch.Generator())


@pytest.mark.slow
@pytest.mark.statistical
@pytest.mark.parametrize("variant", ["stability", "stability-secure"])
def test_recipe_sized_audit_of_the_correct_releaser(variant):
    report = audit_transfer(
        variant,
        num_canaries=500,
        num_teachers=401,
        epsilon=3.0,
        num_private=8000,
        num_task_queries=200,
        generator=torch.Generator().manual_seed(0),
    )
    assert report["task_queries_answered"] > 150  # the releaser is not vacuous: stable queries are answered
    assert report["max_certifiable_epsilon"] > report["claimed_epsilon"]  # the audit could refute the claim
    assert not report["violates"], report
