"""Logistic glm and R's ``step`` (AIC, direction "both") for the Chaudhuri & Vinterbo 2013 Adult predictors.

Chaudhuri & Vinterbo 2013, Sec. 5: "we selected 52 predictors using the step procedure for a model
computed by glm with family binomial and logit link function". This module re-implements what
that R call does, **not private: as in the paper** (it reads all labels):

* :func:`fit_logistic` -- ``glm(family = binomial(link = "logit"))``: iteratively reweighted
  least squares from eta = 0 with R's ``glm.control`` defaults (stop when
  |dev - dev_old| / (|dev| + 0.1) < 1e-8, at most 25 iterations). The deviance is
  -2 log-likelihood (0/1 responses, the saturated model has likelihood 1).
* :func:`step_aic` -- ``step(fit)`` with no scope: the full model is the upper scope, the
  intercept-only model the lower one, direction "both" (R's default). Each step compares the
  current model ("<none>") with every one-term drop and every one-term re-addition on
  AIC = deviance + 2 * (number of estimated coefficients) (``extractAIC.glm``, k = 2) and
  takes the lowest; it stops when "<none>" is lowest. A term is a group of columns (one
  original variable with all its dummy columns), as R's ``step`` drops whole terms.
* :func:`independent_columns` -- R's glm sets the coefficient of a column that is a linear
  combination of earlier columns to NA (pivoted QR in column order); those columns are dropped
  before the fit, so the count of coefficients is the rank, as ``extractAIC.glm`` counts it.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch


def independent_columns(x: torch.Tensor, *, tol: float = 1e-10) -> list[int]:
    """Indices of the columns of ``x`` kept by a left-to-right rank check (the others are aliased).

    Column j is aliased when its squared residual after projection on the kept earlier columns is
    at most ``tol`` times its squared norm (a Cholesky factorisation of the Gram matrix that
    skips such columns; R's glm.fit pivots them out of its QR in the same left-to-right order).
    """
    gram = x.double().T @ x.double()
    p = gram.shape[0]
    chol = torch.zeros(p, p, dtype=torch.float64)  # rows: kept columns' factor, lower-triangular
    kept: list[int] = []
    for j in range(p):
        if float(gram[j, j]) == 0.0:
            continue
        idx = torch.tensor(kept, dtype=torch.long)
        ljk = chol[j, idx] if kept else torch.zeros(0, dtype=torch.float64)
        resid = float(gram[j, j] - ljk @ ljk)
        if resid <= tol * float(gram[j, j]):
            continue
        d = resid**0.5
        chol[j + 1 :, j] = (gram[j + 1 :, j] - (chol[j + 1 :, idx] @ ljk if kept else 0.0)) / d
        chol[j, j] = d
        kept.append(j)
    return kept


def fit_logistic(
    x: torch.Tensor,
    y: torch.Tensor,
    *,
    max_iter: int = 25,
    epsilon: float = 1e-8,
    start: torch.Tensor | None = None,
) -> tuple[torch.Tensor, float]:
    """Logistic regression by IRLS as R's glm.fit does; ``x`` includes the intercept column.

    ``y`` holds 0/1 responses; ``x`` must have full column rank. ``start`` (coefficients) warm
    starts the iteration (R's ``glm(start = )``); the maximiser is the same, the likelihood being
    concave. Returns the coefficients and the residual deviance.
    """
    if x.ndim != 2 or y.shape != (x.shape[0],):
        raise ValueError(f"x must be (n, p) and y (n,), got {tuple(x.shape)} and {tuple(y.shape)}")
    if not bool(((y == 0) | (y == 1)).all()):
        raise ValueError("y must hold 0/1 responses")
    x, y = x.double(), y.double()
    # R's binomial()$initialize: mu = (y + 0.5) / 2, eta = logit(mu)
    if start is None:
        mu = (y + 0.5) / 2
        eta = torch.log(mu / (1 - mu))
    else:
        eta = x @ start.double()
        mu = torch.sigmoid(eta).clamp(1e-300, 1 - 1e-16)
    dev_old = _deviance(y, mu)
    beta = torch.zeros(x.shape[1], dtype=torch.float64)
    for _ in range(max_iter):
        w = (mu * (1 - mu)).clamp_min(1e-300)
        z = eta + (y - mu) / w
        # weighted least squares by the normal equations (x has full rank; lstsq if ill-conditioned)
        xtw = (x * w[:, None]).T
        factor, info = torch.linalg.cholesky_ex(xtw @ x)
        if int(info) == 0:
            beta = torch.cholesky_solve((xtw @ z).unsqueeze(1), factor).squeeze(1)
        else:
            sw = w.sqrt()
            beta = torch.linalg.lstsq(x * sw[:, None], z * sw, driver="gelsd").solution
        eta = x @ beta
        mu = torch.sigmoid(eta).clamp(1e-300, 1 - 1e-16)
        dev = _deviance(y, mu)
        if abs(dev - dev_old) / (abs(dev) + 0.1) < epsilon:
            break
        dev_old = dev
    return beta, dev


def _deviance(y: torch.Tensor, mu: torch.Tensor) -> float:
    return float(-2 * (y * torch.log(mu) + (1 - y) * torch.log1p(-mu)).sum())


def step_aic(
    x: torch.Tensor,
    y: torch.Tensor,
    terms: Sequence[Sequence[int]],
    *,
    max_steps: int = 1000,
    screen: int | None = None,
) -> tuple[list[int], list[dict]]:
    """R's ``step(glm(y ~ terms, binomial))`` (both directions, k = 2); returns kept terms and the trace.

    ``x`` holds the predictor columns without intercept (one is added); ``terms[t]`` lists the
    columns of term t. Columns aliased on earlier ones (:func:`independent_columns`) are
    removed within each candidate model, as glm does.

    ``screen = K`` (one-column terms only) refits exactly only the K moves with the lowest
    one-step AIC change at the current fit -- the Wald statistic beta_c^2 / Var(beta_c) for a
    drop, the score statistic for an addition (Rao) -- instead of all of them; R refits every
    move. The step taken is still the best exactly refitted move, and the procedure still stops
    when none of the K improves the AIC: the result differs from R's only if a move outside the
    K screened ones would have been the best.
    """
    if screen is not None and any(len(t) != 1 for t in terms):
        raise ValueError("screen needs one-column terms")
    n = x.shape[0]
    ones = torch.ones(n, 1, dtype=torch.float64)

    coefs: dict[frozenset[int], dict[int, float]] = {}  # column (-1: intercept) -> coefficient

    def aic(active: frozenset[int], parent: frozenset[int] | None) -> float:
        cols = [-1] + [c for t in sorted(active) for c in terms[t]]
        design = torch.cat([ones, x[:, cols[1:]].double()], dim=1)
        keep = independent_columns(design)
        start = None
        if parent is not None:  # warm start from the current model's fit (new columns at 0)
            start = torch.tensor([coefs[parent].get(cols[k], 0.0) for k in keep], dtype=torch.float64)
        beta, dev = fit_logistic(design[:, keep], y, start=start)
        coefs[active] = {cols[k]: float(b) for k, b in zip(keep, beta, strict=True)}
        return dev + 2 * len(keep)

    current = frozenset(range(len(terms)))
    cache: dict[frozenset[int], float] = {current: aic(current, None)}
    trace = [{"step": "start", "aic": cache[current], "terms": sorted(current)}]
    for _ in range(max_steps):
        moves = [("-", t, current - {t}) for t in sorted(current)]
        moves += [("+", t, current | {t}) for t in range(len(terms)) if t not in current]
        if screen is not None and len(moves) > screen:
            approx = _one_step_aic_changes(x, y, terms, current, coefs[current])
            moves = sorted(moves, key=lambda m: approx[m[1]])[:screen]
        for _, _, model in moves:
            if model not in cache:
                cache[model] = aic(model, current)
        best = min(moves, key=lambda m: cache[m[2]])
        if cache[best[2]] >= cache[current] - 1e-7:
            break
        current = best[2]
        trace.append({"step": f"{best[0]}{best[1]}", "aic": cache[current], "terms": sorted(current)})
    return sorted(current), trace


def _one_step_aic_changes(
    x: torch.Tensor, y: torch.Tensor, terms: Sequence[Sequence[int]], current: frozenset[int], coef: dict[int, float]
) -> dict[int, float]:
    """Approximate AIC change of each one-column move at the current fit: Wald (drop), score (add)."""
    cols = [c for c in coef if c >= 0]
    design = torch.cat([torch.ones(x.shape[0], 1, dtype=torch.float64), x[:, cols].double()], dim=1)
    beta = torch.tensor([coef[-1]] + [coef[c] for c in cols], dtype=torch.float64)
    mu = torch.sigmoid(design @ beta)
    w = mu * (1 - mu)
    cov = torch.linalg.inv((design * w[:, None]).T @ design)
    out: dict[int, float] = {}
    pos = {c: k + 1 for k, c in enumerate(cols)}
    for t in range(len(terms)):
        c = terms[t][0]
        if t in current:  # drop: aliased columns change nothing
            out[t] = beta[pos[c]] ** 2 / cov[pos[c], pos[c]] - 2.0 if c in pos else 0.0
            out[t] = float(out[t])
        else:
            xc = x[:, c].double()
            cross = design.T @ (w * xc)
            var = float(xc @ (w * xc) - cross @ cov @ cross)
            score = float(xc @ (y - mu))
            out[t] = 2.0 - score**2 / var if var > 1e-10 * float(xc @ (w * xc)) else 0.0
    return out
