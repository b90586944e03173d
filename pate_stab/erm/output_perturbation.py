"""Output perturbation: solve regularized ERM exactly, add noise with density ∝ exp(-||b|| / s).

Neighbouring relation: replace one record (Wu et al. 2016, Def 2; Chaudhuri & Vinterbo 2013,
Def 1), rows with ||x|| <= 1 and labels in {-1, 1} (|y| <= 1 for regression).

Sensitivity. Let F_D(w) = (1/n) sum l(w, z_i) + (lam/2)||w||^2, minimised over R^d or over a
ball, u = w*(D'), v = w*(D), l(., z) rho-Lipschitz. lam-strong convexity at each minimiser gives
F_D(u) - F_D(v) >= (lam/2)||u - v||^2 and F_D'(v) - F_D'(u) >= (lam/2)||u - v||^2 (also for
minimisers over a convex set, by first-order optimality). Adding, the regularizer and the
n - 1 shared records cancel:

    lam ||u - v||^2 <= (1/n)[l(u, z) - l(v, z) + l(v, z') - l(u, z')] <= (2 rho / n)||u - v||,

so ||u - v|| <= 2 rho / (lam n) ("tight", Chaudhuri et al. 2011, Cor 8 for rho = 1). Wu et al.
2016, Thm 14 states 4 rho / (lam n) (it uses only one of the two strong-convexity inequalities),
and their Alg 2 further replaces rho by rho + lam R (Lipschitz constant of l + (lam/2)||w||^2 on
the ball). Both are valid upper bounds, a factor >= 2 larger; ``constant="paper"`` reproduces
them, ``constant="tight"`` (default) uses 2 rho / (lam n).

Algorithms:

* Chaudhuri & Vinterbo 2013, Alg 4 (= Chaudhuri et al. 2011, Alg 1): 1-Lipschitz loss, noise
  density ∝ exp(-||b|| lam n eps / 2), i.e. scale 2 / (lam n eps): ``loss="logistic"`` or
  ``"huber_hinge"`` or ``"hinge"`` with ``constant="tight"``.
* Wu et al. 2016, Alg 1 (lam-strongly convex, rho-Lipschitz loss; here l = phi + (lam/2)||w||^2):
  scale 4 rho / (lam n eps) as printed, 2 rho / (lam n eps) tight.
* Wu et al. 2016, Alg 2 (convex, rho-Lipschitz, ||w|| <= R): scale 4 (rho + lam R) / (lam n eps)
  as printed, 2 rho / (lam n eps) tight.
* rls-out (Wu et al. 2016, Alg 4): squared loss on ||w|| <= R, rho = 2R + 2; printed scale
  (12 R + 8) / (lam n eps) = Alg 2 with lam <= 1; tight 4 (R + 1) / (lam n eps).

Solver tolerance: the solver certifies ||w_tol - w*|| <= tol with tol = ``solver_rtol`` * Delta,
and the noise is calibrated to Delta (1 + 2 solver_rtol), which covers both neighbours' solver
error (see :mod:`pate_stab.erm.solver`).

Exact noise: the l2-Laplace vector above is drawn in floating point (Gamma norm, Gaussian
direction), and w* + b then leaks through its low bits (Mironov 2012). With ``exact_noise`` the
same l2 sensitivity is released on a lattice with exact discrete Laplace noise instead
(:func:`pate_stab.privacy.noise.lattice.lattice_laplace`: ε-DP, about √2 more noise per coordinate).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from pate_stab._checks import (
    check_epsilon,
    check_int,
    check_positive,
)
from pate_stab.erm.contract import check_features, check_inputs, check_private_fit, check_solver_rtol
from pate_stab.erm.losses import Loss, SquaredLoss, get_loss
from pate_stab.erm.solver import solve_erm
from pate_stab.privacy.noise.discrete import RandomSource
from pate_stab.privacy.noise.lattice import lattice_laplace
from pate_stab.privacy.noise.seeded import l2_laplace_vector

__all__ = [
    "PrivateLinearModel",
    "output_perturbation_sensitivity",
    "output_perturbation",
    "chaudhuri_output_perturbation",
    "rls_out",
]

_DTYPE = torch.float64
_CONSTANTS = ("tight", "wu_alg1", "wu_alg2")


@dataclass(frozen=True)
class PrivateLinearModel:
    """A released linear model and how it was produced.

    Attributes:
        weights: the released w, shape (d,).
        epsilon: the pure-DP guarantee of this release (replace-one neighbours).
        noise_scale: s of the noise density ∝ exp(-||b|| / s) (output perturbation) or of b in
            objective perturbation.
        lam: the regularization actually used (objective perturbation may add Delta).
        mechanism: a short description (algorithm and paper).
    """

    weights: torch.Tensor
    epsilon: float
    noise_scale: float
    lam: float
    mechanism: str


def output_perturbation_sensitivity(
    *,
    lipschitz: float,
    lam: float,
    n: int,
    constant: str = "tight",
    radius: float | None = None,
) -> float:
    """l2-sensitivity of the regularized ERM minimiser (see the module docstring).

    Args:
        lipschitz: rho, Lipschitz constant of the per-record loss in w.
        lam: regularization (strong-convexity) constant.
        n: number of records.
        constant: ``"tight"`` 2 rho/(lam n); ``"wu_alg1"`` 4 rho/(lam n) (Wu et al. Thm 14 /
            Alg 1); ``"wu_alg2"`` 4 (rho + lam R)/(lam n) (Wu et al. Alg 2, needs ``radius``).

    Example:
        >>> output_perturbation_sensitivity(lipschitz=1.0, lam=0.1, n=1000)
        0.02
    """
    rho = check_positive("lipschitz", lipschitz)
    lam = check_positive("lam", lam)
    n = check_int("n", n, minimum=1)
    if constant == "tight":
        return 2.0 * rho / (lam * n)
    if constant == "wu_alg1":
        return 4.0 * rho / (lam * n)
    if constant == "wu_alg2":
        if radius is None:
            raise ValueError("constant='wu_alg2' needs radius (the hypothesis-space bound R)")
        return 4.0 * (rho + lam * check_positive("radius", radius)) / (lam * n)
    raise ValueError(f"constant must be one of {_CONSTANTS}, got {constant!r}")


def output_perturbation(
    x: object,
    y: object,
    *,
    epsilon: float,
    lam: float,
    generator: torch.Generator,
    loss: str | Loss = "logistic",
    radius: float | None = None,
    constant: str = "tight",
    clip: bool = False,
    solver_rtol: float = 1e-6,
    exact_noise: RandomSource | None = None,
) -> PrivateLinearModel:
    """epsilon-DP linear model by output perturbation (module docstring lists the algorithms).

    Args:
        x: features (n, d), rows with ||x|| <= 1.
        y: labels in {-1, 1}, or targets with |y| <= 1 for the squared loss.
        epsilon: privacy parameter (> 0).
        lam: regularization (> 0).
        generator: source of the noise.
        loss: convex loss; its Lipschitz constant on ||w|| <= radius sets rho.
        radius: optional R; minimise over ||w|| <= R (required for the squared loss).
        constant: sensitivity constant, see :func:`output_perturbation_sensitivity`.
        clip: project rows outside the unit ball onto it (and clamp regression targets).
        solver_rtol: solver tolerance relative to the sensitivity (accounted for in the noise).
        exact_noise: release w with exact discrete Laplace noise on a lattice drawn from this
            source (:func:`~pate_stab.privacy.noise.lattice.lattice_laplace`, ℓ2 sensitivity
            Δ (1 + 2 rtol)) instead of float l2-Laplace noise from ``generator`` (Mironov 2012's
            attack on float noise); ``noise_scale`` is then the per-coordinate Laplace scale.

    Returns:
        :class:`PrivateLinearModel`.

    References:
        Chaudhuri & Vinterbo 2013, Alg 4; Chaudhuri et al. 2011, Alg 1; Wu et al. 2016, Alg 1, 2, 4;
        Canonne, Kamath & Steinke 2020, Alg 2 (the exact sampler of ``exact_noise``).
    """
    epsilon, lam = check_private_fit(epsilon=epsilon, lam=lam, generator=generator)
    solver_rtol = check_solver_rtol(solver_rtol)
    loss_fn = get_loss(loss)
    xt, yt = check_inputs(x, y, task=loss_fn.task, clip=clip)
    rho = loss_fn.lipschitz(radius)
    n, d = xt.shape
    sensitivity = output_perturbation_sensitivity(lipschitz=rho, lam=lam, n=n, constant=constant, radius=radius)
    result = solve_erm(xt, yt, loss=loss_fn, lam=lam, radius=radius, tol=solver_rtol * sensitivity)
    if exact_noise is not None:
        release = lattice_laplace(result.weights, l2_sensitivity=sensitivity * (1.0 + 2.0 * solver_rtol),
                                  epsilon=epsilon, source=exact_noise)  # fmt: skip
        return PrivateLinearModel(
            weights=release.values.to(xt.device),
            epsilon=epsilon,
            noise_scale=release.noise_scale,
            lam=lam,
            mechanism=f"output perturbation ({loss_fn.name}, constant={constant}, R={radius}), exact lattice "
            f"Laplace (grid {release.grid:g})",
        )
    scale = sensitivity * (1.0 + 2.0 * solver_rtol) / epsilon
    noise = l2_laplace_vector(scale, d, generator=generator).to(xt.device)
    return PrivateLinearModel(
        weights=result.weights + noise,
        epsilon=epsilon,
        noise_scale=scale,
        lam=lam,
        mechanism=f"output perturbation ({loss_fn.name}, constant={constant}, R={radius})",
    )


def chaudhuri_output_perturbation(
    x: object,
    y: object,
    *,
    epsilon: float,
    lam: float,
    generator: torch.Generator,
    loss: str | Loss = "logistic",
    clip: bool = False,
) -> PrivateLinearModel:
    """Chaudhuri & Vinterbo 2013, Alg 4: w* + (2/(lam alpha n)) R, R ∝ exp(-||r||).

    Requires a 1-Lipschitz classification loss (logistic, hinge, Huber hinge).
    """
    loss_fn = get_loss(loss)
    if loss_fn.task != "classification" or loss_fn.lipschitz() != 1.0:
        raise ValueError(f"loss must be a 1-Lipschitz classification loss, got {loss_fn.name}")
    return output_perturbation(x, y, epsilon=epsilon, lam=lam, generator=generator, loss=loss_fn, clip=clip)


def rls_out(
    x: object,
    y: object,
    *,
    epsilon: float,
    lam: float,
    radius: float,
    generator: torch.Generator,
    constant: str = "tight",
    clip: bool = False,
) -> PrivateLinearModel:
    """rls-out (Wu et al. 2016, Alg 4): ridge regression on ||w|| <= R plus l2-Laplace noise.

    ``constant="paper"`` uses the printed density ∝ exp(-lam n eps ||k|| / (12 R + 8)), valid for
    lam <= 1 (it is Alg 2's 4(rho + lam R) with rho = 2R + 2 and lam R <= R); ``"tight"`` uses
    scale 4 (R + 1) / (lam n eps).
    """
    radius = check_positive("radius", radius)
    lam = check_positive("lam", lam)
    if constant == "paper":
        if lam > 1.0:
            raise ValueError(f"constant='paper' (12R + 8) holds only for lam <= 1, got lam={lam}")
        # 4 (rho + lam R) with rho = 2R + 2, bounded by 4(3R + 2) = 12 R + 8 for lam <= 1.
        epsilon = check_epsilon(epsilon)
        n = check_features(x, clip=clip).shape[0]
        paper_sens = (12.0 * radius + 8.0) / (lam * n)
        tight_sens = output_perturbation_sensitivity(lipschitz=2 * radius + 2, lam=lam, n=n)
        # Run at the tight calibration with a privacy level scaled so that the noise scale equals
        # the printed one: scale = tight / eps' = paper / eps  <=>  eps' = eps * tight / paper.
        model = output_perturbation(
            x,
            y,
            epsilon=epsilon * tight_sens / paper_sens,
            lam=lam,
            generator=generator,
            loss=SquaredLoss(),
            radius=radius,
            constant="tight",
            clip=clip,
        )
        return PrivateLinearModel(
            weights=model.weights,
            epsilon=epsilon,
            noise_scale=model.noise_scale,
            lam=lam,
            mechanism=f"rls-out (Wu et al. Alg 4, printed constant 12R+8, R={radius})",
        )
    model = output_perturbation(
        x,
        y,
        epsilon=epsilon,
        lam=lam,
        generator=generator,
        loss=SquaredLoss(),
        radius=radius,
        constant=constant,
        clip=clip,
    )
    return PrivateLinearModel(
        weights=model.weights,
        epsilon=model.epsilon,
        noise_scale=model.noise_scale,
        lam=lam,
        mechanism=f"rls-out (Wu et al. Alg 4, constant={constant}, R={radius})",
    )
