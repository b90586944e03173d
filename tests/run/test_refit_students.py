"""recipes/diagnostics/refit_students.py: new students on recorded releases, never a new spend."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.run import TransferConfig, run_transfer

SCRIPT = Path(__file__).resolve().parents[2] / "recipes" / "diagnostics" / "refit_students.py"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    cfg = TransferConfig(
        run_name="r", checkpoints_dir=str(tmp_path_factory.mktemp("refit")), num_teachers=300, num_private=6000,
        num_public=400, num_eval=300, separation=6.0, num_queries=100, epsilon=8.0, teacher_epochs=5,
        teacher_lr=0.05, student_epochs=3, accelerator="cpu",
    )  # fmt: skip
    return cfg, run_transfer(cfg)


def refit(cfg: TransferConfig, *extra: str) -> None:
    spec = importlib.util.spec_from_file_location("refit_students", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--run-dir", str(cfg.run_dir), *extra])


def ledger_lines(cfg: TransferConfig) -> str:
    return (cfg.run_dir / "ledger.jsonl").read_text()


def test_refit_replays_the_release_and_spends_nothing(run):
    cfg, report = run
    before = ledger_lines(cfg)
    refit(cfg, "--aggregators", "stability", "--epsilons", "8", "--set", "student_epochs=1",
          "--set", "student_hidden=[8]")  # fmt: skip
    assert ledger_lines(cfg) == before
    result = json.loads((cfg.run_dir / "refit_students.json").read_text())
    (row,) = result["rows"]
    assert row["answered"] == report["queries"]["answered"]
    assert row["label_acc"] == report["label_accuracy_answered"]
    assert result["student"]["student_epochs"] == 1 and result["student"]["student_hidden"] == [8]
    path = cfg.run_dir / "ledger.jsonl"
    with PrivacyLedger(path, run_id=cfg.run_name, budget_epsilon=cfg.epsilon, budget_delta=cfg.delta) as ledger:
        assert list(ledger.spent()) == result["spent"]


def test_refit_refuses_unrecorded_releases_and_upstream_keys(run):
    cfg, _ = run
    before = ledger_lines(cfg)
    with pytest.raises(SystemExit, match="no recorded release for gnmax at ε=8"):
        refit(cfg, "--aggregators", "gnmax", "--epsilons", "8")
    with pytest.raises(SystemExit, match="only student settings can be refit"):
        refit(cfg, "--aggregators", "stability", "--epsilons", "8", "--set", "num_teachers=10")
    assert ledger_lines(cfg) == before
