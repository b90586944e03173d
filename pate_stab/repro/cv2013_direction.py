"""Why Random trails Control on Adult under min-max scaling (Chaudhuri & Vinterbo 2013, Fig. 1).

For the logistic loss, F(w) = (1/n) sum_i log(1 + exp(-y_i w.x_i)) + (theta/2)||w||^2 has the
gradient -(1/(2n)) sum_i y_i x_i at w = 0 (log-sigmoid's slope is 1/2 there), so for a large theta
the minimiser is close to its first-order term w ~ (1/(2 n theta)) sum_i y_i x_i. Random draws
theta >= 0.112 with probability 9/10, so its ranking is, to first order, that of the direction
s = sum_i y_i x_i. With non-negative (min-max) columns and a 3 : 1 class imbalance (sum_i y_i =
-n/2), s is pulled towards minus the mean row; centring the columns removes that pull
(sum_i y_i (x_i - mean) = s + (n/2) mean).

:func:`direction_auc` measures this on the CV splits of ``run_dataset`` (the generator's first
permutation, fold r the test set, fold r + 1 the validation set, the other 8 the training set):
per round, the test AUC of the score x.s (s from the training folds), the cosine between s and
minus the training mean row, and the test AUC of the **non-private** logistic fit at each theta
(:func:`pate_stab.erm.solve_erm`). :func:`diagnose_direction` runs it on the paper protocol's
columns (Adult or Magic) under min-max and z-score scaling and writes
``cv2013_<dataset>_direction.{txt,json}``.
Not private (the paper protocol reads ranges and labels of all rows); a diagnosis, not a release.

    python recipes/repro/chaudhuri_vinterbo2013.py --dataset Adult --diagnose direction --repeats 10 \
        --step-cache docs/results/repro/cv2013_adult_step.json --out docs/results/repro
    python recipes/repro/chaudhuri_vinterbo2013.py --dataset Magic --diagnose direction --repeats 10 \
        --out docs/results/repro
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path

import torch

from pate_stab.erm import solve_erm
from pate_stab.repro.cv2013 import auc, load_adult_paper, load_magic_paper
from pate_stab.rng import seeded_generator

SCALINGS = ("minmax", "zscore")


def direction_auc(
    x: torch.Tensor, y: torch.Tensor, *, generator: torch.Generator, thetas: list[float], rounds: int = 10
) -> list[dict]:
    """Per CV round: AUC of x.s (s = sum of y_i x_i over the training folds), cos(s, -mean row), fits' AUCs.

    ``x`` (n, d), ``y`` in {-1, 1}; the folds come from ``torch.randperm(n, generator=generator)``
    as in :func:`pate_stab.repro.cv2013.run_dataset`.
    """
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, d) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    if not bool(((y == 1) | (y == -1)).all()):
        raise ValueError("y must hold labels in {-1, 1}")
    if not 1 <= rounds <= 10:
        raise ValueError(f"rounds must be in 1..10 (10-fold CV), got {rounds}")
    x, y = x.double(), y.double()
    perm = torch.randperm(x.shape[0], generator=generator)
    x, y = x[perm], y[perm]
    folds = torch.tensor_split(torch.arange(x.shape[0]), 10)
    rows = []
    for rnd in range(rounds):
        test = folds[rnd]
        train = torch.cat([f for j, f in enumerate(folds) if j not in (rnd, (rnd + 1) % 10)])
        xt, yt, xw, yw = x[train], y[train], x[test], y[test]
        s = (yt[:, None] * xt).sum(dim=0)
        minus_mean = -xt.mean(dim=0)
        cos = float(s @ minus_mean / (s.norm() * minus_mean.norm()).clamp_min(1e-300))
        fits = {str(th): auc(xw @ solve_erm(xt, yt, loss="logistic", lam=th).weights, yw) for th in thetas}
        rows.append({"round": rnd, "auc_direction": auc(xw @ s, yw), "cos_minus_mean": cos, "auc_fit": fits})
    return rows


def summarise(rows: list[dict]) -> dict:
    """Mean and s.d. over rounds of each quantity of :func:`direction_auc`'s rows."""

    def ms(values: list[float]) -> dict:
        return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}

    thetas = list(rows[0]["auc_fit"])
    return {
        "rounds": len(rows),
        "auc_direction": ms([r["auc_direction"] for r in rows]),
        "cos_minus_mean": ms([r["cos_minus_mean"] for r in rows]),
        "auc_fit": {th: ms([r["auc_fit"][th] for r in rows]) for th in thetas},
    }


def diagnose_direction(
    data_root: Path,
    *,
    step_cache: Path | None,
    seeds: list[int],
    thetas: list[float],
    out: Path,
    dataset: str = "Adult",
) -> dict:
    """Both scalings of the paper protocol's columns (Adult: the 66 step columns; Magic: its 10), one
    10-fold CV per seed; writes ``cv2013_<dataset>_direction.{txt,json}``."""
    if dataset not in ("Adult", "Magic"):
        raise ValueError(f"dataset must be 'Adult' or 'Magic', got {dataset!r}")
    t0 = time.time()
    result: dict = {"dataset": dataset, "seeds": seeds, "thetas": thetas, "scalings": {}}
    for scaling in SCALINGS:
        if dataset == "Adult":
            x, y, _ = load_adult_paper(data_root, cache=step_cache, scaling=scaling)
        else:
            x, y = load_magic_paper(data_root, scaling=scaling)
        rows = []
        for seed in seeds:
            rows += [{"seed": seed, **r} for r in direction_auc(x, y, generator=seeded_generator(seed), thetas=thetas)]
        result["scalings"][scaling] = {
            "columns": x.shape[1],
            "rows": x.shape[0],
            "positive_share": float((y > 0).double().mean()),
            "summary": summarise(rows),
            "per_round": rows,
        }
    result["seconds"] = time.time() - t0
    out.mkdir(parents=True, exist_ok=True)
    stem = f"cv2013_{dataset.lower()}_direction"
    (out / f"{stem}.json").write_text(json.dumps(result, indent=1))
    lines = [
        f"{dataset}, paper protocol ({result['scalings']['minmax']['columns']} columns, rows / largest "
        f"norm), {len(seeds)} x 10-fold CV (seeds {seeds[0]}..{seeds[-1]}: the recipe's splits), "
        "mean ± s.d. over rounds; NOT private",
        "score x.s, s = sum_i y_i x_i over the training folds; non-private logistic fits at theta",
        "",
        "scaling   AUC(x.s)        cos(s, -mean row)  " + "".join(f"fit th={th:<8}" for th in thetas),
    ]
    for scaling in SCALINGS:
        sm = result["scalings"][scaling]["summary"]
        cells = "".join(f"{sm['auc_fit'][str(th)]['mean']:.3f}±{sm['auc_fit'][str(th)]['sd']:.3f}  " for th in thetas)
        lines.append(
            f"{scaling:<9} {sm['auc_direction']['mean']:.3f}±{sm['auc_direction']['sd']:.3f}     "
            f"{sm['cos_minus_mean']['mean']:+.3f}±{sm['cos_minus_mean']['sd']:.3f}       " + cells
        )
    lines.append(f"\nwall time {result['seconds']:.0f}s (one thread)")
    (out / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return result
