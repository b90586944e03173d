"""Every releaser refuses votes that are not its k teachers' votes, before anything is spent or drawn.

A release call's vote histograms must sum to the same k on every row, and that k must be the
releaser's ``num_teachers`` (the registry passes the settings' k; a releaser built without one
keeps its first call's k); the soft-label releaser's scores must have k rows. ``release --votes``
refuses such files; the Python releasers must refuse them too, with the ledger untouched and no
noise drawn (a later valid call releases exactly what a fresh releaser with the same seed does).
"""

from __future__ import annotations

import pytest
import torch

from pate_stab.aggregation.baseline_releaser import BaselineReleaser
from pate_stab.aggregation.baselines import GNMax
from pate_stab.aggregation.registry import AggregatorSettings, make_releaser
from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate

K, M, C = 400, 30, 3
HISTOGRAM_AGGREGATORS = ["stability", "lnmax", "gnmax", "confident-gnmax"]


def _settings(name: str) -> AggregatorSettings:
    return AggregatorSettings(
        epsilon=8.0, delta=1e-5, num_queries=M, num_teachers=K, max_unstable=5, noise="seeded",
        confident_fraction=0.3,
    )  # fmt: skip


def _counts(k: int = K) -> torch.Tensor:
    """(M, C) histograms of k teachers (every row sums to k) whose releases depend on the noise: 20
    gaps near the stability releaser's threshold (72–89: distance ≈ 38), then 10 near ties (gap 0–4,
    for the PATE aggregators)."""
    gen = torch.Generator().manual_seed(3)
    gap = torch.where(torch.arange(M) >= 20, torch.randint(0, 5, (M,), generator=gen),
                      torch.randint(72, 90, (M,), generator=gen))  # fmt: skip
    top = (k + gap) // 2
    counts = torch.zeros(M, C, dtype=torch.int64)
    first = torch.arange(M) % C
    counts[torch.arange(M), first] = top
    counts[torch.arange(M), (first + 1) % C] = k - top
    return counts


def _scores(k: int = K) -> torch.Tensor:
    """(k, M) scores around 0.80–0.84: the soft-label releaser's tests pass or fail with the noise."""
    gen = torch.Generator().manual_seed(4)
    mean = 0.80 + 0.04 * torch.rand(M, generator=gen, dtype=torch.float64)
    return (mean + 0.04 * torch.randn(k, M, generator=gen, dtype=torch.float64)).clamp(0.0, 1.0)


def _ledger(path) -> PrivacyLedger:
    return PrivacyLedger(path, run_id="t", budget_epsilon=100.0, budget_delta=1e-3)


def _bad_inputs(name: str) -> list[tuple[torch.Tensor, str]]:
    """Inputs of the wrong teachers, each with the message expected."""
    if name == "stability-soft":
        return [(_scores(K - 1), "399 votes, not the releaser's k = 400")]
    uneven = _counts().clone()
    uneven[7, 0] += 1  # one query with a vote too many
    return [
        (uneven, "query 7 has 401 votes, not the releaser's k = 400"),
        (_counts(K - 1), "query 0 has 399 votes, not the releaser's k = 400"),
    ]


@pytest.mark.parametrize("name", [*HISTOGRAM_AGGREGATORS, "stability-soft"])
def test_votes_of_other_teachers_are_refused_before_spending(tmp_path, name):
    ledger = _ledger(tmp_path / "a.jsonl")
    rel = make_releaser(name, _settings(name), generator=torch.Generator().manual_seed(1), ledger=ledger, spend_id="s")
    before = (tmp_path / "a.jsonl").read_bytes()
    for bad, message in _bad_inputs(name):
        with pytest.raises(ValueError, match=message):
            rel.release(bad, query_ids=torch.arange(M))
        assert (tmp_path / "a.jsonl").read_bytes() == before  # nothing charged, nothing recorded
        assert ledger.entries() == [] and rel.summary()["queries_seen"] == 0
    # no noise was drawn by the refused calls: the valid call releases what a fresh releaser does
    good = _scores() if name == "stability-soft" else _counts()
    labels = rel.release(good, query_ids=torch.arange(M)).labels
    fresh = make_releaser(name, _settings(name), generator=torch.Generator().manual_seed(1),
                          ledger=_ledger(tmp_path / "b.jsonl"), spend_id="s")  # fmt: skip
    expected = fresh.release(good, query_ids=torch.arange(M)).labels
    assert torch.equal(labels.nan_to_num(-2.0), expected.nan_to_num(-2.0))
    assert len(ledger.entries()) == 1


def test_a_releaser_without_a_declared_k_keeps_its_first_calls():
    """Built directly, without ``num_teachers``: the first call's k is kept for every later call."""
    cal = calibrate(epsilon=8.0, delta=1e-5, num_queries=M, max_unstable=5, mode="tight")
    soft = calibrate(epsilon=8.0, delta=1e-5, num_queries=M, max_unstable=5, mode="tight", soft_labels=True)
    gnmax = GNMax.calibrate(epsilon=8.0, delta=1e-5, num_queries=M, noise="seeded")
    gen = torch.Generator().manual_seed(0)
    hard = [
        StabilityReleaser(cal, noise="seeded", generator=gen),
        BaselineReleaser(gnmax, generator=gen),
    ]
    for rel in hard:
        rel.release(_counts()[:10])
        seen = rel.summary()["queries_seen"]
        with pytest.raises(ValueError, match="399 votes, not the releaser's k = 400"):
            rel.release(_counts(K - 1)[10:20])
        assert rel.summary()["queries_seen"] == seen
    uneven = _counts().clone()
    uneven[2, 2] -= 1  # its top class
    with pytest.raises(ValueError, match="query 2 has 399 votes, not row 0's 400"):
        StabilityReleaser(cal, noise="seeded", generator=gen).release(uneven)
    with pytest.raises(ValueError, match="query 2 has 399 votes, not row 0's 400"):
        BaselineReleaser(gnmax, generator=gen).release(uneven)
    rel_soft = SoftLabelReleaser(soft, gamma=0.1, noise="seeded", generator=gen)
    rel_soft.release(_scores()[:, :10])
    with pytest.raises(ValueError, match="scores"):
        rel_soft.release(_scores(K + 5)[:, 10:20])
    # declared at construction: the first call is checked against it
    with pytest.raises(ValueError, match="400 votes, not the releaser's k = 250"):
        StabilityReleaser(cal, noise="seeded", generator=gen, num_teachers=250).release(_counts())
    with pytest.raises(ValueError, match="num_teachers"):
        BaselineReleaser(gnmax, generator=gen, num_teachers=0)
