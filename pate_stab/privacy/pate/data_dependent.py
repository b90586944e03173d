"""PATE's data-dependent privacy of a whole run, and the smooth-sensitivity release of its ε.

The per-query RDP bounds of :mod:`pate_stab.privacy.pate.rdp` are summed over a run of LNMax,
GNMax or Confident-GNMax (RDP composes additively [Mironov 2017, Prop 1]); Confident-GNMax pays
the threshold check with σ1 on every query and GNMax with σ2 on the answered ones [PSM+18, Alg 1,
§4.2].

The data-dependent ε is a function of the private votes: it is *not* differentially private and
must not be published as is. :func:`data_dependent_summary` publishes it through GNSS
(:mod:`pate_stab.privacy.pate.smooth_sensitivity`), whose own RDP cost is added.

Where this module departs from the reference implementation (the first three give values at
least as large as the reference's):

- The smooth sensitivity of a sum over queries uses, for each query, the running maximum over
  distances ≤ d of its local-sensitivity bounds (a dataset at distance d may move some
  histograms by fewer than d votes); the reference's script sums the per-distance arrays as they
  are. The two agree when every array is non-decreasing.
- The threshold check's local-sensitivity array also covers distance max(v0, k − v0) (the last
  reachable value of the largest count), which the reference's loop stops one short of.
- The value sanitised for a GNMax step is β_σ (:func:`gnmax_rdp_smooth`), the function whose
  local sensitivity Algs 3–5 bound; the reference adds :func:`gnmax_rdp`'s value, which can be
  smaller than β_σ for small σ and α.
- Conditions C5–C6 are checked on a grid (:func:`check_smooth_sensitivity_conditions`) rather
  than by a symbolic derivative; the summary refuses to sanitise when they fail.
- The sanitisation order, β and σ_ss are arguments fixed in advance; the reference's scripts
  choose them by looking at the votes, which its own comments say cannot be released.

References:
    [PAE+17] Papernot, Abadi, Erlingsson, Goodfellow, Talwar. Semi-supervised knowledge transfer
        for deep learning from private training data. ICLR 2017 (arXiv:1610.05755).
    [PSM+18] Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson. Scalable private learning
        with PATE. ICLR 2018 (arXiv:1802.08908; appendices of the arXiv version).
    Reference implementation: tensorflow/privacy, ``research/pate_2018/core.py`` and
    ``pate_stab/privacy/pate/smooth_sensitivity.py``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import numpy.typing as npt
import torch

from pate_stab._checks import (
    check_delta,
    check_generator,
    check_positive,
    check_real,
)
from pate_stab.privacy.noise.seeded import gaussian
from pate_stab.privacy.pate.rdp import (
    AggregatorKind,
    Conversion,
    FloatArray,
    check_answered,
    check_conversion,
    check_counts,
    check_order,
    check_orders,
    epsilon_at_orders,
    gnmax_log_q,
    gnmax_log_q_discrete,
    gnmax_rdp_data_independent,
    gnmax_rdp_unchecked,
    lnmax_log_q,
    lnmax_rdp,
    lnmax_rdp_data_independent,
    threshold_log_pr_answered,
    threshold_log_q_discrete,
    threshold_rdp,
    threshold_rdp_data_independent,
)
from pate_stab.privacy.pate.smooth_sensitivity import (
    beta_gnmax_unchecked,
    check_smooth_sensitivity_conditions,
    gnmax_local_sensitivity_row,
    gnss_rdp,
    threshold_local_sensitivity_row,
    threshold_rdp_by_max,
)

__all__ = [
    "NoiseKind",
    "gnmax_data_dependent_rdp",
    "confident_gnmax_data_dependent_rdp",
    "lnmax_data_dependent_rdp",
    "DataDependentSummary",
    "data_dependent_summary",
]


NoiseKind = Literal["continuous", "discrete"]
"""The aggregator's noise: float Laplace / Gaussian (seeded) or the exact discrete laws (secure)."""

# --------------------------------------------------------------------------- composition over a run


def _noise_kind(noise: Any) -> str:
    if noise not in ("continuous", "discrete"):
        raise ValueError(f"noise must be 'continuous' or 'discrete', got {noise!r}")
    return str(noise)


def gnmax_data_dependent_rdp(
    *, counts: Any, sigma: float, orders: Any = None, noise: NoiseKind = "continuous"
) -> FloatArray:
    """Data-dependent RDP of a GNMax run: Σ over rows of :func:`gnmax_rdp` at :func:`gnmax_log_q`.

    RDP composes additively [Mironov 2017, Prop 1]; [PSM+18, §3]. ``noise="discrete"`` (secure
    noise: N_Z(0, σ²)) bounds q with :func:`~pate_stab.privacy.pate.rdp.gnmax_log_q_discrete`.

    Returns:
        ``(A,)`` float64.
    """
    log_q = (gnmax_log_q if _noise_kind(noise) == "continuous" else gnmax_log_q_discrete)(counts=counts, sigma=sigma)
    return gnmax_rdp_unchecked(log_q, float(sigma), check_orders(orders)).sum(axis=0)


def confident_gnmax_data_dependent_rdp(
    *,
    counts: Any,
    answered: Any,
    threshold: float,
    sigma1: float,
    sigma2: float,
    orders: Any = None,
    noise: NoiseKind = "continuous",
) -> FloatArray:
    """Data-dependent RDP of a Confident-GNMax run [PSM+18, Alg 1, §4.2].

    Every query pays :func:`threshold_rdp` (σ1); the queries the run answered (``answered``, the
    released ⊥ pattern: ``labels != -1``) also pay :func:`gnmax_rdp` (σ2). Adaptive composition:
    whether step 2 runs is the output of step 1, already paid for.

    Args:
        counts: ``(n, C)`` vote histograms, one row per query asked.
        answered: ``(n,)`` boolean mask of the answered queries.
        noise: ``"continuous"`` (PSM+18) or ``"discrete"`` (secure noise: both steps' q bounded
            with the discrete Gaussian's sub-Gaussian tails,
            :func:`~pate_stab.privacy.pate.rdp.threshold_log_q_discrete` and
            :func:`~pate_stab.privacy.pate.rdp.gnmax_log_q_discrete`).

    Returns:
        ``(A,)`` float64.
    """
    array = check_counts(counts)
    mask = check_answered(answered, array.shape[0])
    orders_array = check_orders(orders)
    if _noise_kind(noise) == "continuous":
        step1 = threshold_rdp(
            log_pr_answered=threshold_log_pr_answered(counts=array, threshold=threshold, sigma1=sigma1),
            sigma1=sigma1,
            orders=orders_array,
        ).sum(axis=0)
    else:  # the check is a sensitivity-1 Gaussian: GNMax's Thm 6 with σ1√2 [PSM+18, §4.2]
        log_q = threshold_log_q_discrete(counts=array, threshold=threshold, sigma1=sigma1)
        s1 = float(sigma1)
        step1 = gnmax_rdp_unchecked(log_q, math.sqrt(2.0) * s1, orders_array, variance=2.0 * s1**2).sum(axis=0)
    if not mask.any():
        return np.asarray(step1, dtype=np.float64)
    step2 = gnmax_data_dependent_rdp(counts=array[mask], sigma=sigma2, orders=orders_array, noise=noise)
    return np.asarray(step1 + step2, dtype=np.float64)


def lnmax_data_dependent_rdp(*, counts: Any, noise_scale: float, orders: Any = None) -> FloatArray:
    """Data-dependent RDP of an LNMax run: Σ over rows of :func:`lnmax_rdp` at :func:`lnmax_log_q`.

    [PAE+17, Thm 2 (composability of the log moments) and Thm 3.]

    Returns:
        ``(A,)`` float64.
    """
    orders_array = check_orders(orders)
    log_q = lnmax_log_q(counts=counts, noise_scale=noise_scale)
    return lnmax_rdp(log_q=log_q, noise_scale=noise_scale, orders=orders_array).sum(axis=0)


# --------------------------------------------------------------------------- summary of a run


@dataclass(frozen=True)
class DataDependentSummary:
    """Privacy of one aggregator run, data-independent and data-dependent [PAE+17; PSM+18].

    ε values are at ``delta`` with the RDP → DP ``conversion``. Fields marked *raw* are
    functions of the private votes and are not differentially private; only the ``sanitised_*``
    fields (and everything data-independent) may be published. The sanitisation fields are
    ``None`` for LNMax, for which neither reference gives a smooth-sensitivity analysis.
    """

    aggregator_kind: str
    num_queries: int
    """Queries asked (rows of the histogram)."""
    num_answered: int
    """Queries answered (all of them except for Confident-GNMax)."""
    num_teachers: int
    num_classes: int
    delta: float
    conversion: str
    data_independent_epsilon: float
    """ε of the same run with every per-query RDP at its data-independent value. For
    Confident-GNMax: the check on every query, GNMax on the answered ones only (the
    ``baselines.ConfidentGNMax`` certificate is fixed before the run, charges GNMax on every
    query and uses PLD accounting, so it is larger)."""
    data_independent_order: float
    data_dependent_epsilon: float
    """Raw: ε from the data-dependent RDP, minimised over ``orders``."""
    data_dependent_order: float
    ss_order: float | None = None
    """The Rényi order α fixed for the smooth-sensitivity release."""
    ss_beta: float | None = None
    ss_sigma: float | None = None
    data_dependent_rdp_at_ss_order: float | None = None
    """Raw: the data-dependent RDP at ``ss_order`` (with β_σ for GNMax), the value sanitised."""
    smooth_sensitivity: float | None = None
    """Raw: the β-smooth sensitivity of ``data_dependent_rdp_at_ss_order``."""
    sanitisation_noise_std: float | None = None
    """Raw: ``ss_sigma · smooth_sensitivity``, the standard deviation of the noise added."""
    sanitisation_rdp: float | None = None
    """RDP at ``ss_order`` of the GNSS release itself (Thm 23), added to the total."""
    sanitised_rdp: float | None = None
    """Released: ``data_dependent_rdp_at_ss_order`` + Gaussian noise, floored at 0."""
    sanitised_epsilon: float | None = None
    """Released: ε at ``ss_order`` of ``sanitised_rdp + sanitisation_rdp``."""

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict."""
        return {name: getattr(self, name) for name in self.__dataclass_fields__}


def _require(name: str, value: Any, kind: str) -> Any:
    if value is None:
        raise ValueError(f"{name} is required for aggregator_kind={kind!r}")
    return value


def _forbid(names: dict[str, Any], kind: str) -> None:
    given = sorted(name for name, value in names.items() if value is not None)
    if given:
        raise ValueError(f"{', '.join(given)} not used by aggregator_kind={kind!r}")


def data_dependent_summary(
    counts: Any,
    *,
    aggregator_kind: AggregatorKind,
    delta: float,
    sigma: float | None = None,
    sigma1: float | None = None,
    sigma2: float | None = None,
    threshold: float | None = None,
    answered: Any = None,
    noise_scale: float | None = None,
    orders: Any = None,
    conversion: Conversion = "pate2018",
    ss_order: float | None = None,
    ss_beta: float | None = None,
    ss_sigma: float | None = None,
    generator: torch.Generator | None = None,
    noise: NoiseKind = "continuous",
) -> DataDependentSummary:
    """Data-independent and data-dependent ε of a run, and the GNSS-sanitised data-dependent ε.

    Per aggregator (parameters as in :mod:`pate_stab.aggregation.baselines`):

    - ``"lnmax"``: ``noise_scale`` (Laplace b). Raw data-dependent ε only [PAE+17, Thm 3].
    - ``"gnmax"``: ``sigma``. Data-dependent RDP [PSM+18, Thm 6]; sanitised at ``ss_order``.
    - ``"confident_gnmax"``: ``threshold``, ``sigma1``, ``sigma2`` and ``answered`` (the released
      ⊥ pattern, ``labels != -1``). The check is paid on every query, GNMax on answered ones;
      the data-independent ε is that same composition at α/(2σ1²) and α/σ2².

    Sanitisation (GNMax kinds) [PSM+18, App. C]: at the fixed order α = ``ss_order``, the raw
    RDP f(D) = Σ per-query RDP (β_σ for GNMax steps) is released as f(D) + SS_β(D)·σ_ss·Z,
    Z ~ N(0, 1) (float64, from ``generator``), SS_β the β-smooth sensitivity of f built from the
    per-query local-sensitivity bounds, and the release's own RDP (:func:`gnss_rdp`) is added
    before converting to ε. ``ss_order``, ``ss_beta`` and ``ss_sigma`` must be chosen without
    looking at the votes (the reference's optimisation of them over the votes is not
    releasable). ``ss_beta`` defaults to 0.4/α, inside the reference's range [0.3/α, 0.495/α).
    Conditions C5–C6 are checked for the GNMax σ at that order.

    Secure noise (``noise="discrete"``, GNMax kinds only): the raw data-dependent RDP with q
    bounded by the discrete Gaussian's sub-Gaussian tails
    (:func:`~pate_stab.privacy.pate.rdp.gnmax_log_q_discrete`,
    :func:`~pate_stab.privacy.pate.rdp.threshold_log_q_discrete`), and no sanitisation: PSM+18's
    smooth-sensitivity bounds (App. C) are derived for the continuous q bound, so the
    ``ss_*`` arguments and ``generator`` must be left out and the sanitised fields are None.
    No bound on q is derived here for discrete Laplace noise (LNMax): refused.

    Args:
        counts: ``(n, C)`` integer vote histograms (one row per query asked; rows sum to k).
        aggregator_kind: ``"lnmax"``, ``"gnmax"`` or ``"confident_gnmax"``.
        delta: δ ∈ (0, 1).
        orders: Rényi orders for the ε minimisations (default :data:`DEFAULT_ORDERS`).
        conversion: ``"pate2018"`` (default; as the reference) or ``"improved"``; see
            :func:`rdp_to_epsilon`.
        generator: source of the sanitisation noise (required for the GNMax kinds).

    Returns:
        :class:`DataDependentSummary`.

    Raises:
        TypeError / ValueError: bad counts, σ ≤ 0, δ ∉ (0, 1), a missing or superfluous
            parameter for the aggregator, conditions C5–C6 failing, ``ss_order`` ≥ 1/(2β).
    """
    array = check_counts(counts)
    delta = check_delta(delta)
    orders_array = check_orders(orders)
    conversion_name = check_conversion(conversion)
    kind = _noise_kind(noise)
    smooth = {"ss_order": ss_order, "ss_beta": ss_beta, "ss_sigma": ss_sigma, "generator": generator}
    if kind == "discrete":
        _check_discrete(aggregator_kind, smooth)
    params = {"sigma": sigma, "sigma1": sigma1, "sigma2": sigma2, "threshold": threshold, "answered": answered}
    params["noise_scale"] = noise_scale
    run = _run_rdp(aggregator_kind, array, orders_array, kind, params, smooth)
    fields = _epsilons(
        run, array, orders_array, aggregator_kind=aggregator_kind, delta=delta, conversion=conversion_name
    )
    if aggregator_kind != "lnmax" and kind != "discrete":
        fields |= _sanitised(
            run,
            array,
            aggregator_kind=aggregator_kind,
            delta=delta,
            conversion=conversion_name,
            ss_order=ss_order,
            ss_beta=ss_beta,
            ss_sigma=ss_sigma,
            generator=generator,
        )
    return DataDependentSummary(**fields)


@dataclass(frozen=True)
class _RunRdp:
    """A run's RDP over the orders, and what the GNSS release of its data-dependent part needs."""

    rdp: FloatArray  # data-dependent, summed over the queries
    rdp_independent: FloatArray
    num_answered: int
    gnmax_steps: list[tuple[FloatArray, npt.NDArray[np.int64], float]]  # (log q, rows, σ) of the GNMax steps
    threshold_parts: tuple[float, float] | None = None  # (T, σ1) of the Confident-GNMax check


def _check_discrete(aggregator_kind: str, smooth: dict[str, Any]) -> None:
    """Secure noise: refuse LNMax (no bound on q for discrete Laplace) and any sanitisation argument."""
    if aggregator_kind == "lnmax":
        raise ValueError("no data-dependent bound on q is derived for discrete Laplace noise (secure LNMax)")
    if any(v is not None for v in smooth.values()):
        named = ", ".join(k for k, v in smooth.items() if v is not None)
        raise ValueError(f"{named}: no smooth-sensitivity sanitisation is derived for discrete noise")


def _run_rdp(
    aggregator_kind: str,
    array: npt.NDArray[np.int64],
    orders: FloatArray,
    kind: str,
    params: dict[str, Any],
    smooth: dict[str, Any],
) -> _RunRdp:
    """The run's data-dependent and data-independent RDP for one aggregator, its parameters checked."""
    n = array.shape[0]

    def forbid(*names: str) -> None:
        _forbid({name: params[name] for name in names}, aggregator_kind)

    if aggregator_kind == "lnmax":
        forbid("sigma", "sigma1", "sigma2", "threshold", "answered")
        _forbid(smooth, "lnmax")
        b = check_positive("noise_scale", _require("noise_scale", params["noise_scale"], "lnmax"))
        rdp = lnmax_data_dependent_rdp(counts=array, noise_scale=b, orders=orders)
        return _RunRdp(rdp, n * lnmax_rdp_data_independent(noise_scale=b, orders=orders), n, [])
    if aggregator_kind == "gnmax":
        forbid("sigma1", "sigma2", "threshold", "answered")
        forbid("noise_scale")
        s = check_positive("sigma", _require("sigma", params["sigma"], "gnmax"))
        rdp = gnmax_data_dependent_rdp(counts=array, sigma=s, orders=orders, noise=kind)  # type: ignore[arg-type]
        independent = n * gnmax_rdp_data_independent(sigma=s, orders=orders)
        return _RunRdp(rdp, independent, n, [(gnmax_log_q(counts=array, sigma=s), array, s)])
    if aggregator_kind == "confident_gnmax":
        forbid("sigma", "noise_scale")
        return _confident_gnmax_run_rdp(array, orders, kind, params)
    raise ValueError(f"aggregator_kind must be 'lnmax', 'gnmax' or 'confident_gnmax', got {aggregator_kind!r}")


def _confident_gnmax_run_rdp(
    array: npt.NDArray[np.int64], orders: FloatArray, kind: str, params: dict[str, Any]
) -> _RunRdp:
    """Confident-GNMax: the check with σ1 on every query, GNMax with σ2 on the answered ones [PSM+18, Alg 1]."""
    t = check_real("threshold", _require("threshold", params["threshold"], "confident_gnmax"))
    s1 = check_positive("sigma1", _require("sigma1", params["sigma1"], "confident_gnmax"))
    s2 = check_positive("sigma2", _require("sigma2", params["sigma2"], "confident_gnmax"))
    n = array.shape[0]
    mask = check_answered(_require("answered", params["answered"], "confident_gnmax"), n)
    num_answered = int(mask.sum())
    rdp = confident_gnmax_data_dependent_rdp(
        counts=array, answered=mask, threshold=t, sigma1=s1, sigma2=s2, orders=orders,
        noise=kind,  # type: ignore[arg-type]
    )  # fmt: skip
    independent = n * threshold_rdp_data_independent(
        sigma1=s1, orders=orders
    ) + num_answered * gnmax_rdp_data_independent(sigma=s2, orders=orders)
    steps = [(gnmax_log_q(counts=array[mask], sigma=s2), array[mask], s2)] if num_answered else []
    return _RunRdp(rdp, independent, num_answered, steps, threshold_parts=(t, s1))


def _epsilons(
    run: _RunRdp,
    array: npt.NDArray[np.int64],
    orders: FloatArray,
    *,
    aggregator_kind: str,
    delta: float,
    conversion: str,
) -> dict[str, Any]:
    """The summary's fields up to the data-dependent ε: each RDP curve converted and minimised over the orders."""
    eps_ind = epsilon_at_orders(run.rdp_independent, orders, delta, conversion)
    eps_dep = epsilon_at_orders(run.rdp, orders, delta, conversion)
    i_ind, i_dep = int(np.argmin(eps_ind)), int(np.argmin(eps_dep))
    return {
        "aggregator_kind": aggregator_kind,
        "num_queries": array.shape[0],
        "num_answered": run.num_answered,
        "num_teachers": int(array[0].sum()),
        "num_classes": array.shape[1],
        "delta": delta,
        "conversion": conversion,
        "data_independent_epsilon": float(eps_ind[i_ind]),
        "data_independent_order": float(orders[i_ind]),
        "data_dependent_epsilon": float(eps_dep[i_dep]),
        "data_dependent_order": float(orders[i_dep]),
    }


def _sanitised(
    run: _RunRdp,
    array: npt.NDArray[np.int64],
    *,
    aggregator_kind: str,
    delta: float,
    conversion: str,
    ss_order: float | None,
    ss_beta: float | None,
    ss_sigma: float | None,
    generator: torch.Generator | None,
) -> dict[str, Any]:
    """The GNSS release of the raw RDP at ``ss_order`` [PSM+18, App. C], and its fields of the summary."""
    order = check_order(_require("ss_order", ss_order, aggregator_kind))
    beta = 0.4 / order if ss_beta is None else check_positive("ss_beta", ss_beta)
    sigma_ss = check_positive("ss_sigma", _require("ss_sigma", ss_sigma, aggregator_kind))
    gen = check_generator(_require("generator", generator, aggregator_kind))
    sanitisation_rdp = gnss_rdp(beta=beta, ss_sigma=sigma_ss, order=order)  # also checks α < 1/(2β)
    raw, ss = _raw_rdp_and_smooth_sensitivity(run, array, order=order, beta=beta)
    noise_std = sigma_ss * ss
    noisy = raw + noise_std * float(gaussian(1.0, (), generator=gen))
    sanitised_rdp = max(0.0, noisy)
    sanitised_eps = float(
        epsilon_at_orders(np.array([sanitised_rdp + sanitisation_rdp]), np.array([order]), delta, conversion)[0]
    )
    return {
        "ss_order": order,
        "ss_beta": beta,
        "ss_sigma": sigma_ss,
        "data_dependent_rdp_at_ss_order": raw,
        "smooth_sensitivity": ss,
        "sanitisation_noise_std": noise_std,
        "sanitisation_rdp": sanitisation_rdp,
        "sanitised_rdp": sanitised_rdp,
        "sanitised_epsilon": sanitised_eps,
    }


def _raw_rdp_and_smooth_sensitivity(
    run: _RunRdp, array: npt.NDArray[np.int64], *, order: float, beta: float
) -> tuple[float, float]:
    """The raw RDP at ``order`` (the threshold check's and β_σ of each GNMax step) and its β-smooth
    sensitivity, from each query's running maximum of local-sensitivity bounds (module docstring)."""
    num_teachers, num_classes = int(array[0].sum()), array.shape[1]
    raw = 0.0
    ls_total = np.zeros(num_teachers + 1)
    if run.threshold_parts is not None:
        t, s1 = run.threshold_parts
        by_max = threshold_rdp_by_max(num_teachers, t, s1, order)
        raw += float(by_max[array.max(axis=1)].sum())
        for row in array:
            ls_total += np.maximum.accumulate(threshold_local_sensitivity_row(row, t, s1, order))
    for log_q, rows, s in run.gnmax_steps:
        check_smooth_sensitivity_conditions(sigma=s, num_classes=num_classes, order=order)
        raw += float(beta_gnmax_unchecked(log_q, s, order).sum())
        for row in rows:
            ls_total += np.maximum.accumulate(
                gnmax_local_sensitivity_row(tuple(sorted(row.tolist(), reverse=True)), s, order)
            )
    return raw, float(np.max(ls_total * np.exp(-beta * np.arange(num_teachers + 1))))
