"""The reproduction recipes' data protocols and the figures quoted in docs/results/repro/."""

from __future__ import annotations

import csv
import json
import math
import sys

import pytest
import torch

from pate_stab.erm.accuracy_first import iat_epsilon
from pate_stab.erm.accuracy_problems import RidgeProblem
from pate_stab.repro import cv2013_direction
from pate_stab.repro.cv2013 import ALPHAS, METHODS, unit_ball_from_data
from pate_stab.rng import seeded_generator
from tests._recipes import load_recipe

af_recipe = load_recipe("repro/accuracy_first.py")
cv2013 = load_recipe("repro/chaudhuri_vinterbo2013.py")
repro_wu2016 = load_recipe("repro/wu2016.py")


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


def test_kdd_paper_normalisation_is_the_papers(tmp_path):
    """App. B.1: text columns dropped, log(1 + x) on the first three attributes, rows / max ℓ1 norm."""
    import gzip

    def record(duration, src, dst, count, label):
        vals = [duration, "tcp", "http", "SF", src, dst] + [0] * 16 + [count] + [0] * 18
        return ",".join(str(v) for v in vals) + f",{label}\n"

    (tmp_path / "kddcup99").mkdir()
    with gzip.open(tmp_path / "kddcup99" / "kddcup.data_10_percent.gz", "wt") as f:
        f.write(record(0, 181, 5450, 8, "normal."))
        f.write(record(2, 0, 0, 511, "smurf."))
    x, y = af_recipe.load_kdd_paper(tmp_path, num_rows=10)
    raw = torch.tensor(
        [
            [0.0, math.log1p(181), math.log1p(5450)] + [0.0] * 16 + [8.0] + [0.0] * 18,
            [math.log1p(2), 0.0, 0.0] + [0.0] * 16 + [511.0] + [0.0] * 18,
        ],
        dtype=torch.float64,
    )
    assert x.shape == (2, 38)
    assert torch.allclose(x, raw / raw.abs().sum(dim=1).max())
    assert y.tolist() == [-1.0, 1.0]


@pytest.mark.parametrize(("alpha", "expected"), [(0.05, 2.198), (0.075, 1.465)])
def test_iat_cost_without_the_union_bound_over_levels(alpha, expected):
    # The figure the note compares with the paper's e^ε ≈ 10.0 / 4.65: ε_0 with T = 1 (log(2/γ)).
    delta_q = (math.sqrt(1 / 0.005) + 1.0) ** 2 / 100_000
    assert iat_epsilon(sensitivity=delta_q, num_levels=1, alpha=alpha, gamma=0.1) == pytest.approx(expected, rel=1e-3)


def test_cv2013_report_json_takes_path_arguments(tmp_path, monkeypatch):
    # The report writer once crashed after a finished run: vars(args) holds pathlib.Path values
    # (--step-cache, --from-csv) that json.dumps cannot encode. Summarise a tiny results.csv.
    rows = tmp_path / "results.csv"
    with open(rows, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["dataset", "round", "alpha", "method", "theta", "auc", "mse"])
        writer.writeheader()
        for rnd in range(2):
            for alpha in ALPHAS:
                for method in METHODS:
                    writer.writerow({"dataset": "Adult-paper", "round": rnd, "alpha": alpha, "method": method,
                                     "theta": 0.001, "auc": 0.8 + 0.01 * rnd, "mse": 0.2})  # fmt: skip
    step = tmp_path / "step.json"
    step.write_text(json.dumps({"selected_predictors": 2, "selected_columns": ["age", "fnlwgt"]}))
    out = tmp_path / "out"
    argv = ["x", "--dataset", "Adult", "--protocols", "paper", "--from-csv", str(rows), "--step-cache", str(step)]
    monkeypatch.setattr(sys, "argv", [*argv, "--out", str(out)])
    cv2013.main()
    report = json.loads((out / "report.json").read_text())
    assert report["config"]["step_cache"] == str(step) and report["config"]["from_csv"] == str(rows)
    assert report["paper_predictors"]["selected_predictors"] == 2
    cell = report["summary"]["paper/Random/1.0"]
    assert cell["runs"] == 2 and cell["auc"] == pytest.approx(0.805)


def _nonnegative_imbalanced(n: int = 2000) -> tuple[torch.Tensor, torch.Tensor]:
    """x1 = 0.5 + 0.3 [y = 1] + N(0, 0.1²) (informative), x2 ~ U(0.5, 1) (noise); P(y = 1) = 1/4."""
    gen = seeded_generator(0)
    y01 = (torch.rand(n, generator=gen) < 0.25).double()
    x1 = (0.5 + 0.3 * y01 + 0.1 * torch.randn(n, generator=gen, dtype=torch.float64)).clamp_min(0)
    x2 = 0.5 + 0.5 * torch.rand(n, generator=gen, dtype=torch.float64)
    return torch.stack([x1, x2], dim=1), y01 * 2 - 1


def test_direction_auc_centring_changes_the_ranking():
    x, y = _nonnegative_imbalanced()
    out = {}
    for scaling in ("minmax", "zscore"):
        xs = unit_ball_from_data(x, scaling)
        rows = cv2013_direction.direction_auc(xs, y, generator=seeded_generator(1), thetas=[1.0])
        out[scaling] = cv2013_direction.summarise(rows)
        assert out[scaling]["rounds"] == 10
        # theta = 1: the fit ranks as its first-order term s = sum y_i x_i does.
        assert out[scaling]["auc_fit"]["1.0"]["mean"] == pytest.approx(out[scaling]["auc_direction"]["mean"], abs=0.02)
    # Centred, s's mean-row pull (sum y_i = -n/2) is gone: E s ∝ (0.1125, 0) up to scaling, so x.s ranks
    # by x1 alone, AUC Φ(0.3 / (0.1 √2)) = Φ(2.121) = 0.983.
    assert out["zscore"]["auc_direction"]["mean"] == pytest.approx(0.983, abs=0.02)
    # Min-max: E s ∝ (0.25 μ1+ − 0.75 μ1−, −0.25) has both weights negative (μ1+ = 0.65, μ1− = 0.31 on
    # the [0, 1] scale): s points along minus the mean row and ranks the positives low.
    assert out["minmax"]["cos_minus_mean"]["mean"] > 0.9
    assert out["minmax"]["auc_direction"]["mean"] < 0.45


def test_direction_auc_rejects_bad_input():
    x, y = _nonnegative_imbalanced(100)
    with pytest.raises(ValueError, match="labels in"):
        cv2013_direction.direction_auc(x, (y > 0).double(), generator=seeded_generator(0), thetas=[1.0])
    with pytest.raises(ValueError, match="rounds must be"):
        cv2013_direction.direction_auc(x, y, generator=seeded_generator(0), thetas=[1.0], rounds=11)
    with pytest.raises(ValueError, match="y \\(n,\\)"):
        cv2013_direction.direction_auc(x, y[:50], generator=seeded_generator(0), thetas=[1.0])


def test_direction_diagnosis_runs_on_magic_too(tmp_path):
    """One protocol on both data sets: the min-max vs z-score diagnosis takes Magic's columns (a fake file here)."""
    gen = torch.Generator().manual_seed(3)
    n = 400
    x = torch.rand(n, 10, generator=gen, dtype=torch.float64) * 50 + 10
    y = (x[:, 0] + 0.5 * x[:, 1] + 10 * torch.randn(n, generator=gen, dtype=torch.float64) > 47).tolist()
    (tmp_path / "magic").mkdir()
    (tmp_path / "magic" / "magic04.data").write_text(
        "\n".join(
            ",".join(f"{v:.4f}" for v in row) + ("," + ("g" if lab else "h"))
            for row, lab in zip(x.tolist(), y, strict=True)
        )
        + "\n"
    )
    out = tmp_path / "out"
    res = cv2013_direction.diagnose_direction(
        tmp_path, step_cache=None, seeds=[0], thetas=[1.0], out=out, dataset="Magic"
    )
    assert res["dataset"] == "Magic"
    assert set(res["scalings"]) == {"minmax", "zscore"}
    assert res["scalings"]["zscore"]["columns"] == 10 and res["scalings"]["zscore"]["rows"] == n
    assert (out / "cv2013_magic_direction.json").exists() and (out / "cv2013_magic_direction.txt").exists()
    with pytest.raises(ValueError, match="dataset"):
        cv2013_direction.diagnose_direction(tmp_path, step_cache=None, seeds=[0], thetas=[1.0], out=out, dataset="Iris")
