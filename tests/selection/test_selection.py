"""Query selection: public-only first round, per-class confidence order, round sizes, and the
contract of release_in_adaptive_batches — at most m queries, one releaser, and no dependence on the votes
of points that were never released (checked counterfactually, with a peeking selector as the
negative control)."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.selection.adaptive_batches import next_round_size, release_in_adaptive_batches
from pate_stab.selection.picks import confident_per_class
from pate_stab.selection.representatives import kmeans_representatives

C, K, N, M, T = 3, 400, 600, 150, 6


def _pool():
    """Three Gaussian blobs; votes unanimous at the blob centres and split towards the edges."""
    gen = torch.Generator().manual_seed(0)
    centres = torch.tensor([[6.0, 0.0], [-3.0, 5.0], [-3.0, -5.0]])
    y = torch.arange(N) % C
    x = centres[y] + 2.5 * torch.randn(N, 2, generator=gen)
    share = torch.softmax(-torch.cdist(x, centres) / 2, dim=1)  # (N, C) vote shares: high near a centre
    votes = torch.floor(share * K).long()
    votes[torch.arange(N), votes.argmax(1)] += K - votes.sum(1)
    return x, votes


def _nearest_centroid(x):
    """A selector's model from released labels only: distance to the answered points' class means."""

    def confidence(index, labels, candidates):
        ok = labels != -1
        means = torch.stack([x[index[ok & (labels == c)]].mean(0) if bool((ok & (labels == c)).any())
                             else torch.full((2,), 1e6) for c in range(C)])  # fmt: skip
        return torch.softmax(-torch.cdist(x[candidates], means), dim=1)

    return confidence


def _run(x, votes, selector, *, seed=1, strategy="student-confidence", coverage=0.0):
    """One selection through one releaser; ``selector`` is the confidence (or, for "spread", the
    spread) function."""
    cal = calibrate(epsilon=4.0, delta=1e-5, num_queries=M, max_unstable=T, mode="tight")
    rel = StabilityReleaser(cal, noise="seeded", generator=torch.Generator().manual_seed(seed))
    offered: list[int] = []

    def release(index):
        assert not set(index.tolist()) & set(offered), "a point was offered twice"
        offered.extend(index.tolist())
        return rel.release(votes[index]).labels

    chosen = {"spread": selector, "coverage": coverage} if strategy == "spread" else {"confidence": selector}
    out = release_in_adaptive_batches(
        x, num_queries=M, strategy=strategy, release=release, halted=lambda: rel.halted, round_size=10,
        max_unstable=T, generator=torch.Generator().manual_seed(seed), **chosen,
    )  # fmt: skip
    return out, rel, offered


def test_kmeans_representatives_one_per_blob_and_distinct():
    gen = torch.Generator().manual_seed(3)
    centres = torch.tensor([[0.0, 0.0], [50.0, 0.0], [0.0, 50.0]])
    x = torch.cat([c + torch.randn(40, 2, generator=gen) for c in centres])
    picks = kmeans_representatives(x, 3, generator=torch.Generator().manual_seed(0))
    assert sorted((picks // 40).tolist()) == [0, 1, 2]
    many = kmeans_representatives(x, 200, generator=torch.Generator().manual_seed(0))
    assert many.numel() == 120 and many.unique().numel() == 120


def test_confident_per_class_takes_turns():
    proba = torch.tensor([[0.9, 0.1], [0.6, 0.4], [0.2, 0.8], [0.95, 0.05], [0.3, 0.7]])
    # class 0 by confidence: rows 3, 0, 1; class 1: rows 2, 4
    assert confident_per_class(proba, 4).tolist() == [3, 2, 0, 4]
    assert confident_per_class(proba, 9).tolist() == [3, 2, 0, 4, 1]


def test_next_round_size():
    assert next_round_size(round_size=20, bottom_left=16, last_bottom=2, last_size=20) == 58
    assert next_round_size(round_size=20, bottom_left=1, last_bottom=15, last_size=20) == 20
    assert next_round_size(round_size=5, bottom_left=10, last_bottom=0, last_size=40) == 210


def test_selection_answers_more_than_pool_order_within_m_and_one_releaser():
    x, votes = _pool()
    out, rel, offered = _run(x, votes, _nearest_centroid(x))
    assert offered == out.index.tolist() and out.index.numel() <= M
    assert len(out.rounds) >= 2 and sum(r["size"] for r in out.rounds) == out.index.numel()
    answered = int((out.labels != -1).sum())
    assert answered == rel.summary()["answered"]
    cal = calibrate(epsilon=4.0, delta=1e-5, num_queries=M, max_unstable=T, mode="tight")
    seeded = StabilityReleaser(cal, noise="seeded", generator=torch.Generator().manual_seed(1))
    in_order = seeded.release(votes[:M]).labels
    assert answered > int((in_order != -1).sum())
    with pytest.raises(BudgetExhaustedError):  # the one releaser is calibrated for M queries
        rel.release(votes[: M - rel.summary()["queries_seen"] + 1])


def _counterfactual(x, votes, selector_for, **selection):
    """Rerun with the votes of every point the first run never released made unanimous — the most
    attractive points there are to a selector that looks at votes."""
    first, _, _ = _run(x, votes, selector_for(votes), **selection)
    other = torch.zeros_like(votes)
    other[:, 0] = K
    other[first.index] = votes[first.index]
    second, _, _ = _run(x, other, selector_for(other), **selection)
    return first, second


def test_selection_does_not_depend_on_unreleased_votes():
    x, votes = _pool()
    first, second = _counterfactual(x, votes, lambda v: _nearest_centroid(x))
    assert torch.equal(first.index, second.index) and torch.equal(first.labels, second.labels)


def test_counterfactual_check_catches_a_selector_that_peeks_at_votes():
    x, votes = _pool()

    def peeking(v):
        def confidence(index, labels, candidates):  # reads the votes of unreleased candidates
            return v[candidates].double() / K

        return confidence

    first, second = _counterfactual(x, votes, peeking)
    assert not torch.equal(first.index, second.index)


def test_unseen_classes_are_looked_for_among_far_representatives():
    """While classes have no answered query, a share of each round goes to the representatives
    farthest from every answered query; with every class seen, none does."""
    x, votes = _pool()
    blob = votes.argmax(1)

    def only_blob_0(index):  # a release that answers blob-0 points only, with their class
        return torch.where(blob[index] == 0, blob[index], torch.full_like(index, -1))

    out = release_in_adaptive_batches(
        x, num_queries=60, strategy="student-confidence", release=only_blob_0, halted=lambda: False,
        confidence=_nearest_centroid(x), round_size=10, max_unstable=None, generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    reps = kmeans_representatives(x, 50, generator=torch.Generator().manual_seed(0))  # the same clustering
    first, second = out.rounds[0]["size"], out.rounds[1]
    assert second["explored"] == math.ceil(second["size"] * 2 / 3)  # classes 1 and 2 unseen
    explored = out.index[first : first + second["explored"]]
    answered = out.index[:first][out.labels[:first] != -1]
    far = torch.cdist(x[explored], x[answered]).min(1).values
    assert set(explored.tolist()) <= set(reps.tolist()) and bool((far[:-1] >= far[1:]).all())
    everything = release_in_adaptive_batches(
        x, num_queries=60, strategy="student-confidence", release=lambda i: blob[i], halted=lambda: False,
        confidence=_nearest_centroid(x), round_size=10, max_unstable=None, generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    assert len(set(blob[everything.index[:10]].tolist())) == C  # round 0 saw every class
    assert all(r["explored"] == 0 for r in everything.rounds[1:])


def test_halting_stops_selection():
    x, votes = _pool()
    votes = torch.full_like(votes, K // C)  # every query unstable: ⊥ until the releaser halts
    votes[:, 0] += K - votes.sum(1)
    out, rel, offered = _run(x, votes, _nearest_centroid(x))
    assert rel.halted and rel.summary()["answered"] == 0
    assert len(out.rounds) == 1 and len(offered) == 10  # round 0 exhausted T = 6; nothing offered after


def test_rounds_double_for_an_aggregator_that_never_halts():
    x, votes = _pool()
    out = release_in_adaptive_batches(
        x, num_queries=M, strategy="student-confidence", release=lambda i: votes[i].argmax(1), halted=lambda: False,
        confidence=_nearest_centroid(x), round_size=10, max_unstable=None, generator=torch.Generator().manual_seed(0),
    )  # fmt: skip
    assert [r["size"] for r in out.rounds] == [10, 10, 20, 40, 70]
    assert out.index.unique().numel() == M


def test_first_strategy_is_one_batch_in_pool_order():
    x, votes = _pool()
    calls = []

    def release(index):
        calls.append(index.tolist())
        return votes[index].argmax(1)

    out = release_in_adaptive_batches(x, num_queries=M, strategy="first", release=release, halted=lambda: False)
    assert calls == [list(range(M))] and out.index.tolist() == list(range(M))


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        (dict(strategy="best"), ValueError, "query_selection must be one of first, student-confidence"),
        (dict(strategy="student-confidence"), TypeError, "needs a confidence function"),
        (dict(strategy="first", num_queries=N + 1), ValueError, "exceeds the public pool"),
        (dict(strategy="student-confidence", round_size=0), ValueError, "round_size"),
    ],
)
def test_bad_arguments(kwargs, error, message):
    x, votes = _pool()
    args = dict(num_queries=M, release=lambda i: votes[i].argmax(1), halted=lambda: False,
                generator=torch.Generator().manual_seed(0), confidence=None)  # fmt: skip
    args.update(kwargs)
    with pytest.raises(error, match=message):
        release_in_adaptive_batches(x, **args)
