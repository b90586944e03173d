"""Goodness of fit of the samplers: KS tests at α = 1e-6 (a correct sampler fails once in 10^6 runs)."""

import math

import pytest
import torch
from scipy import stats

from pate_stab.privacy.noise.seeded import UnitLaplaceStream, exponential, gaussian, l2_laplace_vector, laplace

ALPHA = 1e-6
N = 100_000
pytestmark = pytest.mark.statistical


def test_laplace_fits(generator):
    x = laplace(2.5, N, generator=generator)
    assert x.dtype == torch.float64
    assert stats.kstest(x.numpy(), stats.laplace(scale=2.5).cdf).pvalue > ALPHA


def test_laplace_wrong_scale_is_detected(generator):
    x = laplace(2.5, N, generator=generator)
    assert stats.kstest(x.numpy(), stats.laplace(scale=2.4).cdf).pvalue < ALPHA


def test_exponential_fits(generator):
    x = exponential(0.7, N, generator=generator)
    assert bool((x >= 0).all()) and bool(torch.isfinite(x).all())
    assert stats.kstest(x.numpy(), stats.expon(scale=0.7).cdf).pvalue > ALPHA


def test_gaussian_fits(generator):
    x = gaussian(3.0, N, generator=generator)
    assert stats.kstest(x.numpy(), stats.norm(scale=3.0).cdf).pvalue > ALPHA


def test_l2_laplace_vector_norm_is_gamma_and_direction_uniform(generator):
    dim, scale = 5, 0.3
    draws = torch.stack([l2_laplace_vector(scale, dim, generator=generator) for _ in range(20_000)])
    norms = torch.linalg.vector_norm(draws, dim=1).numpy()
    assert stats.kstest(norms, stats.gamma(a=dim, scale=scale).cdf).pvalue > ALPHA
    # direction: the first coordinate of a uniform unit vector in R^5 has density ∝ (1 − t²)^{(5−3)/2}
    t = (draws[:, 0] / torch.linalg.vector_norm(draws, dim=1)).numpy()
    assert stats.kstest((t + 1) / 2, stats.beta(2, 2).cdf).pvalue > ALPHA


def test_generator_reproducibility():
    a = laplace(1.0, 10, generator=torch.Generator().manual_seed(5))
    b = laplace(1.0, 10, generator=torch.Generator().manual_seed(5))
    assert torch.equal(a, b)


def test_stream_order_is_independent_of_request_sizes():
    s1 = UnitLaplaceStream(torch.Generator().manual_seed(9), block_size=7)
    s2 = UnitLaplaceStream(torch.Generator().manual_seed(9), block_size=7)
    whole = s1.take(40)
    parts = torch.cat([s2.take(3), torch.tensor([s2.take_one()], dtype=torch.float64), s2.peek(5), s2.take(36)[:36]])
    assert torch.equal(whole[:4], parts[:4])
    assert torch.equal(whole[4:9], parts[4:9])
    assert torch.equal(whole[4:40], parts[9:45])
    assert s2.consumed == 40


@pytest.mark.parametrize("bad", [0.0, -1.0, math.nan, math.inf])
def test_bad_scale(bad, generator):
    for fn, name in ((laplace, "scale"), (exponential, "mean"), (gaussian, "sigma")):
        with pytest.raises(ValueError, match=name):
            fn(bad, 3, generator=generator)


def test_generator_required():
    with pytest.raises(TypeError, match="generator"):
        laplace(1.0, 3, generator=None)
