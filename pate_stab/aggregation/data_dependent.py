"""PATE's data-dependent ε of a baseline release, beside the data-independent ε the budget enforces.

PATE reports data-dependent ε (Papernot et al. 2017, Thm 3; 2018, Thm 6 and App. C): a bound
computed from the actual votes, smaller than the data-independent one when the teachers agree.
The raw figure depends on the private votes and is **not** differentially private; the
smooth-sensitivity-sanitised figure (GNMax, Confident-GNMax) is: it adds Gaussian noise scaled by
the β-smooth sensitivity and pays that release's own RDP. The library enforces its budget on the
data-independent ε only — a guarantee fixed before any vote is seen, which the ledger can check
before releasing — and reports both data-dependent figures, labelled, so that its baselines can
also be compared on PATE's own footing. The stability releasers have no data-dependent figure:
their ε is data-independent by construction (the sparse vector pays only for ⊥).

What may be published (DESIGN.md fact 8): :func:`split_data_dependent` separates the sanitised
figure and the data-independent quantities (published) from the raw figure and the inputs of its
sanitisation — the data-dependent RDP, its smooth sensitivity and the noise's standard deviation
(private diagnostics). PATE publishes only the sanitised figure.

The sanitisation's order and noise multiplier are settings of the run (``dd_order``,
``dd_sigma``), fixed before the votes are seen. A release made with secure (discrete) noise gets
the raw figure from the discrete Gaussian's tail bound and no sanitised figure
(:func:`_secure_figures`). A release made with seeded noise (research) is sanitised with the run's
seeded generator, so anyone who knows the seed (``config.json``) can subtract the sanitisation
noise and recover the raw figure: the sanitised figure is then no mechanism output, and
:func:`split_data_dependent` keeps it in the private diagnostics, with a note in the published
part saying why it is absent (:data:`SEEDED_SANITISATION_NOTE`). No published file holds a
sanitised figure that the ledger does not charge: charging it would need GNSS noise from the
secure source, and the sanitisation is derived for continuous Gaussian noise only.

A run computes them for each of its releases with :func:`pate_stab.run.release.release_data_dependent`.
"""

from __future__ import annotations

from typing import Any

import torch

from pate_stab.aggregation.base import ABSTAIN
from pate_stab.aggregation.private_knn import ZYWW20_LABEL, PrivateKNN, zyww20_epsilon
from pate_stab.aggregation.registry import aggregator_spec
from pate_stab.privacy.pate.data_dependent import (
    confident_gnmax_data_dependent_rdp,
    data_dependent_summary,
    gnmax_data_dependent_rdp,
)
from pate_stab.privacy.pate.rdp import DEFAULT_ORDERS, rdp_to_epsilon

__all__ = [
    "DATA_DEPENDENT_LABEL",
    "SEEDED_SANITISATION_NOTE",
    "THEIRS_KEY",
    "data_dependent_figures",
    "split_data_dependent",
    "theirs_figure",
]

THEIRS_KEY = "epsilon_zyww20_theirs"
"""Where a Private-kNN release's [ZYWW20] figure (:func:`theirs_figure`) sits: in the private part only."""

DATA_DEPENDENT_LABEL = {
    "epsilon": "data-independent ε (enforced against the budget)",
    "epsilon_dd_raw": "data-dependent ε, raw: depends on the private votes, NOT differentially private",
    "epsilon_dd_sanitised": "data-dependent ε after smooth-sensitivity sanitisation (private; includes its own cost)",
}

_PARAMETERS = ("noise_scale", "sigma", "sigma1", "sigma2", "threshold")

# fields of DataDependentSummary that are computed from the votes without being released
_RAW_DETAIL = (
    "data_dependent_epsilon",
    "data_dependent_order",
    "data_dependent_rdp_at_ss_order",
    "smooth_sensitivity",
    "sanitisation_noise_std",
)
_NOT_SANITISED = "raw only, not sanitised"
# fields of the detail that hold the sanitised figure (released only when its noise is secret)
_SANITISED_DETAIL = ("sanitised_rdp", "sanitised_epsilon")
_SANITISED_WITH = "sanitisation_noise"  # internal marker: where the sanitisation's noise came from
SEEDED_SANITISATION_NOTE = (
    "The sanitised data-dependent ε is kept in the private files, because its noise came from the run's published "
    "seed and would reveal the private figure, so use secure noise to publish it (README: Privacy notes)."
)
DATA_INDEPENDENT_NOTE = (
    "This releaser's ε does not depend on the data, so it has no data-dependent ε (README: Privacy notes)."
)
"""The published notes on PATE's data-dependent ε: each one plain sentence with its README pointer
(the technical reason, where it depends on the votes, stays in the private diagnostics)."""
_ONE_TEACHER_NOTE = (
    "PATE's data-dependent ε is not computed, because its analysis assumes one changed teacher per neighbour "
    "(README: Privacy notes)."
)
_NOT_SANITISED_NOTE = (
    "PATE's data-dependent ε could not be sanitised at these settings, so it stays in the private diagnostics with "
    "the reason (README: Privacy notes)."
)
_LNMAX_NOTE = (
    "PATE's data-dependent ε of LNMax stays private (raw only), because no smooth-sensitivity sanitisation of it "
    "is derived (README: Privacy notes)."
)
_DISCRETE_LAPLACE_NOTE = (
    "No data-dependent ε is derived for LNMax's secure (discrete Laplace) noise (README: Privacy notes)."
)
_DISCRETE_GAUSSIAN_NOTE = (
    "PATE's data-dependent ε under secure (discrete Gaussian) noise stays private (raw only), because no "
    "smooth-sensitivity sanitisation is derived for that noise (README: Privacy notes)."
)


def split_data_dependent(figures: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(published, private) parts of :func:`data_dependent_figures`' output.

    Published: the accounting, the sanitised ε (a mechanism's output), the data-independent RDP
    ε, and the detail's data-independent and released fields. Private: the raw ε, the raw
    detail fields (the data-dependent RDP, its order, smooth sensitivity, noise std) and, where
    the sanitisation's conditions failed on these votes, the error message. A sanitised figure
    whose noise came from the run's seed goes to the private part too (its detail fields
    included), and the published note says why it is absent (:data:`SEEDED_SANITISATION_NOTE`).
    """
    seeded = figures.get(_SANITISED_WITH) == "seeded" and figures.get("epsilon_dd_sanitised") is not None
    hidden = ("epsilon_dd_raw", "data_dependent_detail", _SANITISED_WITH, THEIRS_KEY)
    public = {k: v for k, v in figures.items() if k not in hidden}
    private: dict[str, Any] = {"epsilon_dd_raw": figures.get("epsilon_dd_raw")}
    if THEIRS_KEY in figures:  # [ZYWW20]'s own figure: no guarantee here, private files only
        private[THEIRS_KEY] = figures[THEIRS_KEY]
    raw_detail = _RAW_DETAIL + (_SANITISED_DETAIL if seeded else ())
    detail = figures.get("data_dependent_detail")
    if detail is not None:
        public["data_dependent_detail"] = {k: v for k, v in detail.items() if k not in raw_detail}
        private["data_dependent_detail"] = {k: v for k, v in detail.items() if k in raw_detail}
    note = str(figures.get("data_dependent_note", ""))
    if note.startswith(_NOT_SANITISED):
        public["data_dependent_note"] = _NOT_SANITISED_NOTE
        private["data_dependent_note"] = note
    if seeded:  # sanitised with the published seed: recoverable, so not a mechanism output
        private["epsilon_dd_sanitised"] = public["epsilon_dd_sanitised"]
        public["epsilon_dd_sanitised"] = None
        public["data_dependent_note"] = SEEDED_SANITISATION_NOTE
        if note:
            private["data_dependent_note"] = note
    return public, private


def data_dependent_figures(
    aggregator: str,
    summary: dict[str, Any],
    counts: torch.Tensor,
    labels: torch.Tensor,
    *,
    delta: float,
    teachers_changed: int,
    order: float,
    sigma: float,
    generator: torch.Generator,
) -> dict[str, Any]:
    """The data-dependent figures of one release (None where they do not apply, with a note saying why).

    Args:
        aggregator: the registry name of the release's aggregator.
        summary: the release's summary (its noise parameters).
        counts: ``(n, C)`` vote histograms of the queries the aggregator processed, in order.
        labels: the released labels of those queries (−1 for ⊥).
        delta: δ at which ε is stated.
        teachers_changed: 1, or 2 under replace-one over content keys, where PATE's per-vote
            analysis does not apply (the figures are then None, with a note).
        order, sigma: the sanitisation's Rényi order and noise multiplier σ_ss.
        generator: the sanitisation noise: the run's seeded generator (a sanitised figure is
            marked as seeded, and :func:`split_data_dependent` keeps it private).
    """
    kind = aggregator_spec(aggregator).data_dependent
    out: dict[str, Any] = {
        "accounting": aggregator_spec(aggregator).accounting,
        "epsilon_dd_raw": None,
        "epsilon_dd_sanitised": None,
        "epsilon_rdp_data_independent": None,
        "data_dependent_note": "",
    }
    if kind is None:
        out["data_dependent_note"] = DATA_INDEPENDENT_NOTE
        return out
    if teachers_changed != 1:
        out["data_dependent_note"] = _ONE_TEACHER_NOTE
        return out
    params = {k: float(summary[k]) for k in _PARAMETERS if k in summary}
    kwargs: dict[str, Any] = {"delta": delta, **params}
    if kind == "confident_gnmax":
        kwargs["answered"] = (labels != ABSTAIN).numpy()
    # a summary without a noise field comes from a release when PATE's aggregators drew float noise
    if summary.get("noise", "seeded") == "secure":
        return _secure_figures(out, kind, counts, kwargs)
    if kind != "lnmax":
        kwargs.update(ss_order=order, ss_sigma=sigma, generator=generator)
    try:
        s = data_dependent_summary(counts.numpy(), aggregator_kind=kind, **kwargs)  # type: ignore[arg-type]
    except ValueError as exc:  # e.g. PATE 2018's conditions C5–C6 fail at this σ and order
        if kind == "lnmax":
            raise
        # the raw figure does not need the smooth-sensitivity conditions; only its sanitisation does
        if kind == "gnmax":
            rdp = gnmax_data_dependent_rdp(counts=counts.numpy(), sigma=params["sigma"], orders=DEFAULT_ORDERS)
        else:
            rdp = confident_gnmax_data_dependent_rdp(
                counts=counts.numpy(), answered=kwargs["answered"], threshold=params["threshold"],
                sigma1=params["sigma1"], sigma2=params["sigma2"], orders=DEFAULT_ORDERS,
            )  # fmt: skip
        out["epsilon_dd_raw"] = rdp_to_epsilon(rdp=rdp, orders=DEFAULT_ORDERS, delta=delta)[0]
        out["data_dependent_note"] = f"{_NOT_SANITISED}: {exc}"
        return out
    if s is not None:
        out["epsilon_dd_raw"] = s.data_dependent_epsilon
        out["epsilon_dd_sanitised"] = s.sanitised_epsilon
        if s.sanitised_epsilon is not None:  # drawn from ``generator``: the run's seeded one
            out[_SANITISED_WITH] = "seeded"
        out["epsilon_rdp_data_independent"] = s.data_independent_epsilon
        out["data_dependent_detail"] = s.to_dict()
        if kind == "lnmax":
            out["data_dependent_note"] = _LNMAX_NOTE
    return out


def _secure_figures(out: dict[str, Any], kind: str, counts: torch.Tensor, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The figures of a release made with secure (discrete) noise: raw only, with the discrete q bounds.

    PSM+18's analysis bounds q with continuous Gaussian tails; under the discrete Gaussian q is
    bounded by its sub-Gaussian tails instead
    (:func:`~pate_stab.privacy.pate.rdp.gnmax_log_q_discrete`), and Thm 6 applies unchanged (the
    discrete Gaussian has the continuous one's RDP). The smooth-sensitivity sanitisation is
    derived for the continuous bound only, so no sanitised figure is given; nor is any figure for
    discrete Laplace noise (LNMax), whose q bound is not derived here.
    """
    if kind == "lnmax":
        out["data_dependent_note"] = _DISCRETE_LAPLACE_NOTE
        return out
    s = data_dependent_summary(counts.numpy(), aggregator_kind=kind, noise="discrete", **kwargs)  # type: ignore[arg-type]
    out["epsilon_dd_raw"] = s.data_dependent_epsilon
    out["epsilon_rdp_data_independent"] = s.data_independent_epsilon
    out["data_dependent_detail"] = s.to_dict()
    out["data_dependent_note"] = _DISCRETE_GAUSSIAN_NOTE  # q bounded by the discrete Gaussian's sub-Gaussian tails
    return out


def theirs_figure(summary: dict[str, Any], labels: torch.Tensor, *, delta: float) -> dict[str, Any] | None:
    """[ZYWW20]'s own ε of a Private-kNN release (:func:`~pate_stab.aggregation.private_knn.zyww20_epsilon`),
    labelled as theirs, or None for other releases and under label privacy (their accounting is stated for
    add/remove of a record). For the private files only (:func:`split_data_dependent`)."""
    if summary.get("mechanism") != PrivateKNN.name or summary.get("privacy_unit", "record") != "record":
        return None
    asked = int(labels.numel())
    if asked == 0:
        return None
    answered = int((labels != ABSTAIN).sum())
    epsilon = zyww20_epsilon(
        sigma=float(summary["sigma"]), sigma1=None if summary.get("sigma1") is None else float(summary["sigma1"]),
        sampling_rate=float(summary["sampling_rate"]), num_queries=asked, num_answered=answered, delta=delta,
        noise=str(summary.get("noise", "secure")),
    )  # fmt: skip
    return {"epsilon": epsilon, "delta": delta, "queries_asked": asked, "queries_answered": answered,
            "label": ZYWW20_LABEL}  # fmt: skip
