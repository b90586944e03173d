"""Every aggregator from one registry, behind one interface.

:func:`make_releaser` builds any aggregator — the stability releasers (hard labels, BTT18 Alg 4;
soft labels, Alg 6/8), PATE's LNMax, GNMax and Confident-GNMax, and Private-kNN (neighbour votes on
a fresh Poisson sample per query, :mod:`pate_stab.aggregation.private_knn`) — calibrated to (ε, δ) for
``num_queries`` queries, with its generator, ledger and spend id. Every one of them is a
:class:`Releaser`: ``release(votes) → ReleaseResult``, ``halted``, ``queries_seen``,
``summary()``, and each spends through the ledger itself
(:class:`~pate_stab.aggregation.base.LedgerRelease`). What a caller needs to know about an
aggregator — which votes it takes, whether it halts, whether it needs a binary task — is in its
:class:`AggregatorSpec`, so no caller branches on a name.

:func:`answerability` is the one place that says whether a stability releaser can answer
anything at a setting (the k a unanimous vote needs, or the ε the run's k would need).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

import torch

from pate_stab.aggregation.base import ReleaseResult
from pate_stab.aggregation.baseline_releaser import BaselineReleaser
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.private_knn import NeighbourIndex, PrivateKNN, PrivateKNNReleaser
from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.aggregation.soft_labels import SoftLabelReleaser
from pate_stab.privacy.accounting.composition import PldRangeError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import Calibration, calibrate
from pate_stab.privacy.noise.secure import RandomSource
from pate_stab.theory import teachers_for_unanimous_answer

__all__ = [
    "AGGREGATORS",
    "AggregatorSettings",
    "AggregatorSpec",
    "Releaser",
    "aggregator_spec",
    "answerability",
    "calibrated_noise",
    "make_releaser",
]


class Releaser(Protocol):
    """What every aggregator exposes."""

    mechanism: str

    @property
    def halted(self) -> bool: ...

    @property
    def queries_seen(self) -> int: ...

    def release(self, votes: Any, *, query_ids: torch.Tensor | None = None) -> ReleaseResult: ...

    def summary(self) -> dict[str, Any]: ...

    def bind_ledger(self, ledger: PrivacyLedger, *, spend_id: str) -> None: ...


@dataclass(frozen=True)
class AggregatorSettings:
    """The target and the knobs every aggregator is built from.

    Attributes:
        epsilon, delta: the target (ε, δ) for ``num_queries`` queries.
        num_queries: m.
        num_teachers: k (Confident-GNMax's threshold is a fraction of it); every releaser refuses
            votes whose per-query total is not k.
        max_unstable: T, the ⊥ the stability releasers allow before halting.
        calibration: "paper" or "tight" (stability releasers; overridden by the name's suffix).
        gamma: the soft-label releaser's discretisation γ.
        confident_fraction: Confident-GNMax's threshold on the largest count, as a fraction of k.
        sigma_ratio: Confident-GNMax's σ1/σ2.
        teachers_changed: teachers one neighbouring data set may change (1, or 2 for replace-one
            over content-keyed shards: group privacy).
        noise: every aggregator's noise: "secure" (default: exact discrete samplers fed by the OS's
            CSPRNG) or "seeded" (reproducible research only: no privacy against anyone who knows
            the seed).
        sampling_rate: Private-kNN's γ, each record's probability of being in a query's sample
            (default 0.05: ``prob = 0.05`` in [ZYWW20]'s ``digit_pytorch/knn.py``); K is ``num_teachers``.
        privacy_unit: "record" or "label" (Private-kNN's accounting depends on it).
        neighbouring: "add_remove" or "replace_one" (Private-kNN under record privacy needs add/remove).
    """

    epsilon: float
    delta: float
    num_queries: int
    num_teachers: int
    max_unstable: int
    calibration: Literal["paper", "tight"] = "tight"
    gamma: float = 0.1
    confident_fraction: float = 0.6
    sigma_ratio: float = 2.0
    teachers_changed: int = 1
    noise: str = "secure"
    sampling_rate: float = 0.05
    privacy_unit: str = "record"
    neighbouring: str = "add_remove"


Builder = Callable[..., Releaser]


@dataclass(frozen=True)
class AggregatorSpec:
    """One registered aggregator.

    Attributes:
        name: the registry name.
        votes: what ``release`` takes: ``"histogram"`` ((m, C) vote counts), ``"scores"``
            ((k, m) binary teacher scores in [0, 1]) or ``"queries"`` ((m, d) the queries' public
            features: the aggregator computes its own votes from the private records'
            :class:`~pate_stab.aggregation.private_knn.NeighbourIndex`, passed as ``neighbours=``).
        soft: True when the released labels are scores (float, NaN for ⊥).
        halts: True when it stops answering after T ⊥ (the stability releasers).
        binary_only: True when it needs a two-class task.
        accounting: how its ε is certified (and enforced against the budget).
        data_dependent: the kind of PATE's data-dependent analysis that applies
            (:func:`~pate_stab.privacy.pate.data_dependent.data_dependent_summary`), or None where the
            ε is data-independent by construction.
    """

    name: str
    votes: Literal["histogram", "scores", "queries"]
    soft: bool
    halts: bool
    binary_only: bool
    accounting: str
    build: Builder
    data_dependent: str | None = None


def _calibration(s: AggregatorSettings, mode: str | None, soft: bool) -> Any:
    return calibrate(
        epsilon=s.epsilon,
        delta=s.delta,
        num_queries=s.num_queries,
        max_unstable=s.max_unstable,
        mode=mode or s.calibration,  # type: ignore[arg-type]
        soft_labels=soft,
    )


def _stability(mode: str | None) -> Builder:
    def build(s: AggregatorSettings, *, generator, ledger, spend_id, source=None) -> Releaser:  # type: ignore[no-untyped-def]
        secure = s.noise == "secure"
        return StabilityReleaser(
            _calibration(s, mode, soft=False), generator=None if secure else generator, ledger=ledger,
            spend_id=spend_id, noise=s.noise, source=source, teachers_changed=s.teachers_changed,
            num_teachers=s.num_teachers,
        )  # fmt: skip

    return build


def _soft(s: AggregatorSettings, *, generator, ledger, spend_id, source=None) -> Releaser:  # type: ignore[no-untyped-def]
    secure = s.noise == "secure"
    return SoftLabelReleaser(
        _calibration(s, None, soft=True), gamma=s.gamma, generator=None if secure else generator, ledger=ledger,
        spend_id=spend_id, noise=s.noise, source=source, teachers_changed=s.teachers_changed,
        num_teachers=s.num_teachers,
    )  # fmt: skip


def _baseline(make: Callable[..., LNMax | GNMax | ConfidentGNMax]) -> Builder:
    def build(s: AggregatorSettings, *, generator, ledger, spend_id, source=None) -> Releaser:  # type: ignore[no-untyped-def]
        secure = s.noise == "secure"
        return BaselineReleaser(
            make(s, source), generator=None if secure else generator, ledger=ledger, spend_id=spend_id,
            num_teachers=s.num_teachers,
        )  # fmt: skip

    return build


def _lnmax(s: AggregatorSettings, source: RandomSource | None) -> LNMax:
    return LNMax.calibrate(
        epsilon=s.epsilon, delta=s.delta, num_queries=s.num_queries, teachers_changed=s.teachers_changed,
        noise=s.noise, source=source,
    )  # fmt: skip


def _gnmax(s: AggregatorSettings, source: RandomSource | None) -> GNMax:
    return GNMax.calibrate(
        epsilon=s.epsilon, delta=s.delta, num_queries=s.num_queries, teachers_changed=s.teachers_changed,
        noise=s.noise, source=source,
    )  # fmt: skip


def _confident_gnmax(s: AggregatorSettings, source: RandomSource | None) -> ConfidentGNMax:
    return ConfidentGNMax.calibrate(
        epsilon=s.epsilon,
        delta=s.delta,
        num_queries=s.num_queries,
        threshold=s.confident_fraction * s.num_teachers,
        sigma_ratio=s.sigma_ratio,
        teachers_changed=s.teachers_changed,
        noise=s.noise,
        source=source,
    )


def _pld_limited(
    name: str, make: Callable[[AggregatorSettings, RandomSource | None], LNMax | GNMax | ConfidentGNMax]
) -> Callable[[AggregatorSettings, RandomSource | None], LNMax | GNMax | ConfidentGNMax]:
    """``make``, whose refusal of a guarantee too weak for PLD accounting names the aggregator, ε and m, and the
    lever a run has (a smaller ε): runs certify the PATE baselines with the PLD accountant."""

    def calibrated(s: AggregatorSettings, source: RandomSource | None) -> LNMax | GNMax | ConfidentGNMax:
        try:
            return make(s, source)
        except PldRangeError as exc:
            raise PldRangeError(
                f"{name} at epsilon = {s.epsilon:g} over m = {s.num_queries} queries is too weak a guarantee for "
                f"the PLD accountant runs certify it with ({exc}). Choose a smaller epsilon"
            ) from exc

    return calibrated


def _private_knn_mechanism(confident: bool) -> Callable[[AggregatorSettings, RandomSource | None], PrivateKNN]:
    def make(s: AggregatorSettings, source: RandomSource | None) -> PrivateKNN:
        if s.teachers_changed != 1 or (s.privacy_unit == "record" and s.neighbouring != "add_remove"):
            raise ValueError(
                "Private-kNN is accounted under add/remove of a record (privacy_unit: record) or replace-one of a "
                "label (privacy_unit: label); a replace-one record relation is not supported (use neighbouring: "
                "add_remove)"
            )
        return PrivateKNN.calibrate(
            epsilon=s.epsilon, delta=s.delta, num_queries=s.num_queries, sampling_rate=s.sampling_rate,
            num_neighbours=s.num_teachers, threshold=s.confident_fraction * s.num_teachers if confident else None,
            sigma_ratio=s.sigma_ratio, privacy_unit=s.privacy_unit, noise=s.noise, source=source,
        )  # fmt: skip

    return make


def _private_knn(confident: bool) -> Builder:
    mechanism = _private_knn_mechanism(confident)

    def build(s: AggregatorSettings, *, generator, ledger, spend_id, source=None, neighbours=None) -> Releaser:  # type: ignore[no-untyped-def]
        if not isinstance(neighbours, NeighbourIndex):
            raise TypeError("Private-kNN needs the private records' NeighbourIndex (neighbours=)")
        secure = s.noise == "secure"
        return PrivateKNNReleaser(
            mechanism(s, source), neighbours, generator=None if secure else generator, ledger=ledger,
            spend_id=spend_id, num_teachers=s.num_teachers,
        )  # fmt: skip

    return build


_STABILITY = "data-independent by construction (sparse vector + distance to instability)"
_PATE = "data-independent (dp-accounting, composed over num_queries)"
_KNN = "data-independent (dp-accounting: Poisson-subsampled Gaussian per query, composed over num_queries)"
_SPECS = (
    AggregatorSpec("stability", "histogram", False, True, False, _STABILITY, _stability(None)),
    AggregatorSpec("stability-paper", "histogram", False, True, False, _STABILITY, _stability("paper")),
    AggregatorSpec("stability-tight", "histogram", False, True, False, _STABILITY, _stability("tight")),
    AggregatorSpec("stability-soft", "scores", True, True, True, _STABILITY, _soft),
    AggregatorSpec("lnmax", "histogram", False, False, False, _PATE, _baseline(_pld_limited("lnmax", _lnmax)), "lnmax"),
    AggregatorSpec("gnmax", "histogram", False, False, False, _PATE, _baseline(_pld_limited("gnmax", _gnmax)), "gnmax"),
    AggregatorSpec(
        "confident-gnmax",
        "histogram",
        False,
        False,
        False,
        _PATE,
        _baseline(_pld_limited("confident-gnmax", _confident_gnmax)),
        "confident_gnmax",
    ),
    AggregatorSpec("private-knn", "queries", False, False, False, _KNN, _private_knn(False)),
    AggregatorSpec("confident-private-knn", "queries", False, False, False, _KNN, _private_knn(True)),
)
_REGISTRY = {spec.name: spec for spec in _SPECS}
AGGREGATORS = tuple(_REGISTRY)
"""Every registered name: "stability" (the settings' calibration mode), "stability-paper",
"stability-tight", "stability-soft", "lnmax", "gnmax", "confident-gnmax", "private-knn" (K = num_teachers
nearest records of a Poisson sample at rate sampling_rate, GNMax noise) and "confident-private-knn" (with
Confident-GNMax's threshold, as [ZYWW20] release)."""


def aggregator_spec(name: str) -> AggregatorSpec:
    """The registered aggregator called ``name`` (ValueError naming the choices otherwise)."""
    if name not in _REGISTRY:
        raise ValueError(f"unknown aggregator {name!r}; choose from {', '.join(AGGREGATORS)}")
    return _REGISTRY[name]


def make_releaser(
    name: str,
    settings: AggregatorSettings,
    *,
    generator: torch.Generator | None,
    ledger: PrivacyLedger | None = None,
    spend_id: str | None = None,
    source: RandomSource | None = None,
    neighbours: NeighbourIndex | None = None,
) -> Releaser:
    """The aggregator ``name`` calibrated to ``settings``, spending through ``ledger`` under ``spend_id``.

    ``generator`` draws the noise in seeded mode only; in secure mode (the default) every
    aggregator draws exact discrete noise from the OS's CSPRNG, or from ``source``.
    ``neighbours``: the private records' index, for the aggregators whose spec takes ``"queries"``.
    """
    spec = aggregator_spec(name)
    extra = {"neighbours": neighbours} if spec.votes == "queries" else {}
    return spec.build(settings, generator=generator, ledger=ledger, spend_id=spend_id, source=source, **extra)


_BASELINE_MECHANISMS: dict[
    str, Callable[[AggregatorSettings, RandomSource | None], LNMax | GNMax | ConfidentGNMax | PrivateKNN]
] = {
    "lnmax": _pld_limited("lnmax", _lnmax),
    "gnmax": _pld_limited("gnmax", _gnmax),
    "confident-gnmax": _pld_limited("confident-gnmax", _confident_gnmax),
    "private-knn": _private_knn_mechanism(False),
    "confident-private-knn": _private_knn_mechanism(True),
}


def calibrated_noise(
    name: str, settings: AggregatorSettings
) -> Calibration | LNMax | GNMax | ConfidentGNMax | PrivateKNN:
    """The noise aggregator ``name`` would draw at ``settings``, without building a releaser.

    The stability releasers' :class:`~pate_stab.privacy.mechanisms.calibration.Calibration` (λ, w, …), or the
    calibrated PATE mechanism (LNMax's b, GNMax's σ, Confident-GNMax's σ1, σ2 and threshold).
    Nothing is drawn or spent.
    """
    spec = aggregator_spec(name)
    if spec.halts:
        mode = name.partition("-")[2] if name in ("stability-paper", "stability-tight") else None
        return _calibration(settings, mode, spec.soft)  # type: ignore[no-any-return]
    return _BASELINE_MECHANISMS[name](settings, None)  # the noise it would draw; no source is used


@dataclass(frozen=True)
class Answerability:
    """Whether a stability releaser can answer at a setting.

    Attributes:
        teachers_needed: the k for which a unanimous vote is answered w.p. ≥ 0.95.
        epsilon_needed: the smallest ε (to 1 %) at which the settings' k would be (None when k
            suffices; inf when no ε up to 256 does: such a k cannot answer at any meaningful ε).
    """

    teachers_needed: int
    epsilon_needed: float | None

    @property
    def answerable(self) -> bool:
        return self.epsilon_needed is None


_MAX_EPSILON = 256.0  # the ε search stops here (larger ε overflow the PLD accountant's e^ε)


def _teachers_needed(name: str, s: AggregatorSettings) -> int:
    spec = aggregator_spec(name)
    mode = name.partition("-")[2] if name in ("stability-paper", "stability-tight") else None
    return teachers_for_unanimous_answer(_calibration(s, mode, spec.soft), teachers_changed=s.teachers_changed)


def answerability(name: str, settings: AggregatorSettings) -> Answerability | None:
    """For a halting (stability) aggregator: the k a unanimous vote needs, and the ε this k needs.

    None for the PATE baselines, which answer every query they are calibrated for.
    """
    if not aggregator_spec(name).halts:
        return None
    need = _teachers_needed(name, settings)
    if need <= settings.num_teachers:
        return Answerability(need, None)

    def ok(eps: float) -> bool:
        return _teachers_needed(name, replace(settings, epsilon=eps)) <= settings.num_teachers

    lo, hi = 0.01, 1.0
    while not ok(hi):
        lo, hi = hi, hi * 2
        if hi > _MAX_EPSILON:
            return Answerability(need, math.inf)
    while hi / lo > 1.01:
        mid = math.sqrt(lo * hi)
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return Answerability(need, hi)
