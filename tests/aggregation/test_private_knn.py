"""Private-kNN (pate_stab.aggregation.private_knn): votes, sensitivity, coins, noise and accounting.

The sensitivity claims are properties over random small data sets (hypothesis): adding or removing any
one record, or changing one record's label, moves any query's vote histogram by at most one +1 and one
−1 (ℓ1 2, ℓ2 √2, the largest count by 1), for the same coins of the other records. The statistical
tests state α.
"""

from __future__ import annotations

import math

import pytest
import torch
from dp_accounting import dp_event
from dp_accounting.rdp import rdp_privacy_accountant
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import binomtest, norm

from pate_stab.aggregation.private_knn import (
    NeighbourIndex,
    PrivateKNN,
    PrivateKNNReleaser,
    draw_coins,
    exact_sampling_rate,
    knn_histograms,
    zyww20_epsilon,
)
from pate_stab.aggregation.registry import AggregatorSettings, calibrated_noise, make_releaser
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.accounting.composition import accountant_epsilon
from pate_stab.privacy.accounting.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    GaussianEvent,
    PoissonSampledEvent,
    PrivacyEvent,
    SelfComposedEvent,
)
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.noise.secure import SeededRandomSource

ALPHA = 1e-6


def _hist(
    x: torch.Tensor, y: torch.Tensor, query: torch.Tensor, coins: torch.Tensor, k: int, c: int, resolution=None
) -> torch.Tensor:
    index = NeighbourIndex(x, y, num_classes=c, resolution=resolution)
    return knn_histograms(index.distances(query), index.labels, coins, num_neighbours=k, num_classes=c)[0]


def _moved_by_one_vote(a: torch.Tensor, b: torch.Tensor) -> None:
    diff = (a - b).abs()
    assert int(diff.sum()) <= 2, (a, b)
    assert float(diff.double().norm()) <= math.sqrt(2) + 1e-12, (a, b)
    assert abs(int(a.max()) - int(b.max())) <= 1, (a, b)


# integer coordinates on a small grid: many ties at the K-th distance
_data = st.integers(min_value=1, max_value=9).flatmap(
    lambda n: st.tuples(
        st.lists(st.tuples(st.integers(-2, 2), st.integers(-2, 2)), min_size=n, max_size=n),
        st.lists(st.integers(0, 2), min_size=n, max_size=n),
        st.lists(st.booleans(), min_size=n, max_size=n),
        st.integers(0, n - 1),
        st.tuples(st.integers(-2, 2), st.integers(-2, 2)),
        st.integers(1, 5),
    )
)


@settings(max_examples=300, deadline=None)
@given(_data, st.sampled_from([None, 0.5, 0.01]))
def test_adding_or_removing_one_record_moves_one_vote(data, resolution):
    """D and D minus record j, the other records keeping their coins: ℓ1 ≤ 2, ℓ2 ≤ √2, max count ±1
    (pairwise distances, and the exact grid search at two steps: the coarse one clips and ties a lot)."""
    points, labels, coins, j, q, k = data
    x = torch.tensor(points, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.int64)
    sampled = torch.tensor(coins).unsqueeze(0)
    query = torch.tensor([q], dtype=torch.float32)
    keep = torch.arange(len(points)) != j
    with_j = _hist(x, y, query, sampled, k, 3, resolution)
    without_j = _hist(x[keep], y[keep], query, sampled[:, keep], k, 3, resolution)
    _moved_by_one_vote(with_j, without_j)
    assert int(with_j.sum()) == min(k, int(sampled.sum()))  # the K nearest sampled, or all sampled


@settings(max_examples=300, deadline=None)
@given(_data, st.integers(0, 2))
def test_changing_one_label_moves_one_vote(data, new_label):
    """Label privacy: the same inputs and coins, one label changed: ℓ1 ≤ 2, ℓ2 ≤ √2, max count ±1."""
    points, labels, coins, j, q, k = data
    x = torch.tensor(points, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.int64)
    y2 = y.clone()
    y2[j] = new_label
    sampled = torch.tensor(coins).unsqueeze(0)
    query = torch.tensor([q], dtype=torch.float32)
    _moved_by_one_vote(_hist(x, y, query, sampled, k, 3), _hist(x, y2, query, sampled, k, 3))


def test_ties_at_the_kth_distance_go_to_the_lowest_positions():
    x = torch.tensor([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0], [0.0, -1.0]])  # all at distance 1
    y = torch.tensor([0, 1, 2, 0])
    coins = torch.tensor([[False, True, True, True]])
    votes = _hist(x, y, torch.zeros(1, 2), coins, 2, 3)
    assert votes.tolist() == [0, 1, 1]  # records 1 and 2: the first two sampled positions


def test_grid_distances_do_not_depend_on_the_other_records_or_the_block():
    """The exact search: a pair's squared grid distance is the same integer whatever else is indexed or queried."""
    g = torch.Generator().manual_seed(2)
    x, q = torch.randn(500, 170, generator=g) * 3, torch.randn(64, 170, generator=g) * 3
    y = torch.zeros(500, dtype=torch.int64)
    res = NeighbourIndex.public_resolution(q)
    full = NeighbourIndex(x, y, num_classes=2, resolution=res).distances(q)
    part = NeighbourIndex(x[123:124], y[123:124], num_classes=2, resolution=res).distances(q[5:6])
    assert torch.equal(full[5:6, 123:124], part)
    assert torch.equal(full, torch.round(full)) and float(full.max()) < 2.0**53
    grid = lambda t: torch.round(t.double() / res).clamp(-4096, 4096)  # noqa: E731
    assert torch.equal(full, torch.cdist(grid(q), grid(x)).square().round())


def test_blocked_search_matches_one_block():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(300, 5, generator=g), torch.randint(0, 4, (300,), generator=g)
    q = torch.randn(37, 5, generator=g)
    coins = torch.rand(37, 300, generator=g) < 0.3
    one = NeighbourIndex(x, y, num_classes=4, block=1000)
    blocks = NeighbourIndex(x, y, num_classes=4, block=8)
    rows = iter([coins])

    def same(b: int) -> torch.Tensor:
        return next(rows)

    whole = one.histograms(q, same, num_neighbours=7)
    offset = [0]

    def sliced(b: int) -> torch.Tensor:
        out = coins[offset[0] : offset[0] + b]
        offset[0] += b
        return out

    assert torch.equal(blocks.histograms(q, sliced, num_neighbours=7), whole)
    assert (whole.sum(dim=1) == 7).all()


@pytest.mark.statistical
def test_secure_coins_keep_each_record_at_the_exact_rate():
    rate = exact_sampling_rate(0.05)
    assert rate.denominator == 1 << 16 and abs(float(rate) - 0.05) <= 2**-17
    coins = draw_coins(200, 1000, rate, source=SeededRandomSource(3))
    kept = int(coins.sum())
    assert binomtest(kept, coins.numel(), float(rate)).pvalue > ALPHA
    # columns (records) and rows (queries) alike: no coin is reused
    assert binomtest(int(coins[:, 0].sum()) + int(coins[0].sum()), 1200, float(rate)).pvalue > ALPHA
    assert not torch.equal(coins[0], coins[1])


@pytest.mark.statistical
def test_gnmax_noise_has_the_claimed_sigma():
    """Two classes, counts (3, 0): P[label 0] = Φ(3/(σ√2)) for seeded noise of σ; α = 1e-6."""
    agg = PrivateKNN(sigma=4.0, sampling_rate=0.1, num_neighbours=3, num_queries=1, delta=1e-5, noise="seeded")
    labels = agg.sample(torch.tensor([3, 0]), 100_000, generator=torch.Generator().manual_seed(5))
    p = norm.cdf(3 / (4.0 * math.sqrt(2)))
    assert binomtest(int((labels == 0).sum()), labels.numel(), p).pvalue > ALPHA


def test_the_event_is_the_poisson_sampled_gaussian_of_dp_accounting():
    """Record privacy: ε from dp-accounting's PoissonSampledDpEvent(γ', GaussianDpEvent(σ/√2)) over m queries."""
    agg = PrivateKNN.calibrate(epsilon=1.0, delta=1e-5, num_queries=200, sampling_rate=0.05, num_neighbours=50)
    q = float(exact_sampling_rate(0.05))
    assert agg.per_query_event() == PoissonSampledEvent(q, DiscreteGaussianEvent(agg.sigma, math.sqrt(2)))
    direct = dp_event.SelfComposedDpEvent(
        dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(agg.sigma / math.sqrt(2))), 200
    )
    eps = rdp_privacy_accountant.RdpAccountant().compose(direct).get_epsilon(1e-5)
    assert eps == pytest.approx(agg.certified_epsilon, rel=1e-9) and eps <= 1.0 + 1e-6
    # calibrating the answer to sensitivity 1 would give a smaller σ, which this accounting refuses
    short = dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(agg.sigma)), 200)
    assert rdp_privacy_accountant.RdpAccountant().compose(short).get_epsilon(1e-5) < 0.8
    # subsampling pays: the unsampled GNMax needs a far larger σ for the same queries
    unsampled = PrivateKNN.calibrate(epsilon=1.0, delta=1e-5, num_queries=200, sampling_rate=0.05,
                                     num_neighbours=50, privacy_unit="label")  # fmt: skip
    assert unsampled.per_query_event() == DiscreteGaussianEvent(unsampled.sigma, math.sqrt(2))
    assert unsampled.sigma > 3 * agg.sigma


def test_threshold_check_and_answer_are_sampled_together():
    agg = PrivateKNN.calibrate(epsilon=2.0, delta=1e-5, num_queries=20, sampling_rate=0.1, num_neighbours=20,
                               threshold=12.0, sigma_ratio=3.0, noise="seeded", accountant="rdp")  # fmt: skip
    event = agg.per_query_event()
    assert isinstance(event, PoissonSampledEvent)
    assert event.event == ComposedEvent((GaussianEvent(agg.sigma1, 1.0), GaussianEvent(agg.sigma, math.sqrt(2))))
    assert agg.sigma1 == pytest.approx(3 * agg.sigma)
    folded = 1 / math.sqrt(1 / agg.sigma1**2 + 2 / agg.sigma**2)
    assert event.noise_multiplier == pytest.approx(folded)
    assert accountant_epsilon(agg.event(), delta=1e-5, accountant="rdp") <= 2.0 + 1e-6
    assert PrivacyEvent.from_dict(agg.event().to_dict()) == agg.event()


@pytest.mark.parametrize("noise", ["secure", "seeded"])
def test_theirs_is_the_data_independent_figure_without_a_threshold(noise):
    """[ZYWW20]'s figure with nothing data-dependent in it (no threshold, every query answered) is the
    certified ε of the same release."""
    agg = PrivateKNN.calibrate(epsilon=1.0, delta=1e-5, num_queries=200, sampling_rate=0.05, num_neighbours=50,
                               noise=noise, accountant="rdp")  # fmt: skip
    theirs = zyww20_epsilon(sigma=agg.sigma, sigma1=None, sampling_rate=0.05, num_queries=200, num_answered=200,
                            delta=1e-5, noise=noise)  # fmt: skip
    assert theirs == pytest.approx(agg.certified_epsilon, rel=1e-9)


def test_theirs_is_their_two_sampled_compositions_and_grows_with_the_answers():
    """With a threshold: m sampled checks (σ1, sensitivity 1) and a sampled answers (σ, sensitivity √2; their
    RDP α/σ²), computed here independently through dp-accounting; more answers, a larger figure."""
    q = float(exact_sampling_rate(0.15))
    sigma, sigma1, m = 25.0, 75.0, 300

    def direct(a: int) -> float:
        events = [dp_event.SelfComposedDpEvent(dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma1)), m)]
        if a:
            answer = dp_event.PoissonSampledDpEvent(q, dp_event.GaussianDpEvent(sigma / math.sqrt(2)))
            events.append(dp_event.SelfComposedDpEvent(answer, a))
        return rdp_privacy_accountant.RdpAccountant().compose(dp_event.ComposedDpEvent(events)).get_epsilon(1e-5)

    figures = [zyww20_epsilon(sigma=sigma, sigma1=sigma1, sampling_rate=0.15, num_queries=m, num_answered=a,
                              delta=1e-5, noise="seeded") for a in (0, 100, 200, 300)]  # fmt: skip
    assert figures == pytest.approx([direct(a) for a in (0, 100, 200, 300)], rel=1e-9)
    assert all(x < y for x, y in zip(figures, figures[1:], strict=False))
    # calibrated as one jointly sampled (check, answer) per query, the release certifies more than theirs at a = m
    agg = PrivateKNN(sigma=sigma, sigma1=sigma1, threshold=180.0, sampling_rate=0.15, num_neighbours=300,
                     num_queries=m, delta=1e-5, noise="seeded", accountant="rdp")  # fmt: skip
    assert agg.certified_epsilon > figures[-1]


def test_theirs_refuses_counts_that_cannot_be():
    kw = {"sigma": 5.0, "sampling_rate": 0.1, "num_queries": 10, "delta": 1e-5}
    with pytest.raises(ValueError, match="exceeds"):
        zyww20_epsilon(sigma1=15.0, num_answered=11, **kw)
    with pytest.raises(ValueError, match="without a threshold"):
        zyww20_epsilon(sigma1=None, num_answered=9, **kw)


def test_sampled_discrete_gaussian_is_rdp_only():
    event = PoissonSampledEvent(0.1, DiscreteGaussianEvent(3.0, math.sqrt(2)))
    with pytest.raises(TypeError, match="RDP"):
        event.to_pld()
    with pytest.raises(TypeError, match="RDP"):
        event.to_dp_event(accountant="pld")
    with pytest.raises(TypeError, match="Gaussian"):
        PoissonSampledEvent(0.1, SelfComposedEvent(GaussianEvent(1.0), 2))
    with pytest.raises(ValueError, match="sampling_rate"):
        PoissonSampledEvent(1.5, GaussianEvent(1.0))


def _settings(**kw) -> AggregatorSettings:
    base = {"epsilon": 2.0, "delta": 1e-5, "num_queries": 20, "num_teachers": 5, "max_unstable": 5,
            "sampling_rate": 0.5}  # fmt: skip
    return AggregatorSettings(**(base | kw))


def _index() -> tuple[NeighbourIndex, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    centres = torch.tensor([[4.0, 0.0], [-4.0, 0.0]])
    y = torch.randint(0, 2, (200,), generator=g)
    x = centres[y] + torch.randn(200, 2, generator=g)
    queries = centres[torch.arange(20) % 2] + 0.1 * torch.randn(20, 2, generator=g)
    return NeighbourIndex(x, y, num_classes=2), queries


def test_registry_releases_spends_once_and_replays(tmp_path):
    index, queries = _index()
    ledger = PrivacyLedger(tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=10.0, budget_delta=1e-3)
    rel = make_releaser("confident-private-knn", _settings(), generator=None, ledger=ledger, spend_id="knn",
                        neighbours=index, source=SeededRandomSource(0))  # fmt: skip
    ids = torch.arange(20)
    labels = rel.release(queries, query_ids=ids).labels
    answered = labels != -1
    assert int(answered.sum()) >= 1 and set(labels.tolist()) <= {-1, 0, 1}
    entry = ledger.entry("knn")
    assert entry is not None and entry.epsilon <= 2.0 + 1e-6
    again = make_releaser("confident-private-knn", _settings(), generator=None, ledger=ledger, spend_id="knn",
                          neighbours=index)  # fmt: skip
    assert torch.equal(again.release(queries, query_ids=ids).labels, labels)  # replayed, nothing drawn
    with pytest.raises(BudgetExhaustedError):  # the spend covers 20 queries
        again.release(queries[:1], query_ids=ids[:1])
    summary = rel.summary()
    assert summary["sampling_rate_exact"] == "1/2" and summary["num_neighbours"] == 5
    assert "no derivation" in summary["data_dependent"]


def test_registry_refuses_what_the_accounting_does_not_cover():
    index, _ = _index()
    with pytest.raises(TypeError, match="NeighbourIndex"):
        make_releaser("private-knn", _settings(), generator=None)
    with pytest.raises(ValueError, match="replace-one record"):
        make_releaser("private-knn", _settings(neighbouring="replace_one"), generator=None, neighbours=index)
    with pytest.raises(ValueError, match="replace-one record"):
        calibrated_noise("private-knn", _settings(teachers_changed=2))
    label = calibrated_noise("private-knn", _settings(privacy_unit="label", neighbouring="replace_one"))
    assert isinstance(label, PrivateKNN) and label.per_query_event() == DiscreteGaussianEvent(label.sigma, math.sqrt(2))
    with pytest.raises(ValueError, match="features"):
        PrivateKNNReleaser(calibrated_noise("private-knn", _settings()), index).release(torch.zeros(3, 4))
