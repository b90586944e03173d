"""Chaudhuri & Vinterbo 2013, Fig. 1 (Magic and Adult): the paper's protocol beside the private one.

Every protocol runs :func:`pate_stab.repro.cv2013.run_dataset` (Stability, alphaSplit, dataSplit,
Random, Control; Theta, delta = 0.01, the ramp-loss score, alpha1 = alpha2 = alpha/2 as in their
Sec. 5) on ``--repeats`` x 10-fold CV (the paper: 10 x 10, fold i the test set, fold i + 1 the
validation set, the other 8 the training set; a fresh random permutation per repeat;
``--rounds`` < 10 runs the first rounds of each repeat only).

* ``private`` (:func:`~pate_stab.repro.cv2013.load_unit_ball`): Magic's ten columns mapped to
  [0, 1] with the a-priori ranges :data:`~pate_stab.data.bounds.MAGIC_BOUNDS`, rows divided by
  sqrt(10); Adult's published schema (105 columns once the "?" rows and slots are gone), rows
  divided by sqrt(14). ``--protocols private --rounds 3`` is the quick private-only run (Magic
  about 2 s per CV round on one thread, Adult longer).
* ``paper`` -- **not private: as in the paper** ("data sets were scaled such that covariate
  vectors were constrained to the unit ball", Sec. 5): each column min-max scaled with the range
  of the data, every row divided by the largest row norm of the data. Adult: R's treatment coding
  of the 45,222 complete rows of both files (96 columns) and the paper's stepwise selection
  (:func:`~pate_stab.repro.cv2013.load_adult_paper`: R's ``step`` on a binomial glm, each coded column a term, AIC;
  66 columns kept; ``--step-cache`` keeps the selection, which takes about 6 minutes).
* ``paper-zscore`` (Adult and Magic) -- **a hypothesis about the paper's scaling**, which names no column
  scaling: the same 66 columns centred and divided by their s.d. (R's ``scale()``), rows divided
  by the largest norm. Not private.

``--rate-variants`` adds, on the paper protocol, **a hypothesis about the paper's baselines**:
alphaSplit and dataSplit choosing with p_i ∝ exp(-alpha e_i / 2) where e_i is the validation
error *rate* instead of the error count (an exponential mechanism 1/m as flat as the printed one;
still alpha-DP, since a rate has sensitivity 1/m <= 1). Rows ``alphaSplit-rate`` and
``dataSplit-rate``.

MSE is the mean of (sigmoid(w.x) - 1[y = 1])^2 on the test fold (probability scale, as the
paper's Fig. 1b axis 0.18-0.24 implies).

    python recipes/repro/chaudhuri_vinterbo2013.py --repeats 10 --rate-variants --out checkpoints/repro_cv2013

runs Magic at the paper's 10 x 10 on both protocols (94 s on one thread, docs/results/repro/).
Adult is about 40 times slower per CV round (about 2 minutes per round of one protocol on a
shared core; the paper's 100 rounds would take hours), so the recorded Adult runs are one
10-fold CV (10 rounds) per protocol, e.g.

    python recipes/repro/chaudhuri_vinterbo2013.py --dataset Adult --protocols paper --rounds 10 \
        --step-cache docs/results/repro/cv2013_adult_step.json --out checkpoints/repro_cv2013_adult_paper

(wall times in docs/results/repro/README.md); ``--seed 1`` ... ``--seed 9`` runs and a ``--from-csv`` of the
concatenated results.csv files make the paper's 10 x 10 (docs/results/repro/cv2013_adult_10x10.txt).
``--diagnose direction`` (Adult or Magic) measures why
Random trails Control under min-max scaling (:mod:`pate_stab.repro.cv2013_direction`).
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import time
from pathlib import Path

import torch

from pate_stab.erm import alpha_split, data_split, objective_perturbation
from pate_stab.repro.cv2013 import (
    ALPHAS,
    METHODS,
    THETA,
    load_adult_paper,
    load_magic_paper,
    load_unit_ball,
    record_row,
    run_dataset,
)
from pate_stab.repro.cv2013_direction import diagnose_direction
from pate_stab.rng import seeded_generator

RATE_METHODS = ["alphaSplit-rate", "dataSplit-rate"]


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
    ap.add_argument("--data", default=str(Path(__file__).resolve().parents[2].parent / "shared" / "data"))
    ap.add_argument("--repeats", type=int, default=1, help="repetitions of 10-fold CV (the paper: 10)")
    ap.add_argument("--rounds", type=int, default=10, help="CV rounds per repetition (10 = all folds)")
    ap.add_argument("--dataset", choices=["Magic", "Adult"], default="Magic")
    ap.add_argument("--protocols", nargs="+", default=["paper", "private"])
    ap.add_argument("--step-by-variable", action="store_true", help="Adult: step over the 14 variables")
    ap.add_argument("--adult-files", nargs="+", default=["adult.data", "adult.test"], help="Adult: files read")
    ap.add_argument("--step-cache", type=Path, default=None, help="Adult: JSON file keeping the step's selection")
    ap.add_argument("--rate-variants", action="store_true", help="add alphaSplit-rate / dataSplit-rate (paper)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from-csv", type=Path, default=None, help="summarise this results.csv instead of running")
    ap.add_argument(
        "--diagnose", choices=["direction"], default=None, help="the direction diagnosis instead (both data sets)"
    )
    ap.add_argument("--out", default="checkpoints/repro_cv2013")
    args = ap.parse_args()
    args.max_rows = None
    torch.set_num_threads(1)
    if args.diagnose == "direction":  # Random vs Control under min-max vs z-score (pate_stab.repro.cv2013_direction)
        seeds = list(range(args.seed, args.seed + args.repeats))
        diagnose_direction(
            Path(args.data),
            step_cache=args.step_cache,
            seeds=seeds,
            thetas=THETA,
            out=Path(args.out),
            dataset=args.dataset,
        )
        return
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    results: list[dict] = []
    ds = args.dataset
    selection: dict = {}
    if args.from_csv is not None:  # summarise a finished run's rows (e.g. one whose summary step failed)
        with open(args.from_csv, newline="") as f:
            for r in csv.DictReader(f):
                results.append({**r, "round": int(r["round"]), "alpha": float(r["alpha"]), "theta": float(r["theta"]),
                                "auc": float(r["auc"]), "mse": float(r["mse"])})  # fmt: skip
        if ds == "Adult" and "paper" in " ".join(args.protocols) and args.step_cache is not None:
            selection = json.loads(Path(args.step_cache).read_text())
    else:
        with open(out / "results.csv", "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=["dataset", "round", "alpha", "method", "theta", "auc", "mse"])
            writer.writeheader()
            for protocol in args.protocols:
                gen = seeded_generator(args.seed)
                if protocol in ("paper", "paper-zscore"):
                    if ds == "Magic":
                        x, y = load_magic_paper(
                            Path(args.data), scaling="zscore" if protocol == "paper-zscore" else "minmax"
                        )
                    else:
                        x, y, selection = load_adult_paper(
                            Path(args.data),
                            per_column=not args.step_by_variable,
                            cache=args.step_cache,
                            files=tuple(args.adult_files),
                            scaling="zscore" if protocol == "paper-zscore" else "minmax",
                        )
                        kept, dropped = selection["selected_predictors"], selection["dropped_terms"]
                        print(f"step: {kept} predictors, dropped {dropped}", flush=True)
                else:
                    x, y = load_unit_ball(ds, Path(args.data))
                for rep in range(args.repeats):
                    run_dataset(f"{ds}-{protocol}", x, y, args, gen, writer, results)
                    print(f"{protocol} repeat {rep}: {time.time() - t0:.0f}s", flush=True)
                if args.rate_variants and protocol == "paper":
                    for rep in range(args.repeats):
                        rate_variants(f"{ds}-{protocol}", x, y, gen, writer, results)
                        print(f"{protocol} rate variants repeat {rep}: {time.time() - t0:.0f}s", flush=True)
    summary: dict[str, dict[str, float]] = {}
    methods = {p: METHODS + (RATE_METHODS if args.rate_variants and p == "paper" else []) for p in args.protocols}
    for protocol in args.protocols:
        for method in methods[protocol]:
            for alpha in ALPHAS:
                rs = [
                    r
                    for r in results
                    if r["dataset"] == f"{ds}-{protocol}" and r["method"] == method and r["alpha"] == alpha
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
        json.dumps(
            {"config": vars(args), "seconds": seconds, "paper_predictors": selection, "summary": summary},
            indent=1,
            default=str,
        )
    )
    lines = [
        f"Chaudhuri & Vinterbo 2013 Fig. 1, {ds}, {args.repeats} x 10-fold CV ({args.rounds} rounds each); "
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
            ax.set_title(f"{ds} ({protocol} protocol): {metric.upper()}")
    axes[0, 0].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out / f"cv2013_fig1_{ds.lower()}.png", dpi=120)


if __name__ == "__main__":
    main()
