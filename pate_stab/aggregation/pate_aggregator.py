"""What PATE's aggregators share: options, calibration checks, budget bookkeeping and release.

:class:`PateAggregator` is the base of :class:`~pate_stab.aggregation.baselines.LNMax`,
:class:`~pate_stab.aggregation.baselines.GNMax` and
:class:`~pate_stab.aggregation.baselines.ConfidentGNMax` (see that module for the mechanisms,
their sensitivity and their accounting): it checks the options every aggregator takes
(:class:`AggregatorOptions`), certifies ε for ``num_queries`` queries with a fresh accountant,
answers queries in batches and refuses (``BudgetExhaustedError``) to go beyond ``num_queries``,
and reports what noise was actually drawn (secure: exact parameters; seeded: the warning).
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any, NamedTuple, TypedDict, Unpack

import torch

from pate_stab._checks import check_delta, check_epsilon, check_generator, check_int, check_tensor
from pate_stab.aggregation.base import ABSTAIN, check_teachers_changed
from pate_stab.aggregation.pate_accounting import ROWS_PER_CHUNK, check_accountant, check_vote_counts
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.accounting.composition import AccountantName, accountant_epsilon, check_pld_feasible
from pate_stab.privacy.accounting.events import PrivacyEvent, SelfComposedEvent
from pate_stab.privacy.noise.secure import SEEDED_NOISE_WARNING, RandomSource, SystemRandomSource, check_noise

__all__ = ["AggregatorOptions", "PateAggregator"]


class AggregatorOptions(TypedDict, total=False):
    """The options every aggregator and its ``calibrate`` take beside its noise (keyword-only).

    ``accountant`` (``"pld"`` or ``"rdp"``; default: the noise's first valid one),
    ``teachers_changed`` (1, or 2 for replace-one over content keys; default 1), ``noise``
    (``"secure"``, the default, or ``"seeded"``) and ``source`` (secure noise's random bits;
    default the OS).
    """

    accountant: AccountantName | None
    teachers_changed: int
    noise: str
    source: RandomSource | None


class _Calibrating(NamedTuple):
    """A ``calibrate`` call's checked target and options (one place for the argument checks)."""

    epsilon: float
    delta: float
    num_queries: int
    teachers_changed: int
    noise: str
    accountant: str
    source: RandomSource | None

    def options(self) -> dict[str, Any]:
        """The constructor's keyword arguments other than the noise scale."""
        return {
            "num_queries": self.num_queries, "delta": self.delta, "accountant": self.accountant,
            "teachers_changed": self.teachers_changed, "noise": self.noise, "source": self.source,
        }  # fmt: skip


class PateAggregator:
    """Budget bookkeeping, batch release and single-query sampling shared by the aggregators."""

    name = "aggregator"

    def __init__(
        self,
        *,
        num_queries: int,
        delta: float,
        accountant: AccountantName | None = None,
        teachers_changed: int = 1,
        noise: str = "secure",
        source: RandomSource | None = None,
    ) -> None:
        self.teachers_changed = check_teachers_changed(teachers_changed)
        self.num_queries = check_int("num_queries", num_queries, minimum=1)
        self.delta = check_delta(delta)
        self.noise = check_noise(noise)
        if source is not None and not hasattr(source, "uint63"):
            raise TypeError(f"source must be a RandomSource, got {type(source).__name__}")
        self._source: RandomSource = source if source is not None else SystemRandomSource()
        self.accountant = self._accountant(accountant)
        self.queries_seen = 0
        self.answered = 0
        check_pld_feasible(self._rdp_bound_event(), delta=self.delta, accountant=self.accountant)
        self._certified_epsilon = accountant_epsilon(self.event(), delta=self.delta, accountant=self.accountant)

    def _accountant(self, accountant: AccountantName | None) -> str:
        """The accountant: the one asked for (checked against the noise), or the noise's default."""
        allowed = self.accountants(self.noise, self.teachers_changed)
        if accountant is None:
            return allowed[0]
        return self._allowed_accountant(accountant, self.noise, self.teachers_changed)

    @classmethod
    def _allowed_accountant(cls, accountant: Any, noise: str, teachers_changed: int) -> str:
        """``accountant`` if this noise allows it (:meth:`accountants`), else a ValueError naming those it allows."""
        name = check_accountant(accountant)
        allowed = cls.accountants(noise, teachers_changed)
        if name not in allowed:
            raise ValueError(
                f"{cls.name} with noise={noise!r} and teachers_changed={teachers_changed} is accounted "
                f"with {' or '.join(repr(a) for a in allowed)}, not {name!r} (the continuous mechanism's loss "
                "distribution does not bound the discrete noise's)"
            )
        return name

    @classmethod
    def accountants(cls, noise: str, teachers_changed: int) -> tuple[str, ...]:
        """The accountants valid for this noise, the default first.

        Seeded (continuous) noise: PLD or RDP. Secure discrete Gaussian noise: RDP only (module
        docstring).
        """
        return ("pld", "rdp") if check_noise(noise) == "seeded" else ("rdp",)

    @classmethod
    def _calibrating(
        cls, *, epsilon: float, delta: float, num_queries: int, **options: Unpack[AggregatorOptions]
    ) -> _Calibrating:
        """Check ``calibrate``'s arguments; the accountant defaults to the noise's first valid one."""
        epsilon = check_epsilon(epsilon)
        delta = check_delta(delta)
        num_queries = check_int("num_queries", num_queries, minimum=1)
        g = check_teachers_changed(options.get("teachers_changed", 1))
        mode = check_noise(options.get("noise", "secure"))
        accountant = options.get("accountant")
        # an accountant the noise does not allow is refused here, before any calibration
        accountant_name = (
            cls.accountants(mode, g)[0] if accountant is None else cls._allowed_accountant(accountant, mode, g)
        )
        return _Calibrating(epsilon, delta, num_queries, g, mode, accountant_name, options.get("source"))

    def _rdp_bound_event(self) -> PrivacyEvent:
        """An event the RDP accountant supports whose RDP bounds the run's (for the PLD feasibility check)."""
        return self.event()

    def _generator(self, generator: torch.Generator | None) -> torch.Generator | None:
        if self.noise == "seeded":
            if generator is None:
                raise TypeError(f"{self.name} with noise='seeded' needs a generator")
            return check_generator(generator)
        return None

    def noise_fields(self) -> dict[str, Any]:
        """The noise actually drawn: mode, exact parameters (secure) or the seeded-noise warning."""
        if self.noise == "seeded":
            return {"noise": "seeded", "noise_warning": SEEDED_NOISE_WARNING}
        return {"noise": "secure", **self._exact_parameters()}

    def _exact_parameters(self) -> dict[str, str]:
        raise NotImplementedError

    # --- to be provided by each aggregator
    def per_query_event(self) -> PrivacyEvent:
        """What one query does, in :mod:`pate_stab.privacy.accounting.events`' vocabulary."""
        raise NotImplementedError

    def _labels(self, counts: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        raise NotImplementedError

    def _parameters(self) -> dict[str, float]:
        raise NotImplementedError

    # --- accounting
    def event(self) -> SelfComposedEvent:
        """The whole run: the per-query event composed ``num_queries`` times (data-independent).

        This is what the aggregator's ledger spend records; the ledger checks that it implies the
        certified (ε, δ) (:func:`pate_stab.privacy.accounting.composition.implies_guarantee`).
        """
        return SelfComposedEvent(self.per_query_event(), self.num_queries)

    @property
    def certified_epsilon(self) -> float:
        """ε certified by the accountant for ``num_queries`` queries at ``certified_delta``."""
        return self._certified_epsilon

    @property
    def certified_delta(self) -> float:
        return self.delta

    def single_query_epsilon(self, delta: float) -> float:
        """ε of one query at the given δ ∈ (0, 1), from the same accountant."""
        delta = check_delta(delta)
        return accountant_epsilon(self.per_query_event(), delta=delta, accountant=self.accountant)

    # --- release
    def release(self, counts: Any, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """Answer one query per row of ``counts``.

        Args:
            counts: ``(m, C)`` non-negative integer vote histogram (see ``votes.vote_histogram``).
            generator: the seeded noise (required with ``noise="seeded"``; not used with secure noise).

        Returns:
            ``(m,)`` int64 labels; −1 (:data:`ABSTAIN`) encodes ⊥.

        Raises:
            BudgetExhaustedError: the queries would exceed ``num_queries``; nothing is released.
        """
        gen = self._generator(generator)
        counts = check_vote_counts(counts)
        m = counts.shape[0]
        if self.queries_seen + m > self.num_queries:
            raise BudgetExhaustedError(
                f"{self.name} is certified for {self.num_queries} queries; {self.queries_seen} already "
                f"answered, {m} more requested"
            )
        parts = [self._labels(counts[start : start + ROWS_PER_CHUNK], gen) for start in range(0, m, ROWS_PER_CHUNK)]
        labels = torch.cat(parts)
        self.queries_seen += m
        self.answered += int((labels != ABSTAIN).sum())
        return labels

    def sample(self, counts_row: Any, num_samples: int, *, generator: torch.Generator | None = None) -> torch.Tensor:
        """``num_samples`` independent runs of the single-query mechanism on one histogram row.

        For statistical tests of the output distribution only: these runs are not counted
        against ``num_queries`` (each one is a separate release of the same query).

        Returns:
            ``(num_samples,)`` int64 labels (−1 for ⊥).
        """
        gen = self._generator(generator)
        num_samples = check_int("num_samples", num_samples, minimum=1)
        row = check_tensor("counts_row", counts_row, ndim=1, floating=False)
        counts = check_vote_counts(row.unsqueeze(0)).expand(num_samples, -1)
        return self._labels(counts, gen)

    def summary(self) -> dict[str, Any]:
        """Configuration, certified privacy and release counters, as plain Python values."""
        return {
            "mechanism": self.name,
            **self._parameters(),
            **self.noise_fields(),
            "num_queries": self.num_queries,
            "epsilon": self.certified_epsilon,
            "delta": self.certified_delta,
            "accountant": self.accountant,
            "accounting": "data-independent",
            "teachers_changed": self.teachers_changed,
            "sensitivity": (
                "one record moves one vote (ℓ1 2, ℓ2 √2, max count 1)"
                if self.teachers_changed == 1
                else "one record moves two votes (ℓ1 4, ℓ2 2√2, max count 2)"
            ),
            "queries_seen": self.queries_seen,
            "answered": self.answered,
            "abstained": self.queries_seen - self.answered,
        }

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v:.6g}" for k, v in self._parameters().items())
        return (
            f"{type(self).__name__}({params}, noise={self.noise!r}, num_queries={self.num_queries}, "
            f"epsilon={self.certified_epsilon:.4g}, delta={self.delta:.3g})"
        )


def noisy_argmax(counts: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """``argmax_c (n_c + noise_c)`` per row of ``counts`` (m, C); ties go to the lowest class.

    Integer (secure, exact) noise of ``m·C`` values is added to the integer counts; float (seeded)
    noise of shape (m, C) to the float64 counts.
    """
    if noise.is_floating_point():
        return (counts + noise).argmax(dim=1)
    return (counts.to(torch.int64) + noise.view(counts.shape)).argmax(dim=1)


def fraction_text(value: Fraction) -> str:
    return f"{value.numerator}/{value.denominator}"
