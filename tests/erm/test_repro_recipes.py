"""The reproduction recipes' data protocols and the figures quoted in docs/results/repro/."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest
import torch

from pate_stab.erm.accuracy_first import iat_epsilon
from pate_stab.erm.accuracy_problems import RidgeProblem
from pate_stab.rng import seeded_generator

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
sys.path.insert(0, str(RECIPES))

import accuracy_first as af_recipe  # noqa: E402
import repro_wu2016  # noqa: E402


def test_twitter_standin_has_the_papers_shape_and_l1_contract():
    x, y = af_recipe.twitter_standin(num_rows=3000, seed=0)
    assert x.shape == (3000, 77) and y.shape == (3000,)
    assert float(x.abs().sum(dim=1).max()) == pytest.approx(1.0)
    assert float(y.abs().max()) == pytest.approx(1.0)
    assert bool((x >= 0).all()) and bool((y >= 0).all())
    x2, y2 = af_recipe.twitter_standin(num_rows=3000, seed=0)
    assert torch.equal(x, x2) and torch.equal(y, y2)
    RidgeProblem(x, y, lam=0.005)  # accepted by the ℓ1 contract


@pytest.mark.parametrize(
    ("n", "alpha", "expected"),
    [(100_000, 0.05, 7.266), (100_000, 0.075, 4.844), (3564, 0.05, 203.9), (3564, 0.025, 407.8)],
)
def test_iat_floor_quoted_in_the_ligett_note(n, alpha, expected):
    # ε_0 = 16Δ log(2T/γ)/α with Δ = (√(1/λ) + 1)²/n, λ = 0.005, T = 1000, γ = 0.1.
    delta_q = (math.sqrt(1 / 0.005) + 1.0) ** 2 / n
    assert iat_epsilon(sensitivity=delta_q, num_levels=1000, alpha=alpha, gamma=0.1) == pytest.approx(
        expected, rel=1e-3
    )


@pytest.mark.parametrize("p, ratio", [(17, 1.82), (77, 0.41)])
def test_iat_floor_over_theory_depends_on_p_only(p, ratio):
    # ε_0 / E(α) is free of n and α: 16 (M + 1)² log(2T/γ) / (4√2 (2√(p/λ) + p/λ)), M = √(1/λ).
    lam = 0.005
    got = (
        16
        * (math.sqrt(1 / lam) + 1) ** 2
        * math.log(2000 / 0.1)
        / (4 * math.sqrt(2) * (2 * math.sqrt(p / lam) + p / lam))
    )
    assert got == pytest.approx(ratio, abs=0.01)


def test_wu_expnorm_noise_has_an_exponential_norm():
    gen = seeded_generator(0)
    norms = torch.tensor([float(repro_wu2016.expnorm_noise(0.5, 17, generator=gen).norm()) for _ in range(4000)])
    # Exp(0.5): mean 0.5, sd 0.5; 4000 draws: the mean is within 6 standard errors (α < 1e-8).
    assert abs(float(norms.mean()) - 0.5) < 6 * 0.5 / math.sqrt(4000)


def test_wu_paper_protocols_scale_to_the_unit_ball(shared_data):
    for protocol in ("paper", "paper-centered"):
        x, y, factor = repro_wu2016.load(protocol, shared_data / "warfarin")
        assert float(torch.linalg.vector_norm(x, dim=1).max()) == pytest.approx(1.0)
        assert float(y.abs().max()) == pytest.approx(1.0)
        assert factor > 0
    _, y, _ = repro_wu2016.load("paper-centered", shared_data / "warfarin")
    assert abs(float(y.mean())) < 1e-12
    with pytest.raises(ValueError, match="protocol must be one of"):
        repro_wu2016.load("nope", shared_data / "warfarin")


@pytest.mark.parametrize(("alpha", "expected"), [(0.05, 2.198), (0.075, 1.465)])
def test_iat_cost_without_the_union_bound_over_levels(alpha, expected):
    # The figure the note compares with the paper's e^ε ≈ 10.0 / 4.65: ε_0 with T = 1 (log(2/γ)).
    delta_q = (math.sqrt(1 / 0.005) + 1.0) ** 2 / 100_000
    assert iat_epsilon(sensitivity=delta_q, num_levels=1, alpha=alpha, gamma=0.1) == pytest.approx(expected, rel=1e-3)
