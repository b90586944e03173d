"""Accuracy-first private ERM (Ligett, Neel, Roth, Waggoner & Wu 2017): noise reduction + IAT.

Given an accuracy target α (excess empirical risk L(θ) − L(θ*) <= α) and a failure probability
γ, search privacy levels ε_1 < … < ε_T for the most private hypothesis that meets the target:

* :func:`cov_nr` (Alg 3): ridge regression by covariance perturbation. (XᵀX, Xᵀy) are released
  through noise reduction (Alg 1) with sensitivity 2 each (Lemma A.6) at levels ε_t/2 each, and
  θ_t minimises the noisy objective (1/2n)(θᵀZ_tθ − 2<z_t, θ>) + (λ/2)||θ||² over
  C = {||θ||_2 <= √(1/λ)}.
* :func:`output_nr` (Alg 5): logistic regression by output perturbation. θ* is released through
  noise reduction with sensitivity 2√p/(nλ) (Lemma A.10); θ_t is then scaled back onto
  {||θ||_2 <= M = √(2 log 2/λ)} when its norm exceeds M (Alg 5 prints "if ||θ_t|| <= M", a typo:
  the rescaling bounds the query sensitivity, so it applies to norms above M).

Each θ_t is checked, in order, by InteractiveAboveThreshold (Alg 2; a sparse vector configuration,
:func:`~pate_stab.privacy.mechanisms.sparse_vector.interactive_above_threshold`) with threshold W = −α/2 on
the query f_t(D) = L(θ*, D) − L(θ_t, D) (Alg 5 prints W = α/2, a sign typo: the query is minus
the excess risk), sensitivity Δ (Claim A.5 / Alg 5) and ε_0 = 16Δ log(2T/γ)/α. The first
θ_t that passes is released as (t, θ_t), with ex-post loss E((t, ·)) = ε_0 + ε_t (Lemma 2.8,
Thm 3.2/3.4). If none passes the paper releases (⊥, θ*), whose ex-post loss is E(⊥) = ∞
(``on_exhaustion="optimum"``); ``on_exhaustion="refuse"`` releases only ⊥, whose loss is at
most ε_0 + ε_T (post-processing of the stopping rule and all T hypotheses), so the whole run is
then (ε_0 + ε_T)-DP ex ante and can be charged to a ledger.

Accuracy (Thm 3.2/3.4): with ε_0 as above IAT is (α/2)-accurate with probability 1 − γ
(Thm A.1: α_IAT = 8Δ log(2T/γ)/ε_0), so a released θ_t has f_t >= −α/2 − α/2, i.e. excess risk
<= α; θ* has excess risk 0.

Union bound over the levels (``union_bound``). The paper's accuracy proofs union-bound the
failure probability γ over the T tests for both searches: Thm A.1 sets NR's ε_0 with
log(2T/γ), Thm A.2 sets Doubling's per-test noise with log(T/γ). Both searches take the same
``union_bound`` flag: True (the default, the theorems as printed) or False (log(2/γ) and
log(1/γ), i.e. T = 1 in both formulas). The flag changes only the test noise and the
accuracy guarantee (without it, each single test fails with probability γ, not the whole
search); the ex-post loss is computed from the noise actually used, so privacy holds either way.

Baselines: :func:`doubling_method` (Alg 4, Thm A.2: fresh hypotheses at ε_1·2^{i−1} and a
Laplace test Lap(α/(2 log(T/γ))) each) and :func:`theory_method` (run once at the ε that the
utility bound of Thm 3.1 / Thm 3.3 maps to expected excess risk α).

Neighbouring relation: replace one record. The hypotheses and ε levels are built in
:mod:`pate_stab.erm.accuracy_hypotheses` (exported here too). Seeded generators make runs reproducible; a
deployment uses :func:`pate_stab.rng.os_seeded_generator`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch

from pate_stab._checks import check_generator, check_positive, check_probability
from pate_stab.erm.accuracy_hypotheses import (
    ball_quadratic_minimise,
    covariance_hypotheses,
    covariance_perturbation,
    doubling_levels,
    geometric_levels,
    iat_epsilon,
    output_perturbation_logistic,
    project_to_ball,
    theory_epsilon,
)
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem
from pate_stab.errors import ReplayedSpendError
from pate_stab.privacy.accounting.events import ExPostEvent, PureDpEvent
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.noise_reduction import check_increasing_epsilons, noise_reduction
from pate_stab.privacy.mechanisms.sparse_vector import FAILED, interactive_above_threshold
from pate_stab.privacy.noise.seeded import laplace
from pate_stab.rng import spawn_generators

__all__ = [
    "AccuracyFirstResult",
    "ball_quadratic_minimise",
    "covariance_hypotheses",
    "covariance_perturbation",
    "output_perturbation_logistic",
    "iat_epsilon",
    "theory_epsilon",
    "geometric_levels",
    "doubling_levels",
    "cov_nr",
    "output_nr",
    "doubling_method",
    "theory_method",
]

_CHUNK = 64
Problem = RidgeProblem | LogisticProblem


@dataclass(frozen=True)
class AccuracyFirstResult:
    """What an accuracy-first run released, and its ex-post privacy loss.

    Attributes:
        method: "noise_reduction", "doubling" or "theory".
        index: t (1-based) of the released hypothesis; None for ⊥.
        theta: the released hypothesis (θ_t, or θ* after ⊥ with ``on_exhaustion="optimum"``;
            None after ⊥ with "refuse").
        epsilon_ex_post: E(outcome) of Def 2.3 (∞ when θ* was released).
        epsilon_test: the part due to testing (ε_0 of IAT; the sum of the Laplace tests).
        epsilon_hypotheses: the part due to generating hypotheses (ε_t; Σ ε_i for doubling).
        epsilon_ex_ante: the worst case over all outcomes (∞ with "optimum").
        num_tested: hypotheses tested.
        details: parameters (α, γ, Δ, levels) for the report.
    """

    method: str
    index: int | None
    theta: torch.Tensor | None
    epsilon_ex_post: float
    epsilon_test: float
    epsilon_hypotheses: float
    epsilon_ex_ante: float
    num_tested: int
    details: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------- ledger


def _ledger_open(
    ledger: PrivacyLedger | None,
    spend_id: str | None,
    on_exhaustion: str,
    epsilon_ante: float,
    mechanism: str,
    description: str,
) -> None:
    if ledger is None:
        return
    if not isinstance(ledger, PrivacyLedger):
        raise TypeError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}")
    if on_exhaustion != "refuse":
        raise ValueError(
            "a ledger needs on_exhaustion='refuse': releasing θ* after ⊥ has ex-post loss ∞, "
            "which no finite budget covers"
        )
    if not isinstance(spend_id, str) or not spend_id:
        raise ValueError("spend_id (a non-empty str) is required with a ledger")
    entry = ledger.spend(
        spend_id,
        epsilon=epsilon_ante,
        delta=0.0,
        event=PureDpEvent(epsilon=epsilon_ante),
        mechanism=mechanism,
        metadata={"ex_post_function": description},
        relation="replace_one",  # the guarantee's relation (module docstring): an add/remove ledger refuses it
    )
    if entry.replayed:  # a spend id buys one draw of noise (DESIGN.md fact 7): never run again under it
        raise ReplayedSpendError(
            f"spend {spend_id!r} ({mechanism}) is already paid for and its noise drawn; nothing was drawn or "
            "released now. Use a new spend id (and budget) for a new search"
        )


def _ledger_close(
    ledger: PrivacyLedger | None, spend_id: str | None, result: AccuracyFirstResult, description: str
) -> AccuracyFirstResult:
    """Record ``result``'s realised ex-post loss on its spend (when there is one); return ``result``."""
    if ledger is None or spend_id is None:
        return result
    outcome = "⊥" if result.index is None else f"t = {result.index}"
    ledger.record_ex_post(
        spend_id, ExPostEvent(epsilon_ex_post=result.epsilon_ex_post, description=f"{description}; outcome {outcome}")
    )
    return result


def _exhausted(problem: Problem, on_exhaustion: str, eps_ante: float) -> tuple[torch.Tensor | None, float]:
    """What a search that passed no test releases, and its ex-post loss: θ* at E = ∞ ("optimum",
    the paper), or ⊥ at the ex-ante charge ("refuse")."""
    if on_exhaustion == "optimum":
        return problem.theta_star.clone(), math.inf
    return None, eps_ante


def _check_common(
    alpha: float, gamma: float, generator: torch.Generator, on_exhaustion: str, epsilons: Any
) -> tuple[float, float, torch.Tensor]:
    """The searches' shared arguments: α > 0, γ ∈ (0, 1), the generator, the exhaustion rule and
    the increasing ε levels (returned as ``(alpha, gamma, epsilons)``)."""
    alpha = check_positive("alpha", alpha)
    gamma = check_probability("gamma", gamma, open_interval=True)
    check_generator(generator)
    if on_exhaustion not in ("optimum", "refuse"):
        raise ValueError(f"on_exhaustion must be 'optimum' or 'refuse', got {on_exhaustion!r}")
    return alpha, gamma, check_increasing_epsilons(epsilons)


def _check_flag(union_bound: Any) -> bool:
    if not isinstance(union_bound, bool):
        raise TypeError(f"union_bound must be a bool, got {type(union_bound).__name__}")
    return union_bound


# --------------------------------------------------------------------------- noise reduction


def _nr_search(
    problem: Problem,
    hypotheses: Any,
    *,
    epsilons: torch.Tensor,
    alpha: float,
    gamma: float,
    generator: torch.Generator,
    on_exhaustion: str,
    ledger: PrivacyLedger | None,
    spend_id: str | None,
    mechanism: str,
    union_bound: bool,
) -> AccuracyFirstResult:
    t_count = int(epsilons.numel())
    delta_q = problem.query_sensitivity
    eps0 = iat_epsilon(sensitivity=delta_q, num_levels=t_count if union_bound else 1, alpha=alpha, gamma=gamma)
    eps_ante = eps0 + float(epsilons[-1]) if on_exhaustion == "refuse" else math.inf
    description = f"Ligett et al. 2017 {mechanism}: E((t, θ_t)) = ε0 + ε_t with ε0 = {eps0:.6g}; " + (
        "E(⊥) = ε0 + ε_T (only ⊥ released)" if on_exhaustion == "refuse" else "E((⊥, θ*)) = ∞"
    )
    _ledger_open(ledger, spend_id, on_exhaustion, eps_ante, mechanism, description)
    iat = interactive_above_threshold(epsilon=eps0, threshold=-alpha / 2.0, sensitivity=delta_q, generator=generator)
    details = {
        "alpha": alpha,
        "gamma": gamma,
        "query_sensitivity": delta_q,
        "num_levels": t_count,
        "epsilon_min": float(epsilons[0]),
        "epsilon_max": float(epsilons[-1]),
        "union_bound": union_bound,
    }
    for start in range(0, t_count, _CHUNK):
        stop = min(start + _CHUNK, t_count)
        thetas = hypotheses(start, stop)  # (chunk, p), each in C
        # The sparse vector runs on −f_t = L(θ_t) − L(θ*) (f_t = L(θ*) − L(θ_t)); its first ⊥ is Alg 2's stop.
        stops = torch.nonzero(iat.process_many(problem.loss(thetas) - problem.loss_star) == FAILED)
        if stops.numel():
            idx = int(stops[0])
            t = start + idx
            result = AccuracyFirstResult(
                "noise_reduction",
                t + 1,
                thetas[idx].clone(),
                eps0 + float(epsilons[t]),
                eps0,
                float(epsilons[t]),
                eps_ante,
                t + 1,
                details,
            )
            return _ledger_close(ledger, spend_id, result, description)
    theta, loss = _exhausted(problem, on_exhaustion, eps_ante)
    result = AccuracyFirstResult(
        "noise_reduction", None, theta, loss, eps0, float(epsilons[-1]), eps_ante, t_count, details
    )
    return _ledger_close(ledger, spend_id, result, description)


def cov_nr(
    problem: RidgeProblem,
    *,
    alpha: float,
    epsilons: Any,
    gamma: float,
    generator: torch.Generator,
    on_exhaustion: str = "optimum",
    ledger: PrivacyLedger | None = None,
    spend_id: str | None = None,
    union_bound: bool = True,
) -> AccuracyFirstResult:
    """CovNR (Ligett et al. 2017, Alg 3; Thm 3.2): covariance perturbation with noise reduction.

    Args:
        problem: a :class:`RidgeProblem` (data, λ, θ*).
        alpha: target excess risk α > 0.
        epsilons: ε_1 < … < ε_T.
        gamma: failure probability γ ∈ (0, 1).
        generator: randomness (children for the two NR chains and IAT).
        on_exhaustion: "optimum" (the paper: release θ*, E = ∞) or "refuse" (release ⊥ only).
        ledger, spend_id: charge ε_0 + ε_T ex ante before anything is released and record the
            realised ex-post loss ε_0 + ε_t (needs "refuse").
        union_bound: ε_0 with log(2T/γ) (True, Thm A.1) or log(2/γ) (False); see the module
            docstring.

    Returns:
        :class:`AccuracyFirstResult`.
    """
    if not isinstance(problem, RidgeProblem):
        raise TypeError(f"problem must be a RidgeProblem, got {type(problem).__name__}")
    alpha, gamma, eps = _check_common(alpha, gamma, generator, on_exhaustion, epsilons)
    gen_mat, gen_vec, gen_iat = spawn_generators(generator, 3)
    p = problem.p
    # Lemma A.6: sensitivity 2 each; ε_t/2 each, so the prefix up to t costs ε_t.
    z_mats = noise_reduction(problem.gram.reshape(-1), sensitivity=2.0, epsilons=eps / 2.0, generator=gen_mat)
    z_vecs = noise_reduction(problem.xty, sensitivity=2.0, epsilons=eps / 2.0, generator=gen_vec)

    def hypotheses(start: int, stop: int) -> torch.Tensor:
        return covariance_hypotheses(problem, z_mats[start:stop].reshape(-1, p, p), z_vecs[start:stop])

    return _nr_search(
        problem,
        hypotheses,
        epsilons=eps,
        alpha=alpha,
        gamma=gamma,
        generator=gen_iat,
        on_exhaustion=on_exhaustion,
        ledger=ledger,
        spend_id=spend_id,
        mechanism="CovNR",
        union_bound=_check_flag(union_bound),
    )


def output_nr(
    problem: LogisticProblem,
    *,
    alpha: float,
    epsilons: Any,
    gamma: float,
    generator: torch.Generator,
    on_exhaustion: str = "optimum",
    ledger: PrivacyLedger | None = None,
    spend_id: str | None = None,
    union_bound: bool = True,
) -> AccuracyFirstResult:
    """OutputNR (Ligett et al. 2017, Alg 5; Thm 3.4): output perturbation with noise reduction.

    Arguments as in :func:`cov_nr`, with a :class:`LogisticProblem`.
    """
    if not isinstance(problem, LogisticProblem):
        raise TypeError(f"problem must be a LogisticProblem, got {type(problem).__name__}")
    alpha, gamma, eps = _check_common(alpha, gamma, generator, on_exhaustion, epsilons)
    gen_nr, gen_iat = spawn_generators(generator, 2)
    thetas = noise_reduction(
        problem.theta_star, sensitivity=problem.minimiser_sensitivity, epsilons=eps, generator=gen_nr
    )
    thetas = project_to_ball(thetas, problem.radius)  # post-processing: bounded query sensitivity

    def hypotheses(start: int, stop: int) -> torch.Tensor:
        return thetas[start:stop]

    return _nr_search(
        problem,
        hypotheses,
        epsilons=eps,
        alpha=alpha,
        gamma=gamma,
        generator=gen_iat,
        on_exhaustion=on_exhaustion,
        ledger=ledger,
        spend_id=spend_id,
        mechanism="OutputNR",
        union_bound=_check_flag(union_bound),
    )


# --------------------------------------------------------------------------- baselines


def doubling_method(
    problem: Problem,
    *,
    alpha: float,
    epsilons: Any,
    gamma: float,
    generator: torch.Generator,
    on_exhaustion: str = "optimum",
    ledger: PrivacyLedger | None = None,
    spend_id: str | None = None,
    union_bound: bool = True,
) -> AccuracyFirstResult:
    """DoublingMethod (Ligett et al. 2017, Alg 4; Thm A.2).

    At step i a fresh ε_i-DP hypothesis (covariance perturbation for ridge, output perturbation
    projected onto C for logistic) is tested by f_i + Lap(α/(2 log(T/γ))) >= −α/2, each test
    being (2Δ log(T/γ)/α)-DP. Stopping at k costs E(k) = Σ_{i<=k} (ε_i + 2Δ log(T/γ)/α), which is
    2kΔ log(T/γ)/α + (2^k − 1)ε_1 for the doubling list ε_i = 2^{i−1}ε_1 (:func:`doubling_levels`).
    With ``union_bound=False`` log(T/γ) becomes log(1/γ) (see the module docstring).
    """
    alpha, gamma, eps = _check_common(alpha, gamma, generator, on_exhaustion, epsilons)
    t_count = int(eps.numel())
    delta_q = problem.query_sensitivity
    log_term = math.log((t_count if _check_flag(union_bound) else 1) / gamma)
    noise_scale = alpha / (2.0 * log_term)
    eps_test = delta_q / noise_scale
    eps_ante = t_count * eps_test + float(eps.sum()) if on_exhaustion == "refuse" else math.inf
    description = f"Ligett et al. 2017 Thm A.2: E(k) = Σ_(i<=k) (ε_i + {eps_test:.6g}); " + (
        "E(⊥) = E(T) (only ⊥ released)" if on_exhaustion == "refuse" else "E((T+1, θ*)) = ∞"
    )
    _ledger_open(ledger, spend_id, on_exhaustion, eps_ante, "DoublingMethod", description)
    gen_hyp, gen_test = spawn_generators(generator, 2)
    details = {
        "alpha": alpha,
        "gamma": gamma,
        "query_sensitivity": delta_q,
        "num_levels": t_count,
        "epsilon_min": float(eps[0]),
        "epsilon_max": float(eps[-1]),
        "epsilon_per_test": eps_test,
        "union_bound": union_bound,
    }
    spent_hyp = 0.0
    for i in range(t_count):
        e_i = float(eps[i])
        if isinstance(problem, RidgeProblem):
            theta = covariance_perturbation(problem, epsilon=e_i, generator=gen_hyp)
        else:
            theta = output_perturbation_logistic(problem, epsilon=e_i, generator=gen_hyp, project=True)
        spent_hyp += e_i
        value = problem.loss_star - float(problem.loss(theta))
        if value + float(laplace(noise_scale, generator=gen_test)) >= -alpha / 2.0:
            result = AccuracyFirstResult(
                "doubling",
                i + 1,
                theta,
                (i + 1) * eps_test + spent_hyp,
                (i + 1) * eps_test,
                spent_hyp,
                eps_ante,
                i + 1,
                details,
            )
            return _ledger_close(ledger, spend_id, result, description)
    theta_out, loss = _exhausted(problem, on_exhaustion, eps_ante)
    result = AccuracyFirstResult(
        "doubling", None, theta_out, loss, t_count * eps_test, spent_hyp, eps_ante, t_count, details
    )
    return _ledger_close(ledger, spend_id, result, description)


def theory_method(problem: Problem, *, alpha: float, generator: torch.Generator) -> AccuracyFirstResult:
    """The "theory" approach: run the ε-DP mechanism once at ε = :func:`theory_epsilon`.

    Only the *expected* excess risk is bounded by α (Thm 3.1 / 3.3); there is no test and the
    privacy loss is the ex-ante ε.
    """
    eps = theory_epsilon(problem, alpha=alpha)
    check_generator(generator)
    if isinstance(problem, RidgeProblem):
        theta = covariance_perturbation(problem, epsilon=eps, generator=generator)
    else:
        theta = output_perturbation_logistic(problem, epsilon=eps, generator=generator)
    return AccuracyFirstResult("theory", 1, theta, eps, 0.0, eps, eps, 0, {"alpha": alpha})
