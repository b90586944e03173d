"""run_compare: every aggregator on the same teachers, with PATE's data-dependent ε beside the enforced one."""

from __future__ import annotations

import json

import pytest
import torch

from pate_stab.aggregation.baselines import GNMax
from pate_stab.run import TransferConfig, run_compare
from pate_stab.run.data_dependent import data_dependent_figures


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    cfg = TransferConfig(
        run_name="dd", checkpoints_dir=str(tmp_path_factory.mktemp("cmp")), num_teachers=250, num_private=5000,
        num_public=600, num_eval=200, separation=6.0, num_queries=500, max_unstable=5, teacher_epochs=3,
        teacher_lr=0.05, student_epochs=2, accelerator="cpu", releaser_noise="seeded",  # PSM+18's continuous analysis
    )  # fmt: skip
    return cfg, run_compare(cfg, epsilons=[8.0], aggregators=["stability", "lnmax", "gnmax", "confident-gnmax"])


def test_baseline_rows_show_both_epsilons_labelled(compared):
    cfg, out = compared
    rows = {r["aggregator"]: r for r in out["rows"]}
    for name in ("gnmax", "confident-gnmax"):
        r = rows[name]
        assert r["epsilon"] <= 8.0 * (1 + 1e-12)  # the enforced, data-independent figure
        assert 0 < r["epsilon_dd_raw"] <= r["epsilon_rdp_data_independent"] * (1 + 1e-9)
        assert r["epsilon_dd_sanitised"] > 0
        detail = r["data_dependent_detail"]
        assert detail["ss_order"] == cfg.dd_order and detail["ss_sigma"] == cfg.dd_sigma
    assert rows["lnmax"]["epsilon_dd_raw"] is not None and rows["lnmax"]["epsilon_dd_sanitised"] is None
    assert "raw only" in rows["lnmax"]["data_dependent_note"]
    assert rows["stability"]["epsilon_dd_raw"] is None
    assert rows["stability"]["data_dependent_note"] == "data-independent by construction"
    assert "enforced against the budget" in out["epsilon_columns"]["epsilon"]
    assert "NOT differentially private" in out["epsilon_columns"]["epsilon_dd_raw"]
    assert "ε dd raw" in out["table"] and "ε dd san" in out["table"] and "not private" in out["table"]
    on_disk = json.loads((cfg.run_dir / "compare.json").read_text())
    assert on_disk["rows"][1]["epsilon_dd_raw"] == rows["lnmax"]["epsilon_dd_raw"]


def test_budget_is_spent_on_the_data_independent_figure(compared):
    _, out = compared
    spent = out["ledger"]["spent_basic_composition"]["epsilon"]
    assert spent == pytest.approx(sum(r["epsilon"] for r in out["rows"]), rel=1e-12)


def _figures(teachers_changed: int) -> dict:
    counts = torch.tensor([[90, 10, 0]] * 50)
    sigma = GNMax.calibrate(epsilon=8.0, delta=1e-5, num_queries=50).sigma  # small σ: C6 fails at order 10
    return data_dependent_figures(
        "gnmax", {"sigma": sigma}, counts, torch.zeros(50, dtype=torch.int64), delta=1e-5,
        teachers_changed=teachers_changed, order=10.0, sigma=5.0, generator=torch.Generator().manual_seed(0),
    )  # fmt: skip


def test_raw_figure_survives_a_sanitisation_that_does_not_apply():
    out = _figures(1)
    assert out["epsilon_dd_raw"] > 0 and out["epsilon_dd_sanitised"] is None
    assert "not sanitised" in out["data_dependent_note"] and "C6" in out["data_dependent_note"]


def test_two_changed_teachers_get_no_data_dependent_figure():
    out = _figures(2)
    assert out["epsilon_dd_raw"] is None and "one changed teacher" in out["data_dependent_note"]
