"""Model inversion of a linear dose model (Fredrikson et al. 2014, as used by Wu et al. 2016,
Sec. 5.3).

The attacker knows a released linear model w, a patient's other attributes, the patient's true
(stable) dose y, the residual standard deviation sigma of the model, and the marginal
distribution p(v) of the sensitive attribute (here the VKORC1 genotype). For each candidate value
v it fills in the attribute's encoding and scores

    log p(v) - (y - <w, x(v)>)^2 / (2 sigma^2),

the log of p(v) times a Gaussian likelihood of the observed dose; it guesses the best-scoring v.
Attack accuracy is the fraction of patients whose value is guessed correctly.
"""

from __future__ import annotations

import torch

from pate_stab._checks import check_positive, check_tensor

__all__ = ["invert_attribute", "inversion_accuracy"]

_DTYPE = torch.float64


def invert_attribute(
    weights: torch.Tensor,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    columns: list[int],
    encodings: torch.Tensor,
    prior: torch.Tensor,
    sigma: float,
) -> torch.Tensor:
    """Guess the sensitive attribute of each row (Fredrikson et al. 2014, Sec. 4).

    Args:
        weights: the model w, shape (d,).
        x: feature rows (n, d); the entries in ``columns`` are ignored (overwritten per candidate).
        y: observed targets (n,), on the model's scale.
        columns: the feature columns that encode the sensitive attribute.
        encodings: (K, len(columns)) the encoding of each of the K candidate values, on the same
            (scaled) feature scale as ``x``.
        prior: (K,) marginal probabilities of the K values (positive).
        sigma: residual standard deviation of the model (> 0).

    Returns:
        (n,) int64 index of the guessed value.
    """
    w = check_tensor("weights", weights, ndim=1).to(_DTYPE)
    xt = check_tensor("x", x, ndim=2).to(_DTYPE)
    yt = check_tensor("y", y, ndim=1).to(_DTYPE)
    enc = check_tensor("encodings", encodings, ndim=2).to(_DTYPE)
    p = check_tensor("prior", prior, ndim=1).to(_DTYPE)
    sigma = check_positive("sigma", sigma)
    if enc.shape != (p.numel(), len(columns)):
        raise ValueError(f"encodings must have shape ({p.numel()}, {len(columns)}), got {tuple(enc.shape)}")
    if not bool((p > 0).all()):
        raise ValueError("prior must be positive")
    cols = torch.tensor(columns, dtype=torch.long)
    base = xt.clone()
    base[:, cols] = 0.0
    pred = (base @ w).unsqueeze(1) + (enc @ w[cols]).unsqueeze(0)  # (n, K)
    score = torch.log(p).unsqueeze(0) - (yt.unsqueeze(1) - pred) ** 2 / (2.0 * sigma**2)
    return torch.argmax(score, dim=1)


def inversion_accuracy(guess: torch.Tensor, truth: torch.Tensor) -> float:
    """Fraction of rows whose sensitive value was guessed correctly."""
    return float((guess.cpu() == truth.cpu()).to(_DTYPE).mean())
