"""Accuracy-first ERM (Ligett et al. 2017): contract, sensitivities, IAT ex-post loss, accuracy.

Statistical checks use α = 1e-6 (Clopper–Pearson / binomial tails): a correct implementation
fails each with probability at most 1e-6.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from scipy import stats

from pate_stab.audit.harness import clopper_pearson
from pate_stab.erm.accuracy_first import (
    ball_quadratic_minimise,
    cov_nr,
    covariance_hypotheses,
    covariance_perturbation,
    doubling_levels,
    doubling_method,
    geometric_levels,
    iat_epsilon,
    output_nr,
    output_perturbation_logistic,
    theory_epsilon,
    theory_method,
)
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem, check_l1_features
from pate_stab.errors import ReplayedSpendError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.noise_reduction import noise_reduction_samples
from pate_stab.privacy.noise.seeded import laplace
from pate_stab.rng import seeded_generator

ALPHA = 1e-6
F64 = torch.float64


def _l1_rows(n: int, p: int, gen: torch.Generator) -> torch.Tensor:
    x = torch.rand(n, p, dtype=F64, generator=gen) * 2 - 1
    return x / x.abs().sum(1, keepdim=True).clamp_min(1.0) * torch.rand(n, 1, dtype=F64, generator=gen)


def _ridge_data(n: int, p: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    gen = seeded_generator(seed)
    x = _l1_rows(n, p, gen)
    w = torch.randn(p, dtype=F64, generator=gen) * 3
    y = (x @ w + 0.05 * torch.randn(n, dtype=F64, generator=gen)).clamp(-1, 1)
    return x, y


def _logistic_data(n: int, p: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = _ridge_data(n, p, seed)
    return x, torch.where(y > 0, 1.0, -1.0).to(F64)


# ------------------------------------------------------------------ contract and parameters


def test_l1_contract_enforced() -> None:
    x = torch.tensor([[0.6, 0.6]], dtype=F64)  # ||x||_2 < 1 but ||x||_1 = 1.2
    with pytest.raises(ValueError, match=r"\|\|x\|\|_1"):
        check_l1_features(x)
    with pytest.raises(ValueError, match=r"\|\|x\|\|_1"):
        RidgeProblem(x, torch.zeros(1, dtype=F64), lam=0.1)
    with pytest.raises(ValueError, match="NaN"):
        check_l1_features(torch.tensor([[float("nan"), 0.0]]))


def test_label_contract_enforced() -> None:
    x = torch.full((3, 2), 0.25, dtype=F64)
    with pytest.raises(ValueError, match=r"\|y\| > 1"):
        RidgeProblem(x, torch.tensor([0.0, 1.5, 0.0], dtype=F64), lam=0.1)
    with pytest.raises(ValueError, match=r"\{-1, 1\}"):
        LogisticProblem(x, torch.tensor([0.0, 1.0, -1.0], dtype=F64), lam=0.1)
    with pytest.raises(ValueError, match="entries"):
        RidgeProblem(x, torch.zeros(2, dtype=F64), lam=0.1)
    with pytest.raises(ValueError):
        RidgeProblem(x, torch.zeros(3, dtype=F64), lam=float("nan"))


@pytest.fixture(scope="module")
def ridge() -> RidgeProblem:
    x, y = _ridge_data(3000, 4, 0)
    return RidgeProblem(x, y, lam=0.01)


@pytest.fixture(scope="module")
def logistic() -> LogisticProblem:
    x, y = _logistic_data(3000, 4, 1)
    return LogisticProblem(x, y, lam=0.01)


@pytest.mark.parametrize(
    "kwargs, error",
    [
        ({"alpha": 0.0}, ValueError),
        ({"alpha": float("nan")}, ValueError),
        ({"gamma": 1.0}, ValueError),
        ({"gamma": 0.0}, ValueError),
        ({"epsilons": [2.0, 1.0]}, ValueError),
        ({"epsilons": [1.0, float("inf")]}, ValueError),
        ({"on_exhaustion": "other"}, ValueError),
        ({"generator": 3}, TypeError),
    ],
)
def test_bad_parameters(ridge: RidgeProblem, logistic: LogisticProblem, kwargs: dict, error: type) -> None:
    args = {"alpha": 0.1, "epsilons": [0.5, 1.0], "gamma": 0.1, "generator": seeded_generator(0), **kwargs}
    with pytest.raises(error):
        cov_nr(ridge, **args)
    with pytest.raises(error):
        output_nr(logistic, **args)
    with pytest.raises(error):
        doubling_method(ridge, **args)


def test_wrong_problem_type(ridge: RidgeProblem, logistic: LogisticProblem) -> None:
    with pytest.raises(TypeError):
        cov_nr(logistic, alpha=0.1, epsilons=[1.0], gamma=0.1, generator=seeded_generator(0))  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        output_nr(ridge, alpha=0.1, epsilons=[1.0], gamma=0.1, generator=seeded_generator(0))  # type: ignore[arg-type]


def test_pinned_formulas(ridge: RidgeProblem) -> None:
    assert iat_epsilon(sensitivity=0.01, num_levels=10, alpha=0.1, gamma=0.1) == pytest.approx(
        16 * 0.01 * math.log(200) / 0.1
    )
    n, p, lam = ridge.n, ridge.p, ridge.lam
    assert theory_epsilon(ridge, alpha=0.1) == pytest.approx(
        4 * math.sqrt(2) * (2 * math.sqrt(p / lam) + p / lam) / (n * 0.1)
    )
    levels = doubling_levels(0.01, 1.0)
    assert levels.tolist() == pytest.approx([0.01 * 2**i for i in range(8)])
    assert float(levels[-1]) >= 1.0 > float(levels[-2])
    g = geometric_levels(1e-3, 10.0, 5)
    assert g.tolist() == pytest.approx([1e-3, 1e-2, 1e-1, 1.0, 10.0])


def test_logistic_theory_epsilon_inverts_thm_3_3(logistic: LogisticProblem) -> None:
    eps = theory_epsilon(logistic, alpha=0.05)
    n, p, lam = logistic.n, logistic.p, logistic.lam
    bound = 2 * math.sqrt(2) * p / (n * lam * eps) + 4 * p * p / (n * n * lam * eps * eps)
    assert bound == pytest.approx(0.05, rel=1e-9)


# ------------------------------------------------------------------ the noisy minimiser


def test_ball_minimiser_matches_solver_on_exact_statistics(ridge: RidgeProblem) -> None:
    theta = covariance_hypotheses(ridge, ridge.gram, ridge.xty)
    assert torch.allclose(theta, ridge.theta_star, atol=1e-8)


def test_ball_minimiser_is_global_on_indefinite_problems() -> None:
    gen = seeded_generator(7)
    p, radius = 4, 2.0
    for _ in range(20):
        b = torch.randn(p, p, dtype=F64, generator=gen)
        a = 0.5 * (b + b.T)  # indefinite
        g = torch.randn(p, dtype=F64, generator=gen)
        theta = ball_quadratic_minimise(a, g, radius)
        assert float(theta.norm()) <= radius * (1 + 1e-12)

        def q(t: torch.Tensor, a: torch.Tensor = a, g: torch.Tensor = g) -> torch.Tensor:
            return 0.5 * torch.einsum("...i,ij,...j->...", t, a, t) - t @ g

        cand = torch.randn(20_000, p, dtype=F64, generator=gen)
        cand = cand / cand.norm(dim=1, keepdim=True) * radius * torch.rand(20_000, 1, dtype=F64, generator=gen) ** 0.25
        assert float(q(theta)) <= float(q(cand).min()) + 1e-12


# ------------------------------------------------------------------ sensitivities on random neighbours


def _neighbour(
    x: torch.Tensor, y: torch.Tensor, gen: torch.Generator, classification: bool, extreme: bool
) -> tuple[torch.Tensor, torch.Tensor]:
    x2, y2 = x.clone(), y.clone()
    i = int(torch.randint(x.shape[0], (1,), generator=gen))
    if extreme:  # a one-hot row at full ℓ1 norm and an extreme label
        j = int(torch.randint(x.shape[1], (1,), generator=gen))
        x2[i] = 0.0
        x2[i, j] = 1.0 if bool(torch.rand(1, generator=gen) < 0.5) else -1.0
    else:
        x2[i] = _l1_rows(1, x.shape[1], gen)[0]
    y2[i] = (
        (1.0 if bool(torch.rand(1, generator=gen) < 0.5) else -1.0)
        if (classification or extreme)
        else float(torch.rand(1, dtype=F64, generator=gen) * 2 - 1)
    )
    return x2, y2


def _thetas_in_ball(p: int, radius: float, gen: torch.Generator) -> torch.Tensor:
    t = torch.randn(64, p, dtype=F64, generator=gen)
    t = t / t.norm(dim=1, keepdim=True) * radius
    t[32:] *= torch.rand(32, 1, dtype=F64, generator=gen)
    eye = torch.eye(p, dtype=F64) * radius
    return torch.cat([t, eye, -eye])


@pytest.mark.parametrize("kind", ["ridge", "logistic"])
def test_query_sensitivity_on_random_neighbours(kind: str) -> None:
    gen = seeded_generator(21)
    n, p, lam = 40, 3, 0.05
    worst = 0.0
    for trial in range(12):
        if kind == "ridge":
            x, y = _ridge_data(n, p, 100 + trial)
            cls, make = False, RidgeProblem
        else:
            x, y = _logistic_data(n, p, 100 + trial)
            cls, make = True, LogisticProblem
        d = make(x, y, lam=lam)
        x2, y2 = _neighbour(x, y, gen, cls, extreme=trial % 2 == 0)
        d2 = make(x2, y2, lam=lam)
        thetas = _thetas_in_ball(p, d.radius, gen)
        change = (d.excess_risk(thetas) - d2.excess_risk(thetas)).abs().max()
        assert float(change) <= d.query_sensitivity
        worst = max(worst, float(change) / d.query_sensitivity)
        if kind == "ridge":
            # Lemma A.6: the sufficient statistics move by at most 2 in ℓ1.
            assert float((d.gram - d2.gram).abs().sum()) <= 2.0 + 1e-12
            assert float((d.xty - d2.xty).abs().sum()) <= 2.0 + 1e-12
        else:
            # Lemma A.10: the minimiser moves by at most 2√p/(nλ) in ℓ1.
            assert float((d.theta_star - d2.theta_star).abs().sum()) <= d.minimiser_sensitivity
    assert worst > 0.05  # the neighbours do move the query: the check is not vacuous


# ------------------------------------------------------------------ IAT ex-post guarantee on a toy

# Toy: D has a statistic v(D) ∈ {0, 1} (sensitivity 1). Hypotheses v̂_t come from noise
# reduction at ε = (0.5, 1, 2); the excess risk of a hypothesis θ is |θ − v(D)| (minimiser v,
# minimum 0), so f_t(D) = −|v̂_t − v(D)| has sensitivity 1 for fixed v̂_t. IAT (ε_A = 1,
# W = −1) releases (t, v̂_t) or ⊥ ("refuse"). Lemma 2.8: outcome t has loss <= ε_A + ε_t; ⊥
# (a post-processing of the stopping rule and all hypotheses) has loss <= ε_A + ε_T.

TOY_EPS = (0.5, 1.0, 2.0)
TOY_EPS_A = 1.0
TOY_W = -1.0
TOY_BINS = torch.tensor([-1.0, 0.0, 1.0, 2.0], dtype=F64)


def _toy(v: float, n: int, gen: torch.Generator, noiseless: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
    """Returns (stop index in 0..T, T meaning ⊥) and the released hypothesis (0 for ⊥)."""
    hyps = noise_reduction_samples(
        torch.tensor(v, dtype=F64), sensitivity=1.0, epsilons=TOY_EPS, num_samples=n, generator=gen
    )  # (n, T)
    f = -(hyps - v).abs()
    t_count = len(TOY_EPS)
    if noiseless:  # broken: the accuracy test without IAT's noise
        passed = f >= TOY_W
    else:  # Alg 2: Ŵ = W + Lap(2Δ/ε), query noise Lap(4Δ/ε), Δ = 1
        w_hat = TOY_W + laplace(2.0 / TOY_EPS_A, (n, 1), generator=gen)
        passed = f + laplace(4.0 / TOY_EPS_A, (n, t_count), generator=gen) >= w_hat
    first = torch.where(passed.any(1), torch.argmax(passed.to(torch.int8), dim=1), torch.full((n,), t_count))
    released = torch.where(
        first < t_count, hyps.gather(1, first.clamp_max(t_count - 1)[:, None])[:, 0], torch.zeros(n, dtype=F64)
    )
    return first, released


def _cell_codes(first: torch.Tensor, released: torch.Tensor) -> torch.Tensor:
    return first * (TOY_BINS.numel() + 1) + torch.bucketize(released, TOY_BINS)


def _worst_excess(noiseless: bool, seed: int, n: int = 200_000) -> float:
    """max over cells of (Clopper–Pearson lower bound on the cell's loss) − (its claimed E).

    The cell (and direction) is chosen on a separate selection sample, then evaluated on a fresh
    one, so the bound holds at level ALPHA for the chosen cell.
    """
    gen = seeded_generator(seed)
    t_count = len(TOY_EPS)
    num_codes = (t_count + 1) * (TOY_BINS.numel() + 1)
    claims = torch.tensor(
        [TOY_EPS_A + TOY_EPS[min(c // (TOY_BINS.numel() + 1), t_count - 1)] for c in range(num_codes)], dtype=F64
    )

    def counts(v: float, m: int) -> torch.Tensor:
        return torch.bincount(_cell_codes(*_toy(v, m, gen, noiseless)), minlength=num_codes)

    sel_a, sel_b = counts(0.0, n // 4), counts(1.0, n // 4)
    best, choice = -math.inf, (0, 1)
    for c in range(num_codes):
        for num, den, d in ((sel_a, sel_b, 1), (sel_b, sel_a, -1)):
            lo, _ = clopper_pearson(int(num[c]), n // 4, 0.05)
            _, hi = clopper_pearson(int(den[c]), n // 4, 0.05)
            score = math.log(lo / hi) - float(claims[c]) if lo > 0 else -math.inf
            if score > best:
                best, choice = score, (c, d)
    c, d = choice
    ev_a, ev_b = counts(0.0, n), counts(1.0, n)
    num, den = (ev_a, ev_b) if d == 1 else (ev_b, ev_a)
    lo, _ = clopper_pearson(int(num[c]), n, ALPHA)
    _, hi = clopper_pearson(int(den[c]), n, ALPHA)
    return (math.log(lo / hi) if lo > 0 else -math.inf) - float(claims[c])


def test_iat_ex_post_guarantee_holds_on_toy() -> None:
    assert _worst_excess(noiseless=False, seed=31) <= 0.0


def test_iat_without_noise_violates_ex_post_claim() -> None:
    # Without noise, "stop at t = 1 with v̂_1 ∈ [−1, 0]" is impossible unless |v̂_1 − v| <= 1,
    # which separates v = 0 from v = 1 far beyond e^{ε_A + ε_1}.
    assert _worst_excess(noiseless=True, seed=32) > 0.0


def test_iat_stop_rule_matches_library_scales() -> None:
    # The toy's vectorised Alg 2 and the library's InteractiveAboveThreshold (the sparse vector run
    # on −f) agree on P[stop at 1] for a fixed query stream (1000 library runs, Clopper–Pearson 1e-6).
    from pate_stab.privacy.mechanisms.sparse_vector import interactive_above_threshold

    gen = seeded_generator(33)
    runs = 1000
    hits = 0
    for _ in range(runs):
        iat = interactive_above_threshold(epsilon=TOY_EPS_A, threshold=TOY_W, sensitivity=1.0, generator=gen)
        hits += not iat.process(0.5)  # f_1 = −0.5; a ⊥ on −f_1 is Alg 2's stop
    n = 400_000
    w_hat = TOY_W + laplace(2.0 / TOY_EPS_A, (n,), generator=gen)
    p_ref = float((-0.5 + laplace(4.0 / TOY_EPS_A, (n,), generator=gen) >= w_hat).double().mean())
    lo, hi = clopper_pearson(hits, runs, ALPHA)
    assert lo <= p_ref <= hi


# ------------------------------------------------------------------ accuracy guarantee


def _failure_bound(runs: int, gamma: float) -> int:
    """Largest count k with P[Binomial(runs, γ) >= k] > ALPHA: more failures refute 'rate <= γ'."""
    return int(stats.binom.isf(ALPHA, runs, gamma)) + 1


@pytest.mark.parametrize("kind", ["ridge", "logistic"])
def test_accuracy_guarantee_holds_in_most_runs(kind: str) -> None:
    alpha, gamma, runs = 0.02, 0.1, 150
    if kind == "ridge":
        problem: RidgeProblem | LogisticProblem = RidgeProblem(*_ridge_data(2000, 3, 5), lam=0.01)
        algo = cov_nr
    else:
        problem = LogisticProblem(*_logistic_data(2000, 3, 6), lam=0.01)
        algo = output_nr
    levels = geometric_levels(1e-2, 4 * theory_epsilon(problem, alpha=alpha), 40)
    failures, bad_first = 0, 0
    for seed in range(runs):
        res = algo(problem, alpha=alpha, epsilons=levels, gamma=gamma, generator=seeded_generator(seed))
        assert res.theta is not None
        failures += float(problem.excess_risk(res.theta)) > alpha
        if res.index is not None:
            assert res.epsilon_ex_post == pytest.approx(res.epsilon_test + float(levels[res.index - 1]))
            assert float(res.theta.norm()) <= problem.radius * (1 + 1e-12)
    # Non-vacuous: the most private hypotheses are far from accurate, so the test must reject them.
    for seed in range(20):
        gen = seeded_generator(1000 + seed)
        if isinstance(problem, RidgeProblem):
            first = covariance_perturbation(problem, epsilon=float(levels[0]), generator=gen)
        else:
            first = output_perturbation_logistic(problem, epsilon=float(levels[0]), generator=gen, project=True)
        bad_first += float(problem.excess_risk(first)) > alpha
    assert bad_first >= 15
    assert failures <= _failure_bound(runs, gamma)


def test_doubling_accuracy_and_ex_post_formula(ridge: RidgeProblem) -> None:
    alpha, gamma = 0.05, 0.1
    levels = doubling_levels(0.05, 4 * theory_epsilon(ridge, alpha=alpha))
    t_count = levels.numel()
    res = doubling_method(ridge, alpha=alpha, epsilons=levels, gamma=gamma, generator=seeded_generator(3))
    assert res.index is not None and res.theta is not None
    k = res.index
    closed = 2 * k * ridge.query_sensitivity * math.log(t_count / gamma) / alpha + (2**k - 1) * float(levels[0])
    assert res.epsilon_ex_post == pytest.approx(closed)  # Thm A.2
    assert float(ridge.excess_risk(res.theta)) <= alpha


def test_theory_method_reports_ex_ante_epsilon(logistic: LogisticProblem) -> None:
    res = theory_method(logistic, alpha=0.05, generator=seeded_generator(0))
    assert res.epsilon_ex_post == pytest.approx(theory_epsilon(logistic, alpha=0.05))


# ------------------------------------------------------------------ ledger and ⊥


def test_exhaustion_modes(ridge: RidgeProblem) -> None:
    # One very private level and a tiny α: the test (almost surely) never passes.
    args = {"alpha": 1e-6, "epsilons": [1e-4], "gamma": 0.1}
    opt = cov_nr(ridge, generator=seeded_generator(0), **args)
    assert opt.index is None and math.isinf(opt.epsilon_ex_post) and torch.equal(opt.theta, ridge.theta_star)
    ref = cov_nr(ridge, generator=seeded_generator(0), on_exhaustion="refuse", **args)
    assert ref.index is None and ref.theta is None and ref.epsilon_ex_post == pytest.approx(ref.epsilon_ex_ante)


def test_ledger_records_ex_ante_and_ex_post(ridge: RidgeProblem, tmp_path: Path) -> None:
    alpha = 0.1
    levels = geometric_levels(1e-2, 4 * theory_epsilon(ridge, alpha=alpha), 50)
    add_remove = PrivacyLedger(tmp_path / "ar.jsonl", run_id="t", budget_epsilon=1e6, budget_delta=1e-6)
    with pytest.raises(ValueError, match="replace_one"):  # a replace-one guarantee gives no add/remove one
        cov_nr(ridge, alpha=alpha, epsilons=levels, gamma=0.1, generator=seeded_generator(0), on_exhaustion="refuse",
               ledger=add_remove, spend_id="covnr-0")  # fmt: skip
    assert add_remove.entries() == []
    ledger = PrivacyLedger(
        tmp_path / "ledger.jsonl", run_id="t", budget_epsilon=1e6, budget_delta=1e-6, neighbouring="replace_one"
    )
    with pytest.raises(ValueError, match="refuse"):
        cov_nr(
            ridge, alpha=alpha, epsilons=levels, gamma=0.1, generator=seeded_generator(0), ledger=ledger, spend_id="x"
        )
    res = cov_nr(
        ridge,
        alpha=alpha,
        epsilons=levels,
        gamma=0.1,
        generator=seeded_generator(0),
        on_exhaustion="refuse",
        ledger=ledger,
        spend_id="covnr-1",
    )
    (entry,) = ledger.entries()
    assert entry.epsilon == pytest.approx(res.epsilon_ex_ante)
    (post,) = ledger.ex_post_entries()
    assert post.ex_post is not None
    assert post.ex_post.epsilon_ex_post == pytest.approx(res.epsilon_ex_post)
    assert "ε0 + ε_t" in post.ex_post.description
    before = (tmp_path / "ledger.jsonl").read_bytes()
    with pytest.raises(ReplayedSpendError, match="covnr-1"):  # the same spend id never searches again
        cov_nr(
            ridge,
            alpha=alpha,
            epsilons=levels,
            gamma=0.1,
            generator=seeded_generator(1),
            on_exhaustion="refuse",
            ledger=ledger,
            spend_id="covnr-1",
        )
    assert (tmp_path / "ledger.jsonl").read_bytes() == before
    ledger.close()


def test_union_bound_flag_sets_both_tests_the_same_way(ridge: RidgeProblem) -> None:
    """Both searches union-bound γ over their T tests by default (Thm A.1 / A.2), and drop it together."""
    alpha, gamma = 0.05, 0.1
    top = 4 * theory_epsilon(ridge, alpha=alpha)
    nr_levels = geometric_levels(top / 200, top, 50)
    db_levels = doubling_levels(top / 200, top)
    t_d = db_levels.numel()
    delta_q = ridge.query_sensitivity
    for union_bound, nr_log, db_log in (
        (True, math.log(2 * 50 / gamma), math.log(t_d / gamma)),
        (False, math.log(2 / gamma), math.log(1 / gamma)),
    ):
        nr = cov_nr(
            ridge, alpha=alpha, epsilons=nr_levels, gamma=gamma, generator=seeded_generator(0), union_bound=union_bound
        )
        assert nr.epsilon_test == pytest.approx(16 * delta_q * nr_log / alpha)
        assert nr.details["union_bound"] is union_bound
        db = doubling_method(
            ridge, alpha=alpha, epsilons=db_levels, gamma=gamma, generator=seeded_generator(0), union_bound=union_bound
        )
        assert db.index is not None
        assert db.details["epsilon_per_test"] == pytest.approx(2 * delta_q * db_log / alpha)
        assert db.epsilon_test == pytest.approx(db.index * 2 * delta_q * db_log / alpha)
    with pytest.raises(TypeError, match="union_bound"):
        cov_nr(ridge, alpha=alpha, epsilons=nr_levels, gamma=gamma, generator=seeded_generator(0), union_bound="no")
