"""Objective perturbation (Chaudhuri, Monteleoni, Sarwate 2011, Alg 2; Chaudhuri & Vinterbo
2013, Alg 3; Wu et al. 2016, Alg 3).

Release argmin_w (1/n) sum phi(<w, x_i>, y_i) + (1/n) <b, w> + ((lam + Delta)/2) ||w||^2 with
b drawn with density ∝ exp(-eps' ||b|| / (2 rho)). Conditions (checked): phi convex, twice
differentiable, |phi'| <= rho, |phi''| <= c; rows ||x|| <= 1. The privacy budget splits as

    eps' = eps - log(1 + 2c/(n lam) + c^2/(n lam)^2);
    if eps' > 0: Delta = 0;  else: Delta = c / (n (e^{eps/4} - 1)) - lam and eps' = eps / 2.

The log term is 2 log(1 + c/(n lam)): the Jacobian of the map b -> w changes by at most that
factor between neighbours (rank-one Hessian change, ||x|| <= 1). With Delta > 0 the term equals
2 log(e^{eps/4}) = eps/2, so eps' + eps/2 = eps. Chaudhuri & Vinterbo's Alg 3 writes the same
mechanism with b = (2/alpha) R, R ∝ exp(-||r||), for rho = 1.

Deviation from the printed Wu et al. Alg 3: its step 3 reads "beta = eps_p / 2", which drops the
prime; the analysis (Chaudhuri et al. 2011, Thm 9) needs beta = eps' / 2, used here. For a
rho-Lipschitz loss (squared loss on ||w|| <= R: rho = 2R + 2) the noise scale is 2 rho / eps'
(||b - b'|| <= 2 rho). The constrained variant (``radius``) is Wu et al.'s Alg 3; its privacy
rests on the extension of objective perturbation to convex constraint sets (Kifer, Smith,
Thakurta 2012), not on Chaudhuri et al. 2011, whose proof is for the unconstrained problem.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pate_stab._checks import check_epsilon, check_int, check_positive
from pate_stab.erm.contract import check_inputs, check_private_fit
from pate_stab.erm.losses import Loss, get_loss
from pate_stab.erm.output_perturbation import PrivateLinearModel
from pate_stab.erm.solver import solve_erm
from pate_stab.privacy.noise.seeded import l2_laplace_vector

__all__ = ["ObjectivePerturbationBudget", "objective_perturbation_budget", "objective_perturbation"]


@dataclass(frozen=True)
class ObjectivePerturbationBudget:
    """eps' (the budget of the noise term) and the extra regularization Delta."""

    epsilon_prime: float
    extra_lam: float


def objective_perturbation_budget(
    *, epsilon: float, lam: float, n: int, smoothness: float, rank: int = 1
) -> ObjectivePerturbationBudget:
    """Steps 1-2 of Chaudhuri et al. 2011, Alg 2 (Wu et al. 2016, Alg 3).

    ``rank`` bounds the rank of the Hessian change one record makes: 1 for a linear model
    (module docstring), C − 1 for the softmax head (:mod:`pate_stab.erm.multinomial`; Chaudhuri
    et al. 2011, Thm 9): eps' = eps - 2 rank log(1 + c/(n lam)), and when that is not positive
    Delta = c / (n (e^{eps/(4 rank)} - 1)) - lam with eps' = eps / 2.

    Example:
        >>> b = objective_perturbation_budget(epsilon=1.0, lam=0.01, n=1000, smoothness=0.25)
        >>> round(b.epsilon_prime, 6), b.extra_lam
        (0.950615, 0.0)
    """
    epsilon = check_epsilon(epsilon)
    lam = check_positive("lam", lam)
    n = check_int("n", n, minimum=1)
    c = check_positive("smoothness", smoothness)
    rank = check_int("rank", rank, minimum=1)
    ratio = c / (n * lam)
    # rank 1: eps - log(1 + 2c/(n lam) + c^2/(n lam)^2)
    eps_prime = epsilon - 2.0 * rank * math.log1p(ratio)
    if eps_prime > 0.0:
        return ObjectivePerturbationBudget(epsilon_prime=eps_prime, extra_lam=0.0)
    extra = c / (n * math.expm1(epsilon / (4.0 * rank))) - lam
    return ObjectivePerturbationBudget(epsilon_prime=epsilon / 2.0, extra_lam=extra)


def objective_perturbation(
    x: object,
    y: object,
    *,
    epsilon: float,
    lam: float,
    generator: torch.Generator,
    loss: str | Loss = "logistic",
    radius: float | None = None,
    clip: bool = False,
    tol: float = 1e-9,
) -> PrivateLinearModel:
    """epsilon-DP linear model by objective perturbation (see the module docstring).

    Raises:
        ValueError: a loss that is not twice differentiable with bounded phi'' (hinge, ramp),
            the squared loss without ``radius``, bad data or parameters.
    """
    epsilon, lam = check_private_fit(epsilon=epsilon, lam=lam, generator=generator)
    loss_fn = get_loss(loss)
    if not loss_fn.convex or loss_fn.smoothness is None:
        raise ValueError(
            f"objective perturbation needs a convex, twice-differentiable loss with bounded second "
            f"derivative (smoothness c); {loss_fn.name} has none"
        )
    xt, yt = check_inputs(x, y, task=loss_fn.task, clip=clip)
    n, d = xt.shape
    rho = loss_fn.lipschitz(radius)
    budget = objective_perturbation_budget(epsilon=epsilon, lam=lam, n=n, smoothness=loss_fn.smoothness)
    scale = 2.0 * rho / budget.epsilon_prime
    b = l2_laplace_vector(scale, d, generator=generator).to(xt.device)
    lam_total = lam + budget.extra_lam
    result = solve_erm(xt, yt, loss=loss_fn, lam=lam_total, radius=radius, linear_term=b / n, tol=tol)
    return PrivateLinearModel(
        weights=result.weights,
        epsilon=epsilon,
        noise_scale=scale,
        lam=lam_total,
        mechanism=f"objective perturbation ({loss_fn.name}, eps'={budget.epsilon_prime:.4g}, "
        f"Delta={budget.extra_lam:.4g}, R={radius})",
    )
