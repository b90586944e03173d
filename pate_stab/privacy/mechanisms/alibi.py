"""ALIBI's label release: Laplace noise on the one-hot label, exact, and its Bayesian posterior.

Source: Malek, Mironov, Prasad, Shilov & Tramèr 2021, "Antipodes of Label Differential Privacy:
PATE and ALIBI" (NeurIPS), Sec. 3 (ALIBI: Additive Laplace with Iterative Bayesian Inference). Each
private label y ∈ {0, …, C − 1} is released as its one-hot vector plus Laplace noise; a learner
trains on the posterior P[y = c | noisy vector] (soft labels), which is post-processing.

Here the one-hot vector is scaled to M·e_y with M = :data:`ALIBI_RESOLUTION` and the noise is exact
discrete Laplace on ℤ^C (Canonne, Kamath & Steinke 2020, Alg 2;
:func:`~pate_stab.privacy.noise.discrete.discrete_laplace`), so the release is an integer vector
and no floating-point sample is published.

Privacy. Replacing one label y by y' changes M·e_y by M in two coordinates: ℓ1 sensitivity 2M.
With independent discrete Laplace of scale t ≥ 2M/ε on each coordinate, P[z | y]/P[z | y'] =
exp((|z_y| − |z_y − M| + |z_{y'} − M| − |z_{y'}|)/t) ≤ e^{2M/t} ≤ e^ε (the ℓ1 Laplace mechanism;
Dwork & Roth 2014, Thm 3.6, on ℤ^C). Labels released once each are ε-DP when one label changes
(parallel composition): ε-label-DP. t is the smallest multiple of 2^-20 at or above 2M/ε
(:func:`~pate_stab.privacy.noise.discrete.exact_scale_at_least`).

Posterior (Malek et al. Sec. 3.2, with the discrete Laplace likelihood): only coordinate c of the
mean differs between y = c and the others, so P[y = c | z] ∝ π_c · exp((|z_c| − |z_c − M|)/t) for a
prior π (uniform by default; a prior computed from the released vectors and public data is
post-processing too).
"""

from __future__ import annotations

from fractions import Fraction

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_positive
from pate_stab.privacy.accounting.events import PureDpEvent
from pate_stab.privacy.noise.discrete import RandomSource, discrete_laplace, exact_scale_at_least

__all__ = ["ALIBI_RESOLUTION", "alibi_scale", "alibi_release", "alibi_posterior", "alibi_event"]

ALIBI_RESOLUTION = 16
"""M: the one-hot label is released as M·e_y + noise on ℤ^C (the grid's resolution, fixed in advance)."""


def alibi_scale(epsilon: float, resolution: int = ALIBI_RESOLUTION) -> Fraction:
    """The discrete Laplace scale t ≥ 2M/ε (an exact rational) of ALIBI's release at ε."""
    epsilon = check_positive("epsilon", epsilon)
    resolution = check_int("resolution", resolution, minimum=1)
    return exact_scale_at_least(2 * resolution / epsilon)


def alibi_release(
    labels: Tensor,
    num_classes: int,
    epsilon: float,
    *,
    resolution: int = ALIBI_RESOLUTION,
    source: RandomSource | None = None,
) -> Tensor:
    """M·onehot(y) + discrete Laplace(t) on each of the C coordinates: (n, C) int64, ε-DP in each label."""
    num_classes = check_int("num_classes", num_classes, minimum=2)
    y = torch.as_tensor(labels)
    if y.dim() != 1 or y.dtype.is_floating_point or y.dtype == torch.bool:
        raise ValueError(f"labels must be a 1-D tensor of class indices, got shape {tuple(y.shape)} ({y.dtype})")
    if y.numel() and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}) (the declared class count)")
    scale = alibi_scale(epsilon, resolution)
    n = y.shape[0]
    noise = discrete_laplace(scale, n * num_classes, source=source).reshape(n, num_classes)
    return resolution * torch.nn.functional.one_hot(y.to(torch.int64), num_classes) + noise


def alibi_posterior(
    released: Tensor, epsilon: float, *, resolution: int = ALIBI_RESOLUTION, prior: Tensor | None = None
) -> Tensor:
    """P[y = c | released] (n, C) under the discrete Laplace likelihood and ``prior`` (uniform if None)."""
    z = torch.as_tensor(released, dtype=torch.float64)
    t = float(alibi_scale(epsilon, resolution))
    logits = (z.abs() - (z - resolution).abs()) / t
    if prior is not None:
        logits = logits + torch.log(torch.as_tensor(prior, dtype=torch.float64).clamp(min=1e-300))
    return torch.softmax(logits, dim=1)


def alibi_event(epsilon: float) -> PureDpEvent:
    """The event of ALIBI's release over a data set, each label once: ε-DP when one label changes."""
    return PureDpEvent(check_positive("epsilon", epsilon))
