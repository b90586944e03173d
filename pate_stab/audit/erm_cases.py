"""The convex-ERM and selection mechanisms of :mod:`pate_stab.erm` as :func:`~pate_stab.audit.harness.dp_test` cases.

Every case runs the package's own computation, vectorised over runs:

* the exponential mechanism, Chaudhuri & Vinterbo's noisy selection and the private histogram
  through the library's ``*_samples`` functions (one run of those is the public function);
* rls-out and Ligett et al.'s output perturbation: the exact minimiser of each neighbour,
  computed once, plus the library's noise at the scale the public function reports;
* covariance perturbation: the library's batched minimiser on noisy statistics;
* the softmax head's output perturbation (C = 3, d = 1): the exact minimiser of each neighbour,
  computed once, plus the library's noise at the scale the public function reports, seen through
  its projection on the line joining the two minimisers;
* the Functional Mechanism (Zhang et al. 2012, as Wu et al. 2016 use it): the library's noisy
  coefficients (:func:`~pate_stab.erm.functional_mechanism.functional_mechanism_samples`), seen
  through the linear coefficient, the only one the pair moves (by 4 = Δ/2: Zhang et al.'s Δ is
  loose by the triangle inequality's factor 2, so noise for 2ε is not refutable on any pair; the
  mutation calibrates to one coefficient's change, 2, i.e. noise for 4ε);
* Tuned Output Perturbation's selection (Wu et al. 2016, Alg 5 step 3) given the chunk models
  (they do not depend on S'): the library's utilities and utility sensitivity, and the
  exponential mechanism, on validation chunks S' = {(1, 1)} vs {(1, −1)} with one model at
  w = +2 and nine at w = −2 (R2's largest radius), where every utility moves by 8 against the
  bound (2 + 1)² = 9. The rls-out chunk models are the rls-out case above; the chunks are
  disjoint, so the two compose in parallel. The mutation uses the printed Δu = R² = 4 on
  this |S'| = 1, which :func:`~pate_stab.erm.wu_tuned.wu_tuned_output_perturbation` refuses;
* objective perturbation in one dimension: the released w solves F_D'(w) + b/n = 0, which is
  increasing in w, so it is found by bisection for every noise draw b, with the noise scale and
  regularisation the public function reports.

Where a case reproduces a computation (the last three items), ``tests/audit/test_erm_cases.py``
checks it against the public function on the same noise. Neighbouring relation: replace one
record (the papers'). The broken variants keep the correct claim and change one constant, as a
calibration bug would; the harness must flag them.
"""

from __future__ import annotations

from typing import Any

import torch

from pate_stab.audit.harness import Mechanism, MechanismCase
from pate_stab.erm.accuracy_first import covariance_hypotheses
from pate_stab.erm.accuracy_problems import LogisticProblem, RidgeProblem
from pate_stab.erm.density import private_histogram_samples
from pate_stab.erm.functional_mechanism import functional_mechanism_samples, linear_regression_coefficients
from pate_stab.erm.losses import Loss, get_loss
from pate_stab.erm.multinomial import softmax_output_perturbation, solve_softmax_erm
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.output_perturbation import rls_out
from pate_stab.erm.solver import solve_erm
from pate_stab.erm.validation import stability_select_samples, wu_tuning_utilities, wu_utility_sensitivity
from pate_stab.privacy.mechanisms.exponential import exponential_mechanism_samples
from pate_stab.privacy.noise.seeded import l2_laplace_vectors, laplace

__all__ = [
    "objective_perturbation_1d",
    "covariance_perturbation_samples",
    "erm_mechanism_cases",
    "erm_mutation_cases",
]

_F64 = torch.float64


def _pairs(n: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """n records x = 1, y = 1, and the neighbour whose first label is −1 (|y| <= 1, ||x|| <= 1)."""
    x = torch.ones((n, 1), dtype=_F64)
    y = torch.ones(n, dtype=_F64)
    y_flip = y.clone()
    y_flip[0] = -1.0
    return x, y, y_flip


# --------------------------------------------------------------------------- objective perturbation


def objective_perturbation_1d(
    x: torch.Tensor, y: torch.Tensor, *, loss: str | Loss, lam_total: float, noise: torch.Tensor, max_iter: int = 200
) -> torch.Tensor:
    """argmin_w (1/n) Σ φ(x_i w, y_i) + (b/n) w + (Λ/2) w² for every b in ``noise`` (R,), d = 1.

    The objective of Chaudhuri et al. 2011, Alg 2 (as :func:`pate_stab.erm.objective_perturbation`
    passes it to the solver). Its derivative g is increasing (φ convex, Λ > 0) and, with |φ'| <= ρ
    and |x| <= 1, its root lies in |w| <= (ρ + |b|/n)/Λ. Newton steps on g, kept inside the
    bracket that g's sign maintains (bisection when a step leaves it), until every step is
    below 1e-13·(1 + |w|). Records with x = 0 add exactly 0 to g.
    """
    phi = get_loss(loss)
    n = x.shape[0]
    keep = x[:, 0] != 0
    xs, ys = x[keep, 0].to(_F64), y[keep].to(_F64)
    b = noise.to(_F64)
    half = (phi.lipschitz(None) + b.abs() / n) / lam_total
    lo, hi = -half, half
    w = torch.zeros_like(b)
    for _ in range(max_iter):
        z = w[:, None] * xs
        grad = (xs * phi.derivative(z, ys)).sum(1) / n + b / n + lam_total * w
        curv = (xs * xs * phi.second_derivative(z, ys)).sum(1) / n + lam_total
        step = grad / curv
        if bool((step.abs() <= 1e-13 * (1 + w.abs())).all()):
            return w - step
        lo, hi = torch.where(grad > 0, lo, w), torch.where(grad > 0, w, hi)
        newton = w - step
        w = torch.where((newton >= lo) & (newton <= hi), newton, 0.5 * (lo + hi))
    raise RuntimeError(f"objective_perturbation_1d did not converge in {max_iter} steps")


def _objective_perturbation(*, epsilon: float, lam: float, n: int, drop_extra_lam: bool = False) -> Mechanism:
    """1-D logistic objective perturbation on neighbours that differ in one record: x = 1 vs x = 0 (y = 1).

    The other records have x = 0 (they add nothing to the objective). The changed record moves
    the gradient by |φ'| <= 1 and the curvature by φ'' <= 1/4: both terms of the analysis.
    """
    x_a = torch.zeros((n, 1), dtype=_F64)
    x_a[0, 0] = 1.0
    x_b = torch.zeros((n, 1), dtype=_F64)
    y = torch.ones(n, dtype=_F64)
    model = objective_perturbation(x_a, y, epsilon=epsilon, lam=lam, generator=torch.Generator().manual_seed(0))
    lam_total = lam if drop_extra_lam else model.lam
    data = {"D": x_a, "D'": x_b}

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        b = l2_laplace_vectors(model.noise_scale, 1, num_samples=num, generator=gen)[:, 0]
        return objective_perturbation_1d(data[key], y, loss="logistic", lam_total=lam_total, noise=b).abs()

    return mech


# --------------------------------------------------------------------------- output perturbation (rls-out)


def _rls_out(*, epsilon: float, lam: float, radius: float, n: int, scale_factor: float = 1.0) -> Mechanism:
    """rls-out (Wu et al. 2016, Alg 4) on 1-D neighbours (one target flipped); the constraint does not bind."""
    x, y, y_flip = _pairs(n)
    model = rls_out(x, y, epsilon=epsilon, lam=lam, radius=radius, generator=torch.Generator().manual_seed(0))
    theta = {
        key: solve_erm(x, t, loss="squared", lam=lam, radius=radius, tol=1e-12).weights
        for key, t in (("D", y), ("D'", y_flip))
    }
    scale = model.noise_scale * scale_factor

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        return (theta[key] + l2_laplace_vectors(scale, 1, num_samples=num, generator=gen))[:, 0]

    return mech


# --------------------------------------------------------------------------- Wu et al. 2016: FM and Tuned


def _functional_mechanism(*, epsilon: float, n: int, noise_sensitivity: float | None = None) -> Mechanism:
    """Functional Mechanism on 1-D neighbours (one target flipped); the linear coefficient.

    ``noise_sensitivity`` None: the library's sampler (Δ = 2(1 + d)² = 8). A number: the same
    coefficients plus Lap(noise_sensitivity/ε) (a mis-calibrated variant).
    """
    x, y, y_flip = _pairs(n)
    data = {"D": y, "D'": y_flip}

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        if noise_sensitivity is None:
            out = functional_mechanism_samples(x, data[key], epsilon=epsilon, num_samples=num, generator=gen)
        else:
            coef = linear_regression_coefficients(x, data[key])
            out = coef + laplace(noise_sensitivity / epsilon, (num, coef.numel()), generator=gen)
        return out[:, 1]

    return mech


def _wu_tuned_selection(*, epsilon: float, printed_radius: float | None = None, others: int = 9) -> Mechanism:
    """Alg 5 step 3 on fixed chunk models: one at w = +2, ``others`` at w = −2; S' of one record.

    ``printed_radius`` None: the library's sensitivity (max ‖w_i‖ + 1)²/|S'| = 9. A number R:
    the printed Δu = R² (wrong when |S'| < (R + 1)²/R²).
    """
    models = [torch.tensor([2.0], dtype=_F64)] + [torch.tensor([-2.0], dtype=_F64)] * others
    xv = torch.ones((1, 1), dtype=_F64)
    vals = {"D": torch.ones(1, dtype=_F64), "D'": -torch.ones(1, dtype=_F64)}
    sens = wu_utility_sensitivity(models, 1) if printed_radius is None else printed_radius**2

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        u = wu_tuning_utilities(models, xv, vals[key])
        return exponential_mechanism_samples(u, epsilon=epsilon, sensitivity=sens, num_samples=num, generator=gen)

    return mech


# --------------------------------------------------------------------------- softmax head (multinomial.py)


def _softmax_output_perturbation(*, epsilon: float, lam: float, n: int, scale_factor: float = 1.0) -> Mechanism:
    """Softmax output perturbation, C = 3, d = 1, on n records x = 1 with y = 0 vs the first relabelled 1.

    Returns the released W projected on the unit vector from W*(D') to W*(D) (the direction in
    which the two output distributions differ most). The relabelling moves the gradient by
    ||e_1 − e_0|| = √2 = ρ, so W* moves by about half the bound 2ρ/(λn): noise for 4ε doubles the
    loss past the claim and is caught; a noise scale off by less than 2 is not visible on this pair.
    """
    c = 3
    x = torch.ones((n, 1), dtype=_F64)
    y = torch.zeros(n, dtype=torch.int64)
    y_flip = y.clone()
    y_flip[0] = 1
    model = softmax_output_perturbation(x, y, num_classes=c, epsilon=epsilon, lam=lam,
                                        generator=torch.Generator().manual_seed(0))  # fmt: skip
    w = {key: solve_softmax_erm(x, t, num_classes=c, lam=lam, tol=1e-13)[0].reshape(-1)
         for key, t in (("D", y), ("D'", y_flip))}  # fmt: skip
    u = (w["D"] - w["D'"]) / torch.linalg.vector_norm(w["D"] - w["D'"])
    scale = model.noise_scale * scale_factor

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        return (w[key] + l2_laplace_vectors(scale, c, num_samples=num, generator=gen)) @ u

    return mech


# --------------------------------------------------------------------------- Ligett et al. 2017


def covariance_perturbation_samples(
    problem: Any, *, epsilon: float, num_samples: int, noise_sensitivity: float, generator: torch.Generator
) -> torch.Tensor:
    """``num_samples`` runs of covariance perturbation (Ligett et al. Thm 3.1), (num_samples, p).

    Lap(noise_sensitivity/ε) on every entry of XᵀX and Xᵀy, then the library's batched minimiser;
    with ``noise_sensitivity = 4`` one run is :func:`pate_stab.erm.accuracy_first.covariance_perturbation`.
    """
    p = problem.p
    z_mat = problem.gram + laplace(noise_sensitivity / epsilon, (num_samples, p, p), generator=generator)
    z_vec = problem.xty + laplace(noise_sensitivity / epsilon, (num_samples, p), generator=generator)
    return covariance_hypotheses(problem, z_mat, z_vec)


def _covariance_perturbation(*, epsilon: float, n: int, lam: float, noise_sensitivity: float = 4.0) -> Mechanism:
    x, y, y_flip = _pairs(n)
    problems = {"D": RidgeProblem(x, y, lam=lam), "D'": RidgeProblem(x, y_flip, lam=lam)}

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        return covariance_perturbation_samples(
            problems[key], epsilon=epsilon, num_samples=num, noise_sensitivity=noise_sensitivity, generator=gen
        )[:, 0]

    return mech


def _logistic_output_perturbation(*, epsilon: float, n: int, lam: float, scale_factor: float = 1.0) -> Mechanism:
    """θ* + Lap(2√p/(nλε)) per coordinate (Ligett et al. Thm 3.3) on 1-D neighbours (one label flipped)."""
    x, y, y_flip = _pairs(n)
    problems = {"D": LogisticProblem(x, y, lam=lam), "D'": LogisticProblem(x, y_flip, lam=lam)}
    scale = problems["D"].minimiser_sensitivity / epsilon * scale_factor

    def mech(key: str, num: int, gen: torch.Generator) -> torch.Tensor:
        return problems[key].theta_star[0] + laplace(scale, num, generator=gen)

    return mech


# --------------------------------------------------------------------------- selection and density


def _exponential_mechanism(*, epsilon: float, sensitivity: float, k: int = 20) -> Mechanism:
    def mech(u: Any, num: int, gen: torch.Generator) -> torch.Tensor:
        return exponential_mechanism_samples(
            u, epsilon=epsilon, sensitivity=sensitivity, num_samples=num, generator=gen
        )

    return mech


def _stability_select(*, epsilon: float, beta: float) -> Mechanism:
    def mech(q: Any, num: int, gen: torch.Generator) -> torch.Tensor:
        return stability_select_samples(
            q, beta1=beta, beta2=beta, n=1, m=1, epsilon=epsilon, num_samples=num, generator=gen
        )

    return mech


def _private_histogram(*, epsilon: float) -> Mechanism:
    def mech(x: Any, num: int, gen: torch.Generator) -> torch.Tensor:
        return private_histogram_samples(x, num_bins=4, epsilon=epsilon, num_samples=num, generator=gen)

    return mech


def _bins_0_minus_1(t: torch.Tensor) -> torch.Tensor:
    return t[:, 0] - t[:, 1]


def _histogram_pair() -> tuple[torch.Tensor, torch.Tensor]:
    """20 points in each quarter of [0, 1], plus one more in the first (a) or the second (b)."""
    base = torch.tensor([0.1, 0.3, 0.6, 0.9], dtype=_F64).repeat(20)
    return torch.cat([base, torch.tensor([0.1], dtype=_F64)]), torch.cat([base, torch.tensor([0.3], dtype=_F64)])


def _selection_pair(k: int, step: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Utilities 0 everywhere, and the neighbour: candidate 0 down by ``step``, all others up by it."""
    a = torch.zeros(k, dtype=_F64)
    b = torch.full((k,), step, dtype=_F64)
    b[0] = -step
    return a, b


# --------------------------------------------------------------------------- the cases


def _dataset_case(name: str, mechanism: Mechanism, relation: str, **kwargs: Any) -> MechanismCase:
    """A case run on the mechanism's own neighbouring data sets "D" and "D'" at claim ε = 1."""
    return MechanismCase(name, mechanism, "D", "D'", 1.0, relation=relation, **kwargs)


def erm_mechanism_cases() -> list[MechanismCase]:
    """The ERM, selection and density mechanisms at their claims (see the module docstring)."""
    replace = "replace one record"
    ea, eb = _selection_pair(20, 1.0)
    ha, hb = _histogram_pair()
    return [
        _dataset_case(
            "objective perturbation (logistic 1-D, n=10, λ=1e-3: Δ > 0)",
            _objective_perturbation(epsilon=1.0, lam=1e-3, n=10),
            f"{replace} (x = 1 vs x = 0)",
        ),
        _dataset_case(
            "objective perturbation (logistic 1-D, n=10, λ=0.1: ε' > 0)",
            _objective_perturbation(epsilon=1.0, lam=0.1, n=10),
            f"{replace} (x = 1 vs x = 0)",
        ),
        _dataset_case(
            "softmax output perturbation (C=3, d=1, n=10, λ=1)",
            _softmax_output_perturbation(epsilon=1.0, lam=1.0, n=10),
            f"{replace} (label 0 → 1)",
        ),
        _dataset_case(
            "rls-out (Wu Alg 4, n=20, λ=100, R=0.05)",
            _rls_out(epsilon=1.0, lam=100.0, radius=0.05, n=20),
            f"{replace} (target flipped)",
        ),
        _dataset_case(
            "Functional Mechanism (Zhang et al. 2012 / Wu 2016, d=1, n=20)",
            _functional_mechanism(epsilon=1.0, n=20),
            f"{replace} (target flipped)",
        ),
        _dataset_case(
            "Tuned selection (Wu Alg 5 step 3, R2 models ±2, |S'|=1)",
            _wu_tuned_selection(epsilon=1.0),
            f"{replace} (the validation record's target flipped)",
        ),
        _dataset_case(
            "covariance perturbation (Ligett Thm 3.1, p=1)",
            _covariance_perturbation(epsilon=1.0, n=20, lam=1.0),
            f"{replace} (target flipped)",
        ),
        _dataset_case(
            "logistic output perturbation (Ligett Thm 3.3, p=1)",
            _logistic_output_perturbation(epsilon=1.0, n=20, lam=1.0),
            f"{replace} (label flipped)",
        ),
        MechanismCase(
            "exponential mechanism (20 candidates, Δu=1)",
            _exponential_mechanism(epsilon=1.0, sensitivity=1.0),
            ea,
            eb,
            1.0,
            relation="every utility moves by at most Δu",
        ),
        MechanismCase(
            "stability_select (Chaudhuri-Vinterbo Alg 1, β=1)",
            _stability_select(epsilon=1.0, beta=1.0),
            ea,
            eb,
            1.0,
            relation="every score moves by at most β",
        ),
        MechanismCase(
            "private histogram (Chaudhuri-Vinterbo Alg 5, 4 bins)",
            _private_histogram(epsilon=1.0),
            ha,
            hb,
            1.0,
            featurize=_bins_0_minus_1,
            relation=f"{replace} (moves bins)",
        ),
    ]


def erm_mutation_cases() -> list[MechanismCase]:
    """Each mechanism above with one constant wrong and the correct claim kept: all must be flagged."""
    ea, eb = _selection_pair(20, 1.0)
    ha, hb = _histogram_pair()
    return [
        _dataset_case(
            "objective perturbation without the extra regularisation Δ",
            _objective_perturbation(epsilon=1.0, lam=1e-3, n=10, drop_extra_lam=True),
            "replace one record (x = 1 vs x = 0)",
        ),
        _dataset_case(
            "softmax output perturbation, noise for 4ε",
            _softmax_output_perturbation(epsilon=1.0, lam=1.0, n=10, scale_factor=0.25),
            "replace one record (label 0 → 1)",
        ),
        _dataset_case(
            "rls-out, noise scale ρ/(λnε) (one-sided sensitivity)",
            _rls_out(epsilon=1.0, lam=100.0, radius=0.05, n=20, scale_factor=0.5),
            "replace one record (target flipped)",
        ),
        _dataset_case(
            "Functional Mechanism, Lap(2/ε): one coefficient's change, not 2(1 + d)²",
            _functional_mechanism(epsilon=1.0, n=20, noise_sensitivity=2.0),
            "replace one record (target flipped)",
        ),
        _dataset_case(
            "Tuned selection, printed Δu = R² = 4 on |S'| = 1 (true bound 9)",
            _wu_tuned_selection(epsilon=1.0, printed_radius=2.0),
            "replace one record (the validation record's target flipped)",
        ),
        _dataset_case(
            "covariance perturbation, per-entry sensitivity 1 not 4",
            _covariance_perturbation(epsilon=1.0, n=20, lam=1.0, noise_sensitivity=1.0),
            "replace one record (target flipped)",
        ),
        _dataset_case(
            "logistic output perturbation, noise for 4ε",
            _logistic_output_perturbation(epsilon=1.0, n=20, lam=1.0, scale_factor=0.25),
            "replace one record (label flipped)",
        ),
        MechanismCase(
            "exponential mechanism, exp(εu/Δu) (factor 1/2 dropped)",
            _exponential_mechanism(epsilon=1.0, sensitivity=0.5),
            ea,
            eb,
            1.0,
            relation="every utility moves by at most Δu",
        ),
        MechanismCase(
            "stability_select, noise β·Z not 2β·Z",
            _stability_select(epsilon=1.0, beta=0.5),
            ea,
            eb,
            1.0,
            relation="every score moves by at most β",
        ),
        MechanismCase(
            "private histogram, Lap(1/ε) (sensitivity 1 not 2)",
            _private_histogram(epsilon=2.0),
            ha,
            hb,
            1.0,
            featurize=_bins_0_minus_1,
            relation="replace one record (moves bins)",
        ),
    ]
