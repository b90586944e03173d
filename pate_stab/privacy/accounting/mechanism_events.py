"""Privacy events of single mechanisms: the event record, its JSON form, one event per noise law.

An event is a small frozen record of what a mechanism did (:class:`SparseVectorEvent`,
:class:`LaplaceEvent`, …); :mod:`pate_stab.privacy.accounting.events` adds the events built from
other events (compositions, repetitions, Poisson subsampling) and is where every event is imported
from. An event knows its own pessimistic privacy loss distribution (PLD) in Google's
``dp_accounting`` (Koskela et al. 2020; Doroshenko et al. 2022): privacy losses are rounded **up**
to a multiple of ``value_discretization_interval`` (default 1e-4) and mass cut off in the tails goes
to the loss +∞, so every ε(δ) and δ(ε) derived from it is an upper bound on the true one, never
optimistic.

Ex-post privacy (Ligett et al. 2017, Def 2.3) is not an (ε, δ) guarantee and does not compose
into one: :class:`ExPostEvent` is recorded as what it is and has no PLD.

An event that has a counterpart in ``dp_accounting.dp_event`` converts to it
(:meth:`PrivacyEvent.to_dp_event`). Events whose noise law has no valid PLD here — the discrete
Gaussian (Canonne, Kamath & Steinke 2020 bound its Rényi divergence, not its loss distribution)
and zCDP bounds — convert for the RDP accountant only and refuse a PLD.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from dp_accounting import dp_event as _dp
from dp_accounting.pld import common as _pld_common
from dp_accounting.pld import privacy_loss_distribution as _pld
from dp_accounting.pld.privacy_loss_distribution import PrivacyLossDistribution

from pate_stab._checks import check_delta, check_int, check_nonnegative, check_positive

__all__ = [
    "DEFAULT_VALUE_DISCRETIZATION_INTERVAL",
    "PrivacyEvent",
    "PureDpEvent",
    "SparseVectorEvent",
    "ApproxDpEvent",
    "LaplaceEvent",
    "GaussianEvent",
    "DiscreteLaplaceEvent",
    "DiscreteGaussianEvent",
    "ZCdpEvent",
    "SampledGaussianEvent",
    "ExPostEvent",
    "check_interval",
    "event_from_dict",
]

DEFAULT_VALUE_DISCRETIZATION_INTERVAL = 1e-4

# every event class registers its kind when it is defined (PrivacyEvent.__init_subclass__); the package's
# __init__ imports composition, which imports events, so the composite kinds are known to event_from_dict
# whichever of the two modules is imported
_EVENT_TYPES: dict[str, type[PrivacyEvent]] = {}


def check_interval(value: Any) -> float:
    """``value_discretization_interval`` checked: positive and finite."""
    return check_positive("value_discretization_interval", value)


class PrivacyEvent:
    """Base of the event records. Subclasses are frozen dataclasses with a ``kind`` tag."""

    kind: ClassVar[str] = ""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if cls.kind:
            _EVENT_TYPES[cls.kind] = cls

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict ``{"type": kind, **fields}``."""
        out: dict[str, Any] = {"type": self.kind}
        out.update({f.name: getattr(self, f.name) for f in fields(self)})  # type: ignore[arg-type]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PrivacyEvent:
        """Inverse of :meth:`to_dict`; called on the base class it dispatches on ``"type"``."""
        return event_from_dict(data) if cls is PrivacyEvent else _from_fields(cls, data)

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        """The pessimistic privacy loss distribution of the mechanism this event describes."""
        raise NotImplementedError

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        """The ``dp_accounting`` event the ``accountant`` ("pld" or "rdp") composes for this one.

        Raises:
            TypeError: no counterpart in dp-accounting, or none valid for that accountant.
        """
        raise TypeError(f"{type(self).__name__} has no dp-accounting counterpart (it is composed by its PLD)")


def _from_fields(cls: type[PrivacyEvent], data: Mapping[str, Any]) -> PrivacyEvent:
    if not isinstance(data, Mapping):
        raise TypeError(f"event data must be a mapping, got {type(data).__name__}")
    tag = data.get("type")
    if tag != cls.kind:
        raise ValueError(f"event data of type {tag!r} cannot build a {cls.__name__}")
    values = {k: v for k, v in data.items() if k != "type"}
    expected = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    if set(values) - expected:
        raise ValueError(f"{cls.__name__} has no fields {sorted(set(values) - expected)}")
    return cls(**values)


def event_from_dict(data: Mapping[str, Any]) -> PrivacyEvent:
    """Rebuild any event from :meth:`PrivacyEvent.to_dict` output (dispatch on ``"type"``)."""
    if not isinstance(data, Mapping):
        raise TypeError(f"event data must be a mapping, got {type(data).__name__}")
    tag = data.get("type")
    if tag not in _EVENT_TYPES:
        raise ValueError(f"unknown event type {tag!r}; known: {sorted(_EVENT_TYPES)}")
    return _EVENT_TYPES[str(tag)].from_dict(data)


def _pure_pld(epsilon: float, delta: float, interval: float) -> PrivacyLossDistribution:
    params = _pld_common.DifferentialPrivacyParameters(epsilon=epsilon, delta=delta)
    return _pld.from_privacy_parameters(params, value_discretization_interval=interval)


@dataclass(frozen=True)
class PureDpEvent(PrivacyEvent):
    """A mechanism that is ``epsilon``-DP and nothing more is assumed about it.

    Its PLD is the worst case over all ε-DP mechanisms: ε-randomized response, loss +ε with
    probability e^ε/(1+e^ε) and −ε otherwise (Kairouz, Oh & Viswanath 2015, Thm 2.1; every
    ε-DP mechanism is a post-processing of it).
    """

    kind: ClassVar[str] = "pure_dp"
    epsilon: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_positive("epsilon", self.epsilon))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        return _pure_pld(self.epsilon, 0.0, check_interval(value_discretization_interval))


@dataclass(frozen=True)
class SparseVectorEvent(PrivacyEvent):
    """``num_segments`` AboveThreshold segments of a sparse-vector mechanism.

    Each segment draws threshold noise Lap(λ) (λ = ``noise_scale``) once, adds query noise
    Lap(2λ) to each query of ℓ1 sensitivity Δ = ``sensitivity``, and ends at its first
    reported crossing (⊥ in BTT18 Alg 1). Dwork & Roth 2014, Thm 3.23 (with Δ = 1, threshold
    noise Lap(2/ε), query noise Lap(4/ε)) shows each segment is ε-DP; scaling by Δ gives
    λ = 2Δ/ε, i.e. each segment is **(2Δ/λ)-DP**. The segments are composed optimally as the
    ``num_segments``-fold self-composition of that pure-DP PLD (DESIGN.md fact 4).
    """

    kind: ClassVar[str] = "sparse_vector"
    noise_scale: float
    num_segments: int
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_scale", check_positive("noise_scale", self.noise_scale))
        object.__setattr__(self, "num_segments", check_int("num_segments", self.num_segments, minimum=1))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))

    @property
    def epsilon_per_segment(self) -> float:
        """2Δ/λ (Dwork & Roth 2014, Thm 3.23)."""
        return 2.0 * self.sensitivity / self.noise_scale

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        one = _pure_pld(self.epsilon_per_segment, 0.0, check_interval(value_discretization_interval))
        return one if self.num_segments == 1 else one.self_compose(self.num_segments)


@dataclass(frozen=True)
class ApproxDpEvent(PrivacyEvent):
    """A mechanism that is (``epsilon``, ``delta``)-DP; ``reason`` says which and why.

    Example: the probability δ that a query whose argmax can differ between neighbours passes
    the noisy distance-to-instability test (DESIGN.md fact 3) is ``ApproxDpEvent(0, δ, ...)``.

    Composition rule: the event's PLD is dp-accounting's pessimistic PLD for (ε, δ) — mass δ at
    loss +∞ and ε-randomized response with the remaining 1 − δ. Every (ε, δ)-DP mechanism is a
    post-processing of that pair (Kairouz, Oh & Viswanath 2015, Thm 2.1), so it dominates the
    mechanism's true PLD, and composing dominating PLDs dominates the composition (Zhu, Dong &
    Wang 2022, Thm 10). The δ's therefore enter the total as 1 − Π(1 − δ_i) ≤ Σ δ_i, on top of
    the δ(ε) of the ε-parts.
    """

    kind: ClassVar[str] = "approx_dp"
    epsilon: float
    delta: float
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "epsilon", check_nonnegative("epsilon", self.epsilon))
        object.__setattr__(self, "delta", check_delta(self.delta, allow_zero=True))
        if not isinstance(self.reason, str):
            raise TypeError(f"reason must be a str, got {type(self.reason).__name__}")

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        return _pure_pld(self.epsilon, self.delta, check_interval(value_discretization_interval))


@dataclass(frozen=True)
class LaplaceEvent(PrivacyEvent):
    """Lap(``noise_scale``) added to one query of sensitivity ``sensitivity``.

    Covers a scalar, or a vector whose neighbours differ in one coordinate only. For a vector
    whose ℓ1 change may spread over coordinates, record ``PureDpEvent(sensitivity/noise_scale)``
    (Dwork & Roth 2014, Thm 3.6). PLD: ``from_laplace_mechanism`` (pessimistic).
    """

    kind: ClassVar[str] = "laplace"
    noise_scale: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_scale", check_positive("noise_scale", self.noise_scale))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        return _pld.from_laplace_mechanism(
            self.noise_scale,
            sensitivity=self.sensitivity,
            pessimistic_estimate=True,
            value_discretization_interval=check_interval(value_discretization_interval),
        )

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        """``LaplaceDpEvent(noise_scale / sensitivity)``: dp-accounting's events have sensitivity 1."""
        return _dp.LaplaceDpEvent(noise_multiplier=self.noise_scale / self.sensitivity)


@dataclass(frozen=True)
class GaussianEvent(PrivacyEvent):
    """N(0, ``sigma``²·I) added to a query of ℓ2 sensitivity ``sensitivity`` (any dimension).

    PLD: ``from_gaussian_mechanism`` (pessimistic).
    """

    kind: ClassVar[str] = "gaussian"
    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        return _pld.from_gaussian_mechanism(
            self.sigma,
            sensitivity=self.sensitivity,
            pessimistic_estimate=True,
            value_discretization_interval=check_interval(value_discretization_interval),
        )

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        """``GaussianDpEvent(sigma / sensitivity)``: dp-accounting's events have sensitivity 1."""
        return _dp.GaussianDpEvent(noise_multiplier=self.sigma / self.sensitivity)


@dataclass(frozen=True)
class DiscreteLaplaceEvent(PrivacyEvent):
    """Integer noise with P[X = x] ∝ exp(−``noise_parameter``·|x|) on an integer query of sensitivity ``sensitivity``.

    The exact discrete Laplace of :func:`pate_stab.privacy.noise.discrete.discrete_laplace` with
    parameter a (scale 1/a). PLD: ``from_discrete_laplace_mechanism`` (pessimistic); dp-accounting
    event ``DiscreteLaplaceDpEvent(a, sensitivity)``.
    """

    kind: ClassVar[str] = "discrete_laplace"
    noise_parameter: float
    sensitivity: int = 1

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_parameter", check_positive("noise_parameter", self.noise_parameter))
        object.__setattr__(self, "sensitivity", check_int("sensitivity", self.sensitivity, minimum=1))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        return _pld.from_discrete_laplace_mechanism(
            self.noise_parameter,
            sensitivity=self.sensitivity,
            pessimistic_estimate=True,
            value_discretization_interval=check_interval(value_discretization_interval),
        )

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        return _dp.DiscreteLaplaceDpEvent(self.noise_parameter, self.sensitivity)


@dataclass(frozen=True)
class DiscreteGaussianEvent(PrivacyEvent):
    """Discrete Gaussian N_Z(0, σ'²), σ'² >= ``sigma``², on integer counts of ℓ2 sensitivity ``sensitivity``.

    Its Rényi divergence is at most α·Δ²/(2σ²), the continuous Gaussian's (Canonne, Kamath & Steinke
    2020, Prop 5 and Thm 14): accounted with the RDP accountant as ``GaussianDpEvent(sigma /
    sensitivity)``. Its loss distribution differs from the continuous one, so it has no PLD here.
    """

    kind: ClassVar[str] = "discrete_gaussian"
    sigma: float
    sensitivity: float = 1.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "sigma", check_positive("sigma", self.sigma))
        object.__setattr__(self, "sensitivity", check_positive("sensitivity", self.sensitivity))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        raise TypeError("a DiscreteGaussianEvent has no PLD here: account it with RDP (CKS20 Prop 5)")

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        if accountant != "rdp":
            raise TypeError("a DiscreteGaussianEvent is accounted with RDP only (CKS20 Prop 5)")
        return _dp.GaussianDpEvent(noise_multiplier=self.sigma / self.sensitivity)


@dataclass(frozen=True)
class ZCdpEvent(PrivacyEvent):
    """A mechanism that is ``rho``-zCDP (Bun & Steinke 2016, Def 1.1); accounted with RDP only."""

    kind: ClassVar[str] = "zcdp"
    rho: float

    def __post_init__(self) -> None:
        object.__setattr__(self, "rho", check_positive("rho", self.rho))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        raise TypeError("a ZCdpEvent has no PLD: account it with RDP")

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        if accountant != "rdp":
            raise TypeError("a ZCdpEvent is accounted with RDP only")
        return _dp.ZCDpEvent(rho=self.rho)


@dataclass(frozen=True)
class SampledGaussianEvent(PrivacyEvent):
    """DP-SGD: ``steps`` Poisson-sampled Gaussian steps (Abadi et al. 2016, Alg 1; Mironov, Talwar & Zhang 2019).

    Each step samples every record with probability ``sampling_rate`` (q), clips per-example
    gradients to norm C and adds N(0, (``noise_multiplier``·C)²) to their sum: the sampled Gaussian
    mechanism with sensitivity 1 in units of C, under add/remove. PLD: ``from_gaussian_mechanism``
    with ``sampling_prob=q`` (pessimistic), self-composed; dp-accounting event
    ``SelfComposedDpEvent(PoissonSampledDpEvent(q, GaussianDpEvent(σ)), steps)``.
    """

    kind: ClassVar[str] = "sampled_gaussian"
    noise_multiplier: float
    sampling_rate: float
    steps: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "noise_multiplier", check_positive("noise_multiplier", self.noise_multiplier))
        rate = check_positive("sampling_rate", self.sampling_rate)
        if rate > 1.0:
            raise ValueError(f"sampling_rate must be in (0, 1], got {rate}")
        object.__setattr__(self, "sampling_rate", rate)
        object.__setattr__(self, "steps", check_int("steps", self.steps, minimum=1))

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        one = _pld.from_gaussian_mechanism(
            self.noise_multiplier,
            pessimistic_estimate=True,
            value_discretization_interval=check_interval(value_discretization_interval),
            sampling_prob=self.sampling_rate,
        )
        return one if self.steps == 1 else one.self_compose(self.steps)

    def to_dp_event(self, *, accountant: str = "pld") -> _dp.DpEvent:
        step = _dp.PoissonSampledDpEvent(self.sampling_rate, _dp.GaussianDpEvent(self.noise_multiplier))
        return _dp.SelfComposedDpEvent(step, self.steps)


@dataclass(frozen=True)
class ExPostEvent(PrivacyEvent):
    """A realised ex-post privacy loss (Ligett et al. 2017, Def 2.3), e.g. ε_A + ε_t of Lemma 2.8.

    Not an (ε, δ) guarantee: it bounds the privacy loss of the outcome that occurred, and it
    does not compose into an ordinary (ε, δ) total. The ledger counts the mechanism's ex-ante
    (ε, δ) against the budget and keeps the ex-post loss beside it, reported separately.
    """

    kind: ClassVar[str] = "ex_post"
    epsilon_ex_post: float
    description: str = ""

    def __post_init__(self) -> None:
        value = check_nonnegative("epsilon_ex_post", self.epsilon_ex_post)
        object.__setattr__(self, "epsilon_ex_post", value)
        if not isinstance(self.description, str):
            raise TypeError(f"description must be a str, got {type(self.description).__name__}")

    def to_pld(
        self, *, value_discretization_interval: float = DEFAULT_VALUE_DISCRETIZATION_INTERVAL
    ) -> PrivacyLossDistribution:
        raise TypeError("an ExPostEvent has no privacy loss distribution (ex-post, not (ε, δ)-DP)")
