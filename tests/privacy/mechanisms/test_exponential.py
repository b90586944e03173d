"""The exponential mechanism lives in pate_stab.privacy (McSherry & Talwar 2007); erm imports it."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

import pate_stab.erm as erm
import pate_stab.erm.validation as validation
from pate_stab.privacy.mechanisms.exponential import exponential_mechanism, exponential_mechanism_samples
from pate_stab.privacy.noise.seeded import l2_laplace_vector, l2_laplace_vectors


def test_erm_uses_the_privacy_exponential_mechanism_and_l2_laplace_sampler():
    assert validation.exponential_mechanism is exponential_mechanism
    assert erm.exponential_mechanism is exponential_mechanism
    assert erm.l2_laplace_vectors is l2_laplace_vectors
    assert not hasattr(validation, "exponential_mechanism_samples")


def test_exponential_mechanism_law():
    """P[i] ∝ exp(ε u_i / 2Δ): a chi-square goodness-of-fit test, α = 1e-6 (false-failure rate)."""
    utilities = torch.tensor([0.0, 1.0, 3.0])
    n = 200_000
    draws = exponential_mechanism_samples(
        utilities, epsilon=1.0, sensitivity=0.5, num_samples=n, generator=torch.Generator().manual_seed(0)
    )
    weights = torch.exp(utilities / (2 * 0.5))
    expected = (weights.double() / weights.double().sum() * n).tolist()
    observed = torch.bincount(draws, minlength=3).tolist()
    assert stats.chisquare(observed, expected).pvalue > 1e-6
    one = exponential_mechanism(utilities, epsilon=1.0, sensitivity=0.5, generator=torch.Generator().manual_seed(0))
    assert one == int(draws[0])  # one draw uses exactly the random numbers of the vectorised form
    with pytest.raises(ValueError, match="finite"):
        exponential_mechanism([0.0, math.nan], epsilon=1.0, sensitivity=1.0, generator=torch.Generator())


def test_one_l2_laplace_sampler_batched_and_single_agree():
    for dim in (1, 5, 40):
        single = l2_laplace_vector(0.3, dim, generator=torch.Generator().manual_seed(dim))
        batch = l2_laplace_vectors(0.3, dim, num_samples=1, generator=torch.Generator().manual_seed(dim))
        assert batch.shape == (1, dim) and torch.equal(batch[0], single)
    assert l2_laplace_vectors(0.3, 4, num_samples=7, generator=torch.Generator()).shape == (7, 4)
