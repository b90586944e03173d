"""Chaudhuri & Vinterbo 2013, Fig. 1 (Magic and Adult): the paper's protocol beside the private one.

Every protocol runs :func:`erm_chaudhuri_vinterbo.run_dataset` (Stability, alphaSplit, dataSplit,
Random, Control; Theta, delta = 0.01, the ramp-loss score, alpha1 = alpha2 = alpha/2 as in their
Sec. 5) on ``--repeats`` x 10-fold CV (the paper: 10 x 10, fold i the test set, fold i + 1 the
validation set, the other 8 the training set; a fresh random permutation per repeat;
``--rounds`` < 10 runs the first rounds of each repeat only).

* ``private`` (what ``recipes/erm_chaudhuri_vinterbo.py`` runs): Magic's ten columns mapped to
  [0, 1] with the a-priori ranges :data:`~pate_stab.data.bounds.MAGIC_BOUNDS`, rows divided by
  sqrt(10); Adult's published schema (105 columns once the "?" rows and slots are gone), rows
  divided by sqrt(14).
* ``paper`` -- **not private: as in the paper** ("data sets were scaled such that covariate
  vectors were constrained to the unit ball", Sec. 5): each column min-max scaled with the range
  of the data, every row divided by the largest row norm of the data. Adult: R's treatment coding
  of the 45,222 complete rows of both files (96 columns) and the paper's stepwise selection
  (:func:`load_adult_paper`: R's ``step`` on a binomial glm, each coded column a term, AIC;
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

    python recipes/repro_chaudhuri_vinterbo2013.py --repeats 10 --rate-variants --out checkpoints/repro_cv2013

runs Magic at the paper's 10 x 10 on both protocols (94 s on one thread, docs/results/repro/).
Adult is about 40 times slower per CV round (about 2 minutes per round of one protocol on a
shared core; the paper's 100 rounds would take hours), so the recorded Adult runs are one
10-fold CV (10 rounds) per protocol, e.g.

    python recipes/repro_chaudhuri_vinterbo2013.py --dataset Adult --protocols paper --rounds 10 \
        --step-cache docs/results/repro/cv2013_adult_step.json --out checkpoints/repro_cv2013_adult_paper

(wall times in docs/results/repro/README.md); ``--seed 1`` ... ``--seed 9`` runs and a ``--from-csv`` of the
concatenated results.csv files make the paper's 10 x 10 (docs/results/repro/cv2013_adult_10x10.txt).
``--diagnose direction`` (Adult or Magic) measures why
Random trails Control under min-max scaling (``recipes/cv2013_direction.py``).
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
from glm_step import independent_columns, step_aic  # noqa: E402

from pate_stab.data.bounds import bounds_from_data, scale_to_bounds  # noqa: E402
from pate_stab.erm import alpha_split, data_split, objective_perturbation  # noqa: E402
from pate_stab.rng import seeded_generator  # noqa: E402

RATE_METHODS = ["alphaSplit-rate", "dataSplit-rate"]


def load_magic_paper(data_root: Path, scaling: str = "minmax") -> tuple[torch.Tensor, torch.Tensor]:
    """MAGIC scaled as in the paper: not private (ranges and the largest norm read from the data).

    ``scaling="zscore"``: the z-score hypothesis of :func:`unit_ball_from_data`, the same one as
    the Adult ``paper-zscore`` protocol, so that one protocol runs on both data sets.
    """
    rows, labels = [], []
    with open(data_root / "magic" / "magic04.data", encoding="utf-8") as f:
        for line in f:
            parts = line.strip().split(",")
            if len(parts) != 11:
                continue
            rows.append([float(v) for v in parts[:10]])
            labels.append(1.0 if parts[10] == "g" else -1.0)
    x = torch.tensor(rows, dtype=torch.float64)
    return unit_ball_from_data(x, scaling), torch.tensor(labels, dtype=torch.float64)


ADULT_COLUMNS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country",
)  # fmt: skip
ADULT_NUMERIC = {"age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"}


def adult_design(
    data_root: Path, files: tuple[str, ...] = ("adult.data", "adult.test")
) -> tuple[torch.Tensor, torch.Tensor, list[list[int]], list[str]]:
    """Adult as R's ``glm(income ~ ., binomial)`` codes it: not private (levels read from the data).

    Rows of ``files`` without a "?" (both files: 45,222; ``adult.data``: 30,162); numeric columns as they are;
    each categorical column a factor with its levels sorted (R's default) and treatment coding
    (the first level the baseline, one 0/1 column per other level). Returns the predictor
    columns (no intercept), the 0/1 labels (income > 50K), the columns of each of the 14 terms
    and the column names.
    """
    rows = []
    for name in files:
        with open(data_root / "adult" / name, encoding="utf-8") as f:
            for line in f:
                parts = [v.strip() for v in line.strip().rstrip(".").split(",")]
                if len(parts) == 15 and "?" not in parts:
                    rows.append(parts)
    cols: list[torch.Tensor] = []
    names: list[str] = []
    terms: list[list[int]] = []
    for j, col in enumerate(ADULT_COLUMNS):
        values = [r[j] for r in rows]
        start = len(names)
        if col in ADULT_NUMERIC:
            cols.append(torch.tensor([float(v) for v in values], dtype=torch.float64))
            names.append(col)
        else:
            for level in sorted(set(values))[1:]:
                cols.append(torch.tensor([v == level for v in values], dtype=torch.float64))
                names.append(f"{col}={level}")
        terms.append(list(range(start, len(names))))
    y = torch.tensor([r[14].startswith(">50K") for r in rows], dtype=torch.float64)
    return torch.stack(cols, dim=1), y, terms, names


def load_adult_paper(
    data_root: Path,
    *,
    per_column: bool = True,
    screen: int | None = 10,
    cache: Path | None = None,
    files: tuple[str, ...] = ("adult.data", "adult.test"),
    scaling: str = "minmax",
) -> tuple[torch.Tensor, torch.Tensor, dict]:
    """Adult with the paper's predictors and scaling: **not private: as in the paper**.

    Sec. 5: "98 predictors (14 original including categorical variables that needed to be
    recoded) ... we selected 52 predictors using the step procedure for a model computed by glm
    with family binomial and logit link function". Here: R's ``step`` (:func:`glm_step.step_aic`,
    AIC, both directions) on ``glm(binomial, logit)`` over all rows, each recoded column its own
    term (``per_column``, the reading under which "98 predictors" become "52"; with the 14
    variables as terms nothing is dropped), then each column min-max scaled with the data's
    range and every row divided by the largest row norm (unit ball). A column aliased in the
    selected model (education-num beside all education dummies) is dropped as glm drops it.
    ``screen`` (per column only): exact refits of the 10 best moves by their one-step (Wald /
    score) AIC change per step, not of all ~95 (:func:`glm_step.step_aic`; R refits all).
    ``cache`` (a JSON file) keeps the selection: the step takes minutes.
    """
    x, y01, terms, names = adult_design(data_root, files)
    if per_column:
        terms = [[c] for c in range(x.shape[1])]
    info: dict = {}
    if cache is not None and cache.exists():
        info = json.loads(cache.read_text())
        if info.get("per_column") != per_column or info.get("files", ["adult.data", "adult.test"]) != list(files):
            raise ValueError(
                f"{cache} holds a selection for other settings: {info.get('per_column')=}, {info.get('files')=}"
            )
        cols = [names.index(c) for c in info["selected_columns"]]
    else:
        t0 = time.time()
        screen = screen if per_column else None
        kept_terms, trace = step_aic(x, y01, terms, screen=screen)
        cols = [c for t in kept_terms for c in terms[t]]
        design = torch.cat([torch.ones(x.shape[0], 1, dtype=torch.float64), x[:, cols]], dim=1)
        cols = [cols[k - 1] for k in independent_columns(design) if k > 0]
        label = [names[t[0]] if per_column else ADULT_COLUMNS[i] for i, t in enumerate(terms)]
        info = {
            "per_column": per_column,
            "screen": screen,
            "files": list(files),
            "rows": x.shape[0],
            "encoded_predictors": x.shape[1],
            "selected_predictors": len(cols),
            "selected_columns": [names[c] for c in cols],
            "dropped_terms": [label[t] for t in range(len(terms)) if t not in kept_terms],
            "step_trace": [{"step": s["step"], "aic": s["aic"], "terms": len(s["terms"])} for s in trace],
            "step_seconds": time.time() - t0,
        }
        if cache is not None:
            cache.write_text(json.dumps(info, indent=1))
    return unit_ball_from_data(x[:, cols], scaling), y01 * 2 - 1, info


def unit_ball_from_data(x: torch.Tensor, scaling: str) -> torch.Tensor:
    """Columns scaled with the data's statistics, rows divided by the largest row norm: not private.

    ``minmax``: each column to [0, 1] by its range. ``zscore`` (**a hypothesis about the
    paper's "scaled such that covariate vectors were constrained to the unit ball"**, which
    names no column scaling): each column centred at its mean and divided by its s.d. (R's
    ``scale()``), so the heavily regularised model sum_i y_i x_i is no longer pulled towards
    minus the mean row by the 3 : 1 class imbalance.
    """
    if scaling == "minmax":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            x = scale_to_bounds(x, bounds=bounds_from_data(x))
    elif scaling == "zscore":
        x = (x - x.mean(dim=0)) / x.std(dim=0).clamp_min(1e-12)
    else:
        raise ValueError(f"scaling must be 'minmax' or 'zscore', got {scaling!r}")
    return x / float(torch.linalg.vector_norm(x, dim=1).max())


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
    ap.add_argument("--dataset", choices=["Magic", "Adult"], default="Magic")
    ap.add_argument("--protocols", nargs="+", default=["paper", "private"])
    ap.add_argument("--step-by-variable", action="store_true", help="Adult: step over the 14 variables")
    ap.add_argument("--adult-files", nargs="+", default=["adult.data", "adult.test"], help="Adult: files read")
    ap.add_argument("--step-cache", type=Path, default=None, help="Adult: JSON file keeping the step's selection")
    ap.add_argument("--rate-variants", action="store_true", help="add alphaSplit-rate / dataSplit-rate (paper)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--from-csv", type=Path, default=None, help="summarise this results.csv instead of running")
    ap.add_argument(
        "--diagnose", choices=["direction"], default=None, help="cv2013_direction.py instead (both data sets)"
    )
    ap.add_argument("--out", default="checkpoints/repro_cv2013")
    args = ap.parse_args()
    args.max_rows = None
    torch.set_num_threads(1)
    if args.diagnose == "direction":  # Random vs Control under min-max vs z-score (cv2013_direction.py)
        from cv2013_direction import diagnose_direction

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
