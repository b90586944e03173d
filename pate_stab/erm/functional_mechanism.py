"""The Functional Mechanism for linear regression (Zhang et al. 2012), as Wu et al. 2016 compare with it.

Source: J. Zhang, Z. Zhang, X. Xiao, Y. Yang, M. Winslett, "Functional Mechanism: Regression
Analysis under Differential Privacy", PVLDB 5(11), 2012: Algorithm 1 (perturb the coefficients
of the polynomial objective), Lemma 1 (its sensitivity), Sec. 4.1 (linear regression) and
Sec. 5 (unbounded noisy objectives: regularisation and spectral trimming). Wu et al. 2016
(papers/wu-et-al-2016-revisiting-private-regression.txt, Sec. 1 and 5, their [33]) use it as
the baseline of Fig. 1, 3, 5 ("Oracle 1.82 vs the functional mechanism's 22.57 at ε = 0.2").
Zhang et al.'s text is not in papers/; the formulas below are derived here and match its
published linear-regression sensitivity 2(d² + 2d + 1).

Objective. The least-squares loss of a data set, f_D(w) = Σ_i (y_i − x_iᵀw)², is a polynomial
in w with one coefficient per monomial:

    f_D(w) = Σ_i y_i²  +  Σ_j (−2 Σ_i y_i x_ij) w_j  +  Σ_{j<=l} c_jl w_j w_l,
    c_jj = Σ_i x_ij²,  c_jl = 2 Σ_i x_ij x_il  (j < l).

Algorithm 1 releases every coefficient plus independent Lap(Δ/ε) noise, and returns the
minimiser of the noisy polynomial (post-processing).

Sensitivity (Lemma 1). Replacing record t by t' changes the coefficient vector by
λ(t) − λ(t'), whose ℓ1 norm is at most ‖λ(t)‖₁ + ‖λ(t')‖₁ ≤ 2 max_t ‖λ(t)‖₁. For one record

    ‖λ(t)‖₁ = y² + 2|y| Σ_j |x_j| + Σ_j x_j² + Σ_{j<l} 2|x_j x_l| = (|y| + ‖x‖₁)²,

so Δ = 2 (1 + B)² with B a public bound on ‖x‖₁ and |y| <= 1. Zhang et al. take |x_j| <= 1,
i.e. B = d: Δ = 2(1 + d)² = 2(d² + 2d + 1) (``constant="paper"``, the default, as Wu et al.
compare with it). Rows in the unit ℓ2 ball (the contract of :mod:`pate_stab.erm.contract`)
have ‖x‖₁ <= √d, so Δ = 2(1 + √d)² is also valid (``constant="l2"``). The bound is
conservative by up to 2 (the triangle inequality): in d = 1 the largest change of the
coefficient vector is 4 = Δ/2 (y x = 1 against y x = −1), so noise for 2ε is still ε-DP on
every pair; the privacy test uses a mutation that errs by more than that.

Minimiser (Sec. 5, spectral trimming). The noisy quadratic form Q (Q_jj = c̃_jj,
Q_jl = Q_lj = c̃_jl / 2) need not be positive definite, and the noisy objective is then
unbounded below. ``ridge`` >= 0 (a public constant, the regularisation of Sec. 5) is added to
Q's diagonal; Q = V diag(μ) Vᵀ is then trimmed to its eigen-directions with μ_k > 0 and
w = −½ Σ_{μ_k > 0} (v_kᵀ b̃ / μ_k) v_k minimises the objective on their span (b̃ = the noisy
linear coefficients). Both steps use only the released coefficients and public constants, so
the model is ε-DP. Zhang et al. also rerun the mechanism when the trimmed objective is
unbounded; that would spend more budget and is not done here.

Neighbouring relation: replace one record; rows with ‖x‖₂ <= 1 and |y| <= 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pate_stab._checks import check_epsilon, check_generator, check_int, check_nonnegative
from pate_stab.erm.contract import check_features, check_labels
from pate_stab.privacy.noise.seeded import laplace

__all__ = [
    "FunctionalMechanismModel",
    "functional_mechanism",
    "functional_mechanism_samples",
    "functional_mechanism_sensitivity",
    "linear_regression_coefficients",
    "noisy_quadratic_minimiser",
]

_DTYPE = torch.float64
_CONSTANTS = ("paper", "l2")


@dataclass(frozen=True)
class FunctionalMechanismModel:
    """A model released by the Functional Mechanism.

    Attributes:
        weights: the minimiser of the noisy objective after spectral trimming, shape (d,).
        coefficients: the released noisy coefficients (constant, d linear, d(d+1)/2 quadratic
            in the order of :func:`linear_regression_coefficients`).
        epsilon: the pure-DP guarantee (replace one record).
        sensitivity: Δ, the ℓ1 sensitivity of the coefficient vector used for the noise.
        noise_scale: Δ/ε, the Laplace scale of each coefficient's noise.
        kept_directions: eigen-directions of the noisy quadratic form kept by the trimming.
    """

    weights: torch.Tensor
    coefficients: torch.Tensor
    epsilon: float
    sensitivity: float
    noise_scale: float
    kept_directions: int


def functional_mechanism_sensitivity(d: int, *, constant: str = "paper") -> float:
    """Δ = 2(1 + B)² (module docstring): B = d (Zhang et al., |x_j| <= 1) or √d (``"l2"``).

    Pinned example: d = 1 gives 8; d = 17 gives 2·18² = 648 (paper) and 2(1 + √17)² ≈ 52.5 (l2).
    """
    d = check_int("d", d, minimum=1)
    if constant not in _CONSTANTS:
        raise ValueError(f"constant must be one of {_CONSTANTS}, got {constant!r}")
    bound = float(d) if constant == "paper" else math.sqrt(d)
    return 2.0 * (1.0 + bound) ** 2


def linear_regression_coefficients(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """The monomial coefficients of Σ_i (y_i − x_iᵀw)²: [Σy², −2Σ y x_j (j), c_jl (j <= l)].

    The quadratic coefficients are in ``torch.triu_indices(d, d)`` order (row-major, j <= l),
    with c_jj = Σ x_ij² and c_jl = 2 Σ x_ij x_il for j < l.
    """
    x, y = torch.as_tensor(x, dtype=_DTYPE), torch.as_tensor(y, dtype=_DTYPE)
    d = x.shape[1]
    gram = x.T @ x
    rows, cols = torch.triu_indices(d, d)
    quad = gram[rows, cols] * torch.where(rows == cols, 1.0, 2.0).to(gram.dtype)
    return torch.cat([(y * y).sum().reshape(1), -2.0 * (x.T @ y), quad])


def functional_mechanism_samples(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    num_samples: int,
    generator: torch.Generator,
    constant: str = "paper",
) -> torch.Tensor:
    """``num_samples`` independent releases of the noisy coefficients, shape (num_samples, K).

    K = 1 + d + d(d+1)/2; each entry gets Lap(Δ/ε) (Algorithm 1). One sample is what
    :func:`functional_mechanism` releases with the same generator.
    """
    eps = check_epsilon(epsilon)
    num_samples = check_int("num_samples", num_samples, minimum=1)
    check_generator(generator)
    x = check_features(x)
    y = check_labels(y, task="regression", n=x.shape[0])
    coef = linear_regression_coefficients(x, y)
    scale = functional_mechanism_sensitivity(x.shape[1], constant=constant) / eps
    return coef + laplace(scale, (num_samples, coef.numel()), generator=generator)


def noisy_quadratic_minimiser(coefficients: torch.Tensor, d: int, *, ridge: float = 0.0) -> tuple[torch.Tensor, int]:
    """Minimiser of the released polynomial after regularisation and spectral trimming (Sec. 5).

    Returns (w, number of eigen-directions kept). Directions with μ_k <= 1e-12·max|μ| are
    dropped (the objective is flat or unbounded along them); w is 0 along them.
    """
    ridge = check_nonnegative("ridge", ridge)
    coefficients = coefficients.to(_DTYPE)
    lin = coefficients[1 : 1 + d]
    quad = coefficients[1 + d :]
    rows, cols = torch.triu_indices(d, d)
    q = torch.zeros((d, d), dtype=_DTYPE)
    q[rows, cols] = torch.where(rows == cols, quad, quad / 2.0)
    q = torch.triu(q, 1).T + torch.triu(q)  # symmetric
    q = q + ridge * torch.eye(d, dtype=_DTYPE)
    mu, v = torch.linalg.eigh(q)
    keep = mu > 1e-12 * float(mu.abs().max().clamp_min(1e-300))
    vk = v[:, keep]
    w = -0.5 * vk @ ((vk.T @ lin) / mu[keep])
    return w, int(keep.sum())


def functional_mechanism(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
    constant: str = "paper",
    ridge: float = 0.0,
) -> FunctionalMechanismModel:
    """ε-DP linear regression by the Functional Mechanism (Zhang et al. 2012, Alg 1; Sec. 4.1, 5).

    Args:
        x: features (n, d) with ‖x_i‖₂ <= 1 (checked: an error, nothing released, otherwise).
        y: targets with |y_i| <= 1.
        epsilon: the privacy parameter ε > 0.
        generator: randomness for the Laplace noise.
        constant: ``"paper"`` (Δ = 2(1 + d)², Zhang et al.) or ``"l2"`` (Δ = 2(1 + √d)²).
        ridge: public regularisation added to the noisy quadratic form before trimming.

    Returns:
        :class:`FunctionalMechanismModel`.
    """
    noisy = functional_mechanism_samples(x, y, epsilon=epsilon, num_samples=1, generator=generator, constant=constant)[
        0
    ]
    d = int(torch.as_tensor(x).shape[1])
    w, kept = noisy_quadratic_minimiser(noisy, d, ridge=ridge)
    sens = functional_mechanism_sensitivity(d, constant=constant)
    return FunctionalMechanismModel(w, noisy, float(epsilon), sens, sens / float(epsilon), kept)
