"""The plan: what each aggregator's calibration implies at a data set's size, and that a run refuses
exactly what the plan calls unanswerable (a grid of sizes through run_transfer)."""

from __future__ import annotations

import math

import pytest
import torch

from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.plan import _baseline_row, analytic_gaussian_mu, laplace_difference_tail, plan_run
from pate_stab.aggregation.registry import AggregatorSettings, calibrated_noise
from pate_stab.audit.harness import clopper_pearson
from pate_stab.cli.commands import main
from pate_stab.privacy.noise.seeded import laplace
from pate_stab.run.config import TransferConfig
from pate_stab.run.prepare import BudgetTooSmallError
from pate_stab.run.transfer import run_transfer
from pate_stab.theory import teachers_for_unanimous_answer

ALPHA = 1e-6  # false-failure rate of each statistical assertion (Clopper–Pearson)


def test_laplace_difference_tail_pinned_and_sampled():
    assert laplace_difference_tail(0.0, 2.0) == 0.5
    assert laplace_difference_tail(2.0, 2.0) == pytest.approx(0.75 * math.exp(-1.0), rel=1e-12)
    gen = torch.Generator().manual_seed(0)
    n, b, t = 200_000, 3.0, 5.0
    diff = laplace(b, (n,), generator=gen) - laplace(b, (n,), generator=gen)
    lo, hi = clopper_pearson(int((diff > t).sum()), n, ALPHA)
    assert lo <= laplace_difference_tail(t, b) <= hi


def test_analytic_gaussian_pinned():
    assert analytic_gaussian_mu(epsilon=1.0, delta=1e-5) == pytest.approx(0.26805, abs=1e-5)
    with pytest.raises(ValueError, match="δ in"):
        analytic_gaussian_mu(epsilon=1.0, delta=0.0)


def test_plan_noise_is_the_releases_noise():
    """The plan's σ is the σ the release draws: the RDP calibration of secure (discrete Gaussian)
    noise, the default; for seeded noise, the closed form equals the PLD calibration (to its
    discretisation)."""
    plan = plan_run(num_private=1000, num_classes=10, num_queries=50, epsilon=4.0, delta=1e-5, max_unstable=5)
    assert plan.row("gnmax").noise["sigma"] == GNMax.calibrate(epsilon=4.0, delta=1e-5, num_queries=50).sigma
    seeded = AggregatorSettings(epsilon=4.0, delta=1e-5, num_queries=50, num_teachers=100, max_unstable=5,
                                noise="seeded")  # fmt: skip
    mu = analytic_gaussian_mu(epsilon=4.0, delta=1e-5)
    assert _baseline_row("gnmax", seeded, 1000, 10, True).noise["sigma"] == pytest.approx(math.sqrt(2 * 50) / mu)
    assert math.sqrt(2 * 50) / mu == pytest.approx(
        GNMax.calibrate(epsilon=4.0, delta=1e-5, num_queries=50, noise="seeded").sigma, rel=1e-3
    )
    assert plan.row("lnmax").noise["b"] == LNMax.calibrate(epsilon=4.0, delta=1e-5, num_queries=50).noise_scale
    settings = AggregatorSettings(epsilon=4.0, delta=1e-5, num_queries=50, num_teachers=1, max_unstable=5)
    cal = calibrated_noise("stability", settings)
    stab = plan.row("stability")
    assert stab.noise == {"lambda": cal.noise_scale, "threshold_w": cal.threshold}
    # the stability releaser's gap needed is the k at which a unanimous vote passes (DESIGN fact 2)
    assert stab.teachers_needed == stab.gap_needed == teachers_for_unanimous_answer(cal)


@pytest.mark.slow
def test_plan_confident_noise_is_the_releases_noise():
    plan = plan_run(num_private=1000, num_classes=10, num_queries=50, epsilon=4.0, delta=1e-5, max_unstable=5,
                    num_teachers=300)  # fmt: skip
    ref = ConfidentGNMax.calibrate(epsilon=4.0, delta=1e-5, num_queries=50, threshold=180.0)
    assert plan.row("confident-gnmax").noise["sigma2"] == pytest.approx(ref.sigma2, rel=1e-3)
    assert plan.row("confident-gnmax").noise["sigma1"] == pytest.approx(ref.sigma1, rel=1e-3)


@pytest.mark.statistical
@pytest.mark.parametrize("name", ["lnmax", "gnmax"])
def test_gap_needed_gives_the_plurality_with_probability_095(name):
    """At the planned gap (every competitor that far behind) the released label is the plurality
    w.p. ≥ 0.95; at half the gap it is not — so a wrong noise scale in the plan is caught."""
    c, k, n = 10, 400, 20_000
    plan = plan_run(num_private=10_000, num_classes=c, num_queries=200, epsilon=3.0, delta=1e-5, max_unstable=5)
    gap = plan.row(name).gap_needed
    settings = AggregatorSettings(epsilon=3.0, delta=1e-5, num_queries=200, num_teachers=k, max_unstable=5)
    mechanism = calibrated_noise(name, settings)
    gen = torch.Generator().manual_seed(1)
    for g, holds in ((math.ceil(gap), True), (math.floor(gap / 2), False)):
        counts = torch.full((c,), 20, dtype=torch.int64)
        counts[0] += g
        wrong = int((mechanism.sample(counts, n, generator=gen) != 0).sum())  # n independent draws
        lo, hi = clopper_pearson(wrong, n, ALPHA)
        assert (lo <= 0.05) if holds else (lo > 0.05), (name, g, wrong / n)


class _Trained(Exception):
    """Raised in place of teacher training: the run got past its budget check."""


@pytest.mark.parametrize("calibration", ["tight", "paper"])
def test_planned_unanswerable_iff_refused(tmp_path, monkeypatch, calibration):
    """Over a grid of sizes the plan that transfer prints says 'cannot answer' exactly when the run
    refuses (BudgetTooSmallError before any training), and pate-stab plan says the same."""

    def no_training(*args, **kwargs):
        raise _Trained

    monkeypatch.setattr("pate_stab.teachers.registry.train_teachers", no_training)
    outcomes = set()
    grid = [(k, eps, m, t) for k in (40, 150, 700) for eps in (2.0, 8.0) for m, t in ((60, 2), (300, 10))]
    for i, (k, eps, m, t) in enumerate(grid):
        config = TransferConfig(
            run_name=f"g{i}", checkpoints_dir=str(tmp_path), num_private=900, num_public=m, num_eval=30,
            num_teachers=k, epsilon=eps, max_unstable=t, num_queries=m, calibration=calibration, accelerator="cpu",
        )  # fmt: skip
        printed = []
        try:
            run_transfer(config, on_plan=printed.append)
            refused = False
        except BudgetTooSmallError as exc:
            refused = True
            assert "PATE aggregator" in str(exc)
        except _Trained:
            refused = False
        (plan,) = printed
        assert plan.row("stability").answerable is (not refused), (k, eps, m, t)
        alone = plan_run(num_private=900, num_classes=3, num_queries=m, epsilon=eps, delta=1e-5, max_unstable=t,
                         num_teachers=k, calibration=calibration)  # fmt: skip
        assert alone.row("stability") == plan.row("stability")
        outcomes.add(refused)
    assert outcomes == {True, False}  # the grid has both sides


def test_plan_command(capsys):
    assert main(["plan", "--num-private", "1200", "--num-classes", "10", "--num-queries", "450", "--epsilon", "8",
                 "--num-teachers", "150"]) == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "stability" in out and "CANNOT answer" in out and "gnmax" in out and "recommendation" in out
    assert "a PATE aggregator" in out and "smaller" in out and "larger ε" in out
    with pytest.raises(SystemExit) as info:
        main(["plan", "--num-private", "1200", "--num-classes", "1", "--num-queries", "450", "--epsilon", "8"])
    assert info.value.code == 2 and "num_classes" in capsys.readouterr().err
