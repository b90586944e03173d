"""A release in rounds: each round its own spend, replayed on rerun; the later rounds' steered
selection reads no vote outside the releaser (counterfactual check, with a peeking steer as the
negative control); a one-round config takes the one-release path."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import torch

import pate_stab.run.rounds as run_rounds
import pate_stab.run.transfer as run_transfer_module
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.prepare import prepare
from pate_stab.run.rounds import release_rounds, round_spend_id, steered_order
from tests.run.test_transfer import ledger_of, small

TWO = {"rounds": 2, "round_budget_shares": (0.5, 0.5), "num_queries": 60, "epsilon": 12.0}


@pytest.fixture(scope="module")
def two_rounds(tmp_path_factory):
    cfg = small(tmp_path_factory.mktemp("rounds"), **TWO)
    return cfg, run_transfer(cfg)


def test_steered_order_gives_the_least_answered_classes_turns_first():
    proba = torch.tensor([
        [0.9, 0.05, 0.05],  # 0: class 0
        [0.1, 0.8, 0.1],  # 1: class 1
        [0.2, 0.7, 0.1],  # 2: class 1
        [0.1, 0.2, 0.7],  # 3: class 2, excluded
        [0.6, 0.3, 0.1],  # 4: class 0
        [0.1, 0.1, 0.8],  # 5: class 2
        [0.1, 0.95, 0.05],  # 6: class 1
    ])  # fmt: skip
    # answered so far: class 0 twice, class 2 once, class 1 never
    order = steered_order(proba, exclude=torch.tensor([3]), answered_labels=torch.tensor([0, 2, 0]))
    # loads (2, 0, 1): class 1 takes 6, then 1 (loads 2, 2, 1) → class 2 takes 5 → class 0 takes 0, class 1 takes 2,
    # then class 0 takes 4
    assert order.tolist() == [6, 1, 5, 0, 2, 4]
    assert sorted(order.tolist()) == [0, 1, 2, 4, 5, 6]
    with pytest.raises(ValueError, match="answered_labels must hold classes in \\[0, 2\\]"):
        steered_order(proba, exclude=torch.tensor([], dtype=torch.int64), answered_labels=torch.tensor([3]))
    with pytest.raises(ValueError, match="exclude must hold pool positions"):
        steered_order(proba, exclude=torch.tensor([7]), answered_labels=torch.tensor([0]))


def test_round_settings_are_checked_and_round_trip():
    cfg = TransferConfig(rounds=3, round_budget_shares=[0.5, 0.25, 0.25])
    assert cfg.round_shares == (0.5, 0.25, 0.25)
    assert TransferConfig.from_dict(cfg.to_dict()) == cfg
    assert TransferConfig(rounds=4).round_shares == (0.25,) * 4 and TransferConfig().round_shares == (1.0,)
    for kw, message in [
        ({"rounds": 0}, "rounds must be a positive integer"),
        ({"rounds": 2, "round_budget_shares": (1.0,)}, "one share per round"),
        ({"rounds": 2, "round_budget_shares": (0.7, 0.7)}, "must sum to 1"),
        ({"rounds": 2, "round_budget_shares": (1.5, -0.5)}, "positive numbers"),
        ({"rounds": 2, "aggregator": "gnmax"}, "stability aggregator only"),
    ]:
        with pytest.raises(ValueError, match=message):
            TransferConfig(**kw)
    assert round_spend_id("r", "stability", 2.0, 1, 2) == "r:stability:eps=2.0:round=1/2"


def test_each_round_is_charged_to_the_ledger_and_reported(two_rounds):
    cfg, report = two_rounds
    with ledger_of(cfg) as ledger:
        entries = ledger.entries()
        spent = ledger.spent()
    assert [e.spend_id for e in entries] == [
        round_spend_id(cfg.run_name, "stability", cfg.epsilon, r, 2) for r in (1, 2)
    ]
    # each round is calibrated to its share (the tight calibration may land just under it)
    for e in entries:
        assert 0.99 * cfg.epsilon / 2 <= e.epsilon <= cfg.epsilon / 2 * (1 + 1e-12)
        assert 0 < e.delta <= cfg.delta / 2 * (1 + 1e-12)
    assert spent == (math.fsum(e.epsilon for e in entries), math.fsum(e.delta for e in entries))
    assert spent[0] <= cfg.epsilon * (1 + 1e-12) and spent[1] <= cfg.delta * (1 + 1e-12)
    rounds = report["rounds"]
    assert [r["round"] for r in rounds] == [1, 2] and [r["spend_id"] for r in rounds] == [e.spend_id for e in entries]
    assert [r["selection"] for r in rounds] == ["first", "steered"]
    assert all(r["offered"] <= cfg.num_queries for r in rounds)
    assert sum(r["answered"] for r in rounds) == report["queries"]["answered"]
    assert math.isclose(report["epsilon"], spent[0]) and [r["epsilon"] for r in rounds] == [e.epsilon for e in entries]
    for r, entry in zip(rounds, entries, strict=True):
        index = entry.result["selection"]["index"] if r["round"] == 2 else list(range(r["offered"]))
        labels = torch.tensor(entry.result["labels"])
        assert len(index) == r["offered"] and r["answered"] == int((labels != -1).sum())
        assert r["classes_covered"] == len(set(labels[labels != -1].tolist()))
    # round 2 never asks about a point round 1 asked about
    assert not set(entries[1].result["selection"]["index"]) & set(range(rounds[0]["offered"]))


def test_rerun_replays_both_rounds_without_steering_or_spending(two_rounds, monkeypatch):
    cfg, report = two_rounds
    with ledger_of(cfg) as ledger:
        entries, spent = ledger.entries(), ledger.spent()

    def refuse(*args, **kwargs):
        raise AssertionError("a replayed round was steered again")

    monkeypatch.setattr(run_rounds, "_steer", refuse)
    again = run_transfer(replace(cfg, student_epochs=2))  # a student setting: only the student is refit
    assert [r["replayed"] for r in again["rounds"]] == [True, True]
    assert again["resumed"]["release"] is True
    assert [{k: v for k, v in r.items() if k != "replayed"} for r in again["rounds"]] == [
        {k: v for k, v in r.items() if k != "replayed"} for r in report["rounds"]
    ]
    with ledger_of(cfg) as ledger:
        assert ledger.entries() == entries and ledger.spent() == spent


class _Votes:
    """Vote histograms from a fixed table; records which pool points were asked for."""

    def __init__(self, table: torch.Tensor) -> None:
        self.table, self.asked, self.seconds = table, [], 0.0

    def histograms(self, index):
        self.asked += index.tolist()
        return self.table[index]


def _copies(generators: dict[str, torch.Generator]) -> dict[str, torch.Generator]:
    """Fresh generators in the same states (each counterfactual run draws the same numbers)."""
    out = {}
    for name, g in generators.items():
        copy = torch.Generator()
        copy.set_state(g.get_state())
        out[name] = copy
    return out


def _rounds_with(prep, table, tmp_path, name):
    votes = _Votes(table)
    cfg = prep.config
    with PrivacyLedger(tmp_path / f"{name}.jsonl", run_id=cfg.run_name, budget_epsilon=cfg.epsilon,
                       budget_delta=cfg.delta) as ledger:  # fmt: skip
        out = release_rounds(replace(prep, votes=votes, generators=_copies(prep.generators)), ledger)
    return out, votes


def _counterfactual(cfg, tmp_path):
    """Round-2 selection with the true votes, and with every vote outside round 1's processed
    queries changed (each histogram's classes rotated)."""
    prep = prepare(cfg)
    true = prep.votes.histograms(torch.arange(prep.task.public_x.shape[0]))
    first, votes = _rounds_with(prep, true, tmp_path, "a")
    seen = first.rounds[0].index[: int(first.rounds[0].summary["queries_seen"])]
    changed = true.roll(1, dims=1)
    changed[seen] = true[seen]
    second, _ = _rounds_with(prep, changed, tmp_path, "b")
    return first, second, votes


def test_round_two_selection_does_not_depend_on_votes_outside_the_releaser(two_rounds, tmp_path):
    cfg, _ = two_rounds
    first, second, votes = _counterfactual(cfg, tmp_path)
    assert torch.equal(first.rounds[0].labels, second.rounds[0].labels)
    assert first.rounds[1].index.numel() > 0
    assert torch.equal(first.rounds[1].index, second.rounds[1].index)
    # votes were asked for only of points handed to a releaser, once each
    offered = torch.cat([r.index for r in first.rounds]).tolist()
    assert votes.asked == offered and len(set(offered)) == len(offered)


def test_counterfactual_check_catches_a_steer_that_peeks_at_votes(two_rounds, tmp_path, monkeypatch):
    cfg, _ = two_rounds

    def peeking(prep, earlier, generator, bottom):  # orders the pool by the teachers' votes
        table = prep.votes.table
        exclude = torch.cat([r.index for r in earlier])
        proba = table.double() / table.sum(1, keepdim=True)
        return steered_order(proba, exclude=exclude, answered_labels=torch.empty(0, dtype=torch.int64))

    monkeypatch.setattr(run_rounds, "_steer", peeking)
    first, second, _ = _counterfactual(cfg, tmp_path)
    assert not torch.equal(first.rounds[1].index, second.rounds[1].index)


def test_one_round_config_takes_the_one_release_path(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a one-round run went through release_rounds")

    monkeypatch.setattr(run_transfer_module, "release_rounds", refuse)
    cfg = small(tmp_path, num_queries=60)
    report = run_transfer(replace(cfg, rounds=1, round_budget_shares=None))
    assert "rounds" not in report
    with ledger_of(cfg) as ledger:
        (entry,) = ledger.entries()
    assert entry.spend_id == f"{cfg.run_name}:stability:eps=8.0"  # the one-release id, the whole budget
    assert 0.99 * cfg.epsilon <= entry.epsilon <= cfg.epsilon and report["epsilon"] == entry.epsilon


def test_compare_refuses_rounds(tmp_path):
    from pate_stab.run.compare import run_compare

    with pytest.raises(ValueError, match="rounds=2 is supported by transfer only"):
        run_compare(small(tmp_path, **TWO), epsilons=[12.0], aggregators=["stability"])


def test_rounds_that_would_exhaust_the_pool_are_refused_before_any_spend(tmp_path):
    cfg = small(tmp_path, rounds=3, num_queries=200, epsilon=24.0)  # a pool of 400: round 3 would find none
    with pytest.raises(ValueError, match="cannot serve 3 rounds of num_queries=200"):
        run_transfer(cfg)
    with ledger_of(cfg) as ledger:
        assert ledger.entries() == []


def test_the_cli_prints_a_report_of_a_release_in_rounds(two_rounds, capsys):
    from pate_stab.cli.output import _print_report

    _, report = two_rounds
    _print_report(report)  # a KeyError here once stopped every `pate-stab transfer` with rounds after the run
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("query selection"))
    assert "round 1: first (pool order)" in line and "round 2: steered (1 rounds: " in line
