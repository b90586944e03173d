"""One-run privacy auditing (Steinke, Nasr & Jagielski 2023, "Privacy auditing with one (1) training run").

m canaries each enter the training set in one of two versions according to an independent fair
coin S_i (under the replace-one relation the two versions are neighbours). After one training
run an auditor scores every canary from the released output, guesses S_i = 1 for the
``num_guesses/2`` highest scores and S_i = 0 for the lowest, and abstains on the rest. For an
ε-DP mechanism the number of correct guesses W among r guesses is stochastically dominated by
Binomial(r, e^ε/(1 + e^ε)) (their Theorem 3 with δ = 0), so observing W = v certifies, with
confidence 1 − β, every ε with P[Binomial(r, e^ε/(1 + e^ε)) >= v] < β as too small: the lower
bound is the largest such ε. Its validity needs the coins to be fair and independent and the
number of guesses fixed before looking at the coins.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from scipy import optimize, stats

from pate_stab._validation import check_int, check_probability, check_tensor

__all__ = ["OneRunAudit", "one_run_epsilon_lower_bound", "one_run_audit"]


@dataclass(frozen=True)
class OneRunAudit:
    num_canaries: int
    num_guesses: int
    num_correct: int
    confidence: float
    epsilon_lower_bound: float


def one_run_epsilon_lower_bound(*, num_guesses: int, num_correct: int, confidence: float = 0.95) -> float:
    """The largest ε refuted by ``num_correct`` of ``num_guesses`` (pure DP; Steinke et al. 2023, Thm 3).

    Example: 300 correct of 400 guesses at 95% confidence gives ε >= 0.904.
    """
    r = check_int("num_guesses", num_guesses, minimum=1)
    v = check_int("num_correct", num_correct, minimum=0, maximum=r)
    beta = 1.0 - check_probability("confidence", confidence, open_interval=True)

    def tail(eps: float) -> float:  # P[Binomial(r, p(ε)) >= v]
        p = 1.0 / (1.0 + math.exp(-eps))
        return float(stats.binom.sf(v - 1, r, p))

    if tail(0.0) >= beta:
        return 0.0
    if v == r and tail(50.0) < beta:  # all correct: the bound is log((1/β)^{1/r} − 1)^{-1}, finite
        return float(-math.log(beta ** (-1.0 / r) - 1.0))
    return float(optimize.brentq(lambda e: tail(e) - beta, 0.0, 50.0, xtol=1e-10))


def one_run_audit(
    scores: torch.Tensor, secrets: torch.Tensor, *, num_guesses: int, confidence: float = 0.95
) -> OneRunAudit:
    """Guess the top ``num_guesses/2`` scores as 1 and the bottom as 0; bound ε from the hits.

    Args:
        scores: (m,) the auditor's scores, computed from the released output only.
        secrets: (m,) the coins S_i in {0, 1}.
        num_guesses: r, even, <= m; fixed before the run.
        confidence: 1 − β.
    """
    scores = check_tensor("scores", scores, ndim=1, floating=True)
    secrets = check_tensor("secrets", secrets, ndim=1, floating=False)
    m = scores.numel()
    if secrets.numel() != m:
        raise ValueError(f"scores ({m}) and secrets ({secrets.numel()}) differ in length")
    r = check_int("num_guesses", num_guesses, minimum=2, maximum=m)
    if r % 2:
        raise ValueError(f"num_guesses must be even, got {r}")
    order = torch.argsort(scores.to(torch.float64), descending=True)
    top, bottom = order[: r // 2], order[m - r // 2 :]
    correct = int((secrets[top] == 1).sum()) + int((secrets[bottom] == 0).sum())
    return OneRunAudit(m, r, correct, confidence,
                       one_run_epsilon_lower_bound(num_guesses=r, num_correct=correct, confidence=confidence))
