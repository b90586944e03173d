"""A plan before training: which aggregator can answer at a data set's size, and with how many teachers.

:func:`plan_run` takes the private size n, the number of classes C, the number of queries m, the
target (ε, δ), T and optionally the run's k, and says for each aggregator what its calibrated
noise implies before anything is trained or spent:

- **the vote gap needed**: the gap between the largest and second-largest vote count at which a
  query gets its plurality label with probability ≥ :data:`PLAN_CONFIDENCE` (0.95);
- **the smallest k**: the fewest teachers at which anything can be answered — the k at which a
  *unanimous* vote (gap k) is answered with its label with probability ≥ 0.95;
- **records per teacher** n / k at that k, and, with the run's k, whether it can answer at all and
  the ε it would need otherwise.

What "answered" means differs by aggregator, and the plan says which:

``stability`` (BTT18 Alg 4 through the registry's calibration; halts after T ⊥)
    a query is answered when dist + Lap(2λ) − Lap(λ) > w, with dist = ⌈gap/2⌉ − 1 (DESIGN fact 2;
    ⌊dist/g⌋ when one neighbour changes g teachers). Passing w.p. ≥ 0.95 needs dist ≥ w + x with x
    the 0.95-quantile of Lap(2λ) − Lap(λ) (:func:`~pate_stab.theory.teachers_for_unanimous_answer`),
    i.e. gap ≥ 2g⌈w + x⌉ + 1: the vote gap needed equals the smallest k. An answered label is the
    plurality by construction. This is exactly the rule by which a run refuses a budget
    (:func:`~pate_stab.aggregation.registry.answerability`,
    :func:`~pate_stab.run.prepare.check_answerable`): planned unanswerable ⇔ refused.
``stability-soft`` (binary tasks only; Alg 6/8)
    the same for the first (plain) histogram test; no gap figure.
``lnmax`` / ``gnmax`` (PATE 2017 §3.1, PATE 2018 §4.1; never halt, answer every query)
    the released label is the plurality unless a competitor's noise beats the gap. By the union
    bound over the C − 1 competitors, P[wrong] ≤ (C − 1)·P[Z > gap] with Z the difference of two
    independent noise draws: Lap(b) − Lap(b) has tail ½(1 + t/2b)e^{−t/b} (the density of the
    difference is (1/4b)(1 + |t|/b)e^{−|t|/b}); N(0, σ²) − N(0, σ²) is N(0, 2σ²). The gap needed
    solves (C − 1)·P[Z > gap] = 0.05, and the smallest k is that gap rounded up (a unanimous vote).
    Below it the label is still released, but it is the plurality with probability < 0.95.
``confident-gnmax`` (PATE 2018 Alg 1; never halts, ⊥ below the threshold)
    a query is answered when max count + N(0, σ1²) ≥ τ = fraction·k, and then labelled by GNMax
    with σ2. Each half gets failure probability 0.025, so both hold w.p. ≥ 0.95: the largest count
    must reach τ + σ1·z₀.₉₇₅ and the gap σ2√2·z(1 − 0.025/(C − 1)). A unanimous vote passes the
    check when k(1 − fraction) ≥ σ1·z₀.₉₇₅, so the smallest k is the larger of σ1·z₀.₉₇₅/(1 −
    fraction) and the gap.

``private-knn`` / ``confident-private-knn`` (Zhu et al. 2020; planned when asked for: ``knn_sampling_rate``)
    k is K, the nearest records of a query's Poisson sample (rate γ) that vote: the rules are GNMax's and
    Confident-GNMax's with the σ calibrated for the subsampled accounting
    (:mod:`~pate_stab.aggregation.private_knn`). "records per teacher" is then γn/K, the sampled records
    per voter (≥ 1 is needed for K voters on average).

The recommendation (:attr:`RunPlan.recommended`, :attr:`RunPlan.recommended_teachers`) names what
the plan expects to answer, from these sizes alone: the stability releaser at :data:`K_FACTOR` × its
smallest k where that leaves at least :data:`RECORDS_PER_TEACHER_FLOOR` records per teacher (the
floor's derivation is in its docstring and docs/plan.md); below it, a warning that stability will
rarely answer, and GNMax at the k that leaves the floor's records per teacher, or, where GNMax's
smallest k does not, a direct learner (:data:`DIRECT_LEARNER`). ``pate-stab transfer`` on the
user's files without ``--aggregator`` follows it.

The plan is computed from the private size n, a private statistic (DESIGN fact 8): it is printed
to the user's terminal and never written into a published file.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, replace
from statistics import NormalDist
from typing import Any, Literal

from pate_stab._checks import check_int
from pate_stab.aggregation.baselines import ConfidentGNMax
from pate_stab.aggregation.registry import (
    AGGREGATORS,
    AggregatorSettings,
    aggregator_spec,
    answerability,
    calibrated_noise,
)
from pate_stab.privacy.mechanisms.calibration import Calibration

__all__ = [
    "DIRECT_LEARNER",
    "K_FACTOR",
    "PLAN_CONFIDENCE",
    "RECORDS_PER_TEACHER_FLOOR",
    "AggregatorPlan",
    "RunPlan",
    "agreement_needed",
    "analytic_gaussian_mu",
    "laplace_difference_tail",
    "plan_for_config",
    "plan_run",
]

PLAN_CONFIDENCE = 0.95
"""The probability with which a planned answer is given (and is the plurality label)."""
RECORDS_PER_TEACHER_FLOOR = 30
"""The fewest records per teacher, at the k a run uses, at which the plan expects teachers to agree
often enough for a halting releaser to answer (docs/plan.md, "The records-per-teacher floor").

Derivation. At its smallest k a halting releaser answers only unanimous votes; at :data:`K_FACTOR`
(2) times it, the gap needed is half the teachers, so it answers where at least 75 % of them vote
for one class. Teachers that are right with probability a on a point, independently, reach that
share on most points only when a is about 0.75 or more. Assumed learning curve, from the project's
measurements: teachers are that accurate only from a few dozen records each — DESIGN.md: 0.89 mean
accuracy at 30 MNIST records (scattering + propagation), 0.64 at 30 Fashion-MNIST records; on the
survey tables of issue 44, 0.59 at 7 records, near the majority rate, and stability answered nothing
at 29 records a teacher in 5 of 6 runs. So the plan asks for 30 records per teacher at twice the
smallest k (n ≥ 60 × the smallest k); below that, the stability releaser will rarely answer."""
K_FACTOR = 2
"""The k the plan recommends for a halting releaser: this many times its smallest k (a vote gap of
half the teachers: ≥ 75 % agreement)."""
DIRECT_LEARNER = "dpsgd-linear"
"""The direct learner the plan recommends where no aggregator leaves the floor's records per teacher
(record privacy; under label privacy the label-DP learners, docs/label_dp_learners.md)."""
_FAIL = 1.0 - PLAN_CONFIDENCE
_STANDARD_NORMAL = NormalDist()
_LARGE_K = 10**12  # a k every calibration's unanimous vote clears: answerability then reports only the k needed


def laplace_difference_tail(t: float, noise_scale: float) -> float:
    """P[L₁ − L₂ > t] for independent L₁, L₂ ~ Lap(b), t ≥ 0: ½(1 + t/2b)e^{−t/b}.

    The difference has density (1/4b)(1 + |t|/b)e^{−|t|/b} (convolution of two Laplace densities);
    integrating from t gives the tail. Pinned: t = 0 → ½; t = b → (3/4)e^{−1} ≈ 0.2759.
    """
    if not (t >= 0 and noise_scale > 0):
        raise ValueError(f"need t >= 0 and noise_scale > 0, got t={t!r}, noise_scale={noise_scale!r}")
    return 0.5 * (1.0 + t / (2.0 * noise_scale)) * math.exp(-t / noise_scale)


def _lnmax_gap(noise_scale: float, competitors: int, fail: float) -> float:
    """The smallest gap with competitors · P[Lap(b) − Lap(b) > gap] ≤ fail (bisection on the tail)."""
    target = fail / competitors
    if target >= 0.5:
        return 0.0
    lo, hi = 0.0, noise_scale
    while laplace_difference_tail(hi, noise_scale) > target:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if laplace_difference_tail(mid, noise_scale) > target else (lo, mid)
    return hi


def analytic_gaussian_mu(*, epsilon: float, delta: float) -> float:
    """The largest μ for which a μ-GDP mechanism (one Gaussian of sensitivity / σ = μ) is (ε, δ)-DP.

    Balle & Wang 2018, Thm 8: δ(μ) = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ), increasing in μ; solved by
    bisection (Φ through erfc, no cancellation). m Gaussian mechanisms of μ₁ … μ_m compose to one
    with μ = √(Σ μ_i²) (Dong, Roth & Su 2019, Cor 2). Pinned: ε = 1, δ = 1e-5 → μ ≈ 0.26805 (one
    GNMax query, sensitivity √2: σ = √2/μ ≈ 5.27, as ``GNMax.calibrate``'s example).
    """
    if not (math.isfinite(epsilon) and epsilon > 0 and 0 < delta < 1):
        raise ValueError(f"need ε > 0 and δ in (0, 1), got ε={epsilon!r}, δ={delta!r}")

    def phi(x: float) -> float:
        return 0.5 * math.erfc(-x / math.sqrt(2.0))

    def gap(mu: float) -> float:
        a = phi(mu / 2 - epsilon / mu)
        b = math.exp(epsilon + math.log(max(phi(-mu / 2 - epsilon / mu), 1e-300)))
        return a - b - delta

    lo, hi = 1e-6, 1.0
    while gap(hi) < 0:
        lo, hi = hi, 2.0 * hi
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if gap(mid) < 0 else (lo, mid)
    return lo


def _gaussian_gap(sigma: float, competitors: int, fail: float) -> float:
    """The smallest gap with competitors · P[N(0, 2σ²) > gap] ≤ fail: σ√2 · z(1 − fail/competitors)."""
    return sigma * math.sqrt(2.0) * _STANDARD_NORMAL.inv_cdf(1.0 - fail / competitors)


@dataclass(frozen=True)
class AggregatorPlan:
    """What one aggregator's calibration implies at the plan's (n, C, m, ε, δ, T).

    Attributes:
        aggregator: the registry name.
        halts: True for the stability releasers (they stop after T ⊥, so a run refuses a budget at
            which they cannot answer).
        teachers_needed: the smallest k at which a unanimous vote is answered with its label with
            probability ≥ 0.95 (module docstring for each aggregator's rule).
        records_per_teacher: n / teachers_needed.
        gap_needed: the vote gap (largest minus second-largest count) at which a query gets its
            plurality label w.p. ≥ 0.95; None for the soft-label releaser.
        noise: the calibrated noise parameters (λ and w; b; σ; σ1, σ2 and the threshold τ at k).
        answerable: at the run's k (None when no k was given): k ≥ teachers_needed.
        epsilon_needed: for a halting aggregator that cannot answer at the run's k: the ε at which it
            would (inf: none below 10⁴); None otherwise.
        teachers_needed_t1: for a halting aggregator: the smallest k with T = 1 (the least T).
    """

    aggregator: str
    halts: bool
    teachers_needed: int
    records_per_teacher: float
    gap_needed: float | None
    noise: dict[str, float]
    answerable: bool | None
    epsilon_needed: float | None = None
    teachers_needed_t1: int | None = None


@dataclass(frozen=True)
class RunPlan:
    """A plan: the inputs, one :class:`AggregatorPlan` per aggregator, and a recommendation: its
    sentence, the aggregator or direct learner it names (``recommended``), that one's k
    (``recommended_teachers``; None for a direct learner) and whether the stability releaser is
    below the records-per-teacher floor (``stability_rarely_answers``; module docstring)."""

    num_private: int
    num_classes: int
    num_queries: int
    epsilon: float
    delta: float
    max_unstable: int
    num_teachers: int | None
    calibration: str
    aggregators: tuple[AggregatorPlan, ...]
    recommendation: str
    recommended: str = "stability"
    recommended_teachers: int | None = None
    stability_rarely_answers: bool = False

    def row(self, name: str) -> AggregatorPlan:
        """The plan of aggregator ``name`` (KeyError if it was not planned)."""
        for row in self.aggregators:
            if row.aggregator == name:
                return row
        raise KeyError(f"{name!r} was not planned; planned: {', '.join(r.aggregator for r in self.aggregators)}")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def text(self) -> str:
        """The plan as lines for a terminal (it holds the private size n: not for publication)."""
        k = self.num_teachers
        head = (
            f"plan: n={self.num_private} private records, C={self.num_classes} classes, m={self.num_queries} "
            f"queries, ε={self.epsilon:g}, δ={self.delta:g}, T={self.max_unstable}"
            + (f", k={k} teachers ({self.num_private / k:.1f} records each)" if k else "")
        )
        condition = (
            f"at k={k} one number per aggregator: the share of the teachers that must vote for one class" if k
            else "one number per aggregator: the vote gap (top count minus the next) a query needs"
        )  # fmt: skip
        lines = [
            head,
            f"  ({condition} for its answer to be that class w.p. ≥ {PLAN_CONFIDENCE:g}; from the noise alone, no "
            "data read; docs/plan.md)",
        ]
        for r in self.aggregators:
            noise = ", ".join(f"{key}={value:.3g}" for key, value in r.noise.items())
            line = (
                f"  {r.aggregator:<16} smallest k {r.teachers_needed:>6} ({r.records_per_teacher:.1f} records per "
                f"teacher)"
            )
            if r.answerable is not None:
                line += f"; at k={k}: {r.aggregator} " + _verdict(r, k)  # type: ignore[arg-type]
            elif r.gap_needed is not None:
                line += f"; vote gap needed {r.gap_needed:.0f}"
            lines.append(f"{line}; {noise}")
        if self.stability_rarely_answers:
            lines.append(f"  WARNING: {_rarely_answers(self.row('stability'), self.num_private)}")
        lines.append(f"  recommendation: {self.recommendation}")
        return "\n".join(lines)


def agreement_needed(r: AggregatorPlan, k: int) -> float | None:
    """The share of the k teachers that, voting for one class, makes the plan's answer hold: the
    query is answered (stability, confident-gnmax) and labelled with that class w.p. ≥ 0.95.

    With a top count a, the second count is at most k − a, so the gap is at least 2a − k; a gap ≥ g
    follows from a ≥ (k + g) / 2. Confident-GNMax also needs a ≥ the count its threshold check
    needs (``count_needed``). Computed from the calibrated noise alone (public settings, no data).
    None where there is no gap figure (soft labels).
    """
    if r.gap_needed is None:
        return None
    count = (k + r.gap_needed) / 2.0
    if "count_needed" in r.noise:
        count = max(count, r.noise["count_needed"])
    return min(1.0, count / k)


def _rarely_answers(stab: AggregatorPlan, n: int) -> str:
    """The warning of a plan whose stability releaser is below the floor at :data:`K_FACTOR` times its
    smallest k (:data:`RECORDS_PER_TEACHER_FLOOR`)."""
    k = K_FACTOR * stab.teachers_needed
    return (
        f"stability will rarely answer: at k={k}, {K_FACTOR}× its smallest k, where it answers queries on which 75 % "
        f"of the teachers agree, each teacher has {n / k:.1f} records, below the floor of "
        f"{RECORDS_PER_TEACHER_FLOOR} at which teachers agree that often (docs/plan.md: The records-per-teacher "
        "floor); a run with it may spend ε and release nothing"
    )


def _verdict(r: AggregatorPlan, k: int) -> str:
    share = agreement_needed(r, k)
    agree = "" if share is None else f"at least {100 * share:.0f} % of the {k} teachers agree"
    if r.answerable:
        if r.halts:
            return f"answers only queries on which {agree}" if agree else "answers unanimous votes"
        if r.aggregator in ("confident-gnmax", "confident-private-knn"):
            return f"answers queries on which {agree}, ⊥ elsewhere"
        return f"labels every query; the label is the teachers' majority w.p. ≥ 0.95 where {agree}"
    if r.halts:
        eps = r.epsilon_needed
        need = "no ε ≤ 256 helps" if eps is None or math.isinf(eps) else f"needs ε ≥ {eps:.3g}"
        return f"CANNOT answer, a run refuses ({need})"
    if "sampled_records" in r.noise and k > r.noise["sampled_records"]:
        return "fewer sampled records than K on average (raise γ or lower K)"
    if r.aggregator in ("confident-gnmax", "confident-private-knn"):
        return "mostly ⊥ (a unanimous vote passes the threshold w.p. < 0.95)"
    return "labels unreliable (even a unanimous vote's label is the plurality w.p. < 0.95)"


def _stability_row(name: str, s: AggregatorSettings, n: int, with_k: bool) -> AggregatorPlan:
    # without a k, only the k needed is asked for (no search for the ε a k would need)
    probe = s if with_k else replace(s, num_teachers=_LARGE_K)
    status = answerability(name, probe)
    t1 = answerability(name, replace(s, num_teachers=_LARGE_K, max_unstable=1))
    cal = calibrated_noise(name, s)
    if status is None or t1 is None or not isinstance(cal, Calibration):
        raise ValueError(f"{name} is not a halting (stability) aggregator")
    need = status.teachers_needed
    soft = aggregator_spec(name).soft
    return AggregatorPlan(
        aggregator=name,
        halts=True,
        teachers_needed=need,
        records_per_teacher=n / need,
        gap_needed=None if soft else float(need),
        noise={"lambda": cal.noise_scale, "threshold_w": cal.threshold},
        answerable=status.answerable if with_k else None,
        epsilon_needed=status.epsilon_needed if with_k else None,
        teachers_needed_t1=t1.teachers_needed,
    )


def _baseline_row(name: str, s: AggregatorSettings, n: int, c: int, with_k: bool) -> AggregatorPlan:
    competitors, g, m = c - 1, s.teachers_changed, s.num_queries
    if name == "lnmax":
        b = calibrated_noise(name, s).noise_scale  # type: ignore[union-attr]
        gap = _lnmax_gap(b, competitors, _FAIL)
        need, noise = math.ceil(gap), {"b": b}
    else:
        # the Gaussian baselines compose exactly to one Gaussian (μ-GDP): σ in closed form, within the
        # PLD calibration's discretisation of what the release uses (and far quicker)
        mu = analytic_gaussian_mu(epsilon=s.epsilon, delta=s.delta)
        # secure (discrete Gaussian) noise is calibrated with RDP (quick): plan with exactly that σ
        secure = calibrated_noise(name, s) if s.noise == "secure" else None
        if name == "gnmax":
            sigma = secure.sigma if secure is not None else g * math.sqrt(2.0 * m) / mu  # type: ignore[union-attr]
            gap = _gaussian_gap(sigma, competitors, _FAIL)
            need, noise = math.ceil(gap), {"sigma": sigma}
        else:  # confident-gnmax: the threshold check and the label each get half the failure probability
            r = s.sigma_ratio
            if isinstance(secure, ConfidentGNMax):  # the registry's mechanism for confident-gnmax
                sigma1, sigma2 = secure.sigma1, secure.sigma2
            else:
                sigma2 = g * math.sqrt(m * (1.0 / r**2 + 2.0)) / mu
                sigma1 = r * sigma2
            gap = _gaussian_gap(sigma2, competitors, _FAIL / 2)
            margin = sigma1 * _STANDARD_NORMAL.inv_cdf(1.0 - _FAIL / 2)
            need = max(math.ceil(margin / (1.0 - s.confident_fraction)), math.ceil(gap))
            noise = {"sigma1": sigma1, "sigma2": sigma2}
            if with_k:
                threshold = s.confident_fraction * s.num_teachers
                noise["threshold"] = threshold
                noise["count_needed"] = threshold + margin
    return AggregatorPlan(
        aggregator=name,
        halts=False,
        teachers_needed=max(need, 1),
        records_per_teacher=n / max(need, 1),
        gap_needed=gap,
        noise=noise,
        answerable=(s.num_teachers >= need) if with_k else None,
    )


def _knn_row(name: str, s: AggregatorSettings, n: int, c: int, with_k: bool) -> AggregatorPlan:
    """Private-kNN: GNMax's (or Confident-GNMax's) rule with the subsampled calibration's σ (module docstring)."""
    agg = calibrated_noise(name, s)
    sigma, sigma1 = agg.sigma, getattr(agg, "sigma1", None)  # type: ignore[union-attr]
    noise = {"sigma": sigma, "sampling_rate": s.sampling_rate, "sampled_records": s.sampling_rate * n}
    if sigma1 is None:
        gap = _gaussian_gap(sigma, c - 1, _FAIL)
        need = math.ceil(gap)
    else:
        gap = _gaussian_gap(sigma, c - 1, _FAIL / 2)
        margin = sigma1 * _STANDARD_NORMAL.inv_cdf(1.0 - _FAIL / 2)
        need = max(math.ceil(margin / (1.0 - s.confident_fraction)), math.ceil(gap))
        noise["sigma1"] = sigma1
        if with_k:
            noise["threshold"] = s.confident_fraction * s.num_teachers
            noise["count_needed"] = noise["threshold"] + margin
    need = max(need, 1)
    return AggregatorPlan(
        aggregator=name,
        halts=False,
        teachers_needed=need,
        records_per_teacher=s.sampling_rate * n / need,
        gap_needed=gap,
        noise=noise,
        answerable=(s.num_teachers >= need and s.sampling_rate * n >= s.num_teachers) if with_k else None,
    )


def _recommend(
    rows: dict[str, AggregatorPlan], n: int, c: int, k: int | None, s: AggregatorSettings
) -> tuple[str, str, int | None, bool]:
    """(the recommendation's sentence, the aggregator or direct learner it names, its k, whether the
    stability releaser is below the floor): from n, C, the settings and the run's k alone (public sizes)."""
    stab = rows["stability"]
    floor = RECORDS_PER_TEACHER_FLOOR
    rarely = n / (K_FACTOR * stab.teachers_needed) < floor
    if not rarely:
        if k is not None and stab.answerable:
            share = agreement_needed(stab, k)
            return (
                f"stability at k={k} ({n / k:.1f} records per teacher) answers the queries on which at least "
                f"{100 * (share or 1.0):.0f} % of the teachers agree; train teachers to agree on the points asked",
                "stability", k, False,
            )  # fmt: skip
        at = K_FACTOR * stab.teachers_needed
        share = agreement_needed(stab, at)
        where = f"with k={k} stability cannot answer (a run refuses); " if k is not None else ""
        return (
            f"{where}stability at k={at} ({n / at:.1f} records per teacher) answers the queries on which at least "
            f"{100 * (share or 1.0):.0f} % of the teachers agree",
            "stability", at, False,
        )  # fmt: skip
    levers = _stability_levers(stab, n, c, k, s)
    gnmax = rows.get("gnmax")
    if gnmax is not None and n / gnmax.teachers_needed >= floor:
        at = max(gnmax.teachers_needed, min(n // floor, K_FACTOR * gnmax.teachers_needed))
        share = agreement_needed(gnmax, at)
        return (
            f"gnmax at k={at} ({n / at:.1f} records per teacher) labels every query it is asked, with the teachers' "
            f"plurality w.p. ≥ {PLAN_CONFIDENCE:g} where at least {100 * (share or 1.0):.0f} % of them agree. "
            f"{levers}",
            "gnmax", at, True,
        )  # fmt: skip
    return (
        f"no aggregator leaves {floor} records per teacher (stability needs k ≥ {K_FACTOR} × "
        f"{stab.teachers_needed}, gnmax k ≥ {gnmax.teachers_needed if gnmax else '-'}): train directly on the "
        f"private data instead, {DIRECT_LEARNER} (under label privacy rr-lp2st), and compare it with the "
        f"majority-class reference. {levers}",
        DIRECT_LEARNER, None, True,
    )  # fmt: skip


def _stability_levers(stab: AggregatorPlan, n: int, c: int, k: int | None, s: AggregatorSettings) -> str:
    """What would bring the stability releaser above the floor: more records, a larger ε, a smaller T or m."""
    at = k if k is not None else max(K_FACTOR * stab.teachers_needed, 1)
    status = answerability("stability", replace(s, num_teachers=at))
    eps_needed = status.epsilon_needed if status is not None else None
    eps_text = "" if eps_needed is None or math.isinf(eps_needed) else f"a larger ε (≥ {eps_needed:.3g} at k={at}), "
    return (
        "For stability to answer (rather than a PATE aggregator or a direct learner), change one of: more records "
        f"(n ≥ {K_FACTOR * stab.teachers_needed * RECORDS_PER_TEACHER_FLOOR} keeps {RECORDS_PER_TEACHER_FLOOR} "
        f"records per teacher at k={K_FACTOR * stab.teachers_needed}), {eps_text}a smaller T (T=1: smallest k "
        f"{stab.teachers_needed_t1}) or m"
    )


def plan_run(
    *,
    num_private: int,
    num_classes: int,
    num_queries: int,
    epsilon: float,
    delta: float,
    max_unstable: int,
    num_teachers: int | None = None,
    calibration: Literal["paper", "tight"] = "tight",
    teachers_changed: int = 1,
    confident_fraction: float = 0.6,
    sigma_ratio: float = 2.0,
    knn_sampling_rate: float | None = None,
    privacy_unit: str = "record",
) -> RunPlan:
    """What each aggregator can answer at this size, before any teacher is trained.

    Args:
        num_private: n, the private records (a private statistic: keep the plan out of published files).
        num_classes: C ≥ 2.
        num_queries: m, the public queries the release is calibrated for.
        epsilon, delta: the release's target.
        max_unstable: T, the ⊥ before the stability releaser halts.
        num_teachers: the run's k, if chosen (then the plan says whether each aggregator answers at it).
        calibration, teachers_changed, confident_fraction, sigma_ratio: as
            :class:`~pate_stab.aggregation.registry.AggregatorSettings`.
        knn_sampling_rate: γ; given, the plan adds ``private-knn`` and ``confident-private-knn`` (k is K).
        privacy_unit: "record" or "label" (Private-kNN's accounting depends on it).

    Returns:
        A :class:`RunPlan` (``text()`` for a terminal); rows for ``stability`` (the calibration mode
        given), ``stability-soft`` (binary tasks only), ``lnmax``, ``gnmax`` and ``confident-gnmax``.

    Raises:
        ValueError: a bad size or setting, naming it.

    References:
        BTT18 Alg 4 and Lemma 3.4 (the stability releaser); PATE 2017 §3.1 (LNMax); PATE 2018 §4.1
        and Alg 1 (GNMax, Confident-GNMax); module docstring for each rule.
    """
    n = check_int("num_private", num_private, minimum=1)
    c = check_int("num_classes", num_classes, minimum=2)
    with_k = num_teachers is not None
    k = check_int("num_teachers", num_teachers, minimum=1) if num_teachers is not None else None
    settings = AggregatorSettings(
        epsilon=epsilon, delta=delta, num_queries=num_queries, num_teachers=k or 1, max_unstable=max_unstable,
        calibration=calibration, confident_fraction=confident_fraction, sigma_ratio=sigma_ratio,
        teachers_changed=teachers_changed, sampling_rate=0.05 if knn_sampling_rate is None else knn_sampling_rate,
        privacy_unit=privacy_unit, neighbouring="replace_one" if privacy_unit == "label" else "add_remove",
    )  # fmt: skip
    names = ["stability", *(["stability-soft"] if c == 2 else []), "lnmax", "gnmax", "confident-gnmax"]
    if knn_sampling_rate is not None:
        names += ["private-knn", "confident-private-knn"]
    rows: dict[str, AggregatorPlan] = {}
    for name in names:
        if aggregator_spec(name).halts:
            rows[name] = _stability_row(name, settings, n, with_k)
        elif aggregator_spec(name).votes == "queries":
            rows[name] = _knn_row(name, settings, n, c, with_k)
        else:
            rows[name] = _baseline_row(name, settings, n, c, with_k)
    text, recommended, recommended_k, rarely = _recommend(rows, n, c, k, settings)
    return RunPlan(
        num_private=n,
        num_classes=c,
        num_queries=int(num_queries),
        epsilon=float(epsilon),
        delta=float(delta),
        max_unstable=int(max_unstable),
        num_teachers=k,
        calibration=calibration,
        aggregators=tuple(rows.values()),
        recommendation=text,
        recommended=recommended,
        recommended_teachers=recommended_k,
        stability_rarely_answers=rarely,
    )


def plan_for_config(config: Any, *, num_private: int, num_classes: int) -> RunPlan:
    """:func:`plan_run` with a :class:`~pate_stab.run.config.TransferConfig`'s settings and its k.

    ``num_private`` and ``num_classes`` are the loaded task's (n is private: print the plan, do not
    publish it).
    """
    settings = config.aggregator_settings()
    return plan_run(
        num_private=num_private,
        num_classes=num_classes,
        num_queries=config.release.num_queries,
        epsilon=config.release.epsilon,
        delta=config.release.delta,
        max_unstable=config.release.max_unstable,
        num_teachers=config.teachers.num_teachers,
        calibration=config.release.calibration,
        teachers_changed=settings.teachers_changed,
        confident_fraction=config.release.confident_threshold,
        sigma_ratio=config.release.sigma_ratio,
        knn_sampling_rate=settings.sampling_rate
        if config.release.aggregator in AGGREGATORS and aggregator_spec(config.release.aggregator).votes == "queries"
        else None,
        privacy_unit=settings.privacy_unit,
    )
