"""Synthetic classification tasks: the embedded default and the PAC-curve workloads.

Every generator draws from an explicit ``torch.Generator`` and nothing else, so the same
generator state gives the same data. The *task* (class means, threshold, interval, halfspace
normal) is fixed by the arguments, not drawn: two calls with different generators sample the
same distribution, so a private set and a public pool can be drawn independently and still
come from one task (e.g. ``make_gaussian_mixture(n, generator=g_private)`` and
``make_gaussian_mixture(m, generator=g_public)``).

Label noise with rate ``noise_rate`` (η): each label is independently replaced with
probability η — for two classes it is flipped, for C > 2 classes it becomes a class drawn
uniformly from the C − 1 other classes. The Bayes error of the noisy task is therefore at least
η (random classification noise, as in the agnostic PAC curves of Bassily, Thakkar & Thakurta
2018, Section 4).

Returned features are float32 of shape (n, d); labels are int64 class indices in
{0, …, C − 1} (use :func:`to_signed_labels` for {−1, +1}).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pate_stab._checks import (
    check_generator,
    check_int,
    check_positive,
    check_probability,
    check_real,
    check_tensor,
)

__all__ = [
    "gaussian_mixture_means",
    "make_gaussian_mixture",
    "make_threshold",
    "make_interval",
    "make_halfspace",
    "apply_label_noise",
    "to_signed_labels",
]


def apply_label_noise(labels: Tensor, *, num_classes: int, noise_rate: float, generator: torch.Generator) -> Tensor:
    """Replace each label independently with probability ``noise_rate`` by another class.

    Args:
        labels: int64 class indices, shape (n,).
        num_classes: C ≥ 2.
        noise_rate: η in [0, 1].
        generator: source of randomness.

    Returns:
        A new int64 tensor: with probability η a label is moved to a class drawn uniformly
        from the C − 1 other classes (a flip when C = 2); otherwise it is unchanged.
    """
    num_classes = check_int("num_classes", num_classes, minimum=2)
    noise_rate = check_probability("noise_rate", noise_rate)
    check_generator(generator)
    labels = check_tensor("labels", labels, ndim=1, floating=False, nonempty=False).long()
    n = labels.shape[0]
    flip = torch.rand(n, generator=generator, dtype=torch.float64) < noise_rate
    shift = torch.randint(1, num_classes, (n,), generator=generator)
    return torch.where(flip, (labels + shift) % num_classes, labels)


def to_signed_labels(labels: Tensor) -> Tensor:
    """Map binary labels {0, 1} to {−1, +1} (float32)."""
    labels = check_tensor("labels", labels, ndim=1, nonempty=False)
    if labels.numel() and not bool(((labels == 0) | (labels == 1)).all()):
        raise ValueError("labels must be binary {0, 1} to map to {-1, +1}")
    return labels.to(torch.float32) * 2 - 1


def gaussian_mixture_means(num_classes: int, dim: int, *, separation: float) -> Tensor:
    """Fixed class means with every pair of means ``separation`` apart (when dim ≥ C).

    For ``dim >= num_classes`` the means are ``separation/√2 · e_c`` (a regular simplex);
    for 2 ≤ dim < C they are equally spaced on a circle in the first two coordinates with
    neighbouring means ``separation`` apart; for dim = 1 they are ``separation · c`` on a line.

    Returns:
        float64 tensor of shape (C, dim).
    """
    num_classes = check_int("num_classes", num_classes, minimum=2)
    dim = check_int("dim", dim, minimum=1)
    separation = check_positive("separation", separation)
    means = torch.zeros(num_classes, dim, dtype=torch.float64)
    if dim >= num_classes:
        means[:, :num_classes] = torch.eye(num_classes, dtype=torch.float64) * separation / math.sqrt(2)
    elif dim >= 2:
        angles = 2 * math.pi * torch.arange(num_classes, dtype=torch.float64) / num_classes
        radius = separation / (2 * math.sin(math.pi / num_classes))
        means[:, 0] = radius * torch.cos(angles)
        means[:, 1] = radius * torch.sin(angles)
    else:
        means[:, 0] = separation * torch.arange(num_classes, dtype=torch.float64)
    return means


def make_gaussian_mixture(
    num_samples: int,
    *,
    num_classes: int = 2,
    dim: int = 10,
    separation: float = 3.0,
    noise_rate: float = 0.0,
    class_probs: Tensor | None = None,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Isotropic Gaussian mixture: y ~ class_probs, x | y ~ N(μ_y, I_dim).

    Args:
        num_samples: n ≥ 0.
        num_classes: C ≥ 2.
        dim: feature dimension d ≥ 1.
        separation: distance between class means (see :func:`gaussian_mixture_means`).
        noise_rate: label-noise rate η applied after sampling (see module docstring).
        class_probs: prior over classes, shape (C,), non-negative, summing to 1 (default uniform).
        generator: source of randomness.

    Returns:
        ``(x, y)``: float32 (n, d) features and int64 (n,) noisy labels.
    """
    num_samples = check_int("num_samples", num_samples, minimum=0)
    check_generator(generator)
    means = gaussian_mixture_means(num_classes, dim, separation=separation)
    if class_probs is None:
        probs = torch.full((num_classes,), 1.0 / num_classes, dtype=torch.float64)
    else:
        probs = check_tensor("class_probs", class_probs, ndim=1).to(torch.float64)
        if probs.shape[0] != num_classes or bool((probs < 0).any()):
            raise ValueError(f"class_probs must be {num_classes} non-negative numbers")
        if not math.isclose(float(probs.sum()), 1.0, rel_tol=0, abs_tol=1e-9):
            raise ValueError(f"class_probs must sum to 1, got {float(probs.sum())}")
    clean = (
        torch.multinomial(probs, num_samples, replacement=True, generator=generator)
        if num_samples
        else torch.zeros(0, dtype=torch.long)
    )
    x = means[clean] + torch.randn(num_samples, dim, generator=generator, dtype=torch.float64)
    y = apply_label_noise(clean, num_classes=num_classes, noise_rate=noise_rate, generator=generator)
    return x.to(torch.float32), y


def make_threshold(
    num_samples: int,
    *,
    threshold: float = 0.5,
    noise_rate: float = 0.0,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Thresholds on [0, 1]: x ~ U[0, 1], y = 1[x ≥ threshold], then label noise η.

    Returns:
        ``(x, y)``: float32 (n, 1) and int64 (n,) in {0, 1}.
    """
    num_samples = check_int("num_samples", num_samples, minimum=0)
    threshold = check_real("threshold", threshold, low=0.0, high=1.0)
    check_generator(generator)
    x = torch.rand(num_samples, 1, generator=generator, dtype=torch.float64)
    clean = (x[:, 0] >= threshold).long()
    y = apply_label_noise(clean, num_classes=2, noise_rate=noise_rate, generator=generator)
    return x.to(torch.float32), y


def make_interval(
    num_samples: int,
    *,
    low: float = 0.25,
    high: float = 0.75,
    noise_rate: float = 0.0,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Intervals on [0, 1]: x ~ U[0, 1], y = 1[low ≤ x ≤ high], then label noise η.

    Returns:
        ``(x, y)``: float32 (n, 1) and int64 (n,) in {0, 1}.
    """
    num_samples = check_int("num_samples", num_samples, minimum=0)
    low = check_real("low", low, low=0.0, high=1.0)
    high = check_real("high", high, low=0.0, high=1.0)
    if not low <= high:
        raise ValueError(f"low must be <= high, got low={low}, high={high}")
    check_generator(generator)
    x = torch.rand(num_samples, 1, generator=generator, dtype=torch.float64)
    clean = ((x[:, 0] >= low) & (x[:, 0] <= high)).long()
    y = apply_label_noise(clean, num_classes=2, noise_rate=noise_rate, generator=generator)
    return x.to(torch.float32), y


def make_halfspace(
    num_samples: int,
    *,
    dim: int = 10,
    normal: Tensor | None = None,
    offset: float = 0.0,
    noise_rate: float = 0.0,
    generator: torch.Generator,
) -> tuple[Tensor, Tensor]:
    """Halfspaces in R^d: x uniform in the unit ℓ2 ball, y = 1[⟨w, x⟩ ≥ offset], then noise η.

    Args:
        num_samples: n ≥ 0.
        dim: d ≥ 1.
        normal: the halfspace normal w, shape (d,), non-zero (normalised to unit length);
            default ``(1, …, 1)/√d``.
        offset: the threshold b in ⟨w, x⟩ ≥ b.
        noise_rate: label-noise rate η.
        generator: source of randomness.

    Returns:
        ``(x, y)``: float32 (n, d) with ‖x‖₂ ≤ 1, int64 (n,) in {0, 1}.
    """
    num_samples = check_int("num_samples", num_samples, minimum=0)
    dim = check_int("dim", dim, minimum=1)
    offset = check_real("offset", offset)
    check_generator(generator)
    if normal is None:
        w = torch.ones(dim, dtype=torch.float64)
    else:
        w = check_tensor("normal", normal, ndim=1).to(torch.float64)
        if w.shape[0] != dim:
            raise ValueError(f"normal must have shape ({dim},), got {tuple(w.shape)}")
    norm = float(w.norm())
    if not norm > 0:
        raise ValueError("normal must be non-zero")
    w = w / norm
    direction = torch.randn(num_samples, dim, generator=generator, dtype=torch.float64)
    direction = direction / direction.norm(dim=1, keepdim=True).clamp_min(1e-300)
    radius = torch.rand(num_samples, 1, generator=generator, dtype=torch.float64) ** (1.0 / dim)
    x = direction * radius
    clean = (x @ w >= offset).long()
    y = apply_label_noise(clean, num_classes=2, noise_rate=noise_rate, generator=generator)
    return x.to(torch.float32), y
