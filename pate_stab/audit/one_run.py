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

For an (ε, δ)-DP claim their Theorem 3 adds a δ term: with W' ~ Binomial(r, e^ε/(1 + e^ε)) and
m canaries, P[W >= v] <= P[W' >= v] + 2mδ · max_{1<=i<=v} P[v − i <= W' < v] / i. The audit
then refutes (ε, δ) when that bound is below β.

What a one-run audit can certify is limited: even r correct guesses out of r only refute
ε < log(1/(β^{-1/r} − 1)) (about 5.8 for r = 1000 at 95 %), one canary's effect is diluted by the
others', and a bound at or below the claim is no evidence that the claim is tight.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch
from scipy import optimize, stats

from pate_stab._checks import check_delta, check_int, check_probability, check_tensor

__all__ = ["OneRunAudit", "one_run_epsilon_lower_bound", "one_run_audit", "best_one_run_audit"]


@dataclass(frozen=True)
class OneRunAudit:
    num_canaries: int
    num_guesses: int
    num_correct: int
    confidence: float
    epsilon_lower_bound: float
    delta: float = 0.0


def _p_value(eps: float, r: int, v: int, delta: float, m: int) -> float:
    """Steinke et al. 2023, Thm 3: the bound on P[W >= v] for an (ε, δ)-DP mechanism."""
    q = 1.0 / (1.0 + math.exp(-eps))
    tail = float(stats.binom.sf(v - 1, r, q))
    if delta == 0.0 or v == 0:
        return tail
    below = stats.binom.pmf(np.arange(v - 1, -1, -1), r, q)  # P[W' = v − i], i = 1..v
    spread = float(np.max(np.cumsum(below) / np.arange(1, v + 1)))  # max_i P[v − i <= W' < v] / i
    return tail + 2.0 * m * delta * spread


def one_run_epsilon_lower_bound(
    *,
    num_guesses: int,
    num_correct: int,
    confidence: float = 0.95,
    delta: float = 0.0,
    num_canaries: int | None = None,
) -> float:
    """The largest ε such that (ε', δ) is refuted for every ε' <= ε (Steinke et al. 2023, Thm 3).

    ``delta > 0`` needs ``num_canaries`` (m, the δ term grows with it). Examples: 300 correct of
    400 guesses at 95% confidence gives ε >= 0.904 (δ = 0); all 1000 of 1000 give 5.81.
    """
    r = check_int("num_guesses", num_guesses, minimum=1)
    v = check_int("num_correct", num_correct, minimum=0, maximum=r)
    beta = 1.0 - check_probability("confidence", confidence, open_interval=True)
    delta = check_delta(delta, allow_zero=True)
    if delta > 0.0:
        if num_canaries is None:
            raise ValueError("num_canaries (m) is required with delta > 0: the δ term of the bound is 2mδ·…")
        m = check_int("num_canaries", num_canaries, minimum=r)
        if _p_value(0.0, r, v, delta, m) >= beta:
            return 0.0
        # p(ε) need not be monotone in the δ term: scan, then bisect the first crossing
        grid = np.linspace(0.0, 50.0, 5001)
        refuted = [_p_value(float(e), r, v, delta, m) < beta for e in grid]
        if all(refuted):
            return 50.0
        k = refuted.index(False)
        lo, hi = float(grid[k - 1]), float(grid[k])
        while hi - lo > 1e-9:
            mid = 0.5 * (lo + hi)
            lo, hi = (mid, hi) if _p_value(mid, r, v, delta, m) < beta else (lo, mid)
        return lo

    def tail(eps: float) -> float:  # P[Binomial(r, p(ε)) >= v]
        return _p_value(eps, r, v, 0.0, r)

    if tail(0.0) >= beta:
        return 0.0
    if v == r and tail(50.0) < beta:  # all correct: the bound is log((1/β)^{1/r} − 1)^{-1}, finite
        return float(-math.log(beta ** (-1.0 / r) - 1.0))
    return float(optimize.brentq(lambda e: tail(e) - beta, 0.0, 50.0, xtol=1e-10))


def one_run_audit(
    scores: torch.Tensor, secrets: torch.Tensor, *, num_guesses: int, confidence: float = 0.95, delta: float = 0.0
) -> OneRunAudit:
    """Guess the top ``num_guesses/2`` scores as 1 and the bottom as 0; bound ε from the hits.

    Args:
        scores: (m,) the auditor's scores, computed from the released output only.
        secrets: (m,) the coins S_i in {0, 1}.
        num_guesses: r, even, <= m; fixed before the run.
        confidence: 1 − β.
        delta: the δ of the claim under audit (0 for pure DP).
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
    bound = one_run_epsilon_lower_bound(
        num_guesses=r, num_correct=correct, confidence=confidence, delta=delta, num_canaries=m
    )
    return OneRunAudit(m, r, correct, confidence, bound, delta)


def best_one_run_audit(
    scores: torch.Tensor, secrets: torch.Tensor, *, guesses: list[int], confidence: float = 0.95, delta: float = 0.0
) -> tuple[OneRunAudit, list[OneRunAudit]]:
    """:func:`one_run_audit` at each guess count, each at confidence 1 − β/len(guesses) (Bonferroni).

    The largest bound then holds at the stated confidence overall. The guess counts must be
    fixed before the run. Returns (the audit with the largest bound, all audits).
    """
    if not guesses:
        raise ValueError("guesses must list at least one guess count")
    beta = 1.0 - check_probability("confidence", confidence, open_interval=True)
    level = 1.0 - beta / len(guesses)
    audits = [one_run_audit(scores, secrets, num_guesses=r, confidence=level, delta=delta) for r in guesses]
    return max(audits, key=lambda a: a.epsilon_lower_bound), audits
