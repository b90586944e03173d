"""A multinomial (softmax) logistic head: output and objective perturbation for C classes at once.

One-vs-rest spends ε/C on each of C binary heads (basic composition). A single softmax head
W ∈ R^{C×d} trained on all classes at once pays ε once. Its privacy rests on three bounds for
the softmax cross-entropy ℓ(W; x, y) = −log softmax(W x)_y with p = softmax(W x), rows ||x|| <= 1:

* **Lipschitz, ρ = √2** (Frobenius norm). ∇_W ℓ = (p − e_y) xᵀ, so ||∇_W ℓ||_F = ||p − e_y|| ||x||
  and ||p − e_y||² = (1 − p_y)² + Σ_{j≠y} p_j² <= (1 − p_y)² + (Σ_{j≠y} p_j)² = 2 (1 − p_y)² <= 2.
* **Smoothness, c = 1/2** (spectral norm of the Hessian in vec(W)). ∇²ℓ = (diag(p) − p pᵀ) ⊗ x xᵀ,
  whose eigenvalues are products of the factors' eigenvalues; by Gershgorin every eigenvalue of
  diag(p) − p pᵀ is at most p_i (1 − p_i) + p_i Σ_{j≠i} p_j = 2 p_i (1 − p_i) <= 1/2, and
  ||x xᵀ|| = ||x||² <= 1.
* **Rank, r = C − 1.** diag(p) − p pᵀ annihilates the all-ones vector, and x xᵀ has rank 1.

Output perturbation (Chaudhuri, Monteleoni & Sarwate 2011, Alg 1 and Cor 8, with the argument
of :mod:`pate_stab.erm.output_perturbation` in the Frobenius norm): the minimiser of the
λ-strongly convex F_D(W) = (1/n) Σ ℓ + (λ/2) ||W||_F² moves by at most 2 ρ / (λ n) = 2√2 / (λ n)
when one record is replaced; noise with density ∝ exp(−||B||_F / s), s = 2√2 / (λ n ε), on all
C·d entries gives ε-DP.

Objective perturbation (Chaudhuri et al. 2011, Alg 2 and the proof of Thm 9, generalised to a
per-record Hessian of rank r): release argmin_W F_D(W) + (1/n) <B, W> + (Δ/2) ||W||², B with
density ∝ exp(−ε' ||B||_F / (2ρ)). The map B → W is a bijection; between neighbours the noise
density changes by at most e^{ε'} (the gradients of the replaced record differ by at most 2ρ), and
the Jacobian determinant by the ratio det(A + H)/det(A + H') with A ⪰ n(λ + Δ) I and H, H' the two
records' Hessians (PSD, norm <= c, rank <= r). Chaudhuri et al. bound it through the difference
E = H − H' (rank <= 2r here), whose ≤ 2r eigenvalues relative to A are at most c / (n(λ+Δ)) in
size: log ratio <= 2 r log(1 + c / (n(λ+Δ))). Hence

    ε' = ε − 2 (C − 1) log(1 + c/(n λ)),  Δ = 0                         when this is > 0;
    otherwise Δ = c / (n (e^{ε / (4 (C − 1))} − 1)) − λ and ε' = ε / 2,

which for C = 2 has the form of the binary formula of :func:`pate_stab.erm.objective_perturbation_budget`.
(The factor 2 is Chaudhuri et al.'s: writing the ratio as [det(A+H)/det(A)] / [det(A+H')/det(A)],
each factor in [1, (1 + c/(nλ))^r], would halve it; the printed argument is kept.)

Neighbouring relation: replace one record (n fixed and public), as for every head in
:mod:`pate_stab.erm`. Solver: L-BFGS in float64 on the strongly convex objective, with the
certificate ||W_tol − W*||_F <= ||∇F(W_tol)||_F / λ (:mod:`pate_stab.erm.solver`); output
perturbation calibrates its noise to Δ_W (1 + 2 rtol), covering both neighbours' solver error.
Objective perturbation's analysis is for the exact minimiser of the perturbed objective (as in
:func:`pate_stab.erm.objective_perturbation`); the released model records the certified distance
(``distance_bound``), which is not accounted for in ε.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pate_stab._checks import check_int, check_positive, check_tensor
from pate_stab.erm.contract import check_features, check_private_fit, check_solver_rtol
from pate_stab.erm.objective_perturbation import objective_perturbation_budget
from pate_stab.errors import ConvergenceError
from pate_stab.privacy.noise.discrete import RandomSource
from pate_stab.privacy.noise.lattice import lattice_laplace
from pate_stab.privacy.noise.seeded import l2_laplace_vector

__all__ = [
    "SOFTMAX_LIPSCHITZ",
    "SOFTMAX_SMOOTHNESS",
    "MultinomialModel",
    "check_class_labels",
    "softmax_gradient",
    "softmax_hessian",
    "softmax_output_sensitivity",
    "softmax_objective_budget",
    "solve_softmax_erm",
    "softmax_output_perturbation",
    "softmax_objective_perturbation",
]

_DTYPE = torch.float64
SOFTMAX_LIPSCHITZ = math.sqrt(2.0)
"""ρ: ||∇_W ℓ||_F <= √2 ||x|| for the softmax cross-entropy (module docstring)."""
SOFTMAX_SMOOTHNESS = 0.5
"""c: ||∇²_W ℓ||_2 <= ||x||² / 2 for the softmax cross-entropy (module docstring)."""


@dataclass(frozen=True)
class MultinomialModel:
    """A released softmax head and how it was produced.

    Attributes:
        weights: the released W, shape (C, d); the class scores of x are W x.
        epsilon: the pure-DP guarantee (replace-one neighbours).
        noise_scale: s of the noise density ∝ exp(−||B||_F / s) (output perturbation) or of B in
            objective perturbation.
        lam: the regularisation actually used (objective perturbation may add Δ).
        distance_bound: the solver's certified ||W_tol − W*||_F.
        mechanism: a short description.
    """

    weights: torch.Tensor
    epsilon: float
    noise_scale: float
    lam: float
    distance_bound: float
    mechanism: str

    def predict(self, x: object) -> torch.Tensor:
        """argmax_c (W x)_c for every row of ``x`` (n, d)."""
        xt = check_tensor("x", x, ndim=2).to(_DTYPE)
        return torch.argmax(xt @ self.weights.T.to(xt.device), dim=1)


def check_class_labels(y: object, *, num_classes: int, n: int, name: str = "y") -> torch.Tensor:
    """Class indices as int64 in [0, ``num_classes``), one per row.

    Raises:
        ValueError: wrong length, non-integer values or labels outside [0, C).
    """
    num_classes = check_int("num_classes", num_classes, minimum=2)
    yt = check_tensor(name, y, ndim=1)
    if yt.shape[0] != n:
        raise ValueError(f"{name} must have {n} entries (one per row of x), got {yt.shape[0]}")
    if yt.is_floating_point() and not bool((yt == yt.round()).all()):
        raise ValueError(f"{name}: class labels must be integers")
    yt = yt.to(torch.int64)
    bad = (yt < 0) | (yt >= num_classes)
    if bool(bad.any()):
        raise ValueError(
            f"{name}: labels must lie in [0, {num_classes}); found {int(bad.sum())} outside, e.g. {int(yt[bad][0])}"
        )
    return yt


def softmax_gradient(weights: torch.Tensor, x: torch.Tensor, y: int) -> torch.Tensor:
    """∇_W ℓ(W; x, y) = (softmax(W x) − e_y) xᵀ, shape (C, d) (for the property tests and the proof)."""
    p = torch.softmax(weights @ x, dim=0)
    p[y] -= 1.0
    return torch.outer(p, x)


def softmax_hessian(weights: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """∇²_{vec W} ℓ(W; x, y) = (diag(p) − p pᵀ) ⊗ x xᵀ, shape (C d, C d) (independent of y)."""
    p = torch.softmax(weights @ x, dim=0)
    return torch.kron(torch.diag(p) - torch.outer(p, p), torch.outer(x, x))


def softmax_output_sensitivity(*, lam: float, n: int) -> float:
    """||W*(D) − W*(D')||_F <= 2 ρ / (λ n) = 2√2 / (λ n) under replace-one (module docstring).

    Chaudhuri et al. 2011, Cor 8 (there for ρ = 1, binary); here ρ = √2.

    Example:
        >>> round(softmax_output_sensitivity(lam=0.01, n=1000), 6)
        0.282843
    """
    lam = check_positive("lam", lam)
    n = check_int("n", n, minimum=1)
    return 2.0 * SOFTMAX_LIPSCHITZ / (lam * n)


@dataclass(frozen=True)
class SoftmaxObjectiveBudget:
    """ε' (the budget of the noise term) and the extra regularisation Δ."""

    epsilon_prime: float
    extra_lam: float


def softmax_objective_budget(*, epsilon: float, lam: float, n: int, num_classes: int) -> SoftmaxObjectiveBudget:
    """Steps 1–2 of Chaudhuri et al. 2011, Alg 2 for the softmax head (module docstring).

    Example:
        >>> b = softmax_objective_budget(epsilon=1.0, lam=0.01, n=1000, num_classes=10)
        >>> round(b.epsilon_prime, 6), b.extra_lam
        (0.121777, 0.0)
    """
    rank = check_int("num_classes", num_classes, minimum=2) - 1
    split = objective_perturbation_budget(epsilon=epsilon, lam=lam, n=n, smoothness=SOFTMAX_SMOOTHNESS, rank=rank)
    return SoftmaxObjectiveBudget(epsilon_prime=split.epsilon_prime, extra_lam=split.extra_lam)


def _objective(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, lam: float, q: torch.Tensor | None) -> torch.Tensor:
    value = torch.nn.functional.cross_entropy(x @ w.T, y) + 0.5 * lam * (w * w).sum()
    return value if q is None else value + (q * w).sum()


def _gradient(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, lam: float, q: torch.Tensor | None) -> torch.Tensor:
    p = torch.softmax(x @ w.T, dim=1)  # (n, C)
    p[torch.arange(x.shape[0], device=x.device), y] -= 1.0
    g = p.T @ x / x.shape[0] + lam * w
    return g if q is None else g + q


def _hessian_vector(w: torch.Tensor, x: torch.Tensor, v: torch.Tensor, lam: float) -> torch.Tensor:
    """∇²F(W)[V] = (1/n) Σ_i ((diag(p_i) − p_i p_iᵀ) V x_i) x_iᵀ + λ V."""
    p = torch.softmax(x @ w.T, dim=1)  # (n, C)
    z = x @ v.T  # (n, C)
    u = p * z - p * (p * z).sum(dim=1, keepdim=True)
    return u.T @ x / x.shape[0] + lam * v


def _newton_cg(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor, lam: float, q: torch.Tensor | None) -> torch.Tensor:
    """One Newton step, the system solved by conjugate gradients to a relative residual 1e-10."""
    g = _gradient(w, x, y, lam, q)
    s, r = torch.zeros_like(w), -g
    d, rr = r.clone(), float((r * r).sum())
    stop = 1e-20 * rr
    for _ in range(200):
        hd = _hessian_vector(w, x, d, lam)
        alpha = rr / float((d * hd).sum())
        s, r = s + alpha * d, r - alpha * hd
        rr_new = float((r * r).sum())
        if rr_new <= stop:
            break
        d, rr = r + (rr_new / rr) * d, rr_new
    return w + s


def solve_softmax_erm(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    num_classes: int,
    lam: float,
    linear_term: torch.Tensor | None = None,
    tol: float,
    max_rounds: int = 30,
) -> tuple[torch.Tensor, float]:
    """argmin_W (1/n) Σ ℓ(W; x_i, y_i) + (λ/2)||W||_F² + <Q, W>, float64: L-BFGS, then Newton–CG steps.

    Returns:
        (W (C, d), certified ||W − W*||_F <= ||∇F(W)||_F / λ, by λ-strong convexity).

    Raises:
        ConvergenceError: the certificate stays above ``tol``.
    """
    lam = check_positive("lam", lam)
    tol = check_positive("tol", tol)
    x, y = x.to(_DTYPE), y.to(torch.int64)
    w = torch.zeros((num_classes, x.shape[1]), dtype=_DTYPE, device=x.device, requires_grad=True)
    opt = torch.optim.LBFGS([w], lr=1.0, max_iter=100, tolerance_grad=lam * tol, tolerance_change=0.0,
                            history_size=30, line_search_fn="strong_wolfe")  # fmt: skip

    def closure() -> torch.Tensor:
        opt.zero_grad()
        value = _objective(w, x, y, lam, linear_term)
        value.backward()
        return value

    def certificate(v: torch.Tensor) -> float:
        return float(torch.linalg.vector_norm(_gradient(v, x, y, lam, linear_term))) / lam

    bound = certificate(w.detach())
    for _ in range(3):  # L-BFGS brings W near the minimiser, where Newton's steps converge fast
        if bound <= tol:
            return w.detach().clone(), bound
        opt.step(closure)
        bound = certificate(w.detach())
    v = w.detach().clone()
    for _ in range(max_rounds):
        if bound <= tol:
            return v, bound
        v = _newton_cg(v, x, y, lam, linear_term)
        bound = certificate(v)
    if bound <= tol:
        return v, bound
    raise ConvergenceError(f"softmax ERM: certified distance {bound:.3g} above tol={tol:.3g}")


def _inputs(x: object, y: object, num_classes: int, clip: bool) -> tuple[torch.Tensor, torch.Tensor]:
    xt = check_features(x, clip=clip)
    return xt, check_class_labels(y, num_classes=num_classes, n=xt.shape[0]).to(xt.device)


def softmax_output_perturbation(
    x: object,
    y: object,
    *,
    num_classes: int,
    epsilon: float,
    lam: float,
    generator: torch.Generator,
    clip: bool = False,
    solver_rtol: float = 1e-3,
    exact_noise: RandomSource | None = None,
) -> MultinomialModel:
    """ε-DP softmax head by output perturbation (module docstring).

    Args:
        x: features (n, d), rows with ||x|| <= 1 (or ``clip=True`` to project them onto the ball).
        y: class indices in [0, ``num_classes``).
        num_classes: C (public).
        epsilon: privacy parameter (replace one record).
        lam: regularisation λ.
        generator: source of the (floating-point) noise.
        solver_rtol: solver tolerance relative to the sensitivity (accounted for in the noise).
        exact_noise: release the C·d weights with exact discrete Laplace noise on a lattice drawn
            from this source (:func:`~pate_stab.privacy.noise.lattice.lattice_laplace`, ℓ2
            sensitivity Δ_W (1 + 2 rtol)) instead of float l2-Laplace noise from ``generator``;
            ``noise_scale`` is then the per-entry Laplace scale.

    References:
        Chaudhuri, Monteleoni & Sarwate 2011, Alg 1 and Cor 8 (ρ = √2 here); Canonne, Kamath &
        Steinke 2020, Alg 2 (the exact sampler of ``exact_noise``).
    """
    epsilon, lam = check_private_fit(epsilon=epsilon, lam=lam, generator=generator)
    solver_rtol = check_solver_rtol(solver_rtol)
    xt, yt = _inputs(x, y, num_classes, clip)
    n, d = xt.shape
    sensitivity = softmax_output_sensitivity(lam=lam, n=n)
    w, dist = solve_softmax_erm(xt, yt, num_classes=num_classes, lam=lam, tol=solver_rtol * sensitivity)
    if exact_noise is not None:
        release = lattice_laplace(w, l2_sensitivity=sensitivity * (1.0 + 2.0 * solver_rtol), epsilon=epsilon,
                                  source=exact_noise)  # fmt: skip
        mechanism = (
            f"softmax output perturbation (Chaudhuri et al. Alg 1), exact lattice Laplace (grid {release.grid:g})"
        )
        return MultinomialModel(release.values.to(w.device), epsilon, release.noise_scale, lam, dist, mechanism)
    scale = sensitivity * (1.0 + 2.0 * solver_rtol) / epsilon
    noise = l2_laplace_vector(scale, num_classes * d, generator=generator).to(xt.device).reshape(num_classes, d)
    mechanism = "softmax output perturbation (Chaudhuri et al. Alg 1)"
    return MultinomialModel(w + noise, epsilon, scale, lam, dist, mechanism)


def softmax_objective_perturbation(
    x: object,
    y: object,
    *,
    num_classes: int,
    epsilon: float,
    lam: float,
    generator: torch.Generator,
    clip: bool = False,
    solver_rtol: float = 1e-3,
) -> MultinomialModel:
    """ε-DP softmax head by objective perturbation (module docstring).

    Args: as :func:`softmax_output_perturbation`; the solver is asked for a certified distance
    of ``solver_rtol`` · 2√2 / (n(λ + Δ)) to the perturbed objective's minimiser.

    References:
        Chaudhuri, Monteleoni & Sarwate 2011, Alg 2 and Thm 9 (rank-(C − 1) Hessian here).
    """
    epsilon, lam = check_private_fit(epsilon=epsilon, lam=lam, generator=generator)
    solver_rtol = check_solver_rtol(solver_rtol)
    xt, yt = _inputs(x, y, num_classes, clip)
    n, d = xt.shape
    budget = softmax_objective_budget(epsilon=epsilon, lam=lam, n=n, num_classes=num_classes)
    scale = 2.0 * SOFTMAX_LIPSCHITZ / budget.epsilon_prime
    b = l2_laplace_vector(scale, num_classes * d, generator=generator).to(xt.device).reshape(num_classes, d)
    lam_total = lam + budget.extra_lam
    tol = solver_rtol * softmax_output_sensitivity(lam=lam_total, n=n)
    w, dist = solve_softmax_erm(xt, yt, num_classes=num_classes, lam=lam_total, linear_term=b / n, tol=tol)
    return MultinomialModel(
        w, epsilon, scale, lam_total, dist,
        f"softmax objective perturbation (Chaudhuri et al. Alg 2, eps'={budget.epsilon_prime:.4g}, "
        f"Delta={budget.extra_lam:.4g})",
    )  # fmt: skip
