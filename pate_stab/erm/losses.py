"""Losses of linear models, written as functions of the margin or prediction z = <w, x>.

Every loss here is a function ``phi(z, y)`` of the linear prediction ``z = <w, x>`` and the label,
so that for rows with ||x||_2 <= 1 the Lipschitz constant in w is the Lipschitz constant of phi in
z, and the smoothness constant in w is the bound c on |phi''| (Chaudhuri, Monteleoni, Sarwate 2011,
Sec. 3.2; Chaudhuri & Vinterbo 2013, Sec. 4.1). Each loss states:

* ``lipschitz(radius)``: the bound rho on |d phi / dz| over the predictions that can occur; for
  classification losses this does not depend on ``radius``; for the squared loss with
  ||w|| <= R, ||x|| <= 1 and |y| <= 1 it is 2(R + 1) (Wu et al. 2016, Sec. 4.2).
* ``smoothness``: the bound c on |phi''| (None when phi is not twice differentiable), the c of
  objective perturbation (Chaudhuri et al. 2011, Alg 2).
* ``convex``: the ramp loss is not, and is only a validation score (Chaudhuri & Vinterbo 2013,
  Sec. 4.1).

All arithmetic is float64 on the device of the inputs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from pate_stab._checks import check_positive

__all__ = [
    "Loss",
    "LogisticLoss",
    "HingeLoss",
    "HuberHingeLoss",
    "SquaredLoss",
    "RampLoss",
    "get_loss",
]


class Loss:
    """A loss phi(z, y) of the linear prediction z = <w, x>."""

    name: str = "loss"
    convex: bool = True
    differentiable: bool = True
    task: str = "classification"  # or "regression"

    def value(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """d phi / dz (a subgradient where phi has a kink)."""
        raise NotImplementedError

    def second_derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError(f"{self.name} is not twice differentiable")

    def lipschitz(self, radius: float | None = None) -> float:
        """Bound on |d phi / dz| for ||x|| <= 1 (and ||w|| <= radius where it matters)."""
        raise NotImplementedError

    @property
    def smoothness(self) -> float | None:
        """Bound c on |phi''| (None if phi is not twice differentiable)."""
        return None


@dataclass(frozen=True)
class LogisticLoss(Loss):
    """log(1 + exp(-y z)): 1-Lipschitz, c = 1/4 (Chaudhuri et al. 2011, Sec. 3.4.1)."""

    name = "logistic"

    def value(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.softplus(-y * z)

    def derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return -y * torch.sigmoid(-y * z)

    def second_derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        s = torch.sigmoid(y * z)
        return s * (1.0 - s)

    def lipschitz(self, radius: float | None = None) -> float:
        return 1.0

    @property
    def smoothness(self) -> float:
        return 0.25


@dataclass(frozen=True)
class HingeLoss(Loss):
    """max(0, 1 - y z): convex and 1-Lipschitz but not differentiable at y z = 1."""

    name = "hinge"
    differentiable = False

    def value(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1.0 - y * z, min=0.0)

    def derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.where(y * z < 1.0, -y, torch.zeros_like(z))

    def lipschitz(self, radius: float | None = None) -> float:
        return 1.0


@dataclass(frozen=True)
class HuberHingeLoss(Loss):
    """Huber-smoothed hinge with width h (Chaudhuri et al. 2011, Sec. 3.4.2, eq. (7)).

    phi = 0 for yz > 1 + h; (1 + h - yz)^2 / (4h) for |1 - yz| <= h; 1 - yz for yz < 1 - h.
    1-Lipschitz, c = 1/(2h).
    """

    h: float = 0.5
    name = "huber_hinge"

    def __post_init__(self) -> None:
        check_positive("h", self.h)

    def value(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = y * z
        quad = (1.0 + self.h - m) ** 2 / (4.0 * self.h)
        out = torch.where(m > 1.0 + self.h, torch.zeros_like(m), quad)
        return torch.where(m < 1.0 - self.h, 1.0 - m, out)

    def derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = y * z
        dm = torch.clamp(-(1.0 + self.h - m) / (2.0 * self.h), min=-1.0, max=0.0)
        return y * dm

    def second_derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = y * z
        inside = (m >= 1.0 - self.h) & (m <= 1.0 + self.h)
        return torch.where(inside, torch.full_like(m, 1.0 / (2.0 * self.h)), torch.zeros_like(m))

    def lipschitz(self, radius: float | None = None) -> float:
        return 1.0

    @property
    def smoothness(self) -> float:
        return 1.0 / (2.0 * self.h)


@dataclass(frozen=True)
class SquaredLoss(Loss):
    """(z - y)^2 for regression with |y| <= 1 (Wu et al. 2016, Sec. 4.2).

    Not Lipschitz on R^d: on the ball ||w|| <= R with ||x|| <= 1, |z| <= R and
    |d phi / dz| = 2|z - y| <= 2(R + 1). c = 2.
    """

    name = "squared"
    task = "regression"

    def value(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return (z - y) ** 2

    def derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return 2.0 * (z - y)

    def second_derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.full_like(z, 2.0)

    def lipschitz(self, radius: float | None = None) -> float:
        if radius is None or not math.isfinite(radius):
            raise ValueError(
                "the squared loss is Lipschitz only on a bounded ball: pass radius (R) so that rho = 2(R + 1)"
            )
        return 2.0 * (check_positive("radius", radius) + 1.0)

    @property
    def smoothness(self) -> float:
        return 2.0


@dataclass(frozen=True)
class RampLoss(Loss):
    """min(1, max(0, 1 - y z)): 1-Lipschitz, bounded by g* = 1, not convex.

    The validation score of Chaudhuri & Vinterbo 2013, Sec. 4.1 (used with Thm 4).
    """

    name = "ramp"
    convex = False
    differentiable = False

    def value(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.clamp(1.0 - y * z, min=0.0, max=1.0)

    def derivative(self, z: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        m = y * z
        return torch.where((m > 0.0) & (m < 1.0), -y, torch.zeros_like(z))

    def lipschitz(self, radius: float | None = None) -> float:
        return 1.0


_LOSSES: dict[str, type[Loss]] = {
    "logistic": LogisticLoss,
    "hinge": HingeLoss,
    "huber_hinge": HuberHingeLoss,
    "squared": SquaredLoss,
    "ramp": RampLoss,
}


def get_loss(loss: str | Loss) -> Loss:
    """A loss instance from its name (``logistic``, ``hinge``, ``huber_hinge``, ``squared``,
    ``ramp``) or the instance itself."""
    if isinstance(loss, Loss):
        return loss
    if not isinstance(loss, str):
        raise TypeError(f"loss must be a name or a Loss, got {type(loss).__name__}")
    if loss not in _LOSSES:
        raise ValueError(f"loss must be one of {sorted(_LOSSES)}, got {loss!r}")
    return _LOSSES[loss]()
