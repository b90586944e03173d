"""Chaudhuri & Vinterbo 2013, Fig. 1: the data protocols and the cross-validation loop of the reproduction.

The paper chooses the regularizer of objective-perturbation logistic regression privately on
Adult and MAGIC and plots AUC and MSE against alpha for Stability, alphaSplit, dataSplit, Random
and Control. Its entry point is ``recipes/repro/chaudhuri_vinterbo2013.py`` (results in
docs/results/repro/README.md); this module holds what that entry and the direction diagnosis
(:mod:`pate_stab.repro.cv2013_direction`) share.

:func:`run_dataset` (their Sec. 5, reduced): 10 folds; in round i fold i is the test set W, fold
i+1 the validation set V, the other 8 the training set T; Theta = {0.001, 0.112, ..., 1};
Stability uses delta = 0.01, the negative mean ramp loss, alpha1 = alpha2 = alpha/2 and Thm 4's
constants. Random reuses the Control models (each is a model trained at alpha on T with theta_i,
which is exactly Random's output distribution).

Data protocols:

* private (:func:`load_unit_ball`): numeric features mapped to [0, 1] with fixed public bounds
  (pate_stab.data.bounds.ADULT_NUMERIC_BOUNDS / MAGIC_BOUNDS; values outside are clipped),
  categorical ones one-hot encoded, and rows divided by the square root of the number of feature
  groups (Adult: sqrt(14), MAGIC: sqrt(10)), so every row lies in the unit ball. Adult rows with
  a missing value ("?") are dropped, as in the paper.
* paper (:func:`load_adult_paper`, :func:`load_magic_paper`): **not private: as in the paper**,
  min-max ranges and the largest row norm read from the data; Adult's predictors chosen by R's
  ``step`` (:mod:`pate_stab.repro.glm_step`).

Not a release path of the package: the paper protocols read statistics of every row, and nothing
under ``pate_stab/`` outside :mod:`pate_stab.repro` imports this package.
"""
# The closures below are called within the loop iteration that defines them.
# ruff: noqa: B023

from __future__ import annotations

import json
import math
import time
import warnings
from pathlib import Path
from typing import Any

import torch

from pate_stab.data.bounds import bounds_from_data, scale_to_bounds
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
from pate_stab.repro.glm_step import independent_columns, step_aic

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
    """``args.rounds`` CV rounds on a random permutation of ``x`` (the first ``args.max_rows``); rows to ``writer``."""
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
    with family binomial and logit link function". Here: R's ``step`` (:func:`~pate_stab.repro.glm_step.step_aic`,
    AIC, both directions) on ``glm(binomial, logit)`` over all rows, each recoded column its own
    term (``per_column``, the reading under which "98 predictors" become "52"; with the 14
    variables as terms nothing is dropped), then each column min-max scaled with the data's
    range and every row divided by the largest row norm (unit ball). A column aliased in the
    selected model (education-num beside all education dummies) is dropped as glm drops it.
    ``screen`` (per column only): exact refits of the 10 best moves by their one-step (Wald /
    score) AIC change per step, not of all ~95 (:func:`~pate_stab.repro.glm_step.step_aic`; R refits all).
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
