"""The data holder's budget: one ledger per private data set, across run folders (DESIGN.md fact 15)."""

from __future__ import annotations

import hashlib
import json
import math
import os
from pathlib import Path

import pytest
import torch

from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.ledger.data_budget import (
    BUDGET_DIR_ENV,
    DEFAULT_CAP_NAME,
    DataSetBudget,
    data_set_of,
    data_sets,
    default_cap,
)
from pate_stab.privacy.ledger.data_budget import budget_dir as default_budget_dir
from pate_stab.privacy.ledger.format import replace_one_cost
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.ledger.private_files import tensor_bytes
from tests.fork_worker import ask, worker_process

WORKER = Path(__file__).with_name("ledger_worker.py")


@pytest.fixture(autouse=True)
def first_runs_cap(budget_dir: Path) -> None:
    """The data holder has set no cap for new data sets here: a new data set takes its first run's
    (tests/conftest.py sets a large one for the other tests)."""
    (budget_dir / DEFAULT_CAP_NAME).unlink()


def _data(seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randn(20, 3, generator=gen), torch.randint(0, 3, (20,), generator=gen)]


def _run(folder: Path, data: list[torch.Tensor], *, cap: float = 2.0, **kwargs: str) -> PrivacyLedger:
    """A run folder's ledger that counts its spends in the data set's budget too, as a run opens it."""
    ledger = PrivacyLedger(folder / "ledger.jsonl", run_id=folder.name, budget_epsilon=cap, budget_delta=1e-5,
                           timestamps=False, **kwargs)  # type: ignore[arg-type]  # fmt: skip
    ds = data_set_of(data)
    ledger.count_in(DataSetBudget.open(ds, cap=ledger.budget, neighbouring=ledger.neighbouring,
                                       privacy_unit=ledger.privacy_unit))  # fmt: skip
    return ledger


def test_the_budget_folder_is_private_and_its_location_settable(tmp_path: Path, budget_dir: Path) -> None:
    assert os.environ[BUDGET_DIR_ENV] == str(budget_dir)  # tests/conftest.py: never the home folder's
    assert (
        budget_dir == Path(os.environ[BUDGET_DIR_ENV])
        and data_set_of(_data()).folder == budget_dir
        and data_set_of(_data(), folder=tmp_path / "elsewhere").folder == tmp_path / "elsewhere"
    )
    with _run(tmp_path / "a", _data()) as led:
        led.spend("s", epsilon=1.0, delta=0.0)
    assert budget_dir.stat().st_mode & 0o777 == 0o700
    files = {p.name: p.stat().st_mode & 0o777 for p in budget_dir.iterdir()}
    assert files and all(mode == 0o600 for mode in files.values()), files
    assert "private_key" in files
    os.environ.pop(BUDGET_DIR_ENV)  # restored by the fixture's monkeypatch
    assert default_budget_dir() == Path.home() / ".pate_stab" / "budget"


def test_a_data_set_is_known_by_a_keyed_mac_of_its_data(tmp_path: Path) -> None:
    x, y = _data()
    ds = data_set_of([x, y])
    assert data_set_of([x.clone(), y.clone()]) == ds  # the same data, loaded again
    assert data_set_of([x, (y + 1) % 3]).data_id != ds.data_id  # other labels: another data set
    # the id is no digest anyone can recompute from guessed data: an unkeyed hash of the same bytes differs
    plain = hashlib.sha256(b"".join(tensor_bytes(t) for t in (x, y))).hexdigest()
    assert ds.data_id != plain
    other_holder = data_set_of([x, y], folder=tmp_path / "other")  # another key: another id
    assert other_holder.data_id != ds.data_id
    key = (ds.folder / "private_key").read_bytes()
    (tmp_path / "copy").mkdir(mode=0o700)
    (tmp_path / "copy" / "private_key").write_bytes(key)
    os.chmod(tmp_path / "copy" / "private_key", 0o600)
    assert data_set_of([x, y], folder=tmp_path / "copy").data_id == ds.data_id  # the key file travels


def test_a_second_folder_on_the_same_data_is_refused_past_the_data_sets_cap(tmp_path: Path) -> None:
    with _run(tmp_path / "first", _data()) as led:  # the first run's cap (2) becomes the data set's
        led.spend("s1", epsilon=1.5, delta=0.0)
    with _run(tmp_path / "second", _data()) as led:  # a fresh folder, a fresh run ledger with a cap of its own
        before = (tmp_path / "second" / "ledger.jsonl").read_bytes()
        with pytest.raises(BudgetExhaustedError, match="data set's budget cap.*first.*gives nothing back"):
            led.check_budget(epsilon=1.0, delta=0.0)
        with pytest.raises(BudgetExhaustedError, match="data set's budget cap"):
            led.spend("s1", epsilon=1.0, delta=0.0)
        assert (tmp_path / "second" / "ledger.jsonl").read_bytes() == before  # nothing recorded in the run
        assert led.spent() == (0.0, 0.0)
        led.spend("s2", epsilon=0.5, delta=0.0)  # what is left of the data set's cap
    with _run(tmp_path / "other data", _data(seed=1)) as led:  # other data: its own budget
        led.spend("s1", epsilon=2.0, delta=0.0)
    (ds,) = [d for d in data_sets() if d == data_set_of(_data())]
    with DataSetBudget.open(ds, create=False) as budget:
        assert budget.ledger.spent() == (2.0, 0.0)
        assert sorted(e.metadata["folder"] for e in budget.ledger.entries()) == sorted(
            str((tmp_path / n).resolve()) for n in ("first", "second")
        )


def test_deleting_a_run_folder_gives_nothing_back(tmp_path: Path) -> None:
    with _run(tmp_path / "run", _data()) as led:
        led.spend("s1", epsilon=1.5, delta=0.0)
    for f in (tmp_path / "run").iterdir():
        f.unlink()
    (tmp_path / "run").rmdir()
    with _run(tmp_path / "run", _data()) as led:  # the same name, a new folder (a new key)
        with pytest.raises(BudgetExhaustedError, match="data set's budget cap"):
            led.spend("s1", epsilon=1.5, delta=0.0)


def test_a_spend_counted_there_before_a_crash_is_not_counted_twice(tmp_path: Path) -> None:
    with _run(tmp_path / "run", _data()) as led:
        budget = led.data_budget
        assert budget is not None and led.folder_id is not None
        # as if the process died after the data set's line, before the run folder's
        budget.charge(folder=led.folder_id, spend_id="s1", epsilon=1.5, delta=0.0, relation="add_remove",
                      unit="record", mechanism="m", run="run", run_folder=tmp_path / "run")  # fmt: skip
        led.check_budget(epsilon=1.5, delta=0.0, spend_id="s1")
        entry = led.spend("s1", epsilon=1.5, delta=0.0, mechanism="m")  # the rerun: one charge there
        assert not entry.replayed and budget.ledger.spent() == (1.5, 0.0)


def test_the_cap_is_set_only_by_the_data_holder(tmp_path: Path) -> None:
    with _run(tmp_path / "a", _data(), cap=2.0) as led:
        led.spend("s1", epsilon=1.5, delta=0.0)
    (ds,) = data_sets()
    with DataSetBudget.open(ds, create=False) as budget:
        assert budget.ledger.budget == (2.0, 1e-5)
        with pytest.raises(LedgerError, match="below what is already spent"):
            budget.set_cap(1.0, 1e-5)
        budget.set_cap(5.0, 1e-5)  # the data holder's decision: recorded with its reason
    with _run(tmp_path / "b", _data(), cap=9.0) as led:  # a run with a larger cap of its own changes nothing
        assert led.data_budget is not None and led.data_budget.ledger.budget == (5.0, 1e-5)
        led.spend("s1", epsilon=3.5, delta=0.0)
        with pytest.raises(BudgetExhaustedError):
            led.spend("s2", epsilon=0.5, delta=0.0)
    lines = [json.loads(line) for line in ds.path.read_text().splitlines()]
    assert [(r["change"], r["budget_epsilon"]) for r in lines if r["kind"] == "budget"] == [("set", 5.0)]
    with pytest.raises(LedgerError, match="never raised"):  # a run's ledger keeps its own rule
        PrivacyLedger(tmp_path / "a" / "ledger.jsonl", run_id="a", budget_epsilon=2.0, budget_delta=1e-5,
                      timestamps=False).set_holder_cap(8.0, 1e-5, reason="x")  # fmt: skip


def test_one_relation_and_unit_per_data_set_as_in_a_run_ledger(tmp_path: Path) -> None:
    # the first run fixes them: a label-privacy run (replace-one) on the data set
    with _run(tmp_path / "label", _data(), cap=10.0, neighbouring="replace_one", privacy_unit="label") as led:
        led.spend("a", epsilon=1.0, delta=1e-6)
    with _run(tmp_path / "record", _data(), cap=10.0) as led:  # add/remove record spends: group privacy there
        led.spend("b", epsilon=1.0, delta=1e-6)
        assert led.spent() == (1.0, 1e-6)
        assert led.data_budget is not None and led.data_budget.ledger.spent() == (
            1.0 + replace_one_cost(1.0, 1e-6)[0],
            1e-6 + replace_one_cost(1.0, 1e-6)[1],
        )
    with _run(tmp_path / "r2", _data(seed=2), cap=10.0) as led:  # this data set counts add/remove record privacy
        led.spend("a", epsilon=1.0, delta=0.0)
    with _run(tmp_path / "l2", _data(seed=2), cap=10.0, neighbouring="replace_one", privacy_unit="label") as led:
        before = (tmp_path / "l2" / "ledger.jsonl").read_bytes()
        with pytest.raises(ValueError, match="data set's budget.*counts record privacy under add_remove"):
            led.check_budget(epsilon=1.0, delta=0.0)  # a label guarantee implies no record guarantee
        with pytest.raises(ValueError, match="data set's budget"):
            led.spend("b", epsilon=1.0, delta=0.0)
        assert (tmp_path / "l2" / "ledger.jsonl").read_bytes() == before


def test_concurrent_spends_from_two_folders_lose_nothing(tmp_path: Path) -> None:
    """Two processes, each with its own run folder, spend on one data set at once: one writer at a time,
    every spend recorded in both ledgers, and exactly the data set's cap spent."""
    ds = data_set_of(_data())
    DataSetBudget.open(ds, cap=(1.0, 0.0)).close()
    attempts, epsilon = 40, 1.0 / 32
    with worker_process(WORKER) as proc:
        reply = ask(proc, f"hammer-data {ds.folder} {ds.data_id} {tmp_path} 2 {attempts} {epsilon!r}")
    counts = [int(c) for c in reply.split()[1:]]
    assert sum(counts) == 32, counts  # 1.0 / (1/32): not one spend past the cap, none lost
    with DataSetBudget.open(ds, create=False) as budget:
        charged = budget.ledger.entries()
    assert len(charged) == 32 and math.fsum(e.epsilon for e in charged) == 1.0
    for p, count in enumerate(counts):
        run = PrivacyLedger(tmp_path / f"run{p}" / "ledger.jsonl", run_id="r", budget_epsilon=1e6, budget_delta=0.0)
        ids = {e.spend_id for e in run.entries()}
        assert len(ids) == count
        folder = str((tmp_path / f"run{p}").resolve())
        assert ids == {e.metadata["spend_id"] for e in charged if e.metadata["folder"] == folder}


def test_the_data_holders_cap_for_new_data_sets(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pate_stab.cli.commands import main

    assert default_cap() is None  # a new data set takes its first run's cap
    assert main(["budget", "--set", "3,1e-5"]) == 0  # the data holder's cap for data sets not recorded yet
    assert default_cap() == (3.0, 1e-5) and "(ε=3, δ=1e-05), set by the data holder" in capsys.readouterr().out
    with _run(tmp_path / "a", _data(), cap=9.0) as led:  # a run's larger cap: the data set takes the holder's
        assert led.data_budget is not None and led.data_budget.ledger.budget == (3.0, 1e-5)
        led.spend("s", epsilon=2.5, delta=0.0)
        with pytest.raises(BudgetExhaustedError, match="data set's budget cap is \\(epsilon=3"):
            led.spend("t", epsilon=1.0, delta=0.0)
    assert main(["budget", "--set", "5"]) == 0  # a new default; the recorded data set keeps its cap
    assert default_cap() == (5.0, 1e-5)
    with DataSetBudget.open(data_set_of(_data()), create=False) as budget:
        assert budget.ledger.budget == (3.0, 1e-5)


def test_the_data_holder_may_set_how_new_data_sets_count(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pate_stab.cli.commands import main

    with pytest.raises(SystemExit):  # a recorded data set keeps its relation: these flags are for new ones
        main(["budget", "--neighbouring", "replace_one", "--set", "1", "--data-set", "ab"])
    with pytest.raises(SystemExit):
        main(["budget", "--set", "9", "--privacy-unit", "label"])  # label privacy counts under replace-one
    assert main(["budget", "--set", "9,1e-4", "--neighbouring", "replace_one"]) == 0
    assert "counted under replace_one's relation" in capsys.readouterr().out
    with _run(tmp_path / "ar", _data(), cap=9.0) as led:  # an add/remove run first: counted by group privacy
        led.spend("a", epsilon=1.0, delta=1e-6)
        assert led.data_budget is not None and led.data_budget.ledger.neighbouring == "replace_one"
        assert led.data_budget.ledger.spent() == replace_one_cost(1.0, 1e-6)
    with _run(tmp_path / "ro", _data(), cap=9.0, neighbouring="replace_one") as led:  # then a replace-one run
        led.spend("b", epsilon=1.0, delta=1e-6)
        assert led.data_budget is not None and led.data_budget.ledger.spent()[0] == 3.0
