from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from pate_stab.audit.harness import dp_test
from pate_stab.erm.losses import HuberHingeLoss
from pate_stab.erm.output_perturbation import (
    chaudhuri_output_perturbation,
    output_perturbation,
    output_perturbation_sensitivity,
    rls_out,
)
from pate_stab.erm.solver import solve_erm
from pate_stab.privacy.noise.seeded import l2_laplace_vector, l2_laplace_vectors
from tests._stats import assert_not_refuted, assert_refuted

from ._data import classification, neighbour, regression


@pytest.mark.parametrize("loss", ["logistic", "huber_hinge", "hinge"])
def test_sensitivity_on_random_neighbours_chaudhuri(loss):
    """||theta(D) - theta(D')|| <= 2/(n lam) for 1-Lipschitz losses (Chaudhuri et al. 2011)."""
    n, d = 60, 3
    for seed in range(15):
        x, y = classification(n, d, seed)
        x2, y2 = neighbour(x, y, 100 + seed)
        lam = [0.01, 0.1, 1.0][seed % 3]
        tol = 1e-10 if loss != "hinge" else 1e-5  # duality-gap certificate: ~sqrt(1e-16 / lam) floor
        w1 = solve_erm(x, y, loss=loss, lam=lam, tol=tol).weights
        w2 = solve_erm(x2, y2, loss=loss, lam=lam, tol=tol).weights
        bound = output_perturbation_sensitivity(lipschitz=1.0, lam=lam, n=n)
        assert float(torch.linalg.vector_norm(w1 - w2)) <= bound + 2 * tol


def test_sensitivity_on_random_neighbours_wu_ball():
    """Squared loss on ||w|| <= R: ||theta(D) - theta(D')|| <= 2 rho/(lam n), rho = 2R + 2,
    which is below Wu et al.'s printed 4 (rho + lam R)/(lam n) and (12R + 8)/(lam n)."""
    n, d = 50, 4
    for seed in range(15):
        x, y = regression(n, d, seed)
        x2, y2 = neighbour(x, y, 200 + seed, regression=True)
        lam, radius = [0.01, 0.1, 1.0][seed % 3], [0.25, 0.5, 1.0, 2.0][seed % 4]
        w1 = solve_erm(x, y, loss="squared", lam=lam, radius=radius, tol=1e-10).weights
        w2 = solve_erm(x2, y2, loss="squared", lam=lam, radius=radius, tol=1e-10).weights
        tight = output_perturbation_sensitivity(lipschitz=2 * radius + 2, lam=lam, n=n)
        paper = output_perturbation_sensitivity(
            lipschitz=2 * radius + 2, lam=lam, n=n, constant="wu_alg2", radius=radius
        )
        assert tight < paper <= (12 * radius + 8) / (lam * n) + 1e-12
        assert float(torch.linalg.vector_norm(w1 - w2)) <= tight + 2e-10


def test_sensitivity_is_attained_for_hinge_like_loss():
    """The bound is tight: Huber hinge with all margins in the linear part, one label flipped."""
    n, lam = 20, 10.0
    x = torch.full((n, 1), 1.0, dtype=torch.float64)
    y = torch.ones(n, dtype=torch.float64)
    y2 = y.clone()
    y2[0] = -1.0
    w1 = solve_erm(x, y, loss="huber_hinge", lam=lam, tol=1e-12).weights
    w2 = solve_erm(x, y2, loss="huber_hinge", lam=lam, tol=1e-12).weights
    assert math.isclose(float((w1 - w2).abs()), 2.0 / (lam * n), rel_tol=1e-9)


@pytest.mark.statistical
@pytest.mark.parametrize("dim", [1, 3, 10])
def test_noise_norm_follows_gamma_law(dim):
    """||b|| ~ Gamma(dim, scale); KS test at alpha = 1e-6 (false-failure rate 1e-6)."""
    g = torch.Generator().manual_seed(7)
    scale = 0.37
    b = l2_laplace_vectors(scale, dim, num_samples=20_000, generator=g)
    p = stats.kstest(torch.linalg.vector_norm(b, dim=1).numpy(), stats.gamma(dim, scale=scale).cdf).pvalue
    assert p > 1e-6
    single = torch.stack([l2_laplace_vector(scale, dim, generator=g) for _ in range(2000)])
    p1 = stats.kstest(torch.linalg.vector_norm(single, dim=1).numpy(), stats.gamma(dim, scale=scale).cdf).pvalue
    assert p1 > 1e-6
    # direction uniform: the first coordinate of b/||b|| has mean 0 (|mean| < 6 sd)
    u = b[:, 0] / torch.linalg.vector_norm(b, dim=1)
    assert abs(float(u.mean())) < 6 * math.sqrt(1.0 / dim / 20_000)


def _op_mechanism(epsilon: float, scale_factor: float):
    """Output perturbation on the worst-case 1-D neighbours, vectorised over samples."""
    n, lam = 20, 10.0
    x = torch.full((n, 1), 1.0, dtype=torch.float64)
    y = torch.ones(n, dtype=torch.float64)
    y2 = y.clone()
    y2[0] = -1.0
    loss = HuberHingeLoss()
    sens = output_perturbation_sensitivity(lipschitz=1.0, lam=lam, n=n)
    theta = {
        "a": solve_erm(x, y, loss=loss, lam=lam, tol=1e-6 * sens).weights,
        "b": solve_erm(x, y2, loss=loss, lam=lam, tol=1e-6 * sens).weights,
    }
    scale = sens * (1 + 2e-6) / epsilon * scale_factor

    def mechanism(key, num_samples, generator):
        return theta[key] + l2_laplace_vectors(scale, 1, num_samples=num_samples, generator=generator)

    return mechanism


@pytest.mark.statistical
def test_output_perturbation_passes_dp_test():
    g = torch.Generator().manual_seed(11)
    res = dp_test(_op_mechanism(1.0, 1.0), "a", "b", epsilon=1.0, generator=g, featurize=lambda t: t[:, 0])
    assert_not_refuted(res)


@pytest.mark.statistical
def test_dp_test_flags_noise_scale_too_small():
    g = torch.Generator().manual_seed(12)
    res = dp_test(_op_mechanism(1.0, 1.0 / 3.0), "a", "b", epsilon=1.0, generator=g, featurize=lambda t: t[:, 0])
    assert_refuted(res)


def test_output_perturbation_noise_scale_and_reproducibility():
    x, y = classification(100, 3, seed=4)
    m1 = chaudhuri_output_perturbation(x, y, epsilon=0.5, lam=0.1, generator=torch.Generator().manual_seed(1))
    m2 = chaudhuri_output_perturbation(x, y, epsilon=0.5, lam=0.1, generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(m1.weights, m2.weights)
    assert math.isclose(m1.noise_scale, 2 / (0.1 * 100 * 0.5) * (1 + 2e-6))
    with pytest.raises(ValueError, match="1-Lipschitz"):
        chaudhuri_output_perturbation(x, y, epsilon=0.5, lam=0.1, loss="squared", generator=torch.Generator())


def test_rls_out_constants():
    x, y = regression(100, 3, seed=5)
    tight = rls_out(x, y, epsilon=1.0, lam=0.1, radius=1.0, generator=torch.Generator().manual_seed(0))
    paper = rls_out(
        x, y, epsilon=1.0, lam=0.1, radius=1.0, constant="paper", generator=torch.Generator().manual_seed(0)
    )
    assert math.isclose(tight.noise_scale, 8 / (0.1 * 100) * (1 + 2e-6))
    assert math.isclose(paper.noise_scale, 20 / (0.1 * 100) * (1 + 2e-6))
    with pytest.raises(ValueError, match="lam <= 1"):
        rls_out(x, y, epsilon=1.0, lam=2.0, radius=1.0, constant="paper", generator=torch.Generator())


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"epsilon": 0.0}, "epsilon"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"lam": -1.0}, "lam"),
        ({"constant": "bogus"}, "constant"),
    ],
)
def test_bad_parameters_raise(kwargs, match):
    x, y = classification(20, 2, seed=6)
    args = {"epsilon": 1.0, "lam": 0.1} | kwargs
    with pytest.raises(ValueError, match=match):
        output_perturbation(x, y, generator=torch.Generator(), **args)
