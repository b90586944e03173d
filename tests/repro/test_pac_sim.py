"""The fast exact PAC simulation (pate_stab.repro.pac_sim*), the bootstrap slope, recipes/repro/pac_rates.py --quick."""

from __future__ import annotations

import argparse
import json
import math

import numpy as np
import pytest
import torch

from pate_stab.aggregation.votes import distance_to_instability
from pate_stab.repro.pac_sim import (
    agnostic_offsets,
    distance_to_instability_np,
    near_queries,
    realizable_erm_error_limit,
    realizable_offsets,
    segmented_threshold_erm,
    shard_sizes,
    student_offset,
)
from pate_stab.repro.pac_sim_halfspaces import (
    _window_binds,
    halfspace_near_queries,
    halfspace_realizable_lines,
    halfspace_student,
    line_disagreement,
    max_vertical_margin,
)
from pate_stab.repro.pac_sim_homogeneous import (
    homogeneous_agnostic_directions,
    homogeneous_disagreement,
    homogeneous_erm,
    homogeneous_error,
    window_direction_erm,
    wrap_turns,
)
from pate_stab.theory.erm_classes import threshold_erm
from pate_stab.theory.pac import bootstrap_log_regression, bootstrap_loglog_slope
from tests._recipes import load_recipe


def _synthetic(slope: float, ns: np.ndarray, seeds: int, rel_noise: float, rng: np.random.Generator) -> list:
    return [2.0 * n**slope * (1.0 + rel_noise * rng.standard_normal(seeds)) for n in ns]


def test_bootstrap_slope_recovers_a_known_slope_and_covers_it():
    rng = np.random.default_rng(0)
    ns = np.geomspace(1e6, 1e9, 6)
    fit = bootstrap_loglog_slope(ns, _synthetic(-0.5, ns, 40, 0.3, rng), reps=2000, seed=1)
    assert fit.slope == pytest.approx(-0.5, abs=0.03)
    assert fit.low < -0.5 < fit.high
    assert fit.high - fit.low < 0.1  # 3 decades, 40 seeds at 30 % noise: tight
    assert not (fit.low <= -2.0 / 3.0 <= fit.high)  # and it can exclude a wrong reference


def test_bootstrap_interval_widens_with_fewer_seeds_and_has_near_nominal_coverage():
    ns = np.geomspace(1e6, 1e8, 4)
    covered, widths = 0, []
    for rep in range(100):
        rng = np.random.default_rng(100 + rep)
        fit = bootstrap_loglog_slope(ns, _synthetic(-0.4, ns, 20, 0.5, rng), reps=400, seed=rep)
        covered += fit.low <= -0.4 <= fit.high
        widths.append(fit.high - fit.low)
    assert covered >= 85  # nominal 95 %; the percentile bootstrap runs a little short at 20 seeds
    few = bootstrap_loglog_slope(ns, _synthetic(-0.4, ns, 4, 0.5, np.random.default_rng(7)), reps=400)
    assert few.high - few.low > np.median(widths)


def test_log_regression_recovers_known_coefficients_and_covers_them():
    """log(mean y) = 0.5 + log(k/n) + 0·log n, seeds with 30 % noise: recovered, covered, a wrong value excluded."""
    rng = np.random.default_rng(3)
    kn = [(1e5, 1e7), (1e5, 1e8), (1e5, 1e9), (2e5, 1e8), (4e5, 1e8), (8e5, 1e8)]
    design = [[1.0, math.log(k / n), math.log(n)] for k, n in kn]
    per = [math.exp(0.5) * (k / n) * (1.0 + 0.3 * rng.standard_normal(40)) for k, n in kn]
    fit = bootstrap_log_regression(design, per, names=("c", "log(k/n)", "log n"), reps=1000, seed=1)
    assert fit.coef[1] == pytest.approx(1.0, abs=0.05) and fit.coef[2] == pytest.approx(0.0, abs=0.05)
    assert fit.low[1] < 1.0 < fit.high[1] and fit.low[2] < 0.0 < fit.high[2]
    assert fit.high[1] - fit.low[1] < 0.2 and not fit.low[1] <= 0.7 <= fit.high[1]
    # the two-column case is bootstrap_loglog_slope's fit
    ns = np.array([1e6, 1e7, 1e8])
    vals = [2.0 * n**-0.5 * (1.0 + 0.2 * rng.standard_normal(10)) for n in ns]
    two = bootstrap_log_regression([[1.0, math.log(n)] for n in ns], vals, names=("c", "s"), reps=300, seed=4)
    one = bootstrap_loglog_slope(ns, vals, reps=300, seed=4)
    assert two.coef[1] == pytest.approx(one.slope, abs=1e-12)
    with pytest.raises(ValueError, match="identifiable"):  # k fixed: log(k/n) and log n are collinear
        bootstrap_log_regression(
            [[1.0, math.log(1e5 / n), math.log(n)] for n in ns], vals, names=("c", "a", "b"), reps=10
        )


def test_pac_rates_cause_moves_k_and_n_one_at_a_time(tmp_path):
    """--cause at small sizes: m, T fixed; set "n" keeps k, set "k" keeps n, set "eps" moves w alone."""
    pac_rates = load_recipe("repro/pac_rates.py")
    res = pac_rates.main(
        ["--cause", "--cause-n0", "1e6", "--cause-n-factors", "1", "4", "--cause-k-n", "4e6"]
        + ["--cause-k-factors", "1", "2", "--cause-epsilons", "6", "--cause-seeds", "2", "--bootstrap", "50"]
        + ["--out", str(tmp_path), "--stem", "cause"]
    )
    pts = res["points"]
    assert [p["set"] for p in pts] == ["n", "n+k", "k", "eps"]  # (4e6, k0) is run once, in both sets
    k0, m, t = res["base"]["k0"], res["base"]["m"], res["base"]["T"]
    assert all(p["m"] == m and p["T"] == t for p in pts)
    assert [p["k"] for p in pts] == [k0, k0, 2 * k0, k0] and [p["n"] for p in pts] == [
        10**6,
        4 * 10**6,
        4 * 10**6,
        10**6,
    ]
    w = {p["epsilon"]: p["threshold_w"] for p in pts}
    assert len(w) == 2 and w[6.0] == pytest.approx(w[3.0] / 2)  # paper calibration: λ ∝ 1/ε, w ∝ λ
    assert pts[2]["teacher_disagree_mean"] == pytest.approx(2 * pts[1]["teacher_disagree_mean"], rel=0.05)
    reg = res["regressions"]["k_over_n_and_n"]
    assert reg["points"] == 3 and {"log(k/n)", "log n"} <= set(reg)
    saved = json.loads((tmp_path / "cause.json").read_text())
    assert saved["points"] == pts and saved["cpu_seconds"] > 0
    assert len((tmp_path / "cause_runs.csv").read_text().splitlines()) == 1 + sum(p["seeds"] for p in pts)


def _count_data(ns, seeds, events_per_seed_first, slope, m_expo, rng):
    """Per-seed h_priv disagreement like the runs': Poisson error events over m queries, each worth ½.

    The error rate is c·n^slope, m ∝ n^m_expo, so the events per seed grow as n^(slope + m_expo)
    from ``events_per_seed_first`` at the smallest n.
    """
    ms = 500.0 * (ns / ns[0]) ** m_expo
    rate = 2.0 * events_per_seed_first / ms[0] * (ns / ns[0]) ** slope  # error events per query
    return [0.5 * rng.poisson(r * m, size=s) / m for r, m, s in zip(rate, ms, seeds, strict=True)]


@pytest.mark.statistical
@pytest.mark.parametrize(
    "setting",
    [
        # the recorded runs' grids, seeds per n and fewest events per seed at the smallest n
        # (threshold agnostic: 5 n, 24 seeds, 127 events at n = 10⁷; realizable: 7 n, 48 seeds,
        # 210 events at n = 10⁶; halfspace: 6 n, 256 … 16 seeds, 330 events at n = 10⁶)
        ("agnostic", np.geomspace(1e7, 10**9.5, 5), [24] * 5, 127 / 24, -0.66, 4 / 5, 300),
        pytest.param(
            ("realizable", np.geomspace(1e6, 1e9, 7), [48] * 7, 210 / 48, -0.58, 4 / 3, 400), marks=pytest.mark.slow
        ),
        pytest.param(
            ("halfspace", np.geomspace(1e6, 10**8.5, 6), [256, 128, 64, 32, 16, 16], 330 / 256, -0.56, 4 / 3, 400),
            marks=pytest.mark.slow,
        ),
    ],
    ids=lambda s: s[0],
)
def test_bootstrap_interval_covers_on_count_data_like_the_runs(setting):
    """Nominal 95 % intervals (the recipe's percentile bootstrap, 2000 reps) cover the true slope ≥ 90 % of sweeps.

    Each simulated sweep draws Poisson error counts at the recorded runs' n, seeds per n and event
    rates. Measured (200 sweeps, this seed): agnostic 188, realizable 189, halfspace 186 of 200;
    the --quick grids give 180 / 199 (realizable) and 137 / 199 (agnostic, 2 seeds), which is why
    --quick shows no interval. α (false failure) at the measured coverage: P(Binomial(300, 0.94)
    < 270) = 2.5·10⁻³ (agnostic), P(Binomial(400, 0.93) < 360) = 1·10⁻² (slow cases); at a true
    95 %: 1·10⁻⁴ and 1·10⁻⁵. The generator's seed is fixed, so a given checkout passes or fails
    deterministically.
    """
    _, ns, seeds, first, slope, m_expo, sims = setting
    rng = np.random.default_rng(2026)
    covered = 0
    for rep in range(sims):
        fit = bootstrap_loglog_slope(ns, _count_data(ns, seeds, first, slope, m_expo, rng), reps=2000, seed=rep)
        covered += fit.low <= slope <= fit.high
    assert covered >= 0.9 * sims, (covered, sims)


def test_pac_rates_cause_agnostic_uses_the_agnostic_setting_and_skips_an_unidentifiable_fit(tmp_path):
    pac_rates = load_recipe("repro/pac_rates.py")
    res = pac_rates.main(
        ["--cause", "--cause-setting", "agnostic", "--cause-n0", "1e7", "--cause-n-factors", "1", "--cause-k-n", "1e7"]
        + ["--cause-k-factors", "1", "--cause-epsilons", "--cause-seeds", "1", "--out", str(tmp_path)]
    )
    assert res["base"]["setting"] == "agnostic" and res["base"]["m"] == round(5e-3 * 1e7**0.8)  # Thm 4.4's m
    assert [p["set"] for p in res["points"]] == ["n+k"]
    assert "skipped" in res["regressions"]["k_over_n_and_n"]  # one point: k and n not separable


def test_bootstrap_slope_rejects_mismatched_input_and_handles_too_few_points():
    with pytest.raises(ValueError):
        bootstrap_loglog_slope([1.0, 2.0], [np.ones(3)])
    assert math.isnan(bootstrap_loglog_slope([1.0], [np.ones(3)]).slope)


def test_segmented_threshold_erm_equals_threshold_erm():
    rng = np.random.default_rng(1)
    k = 400
    c = rng.integers(0, 15, k)
    x = np.concatenate([np.sort(rng.random(ci)) for ci in c])
    y = rng.integers(0, 2, x.shape[0])
    shard = np.repeat(np.arange(k), c)
    ours = segmented_threshold_erm(x, y, c)
    ref = threshold_erm(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(shard), k)[0].numpy()
    assert np.array_equal(ours, ref)


def _full_threshold_offsets(n_per: int, k: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    x = rng.random(n_per * k)
    y = (x >= 0.5).astype(np.int64)
    y = np.where(rng.random(x.shape[0]) < noise, 1 - y, y)
    shard = np.repeat(np.arange(k), n_per)
    return threshold_erm(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(shard), k)[0].numpy() - 0.5


def test_realizable_offsets_have_the_law_of_the_full_erm():
    rng = np.random.default_rng(2)
    k, n_per = 20000, 200
    full = np.abs(_full_threshold_offsets(n_per, k, 0.0, rng))
    fast = np.abs(realizable_offsets(np.full(k, n_per), 0.5, rng))
    se = math.hypot(full.std(), fast.std()) / math.sqrt(k)
    assert abs(full.mean() - fast.mean()) < 4 * se
    # and the Poisson-limit formula, 1/(2n) per boundary, is the right scale (n′ = 200)
    assert fast.mean() == pytest.approx(realizable_erm_error_limit(n_per), rel=0.05)
    # a wrong width (the classic slip: positives on the full [0, 1]) is detected by this comparison
    wrong = np.abs(realizable_offsets(np.full(k, n_per), 0.5, rng) * 2.0)
    assert abs(full.mean() - wrong.mean()) > 4 * se


def test_agnostic_window_erm_has_the_law_of_the_full_erm():
    rng = np.random.default_rng(3)
    k, n_per, eta = 6000, 300, 0.1
    full = np.abs(_full_threshold_offsets(n_per, k, eta, rng))
    fast, half = agnostic_offsets(np.full(k, n_per), eta, rng, window=16.0)
    fast = np.abs(fast)
    assert half == pytest.approx(16.0 / n_per)
    se = math.hypot(full.std(), fast.std()) / math.sqrt(k)
    assert abs(full.mean() - fast.mean()) < 4 * se
    assert (full > half).mean() < 1e-3  # the window holds the full ERM


def test_distance_matches_the_releasers_distance():
    k = 11
    ones = np.arange(k + 1)
    counts = torch.from_numpy(np.stack([k - ones, ones], axis=1))
    assert np.array_equal(distance_to_instability_np(ones, k), distance_to_instability(counts).numpy())


def test_near_queries_cover_exactly_the_steps_below_the_cutoff():
    rng = np.random.default_rng(4)
    k = 101
    offsets = np.sort(rng.normal(0.002, 0.01, k))
    cutoff, m = 10.0, 200_000
    nq = near_queries(offsets, m, cutoff, rng)
    grid = np.linspace(-0.2, 0.2, 2_000_001)
    ones = np.searchsorted(offsets, grid, side="right")
    dist = distance_to_instability_np(ones, k)
    near = dist < cutoff
    step = grid[1] - grid[0]
    assert nq.near_length == pytest.approx(near.sum() * step, rel=1e-3)
    clean = (grid >= 0).astype(int)
    wrong = (~near) & ((2 * ones > k).astype(int) != clean)
    expected_far_wrong = m * wrong.sum() * step
    assert abs(nq.far_wrong - expected_far_wrong) < 5 * math.sqrt(expected_far_wrong + 1)
    assert nq.ones.shape[0] == pytest.approx(m * nq.near_length, rel=0.2)
    assert (distance_to_instability_np(nq.ones, k) < cutoff).all()
    # every drawn query's vote count is the teachers' vote at its position
    assert np.array_equal(nq.ones, np.searchsorted(offsets, nq.offsets, side="right"))
    assert np.array_equal(nq.clean, (nq.offsets >= 0).astype(np.int64))


def test_near_queries_refuse_a_cutoff_that_reaches_unanimity():
    with pytest.raises(ValueError, match="cutoff"):
        near_queries(np.zeros(5), 100, 10.0, np.random.default_rng(0))


def test_student_follows_the_released_labels_and_stays_within_the_sentinels():
    rng = np.random.default_rng(5)
    offsets = np.sort(rng.normal(0.0, 0.01, 301))
    nq = near_queries(offsets, 100_000, 20.0, rng)
    truth = nq.clean.copy()
    t = student_offset(nq, truth, offsets, 100_000, rng)
    assert nq.lo - 1e-3 <= t <= nq.hi + 1e-3
    # perfect labels: the ERM cut separates the labelled points, so it lies between the largest 0 and smallest 1
    zeros, ones = nq.offsets[truth == 0], nq.offsets[truth == 1]
    if zeros.size and ones.size:
        assert zeros.max() <= t <= ones.min()


def test_bound_excess_uses_no_gamma_when_realizable():
    """Cor 4.1's T/m at the recorded threshold-realizable point n = 10⁶ (m = 500, k = 63,667), by hand.

    α = V·k/n = 63,667/10⁶ = 0.063667, β = 0.05, γ = 0 (the target is a threshold):
    T = ⌈3(α·m + √(m·ln(m/β)/2))⌉ = ⌈3(31.8335 + √(500·ln(10⁴)/2))⌉ = ⌈3(31.8335 + √2302.585)⌉
      = ⌈3(31.8335 + 47.9853)⌉ = ⌈239.456⌉ = 240, so T/m = 240/500 = 0.48.
    (With γ = η = 0.05 wrongly added: ⌈239.456 + 3·0.05·500⌉ = ⌈314.456⌉ = 315, T/m = 0.63.)
    Agnostic at the same α, m: ⌈314.456⌉/500 − 3·0.05 = 0.63 − 0.15 = 0.48.
    """
    pac_rates = load_recipe("repro/pac_rates.py")
    setting = argparse.Namespace(teacher_alpha=63_667 / 1_000_000)
    assert pac_rates.bound_excess(setting, 500, True, 0.05, 0.05) == pytest.approx(0.48, abs=1e-12)
    assert pac_rates.bound_excess(setting, 500, False, 0.05, 0.05) == pytest.approx(0.48, abs=1e-12)


def test_rebound_rewrites_the_bound_from_the_recorded_settings_only():
    pac_rates = load_recipe("repro/pac_rates.py")
    rec = {
        "config": {"noise": 0.05, "beta": 0.05},
        "summary": [
            {
                "class": "threshold",
                "setting": "realizable",
                "usable": True,
                "n": n,
                "m": m,
                "teacher_alpha": a,
                "bound_T_over_m": 9.9,
                "priv_disagree_mean": 0.001,
                "seeds": seeds,
                "priv_error_events_total": 150,
            }
            for n, m, a, seeds in ((1e6, 500, 0.063667, 12), (1e7, 10772, 0.02, 8))
        ],
        "slopes": [
            {
                "class": "threshold",
                "setting": "realizable",
                "metric": "priv_disagree",
                "ci_low": -0.7,
                "ci_high": -0.5,
                "bound_slope": 0.0,
                "excludes_bound": True,
            }
        ],
    }
    out = pac_rates.rebound(rec)
    assert out["summary"][0]["bound_T_over_m"] == pytest.approx(0.48, abs=1e-12)
    t2 = math.ceil(3 * (0.02 * 10772 + math.sqrt(10772 * math.log(10772 / 0.05) / 2)))
    assert out["summary"][1]["bound_T_over_m"] == pytest.approx(t2 / 10772, abs=1e-12)
    want = math.log(t2 / 10772 / 0.48) / math.log(10.0)
    assert out["slopes"][0]["bound_slope"] == pytest.approx(want, abs=1e-9)
    assert out["slopes"][0]["excludes_bound"] == (not -0.7 <= want <= -0.5)
    assert rec["summary"][0]["bound_T_over_m"] == 9.9  # the input is not modified
    # 8 seeds at n = 10⁷: the slope's interval is not supported
    assert out["slopes"][0]["interval_supported"] is False and "8 seeds" in out["slopes"][0]["indicative_because"]


def test_shard_sizes_sum_to_n():
    s = shard_sizes(10_000, 7, np.random.default_rng(0))
    assert s.sum() == 10_000 and s.shape == (7,)


def test_pac_rates_quick_mode_runs_and_shows_no_interval_it_cannot_support(tmp_path, capsys):
    pac_rates = load_recipe("repro/pac_rates.py")

    report = pac_rates.main(["--quick", "--out", str(tmp_path)])
    lines = [x for x in capsys.readouterr().out.splitlines() if x.startswith("slope ")]
    assert len(lines) == len(report["slopes"]) > 0
    for s, line in zip(report["slopes"], lines, strict=True):
        assert s["interval_supported"] is False  # --quick: 2–6 seeds per n
        assert "indicative" in line and "[" not in line and "seeds" in s["indicative_because"]
    saved = json.loads((tmp_path / "pac_rates.json").read_text())
    assert saved["slopes"] and {s["metric"] for s in saved["slopes"]} >= {"priv_disagree", "student_disagree"}
    assert {(s["class"], s["setting"]) for s in saved["slopes"]} >= {
        ("halfspace", "realizable"),
        ("halfspace_homogeneous", "agnostic"),
    }
    hh = [r for r in saved["summary"] if r["class"] == "halfspace_homogeneous"]
    assert hh and all(r["priv_disagree_mean"] > 0 and r["teacher_disagree_mean"] > 0 for r in hh)
    assert "nonprivate_error" in (tmp_path / "pac_rates_runs.csv").read_text().splitlines()[0]
    hs = [s for s in saved["summary"] if s["class"] == "halfspace"]
    assert hs and all("student_nonseparable_runs" in s and s["nonprivate_disagree_mean"] > 0 for s in hs)
    for s in report["slopes"]:
        assert s["ci_low"] <= s["slope"] <= s["ci_high"] or math.isnan(s["ci_low"])
        assert math.isfinite(s["bound_slope"])
    usable = [s for s in saved["summary"] if s.get("usable")]
    # Cor 4.1 (ii): misclassification ≤ T/m. Realizable: misclassification = disagreement and the
    # recorded value is T/m itself; agnostic (γ = η = 0.05): γ + (1 − 2γ)·disagreement ≤ T/m, recorded as T/m − 3γ.
    for s in usable:
        gamma = 0.0 if s["setting"] == "realizable" else 0.05
        assert gamma + (1 - 2 * gamma) * s["priv_disagree_mean"] <= s["bound_T_over_m"] + 3 * gamma
    for name in ("pac_rates_runs.csv", "pac_rates_summary.csv", "pac_rates_slopes.csv", "pac_rates.png"):
        assert (tmp_path / name).stat().st_size > 0


# --- halfspaces in R² (realizable) -----------------------------------------------------------


def _segments(u: np.ndarray, v: np.ndarray, mask: np.ndarray):
    """Per-row points of (k, p) arrays under ``mask``, split by class, as max_vertical_margin takes them."""
    pos, neg = mask & (v >= 0), mask & (v < 0)
    return (u[pos], v[pos], pos.sum(1), u[neg], v[neg], neg.sum(1))


def test_line_disagreement_is_the_area_between_the_lines():
    rng = np.random.default_rng(10)
    a, b = rng.normal(0, 0.3, 50), rng.normal(0, 0.1, 50)
    grid = (np.arange(200_000) + 0.5) / 200_000
    numeric = np.abs(a[:, None] * grid[None, :] + b[:, None]).mean(1)
    assert np.allclose(line_disagreement(a, b), numeric, atol=1e-9)


def test_max_vertical_margin_is_the_max_and_the_window_gives_the_full_samples_answer():
    rng = np.random.default_rng(11)
    k, p = 150, 40
    u, v = rng.random((k, p)), rng.random((k, p)) - 0.5
    full = max_vertical_margin(*_segments(u, v, np.ones((k, p), dtype=bool)), np.full(k, 50.0))
    alpha, beta, top, bottom = full
    assert (top > bottom).all()  # realizable: a consistent line exists and the gap is positive
    # G(α*) is the maximum: no α on a fine grid around it does better
    grid = alpha[:, None] + np.linspace(-0.05, 0.05, 801)[None, :]
    pos = np.where(v >= 0, v, np.inf)[:, None, :] - grid[:, :, None] * np.where(v >= 0, u, 0.0)[:, None, :]
    neg = np.where(v < 0, v, -np.inf)[:, None, :] - grid[:, :, None] * np.where(v < 0, u, 0.0)[:, None, :]
    g_grid = (pos.min(2) - neg.max(2)).max(1)
    assert (top - bottom >= g_grid - 1e-12).all()
    # the window's answer is the full sample's wherever the check says nothing outside binds
    half = 5.0 / p
    win = max_vertical_margin(*_segments(u, v, np.abs(v) <= half), np.full(k, 50.0))
    bad = _window_binds(win[0], win[2], win[3], np.full(k, half), np.full(k, 50.0))
    assert 0.05 < bad.mean() < 0.95  # both branches exercised
    assert np.array_equal(win[0][~bad], alpha[~bad]) and np.array_equal(win[1][~bad], beta[~bad])


def _full_halfspace_errors(n_per: int, k: int, rng: np.random.Generator) -> np.ndarray:
    u, v = rng.random((k, n_per)), rng.random((k, n_per)) - 0.5
    a, b, _, _ = max_vertical_margin(*_segments(u, v, np.ones((k, n_per), dtype=bool)), np.full(k, 50.0))
    return line_disagreement(a, b)


def test_halfspace_lines_have_the_law_of_the_full_erm():
    rng = np.random.default_rng(12)
    k, n_per = 6000, 120
    full = _full_halfspace_errors(n_per, k, rng)
    a, b, info = halfspace_realizable_lines(np.full(k, n_per), rng)
    fast = line_disagreement(a, b)
    assert info["rounds"] >= 1  # the window grew for some shards
    se = math.hypot(full.std(), fast.std()) / math.sqrt(k)
    assert abs(full.mean() - fast.mean()) < 4 * se
    # a wrong sample size (the slip of drawing the window's points at half the density) is detected
    a2, b2, _ = halfspace_realizable_lines(np.full(k, n_per // 2), rng)
    assert abs(full.mean() - line_disagreement(a2, b2).mean()) > 4 * se


def test_halfspace_near_queries_count_votes_exactly_and_cover_the_near_region():
    rng = np.random.default_rng(13)
    k, m, cutoff = 201, 400_000, 15.0
    a, b, _ = halfspace_realizable_lines(np.full(k, 200), rng)
    hq = halfspace_near_queries(a, b, m, cutoff, rng, bins=16)
    brute = (a[None, :] * hq.u[:, None] + b[None, :] <= hq.v[:, None]).sum(1)
    assert np.array_equal(hq.ones, brute)
    assert (distance_to_instability_np(hq.ones, k) < cutoff).all()
    assert np.array_equal(hq.clean, (hq.v >= 0).astype(np.int64))
    # far queries kept for the student carry the majority vote
    far_ones = (a[None, :] * hq.far_u[:, None] + b[None, :] <= hq.far_v[:, None]).sum(1)
    assert np.array_equal(hq.far_label, (2 * far_ones > k).astype(np.int64))
    assert (distance_to_instability_np(far_ones, k) >= cutoff).all()
    # expected counts against a Monte Carlo over the whole square
    x = rng.random(600_000)
    y = rng.random(600_000) - 0.5
    ones = np.zeros(x.shape[0], dtype=np.int64)
    for j in range(k):
        ones += a[j] * x + b[j] <= y
    near = distance_to_instability_np(ones, k) < cutoff
    exp_near = m * near.mean()
    assert abs(hq.ones.shape[0] - exp_near) < 5 * math.sqrt(exp_near) + 0.02 * exp_near
    wrong = (~near) & ((2 * ones > k) != (y >= 0))
    exp_wrong = m * wrong.mean()
    assert abs(hq.far_wrong - exp_wrong) < 5 * math.sqrt(exp_wrong + 1) + 0.02 * exp_wrong


def test_halfspace_student_separates_clean_labels_and_is_checked():
    rng = np.random.default_rng(14)
    k = 501
    a, b, _ = halfspace_realizable_lines(np.full(k, 300), rng)
    hq = halfspace_near_queries(a, b, 200_000, 30.0, rng, bins=16)
    alpha, beta, separable, verified = halfspace_student(hq, hq.clean.copy())
    assert separable and verified
    yy = np.concatenate([hq.clean, hq.far_label])
    uu, vv = np.concatenate([hq.u, hq.far_u]), np.concatenate([hq.v, hq.far_v])
    if (hq.far_label == (hq.far_v >= 0)).all():  # all labels clean: the student's line separates them
        assert ((vv >= alpha * uu + beta) == (yy == 1)).all()
    # labels that no line separates are reported as such
    flipped = hq.clean.copy()
    if flipped.size >= 2:
        flipped[np.argmax(hq.v)] = 0
        flipped[np.argmin(hq.v)] = 1
        assert not halfspace_student(hq, flipped)[2]


def test_pac_rates_refuses_a_seed_list_that_does_not_match_the_grid(tmp_path, capsys):
    pac_rates = load_recipe("repro/pac_rates.py")

    with pytest.raises(SystemExit):
        pac_rates.main(
            ["--classes", "halfspace", "--halfspace-points", "3", "--halfspace-seeds", "4", "2", "--out", str(tmp_path)]
        )
    assert "--halfspace-seeds" in capsys.readouterr().err
    assert not (tmp_path / "pac_rates.json").exists()
    with pytest.raises(SystemExit):
        pac_rates.main(["--classes", "ellipse", "--out", str(tmp_path)])
    assert "unknown" in capsys.readouterr().err


def test_pac_rates_jobs_change_nothing_but_time(tmp_path):
    pac_rates = load_recipe("repro/pac_rates.py")

    common = ["--classes", "threshold", "halfspace", "--settings", "realizable", "--bootstrap", "50"]
    common += ["--realizable-n", "1e6", "2e6", "--realizable-points", "2", "--realizable-seeds", "3"]
    common += ["--halfspace-n", "1e6", "2e6", "--halfspace-points", "2", "--halfspace-seeds", "2"]
    one = pac_rates.main([*common, "--out", str(tmp_path / "a")])
    two = pac_rates.main([*common, "--jobs", "2", "--stem", "two", "--out", str(tmp_path / "b")])
    strip = lambda rep: [{k: v for k, v in s.items() if k != "seconds"} for s in rep["summary"]]  # noqa: E731
    assert strip(one) == strip(two) and one["slopes"] == two["slopes"]
    assert (tmp_path / "b" / "two.json").exists() and (tmp_path / "b" / "two_summary.csv").exists()


# --- homogeneous halfspaces in R² (agnostic) -------------------------------------------------


def _brute_homogeneous_erm(phi: np.ndarray, y: np.ndarray) -> tuple[float, int]:
    """First minimal arc midpoint over [−½, ½), errors counted with dot products in R²."""
    events = np.unique(np.concatenate([wrap_turns(phi - 0.25), wrap_turns(phi + 0.25), [-0.5, 0.5]]))
    mids = 0.5 * (events[:-1] + events[1:])
    w = np.stack([np.cos(2 * np.pi * mids), np.sin(2 * np.pi * mids)])
    x = np.stack([np.cos(2 * np.pi * phi), np.sin(2 * np.pi * phi)], axis=1)
    errors = ((x @ w >= 0) != (y[:, None] == 1)).sum(0)
    i = int(np.argmin(errors))
    return float(mids[i]), int(errors[i])


@pytest.mark.parametrize("grid", [None, 16])
def test_homogeneous_erm_sweep_equals_brute_force(grid):
    rng = np.random.default_rng(20)
    k = 400
    c = rng.integers(0, 11, k)
    c[:3] = 0  # empty shards: every direction is an ERM; the rule gives τ = 0
    if grid is None:
        phi = rng.random(c.sum()) - 0.5
    else:  # dyadic angles: coinciding events (ties, zero-length arcs) and events at −½
        phi = wrap_turns(rng.integers(0, grid, c.sum()) / grid)
    y = rng.integers(0, 2, c.sum())
    tau, err, lo, hi = homogeneous_erm(phi, y, c)
    start = np.cumsum(c) - c
    for j in range(k):
        sl = slice(start[j], start[j] + c[j])
        bt, be = _brute_homogeneous_erm(phi[sl], y[sl])
        assert tau[j] == pytest.approx(bt, abs=1e-12) and err[j] == be, j
        assert lo[j] < tau[j] < hi[j]
    assert np.array_equal(tau[:3], np.zeros(3))
    # no direction at all does better than the ERM (the candidate arcs cover the circle)
    dirs = rng.random(500) - 0.5
    for j in range(3, 40):
        sl = slice(start[j], start[j] + c[j])
        pred = np.abs(wrap_turns(phi[sl][:, None] - dirs[None, :])) <= 0.25
        assert (pred != (y[sl][:, None] == 1)).sum(0).min() >= err[j]


def test_homogeneous_error_matches_monte_carlo():
    rng = np.random.default_rng(21)
    n, eta, target = 2_000_000, 0.1, 0.3
    x = rng.standard_normal((n, 2))  # rotationally symmetric input
    w_star = np.array([np.cos(2 * np.pi * target), np.sin(2 * np.pi * target)])
    y = (x @ w_star >= 0) != (rng.random(n) < eta)
    for tau in (0.3, 0.31, 0.37, 0.55, -0.1):
        w = np.array([np.cos(2 * np.pi * tau), np.sin(2 * np.pi * tau)])
        pred = x @ w >= 0
        emp, dis = float((pred != y).mean()), float((pred != (x @ w_star >= 0)).mean())
        err = float(homogeneous_error(tau, eta, target))
        se = math.sqrt(err * (1 - err) / n)
        assert abs(emp - err) < 4 * se + 1e-12
        assert abs(dis - float(homogeneous_disagreement(tau, target))) < 4 * math.sqrt(dis * (1 - dis) / n) + 1e-12
        if tau != target:  # a factor slip (|θ − θ*|/(2π) for the disagreement) is detected
            wrong = eta + (1 - 2 * eta) * abs(float(wrap_turns(tau - target)))
            assert abs(emp - wrong) > 4 * se
    with pytest.raises(ValueError, match="noise"):
        homogeneous_error(0.1, 0.5)


def _full_homogeneous_shards(k: int, p: int, eta: float, rng: np.random.Generator):
    phi = rng.random((k, p)) - 0.5
    clean = np.abs(phi) <= 0.25  # target τ* = 0
    y = np.where(rng.random((k, p)) < eta, ~clean, clean).astype(np.int64)
    return phi, y


def test_window_direction_erm_is_the_full_erm_wherever_that_lies_inside_the_window():
    rng = np.random.default_rng(22)
    k, p, eta, window = 3000, 300, 0.05, 10.0
    phi, y = _full_homogeneous_shards(k, p, eta, rng)
    tau, _, lo, hi = homogeneous_erm(phi.ravel(), y.ravel(), np.full(k, p))
    half = window / (2 * p)  # W of homogeneous_agnostic_directions at this size
    up, low = np.abs(phi - 0.25) <= half, np.abs(phi + 0.25) <= half
    off = np.where(up, phi - 0.25, phi + 0.25)
    xs, us, ys, cs = [], [], [], []
    for j in range(k):
        sel = up[j] | low[j]
        order = np.argsort(off[j][sel])
        xs.append(off[j][sel][order])
        us.append(up[j][sel][order])
        ys.append(y[j][sel][order])
        cs.append(int(sel.sum()))
    win = np.clip(
        window_direction_erm(np.concatenate(xs), np.concatenate(us), np.concatenate(ys), np.array(cs)), -half, half
    )
    inside = (lo > -half) & (hi < half)
    assert inside.mean() > 0.995  # the full ERM's arc leaves the window rarely (measured: 1 in 1000 or less)
    assert np.array_equal(win[inside], tau[inside])
    # the drawn windows have the full ERM's error law
    fast, w = homogeneous_agnostic_directions(np.full(k, p), eta, rng, window=window)
    assert w == pytest.approx(half)
    full_d, fast_d = homogeneous_disagreement(tau), homogeneous_disagreement(fast)
    se = math.hypot(full_d.std(), fast_d.std()) / math.sqrt(k)
    assert abs(full_d.mean() - fast_d.mean()) < 4 * se
    # and a density slip (the window's points drawn at half the shard size) is detected
    slow, _ = homogeneous_agnostic_directions(np.full(k, p // 2), eta, rng, window=window)
    assert abs(full_d.mean() - homogeneous_disagreement(slow).mean()) > 4 * se


def test_homogeneous_student_fits_clean_labels_at_both_boundaries():
    pac_rates = load_recipe("repro/pac_rates.py")
    rng = np.random.default_rng(23)
    checked = 0
    for _ in range(10):
        tau, _ = homogeneous_agnostic_directions(np.full(301, 400), 0.05, rng)
        m = 200_000
        low, up = near_queries(tau, m, 20.0, rng), near_queries(-tau, m, 20.0, rng)
        assert low.ones.size and up.ones.size
        # upper queries: teacher j votes 1 at ¼ + q iff q ≤ τ_j (mirrored: q' = −q, offsets −τ_j)
        assert np.array_equal(up.ones, (tau[None, :] >= -up.offsets[:, None]).sum(1))
        assert np.array_equal(low.ones, (tau[None, :] <= low.offsets[:, None]).sum(1))
        labels = np.concatenate([low.clean, up.clean])
        # clean labels on every near query: the student's direction separates them; in direction
        # coordinates (upper queries at −q', labels complemented) it is the midpoint of the gap
        # between the largest merged 0 and the smallest merged 1, and its disagreement 2|τ̂|
        pos = np.concatenate([low.offsets, -up.offsets])
        merged = np.concatenate([low.clean, 1 - up.clean])
        if merged.min() == merged.max():
            continue  # all near queries on one side of the target: the gap runs to a sentinel
        checked += 1
        gap_lo, gap_hi = pos[merged == 0].max(), pos[merged == 1].min()
        assert gap_lo < 0 <= gap_hi
        d = pac_rates.homogeneous_student([(tau, low), (-tau, up)], labels, m, rng)
        assert d == pytest.approx(abs(gap_lo + gap_hi), rel=1e-9)
        assert float(homogeneous_disagreement(0.5 * (gap_lo + gap_hi))) == pytest.approx(d)
        # every label flipped at one boundary: the student moves past the queries there
        bad = np.concatenate([low.clean, 1 - up.clean])
        assert pac_rates.homogeneous_student([(tau, low), (-tau, up)], bad, m, rng) > d
    assert checked >= 5


def test_pac_rates_homogeneous_halfspace_jobs_change_nothing_but_time(tmp_path):
    pac_rates = load_recipe("repro/pac_rates.py")

    common = ["--classes", "halfspace_homogeneous", "--bootstrap", "50"]
    common += ["--agnostic-n", "1e7", "2e7", "--agnostic-points", "2", "--agnostic-seeds", "3"]
    one = pac_rates.main([*common, "--out", str(tmp_path / "a")])
    two = pac_rates.main([*common, "--jobs", "2", "--out", str(tmp_path / "b")])
    strip = lambda rep: [{k: v for k, v in s.items() if k != "seconds"} for s in rep["summary"]]  # noqa: E731
    assert strip(one) == strip(two) and one["slopes"] == two["slopes"]
    assert {s["setting"] for s in one["summary"]} == {"agnostic"}
    assert all(s["usable"] and s["k"] < s["n"] for s in one["summary"])


def test_loglog_panel_draws_the_curves_and_lines_it_is_given():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from pate_stab.repro.pac_plot import loglog_panel

    fig, ax = plt.subplots()
    ns = np.array([1e6, 1e7, 1e8])
    curves = [{"x": ns, "y": 1 / ns, "yerr": 0.1 / ns, "fmt": "o-", "label": "priv"}]
    lines = [
        {"x": ns, "y": 2 / ns, "fmt": "k-", "label": "bound"},
        {"x": ns, "y": 3 / ns, "color": "gray", "label": "rate"},
    ]
    loglog_panel(ax, curves, lines, title="t", xlabel="n", ylabel="err", legend_fontsize=6)
    assert ax.get_xscale() == ax.get_yscale() == "log"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["bound", "rate", "priv"]
    assert (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()) == ("t", "n", "err")
    assert len(ax.containers) == 1 and len(ax.get_lines()) >= 3
    plt.close(fig)
