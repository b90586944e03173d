"""The "spread" query selection: ⊥-aware, class-balanced picks with a coverage share, within m
queries and one releaser, and independent of the votes of points never released (the peeking
selector of test_selection is the negative control of the same counterfactual check)."""

from __future__ import annotations

import pytest
import torch

from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.features.propagation import PoolGraph
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.selection.adaptive_batches import release_in_adaptive_batches
from pate_stab.selection.picks import per_class_order, spread_picks
from pate_stab.student.spreading import spread_labels
from tests.selection.test_selection import K, M, T, _counterfactual, _pool, _run

C = 3


def _spread_fn(x):
    graph = PoolGraph(num_neighbors=8, power=1.0, alpha=0.99, steps=30, standardize=True).fit(x)

    def spread(index, labels):
        classes = torch.where(labels != -1, labels, torch.full_like(labels, C))
        return spread_labels(graph.adjacency, index, classes, num_classes=C + 1, alpha=0.99, steps=30)

    return spread


def test_per_class_order_takes_turns_by_score():
    guess = torch.tensor([0, 0, 1, 0, 1])
    score = torch.tensor([0.9, 0.6, 0.8, 0.95, 0.7])
    assert per_class_order(guess, score, 4, num_classes=2).tolist() == [3, 2, 0, 4]
    assert per_class_order(guess, -score, 2, num_classes=2).tolist() == [1, 4]


def testspread_picks_skip_bottom_and_cover_the_least_reached():
    # rows: real-class shares (2 classes), ⊥ share, mass
    real = torch.tensor([[0.95, 0.0], [0.92, 0.0], [0.0, 0.97], [0.3, 0.1], [0.6, 0.0], [0.0, 0.91]])
    bottom = torch.tensor([0.05, 0.08, 0.03, 0.6, 0.4, 0.09])
    mass = torch.tensor([5.0, 0.1, 3.0, 2.0, 1.0, 0.2])
    picks = spread_picks(real, bottom, mass, 4, coverage=0.5)
    # coverage (2 rows): confident rows by least mass, class by class → 1 (class 0), 5 (class 1);
    # then by confidence → 0 (class 0), 2 (class 1); row 3 (⊥ strongest) never before the rest
    assert picks.index.tolist() == [1, 5, 0, 2] and picks.coverage == 2
    no_cover = spread_picks(real, bottom, mass, 6, coverage=0.0)
    assert no_cover.index.tolist()[-1] == 3 and no_cover.coverage == 0
    assert sorted(no_cover.index.tolist()) == list(range(6))


def test_spread_selection_answers_more_than_pool_order_within_m():
    x, votes = _pool()
    out, rel, offered = _run(x, votes, _spread_fn(x), strategy="spread", coverage=0.25)
    assert offered == out.index.tolist() and out.index.numel() <= M
    assert any(r["criterion"] == "spread per class" for r in out.rounds)
    answered = int((out.labels != -1).sum())
    assert answered == rel.summary()["answered"]
    cal = calibrate(epsilon=4.0, delta=1e-5, num_queries=M, max_unstable=T, mode="tight")
    seeded = StabilityReleaser(cal, noise="seeded", generator=torch.Generator().manual_seed(1))
    in_order = seeded.release(votes[:M]).labels
    assert answered > int((in_order != -1).sum())


def test_spread_selection_does_not_depend_on_unreleased_votes():
    x, votes = _pool()
    first, second = _counterfactual(x, votes, lambda v: _spread_fn(x), strategy="spread", coverage=0.25)
    assert torch.equal(first.index, second.index) and torch.equal(first.labels, second.labels)


def test_counterfactual_check_catches_a_spread_selector_that_peeks_at_votes():
    x, votes = _pool()

    def peeking(v):
        def spread(index, labels):  # uses every point's votes, released or not
            share = v.double() / K
            return torch.cat([share, torch.zeros(share.shape[0], 1)], 1), torch.ones(share.shape[0])

        return spread

    first, second = _counterfactual(x, votes, peeking, strategy="spread", coverage=0.25)
    assert not torch.equal(first.index, second.index)


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"spread": None}, TypeError, "spread function"),
        ({"coverage": 1.5}, ValueError, "coverage"),
    ],
)
def test_bad_spread_arguments(kwargs, error, message):
    x, votes = _pool()
    args = {"spread": _spread_fn(x), "coverage": 0.25, **kwargs}
    with pytest.raises(error, match=message):
        release_in_adaptive_batches(x, num_queries=M, strategy="spread", release=lambda i: votes[i].argmax(1),
                          halted=lambda: False, round_size=10, generator=torch.Generator().manual_seed(0),
                          **args)  # fmt: skip
