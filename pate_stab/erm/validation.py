"""Private hyper-parameter selection.

* Chaudhuri & Vinterbo 2013, Alg 1 (Validate) and Alg 2 (end-to-end): train one private model per
  parameter on the *same* training set with budget alpha1, add 2 beta Exp(mean 1/alpha2) to each
  validation score, pick the argmax (Thm 1: (alpha2, delta)-DP when the score is
  (beta1, beta2, delta/k)-stable, beta = max(beta1/n, beta2/m)); Alg 2 retrains the winner with
  fresh randomness: (alpha1 + alpha2, delta)-DP (Thm 2).
* Stability constants: Thm 4 (linear classifiers from Alg 3/4, L-Lipschitz non-negative score)
  and Thm 6 (histogram density estimator, Alg 5).
* Baselines of their Sec. 5: alphaSplit, dataSplit, Random, Control (Control is not private).
* Wu et al. 2016, Alg 5: models trained on disjoint chunks, chosen by the exponential mechanism on
  a held-out chunk.

Neighbouring relation: replace one record, in the training or in the validation set.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from pate_stab._checks import (
    check_delta,
    check_epsilon,
    check_generator,
    check_int,
    check_positive,
)
from pate_stab.privacy.mechanisms.exponential import exponential_mechanism
from pate_stab.privacy.noise.seeded import exponential

__all__ = [
    "stability_constants_linear",
    "stability_constants_histogram",
    "stability_select",
    "stability_select_samples",
    "stability_validate",
    "alpha_split",
    "data_split",
    "random_choice",
    "control_choice",
    "wu_private_tuning",
]

_DTYPE = torch.float64


def stability_constants_linear(
    *,
    lam_min: float,
    num_params: int,
    delta: float,
    epsilon_train: float,
    n: int,
    dim: int,
    score_lipschitz: float = 1.0,
    score_bound: float | None = 1.0,
) -> tuple[float, float]:
    """(beta1, beta2) of Chaudhuri & Vinterbo 2013, Thm 4, for a score q = -(1/m) sum g.

    beta1 = 2L / lam_min;  beta2 = min(g*, (L / lam_min)(1 + 2 d log(d k / delta) / (eps n))).

    ``score_bound`` is g* (1 for the ramp loss; None for an unbounded g such as the hinge loss).
    Deviation: the printed beta2 has d log(dk/delta)/(alpha n); the noise of Alg 3/4 is
    (2/(alpha n)) R (Alg 3) or (2/(lam alpha n)) R (Alg 4), so on the event
    ||R|| <= d log(dk/delta) the model norm is at most (1 + 2 d log(dk/delta)/(alpha n)) / lam;
    the factor 2 is restored here. With the ramp loss and lam_min <= 1, beta2 = g* = 1 either way.
    For objective perturbation pass the eps' actually used by the noise as ``epsilon_train``.

    Example:
        >>> stability_constants_linear(lam_min=0.001, num_params=10, delta=0.01,
        ...                             epsilon_train=0.5, n=1000, dim=10)
        (2000.0, 1.0)
    """
    lam_min = check_positive("lam_min", lam_min)
    k = check_int("num_params", num_params, minimum=1)
    delta = check_delta(delta)
    eps = check_epsilon(epsilon_train, "epsilon_train")
    n = check_int("n", n, minimum=1)
    d = check_int("dim", dim, minimum=1)
    lip = check_positive("score_lipschitz", score_lipschitz)
    beta1 = 2.0 * lip / lam_min
    beta2 = (lip / lam_min) * (1.0 + 2.0 * d * math.log(d * k / delta) / (eps * n))
    if score_bound is not None:
        beta2 = min(check_positive("score_bound", score_bound), beta2)
    return beta1, beta2


def stability_constants_histogram(
    *, h_min: float, num_params: int, delta: float, epsilon_train: float, n: int
) -> tuple[float, float]:
    """(beta1, beta2) of Chaudhuri & Vinterbo 2013, Thm 6 (histogram density, Alg 5).

    nu = 2 ln(4k/delta) / (n alpha sqrt(h_min)); beta1 = 6 / ((1 - nu) h_min); beta2 = 2 / h_min.

    Raises:
        ValueError: nu >= 1 (the theorem's sample-size condition fails).
    """
    h_min = check_positive("h_min", h_min)
    k = check_int("num_params", num_params, minimum=1)
    delta = check_delta(delta)
    eps = check_epsilon(epsilon_train, "epsilon_train")
    n = check_int("n", n, minimum=1)
    nu = 2.0 * math.log(4.0 * k / delta) / (n * eps * math.sqrt(h_min))
    if not nu < 1.0:
        raise ValueError(f"n = {n} too small for Thm 6: nu = 2 ln(4k/delta)/(n eps sqrt(h_min)) = {nu:.3g} >= 1")
    return 6.0 / ((1.0 - nu) * h_min), 2.0 / h_min


def stability_select(
    scores: Sequence[float] | torch.Tensor,
    *,
    beta1: float,
    beta2: float,
    n: int,
    m: int,
    epsilon: float,
    generator: torch.Generator,
) -> int:
    """Steps 4-7 of Chaudhuri & Vinterbo 2013, Alg 1: argmax_i q_i + 2 beta Z_i, Z_i ~ Exp(1/eps).

    ``scores`` are q(h_i, V) (larger is better); beta = max(beta1 / n, beta2 / m).
    """
    return int(
        stability_select_samples(
            scores, beta1=beta1, beta2=beta2, n=n, m=m, epsilon=epsilon, num_samples=1, generator=generator
        )[0]
    )


def stability_select_samples(
    scores: Sequence[float] | torch.Tensor,
    *,
    beta1: float,
    beta2: float,
    n: int,
    m: int,
    epsilon: float,
    num_samples: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``num_samples`` independent runs of :func:`stability_select` (int64, shape (num_samples,)).

    The vectorised form used by the statistical DP tests; one run draws exactly what
    :func:`stability_select` draws.
    """
    q = torch.as_tensor(scores, dtype=_DTYPE).reshape(-1).cpu()
    if q.numel() == 0 or not bool(torch.isfinite(q).all()):
        raise ValueError("scores must be a non-empty sequence of finite values")
    beta = max(
        check_positive("beta1", beta1) / check_int("n", n, minimum=1),
        check_positive("beta2", beta2) / check_int("m", m, minimum=1),
    )
    eps = check_epsilon(epsilon)
    runs = check_int("num_samples", num_samples, minimum=1)
    z = exponential(1.0 / eps, (runs, q.numel()), generator=check_generator(generator)).cpu()
    return torch.argmax(q + 2.0 * beta * z, dim=1)


def stability_validate(
    thetas: Sequence[Any],
    train: Callable[[Any, torch.Generator], Any],
    score: Callable[[Any], float],
    *,
    beta1: float,
    beta2: float,
    n: int,
    m: int,
    epsilon_validation: float,
    generator: torch.Generator,
    retrain: bool = True,
) -> tuple[int, Any]:
    """Chaudhuri & Vinterbo 2013, Alg 1 (and Alg 2 with ``retrain``).

    Args:
        thetas: the parameter list Theta.
        train: ``train(theta, generator)``: the alpha1-DP training procedure on the training set.
        score: ``score(model)``: q(h, V) on the validation set, (beta1, beta2, delta/k)-stable.
        epsilon_validation: alpha2.
        retrain: Alg 2 (train the chosen parameter again with fresh randomness); otherwise the
            model of Alg 1 is returned.

    Returns:
        (index of the chosen parameter, model). Privacy: (alpha2, delta) for Alg 1,
        (alpha1 + alpha2, delta) for Alg 2.
    """
    if len(thetas) == 0:
        raise ValueError("thetas must not be empty")
    check_generator(generator)
    models = [train(theta, generator) for theta in thetas]
    scores = [float(score(h)) for h in models]
    i = stability_select(scores, beta1=beta1, beta2=beta2, n=n, m=m, epsilon=epsilon_validation, generator=generator)
    return i, (train(thetas[i], generator) if retrain else models[i])


TrainFn = Callable[[Any, torch.Tensor, torch.Tensor, float, torch.Generator], Any]


def _fewest_errors(
    models: list[Any], errors: Callable[[Any], float], *, epsilon: float, generator: torch.Generator
) -> tuple[int, Any]:
    """The selection of alphaSplit and dataSplit: model i with p_i ∝ exp(-alpha e_i / 2), e_i its
    validation error count (an exponential mechanism at alpha with sensitivity 1, Chaudhuri &
    Vinterbo 2013, Sec. 5)."""
    e = [float(errors(h)) for h in models]
    i = exponential_mechanism([-v for v in e], epsilon=epsilon, sensitivity=1.0, generator=generator)
    return i, models[i]


def alpha_split(
    thetas: Sequence[Any],
    train: TrainFn,
    errors: Callable[[Any], float],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
) -> tuple[int, Any]:
    """alphaSplit (Chaudhuri & Vinterbo 2013, Sec. 5): each model at alpha/k on all of T,
    chosen with p_i ∝ exp(-alpha e_i / 2) from its validation error count e_i.

    alpha-DP for disjoint T and V (their Thm 5): training composes to alpha, the selection is an
    exponential mechanism with sensitivity 1 at alpha.
    """
    eps = check_epsilon(epsilon)
    k = len(thetas)
    models = [train(t, x, y, eps / k, generator) for t in thetas]
    return _fewest_errors(models, errors, epsilon=eps, generator=generator)


def data_split(
    thetas: Sequence[Any],
    train: TrainFn,
    errors: Callable[[Any], float],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
) -> tuple[int, Any]:
    """dataSplit (Chaudhuri & Vinterbo 2013, Sec. 5; Chaudhuri et al. 2011): model i at alpha on
    the i-th of k disjoint random parts of T, chosen with p_i ∝ exp(-alpha e_i / 2)."""
    eps = check_epsilon(epsilon)
    k = len(thetas)
    gen = check_generator(generator)
    perm = torch.randperm(x.shape[0], generator=gen, device=gen.device).cpu()
    parts = torch.tensor_split(perm, k)
    models = [train(t, x[p], y[p], eps, generator) for t, p in zip(thetas, parts, strict=True)]
    return _fewest_errors(models, errors, epsilon=eps, generator=generator)


def random_choice(
    thetas: Sequence[Any],
    train: TrainFn,
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
) -> tuple[int, Any]:
    """Random (Chaudhuri & Vinterbo 2013, Sec. 5): a uniformly random parameter, trained at alpha."""
    eps = check_epsilon(epsilon)
    gen = check_generator(generator)
    i = int(torch.randint(0, len(thetas), (1,), generator=gen, device=gen.device))
    return i, train(thetas[i], x, y, eps, generator)


def control_choice(
    thetas: Sequence[Any],
    train: TrainFn,
    score: Callable[[Any], float],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
) -> tuple[int, Any]:
    """Control (Chaudhuri & Vinterbo 2013, Sec. 5): every model at alpha on T, the best
    validation score chosen without noise. Not private (an upper reference)."""
    eps = check_epsilon(epsilon)
    models = [train(t, x, y, eps, generator) for t in thetas]
    scores = [float(score(h)) for h in models]
    i = max(range(len(scores)), key=scores.__getitem__)
    return i, models[i]


def wu_private_tuning(
    params: Sequence[tuple[float, float]],
    train: Callable[[float, float, torch.Tensor, torch.Tensor, float, torch.Generator], torch.Tensor],
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    epsilon: float,
    generator: torch.Generator,
    utility_sensitivity: float | None = None,
) -> tuple[int, torch.Tensor]:
    """Wu et al. 2016, Alg 5: private parameter tuning for linear regression.

    The data are permuted and split into len(params) + 1 chunks; model i is trained at epsilon
    on chunk i with parameters (R_i, lam_i) by ``train(R, lam, x, y, epsilon, generator)``; one
    is chosen by the exponential mechanism at epsilon on u(w) = -L_{S'}(w), the mean squared
    error on the last chunk S'. Parallel composition over disjoint chunks: epsilon-DP.

    Sensitivity of u: with ||x|| <= 1, |y| <= 1, each squared error is at most (||w|| + 1)^2, so
    replacing one record of S' moves u(w) by at most (max_i ||w_i|| + 1)^2 / |S'| (the w_i do not
    depend on S'). That is the default. The paper prints Delta(u) <= R^2 (max R over the grid):
    pass ``utility_sensitivity=max(R)**2`` to reproduce it (valid when it is at least the bound
    above, i.e. |S'| >= (max ||w_i|| + 1)^2 / R^2).

    Returns:
        (index into ``params``, chosen weights).
    """
    eps = check_epsilon(epsilon)
    gen = check_generator(generator)
    k = len(params)
    if k == 0:
        raise ValueError("params must not be empty")
    n = x.shape[0]
    if n < k + 1:
        raise ValueError(f"need at least len(params) + 1 = {k + 1} records, got {n}")
    perm = torch.randperm(n, generator=gen, device=gen.device).cpu()
    chunks = torch.tensor_split(perm, k + 1)
    val = chunks[-1]
    models = [train(r, lam, x[c], y[c], eps, gen) for (r, lam), c in zip(params, chunks[:-1], strict=True)]
    utilities = wu_tuning_utilities(models, x[val], y[val])
    if utility_sensitivity is None:
        utility_sensitivity = wu_utility_sensitivity(models, int(val.numel()))
    i = exponential_mechanism(utilities, epsilon=eps, sensitivity=utility_sensitivity, generator=gen)
    return i, models[i]


def wu_tuning_utilities(models: Sequence[torch.Tensor], xv: torch.Tensor, yv: torch.Tensor) -> torch.Tensor:
    """Alg 5's utilities u(w_i) = −L_{S'}(w_i): minus each model's mean squared error on (xv, yv)."""
    xv, yv = xv.to(_DTYPE), yv.to(_DTYPE)
    return torch.tensor([-float(((xv @ w.to(xv.device)) - yv).pow(2).mean()) for w in models], dtype=_DTYPE)


def wu_utility_sensitivity(models: Sequence[torch.Tensor], val_size: int) -> float:
    """(max_i ‖w_i‖ + 1)² / |S'|: how far one replaced record of S' (‖x‖ <= 1, |y| <= 1) moves u(w_i).

    Each squared error lies in [0, (‖w_i‖ + 1)²], and the mean over |S'| records changes in one
    term (see :func:`wu_private_tuning`).
    """
    val_size = check_int("val_size", val_size, minimum=1)
    wmax = max(float(torch.linalg.vector_norm(w)) for w in models)
    return (wmax + 1.0) ** 2 / val_size
