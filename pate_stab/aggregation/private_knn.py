"""Private-kNN: each query's votes are the labels of its K nearest records in a fresh Poisson sample.

Zhu, Yu, Wang & Wang, "Private-kNN: Practical Differential Privacy for Computer Vision", CVPR 2020
[ZYWW20]; public code ``jeremy43/Private_kNN`` (``digit_pytorch/knn.py``, ``digit_pytorch/mnist_config.py``).
PATE's k partitioned teachers are replaced by the K nearest private records of the query, in a feature
space fitted without private data (public data, or none). For each query the private set is sampled
afresh, every record kept independently with probability γ, so that subsampling amplifies privacy.
The votes are released with GNMax's noise, optionally behind Confident-GNMax's noisy threshold
(:mod:`pate_stab.aggregation.baselines`, [PSM+18]).

Votes (:func:`knn_histograms`). Among the sampled records, the K nearest to the query in the order
(distance, position in the private set) — a strict total order that adding or removing a record does
not change among the others, because each pair's distance is computed exactly (on a public grid) or
pair by pair (:class:`NeighbourIndex`) — vote with their labels. With fewer than K
sampled records all of them vote.

Sensitivity under add/remove. Fix every other record's coin. If the added (removed) record x is not
sampled, or is sampled but not among the K nearest, the voters are the same. If it is sampled and
among the K nearest, it enters the voters and pushes out the K-th nearest of the others (or pushes
nothing out when fewer than K were sampled): one vote is added and at most one removed. So the
histogram moves by at most one +1 and one −1: ℓ1 ≤ 2, ℓ2 ≤ √2, and the largest count by at most 1
(the threshold check's sensitivity). Tested as a property (``tests/aggregation/test_private_knn.py``).

Accounting under add/remove (data-independent). Given the other records' coins, the released
histogram is a Gaussian mechanism of ℓ2 sensitivity √2 on the sample with or without x: one query
is the Poisson-subsampled Gaussian, ``PoissonSampledEvent(γ, GaussianEvent(σ, √2))`` (with the
threshold, ``PoissonSampledEvent(γ, ComposedEvent((GaussianEvent(σ1, 1), GaussianEvent(σ, √2))))``:
the check and the answer use the *same* sample, so they are sampled together, not each on its own),
composed over the ``num_queries`` queries asked (every query is charged the check and the answer).
The discrete events with secure noise (RDP only; see
:class:`~pate_stab.privacy.accounting.events.PoissonSampledEvent`).

Label privacy (replace-one of a label). The inputs are public, so the neighbours are found in the
input space; a changed label keeps its record and its coin, and moves at most one vote from one
class to another (ℓ2 √2, largest count ±1). Both neighbouring data sets use the same coins, so the
pair of output laws is a mixture, with the same weights, of pairs of Gaussians whose means differ by
at most √2: by the joint quasi-convexity of Rényi divergence (van Erven & Harremoës 2014, Thm 13) it
is no worse than one unsampled Gaussian query of sensitivity √2. The relation gives no
amplification here (a changed label is present in both data sets): each query is accounted as the
unsampled GNMax (or Confident-GNMax) event.

Data-dependent ε. PATE's data-dependent analysis (smooth sensitivity of the unsampled vote counts,
[PSM+18]) has no derivation with a source that covers subsampled votes, so none is reported.
[ZYWW20]'s own figure (:func:`zyww20_epsilon`, "theirs") is computed as a diagnostic for the run's
private files only: it is not a certified guarantee here, and is not published.

Noise and coins: secure by default (exact discrete Gaussian noise and coins from the OS's CSPRNG or
``source=``); the coins' rate is the exact dyadic γ' = t/2^16 nearest to γ (:func:`exact_sampling_rate`),
and γ' is what the accounting uses. Seeded mode draws both from the ``generator`` (research only).
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Unpack

import numpy as np
import torch

from pate_stab._checks import check_int, check_positive, check_real, check_tensor
from pate_stab.aggregation.base import ABSTAIN, LedgerRelease, ReleaseResult, check_num_teachers
from pate_stab.aggregation.baselines import gaussian_event
from pate_stab.aggregation.pate_accounting import SQRT2
from pate_stab.aggregation.pate_aggregator import AggregatorOptions, PateAggregator, fraction_text, noisy_argmax
from pate_stab.privacy.accounting.composition import accountant_epsilon, calibrate_scale, zcdp_guess
from pate_stab.privacy.accounting.events import ComposedEvent, PoissonSampledEvent, PrivacyEvent, SelfComposedEvent
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.noise.secure import RandomSource, check_noise, discrete_gaussian, exact_sigma_sq_at_least
from pate_stab.privacy.noise.seeded import gaussian

__all__ = [
    "KNN_PRIVACY_UNITS",
    "ZYWW20_LABEL",
    "SAMPLING_BITS",
    "NeighbourIndex",
    "PrivateKNN",
    "PrivateKNNReleaser",
    "draw_coins",
    "exact_sampling_rate",
    "knn_histograms",
    "zyww20_epsilon",
]

SAMPLING_BITS = 16
"""Coins are compared on 16 random bits: the sampling rate drawn is a multiple of 2^-16 (three coins a word)."""
KNN_PRIVACY_UNITS = ("record", "label")
"""``record``: add/remove, subsampling amplifies; ``label``: replace-one of a label, no amplification claimed."""


def exact_sampling_rate(rate: float | Fraction) -> Fraction:
    """The rate the coins draw: t/2^16 with t = round(γ·2^16), 1 ≤ t ≤ 2^16 (exact; accounted as is)."""
    value = check_positive("sampling_rate", float(rate))
    if value > 1.0:
        raise ValueError(f"sampling_rate must be in (0, 1], got {value}")
    t = min(max(round(value * (1 << SAMPLING_BITS)), 1), 1 << SAMPLING_BITS)
    return Fraction(t, 1 << SAMPLING_BITS)


def draw_coins(
    num_queries: int,
    num_records: int,
    rate: Fraction,
    *,
    source: RandomSource | None = None,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """(b, n) bool: each record kept for each query independently with probability exactly ``rate``.

    Secure: the three low 16-bit fields of the ``source``'s uniform 63-bit words (three coins a word), kept
    when below ``rate``·2^16. Seeded (``generator``): the same comparison on torch's uniform integers.
    """
    b, n = check_int("num_queries", num_queries, minimum=0), check_int("num_records", num_records, minimum=0)
    if rate.denominator > (1 << SAMPLING_BITS) or not 0 < rate <= 1:
        raise ValueError(f"rate must be a multiple of 2^-{SAMPLING_BITS} in (0, 1], got {rate}")
    t = rate.numerator * ((1 << SAMPLING_BITS) // rate.denominator)
    total = b * n
    if rate == 1:
        return torch.ones(b, n, dtype=torch.bool)
    if generator is not None:
        fields = torch.randint(0, 1 << SAMPLING_BITS, (total,), generator=generator, dtype=torch.int64)
        return (fields < t).view(b, n)
    if source is None:
        raise TypeError("draw_coins needs a source (secure) or a generator (seeded)")
    words = source.uint63(-(-total // 3)) if total else np.zeros(0, dtype=np.int64)
    # the low 48 bits of each word, as three little-endian uint16 fields (the top field holds the unused bit 63)
    low = np.ascontiguousarray(words, dtype="<i8").view("<u2").reshape(-1, 4)[:, :3].reshape(-1)[:total]
    return torch.from_numpy(low < t).view(b, n)


def knn_histograms(
    distances: torch.Tensor, labels: torch.Tensor, sampled: torch.Tensor, *, num_neighbours: int, num_classes: int
) -> torch.Tensor:
    """(b, C) int64 votes: the labels of each query's ``num_neighbours`` nearest *sampled* records.

    Args:
        distances: (b, n) query-to-record distances.
        labels: (n,) int64 labels in [0, C).
        sampled: (b, n) bool coins (True: the record is in the query's sample).
        num_neighbours: K.
        num_classes: C (declared, never read from the labels).

    The order is (distance, position): ties at the K-th distance go to the lowest positions, so the
    voters among the other records do not depend on whether one record is present (module docstring).
    """
    k = check_int("num_neighbours", num_neighbours, minimum=1)
    b, n = distances.shape
    if n == 0:
        return torch.zeros(b, num_classes, dtype=torch.int64)
    d = distances.masked_fill(~sampled, math.inf)
    kth = d.topk(min(k, n), dim=1, largest=False).values[:, -1:]  # the K-th sampled distance (inf: fewer than K)
    strict = (d < kth) & sampled
    tie = (d == kth) & sampled
    need = k - strict.sum(dim=1, keepdim=True)
    chosen = strict | (tie & (tie.cumsum(dim=1) <= need))
    one_hot = torch.nn.functional.one_hot(labels.to(chosen.device), num_classes).to(torch.float32)
    return (chosen.to(torch.float32) @ one_hot).round().to(torch.int64).cpu()


GRID_LEVELS = 1 << 12
"""The exact search's grid: coordinates are integers in [−2^12, 2^12] steps, so every squared distance (d ≤ 2^20
coordinates) is an integer below 2^53, exact in float64 whatever the order of the sums."""


class NeighbourIndex:
    """The private records' features and labels, searched in blocks on ``device``.

    One pair's distance must not depend on which other records are present (module docstring: the order
    of the others must not change when one record is added). Two searches guarantee it:

    * ``resolution`` given (what runs use): every coordinate is rounded to a multiple of ``resolution`` and
      clipped to ±2^12 steps (a map of each record alone; ``resolution`` comes from public data, e.g.
      the public pool's largest coordinate / 2^12), so squared distances are integers below 2^53 and
      the matrix-product form ‖q‖² + ‖x‖² − 2q·x in float64 is exact, whatever the blocking;
    * ``resolution`` None: torch ``cdist`` pair by pair (no matrix-product shortcut): exact per pair, slower.

    Args:
        features: (n, d) private features in a privacy-free feature space (fitted on public data or none).
        labels: (n,) private labels in [0, C).
        num_classes: C.
        device: where the search runs (the run's compute device).
        block: queries per block.
        resolution: the grid step (public), or None.
    """

    def __init__(
        self,
        features: torch.Tensor,
        labels: torch.Tensor,
        *,
        num_classes: int,
        device: str | torch.device = "cpu",
        block: int = 128,
        resolution: float | None = None,
    ) -> None:
        features = check_tensor("features", features, ndim=2, nonempty=False)  # an empty neighbour is a data set
        labels = check_tensor("labels", labels, ndim=1, floating=False, nonempty=False)
        if labels.shape[0] != features.shape[0]:
            raise ValueError(f"features ({features.shape[0]}) and labels ({labels.shape[0]}) differ in length")
        self.num_classes = check_int("num_classes", num_classes, minimum=2)
        if labels.numel() and (int(labels.min()) < 0 or int(labels.max()) >= self.num_classes):
            raise ValueError(f"labels must lie in [0, {self.num_classes})")
        if features.shape[1] > 1 << 20:
            raise ValueError("at most 2^20 features")
        self.device = torch.device(device)
        self.resolution = None if resolution is None else check_positive("resolution", resolution)
        self.labels = labels.to(self.device, torch.int64)
        self.block = check_int("block", block, minimum=1)
        if self.resolution is None:
            self.features = features.to(self.device, torch.float32)
        else:
            self.features = self._grid(features)
            self._norms = (self.features * self.features).sum(dim=1)

    def _grid(self, x: torch.Tensor) -> torch.Tensor:
        """Coordinates on the grid: integers in [−2^12, 2^12], as float64 (exact)."""
        assert self.resolution is not None
        steps = torch.round(x.to(self.device, torch.float64) / self.resolution)
        return steps.clamp(-GRID_LEVELS, GRID_LEVELS)

    @staticmethod
    def public_resolution(public: torch.Tensor) -> float:
        """A grid step from public inputs: their largest absolute coordinate over 2^12 (1.0 if all are 0)."""
        top = float(public.abs().max()) if public.numel() else 0.0
        return top / GRID_LEVELS if top > 0 and math.isfinite(top) else 1.0

    @property
    def size(self) -> int:
        return int(self.features.shape[0])

    @property
    def dim(self) -> int:
        return int(self.features.shape[1])

    def distances(self, queries: torch.Tensor) -> torch.Tensor:
        """(b, n) distances of a block of queries on the index's device, in an order-preserving form: exact
        squared grid distances (``resolution``), or Euclidean distances computed pair by pair."""
        if self.resolution is None:
            q = queries.to(self.device, torch.float32)
            return torch.cdist(q, self.features, compute_mode="donot_use_mm_for_euclid_dist")
        q = self._grid(queries)
        return (q * q).sum(dim=1, keepdim=True) + self._norms - 2.0 * (q @ self.features.T)

    def histograms(self, queries: torch.Tensor, coins: Any, *, num_neighbours: int) -> torch.Tensor:
        """(b, C) votes of the queries' K nearest sampled records; ``coins(b)`` gives each block's (b, n) coins."""
        queries = check_tensor("queries", queries, ndim=2)
        if queries.shape[1] != self.dim:
            raise ValueError(f"queries have {queries.shape[1]} features, the private records {self.dim}")
        parts = []
        for start in range(0, queries.shape[0], self.block):
            q = queries[start : start + self.block]
            sampled = coins(q.shape[0]).to(self.device)
            parts.append(knn_histograms(self.distances(q), self.labels, sampled, num_neighbours=num_neighbours,
                                        num_classes=self.num_classes))  # fmt: skip
        return torch.cat(parts) if parts else torch.zeros(0, self.num_classes, dtype=torch.int64)


ZYWW20_LABEL = (
    "[ZYWW20]'s own ε (theirs, a diagnostic; not a guarantee here): the check over every query asked and the "
    "answer over the answered queries only, each its own Poisson-subsampled Gaussian, composed by RDP"
)
"""What the private files say :func:`zyww20_epsilon`'s figure is."""


def zyww20_epsilon(
    *,
    sigma: float,
    sigma1: float | None,
    sampling_rate: float | Fraction,
    num_queries: int,
    num_answered: int,
    delta: float,
    noise: str = "secure",
) -> float:
    """[ZYWW20]'s own ε of a Private-kNN release: "theirs", a diagnostic for private files, never a guarantee.

    Their accounting, as their public code runs it (``jeremy43/Private_kNN``, ReadMe.md "Privacy analysis" and
    ``digit_pytorch/knn.py``: ``compose_poisson_subsampled_mechanisms`` of the check's Gaussian over every query
    and of the answer's over the answered ones, then ``get_eps(delta)``), restated here with this package's
    events and RDP accountant:

    * the check (with a threshold): ``num_queries`` × Poisson-subsampled (rate γ) Gaussian of σ1, ℓ2
      sensitivity 1 (the largest count moves by 1);
    * the answer: ``num_answered`` × Poisson-subsampled (rate γ) Gaussian of σ, ℓ2 sensitivity √2 (their
      ``RDP_inde_pate_gaussian``, RDP α/σ²; one vote in, one out);
    * the two compositions composed, ε at ``delta`` from the RDP curve.

    It depends on the data only through how many queries were answered (the count of released ⊥). It is not
    certified here for two reasons. The answers are charged for the answered queries only, a count that the
    data choose: composition is stated for a number of mechanisms fixed in advance. And the check and the
    answer of one query read the same sample (their code draws one sample per query), yet each is amplified
    as if sampled on its own; the guarantee of the pair sampled together is :meth:`PrivateKNN.per_query_event`'s.

    Where nothing is data-dependent it is the data-independent figure: without a threshold (``sigma1``
    None) and with every query answered, it is the ε of ``num_queries`` × :meth:`PrivateKNN.per_query_event`
    (``privacy_unit="record"``). It grows with ``num_answered``.

    Args:
        sigma: σ of the answer's noise; sigma1: σ1 of the check's (None: no threshold, every query answered).
        sampling_rate: γ (the exact rate the coins draw, :func:`exact_sampling_rate`, is what is composed).
        num_queries: queries asked; num_answered: queries answered (0 ≤ ``num_answered`` ≤ ``num_queries``).
        delta: δ at which ε is stated.
        noise: ``"secure"`` (discrete Gaussian events) or ``"seeded"`` (continuous), as the release's.
    """
    m = check_int("num_queries", num_queries, minimum=1)
    a = check_int("num_answered", num_answered, minimum=0)
    if a > m:
        raise ValueError(f"num_answered={a} exceeds num_queries={m}")
    if sigma1 is None and a != m:
        raise ValueError("without a threshold every query is answered (num_answered must equal num_queries)")
    rate = float(exact_sampling_rate(sampling_rate))
    noise = check_noise(noise)
    parts: list[PrivacyEvent] = []
    if sigma1 is not None:
        check = PoissonSampledEvent(rate, gaussian_event(check_positive("sigma1", sigma1), 1.0, noise))
        parts.append(SelfComposedEvent(check, m))
    if a:
        answer = PoissonSampledEvent(rate, gaussian_event(check_positive("sigma", sigma), SQRT2, noise))
        parts.append(SelfComposedEvent(answer, a))
    # parts is never empty: with a threshold the check is there, without one a = m ≥ 1
    event = parts[0] if len(parts) == 1 else ComposedEvent(tuple(parts))
    return accountant_epsilon(event, delta=delta, accountant="rdp")


class PrivateKNN(PateAggregator):
    """Private-kNN's release of neighbour votes [ZYWW20]: GNMax, optionally behind Confident-GNMax's threshold.

    With ``threshold`` None: ``argmax_c (n_c + N(0, σ²))``. With a threshold T: answer only when
    ``max_c n_c + N(0, σ1²) ≥ T``, else ⊥ (−1). The votes n come from :class:`PrivateKNNReleaser`
    (the query's K nearest records in its Poisson sample); their sensitivity and the accounting are
    in the module docstring.

    Args:
        sigma: σ of the answer's noise (on the counts, ℓ2 sensitivity √2).
        sampling_rate: γ; the exact rate drawn is :func:`exact_sampling_rate` (γ').
        num_neighbours: K.
        threshold, sigma1: Confident-GNMax's threshold on the largest count and its noise (both or neither).
        privacy_unit: ``"record"`` (add/remove: subsampled events) or ``"label"`` (unsampled events).
        num_queries, delta, options: as the PATE aggregators (``teachers_changed`` must be 1).
    """

    name = "Private-kNN"

    def __init__(
        self,
        *,
        sigma: float,
        sampling_rate: float | Fraction,
        num_neighbours: int,
        num_queries: int,
        delta: float,
        threshold: float | None = None,
        sigma1: float | None = None,
        privacy_unit: str = "record",
        **options: Unpack[AggregatorOptions],
    ) -> None:
        self.sigma = check_positive("sigma", sigma)
        self.sampling_rate = exact_sampling_rate(sampling_rate)
        self.num_neighbours = check_int("num_neighbours", num_neighbours, minimum=1)
        if (threshold is None) != (sigma1 is None):
            raise ValueError("threshold and sigma1 go together (Confident-GNMax's check) or not at all")
        self.threshold = None if threshold is None else check_real("threshold", threshold)
        self.sigma1 = None if sigma1 is None else check_positive("sigma1", sigma1)
        if privacy_unit not in KNN_PRIVACY_UNITS:
            raise ValueError(f"privacy_unit must be one of {', '.join(KNN_PRIVACY_UNITS)}, got {privacy_unit!r}")
        self.privacy_unit = privacy_unit
        if options.get("teachers_changed", 1) != 1:
            raise ValueError(
                "Private-kNN is accounted under add/remove of a record or replace-one of a label (one vote in, "
                "one out); a replace-one record relation is not supported"
            )
        self.sigma_sq_exact = exact_sigma_sq_at_least(self.sigma)
        self.sigma1_sq_exact = None if self.sigma1 is None else exact_sigma_sq_at_least(self.sigma1)
        super().__init__(num_queries=num_queries, delta=delta, **options)

    @classmethod
    def accountants(cls, noise: str, teachers_changed: int) -> tuple[str, ...]:
        """RDP first for either noise (the sampled Gaussian's PLD is slow to calibrate at large ε); seeded
        (continuous) noise may ask for PLD; secure noise is RDP only."""
        return ("rdp", "pld") if check_noise(noise) == "seeded" else ("rdp",)

    @property
    def confident(self) -> bool:
        return self.threshold is not None

    @staticmethod
    def query_event(
        *, sigma: float, sigma1: float | None, sampling_rate: float | Fraction, privacy_unit: str, noise: str
    ) -> PrivacyEvent:
        """One query: the (check and) answer, Poisson-sampled at the exact rate under record privacy."""
        answer = gaussian_event(sigma, SQRT2, noise)
        inner = answer if sigma1 is None else ComposedEvent((gaussian_event(sigma1, 1.0, noise), answer))
        if privacy_unit == "label":
            return inner
        return PoissonSampledEvent(float(exact_sampling_rate(sampling_rate)), inner)

    @classmethod
    def calibrate(
        cls,
        *,
        epsilon: float,
        delta: float,
        num_queries: int,
        sampling_rate: float,
        num_neighbours: int,
        threshold: float | None = None,
        sigma_ratio: float = 3.0,
        privacy_unit: str = "record",
        **options: Unpack[AggregatorOptions],
    ) -> PrivateKNN:
        """The smallest σ (σ1 = sigma_ratio·σ with a threshold) whose ``num_queries`` queries are (ε, δ)-DP.

        The default ratio 3 is [ZYWW20]'s MNIST setting (σ1 = 75, σ = 25 in ``mnist_config.py``).
        """
        c = cls._calibrating(epsilon=epsilon, delta=delta, num_queries=num_queries, **options)
        ratio = check_positive("sigma_ratio", sigma_ratio)
        rate = exact_sampling_rate(sampling_rate)

        def event(s: float) -> PrivacyEvent:
            one = cls.query_event(sigma=s, sigma1=None if threshold is None else ratio * s, sampling_rate=rate,
                                  privacy_unit=privacy_unit, noise=c.noise)  # fmt: skip
            return SelfComposedEvent(one, c.num_queries)

        # the unsampled composition's σ bounds the answer from above: start the bracket there
        rho_unit = c.num_queries * (1.0 + (0.0 if threshold is None else 1.0 / (2.0 * ratio**2)))
        guess = zcdp_guess(epsilon=c.epsilon, delta=c.delta, rho_times_scale_sq=rho_unit)
        sigma = calibrate_scale(event, epsilon=c.epsilon, delta=c.delta, guess=guess, accountant=c.accountant)
        return cls(
            sigma=sigma, sampling_rate=rate, num_neighbours=num_neighbours, threshold=threshold,
            sigma1=None if threshold is None else ratio * sigma, privacy_unit=privacy_unit, **c.options(),
        )  # fmt: skip

    def per_query_event(self) -> PrivacyEvent:
        return self.query_event(sigma=self.sigma, sigma1=self.sigma1, sampling_rate=self.sampling_rate,
                                privacy_unit=self.privacy_unit, noise=self.noise)  # fmt: skip

    def _labels(self, counts: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
        m = counts.shape[0]
        if generator is None:  # secure: exact N_Z on the integer counts
            answer = noisy_argmax(counts, discrete_gaussian(self.sigma, counts.numel(), source=self._source))
            if self.sigma1 is None or self.threshold is None:  # both or neither (__init__)
                return answer
            top = counts.max(dim=1).values.to(torch.int64) + discrete_gaussian(self.sigma1, m, source=self._source)
            return torch.where(top >= self.threshold, answer, ABSTAIN)
        answer = noisy_argmax(counts, gaussian(self.sigma, counts.shape, generator=generator))
        if self.sigma1 is None or self.threshold is None:
            return answer
        confident = counts.max(dim=1).values + gaussian(self.sigma1, (m,), generator=generator) >= self.threshold
        return torch.where(confident, answer, ABSTAIN)

    def _parameters(self) -> dict[str, float]:
        out = {"sigma": self.sigma, "sampling_rate": float(self.sampling_rate), "num_neighbours": self.num_neighbours}
        if self.sigma1 is not None and self.threshold is not None:
            out |= {"threshold": self.threshold, "sigma1": self.sigma1}
        return out

    def _exact_parameters(self) -> dict[str, str]:
        out = {"sigma_sq_exact": fraction_text(self.sigma_sq_exact)}
        if self.sigma1_sq_exact is not None:
            out["sigma1_sq_exact"] = fraction_text(self.sigma1_sq_exact)
        return out

    def summary(self) -> dict[str, Any]:
        out = super().summary()
        out["sampling_rate_exact"] = fraction_text(self.sampling_rate)
        out["privacy_unit"] = self.privacy_unit
        out["sensitivity"] = (
            "one record enters the K nearest of its sample and pushes one out (ℓ1 2, ℓ2 √2, max count 1); "
            + ("each query a Poisson-subsampled Gaussian at the exact rate drawn" if self.privacy_unit == "record"
               else "label privacy: a changed label keeps its coin, no amplification claimed")
        )  # fmt: skip
        out["data_dependent"] = "none: no derivation with a source covers PATE's data-dependent ε under subsampling"
        return out


class PrivateKNNReleaser:
    """Private-kNN with its neighbour index, its coins and noise, and its one ledger spend.

    ``release(queries)`` takes the queries' features (public: the pool's, or under label privacy the
    inputs), draws each query's Poisson sample (fresh coins, from the aggregator's secure source or the
    seeded ``generator``), counts the K nearest sampled records' labels and releases them with the
    aggregator's noise. Coins and noise are drawn inside the call, so votes are never reused across
    queries or releases. The spend and replay rules are those of every aggregator
    (:class:`~pate_stab.aggregation.base.LedgerRelease`).
    """

    def __init__(
        self,
        aggregator: PrivateKNN,
        neighbours: NeighbourIndex,
        *,
        generator: torch.Generator | None = None,
        ledger: PrivacyLedger | None = None,
        spend_id: str | None = None,
        num_teachers: int | None = None,
    ) -> None:
        if not isinstance(aggregator, PrivateKNN):
            raise TypeError(f"aggregator must be PrivateKNN, got {type(aggregator).__name__}")
        if not isinstance(neighbours, NeighbourIndex):
            raise TypeError(f"neighbours must be a NeighbourIndex, got {type(neighbours).__name__}")
        k = check_num_teachers(num_teachers)
        if k is not None and k != aggregator.num_neighbours:
            raise ValueError(f"num_teachers={k} differs from the aggregator's K={aggregator.num_neighbours}")
        self.aggregator = aggregator
        self.neighbours = neighbours
        self.mechanism = aggregator.name
        self.noise = aggregator.noise
        self._generator = generator if self.noise == "seeded" else None
        if self.noise == "seeded" and generator is None:
            raise TypeError("Private-kNN with noise='seeded' needs a generator")
        counters = ("queries_seen", "answered", "abstained")
        self._spend = LedgerRelease(
            ledger=ledger,
            spend_id=spend_id,
            mechanism=aggregator.name,
            epsilon=aggregator.certified_epsilon,
            delta=aggregator.certified_delta,
            event=aggregator.event(),
            metadata={k: v for k, v in aggregator.summary().items() if k not in counters},
            num_queries=aggregator.num_queries,
        )

    def bind_ledger(self, ledger: PrivacyLedger, *, spend_id: str) -> None:
        self._spend.bind(ledger, spend_id)

    @property
    def halted(self) -> bool:
        return False

    @property
    def queries_seen(self) -> int:
        return self.aggregator.queries_seen

    def _coins(self, b: int) -> torch.Tensor:
        agg = self.aggregator
        return draw_coins(b, self.neighbours.size, agg.sampling_rate, source=agg._source, generator=self._generator)

    def release(self, queries: Any, *, query_ids: torch.Tensor | None = None) -> ReleaseResult:
        """Query features (m, d) → labels (m,), −1 for ⊥ (with the threshold); status 1 answered, 0 ⊥."""
        queries = check_tensor("queries", queries, ndim=2)
        agg = self.aggregator

        def draw() -> tuple[ReleaseResult, dict[str, Any]]:
            counts = self.neighbours.histograms(queries, self._coins, num_neighbours=agg.num_neighbours)
            labels = agg.release(counts, generator=self._generator)
            status = (labels != ABSTAIN).to(torch.int8)
            return ReleaseResult(labels, status), {"queries_seen": agg.queries_seen, "answered": agg.answered}

        result, state, replayed = self._spend.run(queries, draw, query_ids=query_ids)
        if replayed:
            agg.queries_seen, agg.answered = int(state["queries_seen"]), int(state["answered"])
        return result

    def summary(self) -> dict[str, Any]:
        return {
            **self.aggregator.summary(),
            "halted": False,
            "replayed_calls": self._spend.replayed_calls,
            "spend_id": self._spend.spend_id if self._spend.ledger is not None else None,
        }
