"""Noise reduction (Ligett et al. 2017 Alg 1): marginals, per-coordinate coins, prefix privacy.

Statistical tests use α = 1e-6 per test (KS or Clopper–Pearson), so a correct implementation
fails each with probability at most 1e-6 (times the number of KS tests in a loop, stated there).
"""

from __future__ import annotations

import pytest
import torch
from scipy import stats

from pate_stab.audit.harness import dp_test
from pate_stab.errors import HaltedError
from pate_stab.privacy.mechanisms.noise_reduction import NoiseReduction, noise_reduction, noise_reduction_samples
from pate_stab.privacy.noise.seeded import laplace
from pate_stab.rng import seeded_generator
from tests._stats import ALPHA, assert_not_refuted, assert_refuted


def test_marginals_are_laplace_per_coordinate() -> None:
    # 3 levels x 3 coordinates = 9 KS tests at 1e-6 each: family-wise false failure <= 9e-6.
    value = torch.tensor([0.5, -2.0, 10.0], dtype=torch.float64)
    eps = [0.2, 0.7, 1.5]
    out = noise_reduction_samples(
        value, sensitivity=2.0, epsilons=eps, num_samples=40_000, generator=seeded_generator(1)
    )
    assert out.shape == (40_000, 3, 3)
    for t, e in enumerate(eps):
        for j in range(3):
            noise = (out[:, t, j] - value[j]).numpy()
            p = stats.kstest(noise, stats.laplace(scale=2.0 / e).cdf).pvalue
            assert p > ALPHA, (t, j, p)


def test_marginal_check_has_power_against_wrong_scale() -> None:
    # The KS check above would notice a level drawn at the wrong scale (e.g. Δ/ε_{t+1}).
    noise = laplace(2.0 / 0.7, (40_000,), generator=seeded_generator(2)).numpy()
    assert stats.kstest(noise, stats.laplace(scale=2.0 / 0.2).cdf).pvalue < ALPHA


def test_coins_are_independent_per_coordinate() -> None:
    # P[coordinate unchanged from t+1 to t] = r² = (ε_t/ε_{t+1})²; with a coin per coordinate both
    # of two coordinates stay unchanged with probability r⁴ (a shared coin would give r²).
    eps = [0.5, 1.0]
    n = 200_000
    out = noise_reduction_samples(
        torch.zeros(2), sensitivity=1.0, epsilons=eps, num_samples=n, generator=seeded_generator(3)
    )
    same = out[:, 0, :] == out[:, 1, :]
    r2 = 0.25
    for j in range(2):
        lo, hi = stats.binomtest(int(same[:, j].sum()), n).proportion_ci(1 - ALPHA)
        assert lo <= r2 <= hi
    both = int(same.all(dim=1).sum())
    lo, hi = stats.binomtest(both, n).proportion_ci(1 - ALPHA)
    assert lo <= r2**2 <= hi
    assert not (lo <= r2 <= hi)  # the shared-coin value is excluded


def _prefix(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
    return noise_reduction_samples(
        torch.tensor([value]), sensitivity=1.0, epsilons=[0.5, 1.0], num_samples=n, generator=gen
    )[:, :, 0]  # (n, 2)


def _independent_prefix(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
    """Broken variant: a fresh Laplace draw for each level, costing ε_1 + ε_2 = 1.5."""
    return torch.stack([value + laplace(2.0, (n,), generator=gen), value + laplace(1.0, (n,), generator=gen)], dim=1)


def _cells(pairs: torch.Tensor) -> torch.Tensor:
    """Each of the two outputs binned at (−∞, 0], (0, 1], (1, ∞); 9 integer codes."""
    bins = torch.bucketize(pairs, torch.tensor([0.0, 1.0], dtype=torch.float64), right=False)
    return bins[:, 0] * 3 + bins[:, 1]


@pytest.mark.parametrize("seed", [11])
def test_prefix_release_costs_last_epsilon(seed: int) -> None:
    res = dp_test(_prefix, 1.0, 0.0, epsilon=1.0, generator=seeded_generator(seed), featurize=_cells)
    assert_not_refuted(res)


def test_independent_redraws_are_flagged() -> None:
    # Cell "both outputs > 1": ratio exactly e^{0.5 + 1} for inputs 1 vs 0.
    res = dp_test(_independent_prefix, 1.0, 0.0, epsilon=1.0, generator=seeded_generator(12), featurize=_cells)
    assert_refuted(res)
    assert res.epsilon_lower_bound <= 1.5  # a valid lower bound on the true loss 1.5


def test_single_level_equals_laplace_mechanism_scale() -> None:
    out = noise_reduction(3.0, sensitivity=1.0, epsilons=[2.0], generator=seeded_generator(4))
    assert out.shape == (1,)
    assert torch.equal(out, 3.0 + laplace(0.5, (1,), generator=seeded_generator(4)))


def test_lazy_object_releases_prefixes() -> None:
    eps = [0.1, 0.3, 0.9]
    nr = NoiseReduction(torch.tensor([1.0, 2.0]), sensitivity=1.0, epsilons=eps, generator=seeded_generator(5))
    full = noise_reduction(torch.tensor([1.0, 2.0]), sensitivity=1.0, epsilons=eps, generator=seeded_generator(5))
    assert nr.epsilon_spent == 0.0
    first = nr.next()
    assert torch.equal(first, full[0]) and nr.epsilon_spent == pytest.approx(0.1)
    assert torch.equal(nr.prefix(2), full[:2]) and nr.epsilon_spent == pytest.approx(0.3)
    nr.next()
    assert nr.epsilon_spent == pytest.approx(0.9)
    with pytest.raises(HaltedError):
        nr.next()


@pytest.mark.parametrize(
    "kwargs",
    [
        {"epsilons": [1.0, 0.5]},
        {"epsilons": [0.5, 0.5]},
        {"epsilons": [0.0, 1.0]},
        {"epsilons": [-1.0, 1.0]},
        {"epsilons": [0.5, float("nan")]},
        {"epsilons": [0.5, float("inf")]},
        {"epsilons": []},
        {"sensitivity": 0.0},
        {"sensitivity": float("nan")},
    ],
)
def test_bad_parameters_rejected(kwargs: dict) -> None:
    args = {"sensitivity": 1.0, "epsilons": [0.5, 1.0], **kwargs}
    with pytest.raises(ValueError):
        noise_reduction(torch.zeros(3), generator=seeded_generator(0), **args)


def test_bad_values_rejected() -> None:
    with pytest.raises(ValueError):
        noise_reduction(
            torch.tensor([0.0, float("nan")]), sensitivity=1.0, epsilons=[1.0], generator=seeded_generator(0)
        )
    with pytest.raises(ValueError):
        noise_reduction(torch.tensor([float("inf")]), sensitivity=1.0, epsilons=[1.0], generator=seeded_generator(0))
    with pytest.raises(TypeError):
        noise_reduction(torch.zeros(2), sensitivity=1.0, epsilons=[1.0], generator=0)  # type: ignore[arg-type]
