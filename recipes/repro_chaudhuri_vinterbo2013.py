"""Chaudhuri & Vinterbo 2013, Fig. 1 (Magic): the paper's protocol beside the private one.

Both protocols run :func:`erm_chaudhuri_vinterbo.run_dataset` (Stability, alphaSplit, dataSplit,
Random, Control; Theta, delta = 0.01, the ramp-loss score, alpha1 = alpha2 = alpha/2 as in their
Sec. 5) on ``--repeats`` x 10-fold CV (the paper: 10 x 10, fold i the test set, fold i + 1 the
validation set, the other 8 the training set; a fresh random permutation per repeat).

* ``private`` (what ``recipes/erm_chaudhuri_vinterbo.py`` runs): the ten MAGIC columns mapped to
  [0, 1] with the a-priori ranges :data:`~pate_stab.data.bounds.MAGIC_BOUNDS`, rows divided by
  sqrt(10).
* ``paper`` -- **not private: as in the paper** ("data sets were scaled such that covariate
  vectors were constrained to the unit ball", Sec. 5): each column min-max scaled with the range
  of the data, every row divided by the largest row norm of the data (PrivacyLeakWarning).

``--rate-variants`` adds, on the paper protocol, **a hypothesis about the paper's baselines**:
alphaSplit and dataSplit choosing with p_i ∝ exp(-alpha e_i / 2) where e_i is the validation
error *rate* instead of the error count (an exponential mechanism 1/m as flat as the printed one;
still alpha-DP, since a rate has sensitivity 1/m <= 1). Rows ``alphaSplit-rate`` and
``dataSplit-rate``.

MSE is the mean of (sigmoid(w.x) - 1[y = 1])^2 on the test fold (probability scale, as the
paper's Fig. 1b axis 0.18-0.24 implies). Adult is not run here (the paper's 52 stepwise-selected
predictors need a glm step procedure that is not reproduced yet).

    python recipes/repro_chaudhuri_vinterbo2013.py --repeats 1 --out checkpoints/repro_cv2013

runs 1 x 10-fold CV on both protocols (about 6 minutes on one thread; ``--repeats 10`` is the
paper's 10 x 10).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import sys
import time
import warnings
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the sibling recipe erm_chaudhuri_vinterbo

from erm_chaudhuri_vinterbo import ALPHAS, METHODS, THETA, load_unit_ball, record_row, run_dataset  # noqa: E402

from pate_stab.data.bounds import bounds_from_data, scale_to_bounds  # noqa: E402
from pate_stab.erm import alpha_split, data_split, objective_perturbation  # noqa: E402
from pate_stab.rng import seeded_generator  # noqa: E402

RATE_METHODS = ["alphaSplit-rate", "dataSplit-rate"]


def load_magic_paper(data_root: Path) -> tuple[torch.Tensor, torch.Tensor]:
    """MAGIC scaled as in the paper: not private (ranges and the largest norm read from the data)."""
    rows, labels = [], []
    with open(data_root / "magic" / "magic04.data", encoding="utf-8") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) != 11:
                continue
            rows.append([float(v) for v in parts[:10]])
            labels.append(1.0 if parts[10] == "g" else -1.0)
    x = torch.tensor(rows, dtype=torch.float64)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        x = scale_to_bounds(x, bounds=bounds_from_data(x))
    x = x / float(torch.linalg.vector_norm(x, dim=1).max())
    return x, torch.tensor(labels, dtype=torch.float64)


def rate_variants(
    name: str, x: torch.Tensor, y: torch.Tensor, gen: torch.Generator, writer: csv.DictWriter, results: list[dict]
) -> None:
    """alphaSplit / dataSplit with the validation error rate in the exponential mechanism (one 10-fold CV)."""
    perm = torch.randperm(x.shape[0], generator=gen)
    x, y = x[perm], y[perm]
    folds = torch.tensor_split(torch.arange(x.shape[0]), 10)
    for rnd in range(10):
        test, val = folds[rnd], folds[(rnd + 1) % 10]
        train = torch.cat([f for j, f in enumerate(folds) if j not in (rnd, (rnd + 1) % 10)])
        xt, yt, xv, yv, xw, yw = x[train], y[train], x[val], y[val], x[test], y[test]

        def oplr(theta: float, xs: torch.Tensor, ys: torch.Tensor, eps: float, g: torch.Generator) -> torch.Tensor:
            return objective_perturbation(xs, ys, epsilon=eps, lam=theta, generator=g).weights

        def error_rate(w: torch.Tensor, xv: torch.Tensor = xv, yv: torch.Tensor = yv) -> float:
            return float((torch.sign(xv @ w) != yv).double().mean())

        for alpha in ALPHAS:
            for method, fn in (("alphaSplit-rate", alpha_split), ("dataSplit-rate", data_split)):
                i, w = fn(THETA, oplr, error_rate, xt, yt, epsilon=alpha, generator=gen)
                record_row(writer, results, name=name, rnd=rnd, alpha=alpha, method=method, theta=THETA[i],
                           w=w, xw=xw, yw=yw)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[1].parent / "shared" / "data"))
    ap.add_argument("--repeats", type=int, default=1, help="repetitions of 10-fold CV (the paper: 10)")
    ap.add_argument("--rounds", type=int, default=10, help="CV rounds per repetition (10 = all folds)")
    ap.add_argument("--protocols", nargs="+", default=["paper", "private"])
    ap.add_argument("--rate-variants", action="store_true", help="add alphaSplit-rate / dataSplit-rate (paper)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="checkpoints/repro_cv2013")
    args = ap.parse_args()
    args.max_rows = None
    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    results: list[dict] = []
    with open(out / "results.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=["dataset", "round", "alpha", "method", "theta", "auc", "mse"])
        writer.writeheader()
        for protocol in args.protocols:
            gen = seeded_generator(args.seed)
            if protocol == "paper":
                x, y = load_magic_paper(Path(args.data))
            else:
                x, y = load_unit_ball("Magic", Path(args.data))
            for rep in range(args.repeats):
                run_dataset(f"Magic-{protocol}", x, y, args, gen, writer, results)
                print(f"{protocol} repeat {rep}: {time.time() - t0:.0f}s", flush=True)
            if args.rate_variants and protocol == "paper":
                for rep in range(args.repeats):
                    rate_variants(f"Magic-{protocol}", x, y, gen, writer, results)
                    print(f"{protocol} rate variants repeat {rep}: {time.time() - t0:.0f}s", flush=True)
    summary: dict[str, dict[str, float]] = {}
    methods = {p: METHODS + (RATE_METHODS if args.rate_variants and p == "paper" else []) for p in args.protocols}
    for protocol in args.protocols:
        for method in methods[protocol]:
            for alpha in ALPHAS:
                rs = [
                    r
                    for r in results
                    if r["dataset"] == f"Magic-{protocol}" and r["method"] == method and r["alpha"] == alpha
                ]
                auc = torch.tensor([r["auc"] for r in rs])
                mse = torch.tensor([r["mse"] for r in rs])
                theta = torch.tensor([r["theta"] for r in rs])
                se = math.sqrt(len(rs))
                summary[f"{protocol}/{method}/{alpha}"] = {
                    "auc": float(auc.mean()),
                    "auc_se": float(auc.std()) / se if len(rs) > 1 else 0.0,
                    "mse": float(mse.mean()),
                    "mse_se": float(mse.std()) / se if len(rs) > 1 else 0.0,
                    "frac_theta_min": float((theta == min(THETA)).double().mean()) if len(rs) else 0.0,
                    "runs": len(rs),
                }
    seconds = time.time() - t0
    (out / "report.json").write_text(
        json.dumps({"config": vars(args), "seconds": seconds, "summary": summary}, indent=1)
    )
    lines = [
        f"Chaudhuri & Vinterbo 2013 Fig. 1, Magic, {args.repeats} x 10-fold CV ({args.rounds} rounds each); "
        "mean ± s.e. over rounds"
    ]
    for protocol in args.protocols:
        for metric in ("auc", "mse"):
            lines.append(f"\nprotocol {protocol}, {metric.upper()}")
            lines.append("method".ljust(16) + "".join(f"alpha={a:<9}" for a in ALPHAS))
            for method in methods[protocol]:
                cells = [summary[f"{protocol}/{method}/{a}"] for a in ALPHAS]
                lines.append(
                    method.ljust(16) + "".join(f"{c[metric]:.3f}±{c[metric + '_se']:.3f}".ljust(15) for c in cells)
                )
        lines.append(
            "share of rounds choosing theta = 0.001: "
            + ", ".join(
                f"{m} " + "/".join(f"{summary[f'{protocol}/{m}/{a}']['frac_theta_min']:.1f}" for a in ALPHAS)
                for m in METHODS
            )
        )
    lines.append(f"\nwall time {seconds:.0f}s (one thread)")
    (out / "table.txt").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, len(args.protocols), figsize=(5.5 * len(args.protocols), 7), squeeze=False)
    for col, protocol in enumerate(args.protocols):
        for row, metric in enumerate(("auc", "mse")):
            ax = axes[row, col]
            for method in methods[protocol]:
                s = [summary[f"{protocol}/{method}/{a}"] for a in ALPHAS]
                ax.errorbar(
                    ALPHAS,
                    [v[metric] for v in s],
                    yerr=[1.96 * v[metric + "_se"] for v in s],
                    marker="o",
                    capsize=2,
                    label=method,
                )
            ax.set_xscale("log")
            ax.set_xticks(ALPHAS, [str(a) for a in ALPHAS])
            ax.minorticks_off()
            ax.set_xlabel("alpha")
            ax.set_title(f"Magic ({protocol} protocol): {metric.upper()}")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "cv2013_fig1_magic.png", dpi=120)


if __name__ == "__main__":
    main()
