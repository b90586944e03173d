"""Exact regularized ERM for linear models, float64, with a certified distance to the minimiser.

Solves

    w* = argmin_{||w|| <= R}  F(w),   F(w) = (1/n) sum_i phi(<w, x_i>, y_i) + (lam/2)||w||^2 + <q, w>

(``R`` optional, ``q`` the linear term of objective perturbation, default 0).

Output perturbation (Chaudhuri & Vinterbo 2013, Alg 4; Wu et al. 2016, Alg 1, 2, 4) assumes the
*exact* minimiser: its sensitivity bound ||w*(D) - w*(D')|| <= 2 rho / (lam n) is a statement
about minimisers. A numerical solver returns w_tol instead. Because F is lam-strongly convex,
the distance to the minimiser is certified from quantities the solver can compute:

* unconstrained, smooth phi: ||w_tol - w*|| <= ||grad F(w_tol)|| / lam;
* on the ball ||w|| <= R: w* = w(mu*) minimises F + (mu*/2)||w||^2 for the KKT multiplier mu*;
  the solver brackets mu* in [mu_lo, mu_hi] and certifies
  ||w_tol - w*|| <= ||grad F_mu(w_tol)|| / (lam + mu) + (mu_hi - mu_lo) R / lam,
  since grad F_mu(w(mu*)) = (mu - mu*) w(mu*) and F_mu is (lam + mu)-strongly convex;
* hinge loss (not differentiable): dual coordinate ascent, and the duality gap G certifies
  ||w_tol - w*|| <= sqrt(2 G / lam). G cannot be resolved below about 1e-16 in float64, so this
  certificate bottoms out near sqrt(2e-16 / lam): ask for a tol above that.

The solver raises :class:`pate_stab.errors.ConvergenceError` when the certified bound is above
``tol``. A caller that adds noise calibrated to a sensitivity Delta of the exact minimiser must
use Delta + 2 tol (both neighbours are solved to within tol); the output-perturbation module does
exactly that. The bounds hold in exact arithmetic; float64 rounding in the gradient itself
(about 1e-16 relative) is not accounted for.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pate_stab._checks import check_int, check_positive, check_tensor
from pate_stab.erm.losses import HingeLoss, Loss, get_loss
from pate_stab.errors import ConvergenceError

__all__ = ["SolverResult", "solve_erm", "erm_objective"]

_DTYPE = torch.float64


@dataclass(frozen=True)
class SolverResult:
    """The solver's output.

    Attributes:
        weights: w_tol, float64, shape (d,).
        distance_bound: certified upper bound on ||w_tol - w*|| (see module docstring).
        iterations: Newton steps (or dual epochs for the hinge loss) taken in total.
        multiplier: the KKT multiplier mu of the ball constraint (0 when inactive).
    """

    weights: torch.Tensor
    distance_bound: float
    iterations: int
    multiplier: float


def erm_objective(
    w: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: Loss,
    lam: float,
    linear_term: torch.Tensor | None = None,
) -> torch.Tensor:
    """F(w) = (1/n) sum phi(<w, x_i>, y_i) + (lam/2)||w||^2 + <q, w>."""
    value = loss.value(x @ w, y).mean() + 0.5 * lam * (w @ w)
    if linear_term is not None:
        value = value + linear_term @ w
    return value


def _grad_hess(
    w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, loss: Loss, lam: float, q: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    n, d = x.shape
    z = x @ w
    g = x.T @ loss.derivative(z, y) / n + lam * w
    if q is not None:
        g = g + q
    h = (x.T * loss.second_derivative(z, y)) @ x / n
    h = h + lam * torch.eye(d, dtype=_DTYPE, device=x.device)
    return g, h


def _newton(
    w: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    loss: Loss,
    lam: float,
    q: torch.Tensor | None,
    grad_tol: float,
    max_iter: int,
) -> tuple[torch.Tensor, float, int]:
    """Damped Newton until ||grad|| <= grad_tol. Returns (w, ||grad||, iterations)."""
    f = erm_objective(w, x, y, loss=loss, lam=lam, linear_term=q)
    for it in range(max_iter + 1):
        g, h = _grad_hess(w, x, y, loss, lam, q)
        gnorm = float(torch.linalg.vector_norm(g))
        if gnorm <= grad_tol or it == max_iter:
            return w, gnorm, it
        step = torch.linalg.solve(h, g)
        t = 1.0
        slope = float(g @ step)
        while True:
            cand = w - t * step
            fc = erm_objective(cand, x, y, loss=loss, lam=lam, linear_term=q)
            # Armijo, with slack for rounding in F near the optimum (where F stops resolving).
            if float(fc) <= float(f) - 1e-4 * t * slope + 1e-15 * (1.0 + abs(float(f))) or t < 1e-12:
                break
            t *= 0.5
        w, f = cand, fc
    return w, gnorm, max_iter  # pragma: no cover - loop always returns


def _hinge_dual(
    x: torch.Tensor, y: torch.Tensor, lam: float, tol: float, max_iter: int
) -> tuple[torch.Tensor, float, int]:
    """Dual coordinate ascent for lam/2||w||^2 + (1/n) sum max(0, 1 - y <w, x>).

    Dual: max_a (1/n) sum a_i - ||sum a_i y_i x_i||^2 / (2 lam n^2), a in [0, 1]^n, with
    w(a) = sum a_i y_i x_i / (lam n) (Hsieh et al. 2008, with C = 1/(lam n)).
    Returns (w, certified distance sqrt(2 gap / lam), epochs).
    """
    n, d = x.shape
    xn = x.cpu().numpy()
    yn = y.cpu().numpy()
    sq = (xn * xn).sum(axis=1)
    a = [0.0] * n
    import numpy as np

    w = np.zeros(d)
    rng = np.random.default_rng(0)  # visiting order only; the optimum does not depend on it
    bound = math.inf
    for epoch in range(1, max_iter + 1):
        for i in rng.permutation(n):
            if sq[i] == 0.0:
                continue
            grad = 1.0 - yn[i] * float(xn[i] @ w)
            new = min(1.0, max(0.0, a[i] + grad * lam * n / sq[i]))
            if new != a[i]:
                w += (new - a[i]) * yn[i] * xn[i] / (lam * n)
                a[i] = new
        margins = yn * (xn @ w)
        primal = 0.5 * lam * float(w @ w) + float(np.maximum(0.0, 1.0 - margins).mean())
        dual = float(np.mean(a)) - 0.5 * lam * float(w @ w)
        gap = max(primal - dual, 0.0)
        bound = math.sqrt(2.0 * gap / lam)
        if bound <= tol:
            return torch.as_tensor(w, dtype=_DTYPE, device=x.device), bound, epoch
    return torch.as_tensor(w, dtype=_DTYPE, device=x.device), bound, max_iter


def solve_erm(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    loss: str | Loss,
    lam: float,
    radius: float | None = None,
    linear_term: torch.Tensor | None = None,
    tol: float = 1e-9,
    max_iter: int = 100,
) -> SolverResult:
    """Minimise the lam-regularized empirical risk, certifying ||w_tol - w*|| <= tol.

    Args:
        x: features, shape (n, d); converted to float64.
        y: labels / targets, shape (n,).
        loss: a :class:`Loss` or its name; must be convex.
        lam: regularization lam > 0 (the strong-convexity constant of F).
        radius: optional R: minimise over ||w|| <= R.
        linear_term: optional q in R^d added as <q, w> (objective perturbation).
        tol: required certified distance to the exact minimiser.
        max_iter: Newton iterations per solve (dual epochs for the hinge loss).

    Returns:
        :class:`SolverResult`.

    Raises:
        ConvergenceError: the certified distance is above ``tol`` after ``max_iter``.
        ValueError: non-convex loss, hinge loss with a radius or a linear term, bad arguments.
    """
    loss = get_loss(loss)
    if not loss.convex:
        raise ValueError(f"loss must be convex for ERM, got {loss.name}")
    lam = check_positive("lam", lam)
    tol = check_positive("tol", tol)
    max_iter = check_int("max_iter", max_iter, minimum=1)
    x = check_tensor("x", x, ndim=2).to(_DTYPE)
    y = check_tensor("y", y, ndim=1).to(dtype=_DTYPE, device=x.device)
    if y.shape[0] != x.shape[0]:
        raise ValueError(f"y must have {x.shape[0]} entries (rows of x), got {y.shape[0]}")
    q = None
    if linear_term is not None:
        q = check_tensor("linear_term", linear_term, ndim=1).to(dtype=_DTYPE, device=x.device)
        if q.shape[0] != x.shape[1]:
            raise ValueError(f"linear_term must have {x.shape[1]} entries, got {q.shape[0]}")
    if radius is not None:
        radius = check_positive("radius", radius)

    if isinstance(loss, HingeLoss) or not loss.differentiable:
        if radius is not None or q is not None:
            raise ValueError("the hinge-loss solver supports neither radius nor linear_term")
        w, bound, epochs = _hinge_dual(x, y, lam, tol, max_iter * 10)
        if not bound <= tol:
            raise ConvergenceError(
                f"hinge-loss dual ascent certified ||w - w*|| <= {bound:.3e} > tol = {tol:.3e} after {epochs} epochs"
            )
        return SolverResult(weights=w, distance_bound=bound, iterations=epochs, multiplier=0.0)

    d = x.shape[1]
    w0 = torch.zeros(d, dtype=_DTYPE, device=x.device)
    w, gnorm, iters = _newton(w0, x, y, loss, lam, q, lam * tol, max_iter)
    bound = gnorm / lam
    if not bound <= tol:
        raise ConvergenceError(f"Newton certified ||w - w*|| <= {bound:.3e} > tol = {tol:.3e} after {iters} steps")
    if radius is None:
        return SolverResult(weights=w, distance_bound=bound, iterations=iters, multiplier=0.0)
    if float(torch.linalg.vector_norm(w)) + bound <= radius:
        return SolverResult(weights=w, distance_bound=bound, iterations=iters, multiplier=0.0)
    return _solve_on_ball(x, y, loss, lam, q, radius, tol, max_iter, w, iters)


def _solve_on_ball(
    x: torch.Tensor,
    y: torch.Tensor,
    loss: Loss,
    lam: float,
    q: torch.Tensor | None,
    radius: float,
    tol: float,
    max_iter: int,
    w_start: torch.Tensor,
    iters: int,
) -> SolverResult:
    """Bisection on the KKT multiplier mu of ||w|| <= R; see the module docstring."""
    total = iters
    c = loss.smoothness if loss.smoothness is not None else 0.0

    def solve_mu(mu: float, w_init: torch.Tensor, err: float) -> tuple[torch.Tensor, float]:
        nonlocal total
        w, gnorm, it = _newton(w_init, x, y, loss, lam + mu, q, (lam + mu) * err, max_iter)
        total += it
        e = gnorm / (lam + mu)
        if not e <= err:
            raise ConvergenceError(f"Newton on the ball reached only {e:.3e} > {err:.3e}")
        return w, e

    # Find mu_hi with ||w(mu_hi)|| < R (certified), starting from mu = 1.
    mu_lo, mu_hi = 0.0, 1.0
    err = tol / 4.0
    w_hi, e_hi = solve_mu(mu_hi, w_start, err)
    while float(torch.linalg.vector_norm(w_hi)) + e_hi >= radius:
        mu_lo, mu_hi = mu_hi, 2.0 * mu_hi
        if mu_hi > 1e12:
            raise ConvergenceError("could not bracket the ball constraint's multiplier")
        w_hi, e_hi = solve_mu(mu_hi, w_hi, err)
    # Newton error small enough that an ambiguous norm comparison pins mu* down to tol/4 R / lam.
    err = min(err, tol * lam * radius / (16.0 * (c + lam + mu_hi) * (radius + 1.0)))
    w = w_hi
    mu = mu_hi
    for _ in range(200):
        if (mu_hi - mu_lo) * radius / lam <= tol / 2.0:
            mu = mu_hi
            w, e = solve_mu(mu, w, err)
            bound = e + (mu_hi - mu_lo) * radius / lam
            break
        mid = 0.5 * (mu_lo + mu_hi)
        w_mid, e_mid = solve_mu(mid, w, err)
        norm = float(torch.linalg.vector_norm(w_mid))
        if norm - e_mid > radius:
            mu_lo = mid
        elif norm + e_mid < radius:
            mu_hi, w = mid, w_mid
        else:
            # | ||w(mid)|| - R | <= 2 e_mid and d||w(mu)||/dmu <= -||w|| / (c + lam + mu), so
            # |mid - mu*| <= 2 e_mid (c + lam + mu_hi) / (R - 2 e_mid).
            mu, w = mid, w_mid
            dmu = 2.0 * e_mid * (c + lam + mu_hi) / (radius - 2.0 * e_mid)
            bound = e_mid + dmu * radius / lam
            break
    else:  # pragma: no cover - 200 halvings always close the bracket
        raise ConvergenceError("bisection on the ball multiplier did not converge")
    norm = float(torch.linalg.vector_norm(w))
    if norm > radius:  # projection onto the ball cannot move w away from w* (w* is in the ball)
        w = w * (radius / norm)
    if not bound <= tol:
        raise ConvergenceError(f"ball-constrained solve certified {bound:.3e} > tol = {tol:.3e}")
    return SolverResult(weights=w, distance_bound=bound, iterations=total, multiplier=mu)
