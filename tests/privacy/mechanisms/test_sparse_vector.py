"""Sparse vector (BTT18 Alg 1), and InteractiveAboveThreshold (Ligett et al. Alg 2) as its configuration."""

import math
from fractions import Fraction

import pytest
import torch

from pate_stab.audit.harness import clopper_pearson, dp_test
from pate_stab.errors import HaltedError
from pate_stab.privacy.mechanisms.sparse_vector import (
    FAILED,
    NOT_PROCESSED,
    PASSED,
    SparseVector,
    above_threshold_scan,
    interactive_above_threshold,
)
from pate_stab.privacy.noise.secure import SeededRandomSource
from pate_stab.privacy.noise.seeded import laplace
from tests._stats import ALPHA, assert_not_refuted, assert_refuted


def _online(values, seed, max_unstable=5, split=None):
    sv = SparseVector(
        threshold=0.5, noise_scale=0.7, max_unstable=max_unstable, generator=torch.Generator().manual_seed(seed)
    )
    out, i = [], 0
    for size in split or [1] * len(values):
        chunk = values[i : i + size]
        if size == 1:
            out.append(NOT_PROCESSED if sv.halted else (PASSED if sv.process(float(chunk[0])) else FAILED))
        else:
            out.extend(sv.process_many(chunk).tolist())
        i += size
    return out, sv


@pytest.mark.parametrize("seed", range(6))
def test_online_and_batch_agree(seed):
    values = torch.randn(300, generator=torch.Generator().manual_seed(100 + seed), dtype=torch.float64) * 2 + 1
    one, sv1 = _online(values, seed)
    whole, sv2 = _online(values, seed, split=[300])
    mixed, sv3 = _online(values, seed, split=[13, 1, 1, 50, 1, 234])
    assert one == whole == mixed
    assert sv1.num_failed == sv2.num_failed == sv3.num_failed
    assert sv1.num_seen == sv2.num_seen == sv3.num_seen


def test_exact_cutoff():
    # Values far below the threshold: every query fails; the T-th ⊥ halts, nothing after.
    sv = SparseVector(threshold=1e6, noise_scale=1.0, max_unstable=3, generator=torch.Generator().manual_seed(0))
    out = sv.process_many(torch.zeros(10, dtype=torch.float64))
    assert out.tolist() == [FAILED] * 3 + [NOT_PROCESSED] * 7
    assert sv.halted and sv.num_failed == 3 and sv.num_seen == 3
    with pytest.raises(HaltedError):
        sv.process(0.0)


def test_stable_values_pass():
    sv = SparseVector(threshold=0.0, noise_scale=1.0, max_unstable=1, generator=torch.Generator().manual_seed(0))
    out = sv.process_many(torch.full((1000,), 1e4, dtype=torch.float64))
    assert bool((out == PASSED).all()) and not sv.halted


def test_scan_matches_python_reference():
    gen = torch.Generator().manual_seed(3)
    runs, m, cap = 50, 40, 4
    values = laplace(1.0, (runs, m), generator=gen)
    qn = laplace(2.0, (runs, m), generator=gen)
    tn = laplace(1.0, (runs, cap), generator=gen)
    res = above_threshold_scan(values, qn, tn, threshold=0.3, max_failures=cap)
    for r in range(runs):
        c, expected = 0, []
        for i in range(m):
            if c >= cap:
                expected.append(NOT_PROCESSED)
                continue
            ok = float(values[r, i] + qn[r, i]) > 0.3 + float(tn[r, c])
            expected.append(PASSED if ok else FAILED)
            c += 0 if ok else 1
        assert res.outputs[r].tolist() == expected


def test_bad_arguments():
    gen = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="noise_scale"):
        SparseVector(threshold=0.0, noise_scale=math.nan, max_unstable=1, generator=gen)
    with pytest.raises(ValueError, match="max_unstable"):
        SparseVector(threshold=0.0, noise_scale=1.0, max_unstable=0, generator=gen)
    with pytest.raises(ValueError, match="threshold"):
        SparseVector(threshold=math.inf, noise_scale=1.0, max_unstable=1, generator=gen)
    sv = SparseVector(threshold=0.0, noise_scale=1.0, max_unstable=1, generator=gen)
    with pytest.raises(ValueError, match="value"):
        sv.process(math.nan)
    with pytest.raises(ValueError, match="values"):
        sv.process_many(torch.tensor([0.0, math.nan], dtype=torch.float64))


# ---------------------------------------------------------------------------------------------
# Statistical DP tests. Queries have sensitivity 1: each value of the neighbour differs by at
# most 1 (directions may differ per query). The claim for a run with cutoff T is the basic
# composition of T segments, T·(2/λ) (pure DP). α = 1e-6 per test.
# ---------------------------------------------------------------------------------------------

LAMBDA = 2.0


def _svt(variant="correct", max_unstable=1, threshold=0.5):
    def mech(values, n, gen):
        values = torch.as_tensor(values, dtype=torch.float64).expand(n, -1)
        m = values.shape[1]
        if variant == "correct":
            qn = laplace(2 * LAMBDA, (n, m), generator=gen)
            tn = laplace(LAMBDA, (n, max_unstable), generator=gen)
            return above_threshold_scan(values, qn, tn, threshold=threshold, max_failures=max_unstable).outputs
        if variant == "no_query_noise":
            qn = torch.zeros(n, m, dtype=torch.float64)
            tn = laplace(LAMBDA, (n, max_unstable), generator=gen)
            return above_threshold_scan(values, qn, tn, threshold=threshold, max_failures=max_unstable).outputs
        if variant == "no_cutoff":
            # fresh threshold after each ⊥ but never halts (Lyu, Su & Li 2017, Alg 6)
            qn = laplace(2 * LAMBDA, (n, m), generator=gen)
            tn = laplace(LAMBDA, (n, m), generator=gen)
            return above_threshold_scan(values, qn, tn, threshold=threshold, max_failures=m).outputs
        if variant == "shared_threshold":
            # threshold drawn once and never redrawn after ⊥
            qn = laplace(2 * LAMBDA, (n, m), generator=gen)
            tn = laplace(LAMBDA, (n, 1), generator=gen).expand(n, max_unstable).contiguous()
            return above_threshold_scan(values, qn, tn, threshold=threshold, max_failures=max_unstable).outputs
        if variant == "noisy_value_released":
            qn = laplace(2 * LAMBDA, (n, m), generator=gen)
            tn = laplace(LAMBDA, (n, max_unstable), generator=gen)
            codes = above_threshold_scan(values, qn, tn, threshold=threshold, max_failures=max_unstable).outputs
            noisy = torch.where(codes == PASSED, values + qn, torch.zeros_like(qn))
            return noisy.sum(dim=1)  # the released noisy values (summarised)
        raise ValueError(variant)

    return mech


@pytest.mark.statistical
@pytest.mark.parametrize("max_unstable", [1, 2])
def test_sparse_vector_is_private(max_unstable):
    gen = torch.Generator().manual_seed(11 + max_unstable)
    a = [0.0, 1.0, 0.0, 1.0]
    b = [1.0, 0.0, 1.0, 0.0]
    claim = max_unstable * 2.0 / LAMBDA
    res = dp_test(_svt(max_unstable=max_unstable), a, b, epsilon=claim, num_samples=200_000, generator=gen)
    assert_not_refuted(res)
    assert res.epsilon_lower_bound > 0.3 * claim  # the harness sees real loss, not nothing


@pytest.mark.statistical
def test_no_query_noise_is_flagged():
    gen = torch.Generator().manual_seed(21)
    res = dp_test(_svt("no_query_noise"), [0.0, 1.0], [1.0, 0.0], epsilon=2.0 / LAMBDA, generator=gen)
    assert_refuted(res)


def _passes(outputs):
    return (outputs == PASSED).sum(dim=1).double()


@pytest.mark.statistical
def test_no_cutoff_is_flagged():
    gen = torch.Generator().manual_seed(22)
    res = dp_test(_svt("no_cutoff"), [0.0] * 30, [1.0] * 30, epsilon=2.0 / LAMBDA, generator=gen, featurize=_passes)
    assert_refuted(res)


@pytest.mark.statistical
def test_shared_threshold_within_its_own_bound():
    """Not redrawing the threshold after ⊥ is not a violation in this orientation.

    Shifting the shared threshold by 1 (cost 1/λ) keeps every ⊤ a ⊤; each ⊥ then needs its
    query noise shifted by 2 (cost 2/(2λ) = 1/λ), so the variant is ((T + 1)/λ)-DP (Lyu, Su & Li
    2017, Alg 1 with ε1 = 1/λ), below the 2T/λ of T fresh segments. The harness must not flag
    it at that bound; what breaks sparse vector is losing the query noise, the cutoff, or
    releasing noisy values (the tests around this one).
    """
    gen = torch.Generator().manual_seed(24)
    t = 3
    a = [0.0, 1.0, 0.0, 1.0, 0.0, 1.0]
    b = [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]
    res = dp_test(_svt("shared_threshold", max_unstable=t), a, b, epsilon=(t + 1) / LAMBDA, generator=gen)
    assert_not_refuted(res)


@pytest.mark.statistical
def test_noisy_value_released_is_flagged():
    gen = torch.Generator().manual_seed(23)
    a = [0.0] * 20
    b = [1.0] * 20
    res = dp_test(_svt("noisy_value_released", threshold=-60.0), a, b, epsilon=2.0 / LAMBDA, generator=gen)
    assert_refuted(res)


# ---------------------------------------------------------------------------------------------
# InteractiveAboveThreshold
# ---------------------------------------------------------------------------------------------


def test_iat_is_the_sparse_vector_with_one_segment():
    """Alg 2 at (ε, W, Δ) is the sparse vector with T = 1, λ = 2Δ/ε and threshold −W, in either noise mode."""
    seeded = interactive_above_threshold(
        epsilon=0.8, threshold=1.5, sensitivity=0.5, generator=torch.Generator().manual_seed(0)
    )
    assert type(seeded) is SparseVector and seeded.noise == "seeded"
    assert (seeded.max_unstable, seeded.threshold, seeded.noise_scale) == (1, -1.5, 2 * 0.5 / 0.8)
    secure = interactive_above_threshold(epsilon=1, threshold=3, sensitivity=2, source=SeededRandomSource(0))
    assert secure.noise == "secure" and (secure.max_unstable, secure.threshold, secure.noise_scale) == (1, -3, 4)
    # a λ that is no exact rational is rounded up (never down: the segment stays ε-DP)
    third = interactive_above_threshold(epsilon=3.0, threshold=0, sensitivity=0.1, noise="secure")
    assert Fraction(2 * 0.1 / 3.0) <= third.noise_scale < Fraction(2 * 0.1 / 3.0) + Fraction(1, 2**20)
    with pytest.raises(ValueError, match="epsilon"):
        interactive_above_threshold(epsilon=0.0, threshold=0.0, sensitivity=1.0, generator=torch.Generator())
    with pytest.raises(ValueError, match="sensitivity"):
        interactive_above_threshold(epsilon=1.0, threshold=0.0, sensitivity=-1.0, generator=torch.Generator())


def _first_stop(codes: torch.Tensor) -> int | None:
    stops = torch.nonzero(codes == FAILED)
    return int(stops[0]) if stops.numel() else None


def test_iat_online_and_batch_agree():
    values = torch.linspace(-5, 5, 50, dtype=torch.float64)
    for seed in range(5):

        def make(seed=seed):
            return interactive_above_threshold(
                epsilon=1.0, threshold=1.0, sensitivity=1.0, generator=torch.Generator().manual_seed(seed)
            )

        a, b = make(), make()
        online = next((i for i, v in enumerate(values.tolist()) if not a.process(-v)), None)
        batch = _first_stop(b.process_many(-values[:20]))
        if batch is None:
            rest = _first_stop(b.process_many(-values[20:]))
            batch = None if rest is None else 20 + rest
        assert online == batch
        assert a.halted == b.halted == (online is not None)
        if online is not None:
            assert a.num_seen == b.num_seen == online + 1
            assert b.process_many(-values).tolist() == [NOT_PROCESSED] * 50  # halted at its stop


def _iat_reference(values, n, gen, *, epsilon=1.0, threshold=0.0, sensitivity=1.0):
    """Alg 2 as printed, vectorised over n runs: the stopping index (len(values) when none passes)."""
    vals = torch.as_tensor(values, dtype=torch.float64).expand(n, -1)
    w_hat = threshold + laplace(2.0 * sensitivity / epsilon, (n, 1), generator=gen)
    above = vals + laplace(4.0 * sensitivity / epsilon, vals.shape, generator=gen) >= w_hat
    return torch.where(above.any(dim=1), torch.argmax(above.to(torch.int8), dim=1), torch.tensor(vals.shape[1]))


def test_iat_stops_where_alg_2_stops_on_the_negated_noise():
    """Exactly, run by run: the configuration draws V (threshold) and Q (query) from the two streams of
    its generator (module docstring, noise layout) and stops at the first t with
    f_t + 2λ·(−Q_t) ≥ W + λ·(−V), λ = 2Δ/ε: Alg 2 with the noise negated (Laplace is symmetric)."""
    from pate_stab.privacy.noise.seeded import UnitLaplaceStream
    from pate_stab.rng import spawn_generators

    eps, delta_q, w = 0.7, 0.5, 0.25
    lam = 2 * delta_q / eps
    stops = set()
    for seed in range(40):
        f = torch.randn(12, generator=torch.Generator().manual_seed(1000 + seed), dtype=torch.float64) - 1.0
        threshold_gen, query_gen = spawn_generators(torch.Generator().manual_seed(seed), 2)
        v = UnitLaplaceStream(threshold_gen).take_one()
        q = UnitLaplaceStream(query_gen).peek(12)
        above = (f + 2 * lam * -q >= w + lam * -v).tolist()
        expected = above.index(True) if True in above else None
        iat = interactive_above_threshold(
            epsilon=eps, threshold=w, sensitivity=delta_q, generator=torch.Generator().manual_seed(seed)
        )
        assert _first_stop(iat.process_many(-f)) == expected, seed
        stops.add(expected)
    assert None in stops and len(stops) >= 4  # the runs stop at several places, and some never


@pytest.mark.statistical
def test_iat_stopping_index_is_private():
    """The configuration's stopping law equals Alg 2's (per index, Clopper–Pearson at α/5), and Alg 2's is ε-DP.

    Δ = 0.5 and W = 0.25 so that a λ not scaled by Δ, a factor 2 on the noise, or a threshold of
    the wrong sign each moves some index's probability outside the interval (2000 runs).
    """
    eps, delta_q, w = 1.0, 0.5, 0.25
    values = [-0.5, 0.0, 0.5, 1.0]
    gen = torch.Generator().manual_seed(7)
    runs = 2000
    lib = torch.zeros(len(values) + 1, dtype=torch.int64)
    neg = -torch.tensor(values, dtype=torch.float64)
    for _ in range(runs):
        iat = interactive_above_threshold(epsilon=eps, threshold=w, sensitivity=delta_q, generator=gen)
        stop = _first_stop(iat.process_many(neg))
        lib[len(values) if stop is None else stop] += 1
    ref = _iat_reference(values, 400_000, gen, epsilon=eps, threshold=w, sensitivity=delta_q)
    for k in range(len(values) + 1):
        p_ref = float((ref == k).double().mean())
        lo, hi = clopper_pearson(int(lib[k]), runs, ALPHA / (len(values) + 1))
        assert lo <= p_ref <= hi, (k, int(lib[k]), runs, p_ref)

    def mech(vals, n, g):
        return _iat_reference(vals, n, g, epsilon=eps)

    res = dp_test(mech, [-1.0, 0.0, 1.0], [0.0, -1.0, 2.0], epsilon=eps, generator=torch.Generator().manual_seed(2))
    assert_not_refuted(res)


@pytest.mark.parametrize("seed", range(4))
def test_stop_after_failures_matches_online(seed):
    values = torch.randn(200, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) + 0.8
    ref, _ = _online(values, seed, max_unstable=6)
    sv = SparseVector(threshold=0.5, noise_scale=0.7, max_unstable=6, generator=torch.Generator().manual_seed(seed))
    got, pos = [], 0
    while pos < 200 and not sv.halted:
        codes = sv.process_many(values[pos:], stop_after_failures=1).tolist()
        done = [c for c in codes if c != NOT_PROCESSED]
        got.extend(done)
        pos += len(done)
    got.extend([NOT_PROCESSED] * (200 - len(got)))
    assert got == ref


# --------------------------------------------------------------------------- one core, two noise sources


@pytest.mark.parametrize("noise", ["seeded", "secure"])
def test_one_sparse_vector_runs_both_noise_sources(noise):
    """The noise source is a parameter of the one SparseVector. Seeded: online and batch give the
    same outputs. Secure (exact DLap, one source shared by both streams, so the draws interleave
    differently): batch outputs equal the scan of the very values drawn, each used once."""
    from pate_stab.privacy.mechanisms.sparse_vector import SecureLaplaceNoise
    from pate_stab.privacy.noise.secure import SeededRandomSource

    values = torch.tensor([9, 0, 12, 3, 8, 15, 1, 7, 11, 2, 10, 6], dtype=torch.int64)

    def make(seed: int) -> SparseVector:
        if noise == "seeded":
            return SparseVector(threshold=6, noise_scale=1.5, max_unstable=3, noise="seeded",
                                generator=torch.Generator().manual_seed(seed))  # fmt: skip
        return SparseVector(threshold=6, noise_scale=1.5, max_unstable=3, noise="secure",
                            source=SeededRandomSource(seed))  # fmt: skip

    seen = set()
    for seed in range(20):
        sv = make(seed)
        assert sv.noise == noise and sv.exact == (noise == "secure")
        batch = sv.process_many(values)
        seen.update(batch.tolist())
        if noise == "seeded":
            online_sv = make(seed)
            online = [int(online_sv.process(int(v))) if not online_sv.halted else -1 for v in values.tolist()]
            assert batch.tolist() == online, (seed, batch, online)
            continue
        assert isinstance(sv._noise, SecureLaplaceNoise) and sv.noise_scale == 1.5
        replay = make(seed)
        qn = replay._noise.peek("query", values.numel())  # the batch's order of draws: queries, then thresholds
        tn = torch.cat([replay._threshold_noise, replay._noise.peek("threshold", 2)])
        scan = above_threshold_scan(values, qn, tn, threshold=6, max_failures=3).outputs
        assert torch.equal(scan, batch), (seed, scan, batch)
    assert {-1, 0, 1} <= seen


def test_sparse_vector_noise_arguments_are_checked():
    from pate_stab.privacy.noise.secure import SeededRandomSource

    with pytest.raises(TypeError, match="generator is required"):
        SparseVector(threshold=0, noise_scale=1.0, max_unstable=1, noise="seeded")
    with pytest.raises(TypeError, match="generator is for noise='seeded'"):
        SparseVector(threshold=0, noise_scale=1.0, max_unstable=1, noise="secure", generator=torch.Generator())
    with pytest.raises(TypeError, match="source is for noise='secure'"):
        SparseVector(threshold=0, noise_scale=1.0, max_unstable=1, noise="seeded", generator=torch.Generator(),
                     source=SeededRandomSource(0))  # fmt: skip
    with pytest.raises(ValueError, match="noise must be"):
        SparseVector(threshold=0, noise_scale=1.0, max_unstable=1, noise="os")
    with pytest.raises(TypeError):  # secure noise: an integer threshold, integer values
        SparseVector(threshold=0.5, noise_scale=1.0, max_unstable=1, noise="secure")
    secure = SparseVector(threshold=0, noise_scale=1.0, max_unstable=1, noise="secure", source=SeededRandomSource(0))
    with pytest.raises(TypeError):
        secure.process_many(torch.tensor([0.5]))


def test_both_stability_releasers_run_the_one_sparse_vector():
    from pate_stab.aggregation.releaser import StabilityReleaser
    from pate_stab.aggregation.soft_labels import SoftLabelReleaser
    from pate_stab.privacy.mechanisms.calibration import calibrate

    hard = calibrate(epsilon=8, delta=1e-5, num_queries=10, max_unstable=2, mode="tight")
    soft = calibrate(epsilon=8, delta=1e-5, num_queries=10, max_unstable=2, mode="tight", soft_labels=True)
    for noise, gen in (("secure", None), ("seeded", torch.Generator().manual_seed(0))):
        rel = StabilityReleaser(hard, noise=noise, generator=gen)
        assert type(rel._oqr._svt) is SparseVector and rel._oqr.noise == noise
        srel = SoftLabelReleaser(soft, gamma=0.25, noise=noise, generator=gen)
        assert type(srel._svt) is SparseVector and srel._svt.noise == noise
