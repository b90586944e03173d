"""run_compare: every aggregator on the same teachers, with PATE's data-dependent ε beside the enforced one."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from pate_stab.aggregation.baselines import GNMax
from pate_stab.aggregation.data_dependent import DATA_INDEPENDENT_NOTE, SEEDED_SANITISATION_NOTE, data_dependent_figures
from pate_stab.cli.commands import main
from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.run import TransferConfig, run_compare
from pate_stab.run.release import recorded_spend_id, release_spend_id

EPSILON = 2.0


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    # what the assertions need: a row of each of the four aggregators, the PATE rows with a data-dependent ε that
    # PSM+18's sanitisation applies to. The cost is the seeded PATE aggregators' PLD calibration, which grows as σ
    # shrinks: ε = 2 at m = 100 (the calibration tests/run/test_transfer.py's baseline rows also make); 50 teachers
    # give few distinct vote histograms, so the smooth sensitivity is computed for few rows
    cfg = TransferConfig(
        run_name="dd", checkpoints_dir=str(tmp_path_factory.mktemp("cmp")), num_teachers=50, num_private=2000,
        num_public=600, num_eval=200, separation=6.0, num_queries=100, max_unstable=5, teacher_epochs=3,
        teacher_lr=0.05, student_epochs=2, accelerator="cpu", releaser_noise="seeded",  # PSM+18's continuous analysis
    )  # fmt: skip
    return cfg, run_compare(cfg, epsilons=[EPSILON], aggregators=["stability", "lnmax", "gnmax", "confident-gnmax"])


def test_baseline_rows_show_both_epsilons_labelled(compared):
    """The raw data-dependent ε and its inputs are private; so is the sanitised one here, whose
    sanitisation noise came from the published seed (a seeded run): the report says why it is absent."""
    cfg, out = compared
    rows = {r["aggregator"]: r for r in out["rows"]}
    private = {r["aggregator"]: r for r in out["private"]["rows"]}
    for name in ("gnmax", "confident-gnmax"):
        r, p = rows[name], private[name]
        assert r["epsilon"] <= EPSILON * (1 + 1e-12)  # the enforced, data-independent figure
        assert "epsilon_dd_raw" not in r
        assert 0 < p["epsilon_dd_raw"] <= r["epsilon_rdp_data_independent"] * (1 + 1e-9)
        assert r["epsilon_dd_sanitised"] is None and p["epsilon_dd_sanitised"] > 0
        assert r["data_dependent_note"] == SEEDED_SANITISATION_NOTE
        detail = r["data_dependent_detail"]
        assert detail["ss_order"] == cfg.dd_order and detail["ss_sigma"] == cfg.dd_sigma
        assert "smooth_sensitivity" not in detail and "data_dependent_epsilon" not in detail
        assert "sanitised_epsilon" not in detail and "sanitised_rdp" not in detail
        assert p["data_dependent_detail"]["smooth_sensitivity"] >= 0
        assert p["data_dependent_detail"]["sanitised_epsilon"] == p["epsilon_dd_sanitised"]
    assert private["lnmax"]["epsilon_dd_raw"] is not None and rows["lnmax"]["epsilon_dd_sanitised"] is None
    assert "raw only" in rows["lnmax"]["data_dependent_note"]
    assert private["stability"]["epsilon_dd_raw"] is None
    assert rows["stability"]["data_dependent_note"] == DATA_INDEPENDENT_NOTE
    assert "enforced against the budget" in out["epsilon_columns"]["epsilon"]
    assert "NOT differentially private" in out["epsilon_columns"]["epsilon_dd_raw"]
    # a seeded run keeps the sanitised figure private too: the column is empty in every row, so not shown
    header = out["table"].splitlines()[0]
    assert "ε dd raw" not in out["table"] and "ε dd san" not in header and "public pool's true labels" in out["table"]
    on_disk = json.loads((cfg.run_dir / "compare.json").read_text())
    assert "teachers" not in on_disk and "wall_time_s" not in on_disk
    assert all("epsilon_dd_raw" not in r for r in on_disk["rows"])
    private_path = cfg.run_dir / "private_compare.json"
    assert private_path.stat().st_mode & 0o777 == 0o600
    on_disk_private = json.loads(private_path.read_text())
    assert on_disk_private["rows"][1]["epsilon_dd_raw"] == private["lnmax"]["epsilon_dd_raw"]
    assert 0 <= on_disk_private["teachers"]["plurality_accuracy"] <= 1
    assert "private_compare.json" in on_disk["files"]["private"]


def test_total_cost_is_printed_beside_the_table(compared):
    cfg, out = compared
    total = out["total_cost"]
    assert total["epsilon"] == pytest.approx(sum(r["epsilon"] for r in out["rows"]), rel=1e-12)
    assert total["delta"] == pytest.approx(sum(r["delta"] for r in out["rows"]), rel=1e-12)
    assert "basic composition" in total["composition"]
    text = (cfg.run_dir / "compare.txt").read_text()
    assert f"Σε = {total['epsilon']:.4g}" in text and "basic composition" in text


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


def test_repeated_epsilons_are_refused(compared):
    cfg, _ = compared
    with pytest.raises(ValueError, match="epsilons repeat 8.0.*repeats"):
        run_compare(cfg, epsilons=[8.0, 8], aggregators=["lnmax"])


def _small(tmp_path, **kw):
    return TransferConfig(
        run_name="rep", checkpoints_dir=str(tmp_path), num_teachers=50, num_private=1000, num_public=100,
        num_eval=100, separation=6.0, num_queries=20, teacher_epochs=1, student_epochs=1, accelerator="cpu", **kw,
    )  # fmt: skip


def _folder(run_dir) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}


def test_a_rerun_with_more_repeats_than_the_cap_is_refused_with_nothing_spent(tmp_path, monkeypatch):
    """The first run's total is the cap: a rerun with --repeats 2 is refused before any training or noise,
    the ledger (and every file of the folder) unchanged; the message names the cap, the spent and the need."""
    import pate_stab.run.compare as compare

    cfg = _small(tmp_path)
    run_compare(cfg, epsilons=[2.0], aggregators=["lnmax"])
    before = _folder(cfg.run_dir)
    monkeypatch.setattr(compare, "prepare", lambda *a, **k: pytest.fail("trained before the budget check"))
    with pytest.raises(BudgetExhaustedError) as err:
        run_compare(cfg, epsilons=[2.0], aggregators=["lnmax"], repeats=2)
    message = str(err.value)
    assert "cap is (epsilon=2, delta=1e-05)" in message and "needs (epsilon=2, delta=1e-05) more" in message
    assert "spent" in message and "new run folder" in message and "Nothing was drawn" in message
    assert _folder(cfg.run_dir) == before  # ledger bytes (and its anchor) unchanged: nothing spent
    with pytest.raises(BudgetExhaustedError):  # the same through the command line's config key, after training
        monkeypatch.undo()
        run_compare(cfg, epsilons=[2.0, 3.0], aggregators=None)  # the default list is known after prepare
    assert (cfg.run_dir / "ledger.jsonl").read_bytes() == before["ledger.jsonl"]


def test_a_cap_set_at_the_first_run_allows_a_larger_plan_and_is_never_raised(tmp_path):
    cfg = _small(tmp_path, budget_epsilon=4.0, budget_delta=2e-5)
    one = run_compare(cfg, epsilons=[2.0], aggregators=["lnmax"])
    assert one["ledger"]["budget"] == {"epsilon": 4.0, "delta": 2e-5}
    two = run_compare(dataclasses.replace(cfg, budget_epsilon=None, budget_delta=None), epsilons=[2.0],
                      aggregators=["lnmax"], repeats=2)  # fmt: skip
    assert [r["reused"] for r in two["rows"]] == [True, False]
    assert two["rows"][0]["spend_id"] == one["rows"][0]["spend_id"]
    assert two["ledger"]["budget"] == {"epsilon": 4.0, "delta": 2e-5}
    lines = [json.loads(line) for line in (cfg.run_dir / "ledger.jsonl").read_text().splitlines()]
    assert not [r for r in lines if r["kind"] == "budget"]  # nothing raised it
    before = (cfg.run_dir / "ledger.jsonl").read_bytes()
    with pytest.raises(LedgerError, match="can only be lowered, never raised"):
        run_compare(dataclasses.replace(cfg, budget_epsilon=8.0), epsilons=[2.0], aggregators=["lnmax"], repeats=4)
    assert (cfg.run_dir / "ledger.jsonl").read_bytes() == before
    with pytest.raises(LedgerError, match="already spent"):  # 3.99… is spent
        run_compare(dataclasses.replace(cfg, budget_epsilon=3.0), epsilons=[2.0], aggregators=["lnmax"])
    again = run_compare(dataclasses.replace(cfg, budget_epsilon=3.9995), epsilons=[2.0], aggregators=["lnmax"],
                        repeats=2)  # fmt: skip
    assert again["ledger"]["budget"]["epsilon"] == 3.9995 and all(r["reused"] for r in again["rows"])
    lines = [json.loads(line) for line in (cfg.run_dir / "ledger.jsonl").read_text().splitlines()]
    (lowered,) = [r for r in lines if r["kind"] == "budget"]
    assert lowered["change"] == "lower" and lowered["budget_epsilon"] == 3.9995


def test_the_budget_cap_flags_reach_the_ledger(tmp_path, capsys):
    base = ["compare", "--run-name", "cli", "--checkpoints-dir", str(tmp_path), "--set", "num_private=1000",
            "--set", "num_public=100", "--set", "num_eval=100", "--num-teachers", "50", "--num-queries", "20",
            "--teacher-epochs", "1", "--set", "student_epochs=1", "--aggregators", "lnmax",
            "--epsilons", "2"]  # fmt: skip
    assert main([*base, "--budget-epsilon", "3", "--budget-delta", "1e-4"]) == 0
    header = json.loads((tmp_path / "cli" / "ledger.jsonl").read_text().splitlines()[0])
    assert (header["budget_epsilon"], header["budget_delta"]) == (3.0, 1e-4)
    before = (tmp_path / "cli" / "ledger.jsonl").read_bytes()
    with pytest.raises(SystemExit) as exc:
        main([*base, "--repeats", "2"])
    assert exc.value.code == 2 and "budget cap is (epsilon=3" in capsys.readouterr().err
    assert (tmp_path / "cli" / "ledger.jsonl").read_bytes() == before
    with pytest.raises(SystemExit):
        main([*base, "--set", "budget_epsilon=-1"])
    assert "budget_epsilon (the run's budget cap) must be a positive" in capsys.readouterr().err


def test_spend_ids_are_exact(tmp_path):
    """Two ε that agree to six digits are two releases (``eps={ε:g}`` made them one spend id)."""
    assert release_spend_id("r", "stability", 1.0000001) != release_spend_id("r", "stability", 1.0000002)
    assert release_spend_id("r", "lnmax", 3.0, 2) == "r:lnmax:eps=3.0:rep=2"
    with pytest.raises(ValueError, match="positive finite"):
        release_spend_id("r", "lnmax", float("nan"))
    with PrivacyLedger(tmp_path / "l.jsonl", run_id="r", budget_epsilon=10.0, budget_delta=1e-5) as ledger:
        ledger.spend("r:lnmax:eps=3", epsilon=3.0, delta=0.0)  # the form older ledgers used
        assert recorded_spend_id(ledger, "r", "lnmax", 3.0) == "r:lnmax:eps=3"  # still replays
        assert recorded_spend_id(ledger, "r", "lnmax", 3.0000001) == "r:lnmax:eps=3.0000001"


def test_compare_title_names_the_unit_teachers_selection_student_and_releases():
    """compare.png's title (compare_title, also used to rebuild the plot in test_neighbour_outputs)."""
    from pate_stab.run.compare import compare_title

    config = TransferConfig(num_teachers=250, num_queries=100, query_selection="spread", delta=1e-6)
    one = (
        f"synthetic (record privacy): k=250 {config.teachers.teacher_model} teachers, m=100 (spread)\n"
        f"{config.student.student_method} student, δ=1e-06"
    )
    assert compare_title(config) == one
    assert compare_title(config, repeats=3) == one + ", 3 releases"
