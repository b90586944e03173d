"""DP-SGD (Abadi et al. 2016, Alg 1) for a linear softmax head, with Opacus's sampler and accountant.

Each step takes a Poisson sample (every record independently with probability q; Opacus's
``UniformWithReplacementSampler``), clips every record's gradient to ℓ2 norm ``max_grad_norm`` = C,
sums, adds N(0, σ² C² I) and divides by the expected batch size B = q N (Opacus's convention); SGD with
momentum then takes the step. The privacy analysis is the sampled Gaussian mechanism's Rényi DP
(Mironov, Talwar & Zhang 2019), composed over the steps and converted to (ε, δ) by Opacus's
``RDPAccountant``; σ is Opacus's ``get_noise_multiplier`` for the target (ε, δ, q, steps).
Neighbouring relation: **add/remove one record** (Poisson sampling; the data set size is not
fixed).

The public size N. Under add/remove the number n of private records is itself private, and the
analysis above holds for a mechanism whose q, steps, σ and divisor are the same on every pair of
neighbours. Every parameter is therefore computed from a *public* size N (the documented size of
a published training set, or a figure the user would publish anyway), never from n:
q = B / N, steps = round(epochs / q) (:func:`dpsgd_schedule`), σ for (ε, δ, q, steps), the noisy
sum divided by q N = B. The Poisson sampler draws each of the n actual records with probability q
(n is its internal loop bound, nothing else). An n far from N leaves the guarantee intact; only the
training suffers (about q n records a step instead of B): a :class:`SmallPrivateSetWarning` tells
the user, who holds the data, when n < N / 2 or n < B. The warning goes to the user's terminal,
never into a published file, and changes nothing the mechanism does or outputs (an error would
let n decide whether the spend happens).

Per-sample gradients in closed form. For a linear layer s = W x + b and the cross-entropy, the
per-sample gradient is g_i = (p_i − e_{y_i}) [x_i; 1]ᵀ, of norm ||p_i − e_{y_i}|| · √(||x_i||² + 1),
so the clipped sum is ((f ⊙ (P − E))ᵀ [X, 1]) with f_i = min(1, C / ||g_i||) — one matrix product
per step. Opacus's per-sample hooks compute the same numbers through autograd and are several times
slower for a wide linear layer on a CPU; Opacus is used here for what it does best, the Poisson
sampler and the accountant, not for the clipping (``tests/direct/test_dpsgd.py`` checks the closed
form against autograd).

Settings fixed in advance (``DPSGDConfig`` defaults): those of Tramèr & Boneh 2021
("Differentially Private Learning Needs Better Features") for a linear model on ScatterNet
features of (Fashion-)MNIST: expected batch 8192, 40 epochs, learning rate 4, momentum 0.9,
clipping norm 0.1.

Smaller data (:func:`default_batch_size`). Their B = 8192 needs N ≥ 8192, and near that size it
means q close to 1 (no amplification by sampling). The default B for a public size N keeps their
sampling rate instead: B = 2^round(log2(q_TB · N)) with q_TB = 8192 / 60,000 ≈ 0.137, capped at
their 8192, at least 16 and at most N. At a fixed number of epochs the sampling rate fixes the
number of steps (epochs / q ≈ 293 at 40 epochs), so σ at a given (ε, δ) stays about theirs; only
the averaging over B records shrinks with N (noise σC/B per coordinate of the mean gradient), the
price of a small data set. It reads N only, a public figure; never the private data.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import (
    check_delta,
    check_epsilon,
    check_generator,
    check_int,
    check_positive,
    check_real,
    check_tensor,
)
from pate_stab.privacy.accounting.events import SampledGaussianEvent

__all__ = [
    "DPSGDConfig",
    "DPSGDLinear",
    "SmallPrivateSetWarning",
    "check_dpsgd_inputs",
    "check_public_size",
    "default_batch_size",
    "clipped_noisy_gradient",
    "dpsgd_epsilon",
    "dpsgd_event",
    "dpsgd_noise_multiplier",
    "dpsgd_schedule",
    "train_dpsgd_linear",
    "warn_if_small",
]

_DTYPE = torch.float32


@dataclass(frozen=True)
class DPSGDConfig:
    """DP-SGD settings, fixed before any data are seen (defaults: Tramèr & Boneh 2021, module docstring)."""

    expected_batch_size: int = 8192  # B = q N, N the public size (module docstring)
    epochs: int = 40  # steps = round(epochs / q)
    lr: float = 4.0
    momentum: float = 0.9
    max_grad_norm: float = 0.1  # C, the per-sample clipping norm

    def __post_init__(self) -> None:
        check_int("expected_batch_size", self.expected_batch_size, minimum=1)
        check_int("epochs", self.epochs, minimum=1)
        check_positive("lr", self.lr)
        check_real("momentum", self.momentum, low=0.0, high=1.0, high_inclusive=False)
        check_positive("max_grad_norm", self.max_grad_norm)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


TB_SAMPLE_RATE = 8192 / 60000
"""Tramèr & Boneh 2021's sampling rate for their linear model: B = 8192 of N = 60,000 (MNIST)."""
TB_BATCH_SIZE = 8192


def default_batch_size(public_size: int, *, cap: int = TB_BATCH_SIZE) -> int:
    """The expected batch size B for public size N (module docstring, "Smaller data"):
    ``min(cap, N, max(16, 2^round(log2(q_TB · N))))`` with q_TB = 8192 / 60,000.

    Example:
        >>> [default_batch_size(n) for n in (60000, 32561, 6000, 1000, 10)]
        [8192, 4096, 1024, 128, 10]
    """
    n = check_int("public_size", public_size, minimum=1)
    target = TB_SAMPLE_RATE * n
    power = 2 ** round(math.log2(target)) if target >= 1 else 1
    return int(min(cap, n, max(16, power)))


class SmallPrivateSetWarning(UserWarning):
    """The private set is much smaller than the public size N: private as stated, but it may train badly."""


def check_public_size(public_size: object, config: DPSGDConfig) -> int:
    """N as an int, at least the expected batch size B (q = B / N ≤ 1); ValueError otherwise.

    Depends on public settings only (N and B), never on the private data.
    """
    n_pub = check_int("public_size", public_size, minimum=1)
    if n_pub < config.expected_batch_size:
        raise ValueError(
            f"DP-SGD's expected batch size {config.expected_batch_size} exceeds the public size N={n_pub} of the "
            "private set (q = B / N must be at most 1): choose a smaller expected batch size"
        )
    return n_pub


def dpsgd_schedule(public_size: int, config: DPSGDConfig) -> tuple[float, int]:
    """(q, steps) of :func:`train_dpsgd_linear` for the public size N: q = B / N, steps = max(1, round(epochs / q)).

    Example:
        >>> dpsgd_schedule(60000, DPSGDConfig())
        (0.13653333333333334, 293)
    """
    n_pub = check_public_size(public_size, config)
    q = config.expected_batch_size / n_pub
    return q, max(1, round(config.epochs / q))


def warn_if_small(n: int, public_size: int, config: DPSGDConfig) -> None:
    """Warn the user (never a published file) when n < N / 2 or n < B (module docstring); nothing else changes."""
    if 2 * n < public_size or n < config.expected_batch_size:
        import warnings

        warnings.warn(
            f"the private set is much smaller than its public size N={public_size} (or than the expected batch "
            f"{config.expected_batch_size}): DP-SGD stays private as stated but takes fewer records a step than "
            "planned and may train badly",
            SmallPrivateSetWarning,
            stacklevel=3,
        )


def dpsgd_noise_multiplier(*, epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    """σ such that ``steps`` sampled Gaussian steps at rate q are (ε, δ)-DP (add/remove).

    Opacus's ``get_noise_multiplier`` with its RDP accountant (Mironov, Talwar & Zhang 2019);
    the σ returned gives ε within 0.01 below the target.

    Example:
        >>> round(dpsgd_noise_multiplier(epsilon=3.0, delta=1e-5, sample_rate=8192 / 60000, steps=293), 2)
        3.65
    """
    from opacus.accountants.utils import get_noise_multiplier

    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    q = check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_inclusive=False)
    steps = check_int("steps", steps, minimum=1)
    return float(get_noise_multiplier(target_epsilon=epsilon, target_delta=delta, sample_rate=q, steps=steps,
                                      accountant="rdp"))  # fmt: skip


def dpsgd_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    """The ε of Opacus's ``RDPAccountant`` after ``steps`` steps of (σ, q), at ``delta`` (add/remove)."""
    from opacus.accountants import RDPAccountant

    sigma = check_positive("noise_multiplier", noise_multiplier)
    q = check_real("sample_rate", sample_rate, low=0.0, high=1.0, low_inclusive=False)
    acc = RDPAccountant()
    acc.history = [(sigma, q, check_int("steps", steps, minimum=1))]
    return float(acc.get_epsilon(delta=check_delta(delta)))


def dpsgd_event(*, noise_multiplier: float, sample_rate: float, steps: int) -> SampledGaussianEvent:
    """What a DP-SGD run does, as its ledger spend records it: ``steps`` Poisson-sampled Gaussian steps.

    The event of :mod:`pate_stab.privacy.accounting.events` (add/remove); the ε charged with it is
    :func:`dpsgd_epsilon` (Opacus's RDP accountant), which the ledger checks the event implies.

    Example:
        >>> dpsgd_event(noise_multiplier=3.65, sample_rate=0.125, steps=293).to_dict()["type"]
        'sampled_gaussian'
    """
    return SampledGaussianEvent(noise_multiplier=noise_multiplier, sampling_rate=sample_rate, steps=steps)


def clipped_noisy_gradient(
    weight: Tensor,
    bias: Tensor,
    x: Tensor,
    y: Tensor,
    *,
    max_grad_norm: float,
    noise_std: float,
    expected_batch_size: float,
    generator: torch.Generator,
    secure_mode: bool = False,
) -> tuple[Tensor, Tensor]:
    """(Σ_i clip(g_i) + N(0, noise_std² I)) / expected_batch_size for the batch (x, y) (module docstring).

    ``secure_mode``: draw the Gaussian noise as Opacus's ``secure_mode`` does (:func:`gaussian_noise`).

    Returns:
        The noisy gradients of the weight (C, d) and the bias (C,).
    """
    p = torch.softmax(x @ weight.T + bias, dim=1)  # (B, C)
    p[torch.arange(x.shape[0]), y] -= 1.0  # p − e_y
    norms = torch.linalg.vector_norm(p, dim=1) * torch.sqrt((x * x).sum(dim=1) + 1.0)
    factor = (max_grad_norm / (norms + 1e-6)).clamp(max=1.0)  # Opacus's clipping factor
    r = p * factor[:, None]
    grad_w = r.T @ x + gaussian_noise(noise_std, weight, generator=generator, secure_mode=secure_mode)
    grad_b = r.sum(dim=0) + gaussian_noise(noise_std, bias, generator=generator, secure_mode=secure_mode)
    return grad_w / expected_batch_size, grad_b / expected_batch_size


def gaussian_noise(std: float, like: Tensor, *, generator: torch.Generator, secure_mode: bool = False) -> Tensor:
    """N(0, std² I) of ``like``'s shape and dtype: floating-point Gaussian noise.

    ``secure_mode`` follows Opacus's ``secure_mode`` noise (``opacus.optimizers.optimizer._generate_noise``;
    Holohan & Braghin 2021, "Secure random sampling in differential privacy", Sec 5.1 with n = 2):
    one draw thrown away, then the sum of 4 independent N(0, std²) draws divided by 2, which has
    the same law N(0, std²) and makes the floating-point attacks on a single Gaussian draw (Jin et
    al. 2022) infeasible. It is still floating-point noise, not an exact sampler.
    """
    if not secure_mode:
        return std * torch.randn(like.shape, generator=generator, dtype=like.dtype)
    torch.randn((1, 1), generator=generator, dtype=like.dtype)  # thrown away, as in Opacus
    total = torch.zeros(like.shape, dtype=like.dtype)
    for _ in range(4):
        total += std * torch.randn(like.shape, generator=generator, dtype=like.dtype)
    return total / 2


@dataclass(frozen=True)
class DPSGDLinear:
    """A linear softmax head trained by DP-SGD, and its guarantee (add/remove one record)."""

    weight: Tensor  # (C, d)
    bias: Tensor  # (C,)
    noise_multiplier: float
    sample_rate: float
    steps: int
    epsilon: float  # the accountant's ε after the steps taken, at ``delta``
    delta: float
    config: DPSGDConfig

    def predict(self, x: Tensor) -> Tensor:
        return torch.argmax(x.to(self.weight.dtype) @ self.weight.T + self.bias, dim=1)


def check_dpsgd_inputs(
    x: object, y: object, *, num_classes: int, config: DPSGDConfig, x_ndim: int | None = None
) -> tuple[int, Tensor, Tensor]:
    """The data both DP-SGD trainers check before anything is drawn.

    C >= 2 (public), finite inputs ``x`` (with ``x_ndim`` dimensions when given), one integer
    label in [0, C) per input. The number of records is not checked against anything (it is
    private under add/remove: module docstring).

    Returns:
        ``(num_classes, x, y)``: ``x`` as checked (dtype unchanged), ``y`` as int64.
    """
    num_classes = check_int("num_classes", num_classes, minimum=2)
    xt = check_tensor("x", x) if x_ndim is None else check_tensor("x", x, ndim=x_ndim)
    yt = check_tensor("y", y, ndim=1)
    n = xt.shape[0]
    if yt.shape[0] != n:
        raise ValueError(f"y must have {n} entries (one per input, a row of x), got {yt.shape[0]}")
    if yt.is_floating_point() and not bool((yt == yt.round()).all()):
        raise ValueError("y: class labels must be integers")
    yt = yt.to(torch.int64)
    if bool(((yt < 0) | (yt >= num_classes)).any()):
        raise ValueError(f"y: labels must lie in [0, {num_classes})")
    return num_classes, xt, yt


def train_dpsgd_linear(
    x: object,
    y: object,
    *,
    num_classes: int,
    epsilon: float,
    delta: float,
    generator: torch.Generator,
    public_size: int,
    config: DPSGDConfig | None = None,
    secure_mode: bool = False,
) -> DPSGDLinear:
    """Train a linear softmax head on (x, y) by DP-SGD at (ε, δ) (module docstring).

    Args:
        x: features (n, d); no norm bound is needed (each record's gradient is clipped).
        y: class indices in [0, ``num_classes``).
        epsilon, delta: the target; σ is chosen so that Opacus's RDP accountant gives at most ε.
        generator: the Poisson sampling and the Gaussian noise.
        public_size: N, the private set's public size; q, steps, σ and the divisor come from it,
            never from the number of rows of ``x`` (module docstring).
        config: settings fixed in advance (default: Tramèr & Boneh 2021).
        secure_mode: Opacus's ``secure_mode`` Gaussian noise (:func:`gaussian_noise`).

    Raises:
        ValueError: NaN/inf features, labels outside [0, C), ε ≤ 0, δ outside (0, 1), N smaller
            than the expected batch size.
    """
    from opacus.utils.uniform_sampler import UniformWithReplacementSampler

    config = config or DPSGDConfig()
    epsilon, delta = check_epsilon(epsilon), check_delta(delta)
    check_generator(generator)
    q, steps = dpsgd_schedule(public_size, config)
    num_classes, xt, yt = check_dpsgd_inputs(x, y, num_classes=num_classes, config=config, x_ndim=2)
    xt = xt.to(_DTYPE)
    n = xt.shape[0]
    warn_if_small(n, public_size, config)
    sigma = dpsgd_noise_multiplier(epsilon=epsilon, delta=delta, sample_rate=q, steps=steps)
    weight = torch.zeros((num_classes, xt.shape[1]), dtype=_DTYPE)
    bias = torch.zeros(num_classes, dtype=_DTYPE)
    mom_w, mom_b = torch.zeros_like(weight), torch.zeros_like(bias)
    # each of the n actual records is drawn with probability q (n: the sampler's loop bound only)
    sampler = UniformWithReplacementSampler(num_samples=n, sample_rate=q, generator=generator, steps=steps)
    for batch in sampler:
        index = torch.as_tensor(batch, dtype=torch.int64)
        gw, gb = clipped_noisy_gradient(
            weight, bias, xt[index], yt[index], max_grad_norm=config.max_grad_norm,
            noise_std=sigma * config.max_grad_norm, expected_batch_size=float(config.expected_batch_size),
            generator=generator, secure_mode=secure_mode,
        )  # fmt: skip
        mom_w.mul_(config.momentum).add_(gw)
        mom_b.mul_(config.momentum).add_(gb)
        weight.sub_(config.lr * mom_w)
        bias.sub_(config.lr * mom_b)
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=delta)
    if not (spent <= epsilon * (1 + 1e-9)) or not math.isfinite(spent):
        raise RuntimeError(f"the accountant gives ε={spent} above the target {epsilon}")  # Opacus contract
    return DPSGDLinear(weight, bias, sigma, q, steps, spent, delta, config)
