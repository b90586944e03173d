"""One privacy unit per ledger (DESIGN.md facts 12–13): the header states it, a record spend may be
counted in a label ledger (a changed label is a replaced record), a label spend is refused in a
record ledger (a label guarantee implies no record guarantee), and a ledger reopened under the
other unit is refused."""

from __future__ import annotations

import json

import pytest

from pate_stab.errors import LedgerError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger, replace_one_cost
from pate_stab.run.report import PlannedSpend, plan_cost


def _label_ledger(path):
    return PrivacyLedger(path, budget_epsilon=10.0, budget_delta=1e-3, run_id="r", neighbouring="replace_one",
                         privacy_unit="label", timestamps=False)  # fmt: skip


def test_the_header_and_the_report_state_the_unit(tmp_path):
    with _label_ledger(tmp_path / "l.jsonl") as ledger:
        assert ledger.privacy_unit == "label" and ledger.report()["privacy_unit"] == "label"
    header = json.loads((tmp_path / "l.jsonl").read_text().splitlines()[0])
    assert header["privacy_unit"] == "label" and header["neighbouring"] == "replace_one"
    with PrivacyLedger(tmp_path / "r.jsonl", budget_epsilon=1.0, budget_delta=1e-5, run_id="r") as ledger:
        assert ledger.report()["privacy_unit"] == "record"


def test_a_label_ledger_counts_neighbours_that_replace_one_label(tmp_path):
    with pytest.raises(ValueError, match="neighbouring='replace_one'"):
        PrivacyLedger(tmp_path / "l.jsonl", budget_epsilon=1.0, budget_delta=1e-5, run_id="r", privacy_unit="label")
    with pytest.raises(ValueError, match="privacy_unit"):
        PrivacyLedger(tmp_path / "x.jsonl", budget_epsilon=1.0, budget_delta=1e-5, run_id="r", privacy_unit="person")


def test_a_record_spend_counts_in_a_label_ledger(tmp_path):
    with _label_ledger(tmp_path / "l.jsonl") as ledger:
        # replace-one record privacy gives label privacy at the same (ε, δ)
        entry = ledger.spend("heads", epsilon=1.0, delta=0.0, unit="record", relation="replace_one")
        assert (entry.epsilon, entry.delta, entry.unit) == (1.0, 0.0, "record")
        # add/remove record privacy: group privacy over the removal and the addition
        entry = ledger.spend("dpsgd", epsilon=1.0, delta=1e-5, unit="record", relation="add_remove")
        assert (entry.epsilon, entry.delta) == replace_one_cost(1.0, 1e-5)
        entry = ledger.spend("release", epsilon=2.0, delta=1e-5)  # the ledger's own unit
        assert entry.unit is None
        spent = ledger.spent()
    # reread from the file: the units and counts hold
    with _label_ledger(tmp_path / "l.jsonl") as ledger:
        assert ledger.spent() == spent
        assert ledger.entry("heads").unit == "record" and ledger.entry("release").unit is None
    assert plan_cost([PlannedSpend("a", 1.0, 1e-5, "add_remove", "record")], neighbouring="replace_one",
                     privacy_unit="label") == replace_one_cost(1.0, 1e-5)  # fmt: skip


def test_a_label_spend_is_refused_in_a_record_ledger(tmp_path):
    path = tmp_path / "r.jsonl"
    with PrivacyLedger(path, budget_epsilon=10.0, budget_delta=1e-3, run_id="r", timestamps=False) as ledger:
        with pytest.raises(ValueError, match="implies nothing for a record's inputs"):
            ledger.spend("rr", epsilon=1.0, delta=0.0, unit="label")
        with pytest.raises(ValueError, match="implies nothing"):
            ledger.check_budget(epsilon=1.0, delta=0.0, unit="label")
        assert ledger.entries() == []
    with pytest.raises(ValueError, match="label guarantee implies no record guarantee"):
        plan_cost([PlannedSpend("rr", 1.0, 0.0, unit="label")], neighbouring="add_remove", privacy_unit="record")


def test_a_ledger_reopened_under_the_other_unit_is_refused(tmp_path):
    _label_ledger(tmp_path / "l.jsonl").close()
    with pytest.raises(LedgerError, match="privacy_unit='label'"):
        PrivacyLedger(tmp_path / "l.jsonl", budget_epsilon=10.0, budget_delta=1e-3, run_id="r",
                      neighbouring="replace_one", timestamps=False)  # fmt: skip
    PrivacyLedger(tmp_path / "r.jsonl", budget_epsilon=10.0, budget_delta=1e-3, run_id="r",
                  neighbouring="replace_one").close()  # fmt: skip
    with pytest.raises(LedgerError, match="privacy_unit='record'"):
        _label_ledger(tmp_path / "r.jsonl")
