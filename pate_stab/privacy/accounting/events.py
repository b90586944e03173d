"""Privacy events: frozen records of what a mechanism did, and their privacy loss distributions.

Mechanisms never add up ε themselves: each one describes what it did as a small frozen *event*
(:class:`SparseVectorEvent`, :class:`LaplaceEvent`, …), and every event is imported from here. The
events of single mechanisms, their base class and their JSON form are in
:mod:`pate_stab.privacy.accounting.mechanism_events` (each knows its pessimistic privacy loss
distribution, PLD); this module adds the events built from events — the (adaptive) composition of
several, one event repeated, a Gaussian event run on a Poisson sample — and the PLD of a composition.
:mod:`pate_stab.privacy.accounting.composition` turns compositions of events into ε(δ) / δ(ε) and
guarantees; :mod:`pate_stab.privacy.ledger.privacy_ledger` records them.

Neighbouring relation: events describe a mechanism's sensitivity; the relation under which that
sensitivity holds (add/remove by default in pate_stab, as in the papers; replace-one on request)
is stated in the ledger header (:class:`pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger`), not per event.

One vocabulary for every spend. Besides its PLD, an event that has a counterpart in
``dp_accounting.dp_event`` converts to it (:meth:`PrivacyEvent.to_dp_event`), so that PATE's
aggregators (:mod:`pate_stab.aggregation.baselines`) and DP-SGD (:mod:`pate_stab.direct.dpsgd`)
describe their spends in these records and :mod:`pate_stab.privacy.accounting.composition` composes them with
dp-accounting's PLD or RDP accountant.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from dp_accounting import dp_event as _dp
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

from pate_stab._checks import check_int, check_positive
from pate_stab.privacy.accounting.mechanism_events import (
    DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
    ApproxDpEvent,
    DiscreteGaussianEvent,
    DiscreteLaplaceEvent,
    ExPostEvent,
    GaussianEvent,
    LaplaceEvent,
    PrivacyEvent,
    PureDpEvent,
    SampledGaussianEvent,
    SparseVectorEvent,
    ZCdpEvent,
    check_interval,
    event_from_dict,
)

__all__ = [
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "PrivacyEvent",
    "PureDpEvent",
    "SparseVectorEvent",
    "ApproxDpEvent",
    "LaplaceEvent",
    "GaussianEvent",
    "ComposedEvent",
    "SelfComposedEvent",
    "DiscreteLaplaceEvent",
    "DiscreteGaussianEvent",
    "ZCdpEvent",
    "SampledGaussianEvent",
    "PoissonSampledEvent",
    "ExPostEvent",
    "event_from_dict",
    "composed_pld",
]


@dataclass(frozen=True)
class ComposedEvent(PrivacyEvent):
    """The (adaptive) composition of ``events``, run one after another on the same data."""

    kind: ClassVar[str] = "composed"
    events: tuple[PrivacyEvent, ...]

    def __post_init__(self) -> None:
        events = self.events
        if isinstance(events, PrivacyEvent) or not isinstance(events, Iterable):
            raise TypeError("events must be a sequence of privacy events")
        built = tuple(event_from_dict(e) if isinstance(e, Mapping) else e for e in events)
        for e in built:
            if not isinstance(e, PrivacyEvent):
                raise TypeError(f"events must hold privacy events, got {type(e).__name__}")
            if isinstance(e, ExPostEvent):
                raise TypeError("an ExPostEvent does not compose into an (ε, δ) guarantee")
        if not built:
            raise ValueError("events must not be empty")
        object.__setattr__(self, "events", built)

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "events": [e.to_dict() for e in self.events]}

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        return _compose(self.events, check_interval(value_discretization_interval))

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        return _dp.ComposedDpEvent([e.to_dp_event(accountant=accountant) for e in self.events])


@dataclass(frozen=True)
class SelfComposedEvent(PrivacyEvent):
    """``event`` run ``count`` times (adaptively) on the same data, e.g. m queries of one aggregator."""

    kind: ClassVar[str] = "self_composed"
    event: PrivacyEvent
    count: int

    def __post_init__(self) -> None:
        event = event_from_dict(self.event) if isinstance(self.event, Mapping) else self.event
        if not isinstance(event, PrivacyEvent) or isinstance(event, ExPostEvent):
            raise TypeError(f"event must be a composable privacy event, got {type(event).__name__}")
        object.__setattr__(self, "event", event)
        object.__setattr__(self, "count", check_int("count", self.count, minimum=1))

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "event": self.event.to_dict(), "count": self.count}

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        one = self.event.to_pld(value_discretization_interval=check_interval(value_discretization_interval))
        return one if self.count == 1 else one.self_compose(self.count)

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        return _dp.SelfComposedDpEvent(self.event.to_dp_event(accountant=accountant), self.count)


def _gaussian_multiplier(event: PrivacyEvent) -> tuple[float, bool]:
    """(noise multiplier at unit sensitivity, discrete?) of a Gaussian event or a composition of them.

    Independent Gaussians N(0, σ_i²) on parts of one query whose ℓ2 changes are at most Δ_i form one
    Gaussian mechanism on the concatenated, rescaled parts (x_i/σ_i): its shift has norm at most
    √(Σ Δ_i²/σ_i²), so it is the Gaussian mechanism of noise multiplier 1/√(Σ Δ_i²/σ_i²) (Dwork & Roth
    2014, Thm A.1 in any dimension). Discrete Gaussian parts keep that RDP (CKS20 Prop 5, Thm 14).
    """
    if isinstance(event, GaussianEvent | DiscreteGaussianEvent):
        return event.sigma / event.sensitivity, isinstance(event, DiscreteGaussianEvent)
    if isinstance(event, ComposedEvent):
        parts = [_gaussian_multiplier(e) for e in event.events]
        total = sum(1.0 / (z * z) for z, _ in parts)
        return 1.0 / total**0.5, any(d for _, d in parts)
    raise TypeError(f"a PoissonSampledEvent wraps Gaussian events only, got {type(event).__name__}")


@dataclass(frozen=True)
class PoissonSampledEvent(PrivacyEvent):
    """``event`` run on a Poisson sample of the data: every record kept independently with probability q.

    ``event`` is a Gaussian event (``GaussianEvent`` or ``DiscreteGaussianEvent``) or a composition of
    them on one query (folded into one Gaussian mechanism, :func:`_gaussian_multiplier`), all run on the
    *same* sample. Under add/remove, a record absent from the sample leaves the output's law unchanged
    and a sampled one moves the query by at most the event's sensitivity, whatever the rest of the sample:
    by joint convexity over the other records' coins the pair of output laws is dominated by the
    Poisson-subsampled Gaussian of that noise multiplier (Mironov, Talwar & Zhang 2019, "Rényi
    differential privacy of the sampled Gaussian mechanism"; Zhu & Wang 2019, Poisson subsampled RDP).
    dp-accounting event: ``PoissonSampledDpEvent(q, GaussianDpEvent(multiplier))``, add/remove. PLD
    (continuous Gaussian only): ``from_gaussian_mechanism(multiplier, sampling_prob=q)`` (pessimistic).

    Discrete Gaussian (secure) noise is accounted with RDP only, as the continuous sampled Gaussian. At
    integer orders α and integer shifts v the moments E_P[(Q/P)^j] of N_Z(v, σ²) against N_Z(0, σ²)
    equal the continuous Gaussian's, exp(j(j−1)‖v‖²/(2σ²)) (the shifted normaliser Σ_x exp(−(x−jv)²/2σ²)
    is the unshifted one), so the binomial expansion of D_α((1−q)P + qQ ‖ P) (Mironov et al. 2019, §3.3)
    takes the continuous value; the other direction and fractional orders are taken from the continuous
    mechanism's computation in dp-accounting.
    """

    kind: ClassVar[str] = "poisson_sampled"
    sampling_rate: float
    event: PrivacyEvent

    def __post_init__(self) -> None:
        rate = check_positive("sampling_rate", self.sampling_rate)
        if rate > 1.0:
            raise ValueError(f"sampling_rate must be in (0, 1], got {rate}")
        object.__setattr__(self, "sampling_rate", rate)
        event = event_from_dict(self.event) if isinstance(self.event, Mapping) else self.event
        if not isinstance(event, PrivacyEvent):
            raise TypeError(f"event must be a privacy event, got {type(event).__name__}")
        _gaussian_multiplier(event)  # Gaussian events only
        object.__setattr__(self, "event", event)

    @property
    def noise_multiplier(self) -> float:
        """The folded Gaussian's noise multiplier (σ over ℓ2 sensitivity)."""
        return _gaussian_multiplier(self.event)[0]

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.kind, "sampling_rate": self.sampling_rate, "event": self.event.to_dict()}

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        multiplier, discrete = _gaussian_multiplier(self.event)
        if discrete:
            raise TypeError("a sampled discrete Gaussian has no PLD here: account it with RDP")
        return _pld.from_gaussian_mechanism(
            multiplier,
            pessimistic_estimate=True,
            value_discretization_interval=check_interval(value_discretization_interval),
            sampling_prob=self.sampling_rate,
        )

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        multiplier, discrete = _gaussian_multiplier(self.event)
        if discrete and accountant != "rdp":
            raise TypeError("a sampled discrete Gaussian is accounted with RDP only")
        return _dp.PoissonSampledDpEvent(self.sampling_rate, _dp.GaussianDpEvent(noise_multiplier=multiplier))


def _flatten(events: Iterable[PrivacyEvent]) -> list[PrivacyEvent]:
    out: list[PrivacyEvent] = []
    for e in events:
        if isinstance(e, ComposedEvent):
            out.extend(_flatten(e.events))
        elif isinstance(e, ExPostEvent):
            raise TypeError("an ExPostEvent does not compose into an (ε, δ) guarantee")
        elif isinstance(e, PrivacyEvent):
            out.append(e)
        else:
            raise TypeError(f"events must hold privacy events, got {type(e).__name__}")
    return out


def _compose(events: Iterable[PrivacyEvent], interval: float) -> PrivacyLossDistribution:
    """Compose PLDs; identical events are grouped and self-composed (one FFT power each)."""
    counts = Counter(_flatten(events))
    if not counts:
        raise ValueError("events must not be empty")
    total: PrivacyLossDistribution | None = None
    for event, count in counts.items():
        pld = event.to_pld(value_discretization_interval=interval)
        if count > 1:
            pld = pld.self_compose(count)
        total = pld if total is None else total.compose(pld)
    return total  # type: ignore[return-value]


def composed_pld(
    events: Iterable[PrivacyEvent],
    *,
    value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL,
) -> PrivacyLossDistribution:
    """The pessimistic PLD of the (adaptive) composition of ``events``.

    Nested :class:`ComposedEvent`\\ s are flattened and identical events are grouped and
    self-composed (one FFT power each).

    Raises:
        TypeError: an event is not a composable privacy event (e.g. an :class:`ExPostEvent`).
        ValueError: no events; ``value_discretization_interval`` not positive and finite.
    """
    return _compose(events, check_interval(value_discretization_interval))
