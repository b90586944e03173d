"""pate_stab/repro/glm_step.py: R's glm (binomial, logit) and step (AIC) for Chaudhuri & Vinterbo's Adult predictors."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.repro.glm_step import fit_logistic, independent_columns, step_aic
from pate_stab.rng import seeded_generator


def _data(n: int = 4000, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor, list[list[int]]]:
    """Term 0: strong numeric; term 1: 3-level factor (2 dummies) with a strong effect; term 2: noise."""
    gen = seeded_generator(seed)
    a = torch.randn(n, generator=gen, dtype=torch.float64)
    level = torch.randint(0, 3, (n,), generator=gen)
    noise = torch.randn(n, generator=gen, dtype=torch.float64)
    x = torch.stack([a, (level == 1).double(), (level == 2).double(), noise], dim=1)
    eta = -0.5 + 1.5 * a + 1.0 * x[:, 1] - 1.2 * x[:, 2]
    y = (torch.rand(n, generator=gen, dtype=torch.float64) < torch.sigmoid(eta)).double()
    return x, y, [[0], [1, 2], [3]]


def test_intercept_only_fit_is_the_logit_of_the_mean_and_its_deviance():
    y = torch.tensor([1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0])
    beta, dev = fit_logistic(torch.ones(8, 1, dtype=torch.float64), y)
    p = 3 / 8
    assert float(beta[0]) == pytest.approx(math.log(p / (1 - p)), abs=1e-9)
    assert dev == pytest.approx(-2 * (3 * math.log(p) + 5 * math.log(1 - p)), rel=1e-10)


def test_fit_solves_the_score_equations():
    x, y, _ = _data()
    design = torch.cat([torch.ones(x.shape[0], 1, dtype=torch.float64), x], dim=1)
    beta, dev = fit_logistic(design, y)
    score = design.T @ (y - torch.sigmoid(design @ beta))
    assert float(score.abs().max()) < 1e-6
    assert dev == pytest.approx(float(-2 * torch.nn.functional.logsigmoid((2 * y - 1) * (design @ beta)).sum()))


def test_fit_rejects_non_binary_responses():
    with pytest.raises(ValueError, match="0/1"):
        fit_logistic(torch.ones(3, 1), torch.tensor([0.0, 2.0, 1.0]))


def test_aliased_and_zero_columns_are_dropped_left_to_right():
    gen = seeded_generator(1)
    a = torch.randn(50, 2, generator=gen, dtype=torch.float64)
    x = torch.stack([a[:, 0], a[:, 1], 2 * a[:, 0] - a[:, 1], torch.zeros(50), a[:, 0] * a[:, 1]], dim=1)
    assert independent_columns(x) == [0, 1, 4]


def test_step_drops_the_noise_term_and_stops_at_an_aic_local_minimum():
    x, y, terms = _data()
    kept, trace = step_aic(x, y, terms)
    assert kept == [0, 1]
    assert [s["step"] for s in trace] == ["start", "-2"]

    def aic(active: list[int]) -> float:
        cols = [c for t in active for c in terms[t]]
        design = torch.cat([torch.ones(x.shape[0], 1, dtype=torch.float64), x[:, cols]], dim=1)
        return fit_logistic(design, y)[1] + 2 * design.shape[1]

    final = aic(kept)
    assert trace[-1]["aic"] == pytest.approx(final)
    # no single drop or re-addition improves on the returned model (R's stopping rule)
    for t in range(3):
        neighbour = sorted(set(kept) ^ {t})
        assert aic(neighbour) >= final - 1e-7


def test_screened_step_matches_the_exhaustive_one_on_one_column_terms():
    gen = seeded_generator(3)
    n = 3000
    x = torch.randn(n, 8, generator=gen, dtype=torch.float64)
    eta = 0.8 * x[:, 0] - 0.6 * x[:, 3] + 0.3 * x[:, 5]
    y = (torch.rand(n, generator=gen, dtype=torch.float64) < torch.sigmoid(eta)).double()
    terms = [[c] for c in range(8)]
    kept, trace = step_aic(x, y, terms)
    kept_s, trace_s = step_aic(x, y, terms, screen=3)
    assert kept_s == kept and {0, 3, 5} <= set(kept)
    assert [s["step"] for s in trace_s] == [s["step"] for s in trace]
    with pytest.raises(ValueError, match="one-column"):
        step_aic(x, y, [[0, 1], [2]], screen=1)


def test_adult_design_is_rs_treatment_coding(shared_data):
    from pate_stab.repro.cv2013 import adult_design

    x, y, terms, names = adult_design(shared_data, files=("adult.data",))
    assert x.shape == (30162, 96) and len(terms) == 14  # complete rows of adult.data
    assert abs(float(y.mean()) - 0.249) < 1e-3
    # treatment coding: the first (sorted) level is the baseline, one column per other level
    assert [names[c] for c in terms[9]] == ["sex=Male"]
    assert len(terms[3]) == 15 and "education=10th" not in names  # 16 levels, "10th" first
    assert bool(((x[:, terms[3]].sum(dim=1) == 0) | (x[:, terms[3]].sum(dim=1) == 1)).all())


def test_unit_ball_scalings_from_the_data():
    from pate_stab.repro.cv2013 import unit_ball_from_data

    gen = seeded_generator(4)
    x = torch.rand(500, 6, generator=gen, dtype=torch.float64) * torch.tensor([1, 10, 100, 1e3, 1e4, 1e5]) + 3.0
    for scaling in ("minmax", "zscore"):
        xs = unit_ball_from_data(x, scaling)
        assert float(torch.linalg.vector_norm(xs, dim=1).max()) == pytest.approx(1.0)
    xs = unit_ball_from_data(x, "minmax")
    assert float(xs.min()) == 0.0
    assert float(unit_ball_from_data(x, "zscore").mean(dim=0).abs().max()) < 1e-12
    with pytest.raises(ValueError, match="scaling must be"):
        unit_ball_from_data(x, "rank")
