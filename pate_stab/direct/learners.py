"""The direct private learners: what each one spends (its plan) and how it trains, one pair per learner.

The same feature stage (the run's features, fitted on the public pool only), the same
evaluation split, the same (ε, δ) targets and the same ledger as the aggregator rows. Each
learner is one spend with the id ``<run>:<learner>:eps=<ε>[:rep=<r>]``: the spend is recorded
*before* training (a crash over-counts, never under-counts), the trained model is written to
``<run>/direct/`` and its SHA-256 recorded with the spend. A rerun replays the recorded model
(digest checked); a spend without a recorded model is refused (``ReplayedSpendError``), never
retrained under the old charge (DESIGN.md fact 7).

The pipeline step (:mod:`pate_stab.run.direct`) records the spend, trains through the registry
(:mod:`pate_stab.direct.registry`: one :class:`~pate_stab.direct.registry.DirectSpec` per learner names its
relation, unit, noise kind, whether it needs images, and the two functions below) and writes the row.

Learners (:data:`~pate_stab.direct.registry.DIRECT_LEARNERS`):

* ``objective-softmax`` / ``output-softmax``: the softmax head of :mod:`pate_stab.erm.multinomial`
  (one ε for all C classes); ``objective-ovr`` / ``output-ovr``: one-vs-rest binary logistic heads
  (:func:`pate_stab.erm.objective_perturbation`, :func:`pate_stab.erm.output_perturbation`) over
  the public class list, ε/C per class. Logistic loss, ε-DP under the **run's relation** (either).
  Features are divided by a bound R read from the *public pool* (the :data:`NORM_QUANTILE` quantile
  of its row norms) and every row is projected onto the unit ball (a fixed per-record map; rows
  above R are clipped). The heads calibrate on the public size N (:mod:`pate_stab.direct.public_size`,
  as DP-SGD does), never on the private count n; see "The heads' public size" below.
* ``dpsgd-linear``: DP-SGD on a linear softmax layer (:mod:`pate_stab.direct.dpsgd`), features
  standardised with the public pool's mean and standard deviation, per-sample clipping at C = 0.1,
  Poisson sampling, σ from Opacus's RDP accountant: (ε, δ)-DP under **add/remove one record**.
  Under add/remove the private count n is private: q, the steps, σ and the divisor come from the
  public size N (:mod:`pate_stab.direct.public_size`: a bundled data set's documented size, else the
  run's ``private_size_hint``, which own data need), and neither the ledger nor a row records n.
* ``dpsgd-cnn``: DP-SGD on the raw private *images* with Tramèr & Boneh 2021's end-to-end tanh CNN
  through Opacus's engine (:mod:`pate_stab.direct.cnn`; their per-data-set settings, the epochs
  replaced by the run's ``dpsgd_cnn_epochs`` where set), on the run's accelerator; the same
  accountant and relation as ``dpsgd-linear``. Image data only: feature-only data are refused
  before any spend. It uses no feature stage, so a run that only trains it computes none
  (:func:`pate_stab.run.prepare.prepare`'s ``with_features``).
* ``rr-lp1st`` / ``rr-lp2st``: Ghazi et al. 2021's LP-1ST and LP-2ST (:mod:`pate_stab.direct.label_dp`):
  every private label randomised once by RRWithPrior (their Alg 2; uniform prior, or in LP-2ST's second
  half the prior of a model trained on the first half's randomised labels), then a softmax layer on the
  run's features standardised with the public pool's statistics. **ε-label-DP**: private when one
  example's *label* is replaced; the inputs are not protected. Valid only when the run's privacy unit
  is ``label`` (inputs public), under the replace-one relation; any other run refuses them before any
  spend (:func:`pate_stab.run.direct.check_direct_config`). Their spend records ``privacy_unit: label``.
* ``alibi``: Malek et al. 2021's ALIBI without its iterations (:func:`pate_stab.direct.label_dp.train_alibi`):
  every label released once as its one-hot vector plus exact discrete Laplace noise, a softmax layer on the
  posterior under the uniform prior. ε-label-DP, with the same rules as ``rr-lp1st`` / ``rr-lp2st``.

Hyper-parameters are fixed in advance (never chosen on evaluation or pool labels): the heads'
λ = :data:`HEAD_LAMBDA`, chosen before any run so that the objective-perturbation budget keeps
ε' > 0.8 ε at ε = 1 with n = 60,000 and C = 10 (its Jacobian term 18·log(1 + 1/(2nλ)) ≈ 0.15); DP-SGD's
settings are Tramèr & Boneh 2021's (:class:`pate_stab.direct.DPSGDConfig`, :data:`pate_stab.direct.cnn.CNN_DPSGD`),
with the expected batch size computed from the public size N for smaller data
(:func:`pate_stab.direct.dpsgd.default_batch_size`) and the run's ``dpsgd_batch_size``,
``dpsgd_epochs`` and ``dpsgd_lr`` in their place where set (:func:`~pate_stab.direct.registry.dpsgd_settings`).

The heads' public size. Chaudhuri, Monteleoni & Sarwate 2011 (JMLR 12; Thm 6 for output,
Thm 9 for objective perturbation) minimise J_n(w) = (1/n) Σ ℓ(w, z_i) + (λ/2)||w||² and prove ε-DP
under replace-one for a fixed, public n. Here the heads minimise the same objective with a fixed
public divisor N instead, J(w) = (1/N) Σ ℓ(w, z_i) + (λ/2)||w||², and calibrate as the paper does
with n := N (sensitivity 2ρ/(Nλ) of the minimiser; the Jacobian term log(1 + c/(Nλ))² and
b's density of objective perturbation). That calibration holds under both relations:

* replace-one: the paper's proof with n := N, word for word (the divisor is a constant);
* add/remove: D' = D ∪ {z} changes J by (1/N) ℓ(w, z) only. By λ-strong convexity of J_{D'},
  λ ||w_D − w_{D'}|| ≤ ||∇J_{D'}(w_D)|| = ||∇ℓ(w_D, z)||/N ≤ ρ/N, i.e. sensitivity ρ/(Nλ) ≤ 2ρ/(Nλ);
  for objective perturbation the shift of b is one record's gradient (half the replace-one bound)
  and the Jacobian ratio holds the factors of one record's Hessian, each ≤ 1 + c/(Nλ), instead of
  two records' (the proof of Thm 9, and of the softmax head's rank-(C−1) version in
  :mod:`pate_stab.erm.multinomial`, with one changed record), so every term is at most its
  replace-one value.

So the guarantee is ε under the run's relation for any private count n, and neither N nor n
needs to bound the other. The objective is solved through the library's (1/n)-normalised solvers
with λ' = λ N / n (:func:`pate_stab.erm.heads.public_divisor_lambda`), whose minimiser is J's
(J = (n/N)(J_n with λ')) and whose noise scales, all functions of λ' n = λ N, are the paper's with
n := N. n stays inside the mechanism: it is neither recorded nor published.

Relations. The ledger's header holds the run's relation, the ledger counts every spend under it
(:meth:`pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger.cost`), and every direct spend records its own in
its metadata (``neighbouring``) and every row states it. The heads spend under the run's relation
(above); DP-SGD under add/remove, which a replace-one ledger counts as (2ε, (1 + e^ε) δ) (group
privacy over the removal and the addition); a replace-one guarantee would imply no add/remove
one, and an add/remove ledger refuses it. Each row also carries its replace-one equivalent
(``epsilon_replace_one``, ``delta_replace_one``).

Randomness: the noise comes from the OS when the run's ``releaser_noise`` is ``"secure"``; with
``"seeded"`` (research) it is derived from the run's seed and the spend id, and carries no privacy
against anyone who knows the seed. What kind of noise each learner draws
(:data:`~pate_stab.direct.registry.NOISE_KINDS`, stated in every row's note and settings):

* output perturbation (``output-*``): **exact**. The weights are released on a power-of-two lattice
  with exact discrete Laplace noise (:func:`pate_stab.privacy.noise.lattice.lattice_laplace`, bits
  from ``os.urandom`` or the seeded source), calibrated to the ℓ1 sensitivity implied by the ℓ2
  bound plus the rounding's: no floating-point noise is published (Mironov 2012's attack).
* objective perturbation (``objective-*``): **floating point**. The l2-Laplace vector b (Gamma norm,
  Gaussian direction) from a ``torch.Generator`` seeded from the OS. Its analysis (Chaudhuri et al.
  2011, Thm 9) is a change of variables b → w that needs b to have a density; no exact sampler of
  that law is implemented. The released weights are the solver's output, not value + noise.
* DP-SGD (``dpsgd-*``): **floating point** Gaussian noise from a ``torch.Generator`` (Opacus's
  parts), with Opacus's ``secure_mode`` noise (Holohan & Braghin 2021: four draws summed and
  halved) in secure runs. Opacus's ``PrivacyEngine(secure_mode=True)`` also wants ``torchcsprng``
  for its generator; that package is not used (it is not built for current torch).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Protocol

import torch
from torch import Tensor

from pate_stab.direct import cnn
from pate_stab.direct.dpsgd import (
    DPSGDConfig,
    default_batch_size,
    dpsgd_epsilon,
    dpsgd_event,
    dpsgd_noise_multiplier,
    dpsgd_schedule,
    train_dpsgd_linear,
)
from pate_stab.direct.label_dp import LABEL_DP_MAX_ITER, LABEL_DP_WEIGHT_DECAY, train_alibi, train_lp_1st, train_lp_2st
from pate_stab.direct.opacus_engine import engine_schedule
from pate_stab.direct.public_size import dpsgd_public_size, public_size_source
from pate_stab.erm.heads import public_divisor_lambda
from pate_stab.erm.multinomial import softmax_objective_perturbation, softmax_output_perturbation
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.output_perturbation import output_perturbation
from pate_stab.privacy.accounting.events import PrivacyEvent, PureDpEvent, SelfComposedEvent
from pate_stab.privacy.mechanisms.alibi import ALIBI_RESOLUTION, alibi_event, alibi_scale
from pate_stab.privacy.mechanisms.randomized_response import rr_event
from pate_stab.privacy.noise.discrete import RandomSource

__all__ = [
    "DEFAULT_DPSGD",
    "HEAD_LAMBDA",
    "NORM_QUANTILE",
    "DirectRun",
    "Plan",
    "cnn_dpsgd_base",
    "dpsgd_run_settings",
    "head_inputs",
    "linear_dpsgd_base",
    "plan_alibi",
    "plan_dpsgd_cnn",
    "plan_dpsgd_linear",
    "plan_head",
    "plan_lp",
    "pool_standardiser",
    "predict",
    "scale_to_unit_ball",
    "train_alibi_learner",
    "train_dpsgd_cnn_learner",
    "train_dpsgd_linear_learner",
    "train_lp_learner",
    "train_ovr_heads",
    "train_softmax_head",
]

HEAD_LAMBDA = 1e-3
"""λ of the convex heads, fixed in advance (module docstring)."""
NORM_QUANTILE = 0.99
"""The convex heads' feature bound R: this quantile of the public pool's row norms."""
DEFAULT_DPSGD = DPSGDConfig()
"""Tramèr & Boneh 2021's DP-SGD settings of ``dpsgd-linear`` (the convex heads carry them unused)."""
Plan = tuple[float, float, PrivacyEvent]
"""What a spend charges, before any noise: (ε, δ, the event the ledger checks they are implied by)."""


class DirectRun(Protocol):
    """What a direct learner reads of the run (a :class:`~pate_stab.run.prepare.Prepared` has it): ``task``
    (``private_x``, ``private_y``, ``private_images``, ``public_x``, ``num_classes``) and ``config`` (the run's
    settings: ``delta``, ``accelerator``, ``dataset``, the DP-SGD settings and the public size's)."""

    @property
    def task(self) -> Any: ...

    @property
    def config(self) -> Any: ...


# ---- DP-SGD settings --------------------------------------------------------------------------------------------


def linear_dpsgd_base(config: Any) -> DPSGDConfig:
    """``dpsgd-linear``'s settings before the batch size: Tramèr & Boneh 2021's, the run's epochs where set."""
    return replace(DEFAULT_DPSGD, epochs=config.direct.dpsgd_epochs or DEFAULT_DPSGD.epochs)


def cnn_dpsgd_base(config: Any) -> DPSGDConfig:
    """``dpsgd-cnn``'s settings before the batch size: its data set's (:func:`pate_stab.direct.cnn.cnn_dpsgd_config`),
    the run's ``dpsgd_cnn_epochs`` (else ``dpsgd_epochs``) where set."""
    return cnn.cnn_dpsgd_config(config.data.dataset, config.direct.dpsgd_cnn_epochs or config.direct.dpsgd_epochs)


def dpsgd_run_settings(config: Any, base: DPSGDConfig) -> DPSGDConfig:
    """A DP-SGD learner's settings for this run from its ``base`` settings and the run's configuration only.

    The expected batch size B of :func:`~pate_stab.direct.dpsgd.default_batch_size` for the public size N,
    at most ``base``'s; the run's ``dpsgd_batch_size`` and ``dpsgd_lr`` replace them where set.

    Raises:
        ValueError: a default B is needed and N is not known (own data without ``private_size_hint``).
    """
    batch = config.direct.dpsgd_batch_size
    if batch is None:
        batch = default_batch_size(dpsgd_public_size(config), cap=base.expected_batch_size)
    return replace(base, expected_batch_size=batch, lr=config.direct.dpsgd_lr or base.lr)


# ---- public maps of the inputs ----------------------------------------------------------------------------------


def head_inputs(prep: DirectRun) -> tuple[float, Tensor]:
    """R from the public pool and the private rows divided by R, projected onto the unit ball."""
    norms = torch.linalg.vector_norm(prep.task.public_x.double(), dim=1)
    bound = float(torch.quantile(norms, NORM_QUANTILE))
    return bound, scale_to_unit_ball(prep.task.private_x, bound)


def scale_to_unit_ball(x: Tensor, bound: float) -> Tensor:
    """Rows divided by ``bound``, then projected onto the unit ball (the heads' fixed per-record map)."""
    x = x.double() / bound
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp(min=1.0)


def pool_standardiser(prep: DirectRun) -> tuple[Tensor, Tensor]:
    """The public pool's per-feature mean and standard deviation (at least 1e-6)."""
    pool = prep.task.public_x.float()
    return pool.mean(dim=0), pool.std(dim=0).clamp(min=1e-6)


def predict(model: dict[str, Any], x: Tensor, *, accelerator: str) -> Tensor:
    """A trained direct model's predicted classes for inputs ``x`` (images for the CNN, features otherwise)."""
    if model.get("kind") == "cnn":
        return cnn.cnn_predict(model, x, device=cnn.resolve_device(accelerator))
    if "mean" in model:
        z = (x.float() - model["mean"]) / model["std"]
        return torch.argmax(z @ model["weight"].T + model["bias"], dim=1)
    return torch.argmax(scale_to_unit_ball(x, model["bound"]) @ model["weight"].T.double(), dim=1)


# ---- plans: what a spend charges and records, before any noise ---------------------------------------------------
# Each fills the spend's metadata ``meta`` (no private count: under add/remove it is private, DESIGN.md fact 8;
# the private diagnostics hold it) and returns (ε, δ, event).


def _dpsgd_plan(
    prep: DirectRun, epsilon: float, dpsgd: DPSGDConfig, meta: dict[str, Any], q: float, steps: int
) -> Plan:
    sigma = dpsgd_noise_multiplier(epsilon=epsilon, delta=prep.config.release.delta, sample_rate=q, steps=steps)
    spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=prep.config.release.delta)
    meta.update({"dpsgd": dpsgd.to_dict(), "noise_multiplier": sigma, "sample_rate": q, "steps": steps,
                 "accountant": "opacus RDPAccountant"})  # fmt: skip
    # the sampled-Gaussian steps themselves; the charge is Opacus's RDP ε, which the ledger checks they imply
    return spent, prep.config.release.delta, dpsgd_event(noise_multiplier=sigma, sample_rate=q, steps=steps)


def _public_size(prep: DirectRun, meta: dict[str, Any]) -> int:
    size = dpsgd_public_size(prep.config)  # public: q, steps, σ and the divisor come from it, never from n
    meta.update({"public_size": size, "public_size_source": public_size_source(prep.config)})
    return size


def plan_dpsgd_cnn(prep: DirectRun, epsilon: float, dpsgd: DPSGDConfig, meta: dict[str, Any]) -> Plan:
    """``dpsgd-cnn``: Opacus's loader rule on N (q = 1 / ⌈N / B⌉), the raw private images' shape."""
    q, steps = engine_schedule(_public_size(prep, meta), dpsgd)
    shape = cnn.as_images(prep.task.private_images, name="private images").shape[1:]
    meta.update({"architecture": cnn.ARCHITECTURE, "input_shape": list(shape),
                 "inputs": "raw private images (no feature stage)"})  # fmt: skip
    return _dpsgd_plan(prep, epsilon, dpsgd, meta, q, steps)


def plan_dpsgd_linear(prep: DirectRun, epsilon: float, dpsgd: DPSGDConfig, meta: dict[str, Any]) -> Plan:
    """``dpsgd-linear``: Poisson sampling at q = B / N."""
    q, steps = dpsgd_schedule(_public_size(prep, meta), dpsgd)
    meta["features"] = "standardised with public-pool statistics"
    return _dpsgd_plan(prep, epsilon, dpsgd, meta, q, steps)


def plan_alibi(prep: DirectRun, epsilon: float, dpsgd: DPSGDConfig, meta: dict[str, Any]) -> Plan:
    """``alibi``: ε-label-DP, every label once (Malek et al. 2021)."""
    meta.update({"privacy_unit": "label",
                 "relation": "one example's label replaced; inputs public (Malek et al. 2021)",
                 "randomiser": "M·onehot(y) + discrete Laplace on each coordinate, each label once",
                 "resolution": ALIBI_RESOLUTION, "noise_scale": str(alibi_scale(epsilon)),
                 "posterior": "uniform prior (no iterations)", "classes": prep.task.num_classes,
                 "model": "linear softmax on the posterior (soft labels), full-batch L-BFGS",
                 "weight_decay": LABEL_DP_WEIGHT_DECAY, "max_iter": LABEL_DP_MAX_ITER,
                 "features": "standardised with public-pool statistics"})  # fmt: skip
    return epsilon, 0.0, alibi_event(epsilon)


def plan_lp(prep: DirectRun, epsilon: float, dpsgd: DPSGDConfig, meta: dict[str, Any], *, stages: int) -> Plan:
    """``rr-lp1st`` (``stages=1``) / ``rr-lp2st`` (``stages=2``): ε-label-DP, every label randomised once."""
    meta.update({"privacy_unit": "label",
                 "relation": "one example's label replaced; inputs public (Ghazi et al. 2021, Def 1)",
                 "randomiser": "RRWithPrior (Ghazi et al. 2021, Alg 2), each label once",
                 "prior": "uniform (C-ary randomised response)" if stages == 1 else
                 "half 1: uniform; half 2: the half-1 model's prediction, corrected for the RR channel",
                 "stages": stages, "classes": prep.task.num_classes,
                 "model": "linear softmax, full-batch L-BFGS", "weight_decay": LABEL_DP_WEIGHT_DECAY,
                 "max_iter": LABEL_DP_MAX_ITER,
                 "features": "standardised with public-pool statistics"})  # fmt: skip
    return epsilon, 0.0, rr_event(epsilon)


def plan_head(prep: DirectRun, epsilon: float, dpsgd: DPSGDConfig, meta: dict[str, Any], *, per_class: bool) -> Plan:
    """A convex head: softmax (one ε-DP head) or one-vs-rest (``per_class``: C heads at ε/C each on the same
    records, composed), with the bound R and the public size N."""
    c = prep.task.num_classes
    bound, _ = head_inputs(prep)
    meta.update({"lam": HEAD_LAMBDA, "loss": "logistic", "feature_bound": bound,
                 "feature_bound_source": f"public pool, {NORM_QUANTILE} quantile of row norms; rows clipped",
                 "classes": c, "public_size": dpsgd_public_size(prep.config),
                 "public_size_source": public_size_source(prep.config),
                 "objective": "(1/N) Σ loss + (λ/2)||w||², N the public size"})  # fmt: skip
    event = SelfComposedEvent(PureDpEvent(epsilon / c), c) if per_class else PureDpEvent(epsilon)
    return epsilon, 0.0, event


# ---- training: the model, as plain tensors and numbers -----------------------------------------------------------
# Each takes (prep, ε, generator, DP-SGD settings, the spend's metadata, the exact samplers' random source).


def _ran_as_planned(ran: tuple[float, float, int], meta: dict[str, Any]) -> None:
    planned = (meta["noise_multiplier"], meta["sample_rate"], meta["steps"])
    if ran != planned:  # the ledger recorded what was planned
        raise RuntimeError(f"DP-SGD ran at (σ, q, steps) = {ran}, the spend recorded {planned}")


def train_dpsgd_cnn_learner(
    prep: DirectRun, epsilon: float, generator: torch.Generator, dpsgd: DPSGDConfig, meta: dict[str, Any],
    source: RandomSource,
) -> dict[str, Any]:  # fmt: skip
    """``dpsgd-cnn`` on the raw private images, on the run's accelerator."""
    task = prep.task
    assert task.private_images is not None  # check_direct_inputs
    device = cnn.resolve_device(prep.config.execution.accelerator)
    trained = cnn.train_dpsgd_cnn(task.private_images, task.private_y, num_classes=task.num_classes,
                                  epsilon=epsilon, delta=prep.config.release.delta, generator=generator, config=dpsgd,
                                  public_size=meta["public_size"], device=device,
                                  secure_mode=bool(meta.get("secure_mode", False)))  # fmt: skip
    _ran_as_planned((trained.noise_multiplier, trained.sample_rate, trained.steps), meta)
    return cnn.cnn_state(trained, task.num_classes)


def train_dpsgd_linear_learner(
    prep: DirectRun, epsilon: float, generator: torch.Generator, dpsgd: DPSGDConfig, meta: dict[str, Any],
    source: RandomSource,
) -> dict[str, Any]:  # fmt: skip
    """``dpsgd-linear`` on the features standardised with the public pool's statistics."""
    task = prep.task
    mean, std = pool_standardiser(prep)
    model = train_dpsgd_linear((task.private_x.float() - mean) / std, task.private_y,
                               num_classes=task.num_classes, epsilon=epsilon, delta=prep.config.release.delta,
                               generator=generator, public_size=meta["public_size"], config=dpsgd,
                               secure_mode=bool(meta.get("secure_mode", False)))  # fmt: skip
    if (model.noise_multiplier, model.sample_rate, model.steps) != (
        meta["noise_multiplier"], meta["sample_rate"], meta["steps"]):  # fmt: skip
        raise RuntimeError("DP-SGD ran at other (σ, q, steps) than the spend recorded")
    return {"kind": "linear", "weight": model.weight, "bias": model.bias, "mean": mean, "std": std,
            "epsilon": model.epsilon}  # fmt: skip


def _label_dp_model(prep: DirectRun, train: Any, epsilon: float, source: RandomSource, **extra: Any) -> dict[str, Any]:
    task = prep.task
    mean, std = pool_standardiser(prep)
    trained = train(task.private_x, task.private_y, num_classes=task.num_classes, epsilon=epsilon, mean=mean,
                    std=std, source=source, **extra)  # fmt: skip
    return {"kind": "linear", "weight": trained.weight, "bias": trained.bias, "mean": mean, "std": std,
            "epsilon": epsilon}  # fmt: skip


def train_lp_learner(
    prep: DirectRun, epsilon: float, generator: torch.Generator, dpsgd: DPSGDConfig, meta: dict[str, Any],
    source: RandomSource, *, stages: int,
) -> dict[str, Any]:  # fmt: skip
    """LP-1ST (``stages=1``) or LP-2ST (``stages=2``; the halves from the run's generator, independent of the
    labels) on the standardised features."""
    if stages == 1:
        return _label_dp_model(prep, train_lp_1st, epsilon, source)
    return _label_dp_model(prep, train_lp_2st, epsilon, source, generator=generator)


def train_alibi_learner(
    prep: DirectRun, epsilon: float, generator: torch.Generator, dpsgd: DPSGDConfig, meta: dict[str, Any],
    source: RandomSource,
) -> dict[str, Any]:  # fmt: skip
    """ALIBI without its iterations on the standardised features."""
    return _label_dp_model(prep, train_alibi, epsilon, source)


def _head_model(prep: DirectRun, weight: Tensor, bound: float, epsilon: float) -> dict[str, Any]:
    c = prep.task.num_classes
    return {"kind": "linear", "weight": weight, "bias": torch.zeros(c, dtype=weight.dtype), "bound": bound,
            "epsilon": epsilon}  # fmt: skip


def _head_lambda(meta: dict[str, Any], x: Tensor) -> float:
    # the objective with the public divisor N through the (1/n)-normalised solvers (module docstring)
    return public_divisor_lambda(HEAD_LAMBDA, public_size=meta["public_size"], private_size=x.shape[0])


def train_softmax_head(
    prep: DirectRun, epsilon: float, generator: torch.Generator, dpsgd: DPSGDConfig, meta: dict[str, Any],
    source: RandomSource, *, exact: bool,
) -> dict[str, Any]:  # fmt: skip
    """The softmax head: output perturbation (``exact``: lattice noise from ``source``) or objective
    perturbation (floating-point noise from ``generator``)."""
    task = prep.task
    bound, x = head_inputs(prep)
    kwargs: dict[str, Any] = {"num_classes": task.num_classes, "epsilon": epsilon, "lam": _head_lambda(meta, x),
                              "generator": generator}  # fmt: skip
    if exact:
        m = softmax_output_perturbation(x, task.private_y, exact_noise=source, **kwargs)
    else:
        m = softmax_objective_perturbation(x, task.private_y, **kwargs)
    return _head_model(prep, m.weights, bound, epsilon)


def train_ovr_heads(
    prep: DirectRun, epsilon: float, generator: torch.Generator, dpsgd: DPSGDConfig, meta: dict[str, Any],
    source: RandomSource, *, exact: bool,
) -> dict[str, Any]:  # fmt: skip
    """One-vs-rest over the public class list range(C), not the classes present in the private labels
    (PrivateLinearHead.fit reads those from the data): ε/C per class, basic composition; output
    perturbation (``exact``) or objective perturbation."""
    task = prep.task
    bound, x = head_inputs(prep)
    lam = _head_lambda(meta, x)
    eps_class = epsilon / task.num_classes
    heads = []
    for k in range(task.num_classes):
        yk = torch.where(task.private_y == k, 1.0, -1.0).double()
        if exact:
            head = output_perturbation(x, yk, epsilon=eps_class, lam=lam, generator=generator,
                                       loss="logistic", exact_noise=source)  # fmt: skip
        else:
            head = objective_perturbation(x, yk, epsilon=eps_class, lam=lam, generator=generator,
                                          loss="logistic")  # fmt: skip
        heads.append(head.weights)
    return _head_model(prep, torch.stack(heads), bound, epsilon)
