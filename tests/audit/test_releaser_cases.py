"""The vectorised releasers of pate_stab.audit.releaser_cases agree exactly with the real releasers.

The real releaser runs once with its own noise; the same noise values (regenerated from the
seed in seeded mode, recorded as they are drawn in secure mode) go through the vectorised scan,
and the outputs must be identical. This is what lets the statistical DP tests run the scan
10^5 times in place of the online objects.
"""

from __future__ import annotations

import pytest
import torch

from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.aggregation.votes import distance_to_instability, gamma_histogram, shifted_gamma_histogram
from pate_stab.audit.releaser_cases import soft_release_scan
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.privacy.mechanisms.sparse_vector import SecureLaplaceNoise, above_threshold_scan
from pate_stab.privacy.noise.secure import SeededRandomSource
from pate_stab.privacy.noise.seeded import UnitLaplaceStream
from pate_stab.rng import spawn_generators

T = 2


def _calibration(soft: bool):
    """A certified calibration with a small λ (ε = 8: λ ≈ 1 soft, 0.5 hard) and its threshold (w ≈ 32 soft,
    15.5 hard); the votes below put distances on both sides of w, so tests pass and fail often."""
    return calibrate(epsilon=8, delta=1e-5, num_queries=40, max_unstable=T, mode="tight", soft_labels=soft)


def _scores(seed: int, k: int = 75, m: int = 8) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    centre = torch.rand(m, generator=gen, dtype=torch.float64)
    spread = 0.3 * torch.rand(m, generator=gen, dtype=torch.float64)
    return (centre + spread * (torch.rand(k, m, generator=gen, dtype=torch.float64) - 0.5)).clamp(0, 1)


def _pad(values: list, length: int, dtype: torch.dtype) -> torch.Tensor:
    out = torch.zeros(1, max(length, len(values)), dtype=dtype)
    out[0, : len(values)] = torch.tensor(values, dtype=dtype)
    return out


@pytest.mark.parametrize("gamma", [0.5, 0.25, 0.1])
def test_soft_scan_equals_seeded_releaser(gamma):
    cal = _calibration(True)
    lam, w = cal.noise_scale, cal.threshold
    seen = set()
    for seed in range(25):
        scores = _scores(seed)
        rel = SoftLabelReleaser(cal, gamma=gamma, noise="seeded", generator=torch.Generator().manual_seed(seed))
        real = rel.release(scores).status
        t_gen, q_gen = spawn_generators(torch.Generator().manual_seed(seed), 2)  # as SparseVector does
        m = scores.shape[1]
        tn = lam * UnitLaplaceStream(t_gen).take(2 * T).unsqueeze(0)
        qn = 2 * lam * UnitLaplaceStream(q_gen).take(2 * m).unsqueeze(0)
        pd = distance_to_instability(gamma_histogram(scores, gamma))
        sd = distance_to_instability(shifted_gamma_histogram(scores, gamma))
        scan = soft_release_scan(pd, sd, qn, tn, threshold=w, max_failures=2 * T)[0]
        assert torch.equal(scan, real), (seed, scan, real)
        seen.update(real.tolist())
    assert seen == {-1, 0, 1, 2}, seen  # passes on both histograms, failures and halting


def _recorded_draws(monkeypatch) -> list:
    draws: list = []
    original = SecureLaplaceNoise._draw

    def recording(self, scale, n):
        values = original(self, scale, n)
        draws.extend((scale, int(v)) for v in values.tolist())
        return values

    monkeypatch.setattr(SecureLaplaceNoise, "_draw", recording)
    return draws


@pytest.mark.parametrize("gamma", [0.5, 0.25, 0.1])
def test_soft_scan_equals_secure_releaser(gamma, monkeypatch):
    cal = _calibration(True)
    seen = set()
    for seed in range(25):
        draws = _recorded_draws(monkeypatch)
        scores = _scores(100 + seed)
        rel = SoftLabelReleaser(cal, gamma=gamma, generator=None, noise="secure", source=SeededRandomSource(seed))
        real = rel.release(scores).status
        lam = rel._svt.noise_scale
        m = scores.shape[1]
        tn = _pad([v for s, v in draws if s == lam], 2 * T, torch.int64)
        qn = _pad([v for s, v in draws if s == 2 * lam], 2 * m, torch.int64)
        pd = distance_to_instability(gamma_histogram(scores, gamma))
        sd = distance_to_instability(shifted_gamma_histogram(scores, gamma))
        scan = soft_release_scan(pd, sd, qn, tn, threshold=rel._svt.threshold, max_failures=2 * T)[0]
        assert torch.equal(scan, real), (seed, scan, real)
        seen.update(real.tolist())
    assert seen == {-1, 0, 1, 2}, seen  # passes on both histograms, failures and halting


def test_hard_scan_equals_secure_releaser(monkeypatch):
    cal = _calibration(False)
    seen = set()
    for seed in range(25):
        draws = _recorded_draws(monkeypatch)
        gen = torch.Generator().manual_seed(seed)
        top = torch.randint(20, 41, (10,), generator=gen)  # distances 0 … 19 around w ≈ 15.5
        counts = torch.stack([top, 40 - top], dim=1)
        rel = StabilityReleaser(cal, generator=None, noise="secure", source=SeededRandomSource(seed))
        real = rel.release(counts).status
        lam = rel._oqr.noise_scale
        tn = _pad([v for s, v in draws if s == lam], T, torch.float64)
        qn = _pad([v for s, v in draws if s == 2 * lam], 10, torch.float64)
        scan = above_threshold_scan(
            distance_to_instability(counts).double()[None], qn, tn, threshold=float(rel._oqr.threshold), max_failures=T
        ).outputs[0]
        assert torch.equal(scan, real), (seed, scan, real)
        seen.update(real.tolist())
    assert {0, 1} <= seen, seen  # both passes and failures


def test_scan_rejects_short_noise():
    d = torch.zeros(3, dtype=torch.int64)
    with pytest.raises(ValueError, match="noise"):
        soft_release_scan(d, d, torch.zeros(2, 5), torch.zeros(2, 4), threshold=0, max_failures=4)
