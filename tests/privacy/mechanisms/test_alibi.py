"""ALIBI's release (Malek et al. 2021): exact discrete Laplace on M·onehot, the posterior, and the DP claim."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.audit.harness import dp_test
from pate_stab.audit.mechanism_samplers import alibi, alibi_difference
from pate_stab.privacy.mechanisms.alibi import ALIBI_RESOLUTION, alibi_posterior, alibi_release, alibi_scale
from pate_stab.privacy.noise.discrete import SeededRandomSource, discrete_laplace_pmf
from pate_stab.rng import seeded_generator
from tests._stats import ALPHA, assert_not_refuted, assert_refuted


def test_scale_is_at_least_two_m_over_epsilon():
    for epsilon in (0.3, 1.0, 2.0, 3.0):
        assert alibi_scale(epsilon) >= 2 * ALIBI_RESOLUTION / epsilon
        assert float(alibi_scale(epsilon)) - 2 * ALIBI_RESOLUTION / epsilon < 2**-20


def test_release_is_onehot_plus_integer_noise_and_the_posterior_is_bayes():
    z = alibi_release(torch.tensor([0, 2, 1]), 3, 2.0, source=SeededRandomSource(0))
    assert z.dtype == torch.int64 and z.shape == (3, 3)
    t = alibi_scale(2.0)
    post = alibi_posterior(z, 2.0)
    for row, p in zip(z.tolist(), post, strict=True):
        like = [math.prod(discrete_laplace_pmf(v - (ALIBI_RESOLUTION if i == c else 0), t) for i, v in enumerate(row))
                for c in range(3)]  # fmt: skip
        assert torch.allclose(p, torch.tensor(like, dtype=torch.float64) / sum(like), rtol=1e-9)


def test_bad_labels_are_refused():
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        alibi_release(torch.tensor([3]), 3, 1.0)


@pytest.mark.statistical
def test_dp_test_accepts_alibi_and_flags_half_the_noise():
    kwargs = {"epsilon": 1.0, "num_samples": 100_000, "alpha": ALPHA, "generator": seeded_generator(2),
              "featurize": alibi_difference}  # fmt: skip
    assert_not_refuted(dp_test(alibi(1.0, 3), 0, 1, **kwargs))
    assert_refuted(dp_test(alibi(1.0, 3, scale_epsilon=2.0), 0, 1, **kwargs))
