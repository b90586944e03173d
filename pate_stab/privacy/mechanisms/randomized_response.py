"""Randomised response with a prior (RR-with-prior): ε-label-DP labels, drawn exactly.

Source: Ghazi, Golowich, Kumar, Manurangsi & Zhang 2021, "Deep Learning with Label Differential
Privacy" (NeurIPS), Algorithm 2 (RRWithPrior), built on RR-Top-k (their Algorithm 1). For one
example with true label y ∈ {0, …, C − 1} and a prior p over the C classes that does not depend on
y (a model's prediction on the example's public input, or the uniform prior):

1. order the classes by p, largest first (ties by class index), and let Y_k be the first k;
2. choose k* = argmax_k  (e^ε / (e^ε + k − 1)) · Σ_{c ∈ Y_k} p_c   (the probability that the output
   is the true label, were y drawn from p; the smallest such k on ties);
3. RR-Top-k*: if y ∈ Y_k*, output y with probability e^ε / (e^ε + k* − 1), otherwise a uniform
   member of Y_k* \\ {y}; if y ∉ Y_k*, output a uniform member of Y_k*.

Privacy (their Lemma on RR-Top-k). The set Y_k* and k* are functions of the prior alone. For two
labels y, y' and any output o ∈ Y_k*, P[o | y] takes the values e^ε/(e^ε+k−1) (o = y),
1/(e^ε+k−1) (o ≠ y, y ∈ Y) or 1/k (y ∉ Y), whose ratios are at most e^ε; outputs outside Y_k* have
probability 0 for every y. So one output is ε-DP in its label, and labels randomised
independently (each label once) are ε-DP when one label of the data set is changed (parallel
composition): ε-**label**-DP (Ghazi et al. Def 1). With the uniform prior every k has
Σ_{Y_k} p = k/C and k e^ε/(e^ε + k − 1) increases in k, so k* = C: plain C-ary randomised
response (Warner 1965), the one-stage LP-1ST.

Exact randomness. The keep probability is a rational q_k = a_k / 2^40 strictly below
e^ε/(e^ε + k − 1) (:func:`rr_keep_probability`: floor, then one step lower, so float rounding of
e^ε cannot push it above). The ratios are then q(k − 1)/(1 − q) < e^ε and k·q < e^ε: the mechanism
actually run is ε-DP exactly, not up to float error. Every draw is a uniform integer from a
:class:`~pate_stab.privacy.noise.discrete.RandomSource` by rejection (the OS's CSPRNG by default;
:class:`~pate_stab.privacy.noise.discrete.SeededRandomSource` for reproducible research, which
carries no privacy against anyone who knows the seed). No floating-point sample is used.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import torch
from torch import Tensor

from pate_stab._checks import check_int, check_positive
from pate_stab.privacy.accounting.events import PureDpEvent
from pate_stab.privacy.noise.discrete import RandomSource, randbelow, random_source

__all__ = [
    "KEEP_DENOMINATOR",
    "rr_keep_probability",
    "rr_optimal_k",
    "rr_top_k",
    "rr_with_prior",
    "randomized_response",
    "rr_event",
]

KEEP_DENOMINATOR = 1 << 40
"""The keep probabilities are multiples of 2^-40 (module docstring)."""


def rr_keep_probability(epsilon: float, k: int) -> Fraction:
    """The rational keep probability q_k < e^ε / (e^ε + k − 1) of RR-Top-k (1 for k = 1).

    Example:
        >>> q = rr_keep_probability(1.0, 10)
        >>> float(q) < math.e / (math.e + 9) and q.denominator <= KEEP_DENOMINATOR
        True
    """
    epsilon = check_positive("epsilon", epsilon)
    k = check_int("k", k, minimum=1)
    if k == 1:
        return Fraction(1)
    # 1 / (1 + (k − 1) e^{−ε}): no overflow for large ε; one grid step below the floor covers rounding
    exact = 1.0 / (1.0 + (k - 1) * math.exp(-epsilon))
    return Fraction(max(math.floor(exact * KEEP_DENOMINATOR) - 1, 0), KEEP_DENOMINATOR)


def _keep_numerators(epsilon: float, num_classes: int) -> np.ndarray:
    """a_k with q_k = a_k / 2^40 for k = 0 … C (index 0 unused)."""
    out = np.zeros(num_classes + 1, dtype=np.int64)
    for k in range(1, num_classes + 1):
        q = rr_keep_probability(epsilon, k)
        out[k] = q.numerator * (KEEP_DENOMINATOR // q.denominator)
    return out


def _check_prior(prior: Tensor) -> Tensor:
    prior = torch.as_tensor(prior, dtype=torch.float64)
    if prior.dim() != 2 or prior.shape[1] < 2:
        raise ValueError(f"prior must have shape (n, C) with C ≥ 2, got {tuple(prior.shape)}")
    if not bool(torch.isfinite(prior).all()) or bool((prior < 0).any()):
        raise ValueError("prior must hold finite, non-negative probabilities")
    return prior


def _check_labels(labels: Tensor, n: int, num_classes: int) -> np.ndarray:
    y = torch.as_tensor(labels)
    if y.dim() != 1 or y.shape[0] != n or y.dtype.is_floating_point or y.dtype == torch.bool:
        raise ValueError(f"labels must be {n} integer class indices, got shape {tuple(y.shape)} ({y.dtype})")
    if n and (int(y.min()) < 0 or int(y.max()) >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes}) (the declared class count)")
    return y.to(torch.int64).numpy()


def rr_optimal_k(prior: Tensor, epsilon: float) -> tuple[Tensor, Tensor]:
    """(k*, order) of RRWithPrior for each row of ``prior`` (Ghazi et al. 2021, Alg 2, step 2).

    ``order``: the classes by prior, largest first (ties by class index); k* maximises
    q_k · Σ_{first k} p with the rational q_k of :func:`rr_keep_probability` (the smallest k on ties).
    The prior's rows need not sum to 1 (the maximiser does not depend on their scale).
    """
    prior = _check_prior(prior)
    epsilon = check_positive("epsilon", epsilon)
    c = prior.shape[1]
    # stable sort of −p: the largest first, ties by class index (a rule fixed in advance)
    order = torch.sort(-prior, dim=1, stable=True).indices
    mass = torch.cumsum(torch.gather(prior, 1, order), dim=1)  # Σ over the first k, k = 1 … C
    keep = torch.tensor([float(rr_keep_probability(epsilon, k)) for k in range(1, c + 1)], dtype=torch.float64)
    k_star = torch.argmax(mass * keep, dim=1) + 1  # argmax returns the first maximum: the smallest k
    return k_star, order


def rr_top_k(
    labels: Tensor,
    order: Tensor,
    k: Tensor,
    epsilon: float,
    *,
    source: RandomSource | None = None,
) -> Tensor:
    """RR-Top-k (Ghazi et al. 2021, Alg 1) for each example, with exact draws from ``source``.

    ``order``: (n, C) classes by prior, largest first; ``k``: (n,) the size of each example's set
    Y = order[:k]; ``labels``: (n,) the true labels. Returns the (n,) randomised labels, each in its Y.
    ``order`` and ``k`` must not depend on the labels (they come from a prior).
    """
    epsilon = check_positive("epsilon", epsilon)
    order_np = torch.as_tensor(order, dtype=torch.int64).numpy()
    if order_np.ndim != 2:
        raise ValueError(f"order must have shape (n, C), got {order_np.shape}")
    n, c = order_np.shape
    if not np.array_equal(np.sort(order_np, axis=1), np.broadcast_to(np.arange(c), (n, c))):
        raise ValueError("each row of order must be a permutation of the C classes")
    y = _check_labels(labels, n, c)
    k_np = torch.as_tensor(k, dtype=torch.int64).numpy()
    if k_np.shape != (n,) or (n and (int(k_np.min()) < 1 or int(k_np.max()) > c)):
        raise ValueError(f"k must hold {n} set sizes in [1, {c}]")
    src = random_source(source)
    out = np.empty(n, dtype=np.int64)
    if n == 0:
        return torch.from_numpy(out)
    rank = np.argmax(order_np == y[:, None], axis=1)  # the true label's place in the order
    inside = rank < k_np
    # y ∈ Y: keep y with probability q_k (a uniform draw below 2^40 against a_k), else a uniform other member
    idx = np.flatnonzero(inside)
    if idx.size:
        keep_num = _keep_numerators(epsilon, c)[k_np[idx]]
        kept = randbelow(np.full(idx.size, KEEP_DENOMINATOR, dtype=np.int64), src) < keep_num
        out[idx[kept]] = y[idx[kept]]
        moved = idx[~kept]  # k ≥ 2 here: with k = 1, q = 1 keeps every label
        if moved.size:
            j = randbelow(k_np[moved] - 1, src)
            j = j + (j >= rank[moved])  # skip the true label's place
            out[moved] = order_np[moved, j]
    # y ∉ Y: a uniform member of Y
    idx = np.flatnonzero(~inside)
    if idx.size:
        out[idx] = order_np[idx, randbelow(k_np[idx], src)]
    return torch.from_numpy(out)


def rr_with_prior(labels: Tensor, prior: Tensor, epsilon: float, *, source: RandomSource | None = None) -> Tensor:
    """RRWithPrior (Ghazi et al. 2021, Alg 2): ε-label-DP randomised labels, one per row of ``prior``.

    ``prior`` (n, C) must be computed without the labels (e.g. a model's prediction on public inputs,
    trained on other, already randomised labels). Each label is randomised once; labels so
    randomised are ε-DP when one of them changes (module docstring).

    Example:
        >>> from pate_stab.privacy.noise.discrete import SeededRandomSource
        >>> prior = torch.tensor([[0.9, 0.1, 0.0], [0.2, 0.3, 0.5]])
        >>> rr_with_prior(torch.tensor([0, 2]), prior, 1.0, source=SeededRandomSource(0)).shape
        torch.Size([2])
    """
    k, order = rr_optimal_k(prior, epsilon)
    return rr_top_k(labels, order, k, epsilon, source=source)


def randomized_response(
    labels: Tensor, num_classes: int, epsilon: float, *, source: RandomSource | None = None
) -> Tensor:
    """C-ary randomised response: RRWithPrior with the uniform prior (k* = C; module docstring)."""
    num_classes = check_int("num_classes", num_classes, minimum=2)
    n = torch.as_tensor(labels).shape[0]
    order = torch.arange(num_classes).expand(n, -1)
    return rr_top_k(labels, order, torch.full((n,), num_classes, dtype=torch.int64), epsilon, source=source)


def rr_event(epsilon: float) -> PureDpEvent:
    """The event of one round of RRWithPrior over a data set, each label randomised once: ε-DP when
    one label changes (parallel composition over the labels; module docstring)."""
    return PureDpEvent(check_positive("epsilon", epsilon))
