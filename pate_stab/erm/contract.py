"""The input contract of the private ERM learners: rows in the unit ball, bounded labels.

Every privacy bound in this package (sensitivity 2 rho / (lam n), the smoothness condition of
objective perturbation, the stability constants of validation) assumes ||x_i||_2 <= 1 and
y_i in {-1, 1} (classification) or |y_i| <= 1 (regression). These bounds are arguments of the
analysis, never read from the data (DESIGN.md, privacy fact 6). Data that violates them is
rejected with a ValueError naming the parameter, unless the caller asks for ``clip=True``:

* rows with ||x|| > 1 are scaled back onto the unit sphere and regression targets clamped to
  [-1, 1]: a fixed, data-independent map applied to each record separately, so it is
  post-processing of each record and needs no warning;
* classification labels outside {-1, 1} are never "clipped" (there is no sensible map);
* :func:`scale_to_unit_ball` with ``norm_bound=None`` divides by the largest row norm of the
  data: the bound comes from the data, which leaks, so it emits ``PrivacyLeakWarning``.
"""

from __future__ import annotations

import torch

from pate_stab._checks import (
    check_epsilon,
    check_generator,
    check_positive,
    check_real,
    check_tensor,
    warn_privacy_leak,
)

__all__ = [
    "check_features",
    "check_labels",
    "check_inputs",
    "check_private_fit",
    "check_solver_rtol",
    "scale_to_unit_ball",
]

_DTYPE = torch.float64
# Rows whose norm exceeds 1 by less than this (float rounding after a normalisation) pass.
_NORM_SLACK = 1e-12


def check_features(x: object, *, clip: bool = False, name: str = "x") -> torch.Tensor:
    """Rows of ``x`` as float64 with ||x_i||_2 <= 1.

    Raises:
        ValueError: NaN/inf entries, or a row outside the unit ball when ``clip`` is False.
    """
    x = check_tensor(name, x, ndim=2).to(_DTYPE)
    norms = torch.linalg.vector_norm(x, dim=1)
    outside = norms > 1.0 + _NORM_SLACK
    if bool(outside.any()):
        if not clip:
            raise ValueError(
                f"{name}: {int(outside.sum())} rows have ||x||_2 > 1 (largest "
                f"{float(norms.max()):.4g}); the privacy analysis needs every row in the unit "
                "ball. Rescale with a data-independent bound, or pass clip=True to project "
                "each row onto the ball."
            )
        x = x / torch.clamp(norms, min=1.0).unsqueeze(1)
    return x


def check_labels(y: object, *, task: str, n: int, clip: bool = False, name: str = "y") -> torch.Tensor:
    """Labels as float64: in {-1, 1} for ``task="classification"``, |y| <= 1 for regression.

    Raises:
        ValueError: wrong length, NaN/inf, labels outside {-1, 1}, or targets outside [-1, 1]
            when ``clip`` is False.
    """
    y = check_tensor(name, y, ndim=1).to(_DTYPE)
    if y.shape[0] != n:
        raise ValueError(f"{name} must have {n} entries (one per row of x), got {y.shape[0]}")
    if task == "classification":
        bad = (y != 1.0) & (y != -1.0)
        if bool(bad.any()):
            raise ValueError(
                f"{name}: labels must be in {{-1, 1}}; found {int(bad.sum())} other values, e.g. {float(y[bad][0])}"
            )
        return y
    if task != "regression":
        raise ValueError(f"task must be 'classification' or 'regression', got {task!r}")
    bad = y.abs() > 1.0
    if bool(bad.any()):
        if not clip:
            raise ValueError(
                f"{name}: {int(bad.sum())} regression targets have |y| > 1; the analysis needs "
                "|y| <= 1. Rescale with a data-independent bound, or pass clip=True."
            )
        y = y.clamp(-1.0, 1.0)
    return y


def scale_to_unit_ball(x: object, *, norm_bound: float | None = None) -> torch.Tensor:
    """Divide ``x`` by ``norm_bound`` and project rows onto the unit ball.

    With ``norm_bound=None`` the bound is the largest row norm of ``x`` itself: that reads a
    bound from the (private) data, so a ``PrivacyLeakWarning`` is emitted.
    """
    x = check_tensor("x", x, ndim=2).to(_DTYPE)
    if norm_bound is None:
        warn_privacy_leak(
            "scale_to_unit_ball: norm_bound read from the data (largest row norm); this leaks "
            "information about the records and is not covered by the privacy guarantee. Pass "
            "a data-independent norm_bound."
        )
        norm_bound = float(torch.linalg.vector_norm(x, dim=1).max())
        if norm_bound == 0.0:
            return x
    norm_bound = check_positive("norm_bound", norm_bound)
    return check_features(x / norm_bound, clip=True)


def check_inputs(x: object, y: object, *, task: str, clip: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Features and labels under the contract above: ``(x, y)`` as float64, ``y`` on ``x``'s device."""
    xt = check_features(x, clip=clip)
    return xt, check_labels(y, task=task, n=xt.shape[0], clip=clip).to(xt.device)


def check_private_fit(*, epsilon: float, lam: float, generator: torch.Generator) -> tuple[float, float]:
    """The arguments every ε-DP ERM head checks first: ε > 0, λ > 0 and the noise's generator.

    Returns:
        ``(epsilon, lam)`` as floats.
    """
    epsilon = check_epsilon(epsilon)
    lam = check_positive("lam", lam)
    check_generator(generator)
    return epsilon, lam


def check_solver_rtol(value: object) -> float:
    """The solver tolerance relative to the sensitivity, in (0, 0.01] (its error is added to the noise)."""
    return check_real("solver_rtol", value, low=0.0, high=0.01, low_inclusive=False)
