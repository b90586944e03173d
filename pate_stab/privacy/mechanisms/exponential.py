"""The exponential mechanism (McSherry & Talwar 2007), sampled exactly by the Gumbel-max trick.

Candidate i is selected with probability ∝ exp(ε·u_i / (2Δ)), where every utility u_i moves by at
most Δ (``sensitivity``) between neighbouring data sets: the selection is ε-DP (McSherry & Talwar
2007, Thm 6; Dwork & Roth 2014, Thm 3.10). Adding independent standard Gumbel noise to the
scaled utilities ε·u_i / (2Δ) and taking the argmax draws from exactly that law (the Gumbel-max
trick: Gumbel 1954; Maddison, Tarlow & Minka 2014, §2).

The private selections of :mod:`pate_stab.erm.validation` (Chaudhuri & Vinterbo 2013's alphaSplit
and dataSplit, Wu et al. 2016's tuning) call it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from pate_stab._checks import check_epsilon, check_generator, check_int, check_positive

__all__ = ["exponential_mechanism", "exponential_mechanism_samples"]

_DTYPE = torch.float64


def exponential_mechanism(
    utilities: Sequence[float] | torch.Tensor,
    *,
    epsilon: float,
    sensitivity: float,
    generator: torch.Generator,
) -> int:
    """Sample i with probability ∝ exp(eps u_i / (2 sensitivity)) (McSherry & Talwar 2007).

    Sampled exactly by the Gumbel-max trick. epsilon-DP when each u_i changes by at most
    ``sensitivity`` between neighbours.

    Example: ``exponential_mechanism([0.0, 50.0], epsilon=1.0, sensitivity=1.0, generator=g)`` is 1
    except with probability 1/(1 + e^25) ≈ 1.4e-11.
    """
    return int(
        exponential_mechanism_samples(
            utilities, epsilon=epsilon, sensitivity=sensitivity, num_samples=1, generator=generator
        )[0]
    )


def exponential_mechanism_samples(
    utilities: Sequence[float] | torch.Tensor,
    *,
    epsilon: float,
    sensitivity: float,
    num_samples: int,
    generator: torch.Generator,
) -> torch.Tensor:
    """``num_samples`` independent draws of :func:`exponential_mechanism` (int64, shape (num_samples,)).

    The vectorised form used by the statistical DP tests; one draw uses exactly the random
    numbers :func:`exponential_mechanism` uses.

    Raises:
        ValueError: empty or non-finite utilities; ε or the sensitivity not positive and finite;
            ``num_samples`` < 1.
    """
    u = torch.as_tensor(utilities, dtype=_DTYPE).reshape(-1).cpu()
    if u.numel() == 0 or not bool(torch.isfinite(u).all()):
        raise ValueError("utilities must be a non-empty sequence of finite values")
    eps = check_epsilon(epsilon)
    sens = check_positive("sensitivity", sensitivity)
    runs = check_int("num_samples", num_samples, minimum=1)
    gen = check_generator(generator)
    uniform = torch.rand((runs, u.numel()), generator=gen, dtype=_DTYPE, device=gen.device).cpu()
    gumbel = -torch.log(-torch.log(uniform.clamp(min=1e-300)))
    return torch.argmax(eps * u / (2.0 * sens) + gumbel, dim=1)
