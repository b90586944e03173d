"""RRWithPrior (Ghazi et al. 2021, Alg 2): the keep probability, k*, the output law (chi-square at the
suite's α), the privacy claim by the DP test harness, and exact, seeded-or-OS randomness."""

from __future__ import annotations

import math
from fractions import Fraction

import pytest
import torch
from scipy import stats

from pate_stab.audit.harness import dp_test
from pate_stab.audit.mechanism_samplers import rr_with_prior_sampler
from pate_stab.privacy.mechanisms.randomized_response import (
    KEEP_DENOMINATOR,
    randomized_response,
    rr_keep_probability,
    rr_optimal_k,
    rr_top_k,
    rr_with_prior,
)
from pate_stab.privacy.noise.discrete import SeededRandomSource
from pate_stab.rng import seeded_generator
from tests._stats import ALPHA, assert_not_refuted, assert_refuted


@pytest.mark.parametrize("epsilon", [0.1, 1.0, 2.0, 3.0, 8.0, 40.0])
@pytest.mark.parametrize("k", [2, 3, 10, 100])
def test_keep_probability_is_just_below_the_papers_and_keeps_every_ratio_below_e_eps(epsilon, k):
    q = rr_keep_probability(epsilon, k)
    paper = math.exp(epsilon) / (math.exp(epsilon) + k - 1)
    assert q.denominator <= KEEP_DENOMINATOR and 0 < float(q) < paper
    assert paper - float(q) < 3 / KEEP_DENOMINATOR
    # the three probability ratios of RR-Top-k (module docstring), with the rational q
    for ratio in (q * (k - 1) / (1 - q), k * q, Fraction(k - 1) / (k * (1 - q))):
        assert float(ratio) < math.exp(epsilon)
    assert rr_keep_probability(epsilon, 1) == 1


def _brute_force_k(prior: list[float], epsilon: float) -> int:
    order = sorted(range(len(prior)), key=lambda c: (-prior[c], c))
    values = [math.exp(epsilon) / (math.exp(epsilon) + k - 1) * sum(prior[c] for c in order[:k])
              for k in range(1, len(prior) + 1)]  # fmt: skip
    return 1 + max(range(len(values)), key=lambda i: (values[i], -i))


def test_k_star_maximises_the_papers_objective():
    gen = seeded_generator(3)
    for epsilon in (0.5, 1.0, 2.0, 4.0):
        prior = torch.rand(200, 10, generator=gen, dtype=torch.float64) ** 4  # peaked, ties of probability 0
        k, order = rr_optimal_k(prior, epsilon)
        assert k.tolist() == [_brute_force_k(p.tolist(), epsilon) for p in prior]
        assert torch.equal(torch.gather(prior, 1, order), torch.sort(prior, dim=1, descending=True).values)
    # the uniform prior gives C (plain randomised response), a sure prior 1, a prior on two classes 2
    assert rr_optimal_k(torch.full((1, 10), 0.1), 1.0)[0].item() == 10
    assert rr_optimal_k(torch.tensor([[0.0, 1.0, 0.0]]), 1.0)[0].item() == 1
    assert rr_optimal_k(torch.tensor([[0.5, 0.5, 0.0, 0.0]]), 1.0)[0].item() == 2


def _chi_square_p(counts: torch.Tensor, probs: list[float]) -> float:
    n = int(counts.sum())
    keep = [i for i, p in enumerate(probs) if p > 0]
    assert all(int(counts[i]) == 0 for i, p in enumerate(probs) if p == 0)  # no output outside the set
    return float(stats.chisquare(counts[keep].numpy(), [n * probs[i] for i in keep]).pvalue)


@pytest.mark.parametrize("label", [0, 2, 3])
def test_output_law_matches_the_formula(label):
    """Prior (0.3, 0.3, 0.3, 0.1) at ε = 1: k* = 3, Y = {0, 1, 2}. A label in Y is kept with probability
    q and otherwise moves uniformly to the other two; label 3 goes uniformly to Y. Chi-square at α."""
    n, epsilon = 200_000, 1.0
    prior = torch.tensor([[0.3, 0.3, 0.3, 0.1]]).expand(n, -1)
    assert rr_optimal_k(prior[:1], epsilon)[0].item() == 3
    out = rr_with_prior(torch.full((n,), label), prior, epsilon, source=SeededRandomSource(label))
    q = float(rr_keep_probability(epsilon, 3))
    probs = [1 / 3, 1 / 3, 1 / 3, 0.0] if label == 3 else [q if c == label else (1 - q) / 2 for c in range(3)] + [0.0]
    assert _chi_square_p(torch.bincount(out, minlength=4), probs) > ALPHA


def test_randomized_response_is_c_ary():
    n, epsilon, c = 200_000, 0.5, 5
    out = randomized_response(torch.full((n,), 2), c, epsilon, source=SeededRandomSource(7))
    q = float(rr_keep_probability(epsilon, c))
    assert _chi_square_p(torch.bincount(out, minlength=c), [q if i == 2 else (1 - q) / 4 for i in range(c)]) > ALPHA


def test_randomness_is_seeded_or_from_the_os():
    labels, prior = torch.randint(0, 4, (500,)), torch.rand(500, 4)
    a = rr_with_prior(labels, prior, 1.0, source=SeededRandomSource(5))
    assert torch.equal(a, rr_with_prior(labels, prior, 1.0, source=SeededRandomSource(5)))
    os_draws = [rr_with_prior(labels, prior, 1.0) for _ in range(2)]  # the default: os.urandom
    assert not torch.equal(*os_draws)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match=r"labels must lie in \[0, 3\)"):
        rr_with_prior(torch.tensor([3]), torch.ones(1, 3), 1.0)
    with pytest.raises(ValueError, match="non-negative"):
        rr_with_prior(torch.tensor([0]), torch.tensor([[-0.1, 1.0]]), 1.0)
    with pytest.raises(ValueError, match="permutation"):
        rr_top_k(torch.tensor([0]), torch.tensor([[0, 0, 1]]), torch.tensor([2]), 1.0)
    with pytest.raises(ValueError, match="epsilon"):
        randomized_response(torch.tensor([0]), 3, 0.0)


PRIOR = [0.5, 0.3, 0.1, 0.05, 0.05]  # at ε = 1: k* = 2, Y = {0, 1}


@pytest.mark.statistical
def test_dp_test_accepts_rr_with_prior_and_flags_its_mutations():
    """Labels 0 and 1 (both in Y): P[0] moves by exactly the claimed e^ε; label 4 (outside Y) vs 0."""
    gen = seeded_generator(11)
    kwargs = {"epsilon": 1.0, "num_samples": 200_000, "alpha": ALPHA, "generator": gen}
    assert_not_refuted(dp_test(rr_with_prior_sampler(PRIOR, 1.0), 0, 1, **kwargs))
    assert_not_refuted(dp_test(rr_with_prior_sampler(PRIOR, 1.0), 0, 4, **kwargs))
    assert_refuted(dp_test(rr_with_prior_sampler(PRIOR, 1.0, keep_epsilon=2.0), 0, 1, **kwargs))
    assert_refuted(dp_test(rr_with_prior_sampler(PRIOR, 1.0, label_in_set=True), 0, 4, **kwargs))
