"""The building blocks of accuracy-first ERM (Ligett, Neel, Roth, Waggoner & Wu 2017).

The hypotheses the searches of :mod:`pate_stab.erm.accuracy_first` test and release, and the
privacy levels they search: covariance perturbation for ridge regression (Thm 3.1; the noisy
objective minimised over C = {||θ||_2 <= √(1/λ)} by :func:`ball_quadratic_minimise`), output
perturbation for logistic regression (Thm 3.3), IAT's ε_0 (Alg 3 / Alg 5, Thm A.1), the ε of the
"theory" baseline, and the ε grids of their App. B.1. Neighbouring relation: replace one record.
"""

from __future__ import annotations

import math

import torch

from pate_stab._checks import check_generator, check_int, check_positive, check_probability
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem
from pate_stab.privacy.noise.seeded import laplace

__all__ = [
    "ball_quadratic_minimise",
    "covariance_hypotheses",
    "covariance_perturbation",
    "output_perturbation_logistic",
    "project_to_ball",
    "iat_epsilon",
    "theory_epsilon",
    "geometric_levels",
    "doubling_levels",
]

_DTYPE = torch.float64
Problem = RidgeProblem | LogisticProblem


def ball_quadratic_minimise(a: torch.Tensor, g: torch.Tensor, radius: float, *, iterations: int = 200) -> torch.Tensor:
    """Global minimiser of ½θᵀAθ − gᵀθ over ||θ||_2 <= R, batched (trust-region subproblem).

    A may be indefinite (a noisy covariance). The global minimiser is θ(μ) = (A + μI)⁻¹g with
    μ >= max(0, −λ_min(A)), A + μI ⪰ 0 and μ(R − ||θ(μ)||) = 0 (Moré & Sorensen 1983); μ is
    found by bisection on the decreasing function ||θ(μ)||, on [μ_lo, μ_lo + ||g||/R]. In the
    "hard case" (g orthogonal to the bottom eigenvector, probability zero under continuous
    noise) the bottom eigenvector is added to reach the sphere. The result is scaled onto the
    ball if rounding leaves it outside, so it always lies in C.

    Args:
        a: (..., p, p), symmetrised here.
        g: (..., p).
        radius: R > 0.

    Returns:
        θ, shape (..., p), float64.
    """
    radius = check_positive("radius", radius)
    a = 0.5 * (a + a.transpose(-1, -2)).to(_DTYPE)
    g = g.to(_DTYPE)
    evals, evecs = torch.linalg.eigh(a)  # ascending
    gt = torch.einsum("...ji,...j->...i", evecs, g)  # Qᵀg
    lam_min = evals[..., 0]
    gnorm = torch.linalg.vector_norm(g, dim=-1)

    def norm_at(mu: torch.Tensor) -> torch.Tensor:
        denom = (evals + mu.unsqueeze(-1)).clamp_min(1e-300)
        return torch.linalg.vector_norm(gt / denom, dim=-1)

    lo = torch.clamp(-lam_min, min=0.0)
    hi = lo + gnorm / radius + 1e-300
    interior = (lam_min > 0) & (norm_at(torch.zeros_like(lo)) <= radius)
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        outside = norm_at(mid) > radius
        lo = torch.where(outside, mid, lo)
        hi = torch.where(outside, hi, mid)
    mu = torch.where(interior, torch.zeros_like(hi), hi)
    coeff = gt / (evals + mu.unsqueeze(-1)).clamp_min(1e-300)
    theta = torch.einsum("...ij,...j->...i", evecs, coeff)
    norm = torch.linalg.vector_norm(theta, dim=-1)
    # Hard case: the constraint is active (μ > 0) but ||θ(μ)|| stays short of R.
    short = (~interior) & (norm < radius * (1.0 - 1e-9))
    if bool(short.any()):
        tau = torch.sqrt(torch.clamp(radius**2 - norm**2, min=0.0))
        theta = torch.where(short.unsqueeze(-1), theta + tau.unsqueeze(-1) * evecs[..., :, 0], theta)
        norm = torch.linalg.vector_norm(theta, dim=-1)
    scale = torch.where(norm > radius, radius / norm.clamp_min(1e-300), torch.ones_like(norm))
    return theta * scale.unsqueeze(-1)


def covariance_hypotheses(problem: RidgeProblem, z_mat: torch.Tensor, z_vec: torch.Tensor) -> torch.Tensor:
    """θ = argmin_{θ ∈ C} (1/2n)(θᵀZθ − 2<z, θ>) + (λ/2)||θ||² (Alg 3 eq. (1)), batched.

    Args:
        z_mat: noisy XᵀX, (..., p, p).
        z_vec: noisy Xᵀy, (..., p).
    """
    p = problem.p
    eye = torch.eye(p, dtype=_DTYPE)
    a = z_mat / problem.n + problem.lam * eye
    return ball_quadratic_minimise(a, z_vec / problem.n, problem.radius)


def covariance_perturbation(problem: RidgeProblem, *, epsilon: float, generator: torch.Generator) -> torch.Tensor:
    """Covariance perturbation with Laplace noise (Ligett et al. Thm 3.1): ε-DP.

    Every entry of XᵀX and Xᵀy gets Lap(4/ε) (joint ℓ1 sensitivity 4, Lemma A.6), and θ_p
    minimises the noisy objective over C.
    """
    epsilon = check_positive("epsilon", epsilon)
    check_generator(generator)
    p = problem.p
    z_mat = problem.gram + laplace(4.0 / epsilon, (p, p), generator=generator)
    z_vec = problem.xty + laplace(4.0 / epsilon, (p,), generator=generator)
    return covariance_hypotheses(problem, z_mat, z_vec)


def project_to_ball(theta: torch.Tensor, radius: float) -> torch.Tensor:
    """Scale each row of ``theta`` with norm above ``radius`` back onto that sphere (post-processing)."""
    norm = torch.linalg.vector_norm(theta, dim=-1, keepdim=True)
    return torch.where(norm > radius, theta * (radius / norm.clamp_min(1e-300)), theta)


def output_perturbation_logistic(
    problem: LogisticProblem, *, epsilon: float, generator: torch.Generator, project: bool = False
) -> torch.Tensor:
    """Output perturbation with Laplace noise (Ligett et al. Thm 3.3): θ* + Lap(2√p/(nλε)), ε-DP.

    With ``project`` the result is scaled onto ||θ|| <= M (post-processing; Remark A.3).
    """
    epsilon = check_positive("epsilon", epsilon)
    check_generator(generator)
    theta = problem.theta_star + laplace(problem.minimiser_sensitivity / epsilon, (problem.p,), generator=generator)
    return project_to_ball(theta, problem.radius) if project else theta


def iat_epsilon(*, sensitivity: float, num_levels: int, alpha: float, gamma: float) -> float:
    """ε_0 = 16Δ log(2T/γ)/α (Alg 3 / Alg 5): IAT is then (α/2)-accurate w.p. 1 − γ (Thm A.1).

    Pinned example: Δ = 0.01, T = 10, α = 0.1, γ = 0.1 gives 16·0.01·log(200)/0.1 ≈ 8.477.
    """
    sensitivity = check_positive("sensitivity", sensitivity)
    num_levels = check_int("num_levels", num_levels, minimum=1)
    alpha = check_positive("alpha", alpha)
    gamma = check_probability("gamma", gamma, open_interval=True)
    return 16.0 * sensitivity * math.log(2.0 * num_levels / gamma) / alpha


def theory_epsilon(problem: Problem, *, alpha: float) -> float:
    """The ε at which the utility theorem bounds the *expected* excess risk by α.

    Ridge, covariance perturbation (Thm 3.1): ε = 4√2(2√(p/λ) + p/λ)/(nα).
    Logistic, output perturbation (Thm 3.3): the positive root of
    2√2·p/(nλε) + 4p²/(n²λε²) = α.
    """
    alpha = check_positive("alpha", alpha)
    n, p, lam = problem.n, problem.p, problem.lam
    if isinstance(problem, RidgeProblem):
        return 4.0 * math.sqrt(2.0) * (2.0 * math.sqrt(p / lam) + p / lam) / (n * alpha)
    if isinstance(problem, LogisticProblem):
        a = 4.0 * p * p / (n * n * lam)
        b = 2.0 * math.sqrt(2.0) * p / (n * lam)
        u = (-b + math.sqrt(b * b + 4.0 * a * alpha)) / (2.0 * a)  # u = 1/ε
        return 1.0 / u
    raise TypeError(f"problem must be a RidgeProblem or LogisticProblem, got {type(problem).__name__}")


def geometric_levels(epsilon_min: float, epsilon_max: float, num_levels: int) -> torch.Tensor:
    """ε_t = ε_min·r^{t−1}, t = 1..T, r = (ε_max/ε_min)^{1/(T−1)} (their App. B.1 grid)."""
    lo, hi = check_positive("epsilon_min", epsilon_min), check_positive("epsilon_max", epsilon_max)
    num_levels = check_int("num_levels", num_levels, minimum=2)
    if not hi > lo:
        raise ValueError(f"epsilon_max must exceed epsilon_min, got {hi} <= {lo}")
    return torch.logspace(math.log10(lo), math.log10(hi), num_levels, dtype=_DTYPE)


def doubling_levels(epsilon_min: float, epsilon_max: float) -> torch.Tensor:
    """ε_1 = ε_min, ε_i = 2ε_{i−1}, until ε_max is reached or passed (App. B.1)."""
    lo, hi = check_positive("epsilon_min", epsilon_min), check_positive("epsilon_max", epsilon_max)
    steps = max(0, math.ceil(math.log2(hi / lo)))
    return lo * 2.0 ** torch.arange(steps + 1, dtype=_DTYPE)
