"""Chaudhuri & Vinterbo 2013, Fig. 1: private choice of the regularizer for objective-perturbation
logistic regression on Adult and MAGIC; AUC and MSE vs alpha for Stability, alphaSplit,
dataSplit, Random and Control.

Protocol (their Sec. 5, reduced): 10 folds; in round i fold i is the test set W, fold i+1 the
validation set V, the other 8 the training set T; Theta = {0.001, 0.112, ..., 1}; Stability uses
delta = 0.01, the negative mean ramp loss, alpha1 = alpha2 = alpha/2 and Thm 4's constants.
Random reuses the Control models (each is a model trained at alpha on T with theta_i, which is
exactly Random's output distribution). Numeric features are mapped to [0, 1] with fixed public
bounds (pate_stab.data.bounds.ADULT_NUMERIC_BOUNDS / MAGIC_BOUNDS; values outside are clipped),
categorical ones one-hot encoded, and rows divided by the square root of the number of feature
groups (Adult: sqrt(14), MAGIC: sqrt(10)), so every row lies in the unit ball. (The paper scaled
with min-max ranges read from the data, which is not private.) Adult rows with a missing value
("?") are dropped, as in the paper.

    python recipes/erm_chaudhuri_vinterbo.py --rounds 3

Protocol run: the private one (public bounds), 3 of the 10 CV rounds of one repetition by
default (the paper: 10 x 10); Magic takes about 2 s per round on one thread, Adult longer. The
paper's scaling beside this one on Magic, at the paper's 10 x 10 (about 3 minutes):
``recipes/repro_chaudhuri_vinterbo2013.py`` and docs/results/repro/README.md.
"""

# The closures below are called within the loop iteration that defines them.
# ruff: noqa: B023

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from pathlib import Path
from typing import Any

import torch

from pate_stab.data.tabular import OTHER, load_adult, load_magic
from pate_stab.erm import (
    RampLoss,
    alpha_split,
    control_choice,
    data_split,
    objective_perturbation,
    objective_perturbation_budget,
    stability_constants_linear,
    stability_validate,
)
from pate_stab.rng import seeded_generator

THETA = [0.001, 0.112, 0.223, 0.334, 0.445, 0.556, 0.667, 0.778, 0.889, 1.0]
ALPHAS = [0.3, 0.5, 1.0, 2.0, 3.0, 5.0]
METHODS = ["Stability", "alphaSplit", "dataSplit", "Random", "Control"]


def load_unit_ball(name: str, data_root: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Adult or MAGIC as float64 rows in the unit ball (public bounds, see above) and labels in {-1, 1}."""
    if name == "Adult":
        # published schema (adult.names): numeric columns already in [0, 1], categories one-hot
        data = load_adult(data_root / "adult", norm=None, label_format="pm1")
        groups = 14
        # "?" (missing) is no published category: it lands in a column's <other> slot. Those rows
        # are dropped, and so are the <other> columns, which are then empty (a fixed set of columns).
        other = [j for j, f in enumerate(data.feature_names) if f.endswith(f"={OTHER}")]
        keep_rows = data.x[:, other].sum(dim=1) == 0
        x, y = data.x[keep_rows].double(), data.y[keep_rows].double()
        x = x[:, [j for j in range(x.shape[1]) if j not in other]]
    else:
        data = load_magic(data_root / "magic", norm=None, label_format="pm1")  # in [0, 1] (MAGIC_BOUNDS)
        groups = 10
        x, y = data.x.double(), data.y.double()
    return x / math.sqrt(groups), y


def auc(scores: torch.Tensor, y: torch.Tensor) -> float:
    """Area under the ROC curve (Mann-Whitney, ties counted 1/2)."""
    ranks = torch.empty_like(scores)
    order = torch.argsort(scores)
    ranks[order] = torch.arange(1, len(scores) + 1, dtype=scores.dtype)
    # average ranks of ties
    uniq, inv = torch.unique(scores, return_inverse=True)
    sums = torch.zeros(len(uniq), dtype=scores.dtype).index_add_(0, inv, ranks)
    cnt = torch.zeros(len(uniq), dtype=scores.dtype).index_add_(0, inv, torch.ones_like(ranks))
    ranks = (sums / cnt)[inv]
    pos = y > 0
    n1, n0 = int(pos.sum()), int((~pos).sum())
    return float((ranks[pos].sum() - n1 * (n1 + 1) / 2) / (n1 * n0))


def evaluate(w: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[float, float]:
    s = x @ w
    p = torch.sigmoid(s)
    return auc(s, y), float(((p - (y > 0).double()) ** 2).mean())


def record_row(
    writer: Any, results: list[dict[str, Any]], *, name: str, rnd: int, alpha: float, method: str,
    theta: float, w: torch.Tensor, xw: torch.Tensor, yw: torch.Tensor,
) -> None:  # fmt: skip
    """Evaluate ``w`` on the held-out fold (AUC, MSE) and write and keep its result row."""
    a, mse = evaluate(w, xw, yw)
    row = {"dataset": name, "round": rnd, "alpha": alpha, "method": method, "theta": theta, "auc": a, "mse": mse}
    writer.writerow(row)
    results.append(row)


def run_dataset(name, x, y, args, gen, writer, results):
    n_all = x.shape[0]
    perm = torch.randperm(n_all, generator=gen)[: args.max_rows]
    x, y = x[perm], y[perm]
    folds = torch.tensor_split(torch.arange(x.shape[0]), 10)
    ramp = RampLoss()
    d = x.shape[1]
    for rnd in range(args.rounds):
        test, val = folds[rnd], folds[(rnd + 1) % 10]
        train = torch.cat([f for j, f in enumerate(folds) if j not in (rnd, (rnd + 1) % 10)])
        xt, yt, xv, yv, xw, yw = x[train], y[train], x[val], y[val], x[test], y[test]
        n, m = len(train), len(val)

        def oplr(theta, xs, ys, eps, g):
            return objective_perturbation(xs, ys, epsilon=eps, lam=theta, generator=g).weights

        def q(w):
            return -float(ramp.value(xv @ w, yv).mean())

        def errors(w):
            return float((torch.sign(xv @ w) != yv).sum())

        for alpha in ALPHAS:
            t0 = time.time()
            chosen = {}
            eps_noise = objective_perturbation_budget(
                epsilon=alpha / 2, lam=min(THETA), n=n, smoothness=0.25
            ).epsilon_prime
            b1, b2 = stability_constants_linear(
                lam_min=min(THETA), num_params=len(THETA), delta=0.01, epsilon_train=eps_noise, n=n, dim=d
            )
            chosen["Stability"] = stability_validate(
                THETA,
                lambda th, g: oplr(th, xt, yt, alpha / 2, g),
                q,
                beta1=b1,
                beta2=b2,
                n=n,
                m=m,
                epsilon_validation=alpha / 2,
                generator=gen,
            )
            chosen["alphaSplit"] = alpha_split(THETA, oplr, errors, xt, yt, epsilon=alpha, generator=gen)
            chosen["dataSplit"] = data_split(THETA, oplr, errors, xt, yt, epsilon=alpha, generator=gen)
            models = [oplr(th, xt, yt, alpha, gen) for th in THETA]
            i_rand = int(torch.randint(0, len(THETA), (1,), generator=gen))
            chosen["Random"] = (i_rand, models[i_rand])
            chosen["Control"] = control_choice(
                THETA, lambda th, *_: models[THETA.index(th)], q, xt, yt, epsilon=alpha, generator=gen
            )
            for method, (i, w) in chosen.items():
                record_row(writer, results, name=name, rnd=rnd, alpha=alpha, method=method, theta=THETA[i],
                           w=w, xw=xw, yw=yw)  # fmt: skip
            print(
                f"{name} round {rnd} alpha {alpha}: "
                + ", ".join(
                    f"{k} auc={r['auc']:.3f} mse={r['mse']:.3f}" for k, r in ((r["method"], r) for r in results[-5:])
                )
                + f" ({time.time() - t0:.1f}s)",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--rounds", type=int, default=3, help="CV rounds (the paper: 10 x 10)")
    ap.add_argument("--max-rows", type=int, default=None, help="random subsample of each dataset (default: all)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="checkpoints/erm_chaudhuri_vinterbo")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gen = seeded_generator(args.seed)
    results: list[dict] = []
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["dataset", "round", "alpha", "method", "theta", "auc", "mse"])
        writer.writeheader()
        for name in ("Adult", "Magic"):
            x, y = load_unit_ball(name, Path(args.data))
            run_dataset(name, x, y, args, gen, writer, results)
    summary = {}
    for ds in ("Adult", "Magic"):
        for method in METHODS:
            for alpha in ALPHAS:
                rs = [r for r in results if r["dataset"] == ds and r["method"] == method and r["alpha"] == alpha]
                summary[f"{ds}/{method}/{alpha}"] = {
                    "auc": sum(r["auc"] for r in rs) / len(rs),
                    "mse": sum(r["mse"] for r in rs) / len(rs),
                    "runs": len(rs),
                }
    (out / "report.json").write_text(json.dumps({"config": vars(args), "summary": summary}, indent=1))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7))
    for col, ds in enumerate(("Adult", "Magic")):
        for row, metric in enumerate(("auc", "mse")):
            ax = axes[row, col]
            for method in METHODS:
                ax.plot(ALPHAS, [summary[f"{ds}/{method}/{a}"][metric] for a in ALPHAS], marker="o", label=method)
            ax.set_xscale("log")
            ax.set_title(f"{ds}: {metric.upper()}")
            ax.set_xlabel("alpha")
    axes[0, 0].legend()
    fig.tight_layout()
    fig.savefig(out / "fig1.png", dpi=120)
    print(json.dumps(summary, indent=1))


if __name__ == "__main__":
    main()
