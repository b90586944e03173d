"""Privately-Tuned Output Perturbation (Wu et al. 2016, Sec. 4.2 and Alg 5) with the paper's grids R1 and R2.

Source: papers/wu-et-al-2016-revisiting-private-regression.txt, Sec. 4.2 "Privately-Tuned
Output/Objective Perturbation" and Algorithm 5. The grid is R × Λ with Λ = {0.002·2^j,
j = 0..7} (k = 8) and either R1 = {.25, .5, 1} or R2 = {.5, 1, 2} (l = 3), so m = 24 models,
each trained by rls-out (Alg 4, printed noise constant 12R + 8) at ε on its own chunk of the
training data; one chunk S' is held out, and a model is chosen by the exponential mechanism at
ε on u(w) = −L_{S'}(w), the mean squared error on S'.

Privacy: the m + 1 chunks are disjoint, so one record changes one model (ε, rls-out) or the
utilities (ε, exponential mechanism): the release is ε-DP by parallel composition, provided
the utility sensitivity bounds the change of the mean loss on S'. Each noisy model is projected
onto its ball ‖w‖ <= R_i (post-processing), so each squared error is at most (R_max + 1)² and
the change of the mean loss on S' at most (R_max + 1)²/|S'|.

Utility sensitivity (``utility``):

* ``"exact"`` (default): (max_i ‖w_i‖ + 1)²/|S'| from the released models (they do not depend
  on S'; :func:`pate_stab.erm.validation.wu_private_tuning`'s default).
* ``"printed"``: Alg 5's Δ(u) <= R² with R = max R, i.e. p(w_i) ∝ exp(−L_{S'}(w_i) ε / (2R²)):
  exp(−Lε/2) for R1 and exp(−Lε/8) for R2, as Sec. 4.2 prints. It bounds the true sensitivity
  only when |S'| >= (R + 1)²/R²; smaller validation chunks are refused with an error before
  anything is trained.
"""

from __future__ import annotations

import math
from functools import partial

import torch

from pate_stab._checks import check_epsilon, check_generator, check_real
from pate_stab.erm.contract import check_features, check_labels
from pate_stab.erm.output_perturbation import rls_out
from pate_stab.erm.validation import wu_private_tuning

__all__ = ["WU_RADIUS_GRIDS", "WU_LAMBDA_GRID", "wu_tuned_grid", "wu_tuned_output_perturbation"]

WU_RADIUS_GRIDS: dict[str, tuple[float, ...]] = {"R1": (0.25, 0.5, 1.0), "R2": (0.5, 1.0, 2.0)}
WU_LAMBDA_GRID: tuple[float, ...] = tuple(0.002 * 2**j for j in range(8))


def wu_tuned_grid(radii: str) -> list[tuple[float, float]]:
    """The (R, λ) pairs of Sec. 4.2 for the radius grid ``"R1"`` or ``"R2"`` (24 pairs)."""
    if radii not in WU_RADIUS_GRIDS:
        raise ValueError(f"radii must be one of {sorted(WU_RADIUS_GRIDS)}, got {radii!r}")
    return [(r, lam) for r in WU_RADIUS_GRIDS[radii] for lam in WU_LAMBDA_GRID]


def _rls_out_projected(
    r: float, lam: float, xs: torch.Tensor, ys: torch.Tensor, eps: float, g: torch.Generator, *, rate: float = 1.0
) -> torch.Tensor:
    """rls-out (printed constant) on one chunk, projected onto ‖w‖ <= R (post-processing).

    ``rate`` < 1 trains on a uniform subset of ⌈rate·|chunk|⌉ records of the chunk (Fig. 7).
    """
    if rate < 1.0:
        keep = torch.randperm(xs.shape[0], generator=g, device=g.device).cpu()[: max(1, math.ceil(rate * xs.shape[0]))]
        xs, ys = xs[keep], ys[keep]
    w = rls_out(xs, ys, epsilon=eps, lam=lam, radius=r, generator=g, constant="paper").weights
    norm = float(torch.linalg.vector_norm(w))
    return w * min(1.0, r / norm) if norm > 0 else w


def wu_tuned_output_perturbation(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
    radii: str = "R1",
    utility: str = "exact",
    grid: list[tuple[float, float]] | None = None,
    chunk_rate: float = 1.0,
) -> tuple[tuple[float, float], torch.Tensor]:
    """ε-DP Tuned Output Perturbation (Wu et al. 2016, Alg 5 over rls-out; module docstring).

    Args:
        x, y: training data, ‖x_i‖₂ <= 1 and |y_i| <= 1 (checked before anything is trained).
        epsilon: ε > 0 for each chunk model and for the selection (ε-DP overall).
        generator: randomness (chunk permutation, model noise, selection).
        radii: ``"R1"`` or ``"R2"`` (Sec. 4.2).
        utility: ``"exact"`` or ``"printed"`` utility sensitivity.
        grid: the (R, λ) pairs; default :func:`wu_tuned_grid` (``radii``).
        chunk_rate: each model trains on a uniform subset of this share of its chunk (Fig. 7's
            rate r; 1 = the whole chunk). A subset of the chunk: the privacy argument is unchanged.

    Returns:
        ((R, λ) of the chosen model, its weights).
    """
    eps = check_epsilon(epsilon)
    check_generator(generator)
    rate = check_real("chunk_rate", chunk_rate, low=0.0, high=1.0, low_inclusive=False)
    x = check_features(x)
    y = check_labels(y, task="regression", n=x.shape[0])
    params = list(grid) if grid is not None else wu_tuned_grid(radii)
    if not params:
        raise ValueError("grid must not be empty")
    if utility not in ("exact", "printed"):
        raise ValueError(f"utility must be 'exact' or 'printed', got {utility!r}")
    sensitivity = None
    if utility == "printed":
        r_max = max(r for r, _ in params)
        val_size = x.shape[0] // (len(params) + 1)  # tensor_split: the last chunk is the smallest
        if val_size < 1 or (r_max + 1.0) ** 2 / val_size > r_max**2:
            raise ValueError(
                f"the printed utility sensitivity R² = {r_max**2:g} is below the true bound "
                f"(R + 1)²/|S'| with |S'| = {val_size}; use utility='exact' or more data"
            )
        sensitivity = r_max**2
    i, w = wu_private_tuning(
        params,
        partial(_rls_out_projected, rate=rate),
        x,
        y,
        epsilon=eps,
        generator=generator,
        utility_sensitivity=sensitivity,
    )
    return params[i], w
