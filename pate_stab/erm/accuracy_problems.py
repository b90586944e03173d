"""The two ERM problems of Ligett et al. 2017 (§3, App. A.3–A.4): data contract, losses, minimisers,
sensitivities.

Both take n records (x_i, y_i) with ||x_i||_1 <= 1 (the paper's contract: ℓ1, not ℓ2) and

* ridge: L(θ) = (1/2n) ||y − Xθ||² + (λ/2)||θ||², |y_i| <= 1, over C = {||θ||_2 <= M = √(1/λ)}
  (Lemma A.4: the unconstrained minimiser lies in C);
* logistic: L(θ) = (1/n) Σ log(1 + exp(−y_i <θ, x_i>)) + (λ/2)||θ||², y_i ∈ {−1, 1}; the
  minimiser is unconstrained and lies in C = {||θ||_2 <= M = √(2 log 2 / λ)} (Claim A.11).

Neighbouring relation: replace one record (their §2.1).

Sensitivities (all under replace-one, for records in the contract):

* Lemma A.6: ||XᵀX − X'ᵀX'||_1 <= 2 and ||Xᵀy − X'ᵀy'||_1 <= 2 (entrywise ℓ1).
* Claim A.5 (ridge excess-risk query f(D) = L(θ*, D) − L(θ, D), θ ∈ C fixed):
  |f(D) − f(D')| <= (M + 1)² / n, since one record's loss ½(y − <θ, x>)² lies in [0, (M+1)²/2]
  and both the loss at θ and the minimum over C move by at most half that.
* Alg 5 / Claim A.12 (logistic excess-risk query, θ ∈ C): one record's loss lies in
  [log(1 + e^{−M}), log(1 + e^{M})], a range of log((1 + e^M)/(1 + e^{−M})) = M, so
  |f(D) − f(D')| <= 2 log((1 + e^M)/(1 + e^{−M})) / n = 2M/n.
* Lemma A.10 (logistic minimiser): ||θ*(D) − θ*(D')||_1 <= 2√p / (nλ) (||·||_2 <= 2/(nλ),
  Chaudhuri et al. 2011 Cor. 8, and ||a||_1 <= √p ||a||_2).

The exact minimisers come from :func:`pate_stab.erm.solver.solve_erm`, which certifies
||θ_tol − θ*|| <= tol; the sensitivities used for noise add the solver's slack (2√p·tol for the
ℓ1 sensitivity of θ*, and twice the error of the computed minimum value in a query).
"""

from __future__ import annotations

import math

import torch

from pate_stab._checks import check_positive, check_tensor
from pate_stab.erm.solver import solve_erm

__all__ = ["check_l1_features", "RidgeProblem", "LogisticProblem"]

_DTYPE = torch.float64
_NORM_SLACK = 1e-12


def check_l1_features(x: object, *, name: str = "x") -> torch.Tensor:
    """Rows of ``x`` as float64 with ||x_i||_1 <= 1 (Ligett et al. §3 contract).

    Raises:
        ValueError: NaN/inf, or a row with ||x_i||_1 > 1 (rescale with a data-independent bound).
    """
    x = check_tensor(name, x, ndim=2).to(_DTYPE)
    norms = x.abs().sum(dim=1)
    bad = norms > 1.0 + _NORM_SLACK
    if bool(bad.any()):
        raise ValueError(
            f"{name}: {int(bad.sum())} rows have ||x||_1 > 1 (largest {float(norms.max()):.4g}); "
            "Ligett et al. 2017 need every row with ||x_i||_1 <= 1. Divide by a public, "
            "data-independent ℓ1 bound."
        )
    return x


def _check_targets(y: object, n: int, *, classification: bool) -> torch.Tensor:
    y = check_tensor("y", y, ndim=1).to(_DTYPE)
    if y.shape[0] != n:
        raise ValueError(f"y must have {n} entries (one per row of x), got {y.shape[0]}")
    if classification:
        bad = (y != 1.0) & (y != -1.0)
        if bool(bad.any()):
            raise ValueError(f"y: labels must be in {{-1, 1}}; found {int(bad.sum())} other values")
    elif bool((y.abs() > 1.0).any()):
        raise ValueError(f"y: {int((y.abs() > 1.0).sum())} targets have |y| > 1; the analysis needs |y| <= 1")
    return y


class RidgeProblem:
    """Ridge regression of Ligett et al. §3.1 on fixed data; see the module docstring.

    Args:
        x: (n, p) with ||x_i||_1 <= 1.
        y: (n,) with |y_i| <= 1.
        lam: λ > 0.
        tol: certified distance of the computed θ* to the exact minimiser over C.
    """

    kind = "ridge"

    def __init__(self, x: object, y: object, *, lam: float, tol: float = 1e-10) -> None:
        self.x = check_l1_features(x)
        self.n, self.p = self.x.shape
        self.y = _check_targets(y, self.n, classification=False)
        self.lam = check_positive("lam", lam)
        self.tol = check_positive("tol", tol)
        self.radius = math.sqrt(1.0 / self.lam)  # M of C
        self.gram = self.x.T @ self.x  # XᵀX (p, p)
        self.xty = self.x.T @ self.y  # Xᵀy (p,)
        self.yty = float(self.y @ self.y)
        # (1/n)Σ(z − y)² + (2λ/2)||θ||² = 2 L(θ): same minimiser over C.
        res = solve_erm(self.x, self.y, loss="squared", lam=2.0 * self.lam, radius=self.radius, tol=self.tol)
        self.theta_star = res.weights
        self.loss_star = float(self.loss(self.theta_star))

    @property
    def query_sensitivity(self) -> float:
        """Δ of the excess-risk query (Claim A.5) plus the solver's slack on L(θ*)."""
        # |L(θ_tol) − L(θ*)| <= G tol + (β/2) tol² with ||∇L|| <= G = (M + 1) + λM on C and
        # β = 1 + λ (||x||_2 <= 1); both neighbours' minima carry that error.
        grad = self.radius + 1.0 + self.lam * self.radius
        slack = 2.0 * (grad * self.tol + 0.5 * (1.0 + self.lam) * self.tol**2)
        return (self.radius + 1.0) ** 2 / self.n + slack

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """L(θ) for θ of shape (..., p), from the sufficient statistics (exact)."""
        theta = theta.to(_DTYPE)
        quad = torch.einsum("...i,ij,...j->...", theta, self.gram, theta)
        lin = theta @ self.xty
        return (quad - 2.0 * lin + self.yty) / (2.0 * self.n) + 0.5 * self.lam * (theta * theta).sum(-1)

    def excess_risk(self, theta: torch.Tensor) -> torch.Tensor:
        """L(θ) − L(θ*) (non-private: for evaluation and for the private test's query values)."""
        return self.loss(theta) - self.loss_star


class LogisticProblem:
    """ℓ2-regularized logistic regression of Ligett et al. §3.2 / App. A.4.

    Args:
        x: (n, p) with ||x_i||_1 <= 1.
        y: (n,) in {−1, 1}.
        lam: λ > 0.
        tol: certified distance of the computed θ* to the exact (unconstrained) minimiser.
    """

    kind = "logistic"

    def __init__(self, x: object, y: object, *, lam: float, tol: float = 1e-10) -> None:
        self.x = check_l1_features(x)
        self.n, self.p = self.x.shape
        self.y = _check_targets(y, self.n, classification=True)
        self.lam = check_positive("lam", lam)
        self.tol = check_positive("tol", tol)
        self.radius = math.sqrt(2.0 * math.log(2.0) / self.lam)  # M of Claim A.11
        res = solve_erm(self.x, self.y, loss="logistic", lam=self.lam, tol=self.tol)
        self.theta_star = res.weights
        self.loss_star = float(self.loss(self.theta_star))

    @property
    def minimiser_sensitivity(self) -> float:
        """ℓ1 sensitivity of θ* (Lemma A.10) plus the solver's slack 2√p·tol."""
        return 2.0 * math.sqrt(self.p) / (self.n * self.lam) + 2.0 * math.sqrt(self.p) * self.tol

    @property
    def query_sensitivity(self) -> float:
        """Δ of the excess-risk query (Alg 5): 2 log((1+e^M)/(1+e^{−M}))/n, plus solver slack."""
        m = self.radius
        log_ratio = math.log1p(math.exp(m)) - math.log1p(math.exp(-m))
        return 2.0 * log_ratio / self.n + (0.25 + self.lam) * self.tol**2

    def loss(self, theta: torch.Tensor) -> torch.Tensor:
        """L(θ) for θ of shape (..., p)."""
        theta = theta.to(_DTYPE)
        z = theta @ self.x.T  # (..., n)
        data = torch.nn.functional.softplus(-self.y * z).mean(-1)
        return data + 0.5 * self.lam * (theta * theta).sum(-1)

    def excess_risk(self, theta: torch.Tensor) -> torch.Tensor:
        """L(θ) − L(θ*) (non-private)."""
        return self.loss(theta) - self.loss_star
