"""One-run auditing (Steinke, Nasr & Jagielski 2023): the bound's arithmetic and both outcomes on a head."""

from __future__ import annotations

import math

import pytest
import torch
from scipy import stats

from pate_stab.audit.one_run import one_run_audit, one_run_epsilon_lower_bound
from pate_stab.erm.heads import PrivateLinearHead


def test_bound_pinned_and_at_the_boundary():
    eps = one_run_epsilon_lower_bound(num_guesses=400, num_correct=300, confidence=0.95)
    assert eps == pytest.approx(0.9042, abs=1e-3)
    p = 1 / (1 + math.exp(-eps))
    assert stats.binom.sf(299, 400, p) == pytest.approx(0.05, rel=1e-6)  # exactly the β-level tail
    assert one_run_epsilon_lower_bound(num_guesses=100, num_correct=50) == 0.0
    assert one_run_epsilon_lower_bound(num_guesses=100, num_correct=100) == pytest.approx(
        -math.log(0.05 ** (-1 / 100) - 1)
    )
    bounds = [one_run_epsilon_lower_bound(num_guesses=200, num_correct=v) for v in range(100, 201, 10)]
    assert bounds == sorted(bounds)


def test_bad_arguments():
    with pytest.raises(ValueError, match="num_correct"):
        one_run_epsilon_lower_bound(num_guesses=10, num_correct=11)
    with pytest.raises(ValueError, match="even"):
        one_run_audit(torch.zeros(10, dtype=torch.float64), torch.zeros(10, dtype=torch.int64), num_guesses=3)
    with pytest.raises(ValueError, match="scores"):
        one_run_audit(torch.tensor([math.nan, 0.0]), torch.tensor([0, 1]), num_guesses=2)


def _audit(train_epsilon: float, seed: int, m: int = 300):
    gen = torch.Generator().manual_seed(seed)
    secrets = torch.randint(0, 2, (m,), generator=gen)
    x = torch.eye(m, dtype=torch.float64)
    head = PrivateLinearHead(epsilon=train_epsilon, lam=1e-2, loss="logistic", classes=(-1, 1)).fit(
        x, (2 * secrets - 1).double(), generator=gen
    )
    return one_run_audit(head.decision_function(x), secrets, num_guesses=200)


def test_correct_head_is_not_refuted_and_broken_head_is():
    claim = 1.0
    # over seeds, a correct head's 95% bound exceeds its claim with probability <= 5%; this seed is fixed
    assert _audit(claim, seed=1).epsilon_lower_bound <= claim
    assert _audit(1000 * claim, seed=2).epsilon_lower_bound > claim  # 1000× too little noise


def test_bound_with_delta():
    """Steinke et al. 2023, Thm 3 with δ > 0: at the bound the p-value is β; δ → 0 gives the pure bound."""
    from pate_stab.audit.one_run import _p_value

    kw = {"num_guesses": 400, "num_correct": 300, "confidence": 0.95}
    pure = one_run_epsilon_lower_bound(**kw)
    tiny = one_run_epsilon_lower_bound(**kw, delta=1e-12, num_canaries=1000)
    some = one_run_epsilon_lower_bound(**kw, delta=1e-5, num_canaries=1000)
    more = one_run_epsilon_lower_bound(**kw, delta=1e-4, num_canaries=1000)
    assert tiny == pytest.approx(pure, abs=1e-6) and pure > some > more > 0
    assert _p_value(some, 400, 300, 1e-5, 1000) == pytest.approx(0.05, rel=1e-6)
    # the δ term grows with the number of canaries
    assert one_run_epsilon_lower_bound(**kw, delta=1e-4, num_canaries=4000) < more
    with pytest.raises(ValueError, match="num_canaries"):
        one_run_epsilon_lower_bound(**kw, delta=1e-5)
