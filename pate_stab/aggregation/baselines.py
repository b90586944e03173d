"""PATE's aggregators on vote histograms: LNMax, GNMax and Confident-GNMax.

Each aggregator answers queries from a vote histogram ``(m, C)`` and is certified for a fixed
number of queries ``num_queries`` by *data-independent* accounting: the aggregator describes one
query as an event of :mod:`pate_stab.privacy.accounting.events` (``LaplaceEvent``, ``GaussianEvent``,
``DiscreteLaplaceEvent``, ``DiscreteGaussianEvent``, ``ZCdpEvent``), the whole run as that event
self-composed ``num_queries`` times (``SelfComposedEvent``, recorded with the ledger spend), and
a fresh dp-accounting accountant (PLD by default, or RDP) turns it into ε at the target δ
(:func:`pate_stab.privacy.accounting.composition.accountant_epsilon`). No ε is summed by hand; :meth:`calibrate`
searches the noise scale (:func:`pate_stab.privacy.accounting.composition.calibrate_scale`, which hands the
bracket to ``dp_accounting.mechanism_calibration.calibrate_dp_mechanism``).

Sensitivity (DESIGN.md facts 1–2). With a record-keyed partition, adding or removing one record
changes one shard, hence one teacher's vote (so does replacing one record when the keys are
record ids): the histogram changes by −1 in one class and +1 in another. So the count vector has
ℓ1 sensitivity 2 and ℓ2 sensitivity √2, and the largest count moves by at most 1. Replacing a
record under content keys can change two teachers (``teachers_changed=2``): every sensitivity
doubles (ℓ1 4, ℓ2 2√2, largest count 2), each event records the doubled sensitivity, and
calibration doubles the noise.
Each aggregator releases a post-processing of noisy counts (the noisy argmax of a noisy
histogram, the outcome of a noisy comparison of the largest count), so its event is the
Laplace / Gaussian mechanism on those counts with that sensitivity (``LaplaceEvent``,
``GaussianEvent``, … carry it). The accountant sees each event at unit sensitivity (the noise
divided by the sensitivity, :meth:`~pate_stab.privacy.accounting.events.PrivacyEvent.to_dp_event`),
dp-accounting's ``ADD_OR_REMOVE_ONE`` relation for unsampled Laplace / Gaussian mechanisms; the
record-level relation enters only through "one record moves one vote".

Noise (DESIGN fact 9). ``noise="secure"`` (the default) adds exact integer noise to the integer
counts, from the OS's CSPRNG (or a ``source=``), so that the low bits of floating-point noise
cannot leak the counts (Mironov 2012): LNMax the discrete Laplace, GNMax and Confident-GNMax the
discrete Gaussian (:mod:`pate_stab.privacy.noise.secure`). Their accounting is stated for the
discrete laws, not borrowed from the continuous ones, whose loss distributions differ:

* LNMax: DLap with parameter a = :func:`exact_laplace_parameter` (b) <= 1/b. One teacher moves
  one vote (−1, +1 in two counts), so one query's privacy loss is the sum of two independent
  sensitivity-1 discrete Laplace losses: with PLD accounting ``ComposedEvent((DiscreteLaplaceEvent(a, 1),)
  * 2)``, exactly. Otherwise (RDP, or two changed teachers) the query is pure
  (2g·a)-DP (the ratio bound P[X = x]/P[X = x + j] <= e^{a|j|}), hence (2g²a²)-zCDP (Bun & Steinke
  2016, Prop 3.3): ``ZCdpEvent(rho=2g²a²)``.
* GNMax, Confident-GNMax: N_Z(0, σ'²) with σ'² >= σ² exact. For independent coordinates and an
  integer shift v the Rényi divergence is at most α‖v‖²/(2σ'²) (Canonne, Kamath & Steinke 2020,
  Prop 5 and Thm 14): exactly the RDP of the continuous Gaussian at the calibrated σ, so their events
  (``DiscreteGaussianEvent``) are accounted with the RDP accountant (PLD accounting of the continuous
  Gaussian is refused for them).

``noise="seeded"`` draws float64 Laplace / Gaussian noise from the ``generator`` passed to
:meth:`release`: reproducible research only — it carries no privacy against anyone who knows the
seed, and the summary says so (``noise_warning``).

Release semantics: labels are int64 class indices, −1 for ⊥ (Confident-GNMax only). An
aggregator counts the queries it has answered and refuses (``BudgetExhaustedError``, nothing
released) to go beyond ``num_queries``.

References:
    [PAE+17] Papernot, Abadi, Erlingsson, Goodfellow, Talwar. Semi-supervised knowledge transfer
        for deep learning from private training data. ICLR 2017 (LNMax, §3.1).
    [PSM+18] Papernot, Song, Mironov, Raghunathan, Talwar, Erlingsson. Scalable private
        learning with PATE. ICLR 2018 (GNMax §4.1, Confident-GNMax Alg 1).
"""

from __future__ import annotations

from typing import Unpack

import torch

from pate_stab._checks import check_positive, check_real
from pate_stab.aggregation.base import ABSTAIN
from pate_stab.aggregation.pate_accounting import SQRT2
from pate_stab.aggregation.pate_aggregator import AggregatorOptions, PateAggregator, fraction_text, noisy_argmax
from pate_stab.privacy.accounting.composition import calibrate_scale, zcdp_guess
from pate_stab.privacy.accounting.events import (
    ComposedEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    SelfComposedEvent,
    ZCdpEvent,
)
from pate_stab.privacy.noise.secure import (
    check_noise,
    discrete_gaussian,
    discrete_laplace,
    exact_laplace_parameter,
    exact_sigma_sq_at_least,
)
from pate_stab.privacy.noise.seeded import gaussian, laplace

__all__ = ["LNMax", "GNMax", "ConfidentGNMax", "ABSTAIN"]


def gaussian_event(sigma: float, sensitivity: float, noise: str) -> PrivacyEvent:
    """N(0, σ²) on counts of ℓ2 sensitivity Δ: the continuous Gaussian (seeded noise) or the discrete
    Gaussian N_Z (secure noise, RDP accounting only; module docstring): ``GaussianEvent(σ, Δ)`` or
    ``DiscreteGaussianEvent(σ, Δ)``, both with the RDP of a Gaussian of noise multiplier σ/Δ."""
    if noise == "secure":
        return DiscreteGaussianEvent(sigma=sigma, sensitivity=sensitivity)
    return GaussianEvent(sigma=sigma, sensitivity=sensitivity)


# --------------------------------------------------------------------------- LNMax


class LNMax(PateAggregator):
    """Laplace noisy max [PAE+17, §3.1]: ``argmax_c (n_c + Lap(b))``.

    Sensitivity: one record moves one vote, so the count vector has ℓ1 sensitivity 2 and the
    Laplace mechanism on it with scale b is (2/b)-DP; the argmax is post-processing. With seeded
    noise one query is ``LaplaceEvent(noise_scale=b, sensitivity=2)`` (PATE 2017's per-query 2γ
    with γ = 1/b, as in tensorflow/privacy ``research/pate_2017/analysis.py``:
    ``logmgf_exact(q, 2.0 * noise_eps, l)``), with secure noise :meth:`secure_event`; the run
    composes it ``num_queries`` times in the accountant (``SelfComposedEvent``). Holds for neighbours that change
    ``teachers_changed`` teachers (module docstring, DESIGN.md fact 1).

    Args:
        noise_scale: Laplace scale b > 0 on every count.
        num_queries, delta: m queries certified at δ ∈ (0, 1).
        options: :class:`AggregatorOptions`.
    """

    name = "LNMax"

    def __init__(
        self,
        *,
        noise_scale: float,
        num_queries: int,
        delta: float,
        **options: Unpack[AggregatorOptions],
    ) -> None:
        self.noise_scale = check_positive("noise_scale", noise_scale)
        self.noise_parameter = exact_laplace_parameter(self.noise_scale)  # secure: DLap's exact a <= 1/b
        super().__init__(num_queries=num_queries, delta=delta, **options)

    @classmethod
    def accountants(cls, noise: str, teachers_changed: int) -> tuple[str, ...]:
        """Seeded: PLD or RDP. Secure: PLD (exact discrete Laplace losses) or RDP with one changed
        teacher; RDP (zCDP of the pure-DP bound) with two."""
        if check_noise(noise) == "seeded" or teachers_changed == 1:
            return ("pld", "rdp")
        return ("rdp",)

    @staticmethod
    def secure_event(noise_scale: float, *, teachers_changed: int, accountant: str) -> PrivacyEvent:
        """One secure LNMax query (module docstring): exact DLap losses (PLD, one changed teacher), else zCDP.

        Example: b = 2, one teacher, PLD → two ``DiscreteLaplaceEvent(0.5, 1)`` composed.
        """
        a = exact_laplace_parameter(noise_scale)
        if accountant == "pld" and teachers_changed == 1:
            return ComposedEvent((DiscreteLaplaceEvent(float(a), 1),) * 2)
        pure = 2 * teachers_changed * a  # ℓ1 change 2g, ratio bound e^{a|j|} per count: pure (2g·a)-DP
        return ZCdpEvent(rho=float(pure * pure / 2))  # Bun & Steinke 2016, Prop 3.3

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float,
        delta: float,
        num_queries: int,
        **options: Unpack[AggregatorOptions],
    ) -> LNMax:
        """The smallest Laplace scale b whose ``num_queries`` queries are (ε, δ)-DP.

        With secure noise, the event is :meth:`secure_event` (discrete Laplace); with seeded noise
        the continuous Laplace mechanism's.

        Example:
            ``LNMax.calibrate(epsilon=1.0, delta=1e-5, num_queries=1, noise="seeded").noise_scale``
            ≈ 1.99996 (= 2/(1 + 2·10⁻⁵): the Laplace mechanism with pure ε₀ is
            (ε₀ + 2 log(1 − δ), δ)-DP).
        """
        c = cls._calibrating(epsilon=epsilon, delta=delta, num_queries=num_queries, **options)
        g, accountant_name = c.teachers_changed, c.accountant
        # per query pure ε₀ = 2/b → zCDP ρ = ε₀²/2 = 2/b²
        guess = zcdp_guess(epsilon=c.epsilon, delta=c.delta, rho_times_scale_sq=2.0 * c.num_queries)
        if c.noise == "secure":
            scale = calibrate_scale(
                lambda b: SelfComposedEvent(
                    cls.secure_event(b, teachers_changed=g, accountant=accountant_name), c.num_queries
                ),
                epsilon=c.epsilon,
                delta=c.delta,
                guess=g * guess,
                accountant=accountant_name,
            )
            return cls(noise_scale=scale, **c.options())
        scale = calibrate_scale(
            lambda b: SelfComposedEvent(LaplaceEvent(noise_scale=b, sensitivity=2.0), c.num_queries),
            epsilon=c.epsilon,
            delta=c.delta,
            guess=guess,
            accountant=accountant_name,
        )
        # g changed teachers multiply the sensitivity by g: the same event needs g times the noise
        return cls(noise_scale=g * scale, **c.options())

    @property
    def per_query_pure_epsilon(self) -> float:
        """ε₀ = 2g/b (seeded) or 2g·a (secure, a <= 1/b): one query is (ε₀, 0)-DP (ℓ1 sensitivity 2g)."""
        if self.noise == "secure":
            return float(2 * self.teachers_changed * self.noise_parameter)
        return 2.0 * self.teachers_changed / self.noise_scale

    def per_query_event(self) -> PrivacyEvent:
        if self.noise == "secure":
            g, accountant = self.teachers_changed, self.accountant
            return self.secure_event(self.noise_scale, teachers_changed=g, accountant=accountant)
        return LaplaceEvent(noise_scale=self.noise_scale, sensitivity=2.0 * self.teachers_changed)

    def _rdp_bound_event(self) -> PrivacyEvent:
        if self.noise == "secure":  # the zCDP of the pure-DP bound: an RDP bound of the exact losses
            return SelfComposedEvent(
                self.secure_event(self.noise_scale, teachers_changed=self.teachers_changed, accountant="rdp"),
                self.num_queries,
            )
        return self.event()

    def _labels(self, counts: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        if generator is None:  # secure: exact DLap(1/a) on the integer counts
            a = self.noise_parameter
            return noisy_argmax(counts, discrete_laplace(1 / a, counts.numel(), source=self._source))
        return noisy_argmax(counts, laplace(self.noise_scale, counts.shape, generator=generator))

    def _parameters(self) -> dict[str, float]:
        return {"noise_scale": self.noise_scale}

    def _exact_parameters(self) -> dict[str, str]:
        a = self.noise_parameter
        return {"noise_parameter_exact": f"{a.numerator}/{a.denominator}"}


# --------------------------------------------------------------------------- GNMax


class GNMax(PateAggregator):
    """Gaussian noisy max [PSM+18, §4.1]: ``argmax_c (n_c + N(0, σ²))``.

    Sensitivity: one record moves one vote, so the count vector has ℓ2 sensitivity √2; one
    query is the Gaussian mechanism ``GaussianEvent(sigma=σ, sensitivity=√2)``
    (``DiscreteGaussianEvent`` with secure noise; the argmax is post-processing), composed
    ``num_queries`` times in the accountant (data-independent: PATE 2018's data-dependent
    analysis is not used). Holds for neighbours that change
    ``teachers_changed`` teachers (module docstring, DESIGN.md fact 1).

    Args:
        sigma: Gaussian standard deviation σ > 0 on every count.
        num_queries, delta: m queries certified at δ ∈ (0, 1).
        options: :class:`AggregatorOptions`.
    """

    name = "GNMax"

    def __init__(
        self,
        *,
        sigma: float,
        num_queries: int,
        delta: float,
        **options: Unpack[AggregatorOptions],
    ) -> None:
        self.sigma = check_positive("sigma", sigma)
        self.sigma_sq_exact = exact_sigma_sq_at_least(self.sigma)  # secure: N_Z's exact σ'² >= σ²
        super().__init__(num_queries=num_queries, delta=delta, **options)

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float,
        delta: float,
        num_queries: int,
        **options: Unpack[AggregatorOptions],
    ) -> GNMax:
        """The smallest σ whose ``num_queries`` queries are (ε, δ)-DP.

        Seeded (continuous) noise with PLD: m Gaussian queries compose to one Gaussian mechanism
        with μ = √(2m)/σ, so the answer satisfies the analytic Gaussian curve (Balle & Wang 2018,
        Thm 8) δ = Φ(μ/2 − ε/μ) − e^ε Φ(−μ/2 − ε/μ). Example: ε = 1, δ = 1e-5, m = 1, seeded → σ ≈ 5.27.
        Secure (discrete Gaussian) noise is calibrated with the RDP accountant (module docstring).
        """
        c = cls._calibrating(epsilon=epsilon, delta=delta, num_queries=num_queries, **options)
        # per query ρ = (√2)²/(2σ²) = 1/σ²
        guess = zcdp_guess(epsilon=c.epsilon, delta=c.delta, rho_times_scale_sq=float(c.num_queries))
        sigma = calibrate_scale(
            lambda s: SelfComposedEvent(gaussian_event(s, SQRT2, c.noise), c.num_queries),
            epsilon=c.epsilon,
            delta=c.delta,
            guess=guess,
            accountant=c.accountant,
        )
        return cls(sigma=c.teachers_changed * sigma, **c.options())

    def per_query_event(self) -> PrivacyEvent:
        return gaussian_event(self.sigma, SQRT2 * self.teachers_changed, self.noise)

    def _labels(self, counts: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        if generator is None:  # secure: exact N_Z(0, σ'²) on the integer counts
            return noisy_argmax(counts, discrete_gaussian(self.sigma, counts.numel(), source=self._source))
        return noisy_argmax(counts, gaussian(self.sigma, counts.shape, generator=generator))

    def _parameters(self) -> dict[str, float]:
        return {"sigma": self.sigma}

    def _exact_parameters(self) -> dict[str, str]:
        return {"sigma_sq_exact": fraction_text(self.sigma_sq_exact)}


# --------------------------------------------------------------------------- Confident-GNMax


class ConfidentGNMax(PateAggregator):
    """Confident-GNMax [PSM+18, Alg 1]: answer only when the teachers agree enough.

    For each query: if ``max_c n_c + N(0, σ1²) ≥ threshold``, answer ``argmax_c (n_c + N(0, σ2²))``,
    else ⊥ (−1).

    Sensitivity: one record moves one vote, so the largest count moves by at most 1 (the
    threshold check is the Gaussian mechanism ``GaussianEvent(sigma=σ1, sensitivity=1)``) and the
    count vector by ℓ2 √2 (the answer is ``GaussianEvent(sigma=σ2, sensitivity=√2)``; the discrete
    events with secure noise). Every query pays the check. Which queries are answered depends on
    the data, and PATE 2018 accounts for that data-dependently; here the accounting is
    data-independent, so every query is also charged the GNMax answer — one query is
    ``ComposedEvent((check, answer))`` of those two, composed ``num_queries`` times. (Releasing ⊥
    or not and the noisy argmax are post-processing of those two Gaussian releases.) Holds for
    neighbours that change ``teachers_changed`` teachers (module docstring, DESIGN.md fact 1).

    Args:
        threshold: T, compared with the noisy largest count (a vote count, e.g. 0.6·k).
        sigma1: σ1 > 0, the noise of the threshold check.
        sigma2: σ2 > 0, the noise of the answer (GNMax).
        num_queries, delta: m queries certified at δ ∈ (0, 1).
        options: :class:`AggregatorOptions`.
    """

    name = "Confident-GNMax"

    def __init__(
        self,
        *,
        threshold: float,
        sigma1: float,
        sigma2: float,
        num_queries: int,
        delta: float,
        **options: Unpack[AggregatorOptions],
    ) -> None:
        self.threshold = check_real("threshold", threshold)
        self.sigma1 = check_positive("sigma1", sigma1)
        self.sigma2 = check_positive("sigma2", sigma2)
        self.sigma1_sq_exact = exact_sigma_sq_at_least(self.sigma1)  # secure: N_Z's exact variances
        self.sigma2_sq_exact = exact_sigma_sq_at_least(self.sigma2)
        super().__init__(num_queries=num_queries, delta=delta, **options)

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float,
        delta: float,
        num_queries: int,
        threshold: float,
        sigma_ratio: float = 2.0,
        **options: Unpack[AggregatorOptions],
    ) -> ConfidentGNMax:
        """The smallest σ2 (with σ1 = sigma_ratio · σ2) whose ``num_queries`` queries are (ε, δ)-DP.

        The ratio is a modelling choice (PATE 2018 used σ1 between about 2σ2 and 5σ2); under
        data-independent accounting the check costs m/σ1² and the answers 2m/σ2² in the
        composed Gaussian's μ², so μ = √(m (1/σ1² + 2/σ2²)). Secure (discrete Gaussian) noise is
        calibrated with the RDP accountant (module docstring).
        """
        c = cls._calibrating(epsilon=epsilon, delta=delta, num_queries=num_queries, **options)
        threshold = check_real("threshold", threshold)
        sigma_ratio = check_positive("sigma_ratio", sigma_ratio)

        def event(s2: float) -> PrivacyEvent:
            check, answer = gaussian_event(sigma_ratio * s2, 1.0, c.noise), gaussian_event(s2, SQRT2, c.noise)
            return SelfComposedEvent(ComposedEvent((check, answer)), c.num_queries)

        # per query ρ = 1/(2σ1²) + 1/σ2² = (1/(2r²) + 1)/σ2²
        rho_unit = c.num_queries * (1.0 / (2.0 * sigma_ratio**2) + 1.0)
        guess = zcdp_guess(epsilon=c.epsilon, delta=c.delta, rho_times_scale_sq=rho_unit)
        sigma2 = calibrate_scale(event, epsilon=c.epsilon, delta=c.delta, guess=guess, accountant=c.accountant)
        g = c.teachers_changed
        return cls(threshold=threshold, sigma1=g * sigma_ratio * sigma2, sigma2=g * sigma2, **c.options())

    def per_query_event(self) -> PrivacyEvent:
        g = self.teachers_changed
        check = gaussian_event(self.sigma1, g, self.noise)  # the largest count moves by g
        return ComposedEvent((check, gaussian_event(self.sigma2, SQRT2 * g, self.noise)))

    def _labels(self, counts: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        m = counts.shape[0]
        if generator is None:  # secure: exact N_Z(0, σ1'²) on the integer largest count, N_Z(0, σ2'²) on the counts
            top = counts.max(dim=1).values.to(torch.int64) + discrete_gaussian(self.sigma1, m, source=self._source)
            confident = top >= self.threshold  # an integer against a real threshold: exact
            noise = discrete_gaussian(self.sigma2, counts.numel(), source=self._source)
            return torch.where(confident, noisy_argmax(counts, noise), ABSTAIN)
        confident = counts.max(dim=1).values + gaussian(self.sigma1, (m,), generator=generator) >= self.threshold
        answer = noisy_argmax(counts, gaussian(self.sigma2, counts.shape, generator=generator))
        return torch.where(confident, answer, ABSTAIN)

    def _parameters(self) -> dict[str, float]:
        return {"threshold": self.threshold, "sigma1": self.sigma1, "sigma2": self.sigma2}

    def _exact_parameters(self) -> dict[str, str]:
        return {
            "sigma1_sq_exact": fraction_text(self.sigma1_sq_exact),
            "sigma2_sq_exact": fraction_text(self.sigma2_sq_exact),
        }
