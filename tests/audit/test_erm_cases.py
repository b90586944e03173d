"""The vectorised ERM computations of pate_stab.audit.erm_cases agree with the public functions.

The statistical DP tests (tests/audit/test_mechanism_cases.py, through
pate_stab.audit.mechanism_cases.mechanism_cases) run these computations 10^5 times; here each one is
compared with the public function on the same noise.
"""

from __future__ import annotations

import pytest
import torch

from pate_stab.audit.erm_cases import covariance_perturbation_samples, objective_perturbation_1d
from pate_stab.erm.accuracy_first import covariance_perturbation, output_perturbation_logistic
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem
from pate_stab.erm.density import private_histogram, private_histogram_samples
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.output_perturbation import output_perturbation_sensitivity, rls_out
from pate_stab.erm.solver import solve_erm
from pate_stab.erm.validation import stability_select, stability_select_samples
from pate_stab.privacy.mechanisms.exponential import exponential_mechanism, exponential_mechanism_samples
from pate_stab.privacy.noise.seeded import l2_laplace_vector, laplace


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _data_1d(seed: int, n: int = 12) -> tuple[torch.Tensor, torch.Tensor]:
    g = _gen(seed)
    x = (2 * torch.rand(n, 1, generator=g, dtype=torch.float64) - 1) * (torch.rand(n, 1, generator=g) < 0.7)
    y = torch.where(torch.rand(n, generator=g) < 0.5, -1.0, 1.0).double()
    return x, y


@pytest.mark.parametrize("lam", [1e-3, 0.1, 2.0])  # the Δ > 0 branch and the ε' > 0 branch
def test_objective_perturbation_1d_equals_the_public_function(lam):
    for seed in range(10):
        x, y = _data_1d(seed)
        if seed == 0:
            x = torch.zeros_like(x)  # a data set that contributes nothing to the gradient
        model = objective_perturbation(x, y, epsilon=1.0, lam=lam, generator=_gen(100 + seed))
        b = l2_laplace_vector(model.noise_scale, 1, generator=_gen(100 + seed))  # the noise it drew
        w = objective_perturbation_1d(x, y, loss="logistic", lam_total=model.lam, noise=b)
        assert torch.allclose(w, model.weights, rtol=0, atol=1e-7), (seed, w, model.weights)


def test_rls_out_is_the_minimiser_plus_reported_noise():
    n, lam, radius = 20, 100.0, 0.05
    x, y = torch.ones((n, 1), dtype=torch.float64), torch.ones(n, dtype=torch.float64)
    theta = solve_erm(x, y, loss="squared", lam=lam, radius=radius, tol=1e-12).weights
    sens = output_perturbation_sensitivity(lipschitz=2 * radius + 2, lam=lam, n=n)
    for seed in range(5):
        model = rls_out(x, y, epsilon=1.0, lam=lam, radius=radius, generator=_gen(seed))
        replay = theta + l2_laplace_vector(model.noise_scale, 1, generator=_gen(seed))
        assert torch.allclose(model.weights, replay, rtol=0, atol=2e-6 * sens)
        assert float(theta.abs()) < radius  # the constraint does not bind on this pair


def test_ligett_mechanisms_equal_their_vectorised_forms():
    x, y = torch.ones((20, 1), dtype=torch.float64), torch.ones(20, dtype=torch.float64)
    ridge, logistic = RidgeProblem(x, y, lam=1.0), LogisticProblem(x, y, lam=1.0)
    for seed in range(5):
        one = covariance_perturbation(ridge, epsilon=1.0, generator=_gen(seed))
        vec = covariance_perturbation_samples(
            ridge, epsilon=1.0, num_samples=1, noise_sensitivity=4.0, generator=_gen(seed)
        )
        assert torch.equal(one, vec[0])
        out = output_perturbation_logistic(logistic, epsilon=1.0, generator=_gen(seed))
        replay = logistic.theta_star + laplace(logistic.minimiser_sensitivity / 1.0, 1, generator=_gen(seed))
        assert torch.equal(out, replay)


def test_samples_functions_are_the_public_functions():
    u = torch.tensor([0.0, 1.0, 0.5, 2.0], dtype=torch.float64)
    x = torch.rand(40, generator=_gen(1), dtype=torch.float64)
    for seed in range(20):
        assert exponential_mechanism(u, epsilon=1.0, sensitivity=1.0, generator=_gen(seed)) == int(
            exponential_mechanism_samples(u, epsilon=1.0, sensitivity=1.0, num_samples=1, generator=_gen(seed))[0]
        )
        assert stability_select(u, beta1=1.0, beta2=1.0, n=3, m=3, epsilon=1.0, generator=_gen(seed)) == int(
            stability_select_samples(
                u, beta1=1.0, beta2=1.0, n=3, m=3, epsilon=1.0, num_samples=1, generator=_gen(seed)
            )[0]
        )
        assert torch.equal(
            private_histogram(x, num_bins=5, epsilon=1.0, generator=_gen(seed)).counts,
            private_histogram_samples(x, num_bins=5, epsilon=1.0, num_samples=1, generator=_gen(seed))[0],
        )
    with pytest.raises(ValueError, match="num_samples"):
        exponential_mechanism_samples(u, epsilon=1.0, sensitivity=1.0, num_samples=0, generator=_gen(0))


def test_softmax_output_perturbation_is_the_minimiser_plus_reported_noise():
    from pate_stab.erm.multinomial import softmax_output_perturbation, solve_softmax_erm

    x = torch.ones((10, 1), dtype=torch.float64)
    y = torch.zeros(10, dtype=torch.int64)
    y[0] = 1
    w_star, _ = solve_softmax_erm(x, y, num_classes=3, lam=1.0, tol=1e-13)
    for seed in range(5):
        model = softmax_output_perturbation(x, y, num_classes=3, epsilon=1.0, lam=1.0, generator=_gen(seed))
        replay = w_star + l2_laplace_vector(model.noise_scale, 3, generator=_gen(seed)).reshape(3, 1)
        assert torch.allclose(model.weights, replay, rtol=0, atol=1e-3 * model.noise_scale)
