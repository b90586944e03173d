"""Wu et al. 2016, Sec. 5 on the IWPC warfarin table: MSE vs epsilon for data-independent,
privately tuned and oracle output perturbation (rls-out), objective perturbation and non-private
regression; model-inversion (VKORC1) accuracy vs epsilon (:func:`run_inversion`).

Protocol (reduced): random 80/20 train/test splits (``--repeats``); features and dose scaled with
fixed public ranges (see pate_stab.data.tabular.load_warfarin_iwpc); MSE on the scaled dose
y in [-1, 1] (multiply by 70^2 for (mg/week)^2). rls-out uses Wu et al.'s printed noise constant
(12R + 8) unless ``--constant tight``.
* Data-independent: R = 1, lam = sqrt(d / (n eps)) (their Sec. 4.2).
* Oracle: the (R, lam) on R in {.25,.5,1,2} x lam in [0.001, 0.5] (10 values) with the best
  mean test MSE over the repeats (not private: the best output perturbation can do).
* Tuned: Wu et al. Alg 5 with R in {.25, .5, 1}, lam in 0.002 * 2^j (j = 0..7), 25 chunks; each
  chunk model is projected onto its ball ||w|| <= R after the noise (post-processing).
* Objective perturbation: squared loss on ||w|| <= 1, lam = data-independent lam.
* Inversion: Fredrikson et al.'s attack with the training marginal of VKORC1 and the non-private
  model's training residual standard deviation.

    python recipes/repro/wu2016.py --inversion --repeats 5 --out checkpoints/wu2016_inversion

Protocol run: the private one (public ranges, nothing read from the data), 5 repeats by default;
each repeat prints its wall time as it ends. The paper's own protocol (data-read scaling) beside this one, and
the measured causes of the differences to the paper's Fig. 1-2: ``recipes/repro/wu2016.py`` without
``--inversion``, and docs/results/repro/README.md.
"""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

import torch

from pate_stab.data.tabular import load_warfarin_iwpc
from pate_stab.erm import (
    inversion_accuracy,
    invert_attribute,
    objective_perturbation,
    rls_out,
    solve_erm,
    wu_private_tuning,
)
from pate_stab.rng import seeded_generator

EPSILONS = [0.1, 0.2, 0.5, 1.0, 2.0, 5.0]
METHODS = ["NonPrivate", "DataIndependent", "Tuned", "Oracle", "ObjectivePert"]


def run_inversion(data_dir: Path, out: Path, *, repeats: int = 5, constant: str = "paper", seed: int = 0) -> dict:
    """The Sec. 5 protocol on the warfarin table in ``data_dir``; writes results.csv, report.json and a figure.

    ``constant``: rls-out's noise constant, ``"paper"`` (12R + 8, as printed) or ``"tight"``.
    Returns the summary (method/epsilon -> mean MSE, mean inversion accuracy, runs, Oracle's parameters).
    """
    out.mkdir(parents=True, exist_ok=True)
    config = {"data": str(data_dir), "repeats": repeats, "constant": constant, "seed": seed, "out": str(out)}
    data = load_warfarin_iwpc(data_dir)
    x, y, vk = data["x"], data["y"], data["vkorc1"]
    cols = data["vkorc1_columns"].tolist()
    enc = torch.tensor([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], dtype=torch.float64) / 3.0  # same scaling
    gen = seeded_generator(seed)
    n_all, d = x.shape
    oracle_grid = [(r, lam) for r in (0.25, 0.5, 1.0, 2.0) for lam in torch.linspace(0.001, 0.5, 10).tolist()]
    tuned_grid = [(r, 0.002 * 2**j) for r in (0.25, 0.5, 1.0) for j in range(8)]
    rows: list[dict] = []
    oracle_rows: list[dict] = []
    t0 = time.time()
    for rep in range(repeats):
        perm = torch.randperm(n_all, generator=gen)
        ntr = int(0.8 * n_all)
        tr, te = perm[:ntr], perm[ntr:]
        xt, yt, xw, yw = x[tr], y[tr], x[te], y[te]
        prior = torch.bincount(vk[tr], minlength=3).double() / ntr
        w_np = solve_erm(xt, yt, loss="squared", lam=1e-6, tol=1e-9).weights
        sigma = float((xt @ w_np - yt).std())

        def record(method, eps, w, params, rep=rep, xw=xw, yw=yw, te=te, prior=prior, sigma=sigma):
            guess = invert_attribute(w, xw, yw, columns=cols, encodings=enc, prior=prior, sigma=sigma)
            return {
                "repeat": rep,
                "epsilon": eps,
                "method": method,
                "params": params,
                "mse": float(((xw @ w - yw) ** 2).mean()),
                "mi_accuracy": inversion_accuracy(guess, vk[te]),
            }

        def rls(r, lam, xs, ys, eps, g):
            return rls_out(xs, ys, epsilon=eps, lam=lam, radius=r, generator=g, constant=constant).weights

        def rls_projected(r, lam, xs, ys, eps, g):
            # Post-processing: project the noisy model onto ||w|| <= R, so that the validation
            # loss is at most (R + 1)^2 and Alg 5's exponential mechanism is not flattened by
            # the unbounded noise of models trained on small chunks.
            w = rls(r, lam, xs, ys, eps, g)
            return w * min(1.0, r / float(torch.linalg.vector_norm(w)))

        for eps in EPSILONS:
            rows.append(record("NonPrivate", eps, w_np, ""))
            lam_di = math.sqrt(d / (ntr * eps))
            rows.append(record("DataIndependent", eps, rls(1.0, lam_di, xt, yt, eps, gen), f"R=1,lam={lam_di:.4f}"))
            i, w = wu_private_tuning(tuned_grid, rls_projected, xt, yt, epsilon=eps, generator=gen)
            rows.append(record("Tuned", eps, w, f"R={tuned_grid[i][0]},lam={tuned_grid[i][1]}"))
            wo = objective_perturbation(
                xt, yt, epsilon=eps, lam=lam_di, loss="squared", radius=1.0, generator=gen
            ).weights
            rows.append(record("ObjectivePert", eps, wo, f"R=1,lam={lam_di:.4f}"))
            for r, lam in oracle_grid:
                oracle_rows.append(record("Oracle", eps, rls(r, lam, xt, yt, eps, gen), f"R={r},lam={lam:.4f}"))
        print(f"repeat {rep} done ({time.time() - t0:.0f}s)", flush=True)
    rows.extend(_best_oracle_rows(oracle_rows))
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["repeat", "epsilon", "method", "params", "mse", "mi_accuracy"])
        writer.writeheader()
        writer.writerows(rows)
    summary = _summary(rows)
    majority = float(torch.bincount(vk).max()) / len(vk)
    (out / "report.json").write_text(
        json.dumps(
            {"config": config, "n": n_all, "d": d, "majority_vkorc1_rate": majority, "summary": summary}, indent=1
        )
    )
    _plot(out / "wu_fig1_fig5.png", summary, majority)
    return summary


def _mean_mse(rows: list[dict]) -> float:
    return sum(z["mse"] for z in rows) / len(rows)


def _best_oracle_rows(oracle_rows: list[dict]) -> list[dict]:
    """Oracle: the grid point with the best mean test MSE at each epsilon (its rows, every repeat)."""
    best_rows: list[dict] = []
    for eps in EPSILONS:
        cand: dict[str, list[dict]] = {}
        for r in oracle_rows:
            if r["epsilon"] == eps:
                cand.setdefault(r["params"], []).append(r)
        best = min(cand.values(), key=_mean_mse)
        best_rows.extend(best)
    return best_rows


def _summary(rows: list[dict]) -> dict:
    """method/epsilon -> mean MSE, mean inversion accuracy, runs, and Oracle's parameters."""
    summary = {}
    for m in METHODS:
        for eps in EPSILONS:
            rs = [r for r in rows if r["method"] == m and r["epsilon"] == eps]
            summary[f"{m}/{eps}"] = {
                "mse": sum(r["mse"] for r in rs) / len(rs),
                "mi_accuracy": sum(r["mi_accuracy"] for r in rs) / len(rs),
                "runs": len(rs),
                "params": rs[0]["params"] if m == "Oracle" else "",
            }
    return summary


def _plot(path: Path, summary: dict, majority: float) -> None:
    """Wu et al.'s Fig. 1 (MSE) and Fig. 5 (inversion accuracy) against epsilon, side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for m in METHODS:
        axes[0].plot(EPSILONS, [summary[f"{m}/{e}"]["mse"] for e in EPSILONS], marker="o", label=m)
        axes[1].plot(EPSILONS, [summary[f"{m}/{e}"]["mi_accuracy"] for e in EPSILONS], marker="o", label=m)
    for ax, t in zip(axes, ("MSE (scaled dose)", "VKORC1 inversion accuracy"), strict=True):
        ax.set_xscale("log")
        ax.set_xlabel("epsilon")
        ax.set_title(t)
    axes[0].set_yscale("log")
    axes[1].axhline(majority, color="gray", ls="--", label="majority guess")
    axes[1].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=120)
