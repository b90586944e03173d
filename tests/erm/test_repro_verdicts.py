"""recipes/repro/verdicts.py: the predicates on small fixtures, and the README's table is its output."""

from __future__ import annotations

import json
import math
import shutil

import pytest

from tests._recipes import load_recipe

rv = load_recipe("repro/verdicts.py")


def _summary(prefix: str, table: dict[str, list[tuple[float, float]]], metric: str = "auc") -> dict:
    """{prefix/method/α: {metric, metric_se}} from per-method lists of (mean, se) over CV_ALPHAS."""
    out: dict = {}
    for method, vals in table.items():
        for a, (m, se) in zip(rv.CV_ALPHAS, vals, strict=True):
            out[f"{prefix}/{method}/{a}"] = {metric: m, f"{metric}_se": se}
    return out


def test_aggregate_reads_every_some_none():
    assert rv.aggregate([True, True]) == "yes"
    assert rv.aggregate([True, False]) == "partly"
    assert rv.aggregate([False, False]) == "no"
    assert rv.aggregate([]) == "not run"


def test_z_score_uses_the_standard_error_of_the_difference():
    assert rv.z_score(0.7, 0.03, 0.6, 0.04) == pytest.approx(0.1 / 0.05)
    assert rv.z_score(1.0, 0.0, 0.0, 0.0) == math.inf
    assert rv.z_score(0.5, 0.0, 0.5, 0.0) == 0.0


def test_outperforms_needs_more_than_two_standard_errors_at_each_alpha():
    # se of the difference = √2·0.01 ≈ 0.0141: a lead of 0.02 is 1.41 s.e. (not enough), 0.05 is 3.5.
    s = _summary("p", {"A": [(0.70, 0.01)] * 3 + [(0.75, 0.01)] * 3, "B": [(0.68, 0.01)] * 3 + [(0.70, 0.01)] * 3})
    pts = rv.cv_outperforms(s, "p", "A", ["B"], "auc")
    assert [p.ok for p in pts] == [False] * 3 + [True] * 3
    assert rv.aggregate([p.ok for p in pts]) == "partly"
    assert pts[0].numbers.startswith("α=0.3: 0.700 vs 0.680 (+1.4 s.e.)")
    assert pts[0].miss == "A's AUC lead over B +1.4 s.e. (needs > 2)"
    # MSE: lower is better, so the same numbers read the other way round.
    s_mse = _summary("p", {"A": [(0.20, 0.001)] * 6, "B": [(0.21, 0.001)] * 6}, metric="mse")
    assert [p.ok for p in rv.cv_outperforms(s_mse, "p", "A", ["B"], "mse")] == [True] * 6
    assert [p.ok for p in rv.cv_outperforms(s_mse, "p", "B", ["A"], "mse")] == [False] * 6


def test_only_above_fails_when_the_method_is_also_ahead_below_the_cut():
    # The Magic situation of issue 35: Stability ahead of Random by 3 s.e. at α = 1 already.
    ahead_early = _summary(
        "p",
        {
            "Stability": [(0.66, 0.007), (0.677, 0.007), (0.689, 0.007), (0.76, 0.007), (0.79, 0.007), (0.81, 0.007)],
            "Random": [(0.659, 0.007)] * 6,
        },
    )
    row = rv.judged("P", "claim", "proto", "pred", rv.cv_only_above(ahead_early, "p", "Stability", "Random", 1.0))
    assert row.verdict == "partly"
    assert row.failing == ("α=1",)
    assert row.cause == "fails at 1 of 6: α=1: Stability already ahead of Random on AUC by 3.0 s.e. (> 2) at α ≤ 1"
    exact = _summary(
        "p",
        {"Stability": [(0.66, 0.007)] * 3 + [(0.76, 0.007)] * 3, "Random": [(0.659, 0.007)] * 6},
    )
    verdict = lambda s: rv.aggregate([p.ok for p in rv.cv_only_above(s, "p", "Stability", "Random", 1.0)])  # noqa: E731
    assert verdict(exact) == "yes"
    never = _summary("p", {"Stability": [(0.66, 0.007)] * 6, "Random": [(0.70, 0.007)] * 6})
    assert verdict(never) == "partly"  # only "not below" holds
    backwards = _summary("p", {"Stability": [(0.76, 0.007)] * 3 + [(0.66, 0.007)] * 3, "Random": [(0.659, 0.007)] * 6})
    assert verdict(backwards) == "no"


def test_equal_and_flat_use_their_stated_tolerances():
    s = _summary("p", {"R": [(0.80, 0.0)] * 6, "C": [(0.805, 0.0)] * 5 + [(0.82, 0.0)]})
    pts = rv.cv_equal(s, "p", "R", "C", tol=0.01)
    assert [p.ok for p in pts] == [True] * 5 + [False]
    assert pts[-1].miss == "AUC(R) − AUC(C) = -0.020, beyond ±0.01"
    pts = rv.cv_flat(s, "p", ["R", "C"], above=0.5, tol=0.01)
    assert [p.ok for p in pts] == [True, False] and "range 0.015" in pts[1].numbers
    assert pts[1].miss == "AUC moves by 0.015 (> 0.01) between α=1 (0.805) and α=5 (0.820)"


def _ligett_rows(nr_eps, db_eps, th_eps, nr_risk, db_risk, alphas=(0.05, 0.075)):
    rows = []
    for i, a in enumerate(alphas):
        for method, eps, risk in (
            ("noise_reduction", nr_eps[i], nr_risk[i]),
            ("doubling", db_eps[i], db_risk[i]),
            ("theory", th_eps[i], 0.0),
        ):
            rows.append({"dataset": "d", "method": method, "alpha": a, "mean_epsilon": eps, "mean_excess_risk": risk})
    return rv.ligett_table(rows)["d"]


def test_ligett_predicates_can_fail():
    good = _ligett_rows([1.0, 0.8], [2.0, 1.5], [5.0, 4.0], [0.01, 0.015], [0.005, 0.01])
    v = {r.claim.split(" (")[0]: r.verdict for r in rv.ligett_verdicts_for(good, "d", ridge_twitter=False)}
    assert set(v.values()) == {"yes"}
    # NR above Doubling at one α; theory only 1.5× above; NR's risk α/2 (not "well below α/2").
    bad = _ligett_rows([1.0, 1.6], [2.0, 1.5], [3.0, 2.4], [0.025, 0.0375], [0.005, 0.01])
    verdicts = [r.verdict for r in rv.ligett_verdicts_for(bad, "d", ridge_twitter=False)]
    assert verdicts == ["partly", "no", "no"]


def test_ligett_causes_name_the_failing_alpha_and_the_shortfall():
    # A KDD-like record: NR's excess risk at α/2 everywhere, Doubling's at α/8; NR 5 % above Doubling at α = 0.075.
    rows = _ligett_rows([1.0, 0.84], [2.0, 0.8], [5.0, 4.0], [0.025, 0.0375], [0.00625, 0.009375])
    by_claim = {r.claim.split(" (")[0]: r for r in rv.ligett_verdicts_for(rows, "d", ridge_twitter=False)}
    below = by_claim["Noise Reduction's ex-post ε below DoublingMethod's"]
    assert below.verdict == "partly" and below.failing == ("α=0.075",)
    assert below.cause == "fails at 1 of 2: α=0.075: NR 5.0 % above Doubling"
    excess = by_claim['"excess risks were concentrated well below α/2"']
    assert excess.verdict == "no" and excess.failing == ("α=0.05", "α=0.075")
    assert excess.cause.startswith(
        "fails at 2 of 2: α=0.05: NR's mean excess risk 0.50α > α/4; α=0.075: NR's mean excess risk 0.50α > α/4. "
        "Recorded: NR's mean excess risk is 0.50–0.50α"
    )
    assert by_claim["\"a large improvement over the 'theory' approach\""].cause == ""  # a yes row has no cause


def test_every_row_that_is_not_yes_carries_a_cause_naming_a_failing_point():
    rows = rv.all_verdicts()
    assert rows
    for v in rows:
        if v.verdict == "yes":
            assert v.cause == "" and v.failing == ()
            continue
        assert v.verdict in ("partly", "no"), v
        assert v.failing, v
        assert v.cause.startswith("fails"), v
        assert any(f"{w}: " in v.cause for w in v.failing), v
    # the README's table shows the same cause in its cause column
    block = rv.readme_block(rv.README.read_text())
    table = [line for line in block.splitlines() if line.startswith("| ") and "**" in line]
    assert len(table) == len(rows)
    for line, v in zip(table, rows, strict=True):
        cells = [c.strip() for c in line.strip("|").split(" | ")]
        assert cells[4] == f"**{v.verdict}**"
        assert cells[5] == (rv._cell(v.cause) if v.verdict != "yes" else "—")


def test_rows_on_data_a_paper_did_not_use_are_labelled_and_left_out_of_its_counts():
    rows = rv.ligett_verdicts(rv.REPRO)
    warfarin = [r for r in rows if r.protocol.startswith("warfarin")]
    assert len(warfarin) == 6
    assert all("not the paper's data" in r.protocol and not r.papers_data for r in warfarin)
    assert all("which the paper did not use" in r.cause for r in warfarin if r.verdict != "yes")
    assert all(not r.papers_data for r in rows if "stand-in" in r.protocol)
    assert all(r.papers_data for r in rows if r.protocol.startswith("KDD-99"))
    head = rv.render(rows).splitlines()[0]
    own = [r for r in rows if r.papers_data]
    want = ", ".join(f"{k} {sum(r.verdict == k for r in own)}" for k in ("yes", "partly", "no", "not run"))
    assert f"{want} (of {len(own)})" in head and len(own) < len(rows)


def test_ligett_printed_numbers_compare_in_epsilon():
    rows = _ligett_rows([math.log(10.0), math.log(4.65)], [math.log(495.0), math.log(56.6)], [20, 12], [0, 0], [0, 0])
    last = rv.ligett_verdicts_for(rows, "d", ridge_twitter=True)[-1]
    assert last.verdict == "yes" and "ratio ε(Doubling)/ε(NR): 2.69 vs printed 2.69" in last.numbers
    rows = _ligett_rows([7.41, 4.98], [7.87, 5.35], [20, 12], [0, 0], [0, 0])
    assert rv.ligett_verdicts_for(rows, "d", ridge_twitter=True)[-1].verdict == "no"


def test_readme_table_is_the_scripts_output():
    text = rv.README.read_text()
    assert rv.readme_block(text) == rv.generate(), "run: python recipes/repro/verdicts.py --write"


def test_check_mode_flags_a_hand_edited_table(tmp_path):
    for f in rv.REPRO.glob("*.json"):
        shutil.copy(f, tmp_path / f.name)
    text = rv.README.read_text()
    (tmp_path / "README.md").write_text(text)
    assert rv.main(["--check", "--repro", str(tmp_path)]) == 0
    (tmp_path / "README.md").write_text(text.replace("**partly**", "**yes**", 1))
    assert rv.main(["--check", "--repro", str(tmp_path)]) == 1
    # A changed recording changes the table: the README no longer matches until regenerated.
    (tmp_path / "README.md").write_text(text)
    magic = json.loads((tmp_path / "cv2013_magic.json").read_text())
    magic["summary"]["paper/Random/1.0"]["auc"] = 0.9
    (tmp_path / "cv2013_magic.json").write_text(json.dumps(magic))
    assert rv.main(["--check", "--repro", str(tmp_path)]) == 1
    assert rv.main(["--write", "--repro", str(tmp_path)]) == 0
    assert rv.main(["--check", "--repro", str(tmp_path)]) == 0


def test_missing_markers_are_an_error():
    with pytest.raises(ValueError, match="markers"):
        rv.replace_block("no markers here", "x")


def _btt_report(slope_ci, bound_slope, priv=(0.01, 0.005), bound=(0.5, 0.3), alpha_expo=-0.6):
    """Two realizable threshold points, n = 10⁶ and 10⁸; α ∝ n^alpha_expo, m ∝ n^{4/3}."""
    summary = [
        {
            "class": "threshold",
            "setting": "realizable",
            "usable": True,
            "n": n,
            "m": 500.0 * (n / 1e6) ** (4 / 3),
            "seeds": 4,
            "k": n**0.5,
            "teacher_alpha": 0.05 * (n / 1e6) ** alpha_expo,
            "priv_disagree_mean": p,
            "bound_T_over_m": b,
            "priv_error_events_total": 300,
        }
        for n, p, b in zip((1e6, 1e8), priv, bound, strict=True)
    ]
    slopes = [
        {
            "class": "threshold",
            "setting": "realizable",
            "metric": "priv_disagree",
            "slope": sum(slope_ci) / 2,
            "ci_low": slope_ci[0],
            "ci_high": slope_ci[1],
            "theorem_exponent": -2 / 3,
            "bound_slope": bound_slope,
            "decades": 2.0,
        }
    ]
    return {"config": {"noise": 0.05, "beta": 0.05}, "summary": summary, "slopes": slopes}


def test_btt_log_factors_by_hand():
    rep = _btt_report((-0.7, -0.6), -0.6)
    logs = rv.btt_log_factors(rep["summary"], -2 / 3, 0.05)
    assert logs["alpha"] == pytest.approx(-0.6 + 2 / 3)  # α ∝ n^-0.6 against e = −2/3
    # √(log(m/β)/(2m)) with m = 500 and 500·100^{4/3}: slope −2/3 + ½·ln(ln(m₂/β)/ln(m₁/β))/ln(100)
    m1, m2 = 500.0, 500.0 * 100 ** (4 / 3)
    want = 0.5 * math.log(math.log(m2 / 0.05) / math.log(m1 / 0.05)) / math.log(100)
    assert logs["hoeffding"] == pytest.approx(want)
    assert logs["kn"] == pytest.approx(-0.5)
    lo, hi = rv.btt_m_shortfall(rep["summary"], 0.05)
    need = 4 * math.log(1 / (0.05 * 0.05)) / 0.05**2
    assert lo == pytest.approx(
        min(need / 500, 4 * math.log(1 / (0.05 * 100**-0.6 * 0.05)) / (0.05 * 100**-0.6) ** 2 / m2)
    )
    assert hi == pytest.approx(need / 500)


def test_btt_rate_rows_read_the_theorem_as_an_upper_bound():
    # steeper than the exponent (and than the bound's own slope): an upper bound allows it
    rows = rv.btt_verdicts_from(_btt_report((-1.1, -1.0), -0.6))
    assert [r.verdict for r in rows] == ["yes", "yes"]
    assert "as steep as e without them: yes" in rows[1].numbers and "not met" in rows[1].numbers
    # shallower than e by 0.05, within the log factors (α term +0.067): yes, with the distance stated
    rows = rv.btt_verdicts_from(_btt_report((-0.617, -0.58), -0.6))
    assert rows[1].verdict == "yes" and "as steep as e without them: no, by 0.050" in rows[1].numbers
    # shallower than e + ℓ: the slope point fails, named, by how much
    rows = rv.btt_verdicts_from(_btt_report((-0.55, -0.50), -0.6))
    assert rows[1].verdict == "partly" and rows[1].failing == ("slope",)
    assert "shallower than e + ℓ = -0.667 +0.067 = -0.600 by 0.050" in rows[1].cause


def test_btt_bound_row_fails_when_an_error_exceeds_t_over_m():
    rows = rv.btt_verdicts_from(_btt_report((-0.7, -0.6), -0.65, priv=(0.01, 0.4), bound=(0.5, 0.3)))
    assert rows[0].verdict == "partly"
    assert rows[1].verdict == "partly" and rows[1].failing == ("Cor 4.1's bound",)
    assert "n=1e+08" in rows[1].cause


def test_union_bound_dropped_rescales_both_tests():
    data = _ligett_rows([10.0, 10.0], [20.0, 20.0], [1.0, 1.0], [0, 0], [0, 0], alphas=(0.05, 0.075))
    for method in ("noise_reduction", "doubling"):
        for a in data[method]:
            data[method][a] = {**data[method][a], "mean_epsilon_test": 9.0, "mean_epsilon_hypotheses": 1.0}
    est = rv.ligett_union_bound_dropped(data, n=1000, levels=1000, gamma=0.1)
    t_d = math.ceil(math.log2(4.0 * 1000)) + 1
    assert est[0.05]["doubling_levels"] == t_d
    assert est[0.05]["noise_reduction"] == pytest.approx(9.0 * math.log(20) / math.log(20000) + 1.0)
    assert est[0.05]["doubling"] == pytest.approx(9.0 * math.log(10) / math.log(t_d / 0.1) + 1.0)


def test_soft_label_row_fails_when_a_released_bin_misses():
    soft = {
        "queries": 10,
        "shard_size": 100,
        "radius_theorem": 0.3,
        "gamma_theorem": 0.6,
        "gamma_used": 0.5,
        "releases": [
            {
                "mode": "paper",
                "k": 5,
                "answered": 10,
                "fraction_bin_missed": 0.0,
                "fraction_within_radius": 1.0,
                "expected_score_spread": 0.9,
                "max_error": 0.2,
            },
            {
                "mode": "paper",
                "k": 5,
                "answered": 10,
                "fraction_bin_missed": 0.1,
                "fraction_within_radius": 0.9,
                "expected_score_spread": 0.9,
                "max_error": 0.6,
            },
        ],
    }
    assert [r.verdict for r in rv.btt_soft_verdicts_from(soft)] == ["yes", "partly"]


def test_mse_margin_row_fails_for_a_nominal_gap():
    s = _summary(
        "p",
        {"S": [(0.247, 0.0002)] * 3 + [(0.230, 0.0002)] * 3, "A": [(0.248, 0.0002)] * 6, "R": [(0.249, 0.0002)] * 6},
        metric="mse",
    )
    # 0.001 below the best other is > 2 s.e. (a "significant" lead) but not a gap Fig. 1b can show
    assert [p.ok for p in rv.cv_outperforms(s, "p", "S", ["A", "R"], "mse")] == [True] * 6
    pts = rv.cv_material_margin(s, "p", "S", ["A", "R"], rv.CV_MSE_MARGIN)
    assert [p.ok for p in pts] == [False] * 3 + [True] * 3
    assert pts[0].numbers == "α=0.3: 0.247 vs 0.248 (gap +0.0010)"
    assert pts[0].miss == "S's MSE only 0.0010 below A's (< 0.005)"
    notes = rv._near_half(s, "p", ["S", "A", "R"], pts)
    assert notes and "within 0.0030 of 0.25" in notes[0]


def test_one_chosen_protocol_is_evaluated_on_both_data_sets_at_the_papers_100_rounds():
    protos = rv.cv_protocols(rv.REPRO)
    chosen = [p for p in protos if p.label.startswith(rv.CV_CHOSEN)]
    assert [p.dataset for p in chosen] == ["Magic", "Adult"]
    assert protos[:2] == chosen  # listed first
    for p in chosen:
        assert p.prefix == "paper-zscore" and p.splits == ("alphaSplit", "dataSplit")
        assert "post hoc" in p.label
        assert all(
            p.summary[f"paper-zscore/{m}/{a}"]["runs"] == 100 for m in ("Stability", "Random") for a in rv.CV_ALPHAS
        )
    rows = [v for v in rv.cv_verdicts(rv.REPRO) if v.protocol.startswith("Magic: " + rv.CV_CHOSEN)]
    assert any("a gap Fig. 1b can show" in v.claim for v in rows)


def test_ligett_table_keeps_the_union_bound_runs_apart():
    rows = [
        {"dataset": "d", "method": "noise_reduction", "alpha": 0.05, "mean_epsilon": 1.0},
        {"dataset": "d", "method": "noise_reduction", "alpha": 0.05, "mean_epsilon": 0.5, "union_bound": False},
        {"dataset": "d", "method": "noise_reduction", "alpha": 0.1, "mean_epsilon": 0.7, "union_bound": True},
    ]
    t = rv.ligett_table(rows)
    assert t["d"]["noise_reduction"][0.05]["mean_epsilon"] == 1.0  # recorded before the flag: union bound
    assert t["d"]["noise_reduction"][0.1]["mean_epsilon"] == 0.7
    assert t["d/no-union"]["noise_reduction"][0.05]["mean_epsilon"] == 0.5


def _wu_added(fm: float, oracle: float, fig7: tuple[float, float], fig7_se: float = 0.01) -> dict:
    eps = [0.1, 0.2, 0.3, 5.0]
    summary = {}
    for e in eps:
        for m, v in {
            "NonPrivate": 0.03,
            "DataIndependent": 0.05,
            "Oracle": oracle,
            "FM": fm if e < 5.0 else 0.05,
            "Tuned-R2": 0.05,
            "Tuned-R2-exact": 0.5,
            "Tuned-R2-expnorm": 0.05,
            "DI-expnorm": 0.04,
            "Oracle-expnorm": 0.035,
        }.items():
            summary[f"{m}/{e}"] = {"mean": v, "se": 0.001}
    return {
        "epsilons": eps,
        "config": {"repeats": 10},
        "results": {"private": {"summary": summary, "to_mg2_per_week2": 4900.0, "to_mg2_per_day2": 100.0}},
        "fig7": {
            "protocol": "private",
            "repeats": 30,
            "to_mg2_per_week2": 4900.0,
            "to_mg2_per_day2": 100.0,
            "summary": {"exact": {"0.1": {"mean": fig7[0], "se": fig7_se}, "0.9": {"mean": fig7[1], "se": fig7_se}}},
        },
    }


def test_wu_added_rows_read_the_printed_ratios_unit_free():
    rows = rv.wu_added_verdicts(_wu_added(fm=1.24, oracle=0.1, fig7=(0.505, 0.29)))
    v = [r.verdict for r in rows]
    assert v[0] == "yes" and "ratio 12.40 vs printed 12.4" in rows[0].numbers  # 1.24/0.1 = 22.57/1.82
    assert v[1] == "partly"  # FM ≥ 2 × every output perturbation method below ε = 5, not at ε = 5
    assert v[2] == "yes"  # FM far from non-private below ε = 5, within 2× at ε = 5
    assert [r.verdict for r in rows if "ε = 0.3" in r.claim] == ["yes", "no", "yes"]
    assert rows[-1].verdict == "yes" and "ratio 1.74" in rows[-1].numbers
    # FM only 3× Oracle: the printed ratio is missed; Fig. 7 flat: the drop is missed.
    rows = rv.wu_added_verdicts(_wu_added(fm=0.3, oracle=0.1, fig7=(0.3, 0.29)))
    assert rows[0].verdict == "no" and rows[1].verdict == "no"
    assert rows[-1].verdict == "no"
