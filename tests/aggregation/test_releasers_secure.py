"""The releasers' secure noise mode (exact discrete Laplace, integer threshold), new for soft labels.

Statistical tests state their level: α = 1e-6 (Clopper–Pearson, through pate_stab.audit.harness). The
vectorised releaser they run 10^5 times (pate_stab.audit.releaser_cases) is checked against the
real releaser, on the noise the real releaser drew, in tests/audit/test_releaser_cases.py.
"""

from __future__ import annotations

import math
from collections import Counter

import pytest
import torch

from pate_stab.aggregation.releaser import StabilityReleaser, secure_sparse_vector
from pate_stab.aggregation.soft_labels import BOTTOM, PLAIN, SHIFTED, SoftLabelReleaser
from pate_stab.aggregation.votes import (
    bin_midpoints,
    distance_to_instability,
    gamma_histogram,
    shifted_bin_values,
    shifted_gamma_histogram,
    top_label,
)
from pate_stab.audit.harness import clopper_pearson
from pate_stab.audit.mechanism_cases import audit_mechanisms
from pate_stab.audit.releaser_cases import (
    dist_zero_soft_pair,
    releaser_cases,
    releaser_mutation_cases,
    releaser_noise,
    soft_release_scan,
    soft_vote_sets,
)
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.privacy.mechanisms.sparse_vector import NOT_PROCESSED
from pate_stab.privacy.noise.secure import (
    SeededRandomSource,
    SystemRandomSource,
    discrete_laplace_pmf,
    secure_leak_probability,
)
from tests._stats import ALPHA

GAMMA = 0.25
SCAL = calibrate(epsilon=8, delta=1e-5, num_queries=500, max_unstable=2, mode="tight", soft_labels=True)


def _secure(cal=SCAL, seed: int = 0, **kwargs) -> SoftLabelReleaser:
    return SoftLabelReleaser(cal, gamma=0.1, generator=None, noise="secure", source=SeededRandomSource(seed), **kwargs)


# --------------------------------------------------------------------------- behaviour and API


def test_secure_hand_made():
    """Plain answer, rescue by the ½-shifted histogram, ⊥, and the halt after 2T failed tests."""
    w = secure_sparse_vector(SCAL).threshold
    k = int(2 * (w + 60 * SCAL.noise_scale)) + 1
    concentrated = torch.full((k,), 0.55, dtype=torch.float64)
    straddling = torch.cat([torch.full((k // 2,), 0.29), torch.full((k - k // 2,), 0.31)]).double()
    spread = torch.linspace(0, 1, k, dtype=torch.float64)
    scores = torch.stack([concentrated, straddling, spread, concentrated, spread, concentrated], dim=1)
    rel = _secure()
    res = rel.release(scores)
    assert res.status.tolist() == [PLAIN, SHIFTED, BOTTOM, PLAIN, BOTTOM, -1]
    assert res.labels[0].item() == pytest.approx(0.55) and res.labels[1].item() == pytest.approx(0.3)
    assert math.isnan(res.labels[2].item()) and rel.halted
    assert rel.summary()["failed_tests"] == 4 == SCAL.num_segments


def test_secure_threshold_and_scale_keep_the_calibration():
    sv = secure_sparse_vector(SCAL)
    lam = sv.noise_scale
    assert SCAL.noise_scale <= lam < SCAL.noise_scale + 2**-20  # rounded up: each segment stays (2/λ)-DP
    assert sv.max_unstable == SCAL.num_segments == 2 * SCAL.max_unstable
    leak = secure_leak_probability(threshold=sv.threshold, noise_scale=lam)
    assert leak <= SCAL.leak_per_test  # so certified δ = δ_sv + 2m · leak_per_test still holds
    assert secure_leak_probability(threshold=sv.threshold - 1, noise_scale=lam) > SCAL.leak_per_test  # smallest
    assert SCAL.delta_sparse_vector + SCAL.num_tests * leak <= SCAL.certified_delta


def test_summary_and_ledger_fields_match_the_hard_releaser(tmp_path):
    hard_cal = calibrate(epsilon=8, delta=1e-5, num_queries=500, max_unstable=2, mode="tight")
    ledger = PrivacyLedger(tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=100.0, budget_delta=1e-3)
    soft = _secure(ledger=ledger, spend_id="soft")
    hard = StabilityReleaser(
        hard_cal, generator=None, noise="secure", source=SeededRandomSource(1), ledger=ledger, spend_id="hard"
    )
    soft.release(torch.full((50, 2), 0.55, dtype=torch.float64))
    hard.release(torch.tensor([[40, 10], [25, 25]]))
    s_sum, h_sum = soft.summary(), hard.summary()
    noise_keys = {"noise", "threshold", "noise_scale_exact"}
    for summary, rel in ((s_sum, soft._svt), (h_sum, hard._oqr)):
        assert summary["noise"] == "secure" and summary["threshold"] == rel.threshold
        assert isinstance(summary["threshold"], int)
        lam = rel.noise_scale
        assert summary["noise_scale_exact"] == f"{lam.numerator}/{lam.denominator}"
    entries = {e.spend_id: e for e in ledger.entries()}
    for spend_id, summary, cal in (("soft", s_sum, SCAL), ("hard", h_sum, hard_cal)):
        e = entries[spend_id]
        assert {k: e.metadata[k] for k in noise_keys} == {k: summary[k] for k in noise_keys}
        assert e.metadata["calibration"]["noise_scale"] == cal.noise_scale
        assert (e.epsilon, e.delta) == (cal.certified_epsilon, cal.certified_delta)
        assert (summary["epsilon"], summary["delta"]) == (cal.certified_epsilon, cal.certified_delta)
    seeded = SoftLabelReleaser(SCAL, gamma=0.1, generator=torch.Generator().manual_seed(0), noise="seeded").summary()
    assert seeded["noise"] == "seeded" and seeded["threshold"] == SCAL.threshold


def test_bad_arguments():
    hard_cal = calibrate(epsilon=8, delta=1e-5, num_queries=5, max_unstable=1)
    with pytest.raises(ValueError, match="noise"):
        SoftLabelReleaser(SCAL, gamma=0.1, generator=None, noise="fast")
    with pytest.raises(TypeError, match="generator"):
        SoftLabelReleaser(SCAL, gamma=0.1, generator=None, noise="seeded")  # seeded mode needs one
    with pytest.raises(TypeError, match="source"):
        SoftLabelReleaser(SCAL, gamma=0.1, generator=None, noise="secure", source=object())  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="hard"):
        SoftLabelReleaser(hard_cal, gamma=0.1, generator=None, noise="secure")
    with pytest.raises(ValueError, match="gamma"):
        SoftLabelReleaser(SCAL, gamma=0.3, generator=None, noise="secure")
    rel = _secure()
    with pytest.raises(ValueError, match="NaN"):
        rel.release(torch.tensor([[0.5, math.nan]], dtype=torch.float64))
    with pytest.raises(TypeError, match="scores"):
        rel.release(torch.tensor([[1, 0]]))


# --------------------------------------------------------------------------- porous support


def _outputs(cal, scores: torch.Tensor, runs: int) -> Counter:
    """Outputs (status, released value or −1) of ``runs`` real secure releasers reading the OS's CSPRNG."""
    seen: Counter = Counter()
    for _ in range(runs):
        rel = SoftLabelReleaser(cal, gamma=GAMMA, generator=None, noise="secure", source=SystemRandomSource())
        res = rel.release(scores)
        seen[tuple(zip(res.status.tolist(), torch.nan_to_num(res.labels, nan=-1.0).tolist(), strict=True))] += 1
    return seen


def test_secure_support_is_not_porous():
    """No output of the secure soft releaser that only one of two neighbouring vote sets can produce.

    The release is the sequence of statuses and bin values. Integer distances meet integer
    noise with full support on ℤ, so a status sequence is possible under a vote set exactly when
    it respects the cutoff — an integer noise sequence realising it then exists and has positive
    probability — and its released values are that vote set's own bins. The search below checks
    this for every output seen under either neighbour against the other (both directions), and
    that outputs seen often under one are seen under the other. (The float Laplace sampler of
    the seeded mode is porous on its own: tests/reliability/test_secure_noise.py.)
    """
    cal = calibrate(epsilon=4, delta=1e-5, num_queries=3, max_unstable=1, mode="tight", soft_labels=True)
    sv = secure_sparse_vector(cal)
    w, lam, cutoff = sv.threshold, sv.noise_scale, cal.num_segments
    a, b = soft_vote_sets([w] * 3, [-1, -1, 1])
    out_a, out_b = _outputs(cal, a, 1000), _outputs(cal, b, 1000)

    def producible(output, scores) -> bool:
        plain, shifted = gamma_histogram(scores, GAMMA), shifted_gamma_histogram(scores, GAMMA)
        pd, sd = distance_to_instability(plain).tolist(), distance_to_instability(shifted).tolist()
        values = {PLAIN: bin_midpoints(GAMMA)[top_label(plain)], SHIFTED: shifted_bin_values(GAMMA)[top_label(shifted)]}
        failures, log_p = 0, 0.0
        for i, (status, value) in enumerate(output):
            if status == NOT_PROCESSED:
                if failures < cutoff:
                    return False  # nothing is left unprocessed before the cutoff
                continue
            if failures >= cutoff:
                return False
            tests = [(pd[i], status == PLAIN)]
            if status != PLAIN:
                failures += 1
                if failures < cutoff:
                    tests.append((sd[i], status == SHIFTED))
                    failures += status == BOTTOM
                elif status == SHIFTED:
                    return False  # the halting failure runs no second test
            for dist, passed in tests:  # threshold noise 0, query noise just above / at the threshold
                log_p += math.log(discrete_laplace_pmf(w - dist + passed, 2 * lam) * discrete_laplace_pmf(0, lam))
            expected = float(values[status][i]) if status in values else -1.0
            if value != pytest.approx(expected):
                return False
        return math.isfinite(log_p)

    for mine, other in ((out_a, b), (out_b, a)):
        assert all(producible(o, other) for o in mine), [o for o in mine if not producible(o, other)]
    frequent_a = {o for o, c in out_a.items() if c >= 50}
    frequent_b = {o for o, c in out_b.items() if c >= 50}
    assert frequent_a and frequent_a <= set(out_b) and frequent_b <= set(out_a)
    # the check can fail: a vote set whose top bin differs cannot produce these answers
    c, _ = soft_vote_sets([w] * 3, [-1, -1, 1])
    c[:, 0] = 0.95
    assert not all(producible(o, c) for o in out_a if o[0][0] == PLAIN)


# --------------------------------------------------------------------------- statistical tests


@pytest.mark.statistical
@pytest.mark.parametrize("case", releaser_cases(), ids=lambda c: c.name)
def test_releaser_at_its_claim(case, record_property):
    """dp_test (α = 1e-6) of the whole releaser, both noise modes, at a real calibration's certified (ε, δ).

    On the AboveThreshold pattern (four queries lose a unit of distance, the last gains one, at
    the threshold) the bound must come close to the claim without passing it; on the tie whose
    answer changes between neighbours the release must stay within δ.
    """
    (row,) = audit_mechanisms([case], num_samples=200_000, alpha=ALPHA, generator=torch.Generator().manual_seed(41))
    record_property("claimed_epsilon", row.claimed_epsilon)
    record_property("epsilon_lower_bound", row.epsilon_lower_bound)
    assert not row.violates, row
    if "tie" not in case.name:
        assert row.epsilon_lower_bound > 1.0, row  # the pair is close to the worst case


@pytest.mark.statistical
@pytest.mark.parametrize("case", releaser_mutation_cases(), ids=lambda c: c.name)
def test_releaser_mutation_is_flagged(case, record_property):
    """BTT18 Alg 6's printed threshold (DESIGN fact 3) on the same tie: the claimed (ε, δ) is refuted."""
    (row,) = audit_mechanisms([case], num_samples=200_000, alpha=ALPHA, generator=torch.Generator().manual_seed(42))
    record_property("epsilon_lower_bound", row.epsilon_lower_bound)
    assert row.violates, row


@pytest.mark.statistical
def test_secure_leak_rate_clopper_pearson():
    """A dist-0 query is answered at exactly 1 − (1 − p)², p the exact per-test leak (α = 1e-6).

    A calibration with a large δ makes the leak measurable; its secure threshold keeps p within
    the per-test share, so the query's two tests stay within their 2 · leak_per_test of δ.
    """
    cal = calibrate(epsilon=1, delta=0.5, num_queries=1, max_unstable=1, mode="tight", soft_labels=True)
    sv = secure_sparse_vector(cal)
    p = secure_leak_probability(threshold=sv.threshold, noise_scale=sv.noise_scale)
    assert p <= cal.leak_per_test
    n = 400_000
    a, _ = dist_zero_soft_pair()
    for x in dist_zero_soft_pair():  # distance 0 on both histograms, and the answers differ
        assert distance_to_instability(gamma_histogram(x, GAMMA)).tolist() == [0]
        assert distance_to_instability(shifted_gamma_histogram(x, GAMMA)).tolist() == [0]
    tn, qn = releaser_noise(
        "secure",
        noise_scale=cal.noise_scale,
        threshold_shape=(n, 2),
        query_shape=(n, 2),
        generator=torch.Generator().manual_seed(43),
    )
    zero = distance_to_instability(gamma_histogram(a, GAMMA))
    status = soft_release_scan(zero, zero, qn, tn, threshold=sv.threshold, max_failures=2)[:, 0]
    answered = int((status > 0).sum())
    lo, hi = clopper_pearson(answered, n, ALPHA)
    assert lo <= 1 - (1 - p) ** 2 <= hi, (lo, hi, p)
    assert lo <= 2 * cal.leak_per_test
