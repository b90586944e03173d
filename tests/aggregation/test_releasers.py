"""Hard- and soft-label stability releasers (BTT18 Alg 4, Alg 6/7/8)."""

import math

import pytest
import torch

from pate_stab.aggregation.releaser import ABSTAIN, StabilityReleaser
from pate_stab.aggregation.soft_labels import BOTTOM, PLAIN, SHIFTED, SoftLabelReleaser
from pate_stab.aggregation.votes import distance_to_instability, paper_distance_to_instability, top_label
from pate_stab.audit.harness import clopper_pearson, dp_test
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate, leak_probability
from pate_stab.privacy.mechanisms.sparse_vector import above_threshold_scan
from pate_stab.privacy.noise.seeded import laplace
from tests._stats import assert_not_refuted, assert_refuted

CAL = calibrate(epsilon=8, delta=1e-5, num_queries=2000, max_unstable=3, mode="tight")


def _hist(rows):
    return torch.tensor(rows, dtype=torch.int64)


def test_hand_made_histograms():
    w = CAL.threshold
    k = int(2 * (w + 40 * CAL.noise_scale)) + 1  # far above the threshold
    stable = [0, k, 0]
    tie = [k // 2, k // 2, k % 2]  # every row sums to k
    rel = StabilityReleaser(CAL, noise="seeded", generator=torch.Generator().manual_seed(0))
    res = rel.release(_hist([stable, tie, stable, tie, stable, tie, stable]))
    assert res.labels.tolist() == [1, ABSTAIN, 1, ABSTAIN, 1, ABSTAIN, ABSTAIN]  # halts after the 3rd ⊥
    assert rel.halted and rel.summary()["answered"] == 3 and rel.summary()["abstained"] == 3


def test_online_equals_batch():
    gen = torch.Generator().manual_seed(4)
    k = 300
    top = torch.randint(150, k + 1, (400,), generator=gen)
    counts = torch.stack([top, k - top, torch.zeros_like(top)], dim=1)
    a = StabilityReleaser(CAL, noise="seeded", generator=torch.Generator().manual_seed(7))
    b = StabilityReleaser(CAL, noise="seeded", generator=torch.Generator().manual_seed(7))
    batch = a.release(counts).labels.tolist()
    online = [b.release_one(row) for row in counts]
    assert batch == online


def test_more_queries_than_calibrated_is_refused():
    cal = calibrate(epsilon=8, delta=1e-5, num_queries=3, max_unstable=1, mode="tight")
    rel = StabilityReleaser(cal, noise="seeded", generator=torch.Generator().manual_seed(0))
    rel.release(_hist([[5, 0], [5, 0]]))
    with pytest.raises(BudgetExhaustedError, match="3 queries"):
        rel.release(_hist([[5, 0], [5, 0]]))


def test_spend_recorded_before_release(tmp_path):
    ledger = PrivacyLedger(tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=10.0, budget_delta=1e-4)
    gen = torch.Generator().manual_seed(0)
    rel = StabilityReleaser(CAL, noise="seeded", generator=gen, ledger=ledger, spend_id="run-1")
    assert ledger.spent() == (0.0, 0.0)
    rel.release(_hist([[900, 0]]))
    eps, delta = ledger.spent()
    assert eps == pytest.approx(CAL.certified_epsilon) and delta == pytest.approx(CAL.certified_delta)
    small = PrivacyLedger(tmp_path / "small.jsonl", run_id="t", budget_epsilon=1.0, budget_delta=1e-4)
    rel2 = StabilityReleaser(CAL, noise="seeded", generator=torch.Generator().manual_seed(0), ledger=small)
    with pytest.raises(BudgetExhaustedError):
        rel2.release(_hist([[900, 0]]))
    assert rel2.queries_seen == 0


@pytest.mark.parametrize(
    "counts,error",
    [
        ([[1.0, 2.0]], TypeError),
        ([[-1, 2]], ValueError),
        ([1, 2], ValueError),
        ([[3]], ValueError),
    ],
)
def test_bad_counts(counts, error):
    rel = StabilityReleaser(CAL, noise="seeded", generator=torch.Generator().manual_seed(0))
    with pytest.raises(error, match="counts"):
        rel.release(torch.tensor(counts))


def test_wrong_calibration_kind():
    soft = calibrate(epsilon=8, delta=1e-5, num_queries=10, max_unstable=1, soft_labels=True)
    with pytest.raises(ValueError, match="soft"):
        StabilityReleaser(soft, noise="seeded", generator=torch.Generator())
    with pytest.raises(ValueError, match="hard"):
        SoftLabelReleaser(CAL, gamma=0.1, noise="seeded", generator=torch.Generator())


# --------------------------------------------------------------------------- the leak


@pytest.mark.statistical
def test_leak_rate_of_distance_zero_queries():
    # A tied histogram (dist 0) passes at rate P[Lap(2λ) − Lap(λ) > w]; with a small threshold
    # the rate is measurable: check it against the closed form with a Clopper–Pearson interval.
    lam, w, n = 1.0, 3.0, 400_000
    gen = torch.Generator().manual_seed(3)
    dist = distance_to_instability(_hist([[50, 49]])).to(torch.float64).expand(n, 1)
    res = above_threshold_scan(
        dist, laplace(2 * lam, (n, 1), generator=gen), laplace(lam, (n, 1), generator=gen), threshold=w, max_failures=1
    )
    passes = int((res.outputs == 1).sum())
    lo, hi = clopper_pearson(passes, n, 1e-6)
    assert lo <= leak_probability(threshold=w, noise_scale=lam) <= hi
    # the calibrated releaser keeps the union bound: m tests · leak <= δ's leak share
    assert CAL.num_tests * leak_probability(threshold=CAL.threshold, noise_scale=CAL.noise_scale) <= CAL.delta_leak * (
        1 + 1e-9
    )


# --------------------------------------------------------------------------- statistical DP tests

LAM, W, T = 2.0, 2.0, 1  # small scales so that events have mass; claim 2T/λ (pure)


def _hard_mechanism(distance=distance_to_instability):
    """The releaser's computation (votes → argmax, distance → sparse vector), vectorised over runs."""

    def mech(counts, n, gen):
        counts = torch.as_tensor(counts, dtype=torch.int64)
        labels = top_label(counts)  # (m,)
        dist = distance(counts).to(torch.float64)
        m = dist.numel()
        res = above_threshold_scan(
            dist.expand(n, m),
            laplace(2 * LAM, (n, m), generator=gen),
            laplace(LAM, (n, T), generator=gen),
            threshold=W,
            max_failures=T,
        )
        return torch.where(res.outputs == 1, labels.expand(n, m), torch.full((n, m), -1)).to(torch.int64) + 1

    return mech


# neighbours: one teacher's vote moves in every query; argmax unchanged (gap >= 3 on both sides)
D_A = [[8, 2, 0], [7, 0, 4], [6, 1, 0], [8, 0, 1]]
D_B = [[7, 3, 0], [8, 0, 3], [5, 1, 1], [7, 1, 1]]


@pytest.mark.statistical
def test_hard_releaser_is_private():
    res = dp_test(_hard_mechanism(), D_A, D_B, epsilon=2 * T / LAM, generator=torch.Generator().manual_seed(31))
    assert_not_refuted(res)


def _alg2_mechanism(distance, epsilon=1.0, threshold=3.0):
    """BTT18 Alg 2 on one vote histogram: release the argmax iff dist + Lap(1/ε) > Γ."""

    def mech(counts, n, gen):
        counts = torch.as_tensor(counts, dtype=torch.int64)
        dist = distance(counts).to(torch.float64)  # (1,)
        passed = dist + laplace(1.0 / epsilon, (n, 1), generator=gen) > threshold
        return torch.where(passed, top_label(counts) + 1, 0)[:, 0]

    return mech


@pytest.mark.statistical
def test_paper_distance_is_flagged():
    # One moved vote: gap 4 → 2. BTT18 Alg 4's max(0, gap − 1) moves 3 → 1 (sensitivity 2), so
    # Alg 2 with Lap(1/ε) noise loses 2ε, not ε; the sensitivity-1 distance moves 1 → 0.
    a, b = [[4, 0, 0]], [[3, 1, 0]]
    bad = dp_test(
        _alg2_mechanism(paper_distance_to_instability), a, b, epsilon=1.0, generator=torch.Generator().manual_seed(32)
    )
    assert_refuted(bad)
    good = dp_test(
        _alg2_mechanism(distance_to_instability), a, b, epsilon=1.0, generator=torch.Generator().manual_seed(33)
    )
    assert_not_refuted(good)


@pytest.mark.statistical
def test_hard_releaser_dist_zero_within_delta():
    # argmax differs between neighbours (gap 1): the leak is covered by δ = P[pass | dist 0].
    a = [[5, 4]]
    b = [[4, 5]]
    leak = leak_probability(threshold=W, noise_scale=LAM)
    res = dp_test(_hard_mechanism(), a, b, epsilon=2 * T / LAM, delta=leak, generator=torch.Generator().manual_seed(34))
    assert_not_refuted(res)


# --------------------------------------------------------------------------- soft labels

SCAL = calibrate(epsilon=8, delta=1e-5, num_queries=500, max_unstable=2, mode="tight", soft_labels=True)


def test_soft_hand_made():
    k = int(2 * (SCAL.threshold + 40 * SCAL.noise_scale)) + 1
    concentrated = torch.full((k,), 0.55, dtype=torch.float64)  # bin [0.5, 0.6] → 0.55
    straddling = torch.cat([torch.full((k // 2,), 0.29), torch.full((k - k // 2,), 0.31)]).double()  # shifted → 0.3
    spread = torch.linspace(0, 1, k, dtype=torch.float64)  # unstable on both
    scores = torch.stack([concentrated, straddling, spread, concentrated, spread, concentrated], dim=1)
    rel = SoftLabelReleaser(SCAL, gamma=0.1, noise="seeded", generator=torch.Generator().manual_seed(0))
    res = rel.release(scores)
    assert res.status.tolist() == [PLAIN, SHIFTED, BOTTOM, PLAIN, BOTTOM, -1]  # 4 failed tests = 2T: halt
    assert res.labels[0].item() == pytest.approx(0.55) and res.labels[1].item() == pytest.approx(0.3)
    assert math.isnan(res.labels[2].item()) and math.isnan(res.labels[5].item())
    assert rel.halted
    # the Releaser protocol's queries_seen (pate_stab.aggregation.registry): the processed queries, as summarised
    assert rel.queries_seen == rel.summary()["queries_seen"] == 5


def test_soft_online_equals_batch():
    gen = torch.Generator().manual_seed(8)
    k, m = 2001, 60
    centers = torch.rand(m, generator=gen, dtype=torch.float64)
    spread = torch.rand(m, generator=gen, dtype=torch.float64) * 0.2
    scores = (centers + spread * (torch.rand(k, m, generator=gen, dtype=torch.float64) - 0.5)).clamp(0, 1)
    cal = calibrate(epsilon=8, delta=1e-5, num_queries=m, max_unstable=5, mode="tight", soft_labels=True)
    a = SoftLabelReleaser(cal, gamma=0.1, noise="seeded", generator=torch.Generator().manual_seed(2))
    b = SoftLabelReleaser(cal, gamma=0.1, noise="seeded", generator=torch.Generator().manual_seed(2))
    batch = a.release(scores).labels
    online = torch.tensor([b.release_one(scores[:, i]) for i in range(m)], dtype=torch.float64)
    assert torch.equal(torch.nan_to_num(batch, nan=-1.0), torch.nan_to_num(online, nan=-1.0))


def test_soft_bad_input():
    rel = SoftLabelReleaser(SCAL, gamma=0.1, noise="seeded", generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError):
        rel.release(torch.tensor([[0.5, math.nan]], dtype=torch.float64))
    with pytest.raises(ValueError):
        rel.release(torch.tensor([[1.5]], dtype=torch.float64))
    with pytest.raises(ValueError, match="binary"):
        rel.release(torch.full((5, 3, 4), 0.25, dtype=torch.float64))
    with pytest.raises(ValueError, match="gamma|γ"):
        SoftLabelReleaser(SCAL, gamma=0.3, noise="seeded", generator=torch.Generator())


@pytest.mark.statistical
def test_soft_releaser_is_private():
    """The soft releaser's computation vectorised over runs: test 1, then on ⊥ test 2 with a fresh
    threshold; halts after 2T failed tests (here T = 1: two failed tests). Neighbours: one
    teacher's score moves in each query. Claim 2·(2T)/λ... basic composition of 2T segments."""
    from pate_stab.aggregation.votes import bin_midpoints, gamma_histogram, shifted_bin_values, shifted_gamma_histogram

    gamma = 0.25

    def mech(scores, n, gen):
        scores = torch.as_tensor(scores, dtype=torch.float64)
        ph, sh = gamma_histogram(scores, gamma), shifted_gamma_histogram(scores, gamma)
        pd, sd = distance_to_instability(ph).double(), distance_to_instability(sh).double()
        pv, sv = bin_midpoints(gamma)[top_label(ph)], shifted_bin_values(gamma)[top_label(sh)]
        m = pd.numel()
        # interleave the two tests per query as the releaser does; with max 2 failures the scan
        # of the sequence [p1, s1, p2, s2, ...] where s_i only runs after p_i fails is emulated by
        # running per query with shared state (m is small)
        out = torch.zeros(n, m, dtype=torch.int64)
        thr = W + laplace(LAM, n, generator=gen)
        failures = torch.zeros(n, dtype=torch.int64)
        for i in range(m):
            alive = failures < 2
            p_pass = alive & (pd[i] + laplace(2 * LAM, n, generator=gen) > thr)
            p_fail = alive & ~p_pass
            failures += p_fail.long()
            thr = torch.where(p_fail, W + laplace(LAM, n, generator=gen), thr)
            alive2 = p_fail & (failures < 2)
            s_pass = alive2 & (sd[i] + laplace(2 * LAM, n, generator=gen) > thr)
            s_fail = alive2 & ~s_pass
            failures += s_fail.long()
            thr = torch.where(s_fail, W + laplace(LAM, n, generator=gen), thr)
            code = torch.where(
                p_pass, (pv[i] * 8).round().long() + 1, torch.where(s_pass, (sv[i] * 8).round().long() + 20, 0)
            )
            out[:, i] = torch.where(alive, code, -1)
        return out

    k = 10
    a = torch.tensor([[0.1] * 9 + [0.9], [0.6] * 8 + [0.1, 0.1], [0.3] * 10], dtype=torch.float64).T  # (k, m)
    b = a.clone()
    b[9, 0], b[8, 1], b[0, 2] = 0.1, 0.6, 0.6  # one teacher (different per query) moves
    assert a.shape == (k, 3)
    res = dp_test(mech, a, b, epsilon=2 * 2 / LAM, generator=torch.Generator().manual_seed(35), num_samples=200_000)
    assert_not_refuted(res)


def test_secure_noise_mode():
    from pate_stab.privacy.noise.secure import SeededRandomSource, secure_leak_probability

    k = int(2 * (CAL.threshold + 60 * CAL.noise_scale)) + 1
    rel = StabilityReleaser(CAL, generator=None, noise="secure", source=SeededRandomSource(3))
    res = rel.release(_hist([[0, k, 0], [k // 2, k // 2, k % 2], [k, 0, 0]]))
    assert res.labels.tolist() == [1, ABSTAIN, 0]
    assert rel.summary()["noise"] == "secure"
    # the integer threshold keeps the calibration's leak budget
    w = rel._oqr.threshold
    assert CAL.num_tests * secure_leak_probability(threshold=w, noise_scale=CAL.noise_scale) <= CAL.delta_leak
    with pytest.raises(ValueError, match="noise"):
        StabilityReleaser(CAL, generator=None, noise="fast")
    with pytest.raises(TypeError, match="generator"):
        StabilityReleaser(CAL, generator=None, noise="seeded")


def test_secure_threshold_keeps_the_certified_delta_in_paper_mode():
    """Paper mode: the float threshold leaks less than its δ share (leak_per_test = 2/3 of it), and the
    certified δ — the ledger's record — counts that smaller leak; the integer threshold must not leak more."""
    from pate_stab.privacy.noise.secure import secure_leak_probability

    cal = calibrate(epsilon=3, delta=1e-5, num_queries=1000, max_unstable=10, mode="paper")
    assert cal.leak_per_test < cal.delta_leak / cal.num_tests
    rel = StabilityReleaser(cal, generator=None, noise="secure")
    w, lam = rel._oqr.threshold, rel._oqr.noise_scale
    assert lam >= cal.noise_scale
    leak = secure_leak_probability(threshold=w, noise_scale=lam)
    assert leak <= cal.leak_per_test
    assert cal.delta_sparse_vector + cal.num_tests * leak <= cal.certified_delta
    assert rel.summary()["threshold"] == w and rel.summary()["delta"] == cal.certified_delta
