"""A budget that belongs to the data, not to a folder (DESIGN.md fact 15; fourth audit, D1).

* A run folder that shows a run spent in it but has lost its ledger (both ``ledger.jsonl`` and its anchor
  removed, or a ledger cut short whose anchor was removed) is refused — transfer, compare with repeats,
  ``release --votes`` — and nothing in it changes; a folder that stopped after its teachers (it never had a
  ledger) resumes.
* The same private data in a second folder is refused past the data set's cap, before anything is
  trained; the data holder's ``pate-stab budget --set`` raises it.
* The same data loaded from a CSV and from an ``.npz`` holding its loaded form is one data set.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from pate_stab.cli.commands import main
from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.ledger.data_budget import BUDGET_DIR_ENV, DEFAULT_CAP_NAME, data_set_of, set_default_cap
from pate_stab.run import TransferConfig, run_compare, run_transfer
from pate_stab.run.data import load_task
from tests.run.interrupted_release_worker import lifecycle_config, lifecycle_data


@pytest.fixture(autouse=True)
def first_runs_cap(budget_dir: Path) -> None:
    """The data holder has set no cap for new data sets here: a new data set takes its first run's
    (tests/conftest.py sets a large one for the other tests)."""
    (budget_dir / DEFAULT_CAP_NAME).unlink()


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _lose_ledger(folder: Path) -> dict[str, bytes]:
    (folder / "ledger.jsonl").unlink()
    (folder / "private_ledger_anchor.json").unlink()
    return _snapshot(folder)


def test_a_transfer_folder_that_lost_its_ledger_is_refused(tmp_path: Path) -> None:
    """The audit's reproduction: both files removed, the same command again drew fresh labels under the old ids."""
    cfg = lifecycle_config(str(tmp_path), "tl", epsilon=2.0)
    run_transfer(cfg, data=lifecycle_data())
    before = _lose_ledger(cfg.run_dir)
    with pytest.raises(LedgerError, match=r"report\.json.*ledger\.jsonl is missing.*cannot be replayed"):
        run_transfer(cfg, data=lifecycle_data())
    assert _snapshot(cfg.run_dir) == before  # no new ledger, no new labels


def test_a_truncated_ledger_whose_anchor_was_removed_is_refused(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "tl", epsilon=2.0)
    run_transfer(cfg, data=lifecycle_data())
    ledger = cfg.run_dir / "ledger.jsonl"
    lines = ledger.read_text().splitlines(keepends=True)
    first_spend = next(i for i, line in enumerate(lines) if json.loads(line)["kind"] == "spend")
    ledger.write_text("".join(lines[:first_spend]))  # cut back to before the spend: it read as a new folder
    (cfg.run_dir / "private_ledger_anchor.json").unlink()
    before = _snapshot(cfg.run_dir)
    with pytest.raises(LedgerError, match="private_ledger_anchor.json.*is missing"):
        run_transfer(cfg, data=lifecycle_data())
    ledger.write_text("".join(lines[: first_spend + 1]))  # cut after the spend (outputs and result gone)
    with pytest.raises(LedgerError, match="private_ledger_anchor.json.*is missing"):
        run_transfer(cfg, data=lifecycle_data())
    assert _snapshot(cfg.run_dir) == before | {"ledger.jsonl": "".join(lines[: first_spend + 1]).encode()}


def test_a_compare_with_repeats_that_lost_its_ledger_is_refused(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "cmp", budget_epsilon=3.0)
    run_compare(cfg, epsilons=[1.5], aggregators=["gnmax"], repeats=2, data=lifecycle_data())
    before = _lose_ledger(cfg.run_dir)
    with pytest.raises(LedgerError, match=r"compare\.json.*ledger\.jsonl is missing"):
        run_compare(cfg, epsilons=[1.5], aggregators=["gnmax"], repeats=2, data=lifecycle_data())
    assert _snapshot(cfg.run_dir) == before


def test_a_release_folder_that_lost_its_ledger_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rng = np.random.default_rng(0)
    truth = rng.integers(0, 3, 40)
    np.save(tmp_path / "votes.npy", np.where(rng.random((200, 40)) < 0.9, truth, rng.integers(0, 3, (200, 40))))
    args = ["release", "--votes", str(tmp_path / "votes.npy"), "--num-classes", "3", "--aggregator", "gnmax",
            "--epsilon", "2", "--out", str(tmp_path / "out")]  # fmt: skip
    assert main(args) == 0
    before = _lose_ledger(tmp_path / "out")
    with pytest.raises(SystemExit) as exc:
        main(args)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and "labels.npy" in err and "ledger.jsonl is missing" in err
    assert _snapshot(tmp_path / "out") == before


def test_a_folder_that_stopped_after_its_teachers_resumes(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "stopped", epsilon=2.0, stop_after="teachers")
    assert run_transfer(cfg, data=lifecycle_data())["status"] == "teachers trained"
    assert not (cfg.run_dir / "ledger.jsonl").exists()  # it never had a ledger: nothing was lost
    assert run_transfer(replace(cfg, stop_after=None), data=lifecycle_data())["status"] == "complete"


def test_a_second_folder_on_the_same_data_is_refused_past_the_data_sets_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    first = lifecycle_config(str(tmp_path), "first", epsilon=2.0)  # the data set's cap: the first run's, 2
    run_transfer(first, data=lifecycle_data())
    second = replace(first, run_name="second")
    with pytest.raises(BudgetExhaustedError, match=r"data set's budget cap.*first.*budget --set"):
        run_transfer(second, data=lifecycle_data())
    assert not (second.run_dir / "ledger.jsonl").exists()  # refused before any training or spend
    assert not list(second.run_dir.glob("teachers*"))
    other = replace(first, run_name="other data")  # other private data: its own budget
    run_transfer(other, data=lifecycle_data(n=300))
    assert main(["budget"]) == 0
    listing = capsys.readouterr().out
    data = lifecycle_data()
    short = data_set_of([data.private_x, data.private_y]).short_id  # the data set: the private split as loaded
    assert f"data set {short}: spent (ε=1.99" in listing
    assert str(first.run_dir.resolve()) in listing and str(other.run_dir.resolve()) in listing
    assert main(["budget", "--set", "4,2e-5", "--data-set", short]) == 0  # the data holder raises it
    assert run_transfer(second, data=lifecycle_data())["status"] == "complete"


def test_the_same_data_from_a_csv_and_an_npz_is_one_data_set(tmp_path: Path) -> None:
    """The data set is the private split as loaded: a CSV is loaded through its schema (numeric columns scaled to
    their public bounds, categories one-hot), so an ``.npz`` holding that loaded form is the same data set, and an
    ``.npz`` of the raw column values is another (docs/privacy.md)."""
    rng = np.random.default_rng(0)
    raw = np.round(rng.uniform(-5, 5, (30, 2)), 3)
    y = rng.integers(0, 3, 30)
    lines = ["a,b,label", *(f"{r[0]},{r[1]},{'xyz'[c]}" for r, c in zip(raw, y, strict=True))]
    (tmp_path / "private.csv").write_text("\n".join(lines) + "\n")
    (tmp_path / "pool.csv").write_text("a,b\n" + "\n".join(f"{r[0]},{r[1]}" for r in raw[:10]) + "\n")
    schema = {"columns": [{"name": n, "kind": "numeric", "bounds": [-5, 5]} for n in "ab"], "label": "label",
              "classes": ["x", "y", "z"]}  # fmt: skip
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    gen = torch.Generator().manual_seed(0)
    csv = load_task(TransferConfig(dataset="files", private=str(tmp_path / "private.csv"),
                                   public=str(tmp_path / "pool.csv"), schema=str(tmp_path / "schema.json"),
                                   num_teachers=2), generator=gen)  # fmt: skip
    loaded_x, loaded_y = csv.loaded[:2]
    np.savez(tmp_path / "private.npz", x=loaded_x.numpy(), y=loaded_y.numpy())
    np.savez(tmp_path / "pool.npz", x=csv.loaded[2].numpy())
    npz = load_task(TransferConfig(dataset="files", private=str(tmp_path / "private.npz"),
                                   public=str(tmp_path / "pool.npz"), classes=3, num_teachers=2),
                    generator=gen)  # fmt: skip
    assert data_set_of(list(npz.loaded[:2])) == data_set_of(list(csv.loaded[:2]))
    np.savez(tmp_path / "raw.npz", x=raw.astype(np.float32), y=y)
    raw_task = load_task(TransferConfig(dataset="files", private=str(tmp_path / "raw.npz"),
                                        public=str(tmp_path / "pool.npz"), classes=3, num_teachers=2),
                         generator=gen)  # fmt: skip
    assert data_set_of(list(raw_task.loaded[:2])) != data_set_of(list(csv.loaded[:2]))


def test_the_budget_command_and_its_folder_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    folder = tmp_path / "holder"
    assert main(["budget", "--budget-dir", str(folder)]) == 0
    assert "no data set has spent from it yet" in capsys.readouterr().out
    assert os.environ[BUDGET_DIR_ENV] == str(folder.resolve())  # the flag names the folder for the whole run
    cases = [(["--set", "x", "--data-set", "ab"], "EPS"), (["--set", "0"], "positive"),
             (["--set", "2", "--data-set", "ab"], "no data set .* has an id starting with 'ab'")]  # fmt: skip
    for bad, message in cases:
        with pytest.raises(SystemExit) as exc:
            main(["budget", *bad])
        assert exc.value.code == 2 and re.search(message, capsys.readouterr().err)


def test_a_plan_past_the_data_holders_cap_for_new_data_sets_is_refused_before_training(tmp_path: Path) -> None:
    set_default_cap(1.0, 1e-5)
    cfg = lifecycle_config(str(tmp_path), "new", epsilon=2.0)  # the run's own cap would be 2
    with pytest.raises(BudgetExhaustedError, match="data holder's cap for new data sets"):
        run_transfer(cfg, data=lifecycle_data())
    assert (
        not (cfg.run_dir / "ledger.jsonl").exists()
        and not data_set_of([lifecycle_data().private_x, lifecycle_data().private_y]).path.exists()
    )
