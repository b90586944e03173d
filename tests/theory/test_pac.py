import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from pate_stab.privacy.mechanisms.calibration import calibrate, leak_probability
from pate_stab.theory import corollary_max_unstable, paper_num_teachers, teachers_for_unanimous_answer
from pate_stab.theory.erm_classes import (
    interval_erm,
    interval_vote_counts,
    logistic_erm,
    predict_halfspace,
    predict_interval,
    predict_threshold,
    threshold_erm,
    threshold_vote_counts,
)
from pate_stab.theory.pac import (
    balanced_num_queries,
    lattice_gamma,
    loglog_slope,
    num_teachers_for_agreement,
    on_average_stability,
    prescribed_num_teachers,
    soft_label_gamma,
    soft_label_radius,
    teacher_excess_error,
    theorem_error_rate,
)

ROOT = Path(__file__).resolve().parents[2]

# ----------------------------------------------------------------------------- formulas


def test_teacher_excess_error_by_hand():
    assert teacher_excess_error(num_samples=100, vc_dim=1, realizable=True) == pytest.approx(0.01)
    assert teacher_excess_error(num_samples=100, vc_dim=1, realizable=False) == pytest.approx(0.1)
    vc_real = (2 / 1000) * (2 * math.log2(2 * math.e * 1000 / 2) + math.log2(2 / 0.05))
    assert teacher_excess_error(num_samples=1000, vc_dim=2, realizable=True, constants="vc") == pytest.approx(vc_real)
    vc_ag = 2 * math.sqrt((8 / 1000) * (2 * math.log(2 * math.e * 500) + math.log(80)))
    assert teacher_excess_error(num_samples=1000, vc_dim=2, realizable=False, constants="vc") == pytest.approx(
        min(1.0, vc_ag)
    )
    assert teacher_excess_error(num_samples=1, vc_dim=3, realizable=True) == 1.0


def test_rates_by_hand():
    assert balanced_num_queries(num_samples=8000, vc_dim=1, realizable=True) == pytest.approx(160000.0)
    assert balanced_num_queries(num_samples=2 * 32**5, vc_dim=2, realizable=False) == pytest.approx(32**4)
    assert theorem_error_rate(num_samples=8000, vc_dim=1, realizable=True) == pytest.approx(1 / 400)
    assert theorem_error_rate(num_samples=32**5, vc_dim=1, realizable=False) == pytest.approx(1 / 32**2)


def test_soft_label_radius_and_gamma_by_hand():
    assert soft_label_radius(alpha=0.001, shard_size=200, nu=0.05) == pytest.approx(8 * 0.001 * 20 + 0.025)
    assert soft_label_gamma(alpha=0.001, shard_size=200, nu=0.05) == pytest.approx(0.32 + 0.05)
    assert lattice_gamma(0.37) == pytest.approx(0.5)
    assert lattice_gamma(0.3) == pytest.approx(1 / 3)
    assert lattice_gamma(0.1) == pytest.approx(0.1)
    assert lattice_gamma(0.09) == pytest.approx(1 / 11)
    with pytest.raises(ValueError):
        lattice_gamma(0.0)


def test_agreement_k_matches_unanimous_and_is_minimal():
    cal = calibrate(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, mode="tight")
    assert num_teachers_for_agreement(cal, agreement=1.0, fail_probability=0.05) == teachers_for_unanimous_answer(
        cal, fail_probability=0.05
    )

    def fail(k, a, p=0.01):
        gap = 2 * math.ceil(a * k - 1e-12) - k
        dist = max(0, math.ceil(gap / 2) - 1)
        if dist < cal.threshold:
            return 1.0
        return leak_probability(threshold=dist - cal.threshold, noise_scale=cal.noise_scale)

    k = num_teachers_for_agreement(cal, agreement=2 / 3, fail_probability=0.01)
    assert fail(k, 2 / 3) <= 0.01
    assert all(fail(j, 2 / 3) > 0.01 for j in range(1, k))
    # about three times the unanimous k: the gap of a 2/3 majority is k/3
    assert 2.5 < k / num_teachers_for_agreement(cal, agreement=1.0, fail_probability=0.01) < 3.5


def test_prescribed_num_teachers_paper_fixed_point():
    st = prescribed_num_teachers(
        num_samples=10**7, num_queries=1000, vc_dim=1, realizable=True, epsilon=3, delta=1e-5, beta=0.05
    )
    assert st.feasible
    # fixed point: k from T and T from α(n/k), by hand
    alpha = 1 / (10**7 / st.num_teachers)
    t = math.ceil(3 * (alpha * 1000 + math.sqrt(1000 * math.log(1000 / 0.05) / 2)))
    assert st.max_unstable == t
    assert st.num_teachers == math.ceil(
        paper_num_teachers(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=t, beta=0.05)
    )
    assert st.max_unstable == corollary_max_unstable(num_queries=1000, alpha=st.teacher_alpha, beta=0.05)
    assert 50_000 < st.num_teachers < 70_000


def test_prescribed_num_teachers_reports_unusable():
    small = prescribed_num_teachers(
        num_samples=10**4, num_queries=1000, vc_dim=1, realizable=True, epsilon=3, delta=1e-5
    )
    assert not small.feasible and "k =" in small.reason
    vacuous = prescribed_num_teachers(
        num_samples=10**7, num_queries=100, vc_dim=1, realizable=False, best_error=0.3, epsilon=3, delta=1e-5
    )
    assert not vacuous.feasible and "T =" in vacuous.reason


def test_round_up_ratio_only_raises_t():
    base = prescribed_num_teachers(
        num_samples=10**7, num_queries=1000, vc_dim=1, realizable=True, epsilon=3, delta=1e-5
    )
    rounded = prescribed_num_teachers(
        num_samples=10**7, num_queries=1000, vc_dim=1, realizable=True, epsilon=3, delta=1e-5, round_up_ratio=1.1
    )
    assert rounded.max_unstable >= base.max_unstable
    assert rounded.max_unstable <= math.ceil(1.1 * base.max_unstable) + 1


def test_on_average_stability_and_slope():
    a = torch.zeros(4, 3)
    b = torch.tensor([[0.1, 0.0, 0.0], [0.1, 0.0, 0.0], [0.1, 0.2, 0.0], [0.1, 0.0, 0.0]])
    per, alpha = on_average_stability(a, b)
    assert per[0].item() == pytest.approx(0.1)
    assert per[1].item() == pytest.approx(0.1)  # √(0.04/4)
    assert alpha == pytest.approx(0.1)
    slope, _ = loglog_slope([1, 10, 100], [3.0, 0.3, 0.03])
    assert slope == pytest.approx(-1.0)
    assert math.isnan(loglog_slope([1, 10], [0.0, 1.0])[0])


# ----------------------------------------------------------------------------- exact ERM


def _brute_threshold(x, y):
    cands = np.concatenate(([-np.inf], np.unique(x), [np.inf]))
    return min(int(((x >= t) != y).sum()) for t in cands)


def _brute_interval(x, y):
    u = np.unique(x)
    best = int((y == 1).sum())
    for i in range(len(u)):
        for j in range(i, len(u)):
            best = min(best, int((((x >= u[i]) & (x <= u[j])) != y).sum()))
    return best


@pytest.mark.parametrize("seed", range(6))
def test_exact_erm_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    k = int(rng.integers(1, 7))
    n = int(rng.integers(0, 60))
    x = np.round(rng.random(n), 1)  # many ties
    y = rng.integers(0, 2, n)
    shard = rng.integers(0, k, n)
    t, e_t = threshold_erm(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(shard), k)
    a, b, e_i = interval_erm(torch.from_numpy(x), torch.from_numpy(y), torch.from_numpy(shard), k)
    pred_t = predict_threshold(t, torch.from_numpy(x)).numpy()
    pred_i = predict_interval(a, b, torch.from_numpy(x)).numpy()
    for j in range(k):
        sel = shard == j
        xs, ys = x[sel], y[sel]
        assert int(e_t[j]) == _brute_threshold(xs, ys)
        assert int(e_i[j]) == _brute_interval(xs, ys)
        # the returned hypotheses achieve the reported errors on their own shard
        assert int((pred_t[j, sel] != ys).sum()) == int(e_t[j])
        assert int((pred_i[j, sel] != ys).sum()) == int(e_i[j])


def test_exact_erm_realizable_is_consistent_and_votes_match():
    g = torch.Generator().manual_seed(3)
    x = torch.rand(5000, 1, generator=g)
    y_t = (x[:, 0] >= 0.4).long()
    y_i = ((x[:, 0] >= 0.2) & (x[:, 0] <= 0.7)).long()
    shard = torch.randint(0, 50, (5000,), generator=g)
    t, e = threshold_erm(x, y_t, shard, 50)
    assert int(e.sum()) == 0 and bool(((t - 0.4).abs() < 0.05).all())
    a, b, e = interval_erm(x, y_i, shard, 50)
    assert int(e.sum()) == 0
    q = torch.rand(300, generator=g)
    assert torch.equal(threshold_vote_counts(t, q)[:, 1], predict_threshold(t, q).sum(0))
    assert torch.equal(interval_vote_counts(a, b, q)[:, 1], predict_interval(a, b, q).sum(0))


def test_logistic_erm_separates_and_matches_single_fits():
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3000, 2, generator=g)
    y = (x[:, 0] + 0.5 * x[:, 1] >= 0.1).long()
    shard = torch.randint(0, 6, (3000,), generator=g)
    w = logistic_erm(x, y, shard, 6, newton_steps=15)
    pred = predict_halfspace(w, x)
    for j in range(6):
        sel = shard == j
        assert (pred[j, sel] != y[sel]).double().mean() < 0.02
        single = logistic_erm(x[sel], y[sel], None, 1, newton_steps=15)
        assert torch.allclose(single[0], w[j], atol=1e-3, rtol=1e-3)


# ----------------------------------------------------------------------------- recipe


def test_recipe_smoke(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("pac_curves", ROOT / "recipes" / "repro" / "pac_curves.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    report = mod.main(["--smoke", "--run", "t", "--classes", "threshold", "interval"])
    out = tmp_path / "checkpoints" / "t"
    for name in ("hard_runs.csv", "hard_summary.csv", "slopes.csv", "usability.csv", "soft.csv", "report.json"):
        assert (out / name).exists(), name
    for name in ("threshold_realizable.png", "interval_realizable.png"):  # the shared log-log panel
        assert (out / name).exists(), name
    assert report["largest_run"] is not None
    for r in report["soft"]["releases"]:
        assert 0.0 <= r["fraction_within_radius"] <= 1.0
    # keyed shards: a function of the record id only (adding records leaves earlier shards alone)
    g1, g2 = torch.Generator().manual_seed(1), torch.Generator().manual_seed(1)
    assert torch.equal(mod.keyed_shards(100, 7, generator=g1), mod.keyed_shards(120, 7, generator=g2)[:100])


@pytest.mark.parametrize(("m", "t"), [(50, 5), (1000, 37)])
def test_tight_calibration_equals_calibrate(m, t):
    from pate_stab.theory.pac import tight_calibration

    ref = calibrate(epsilon=2.0, delta=1e-6, num_queries=m, max_unstable=t, mode="tight")
    assert tight_calibration(epsilon=2.0, delta=1e-6, num_queries=m, max_unstable=t) == ref
