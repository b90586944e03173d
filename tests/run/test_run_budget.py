"""A run folder's budget cap is derived in one place (report.ledger_cap / plan_default_cap): the check made
before anything is trained (check_run_budget, no ledger yet) refuses exactly the plans that opening the
ledger (open_run_ledger) refuses, against the cap that the new ledger records."""

from __future__ import annotations

import itertools

import pytest

from pate_stab.errors import BudgetExhaustedError
from pate_stab.run.report import (
    PlannedSpend,
    check_run_budget,
    ledger_cap,
    open_run_ledger,
    plan_cost,
    plan_default_cap,
)


def test_ledger_cap_takes_the_users_epsilon_and_delta_where_set():
    assert ledger_cap((8.0, 1e-5), None, None) == (8.0, 1e-5)
    assert ledger_cap((8.0, 1e-5), 4, None) == (4.0, 1e-5)
    assert ledger_cap((8.0, 1e-5), None, 0.0) == (8.0, 0.0)
    assert plan_default_cap([PlannedSpend("a", 1.0, 1e-6)] * 3, neighbouring="add_remove", privacy_unit="record",
                            default_cap=None) == plan_cost([PlannedSpend("a", 1.0, 1e-6)] * 3,
                                                           neighbouring="add_remove")  # fmt: skip
    assert plan_default_cap([], neighbouring="add_remove", privacy_unit="record", default_cap=(2.0, 1e-5)) == (
        2.0,
        1e-5,
    )


@pytest.mark.parametrize(
    ("cap_epsilon", "cap_delta", "default_cap"),
    list(itertools.product([None, 1.5, 4.0], [None, 1e-7, 1e-4], [None, (2.5, 1e-5)])),
)
def test_check_before_training_refuses_what_opening_the_ledger_refuses(tmp_path, cap_epsilon, cap_delta, default_cap):
    planned = [PlannedSpend("run:a", 1.0, 1e-6), PlannedSpend("run:b", 1.0, 1e-6)]  # needs (2, 2e-6)
    args = {"run_name": "run", "neighbouring": "add_remove", "spends": lambda ledger: planned,
            "cap_epsilon": cap_epsilon, "cap_delta": cap_delta, "how": "-", "default_cap": default_cap}  # fmt: skip
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    try:
        check_run_budget(run_dir, **args)
        checked = None
    except BudgetExhaustedError as exc:
        checked = exc
    assert not (run_dir / "ledger.jsonl").exists()  # the check creates no ledger
    try:
        ledger = open_run_ledger(run_dir, **args)
        opened = None
    except BudgetExhaustedError as exc:
        opened = exc
    assert (checked is None) == (opened is None), (checked, opened)
    if opened is None:
        with ledger:
            default = plan_default_cap(
                planned, neighbouring="add_remove", privacy_unit="record", default_cap=default_cap
            )
            assert ledger.budget == ledger_cap(default, cap_epsilon, cap_delta)
