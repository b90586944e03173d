"""A spend id buys exactly one draw of noise (DESIGN.md fact 7; audit defect D1).

Every aggregator records its outputs with its spend before they leave; a releaser built again
under a recorded spend id returns the recorded outputs call by call and refuses any call that
was not recorded. It never draws fresh noise under the old charge.
"""

from __future__ import annotations

import json

import pytest
import torch

from pate_stab.aggregation import StabilityReleaser, compare_aggregators, vote_histogram
from pate_stab.aggregation.base import inputs_digest, query_ids_digest
from pate_stab.aggregation.baseline_releaser import BaselineReleaser
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.errors import BudgetExhaustedError, ReplayedSpendError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger, anchor_path, line_digest
from pate_stab.privacy.ledger.private_files import keyed_digest, tensor_bytes
from pate_stab.privacy.mechanisms.calibration import calibrate

# T close to m: the releaser does not halt within these tests, so every call draws
CAL = calibrate(epsilon=1.0, delta=1e-5, num_queries=60, max_unstable=45, mode="tight")
SOFT_CAL = calibrate(epsilon=4.0, delta=1e-5, num_queries=60, max_unstable=3, mode="tight", soft_labels=True)


def _ledger(tmp_path, name="ledger.jsonl", budget=100.0):
    return PrivacyLedger(tmp_path / name, run_id="t", budget_epsilon=budget, budget_delta=1e-3)


def _borderline_counts(m=60, seed=0):
    """Two-class histograms of k teachers whose distances sit near the threshold: which pass depends on the noise."""
    gen = torch.Generator().manual_seed(seed)
    spread = int(CAL.noise_scale)
    gap = (int(2 * (CAL.threshold + 1)) + torch.randint(-spread, spread + 1, (m,), generator=gen)).clamp(min=0)
    k = int(2 * (CAL.threshold + 1)) + spread + 1  # ≥ every gap
    top = (k + gap) // 2  # the gap is then 2·top − k: the drawn gap, or one less
    return torch.stack([top, k - top], dim=1)


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_four_secure_releasers_on_one_spend_id_release_one_draw(tmp_path):
    # audit reproduction: four StabilityReleaser(noise="secure", spend_id="same-id") gave four
    # different label vectors while the ledger showed one spend
    counts = _borderline_counts()
    ledger = _ledger(tmp_path)
    outs = []
    for _ in range(4):
        rel = StabilityReleaser(CAL, generator=None, noise="secure", ledger=ledger, spend_id="same-id")
        outs.append(rel.release(counts).labels)
    assert all(torch.equal(outs[0], o) for o in outs[1:])
    assert len(ledger.entries()) == 1
    assert ledger.spent() == (CAL.certified_epsilon, CAL.certified_delta)


def test_first_call_outputs_are_in_the_spend_line(tmp_path):
    counts = _borderline_counts()
    ledger = _ledger(tmp_path)
    rel = StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s")
    labels = rel.release(counts).labels
    lines = [json.loads(line) for line in (tmp_path / "ledger.jsonl").read_text().splitlines()]
    spend = [r for r in lines if r["kind"] == "spend"]
    assert len(lines) == 2 and len(spend) == 1  # header + one line holding the spend and its labels
    assert spend[0]["output"]["labels"] == labels.tolist()


def test_replay_returns_recorded_calls_then_refuses(tmp_path):
    counts = _borderline_counts(m=60)
    ledger = _ledger(tmp_path)
    first = StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s")
    a = first.release(counts[:20]).labels
    b = first.release(counts[20:40]).labels
    before = (tmp_path / "ledger.jsonl").read_bytes()
    again = StabilityReleaser(CAL, noise="seeded", generator=_gen(2), ledger=ledger, spend_id="s")
    assert torch.equal(again.release(counts[:20]).labels, a)
    assert torch.equal(again.release(counts[20:40]).labels, b)
    assert again.summary()["answered"] == first.summary()["answered"]
    assert again.summary()["replayed_calls"] == 2
    with pytest.raises(ReplayedSpendError, match="'s'.*new run"):
        again.release(counts[40:])
    assert (tmp_path / "ledger.jsonl").read_bytes() == before  # nothing drawn, nothing written


def test_replay_with_other_inputs_is_refused(tmp_path):
    counts = _borderline_counts()
    ledger = _ledger(tmp_path)
    StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s").release(counts[:30])
    with pytest.raises(ReplayedSpendError, match="other inputs"):
        StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s").release(counts[30:])


def test_owner_continues_after_its_own_calls(tmp_path):
    counts = _borderline_counts()
    ledger = _ledger(tmp_path)
    rel = StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s")
    online = torch.cat([rel.release(counts[i : i + 10]).labels for i in range(0, 60, 10)])
    # same generator, no ledger
    batch = StabilityReleaser(CAL, noise="seeded", generator=_gen(1)).release(counts).labels
    assert torch.equal(online, batch)
    entry = ledger.entries()[0]
    assert len(entry.outputs) == 6 or rel.halted  # one output per call that drew (none after halting)


def test_racing_releaser_adopts_the_recorded_outputs_and_stops_drawing(tmp_path):
    counts = _borderline_counts()
    ledger = _ledger(tmp_path)
    a = StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s")
    b = StabilityReleaser(CAL, noise="seeded", generator=_gen(2), ledger=ledger, spend_id="s")  # built before a spends
    la = a.release(counts[:30]).labels
    lb = b.release(counts[:30]).labels  # b drew, found a's record, and returns a's labels
    assert torch.equal(la, lb)
    a.release(counts[30:])  # the owner may go on
    b2 = b.release(counts[30:]).labels  # b replays a's second call
    assert torch.equal(b2, torch.tensor(ledger.entries()[0].outputs[1]["labels"]))
    assert len(ledger.entries()) == 1


def test_soft_releaser_replays(tmp_path):
    gen = _gen(5)
    scores = torch.rand(400, 40, generator=gen, dtype=torch.float64)
    ledger = _ledger(tmp_path)
    a = SoftLabelReleaser(SOFT_CAL, gamma=0.1, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="soft")
    out = a.release(scores).labels
    b = SoftLabelReleaser(SOFT_CAL, gamma=0.1, noise="seeded", generator=_gen(2), ledger=ledger, spend_id="soft")
    again = b.release(scores).labels
    assert torch.equal(torch.isnan(out), torch.isnan(again))
    assert torch.equal(out.nan_to_num(-1), again.nan_to_num(-1))
    assert b.summary()["failed_tests"] == a.summary()["failed_tests"]


@pytest.mark.parametrize(
    "make",
    [
        lambda: LNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=60),
        lambda: GNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=60),
        lambda: ConfidentGNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=60, threshold=100.0),
    ],
    ids=["lnmax", "gnmax", "confident-gnmax"],
)
def test_baselines_replay_and_refuse(tmp_path, make):
    votes = torch.randint(0, 4, (200, 60), generator=_gen(9))  # split votes: noise decides
    counts = vote_histogram(votes, 4)
    ledger = _ledger(tmp_path)
    first = BaselineReleaser(make(), generator=_gen(1), ledger=ledger, spend_id="b")
    a = first.release(counts[:30]).labels
    for seed in (2, 3):
        again = BaselineReleaser(make(), generator=_gen(seed), ledger=ledger, spend_id="b")
        assert torch.equal(again.release(counts[:30]).labels, a)
        assert again.queries_seen == 30
        with pytest.raises(ReplayedSpendError):
            again.release(counts[30:])
    assert len(ledger.entries()) == 1


def test_compare_aggregators_replays_instead_of_redrawing(tmp_path):
    # audit reproduction: seeds 1, 2, 3 on one ledger gave three different GNMax releases
    votes = torch.randint(0, 3, (300, 80), generator=_gen(4))
    truth = torch.randint(0, 3, (80,), generator=_gen(5))
    ledger = PrivacyLedger(tmp_path / "l.jsonl", run_id="t", budget_epsilon=1.5, budget_delta=1e-4)
    rows = [
        compare_aggregators(
            votes, truth, num_classes=3, epsilon=1.0, delta=1e-5, max_unstable=3, generator=_gen(seed),
            aggregators=("gnmax",), ledger=ledger, noise="seeded",
        )[0]
        for seed in (1, 2, 3)
    ]  # fmt: skip
    assert rows[0] == rows[1] == rows[2]
    assert ledger.spent()[0] == pytest.approx(1.0, rel=1e-6)  # one spend, not three
    labels = ledger.entries()[0].outputs[0]["labels"]
    assert len(labels) == 80


def test_budget_is_checked_before_any_noise_is_drawn(tmp_path):
    ledger = _ledger(tmp_path, budget=0.5)
    rel = StabilityReleaser(CAL, noise="seeded", generator=_gen(1), ledger=ledger, spend_id="s")
    with pytest.raises(BudgetExhaustedError, match="nothing was drawn"):
        rel.release(_borderline_counts())
    assert ledger.entries() == []
    assert rel.queries_seen == 0  # the sparse vector processed nothing
    assert len((tmp_path / "ledger.jsonl").read_text().splitlines()) == 1  # the header only


# -- what the (published) ledger records of a call's inputs ------------------------------------------


def test_ledger_holds_no_unkeyed_digest_of_the_votes(tmp_path):
    """The votes are private: the ledger records public query positions, or a MAC under a private key.

    On the old code the ledger stored SHA-256 of the vote histograms, which anyone who knows the
    other records can recompute for each neighbouring data set.
    """
    counts = _borderline_counts(m=40)
    ledger = _ledger(tmp_path)
    StabilityReleaser(CAL, generator=_gen(1), ledger=ledger, spend_id="ids").release(
        counts[:20], query_ids=torch.arange(100, 120)
    )
    StabilityReleaser(CAL, generator=_gen(1), ledger=ledger, spend_id="mac").release(counts[20:])
    text = (tmp_path / "ledger.jsonl").read_text()
    for votes in (counts, counts[:20], counts[20:]):
        assert inputs_digest(votes) not in text
    outputs = {e.spend_id: e.outputs[0] for e in ledger.entries()}
    assert outputs["ids"]["queries"] == query_ids_digest(torch.arange(100, 120)) and "inputs_mac" not in outputs["ids"]
    key = ledger.private_key()
    assert (tmp_path / "private_key").stat().st_mode & 0o777 == 0o600
    assert key.hex() not in text
    assert outputs["mac"]["inputs_mac"] == keyed_digest(key, tensor_bytes(counts[20:]))


def test_replay_checks_the_recorded_query_positions(tmp_path):
    counts = _borderline_counts(m=40)
    ledger = _ledger(tmp_path)
    first = StabilityReleaser(CAL, generator=_gen(1), ledger=ledger, spend_id="s")
    labels = first.release(counts[:20], query_ids=torch.arange(20)).labels
    again = StabilityReleaser(CAL, generator=_gen(2), ledger=ledger, spend_id="s")
    assert torch.equal(again.release(counts[:20], query_ids=torch.arange(20)).labels, labels)
    with pytest.raises(ReplayedSpendError, match="other inputs"):
        StabilityReleaser(CAL, generator=_gen(2), ledger=ledger, spend_id="s").release(
            counts[:20], query_ids=torch.arange(1, 21)
        )
    with pytest.raises(ValueError, match="query_ids has 3 entries for 20"):
        StabilityReleaser(CAL, generator=_gen(2), ledger=ledger, spend_id="t").release(
            counts[:20], query_ids=torch.arange(3)
        )


def test_ledgers_with_the_old_unkeyed_digest_still_replay(tmp_path):
    counts = _borderline_counts(m=20)
    ledger = _ledger(tmp_path)
    StabilityReleaser(CAL, generator=_gen(1), ledger=ledger, spend_id="s").release(counts)
    ledger.close()
    path = tmp_path / "ledger.jsonl"
    header, spend = (json.loads(line) for line in path.read_text().splitlines())
    output = {k: v for k, v in spend["output"].items() if k != "inputs_mac"} | {"inputs": inputs_digest(counts)}
    # ledgers of that time had no anchor, nor the budget_rule in their header that shows one was written
    header = {k: v for k, v in header.items() if k not in ("sha256", "budget_rule")}
    header["sha256"] = line_digest(header)
    spend = {k: v for k, v in spend.items() if k != "sha256"} | {"output": output, "prev": header["sha256"]}
    spend["sha256"] = line_digest(spend)
    path.write_text(json.dumps(header) + "\n" + json.dumps(spend) + "\n")
    anchor_path(path).unlink()
    old = _ledger(tmp_path)
    labels = StabilityReleaser(CAL, generator=_gen(5), ledger=old, spend_id="s").release(counts).labels
    assert labels.tolist() == output["labels"]
    with pytest.raises(ReplayedSpendError, match="other inputs"):
        StabilityReleaser(CAL, generator=_gen(5), ledger=old, spend_id="s").release(counts.flip(0))
