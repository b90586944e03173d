"""Distance-to-instability release (BTT18 Alg 2) and online query release (Alg 3)."""

import math

import pytest
import torch

from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.privacy.mechanisms.sparse_vector import FAILED, NOT_PROCESSED, PASSED
from pate_stab.privacy.mechanisms.stability import OnlineQueryRelease, stability_release


def test_alg2_release_and_refusal():
    gen = torch.Generator().manual_seed(0)
    assert stability_release(7, distance=200.0, threshold=math.log(1e5), epsilon=1.0, generator=gen) == 7
    assert stability_release(7, distance=0.0, threshold=200.0, epsilon=1.0, generator=gen) is None


@pytest.mark.statistical
def test_alg2_leak_rate():
    # dist = 0 with Γ = log(1/δ)/ε passes with probability e^{−εΓ}/2 = δ/2 (Thm 3.2).
    eps, delta, n = 1.0, 0.01, 40_000
    gen = torch.Generator().manual_seed(1)
    passes = sum(
        stability_release(1, distance=0.0, threshold=math.log(1 / delta) / eps, epsilon=eps, generator=gen) is not None
        for _ in range(n)
    )
    from scipy import stats

    lo = stats.beta.ppf(0.5e-6, passes, n - passes + 1)
    hi = stats.beta.ppf(1 - 0.5e-6, passes + 1, n - passes)
    assert lo <= delta / 2 <= hi


def test_alg3_hand_made():
    cal = calibrate(epsilon=8, delta=1e-5, num_queries=20, max_unstable=2, mode="tight")
    oqr = OnlineQueryRelease(
        noise_scale=cal.noise_scale, threshold=cal.threshold, max_unstable=2, generator=torch.Generator().manual_seed(0)
    )
    answers = torch.tensor([3, 1, 4, 1, 5, 9], dtype=torch.int64)
    big = cal.threshold + 50 * cal.noise_scale
    distances = torch.tensor([big, big, 0.0, big, 0.0, big], dtype=torch.float64)
    released, status = oqr.release(answers, distances)
    assert status.tolist() == [PASSED, PASSED, FAILED, PASSED, FAILED, NOT_PROCESSED]
    assert released.tolist() == [3, 1, -1, 1, -1, -1]
    assert oqr.halted


def test_alg3_online_equals_batch():
    cal = calibrate(epsilon=3, delta=1e-5, num_queries=500, max_unstable=10, mode="tight")
    gen = torch.Generator().manual_seed(5)
    answers = torch.randint(0, 10, (500,), generator=gen)
    distances = (torch.rand(500, generator=gen, dtype=torch.float64) * 2.2 * cal.threshold).floor()
    a = OnlineQueryRelease(
        noise_scale=cal.noise_scale,
        threshold=cal.threshold,
        max_unstable=10,
        generator=torch.Generator().manual_seed(9),
    )
    b = OnlineQueryRelease(
        noise_scale=cal.noise_scale,
        threshold=cal.threshold,
        max_unstable=10,
        generator=torch.Generator().manual_seed(9),
    )
    batch, _ = b.release(answers, distances)
    online = [a.release_one(int(x), float(d)) if not a.halted else -1 for x, d in zip(answers, distances, strict=True)]
    assert batch.tolist() == online


def test_alg3_bad_input():
    oqr = OnlineQueryRelease(noise_scale=1.0, threshold=5.0, max_unstable=1, generator=torch.Generator().manual_seed(0))
    with pytest.raises(ValueError, match="distance"):
        oqr.release_one(1, -1.0)
    with pytest.raises(ValueError, match="differ"):
        oqr.release(torch.tensor([1, 2]), torch.tensor([1.0], dtype=torch.float64))
    with pytest.raises(TypeError, match="answers"):
        oqr.release(torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0], dtype=torch.float64))
