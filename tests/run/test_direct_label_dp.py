"""The label-DP learners (LP-1ST, LP-2ST) as compare rows: valid only under label privacy, refused under
record privacy before anything is spent, one spend per id recorded with the label unit, the model replayed."""

from __future__ import annotations

import dataclasses

import pytest

from pate_stab.privacy.accounting.events import PureDpEvent
from pate_stab.run import TransferConfig
from pate_stab.run.compare import run_compare
from pate_stab.run.config import LABEL_DIRECT_LEARNERS
from pate_stab.run.direct import check_direct_config, direct_legend, run_direct
from pate_stab.run.prepare import prepare
from pate_stab.run.report import open_ledger


def _config(tmp_path, name="label_dp", **changes):
    cfg = TransferConfig(
        run_name=name, checkpoints_dir=str(tmp_path), num_private=3000, num_public=400, num_eval=300, dim=6,
        num_classes=3, separation=6.0, num_teachers=5, teacher_model="propagate", graph_pca_dim=None,
        num_queries=50, accelerator="cpu", **changes,
    )  # fmt: skip
    return cfg


def label_unit(config):
    """``config`` under label privacy and replace-one (the label-DP learners' relation)."""
    return dataclasses.replace(config, privacy_unit="label", neighbouring="replace_one")


def _ledger(prep):
    return open_ledger(prep.run_dir, run_name=prep.config.run_name, budget_epsilon=100.0, budget_delta=1e-3,
                       neighbouring=prep.config.release.neighbouring,
                       privacy_unit=prep.config.release.privacy_unit)  # fmt: skip


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    return prepare(_config(tmp_path_factory.mktemp("label_dp")), check_budget=False)


@pytest.mark.parametrize("learner", LABEL_DIRECT_LEARNERS)
def test_under_record_privacy_a_label_learner_is_refused_before_any_spend(prepared, tmp_path, learner):
    prep = dataclasses.replace(prepared, run_dir=tmp_path / "run")
    prep.run_dir.mkdir()
    with pytest.raises(ValueError, match="label-DP only"):
        check_direct_config(prep.config, [learner])
    with _ledger(prep) as ledger:
        with pytest.raises(ValueError, match=r"label-DP only.*privacy unit is 'record'"):
            run_direct(prep, ledger, learner=learner, epsilon=2.0)
        assert ledger.spent() == (0.0, 0.0) and ledger.entry(f"{prep.config.run_name}:{learner}:eps=2") is None
    assert not (prep.run_dir / "direct").exists()


def test_compare_under_record_privacy_refuses_a_label_learner_before_reading_data(tmp_path):
    cfg = _config(tmp_path, "cmp")
    with pytest.raises(ValueError, match="label-DP only"):
        run_compare(cfg, epsilons=[2.0], aggregators=[], direct=["rr-lp2st"])
    assert not (cfg.run_dir / "ledger.jsonl").exists()


def test_label_privacy_under_add_remove_is_refused_before_any_spend(prepared, tmp_path):
    """The learners' guarantee is for one label replaced: an add/remove ledger cannot count it."""
    config = label_unit(prepared.config)
    with pytest.raises(ValueError, match="neighbouring: replace_one"):  # the configuration refuses it
        config = dataclasses.replace(config, neighbouring="add_remove")
        check_direct_config(config, ["rr-lp1st"])


@pytest.mark.parametrize("learner", LABEL_DIRECT_LEARNERS)
def test_a_label_learner_is_charged_once_under_the_label_unit_and_replays(prepared, tmp_path, learner):
    prep = dataclasses.replace(prepared, config=label_unit(prepared.config), run_dir=tmp_path / "run")
    prep.run_dir.mkdir()
    with _ledger(prep) as ledger:
        row = run_direct(prep, ledger, learner=learner, epsilon=2.0, repeat=3)
        entry = ledger.entry(row["spend_id"])
        assert ledger.spent() == (pytest.approx(2.0, rel=1e-12), 0.0)
        assert entry.mechanism == learner and entry.relation == "replace_one"
        assert entry.metadata["privacy_unit"] == "label" and entry.event == PureDpEvent(2.0)
        assert row["privacy_unit"] == "label" and row["neighbouring"] == "replace_one"
        assert (row["epsilon_replace_one"], row["delta_replace_one"]) == (2.0, 0.0)
        source = "Malek et al. 2021" if learner == "alibi" else "Ghazi et al. 2021"
        assert "label is replaced" in row["note"] and source in row["note"]
        assert not row["reused"] and row["student_acc"] > 0.8  # a separable task, learnt from noisy labels
        path = prep.run_dir / "direct" / entry.result["model"]
        stored = path.read_bytes()
        again = run_direct(prep, ledger, learner=learner, epsilon=2.0, repeat=3)
        assert again["reused"] and again["student_acc"] == row["student_acc"]
        assert ledger.spent()[0] == pytest.approx(2.0, rel=1e-12) and path.read_bytes() == stored
    assert "label-DP only" in direct_legend([row], run_neighbouring="replace_one")
