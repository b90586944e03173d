"""The package's mechanisms as :func:`pate_stab.audit.harness.dp_test` cases, and a table of results.

Each :class:`~pate_stab.audit.harness.MechanismCase` names one correct mechanism of the package,
a pair of neighbouring inputs chosen so that its privacy loss is close to the claim, the claimed
(ε, δ), and how to featurize its outputs. :func:`audit_mechanisms` runs
:func:`~pate_stab.audit.harness.dp_test` on each and returns one :class:`AuditRow` per case
(claimed ε, samples used, lower bound found). A correct claim is refuted with probability at
most α per case.

Where a mechanism is an online object that cannot be run 10^5 times cheaply (the releasers, the
sparse vector), the case runs its computation vectorised over runs with the library's own parts
(:func:`~pate_stab.privacy.sparse_vector.above_threshold_scan`,
:func:`~pate_stab.aggregation.votes.distance_to_instability`, the noise samplers); the tests of
those modules check that the vectorised and online forms agree.

Every mechanism of the package that releases something computed from private data, and its
statistical test (``dp_test`` unless said otherwise):

* privacy: Laplace mechanism, sparse vector (T = 1, 2), stability test (BTT18 Alg 2), discrete
  Laplace, discrete Gaussian, snapping, integer sparse vector — :func:`mechanism_cases`; noise reduction
  (``tests/privacy/test_noise_reduction.py``); InteractiveAboveThreshold's ex-post loss
  (``tests/erm/test_accuracy_first.py``, per output cell); Gaussian / l2-Laplace noise laws (KS).
* aggregation: hard and soft releasers in both noise modes at real calibrations
  (:func:`pate_stab.audit.releaser_cases.releaser_cases`); LNMax, GNMax, Confident-GNMax with
  seeded and secure noise (:func:`mechanism_cases`, ``tests/aggregation/test_baselines.py``,
  ``tests/aggregation/test_baselines_secure.py``).
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

from dataclasses import dataclass
from typing import Any

import torch
from dp_accounting import dp_event

from pate_stab._validation import check_int, check_probability
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.aggregation.pate_accounting import accountant_epsilon
from pate_stab.aggregation.votes import distance_to_instability, top_label
from pate_stab.audit.erm_cases import erm_mechanism_cases, erm_mutation_cases
from pate_stab.audit.harness import Mechanism, MechanismCase, dp_test
from pate_stab.erm.losses import HuberHingeLoss
from pate_stab.erm.output_perturbation import l2_laplace_vectors, output_perturbation, output_perturbation_sensitivity
from pate_stab.erm.solver import solve_erm
from pate_stab.privacy.noise import laplace
from pate_stab.privacy.secure_noise import (
    SeededRandomSource,
    discrete_gaussian,
    discrete_laplace,
    snapping,
    snapping_epsilon,
)
from pate_stab.privacy.sparse_vector import above_threshold_scan

__all__ = ["AuditRow", "mechanism_cases", "mutation_cases", "audit_mechanisms"]


@dataclass(frozen=True)
class AuditRow:
    name: str
    claimed_epsilon: float
    claimed_delta: float
    num_samples: int
    epsilon_lower_bound: float
    violates: bool
    event: str


# --------------------------------------------------------------------------- the cases


def _laplace_count(epsilon: float) -> Mechanism:
    def mech(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
        return value + laplace(1.0 / epsilon, n, generator=gen)

    return mech


def _sparse_vector(noise_scale: float, max_unstable: int, threshold: float = 0.0) -> Mechanism:
    def mech(values: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        vals = torch.as_tensor(values, dtype=torch.float64).expand(n, -1)
        m = vals.shape[1]
        qn = laplace(2 * noise_scale, (n, m), generator=gen)
        tn = laplace(noise_scale, (n, max_unstable), generator=gen)
        return above_threshold_scan(vals, qn, tn, threshold=threshold, max_failures=max_unstable).outputs

    return mech


def _stability_test(epsilon: float, threshold: float) -> Mechanism:
    """BTT18 Alg 2 on one vote histogram: the argmax if dist + Lap(1/ε) > Γ, else ⊥ (code 0)."""

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.int64)
        dist = distance_to_instability(c).to(torch.float64)
        passed = dist + laplace(1.0 / epsilon, (n, 1), generator=gen) > threshold
        return torch.where(passed, top_label(c) + 1, 0)[:, 0]

    return mech


def _hard_releaser(noise_scale: float, threshold: float, max_unstable: int) -> Mechanism:
    """StabilityReleaser's computation: vote histograms → argmax or ⊥ through sparse vector."""
    scan = _sparse_vector(noise_scale, max_unstable, threshold)

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.int64)
        codes = scan(distance_to_instability(c).to(torch.float64), n, gen)
        labels = top_label(c).expand(n, -1)
        return torch.where(codes == 1, labels, torch.full_like(labels, -1)) + 1

    return mech


def _aggregator(agg: Any) -> Mechanism:
    return lambda counts, n, gen: agg.sample(counts, n, generator=gen)


def _secure_aggregator(make: Any) -> Mechanism:
    """A secure aggregator built per call on a source seeded from ``gen`` (reproducible audits)."""

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        source = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=gen)))
        return make(source).sample(counts, n)

    return mech


def _secure_discrete_gaussian(sigma: float) -> Mechanism:
    """A counting query plus N_Z(0, σ'²) (CKS20 Alg 3), as floats so half-line events are tried."""

    def mech(value: int, n: int, gen: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        return (value + discrete_gaussian(sigma, n, source=SeededRandomSource(seed))).to(torch.float64)

    return mech


def discrete_gaussian_claim(sigma: float, delta: float) -> float:
    """ε at δ of a sensitivity-1 integer query plus N_Z(0, σ²): the RDP accountant on
    ``GaussianDpEvent(σ)``, valid for the discrete Gaussian (CKS20 Prop 5)."""
    return accountant_epsilon(dp_event.GaussianDpEvent(sigma), delta, "rdp")


def _output_perturbation(epsilon: float) -> Mechanism:
    """Output perturbation (Chaudhuri et al. 2011 Alg 1) on worst-case 1-D replace-one neighbours."""
    n, lam = 20, 10.0
    x = torch.ones((n, 1), dtype=torch.float64)
    y = torch.ones(n, dtype=torch.float64)
    y_flip = y.clone()
    y_flip[0] = -1.0
    sens = output_perturbation_sensitivity(lipschitz=1.0, lam=lam, n=n)
    loss = HuberHingeLoss()
    theta = {
        "D": solve_erm(x, y, loss=loss, lam=lam, tol=1e-6 * sens).weights,
        "D'": solve_erm(x, y_flip, loss=loss, lam=lam, tol=1e-6 * sens).weights,
    }
    # the noise scale the public function uses on this data (it covers the solver's tolerance)
    scale = output_perturbation(x, y, epsilon=epsilon, lam=lam, loss=loss, generator=torch.Generator()).noise_scale

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        return theta[key] + l2_laplace_vectors(scale, 1, num_samples=num, generator=gen)

    return mech


def _secure_discrete_laplace(scale: float) -> Mechanism:
    def mech(value: int, n: int, gen: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        return value + discrete_laplace(scale, n, source=SeededRandomSource(seed))

    return mech


def _secure_snapping(noise_scale: float, bound: float) -> Mechanism:
    def mech(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
        seed = int(torch.randint(0, 2**62, (1,), generator=gen))
        return snapping(value, noise_scale=noise_scale, bound=bound, size=n, source=SeededRandomSource(seed))

    return mech


def _secure_sparse_vector(noise_scale: int, threshold: int) -> Mechanism:
    """AboveThreshold segment (T = 1) with exact discrete Laplace noise, vectorised over runs."""

    def mech(values: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        src = SeededRandomSource(int(torch.randint(0, 2**62, (1,), generator=gen)))
        vals = torch.as_tensor(values, dtype=torch.int64)
        m = vals.numel()
        level = threshold + discrete_laplace(noise_scale, n, source=src)  # (n,)
        noisy = vals + discrete_laplace(2 * noise_scale, n * m, source=src).reshape(n, m)
        fails = noisy <= level[:, None]
        first = torch.where(fails.any(1), fails.to(torch.int8).argmax(1), torch.tensor(m))
        return first  # the output pattern is determined by the first ⊥

    return mech


def _as_float(t: torch.Tensor) -> torch.Tensor:
    """Integer outputs as floats, so that dp_test also tries half-line events {X <= c}."""
    return t.to(torch.float64)


def mechanism_cases() -> list[MechanismCase]:
    """Every correct mechanism of the package with a tight neighbouring pair and its claim.

    The releasers' cases are separate (:func:`pate_stab.audit.releaser_cases.releaser_cases`).
    """
    delta = 1e-5
    gnmax = GNMax.calibrate(epsilon=1.0, delta=delta, num_queries=1, noise="seeded")
    lnmax = LNMax(noise_scale=2.0, num_queries=1, delta=delta, noise="seeded")
    secure_gnmax = GNMax.calibrate(epsilon=1.0, delta=delta, num_queries=1)
    secure_lnmax = LNMax(noise_scale=2.0, num_queries=1, delta=delta)
    secure_confident = ConfidentGNMax.calibrate(epsilon=1.0, delta=delta, num_queries=1, threshold=10)
    one_vote = "one teacher's vote moves"
    # sparse vector: in b the eight leading queries are 1 lower (harder to pass) and the last is
    # 1 higher (harder to fail); the pattern ⊤^8 ⊥ then has a loss close to the claimed 2/λ.
    sv_a = [0.0] * 8 + [0.0]
    sv_b = [-1.0] * 8 + [1.0]
    hard_a = [[8, 2, 0], [7, 0, 4], [6, 1, 0], [8, 0, 1]]
    hard_b = [[7, 3, 0], [8, 0, 3], [5, 1, 1], [7, 1, 1]]
    return [
        MechanismCase(
            "laplace (noise.laplace, b = 1/ε)", _laplace_count(1.0), 0.0, 1.0, 1.0, relation="counting query 0 vs 1"
        ),
        MechanismCase(
            "sparse vector T=1 (λ=2)", _sparse_vector(2.0, 1), sv_a, sv_b, 1.0, relation="each query value moves by 1"
        ),
        MechanismCase(
            "sparse vector T=2 (λ=2)",
            _sparse_vector(2.0, 2),
            sv_a + [0.0] * 3,
            sv_b + [1.0] * 3,
            2.0,
            relation="each query value moves by 1",
        ),
        MechanismCase(
            "stability test (BTT18 Alg 2, ε=1, Γ=3)",
            _stability_test(1.0, 3.0),
            [[4, 0, 0]],
            [[3, 1, 0]],
            1.0,
            relation=one_vote,
        ),
        MechanismCase(
            "hard releaser (Alg 4, λ=2, w=2, T=1)", _hard_releaser(2.0, 2.0, 1), hard_a, hard_b, 1.0, relation=one_vote
        ),
        MechanismCase(
            "LNMax seeded (b=2, one query)",
            _aggregator(lnmax),
            torch.tensor([4, 3, 0]),
            torch.tensor([3, 4, 0]),
            lnmax.per_query_pure_epsilon,
            relation=one_vote,
        ),
        MechanismCase(
            "GNMax seeded (one query)",
            _aggregator(gnmax),
            torch.tensor([1, 0, 0]),
            torch.tensor([0, 1, 0]),
            gnmax.single_query_epsilon(delta),
            delta=delta,
            relation=one_vote,
        ),
        MechanismCase(
            "LNMax secure (DLap a=1/2, one query)",
            _secure_aggregator(lambda src: LNMax(noise_scale=2.0, num_queries=1, delta=delta, source=src)),
            torch.tensor([4, 3, 0]),
            torch.tensor([3, 4, 0]),
            secure_lnmax.per_query_pure_epsilon,
            relation=one_vote,
            sample_factor=0.5,
        ),
        MechanismCase(
            "GNMax secure (discrete Gaussian, one query)",
            _secure_aggregator(lambda src: GNMax(sigma=secure_gnmax.sigma, num_queries=1, delta=delta, source=src)),
            torch.tensor([1, 0, 0]),
            torch.tensor([0, 1, 0]),
            secure_gnmax.single_query_epsilon(delta),
            delta=delta,
            relation=one_vote,
            sample_factor=0.5,
        ),
        MechanismCase(
            "Confident-GNMax secure (one query)",
            _secure_aggregator(
                lambda src: ConfidentGNMax(
                    threshold=10,
                    sigma1=secure_confident.sigma1,
                    sigma2=secure_confident.sigma2,
                    num_queries=1,
                    delta=delta,
                    source=src,
                )
            ),
            torch.tensor([10, 9, 0]),
            torch.tensor([9, 9, 1]),
            secure_confident.single_query_epsilon(delta),
            delta=delta,
            relation=one_vote,
            sample_factor=0.5,
        ),
        MechanismCase(
            "secure discrete Gaussian (σ=1.5)",
            _secure_discrete_gaussian(1.5),
            0,
            1,
            discrete_gaussian_claim(1.5, delta),
            delta=delta,
            relation="integer counting query 0 vs 1",
        ),
        MechanismCase(
            "output perturbation (Huber hinge, n=20, λ=10)",
            _output_perturbation(1.0),
            "D",
            "D'",
            1.0,
            featurize=lambda t: t[:, 0],
            relation="replace one record (label flip)",
        ),
        MechanismCase(
            "secure discrete Laplace (scale 1)",
            _secure_discrete_laplace(1.0),
            0,
            1,
            1.0,
            featurize=_as_float,
            relation="integer counting query 0 vs 1",
            sample_factor=0.5,
        ),
        MechanismCase(
            "secure snapping (λ=1, B=10)",
            _secure_snapping(1.0, 10.0),
            0.0,
            1.0,
            snapping_epsilon(noise_scale=1.0, bound=10.0),
            relation="sensitivity-1 query 0 vs 1",
            sample_factor=0.5,
        ),
        MechanismCase(
            "secure sparse vector T=1 (λ=2)",
            _secure_sparse_vector(2, 0),
            [0] * 8 + [0],
            [-1] * 8 + [1],
            1.0,
            relation="each query value moves by 1",
            sample_factor=0.5,
        ),
        *erm_mechanism_cases(),
    ]


# --------------------------------------------------------------------------- broken variants


def _svt_query_scale(noise_scale: float, query_scale: float) -> Mechanism:
    def mech(values: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        vals = torch.as_tensor(values, dtype=torch.float64).expand(n, -1)
        qn = laplace(query_scale, vals.shape, generator=gen)
        tn = laplace(noise_scale, (n, 1), generator=gen)
        return above_threshold_scan(vals, qn, tn, threshold=0.0, max_failures=1).outputs

    return mech


def _noisy_max(epsilon: float, *, return_value: bool) -> Mechanism:
    """Report noisy max over counting queries with Lap(1/ε) (Dwork & Roth 2014, Claim 3.9)."""

    def mech(counts: Any, n: int, gen: torch.Generator) -> torch.Tensor:
        c = torch.as_tensor(counts, dtype=torch.float64).expand(n, -1)
        noisy = c + laplace(1.0 / epsilon, c.shape, generator=gen)
        return noisy.max(dim=1).values if return_value else noisy.argmax(dim=1)

    return mech


def _laplace_scale(scale: float) -> Mechanism:
    def mech(value: float, n: int, gen: torch.Generator) -> torch.Tensor:
        return value + laplace(scale, n, generator=gen)

    return mech


def _discrete_laplace_scale(scale: float) -> Mechanism:
    inner = _secure_discrete_laplace(scale)
    return lambda value, n, gen: inner(value, n, gen).to(torch.float64)


def _stability_test_noise(noise_scale: float, threshold: float) -> Mechanism:
    """BTT18 Alg 2 with distance noise Lap(noise_scale)."""
    return _stability_test(1.0 / noise_scale, threshold)


def mutation_cases() -> list[MechanismCase]:
    """Deliberately broken mechanisms with the claim their correct version makes (all must be flagged).

    * sparse vector with query noise Lap(λ) instead of Lap(2λ) (Lyu, Su & Li 2017's wrong-scale
      variants), claim 2/λ: the true loss is 3/λ. The pair: eight queries that pass, then one that
      fails; in b the passing ones are 1 lower and the failing one 1 higher, so the threshold
      shift (1/λ) and a relative move of 2 of the failing query (2/λ with Lap(λ)) add up.
    * report noisy max releasing the noisy maximum value (Ding et al. 2018): over K counting
      queries that all grow by 1, P[max <= 0] moves by e^{Kε}.
    * Laplace noise of scale ε instead of 1/ε (float sampler, exact integer sampler, and the
      stability test of BTT18 Alg 2).
    * the exact discrete Gaussian with σ/2 under the claim of σ (RDP accounting, CKS20).
    * the ERM, selection and density mechanisms with one constant wrong
      (:func:`pate_stab.audit.erm_cases.erm_mutation_cases`).
    """
    eps = 0.5
    return [
        MechanismCase(
            "sparse vector, query noise Lap(λ) not Lap(2λ) (λ=1)",
            _svt_query_scale(1.0, 1.0),
            [0.0] * 9,
            [-1.0] * 8 + [1.0],
            2.0,
            relation="each query value moves by 1",
        ),
        MechanismCase(
            "report noisy max returns the value (K=5, ε=1)",
            _noisy_max(1.0, return_value=True),
            [1.0] * 5,
            [0.0] * 5,
            1.0,
            relation="counting queries, one record added",
        ),
        MechanismCase(
            "Laplace scale ε not 1/ε (ε=0.5)", _laplace_scale(eps), 0.0, 1.0, eps, relation="counting query 0 vs 1"
        ),
        MechanismCase(
            "discrete Laplace scale ε not 1/ε (ε=0.5)",
            _discrete_laplace_scale(eps),
            0,
            1,
            eps,
            relation="integer counting query 0 vs 1",
            sample_factor=0.5,
        ),
        MechanismCase(
            "stability test noise Lap(ε) not Lap(1/ε) (ε=0.5)",
            _stability_test_noise(eps, 1.0),
            [[4, 0, 0]],
            [[3, 1, 0]],
            eps,
            relation="one teacher's vote moves",
        ),
        MechanismCase(
            "discrete Gaussian σ halved (claim of σ=1.5)",
            _secure_discrete_gaussian(0.75),
            0,
            1,
            discrete_gaussian_claim(1.5, 1e-5),
            delta=1e-5,
            relation="integer counting query 0 vs 1",
        ),
        *erm_mutation_cases(),
    ]


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
