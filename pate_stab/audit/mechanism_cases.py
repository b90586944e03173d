"""The package's mechanisms as :func:`pate_stab.audit.harness.dp_test` cases, and a table of results.

Each :class:`~pate_stab.audit.harness.MechanismCase` names one correct mechanism of the package,
a pair of neighbouring inputs chosen so that its privacy loss is close to the claim, the claimed
(ε, δ), and how to featurize its outputs. :func:`audit_mechanisms` runs
:func:`~pate_stab.audit.harness.dp_test` on each and returns one :class:`AuditRow` per case
(claimed ε, samples used, lower bound found). A correct claim is refuted with probability at
most α per case.

Each case runs a sampler of :mod:`pate_stab.audit.mechanism_samplers` (the mechanism's
computation, vectorised over runs where it is an online object such as a releaser or the sparse
vector); this module chooses the inputs, the claims and the relations, and runs the table.

Every mechanism of the package that releases something computed from private data, and its
statistical test (``dp_test`` unless said otherwise):

* privacy: Laplace mechanism, sparse vector (T = 1, 2), stability test (BTT18 Alg 2), discrete
  Laplace, discrete Gaussian, snapping, integer sparse vector, randomised response with a prior
  (Ghazi et al. 2021, Alg 2; label DP), ALIBI's release (Malek et al. 2021) — :func:`mechanism_cases`;
  noise reduction (``tests/privacy/mechanisms/test_noise_reduction.py``); InteractiveAboveThreshold's
  ex-post loss (the sparse vector with T = 1, ``tests/erm/test_accuracy_first.py``, per output cell);
  Gaussian / l2-Laplace noise laws (KS).
* aggregation: hard and soft releasers in both noise modes at real calibrations
  (:func:`pate_stab.audit.releaser_cases.releaser_cases`); LNMax, GNMax, Confident-GNMax with
  seeded and secure noise (:func:`mechanism_cases`, ``tests/aggregation/test_baselines.py``,
  ``tests/aggregation/test_baselines_secure.py``); GNMax on a votes file's teacher predictions with
  the declared class count, on a pair where one teacher casts the only vote for a class; Private-kNN's
  noisy neighbour votes on a fresh Poisson sample (:data:`KNN_AUDIT`).
* erm: output perturbation (Chaudhuri et al. Alg 1) and rls-out (Wu et al. Alg 4), objective
  perturbation (both budget branches), Ligett et al.'s covariance and logistic output
  perturbation, the exponential mechanism, Chaudhuri & Vinterbo's noisy selection and private
  histogram (:func:`pate_stab.audit.erm_cases.erm_mechanism_cases`).
* Composites of these, tested through their parts (their composition is accounting, not a new
  release): private validation (stability_validate, alpha_split, data_split, random_choice),
  Wu et al.'s private tuning, the private histogram density with bin choice, cov_nr / output_nr
  (noise reduction + IAT), the doubling method (fresh hypotheses + Laplace tests), the
  transfer pipeline (releaser + post-processing; one-run audit in :mod:`pate_stab.audit.transfer_canary`)
  and PrivateLinearHead (output / objective perturbation per class). ``control_choice`` is
  documented as not private.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

import torch

from pate_stab._checks import check_int, check_probability
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.private_knn import PrivateKNN
from pate_stab.audit.erm_cases import erm_mechanism_cases, erm_mutation_cases
from pate_stab.audit.harness import Mechanism, MechanismCase, dp_test
from pate_stab.audit.mechanism_samplers import (
    aggregator,
    alibi,
    alibi_difference,
    as_float,
    class_count_from_votes,
    discrete_laplace_scale,
    hard_releaser,
    huber_output_perturbation,
    knn_pair,
    laplace_count,
    laplace_scale,
    noisy_max,
    private_knn_counts,
    rr_with_prior_sampler,
    secure_aggregator,
    secure_discrete_gaussian,
    secure_discrete_laplace,
    secure_snapping,
    secure_sparse_vector,
    sparse_vector,
    stability_test,
    stability_test_noise,
    svt_query_scale,
    votes_file_aggregator,
)
from pate_stab.privacy.accounting.composition import accountant_epsilon
from pate_stab.privacy.accounting.events import GaussianEvent
from pate_stab.privacy.noise.secure import snapping_epsilon

__all__ = [
    "AuditRow",
    "CaseRow",
    "MECHANISM_TABLE",
    "MUTATION_TABLE",
    "mechanism_cases",
    "mutation_cases",
    "audit_mechanisms",
]


@dataclass(frozen=True)
class AuditRow:
    name: str
    claimed_epsilon: float
    claimed_delta: float
    num_samples: int
    epsilon_lower_bound: float
    violates: bool
    event: str


@dataclass(frozen=True)
class CaseRow:
    """One row of a case table, made into a :class:`~pate_stab.audit.harness.MechanismCase` when the
    table is read (:meth:`case`): the sampler and the claim are built then, so that importing the
    table runs no calibration."""

    name: str
    sampler: Callable[[], Mechanism]
    input_a: Any
    input_b: Any
    claim: float | Callable[[], float]
    relation: str
    delta: float = 0.0
    featurize: Callable[[torch.Tensor], torch.Tensor] | None = None
    sample_factor: float = 1.0

    def case(self) -> MechanismCase:
        claim = self.claim() if callable(self.claim) else self.claim
        return MechanismCase(
            self.name,
            self.sampler(),
            self.input_a,
            self.input_b,
            claim,
            delta=self.delta,
            featurize=self.featurize,
            relation=self.relation,
            sample_factor=self.sample_factor,
        )


# --------------------------------------------------------------------------- what the cases share


def discrete_gaussian_claim(sigma: float, delta: float) -> float:
    """ε at δ of a sensitivity-1 integer query plus N_Z(0, σ²): the RDP accountant on
    ``GaussianDpEvent(σ)``, valid for the discrete Gaussian (CKS20 Prop 5)."""
    return accountant_epsilon(GaussianEvent(sigma=sigma), delta=delta, accountant="rdp")


def only_vote_for_a_class() -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher predictions (k = 3, one query) where one teacher casts the only vote for class 9, and
    its neighbour where that teacher votes 8 (DESIGN.md fact 11): the class count must be declared,
    since read from the votes it is 10 on one side and 9 on the other."""
    return torch.tensor([[0], [3], [9]]), torch.tensor([[0], [3], [8]])


KNN_AUDIT = {"sampling_rate": 0.5, "accounted_rate": 0.125, "delta": 1e-3}
"""Private-kNN's audit: K = 1, one query calibrated to (1, 1e-5) at γ = 0.5, its claim checked at δ = 1e-3
(the Gaussian's privacy curve is witnessed by events of probability well above δ there); the broken
variant accounts at γ/4 while drawing γ."""
KNN_RELATION = "one record added (add/remove); the other records' coins are drawn alike"

RR_PRIOR = [0.5, 0.3, 0.1, 0.05, 0.05]
"""The prior of the RR-with-prior cases: at ε = 1, k* = 2 and the set is {0, 1}."""

DELTA = 1e-5
"""The δ of the (ε, δ) cases."""
ONE_VOTE = "one teacher's vote moves"
EACH_QUERY = "each query value moves by 1"
LABEL_DP = "one example's label replaced (label DP)"
ONLY_NINE = only_vote_for_a_class()
KNN_PAIR = knn_pair()
# sparse vector: in b the eight leading queries are 1 lower (harder to pass) and the last is
# 1 higher (harder to fail); the pattern ⊤^8 ⊥ then has a loss close to the claimed 2/λ.
SV_A, SV_B = [0.0] * 8 + [0.0], [-1.0] * 8 + [1.0]


@cache
def knn(rate: float) -> PrivateKNN:
    """Private-kNN calibrated for the audit (:data:`KNN_AUDIT`) at sampling rate ``rate``."""
    return PrivateKNN.calibrate(epsilon=1.0, delta=1e-5, num_queries=1, sampling_rate=rate, num_neighbours=1,
                                noise="seeded", accountant="pld")  # fmt: skip


@cache
def seeded_gnmax() -> GNMax:
    return GNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1, noise="seeded")


@cache
def secure_gnmax() -> GNMax:
    return GNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1)


@cache
def secure_confident_gnmax() -> ConfidentGNMax:
    return ConfidentGNMax.calibrate(epsilon=1.0, delta=DELTA, num_queries=1, threshold=10)


def _knn_claim(rate: float) -> Callable[[], float]:
    return lambda: knn(rate).single_query_epsilon(KNN_AUDIT["delta"])


# --------------------------------------------------------------------------- the cases

MECHANISM_TABLE: tuple[CaseRow, ...] = (
    CaseRow("Private-kNN seeded (γ=0.5, K=1, one query)", lambda: private_knn_counts(knn(KNN_AUDIT["sampling_rate"])),
            *KNN_PAIR, _knn_claim(KNN_AUDIT["sampling_rate"]), KNN_RELATION, delta=KNN_AUDIT["delta"]),
    CaseRow("laplace (noise.laplace, b = 1/ε)", lambda: laplace_count(1.0), 0.0, 1.0, 1.0, "counting query 0 vs 1"),
    CaseRow("sparse vector T=1 (λ=2)", lambda: sparse_vector(2.0, 1), SV_A, SV_B, 1.0, EACH_QUERY),
    CaseRow("sparse vector T=2 (λ=2)", lambda: sparse_vector(2.0, 2), SV_A + [0.0] * 3, SV_B + [1.0] * 3, 2.0,
            EACH_QUERY),
    CaseRow("stability test (BTT18 Alg 2, ε=1, Γ=3)", lambda: stability_test(1.0, 3.0), [[4, 0, 0]], [[3, 1, 0]],
            1.0, ONE_VOTE),
    CaseRow("hard releaser (Alg 4, λ=2, w=2, T=1)", lambda: hard_releaser(2.0, 2.0, 1),
            [[8, 2, 0], [7, 0, 4], [6, 1, 0], [8, 0, 1]], [[7, 3, 0], [8, 0, 3], [5, 1, 1], [7, 1, 1]], 1.0, ONE_VOTE),
    CaseRow("LNMax seeded (b=2, one query)",
            lambda: aggregator(LNMax(noise_scale=2.0, num_queries=1, delta=DELTA, noise="seeded")),
            torch.tensor([4, 3, 0]), torch.tensor([3, 4, 0]),
            lambda: LNMax(noise_scale=2.0, num_queries=1, delta=DELTA, noise="seeded").per_query_pure_epsilon,
            ONE_VOTE),
    CaseRow("GNMax seeded (one query)", lambda: aggregator(seeded_gnmax()), torch.tensor([1, 0, 0]),
            torch.tensor([0, 1, 0]), lambda: seeded_gnmax().single_query_epsilon(DELTA), ONE_VOTE, delta=DELTA),
    CaseRow("GNMax on votes, C=10 declared (only vote for 9)", lambda: votes_file_aggregator(seeded_gnmax(), 10),
            *ONLY_NINE, lambda: seeded_gnmax().single_query_epsilon(DELTA),
            "the one teacher that votes 9 votes 8 instead", delta=DELTA),
    CaseRow("LNMax secure (DLap a=1/2, one query)",
            lambda: secure_aggregator(lambda src: LNMax(noise_scale=2.0, num_queries=1, delta=DELTA, source=src)),
            torch.tensor([4, 3, 0]), torch.tensor([3, 4, 0]),
            lambda: LNMax(noise_scale=2.0, num_queries=1, delta=DELTA).per_query_pure_epsilon, ONE_VOTE,
            sample_factor=0.5),
    CaseRow("GNMax secure (discrete Gaussian, one query)",
            lambda: secure_aggregator(
                lambda src: GNMax(sigma=secure_gnmax().sigma, num_queries=1, delta=DELTA, source=src)
            ),
            torch.tensor([1, 0, 0]), torch.tensor([0, 1, 0]), lambda: secure_gnmax().single_query_epsilon(DELTA),
            ONE_VOTE, delta=DELTA, sample_factor=0.5),
    CaseRow("Confident-GNMax secure (one query)",
            lambda: secure_aggregator(
                lambda src: ConfidentGNMax(threshold=10, sigma1=secure_confident_gnmax().sigma1,
                                           sigma2=secure_confident_gnmax().sigma2, num_queries=1, delta=DELTA,
                                           source=src)
            ),
            torch.tensor([10, 9, 0]), torch.tensor([9, 9, 1]),
            lambda: secure_confident_gnmax().single_query_epsilon(DELTA), ONE_VOTE, delta=DELTA, sample_factor=0.5),
    CaseRow("secure discrete Gaussian (σ=1.5)", lambda: secure_discrete_gaussian(1.5), 0, 1,
            lambda: discrete_gaussian_claim(1.5, DELTA), "integer counting query 0 vs 1", delta=DELTA),
    CaseRow("output perturbation (Huber hinge, n=20, λ=10)", lambda: huber_output_perturbation(1.0), "D", "D'", 1.0,
            "replace one record (label flip)", featurize=lambda t: t[:, 0]),
    CaseRow("secure discrete Laplace (scale 1)", lambda: secure_discrete_laplace(1.0), 0, 1, 1.0,
            "integer counting query 0 vs 1", featurize=as_float, sample_factor=0.5),
    CaseRow("secure snapping (λ=1, B=10)", lambda: secure_snapping(1.0, 10.0), 0.0, 1.0,
            lambda: snapping_epsilon(noise_scale=1.0, bound=10.0), "sensitivity-1 query 0 vs 1", sample_factor=0.5),
    CaseRow("secure sparse vector T=1 (λ=2)", lambda: secure_sparse_vector(2, 0), [0] * 8 + [0], [-1] * 8 + [1], 1.0,
            EACH_QUERY, sample_factor=0.5),
    CaseRow("RR-with-prior (Ghazi et al. Alg 2, ε=1, k*=2), both labels in the set",
            lambda: rr_with_prior_sampler(RR_PRIOR, 1.0), 0, 1, 1.0, LABEL_DP),
    CaseRow("RR-with-prior (ε=1, k*=2), one label outside the set", lambda: rr_with_prior_sampler(RR_PRIOR, 1.0),
            0, 4, 1.0, LABEL_DP),
    CaseRow("randomised response, C=10 (LP-1ST's, ε=1)", lambda: rr_with_prior_sampler([0.1] * 10, 1.0), 0, 1, 1.0,
            LABEL_DP),
    CaseRow("ALIBI release (Malek et al. 2021, exact discrete Laplace, ε=1, C=3)", lambda: alibi(1.0, 3), 0, 1, 1.0,
            LABEL_DP, featurize=alibi_difference, sample_factor=0.5),
)  # fmt: skip
"""Every correct mechanism of the package (its ERM cases aside) with a tight neighbouring pair and its claim."""


def mechanism_cases() -> list[MechanismCase]:
    """Every correct mechanism of the package with a tight neighbouring pair and its claim
    (:data:`MECHANISM_TABLE`, then :func:`pate_stab.audit.erm_cases.erm_mechanism_cases`).

    The releasers' cases are separate (:func:`pate_stab.audit.releaser_cases.releaser_cases`).
    """
    return [row.case() for row in MECHANISM_TABLE] + erm_mechanism_cases()


# --------------------------------------------------------------------------- broken variants

MUTATION_TABLE: tuple[CaseRow, ...] = (
    CaseRow("Private-kNN accounted at γ/4 (drawn γ=0.5)",
            lambda: private_knn_counts(knn(KNN_AUDIT["accounted_rate"]), draw_rate=KNN_AUDIT["sampling_rate"]),
            *KNN_PAIR, _knn_claim(KNN_AUDIT["accounted_rate"]), KNN_RELATION, delta=KNN_AUDIT["delta"]),
    CaseRow("Private-kNN noise for ℓ2 sensitivity 1 not √2",
            lambda: private_knn_counts(knn(KNN_AUDIT["sampling_rate"]),
                                       sigma=knn(KNN_AUDIT["sampling_rate"]).sigma / math.sqrt(2.0)),
            *KNN_PAIR, _knn_claim(KNN_AUDIT["sampling_rate"]), KNN_RELATION, delta=KNN_AUDIT["delta"]),
    CaseRow("GNMax on votes, C = largest label + 1 (only vote for 9)", lambda: class_count_from_votes(seeded_gnmax()),
            *ONLY_NINE, lambda: seeded_gnmax().single_query_epsilon(DELTA),
            "the one teacher that votes 9 votes 8 instead", delta=DELTA),
    CaseRow("sparse vector, query noise Lap(λ) not Lap(2λ) (λ=1)", lambda: svt_query_scale(1.0, 1.0), [0.0] * 9,
            [-1.0] * 8 + [1.0], 2.0, EACH_QUERY),
    CaseRow("report noisy max returns the value (K=5, ε=1)", lambda: noisy_max(1.0, return_value=True), [1.0] * 5,
            [0.0] * 5, 1.0, "counting queries, one record added"),
    CaseRow("Laplace scale ε not 1/ε (ε=0.5)", lambda: laplace_scale(0.5), 0.0, 1.0, 0.5, "counting query 0 vs 1"),
    CaseRow("discrete Laplace scale ε not 1/ε (ε=0.5)", lambda: discrete_laplace_scale(0.5), 0, 1, 0.5,
            "integer counting query 0 vs 1", sample_factor=0.5),
    CaseRow("stability test noise Lap(ε) not Lap(1/ε) (ε=0.5)", lambda: stability_test_noise(0.5, 1.0), [[4, 0, 0]],
            [[3, 1, 0]], 0.5, ONE_VOTE),
    CaseRow("discrete Gaussian σ halved (claim of σ=1.5)", lambda: secure_discrete_gaussian(0.75), 0, 1,
            lambda: discrete_gaussian_claim(1.5, DELTA), "integer counting query 0 vs 1", delta=DELTA),
    CaseRow("RR-with-prior keeps y with e^2ε's probability (claim ε=1)",
            lambda: rr_with_prior_sampler(RR_PRIOR, 1.0, keep_epsilon=2.0), 0, 1, 1.0, LABEL_DP),
    CaseRow("RR-with-prior, top-k set that reads the true label (ε=1)",
            lambda: rr_with_prior_sampler(RR_PRIOR, 1.0, label_in_set=True), 0, 4, 1.0, LABEL_DP),
    CaseRow("ALIBI noise for sensitivity M not 2M (claim ε=1)", lambda: alibi(1.0, 3, scale_epsilon=2.0), 0, 1, 1.0,
            LABEL_DP, featurize=alibi_difference, sample_factor=0.5),
)  # fmt: skip
"""Deliberately broken mechanisms with the claim their correct version makes (:func:`mutation_cases`)."""


def mutation_cases() -> list[MechanismCase]:
    """Deliberately broken mechanisms with the claim their correct version makes (all must be flagged):
    :data:`MUTATION_TABLE`, then :func:`pate_stab.audit.erm_cases.erm_mutation_cases`.

    * sparse vector with query noise Lap(λ) instead of Lap(2λ) (Lyu, Su & Li 2017's wrong-scale
      variants), claim 2/λ: the true loss is 3/λ. The pair: eight queries that pass, then one that
      fails; in b the passing ones are 1 lower and the failing one 1 higher, so the threshold
      shift (1/λ) and a relative move of 2 of the failing query (2/λ with Lap(λ)) add up.
    * report noisy max releasing the noisy maximum value (Ding et al. 2018): over K counting
      queries that all grow by 1, P[max <= 0] moves by e^{Kε}.
    * Laplace noise of scale ε instead of 1/ε (float sampler, exact integer sampler, and the
      stability test of BTT18 Alg 2).
    * the exact discrete Gaussian with σ/2 under the claim of σ (RDP accounting, CKS20).
    * RR-with-prior (Ghazi et al. 2021, Alg 2) keeping the true label with the probability of 2ε, and
      with a top-k set that takes in the true label when the prior leaves it out; ALIBI with the noise
      of sensitivity M (one coordinate) instead of 2M.
    * GNMax on a votes file with C read from the votes (largest label + 1) instead of declared: one
      teacher's only vote for class 9 makes 9 an output on one neighbour and never on the other.
    * Private-kNN accounted at a sampling rate 4 times smaller than the one drawn, and Private-kNN with
      noise calibrated to ℓ2 sensitivity 1 instead of √2 (σ/√2), each under its accounting's claim.
    * the ERM, selection and density mechanisms with one constant wrong
      (:func:`pate_stab.audit.erm_cases.erm_mutation_cases`).
    """
    return [row.case() for row in MUTATION_TABLE] + erm_mutation_cases()


def audit_mechanisms(
    cases: list[MechanismCase] | None = None,
    *,
    num_samples: int = 200_000,
    alpha: float = 1e-6,
    generator: torch.Generator,
) -> list[AuditRow]:
    """Run :func:`dp_test` on each case; ``num_samples`` is scaled by the case's ``sample_factor``."""
    num_samples = check_int("num_samples", num_samples, minimum=100)
    alpha = check_probability("alpha", alpha, open_interval=True)
    rows = []
    for case in cases if cases is not None else mechanism_cases():
        n = max(100, int(num_samples * case.sample_factor))
        res = dp_test(
            case.mechanism,
            case.input_a,
            case.input_b,
            epsilon=case.epsilon,
            delta=case.delta,
            num_samples=n,
            alpha=alpha,
            generator=generator,
            featurize=case.featurize,
        )
        rows.append(
            AuditRow(
                case.name,
                case.epsilon,
                case.delta,
                n,
                res.epsilon_lower_bound,
                res.violates,
                f"{res.event} ({res.direction})",
            )
        )
    return rows
