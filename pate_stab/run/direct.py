"""Direct private learners as ``compare`` rows: trained on the private split, beside the releasers.

The same feature stage (the run's features, fitted on the public pool only), the same
evaluation split, the same (ε, δ) targets and the same ledger as the aggregator rows. Each
learner is one spend with the id ``<run>:<learner>:eps=<ε>[:rep=<r>]``: the spend is recorded
*before* training (a crash over-counts, never under-counts), the trained model is written to
``<run>/direct/`` and its SHA-256 recorded with the spend. A rerun replays the recorded model
(digest checked); a spend without a recorded model is refused (``ReplayedSpendError``), never
retrained under the old charge (DESIGN.md fact 7).

Learners (:data:`DIRECT_LEARNERS`):

* ``objective-softmax`` / ``output-softmax``: the softmax head of :mod:`pate_stab.erm.multinomial`
  (one ε for all C classes); ``objective-ovr`` / ``output-ovr``: one-vs-rest binary logistic heads
  (:func:`pate_stab.erm.objective_perturbation`, :func:`pate_stab.erm.output_perturbation`) over
  the public class list, ε/C per class. Logistic loss, ε-DP under the **run's relation** (either).
  Features are divided by a bound R read from the *public pool* (the :data:`NORM_QUANTILE` quantile
  of its row norms) and every row is projected onto the unit ball (a fixed per-record map; rows
  above R are clipped). The heads calibrate on the public size N (:mod:`pate_stab.run.direct_size`,
  as DP-SGD does), never on the private count n; see "The heads' public size" below.
* ``dpsgd-linear``: DP-SGD on a linear softmax layer (:mod:`pate_stab.direct.dpsgd`), features
  standardised with the public pool's mean and standard deviation, per-sample clipping at C = 0.1,
  Poisson sampling, σ from Opacus's RDP accountant: (ε, δ)-DP under **add/remove one record**.
  Under add/remove the private count n is private: q, the steps, σ and the divisor come from the
  public size N (:mod:`pate_stab.run.direct_size`: a bundled data set's documented size, else the
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
  spend (:func:`check_direct_config`). Their spend records ``privacy_unit: label``.
* ``alibi``: Malek et al. 2021's ALIBI without its iterations (:func:`pate_stab.direct.label_dp.train_alibi`):
  every label released once as its one-hot vector plus exact discrete Laplace noise, a softmax layer on the
  posterior under the uniform prior. ε-label-DP, with the same rules as ``rr-lp1st`` / ``rr-lp2st``.

Hyper-parameters are fixed in advance (never chosen on evaluation or pool labels): the heads'
λ = :data:`HEAD_LAMBDA`, chosen before any run so that the objective-perturbation budget keeps
ε' > 0.8 ε at ε = 1 with n = 60,000 and C = 10 (its Jacobian term 18·log(1 + 1/(2nλ)) ≈ 0.15); DP-SGD's
settings are Tramèr & Boneh 2021's (:class:`pate_stab.direct.DPSGDConfig`, :data:`pate_stab.direct.cnn.CNN_DPSGD`),
with the expected batch size computed from the public size N for smaller data
(:func:`pate_stab.direct.dpsgd.default_batch_size`) and the run's ``dpsgd_batch_size``,
``dpsgd_epochs`` and ``dpsgd_lr`` in their place where set (:func:`dpsgd_settings`).

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
against anyone who knows the seed. What kind of noise each learner draws (:data:`NOISE_KINDS`,
stated in every row's note and settings):

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

import hashlib
import math
import secrets
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_epsilon, check_int
from pate_stab.direct import cnn
from pate_stab.direct.dpsgd import (
    DPSGDConfig,
    check_public_size,
    default_batch_size,
    dpsgd_epsilon,
    dpsgd_event,
    dpsgd_noise_multiplier,
    dpsgd_schedule,
    train_dpsgd_linear,
)
from pate_stab.direct.label_dp import (
    LABEL_DP_LEARNERS,
    LABEL_DP_MAX_ITER,
    LABEL_DP_WEIGHT_DECAY,
    train_alibi,
    train_lp_1st,
    train_lp_2st,
)
from pate_stab.direct.opacus_engine import engine_schedule
from pate_stab.erm.heads import public_divisor_lambda
from pate_stab.erm.multinomial import check_class_labels, softmax_objective_perturbation, softmax_output_perturbation
from pate_stab.erm.objective_perturbation import objective_perturbation
from pate_stab.erm.output_perturbation import output_perturbation
from pate_stab.errors import ReplayedSpendError
from pate_stab.models.networks import ModelSpec, build_model
from pate_stab.privacy.accounting.events import PureDpEvent, SelfComposedEvent
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.alibi import ALIBI_RESOLUTION, alibi_event, alibi_scale
from pate_stab.privacy.mechanisms.randomized_response import rr_event
from pate_stab.privacy.noise.discrete import RandomSource, SeededRandomSource, SystemRandomSource
from pate_stab.run.config import FEATURE_DATASETS, IMAGE_DIRECT_LEARNERS, LABEL_DIRECT_LEARNERS, TransferConfig
from pate_stab.run.direct_size import dpsgd_public_size, public_size_source
from pate_stab.run.prepare import Prepared
from pate_stab.run.reference import at_or_below, reference_words
from pate_stab.run.release import release_spend_id
from pate_stab.run.report import PlannedSpend
from pate_stab.run.student_file import PublishedStudent
from pate_stab.run.units import best_per_epsilon, learner_unit, row_unit

__all__ = [
    "DIRECT_LEARNERS",
    "DIRECT_RELATIONS",
    "HEAD_LAMBDA",
    "NOISE_KINDS",
    "NORM_QUANTILE",
    "check_direct_config",
    "check_direct_inputs",
    "check_direct_learners",
    "check_label_learners",
    "direct_legend",
    "direct_plan_text",
    "direct_planned_spend",
    "direct_student",
    "dpsgd_settings",
    "privacy_unit",
    "replace_one_equivalent",
    "run_direct",
]

DIRECT_LEARNERS = {
    "objective-softmax": "softmax head, objective perturbation (Chaudhuri et al. 2011 Alg 2, C classes at once)",
    "output-softmax": "softmax head, output perturbation (Chaudhuri et al. 2011 Alg 1, C classes at once)",
    "objective-ovr": "one-vs-rest logistic heads, objective perturbation, ε/C per class",
    "output-ovr": "one-vs-rest logistic heads, output perturbation, ε/C per class",
    "dpsgd-linear": "DP-SGD, linear softmax layer (Abadi et al. 2016; Tramèr & Boneh 2021 settings; Opacus accountant)",
    "dpsgd-cnn": "DP-SGD, Tramèr & Boneh 2021's tanh CNN on the raw images (their settings; Opacus engine)",
    **LABEL_DP_LEARNERS,
}
"""The direct private learners a run offers (the names of :data:`pate_stab.run.config.DIRECT_LEARNER_NAMES`)."""
DIRECT_RELATIONS = {
    name: "add_remove" if name.startswith("dpsgd") else "replace_one" if name in LABEL_DIRECT_LEARNERS else "either"
    for name in DIRECT_LEARNERS
}
"""The neighbouring relation each learner's guarantee holds under ("either": the run's; the label-DP
learners: one example's label replaced; module docstring)."""
HEAD_LAMBDA = 1e-3
"""λ of the convex heads, fixed in advance (module docstring)."""
NORM_QUANTILE = 0.99
"""The convex heads' feature bound R: this quantile of the public pool's row norms."""
NOISE_KINDS = {
    "output": "exact: discrete Laplace on a power-of-two lattice (Canonne, Kamath & Steinke 2020, Alg 2), "
    "calibrated to the ℓ2 bound's ℓ1 sensitivity plus the rounding's",
    "objective": "floating point: l2-Laplace vector from a torch generator (the analysis needs a noise density; "
    "no exact sampler of it is implemented)",
    "dpsgd": "floating point: Gaussian from a torch generator, Opacus secure_mode noise in secure runs (no exact "
    "sampler; torchcsprng is not used)",
    "rr": "exact: rational keep probabilities below e^ε/(e^ε + k − 1) and uniform integer draws by rejection "
    "(pate_stab.privacy.mechanisms.randomized_response)",
    "alibi": "exact: discrete Laplace on the scaled one-hot label (Canonne, Kamath & Steinke 2020, Alg 2; "
    "pate_stab.privacy.mechanisms.alibi)",
}
"""The kind of noise each family of direct learners draws (module docstring), by name prefix."""
_NOISE_NOTES = {
    "output": "exact lattice Laplace noise",
    "objective": "floating-point l2-Laplace noise that has no exact sampler",
    "dpsgd": "floating-point Gaussian noise",
    "rr": "exact randomised response",
    "alibi": "exact discrete Laplace noise",
}
_METHODS = {"output": "output perturbation", "objective": "objective perturbation", "dpsgd": "DP-SGD",
            "rr": "randomised response with a prior (Ghazi et al. 2021)",
            "alibi": "ALIBI, Laplace noise on one-hot labels (Malek et al. 2021)"}  # fmt: skip
_RELATION_WORDS = {"add_remove": "one person's record is added or removed",
                   "replace_one": "one person's record is replaced",
                   "label": "one example's label is replaced (its input public)"}  # fmt: skip
_DPSGD = DPSGDConfig()
_RELATION_NAMES = {"add_remove": "add/remove", "replace_one": "replace-one"}


def check_direct_learners(names: object, *, dataset: str | None = None) -> list[str]:
    """The learners as a list, or ValueError naming the unknown ones, or an image learner asked
    of a bundled ``dataset`` without images (before any data are loaded)."""
    if isinstance(names, str) or not isinstance(names, list | tuple):
        raise TypeError(f"direct learners must be a list of names, got {type(names).__name__}")
    bad = [n for n in names if n not in DIRECT_LEARNERS]
    if bad:
        raise ValueError(f"unknown direct learners {bad}; choose from {', '.join(DIRECT_LEARNERS)}")
    on_images = [n for n in names if n in IMAGE_DIRECT_LEARNERS]
    if on_images and dataset in FEATURE_DATASETS:
        raise ValueError(f"{', '.join(on_images)} trains a CNN on images; dataset {dataset!r} has none "
                         "(feature vectors or a table)")  # fmt: skip
    return list(names)


def replace_one_equivalent(*, epsilon: float, delta: float, neighbouring: str) -> tuple[float, float]:
    """(ε, δ) under replace-one: unchanged for replace-one; (2ε, (1 + e^ε) δ) from add/remove.

    Group privacy (Dwork & Roth 2014, Thm 2.2, for (ε, δ): k = 2 gives (2ε, (1 + e^ε) δ)):
    replacing a record is removing it and adding another.

    Example:
        >>> replace_one_equivalent(epsilon=1.0, delta=1e-5, neighbouring="add_remove")
        (2.0, 3.718281828459045e-05)
    """
    if neighbouring == "replace_one":
        return epsilon, delta
    if neighbouring != "add_remove":
        raise ValueError(f"neighbouring must be 'add_remove' or 'replace_one', got {neighbouring!r}")
    return 2.0 * epsilon, (1.0 + math.exp(epsilon)) * delta


def direct_planned_spend(config: Any, learner: str, epsilon: float, repeat: int = 0) -> PlannedSpend:
    """What a direct learner's spend will cost, before anything is trained: DP-SGD's target (ε, δ)
    under add/remove (its accountant's ε is at most the target), a head's (ε, 0) under the run's relation."""
    spend_id = release_spend_id(config.run_name, learner, epsilon, repeat)
    unit = learner_unit(learner)
    if learner.startswith("dpsgd"):
        return PlannedSpend(spend_id, float(epsilon), float(config.delta), "add_remove", unit)
    if learner in LABEL_DIRECT_LEARNERS:
        return PlannedSpend(spend_id, float(epsilon), 0.0, DIRECT_RELATIONS[learner], unit)
    return PlannedSpend(spend_id, float(epsilon), 0.0, unit=unit)


def _relation(prep: Prepared, learner: str) -> str:
    """The relation a learner's spend holds under in this run (the heads: the run's)."""
    relation = DIRECT_RELATIONS[learner]
    return prep.config.neighbouring if relation == "either" else relation


def _generator(prep: Prepared, spend_id: str) -> tuple[torch.Generator, str]:
    if prep.config.releaser_noise == "secure":
        return torch.Generator().manual_seed(secrets.randbits(63)), "secure (generator seeded from the OS)"
    seed = _seed(prep, spend_id)
    return torch.Generator().manual_seed(seed), "seeded (research: no privacy against anyone who knows the seed)"


def dpsgd_settings(config: TransferConfig, learner: str) -> DPSGDConfig:
    """The DP-SGD settings of ``learner`` for this run, from its configuration only.

    ``dpsgd-linear``: Tramèr & Boneh 2021's (:class:`DPSGDConfig`) with the expected batch size
    B of :func:`~pate_stab.direct.dpsgd.default_batch_size` for the public size N; ``dpsgd-cnn``:
    its data set's settings (:func:`pate_stab.direct.cnn.cnn_dpsgd_config`) with B at most that
    rule's. The run's ``dpsgd_batch_size``, ``dpsgd_epochs`` (``dpsgd_cnn_epochs`` first, for the
    CNN) and ``dpsgd_lr`` replace them where set.

    Raises:
        ValueError: a default B is needed and N is not known (own data without ``private_size_hint``).
    """
    if learner == "dpsgd-cnn":
        base = cnn.cnn_dpsgd_config(config.dataset, config.dpsgd_cnn_epochs or config.dpsgd_epochs)
    else:
        base = replace(_DPSGD, epochs=config.dpsgd_epochs or _DPSGD.epochs)
    batch = config.dpsgd_batch_size
    if batch is None:
        batch = default_batch_size(dpsgd_public_size(config), cap=base.expected_batch_size)
    return replace(base, expected_batch_size=batch, lr=config.dpsgd_lr or base.lr)


def check_direct_config(config: TransferConfig, learners: Sequence[str], dpsgd: DPSGDConfig | None = None) -> None:
    """What the configuration alone decides, checked before any data are read or teachers trained:
    the public size N of DP-SGD and the heads (own data need ``private_size_hint``; the label-DP
    learners read none and are not asked for it), DP-SGD's expected batch size B ≤ N; a GPU asked of
    ``dpsgd-cnn`` where there is none; a label-DP learner
    (:data:`~pate_stab.run.config.LABEL_DIRECT_LEARNERS`) in a run whose privacy unit is not ``label``
    or whose relation is not replace-one."""
    check_label_learners(config, learners)
    for learner in (n for n in learners if n.startswith("dpsgd")):
        check_public_size(dpsgd_public_size(config), dpsgd or dpsgd_settings(config, learner))
    if any(not n.startswith("dpsgd") and n not in LABEL_DIRECT_LEARNERS for n in learners):
        dpsgd_public_size(config)  # the heads' N (module docstring): own data need private_size_hint
    if any(n in IMAGE_DIRECT_LEARNERS for n in learners):
        cnn.resolve_device(config.accelerator)


def direct_plan_text(config: TransferConfig) -> str:
    """What a direct learner's run will do, from its configuration alone (no data read): the learner,
    its one spend and relation, and DP-SGD's schedule from the public size N. It replaces the
    teacher–student plan (:mod:`pate_stab.aggregation.plan`), which does not apply: no teachers, no queries."""
    learner = config.aggregator
    relation = DIRECT_RELATIONS[learner]
    relation = config.neighbouring if relation == "either" else relation
    words = _RELATION_WORDS["label" if learner in LABEL_DIRECT_LEARNERS else relation]
    delta = f", δ={config.delta:g}" if learner.startswith("dpsgd") else ""
    lines = [
        f"plan: {learner} trains directly on the private split: {DIRECT_LEARNERS[learner]}. No teachers, no "
        f"queries and no vote gap: one spend of ε={config.epsilon:g}{delta}, private when {words}; its test accuracy "
        "is measured on the evaluation split, beside the majority-class reference"
    ]
    if learner.startswith("dpsgd"):
        settings = dpsgd_settings(config, learner)
        size = dpsgd_public_size(config)
        q, steps = engine_schedule(size, settings) if learner == "dpsgd-cnn" else dpsgd_schedule(size, settings)
        lines.append(
            f"  DP-SGD: public size N={size} ({public_size_source(config)}), expected batch B="
            f"{settings.expected_batch_size}, sampling rate q={q:.4g}, {steps} steps, clipping norm "
            f"{settings.max_grad_norm:g}, learning rate {settings.lr:g}"
        )
    elif learner not in LABEL_DIRECT_LEARNERS:
        lines.append(
            f"  convex head: λ={HEAD_LAMBDA:g}, public size N={dpsgd_public_size(config)} "
            f"({public_size_source(config)}); features scaled by a bound read from the public pool"
        )
    return "\n".join(lines)


def privacy_unit(config: TransferConfig) -> str:
    """The run's privacy unit: ``record`` (a record's input and label) or ``label`` (inputs public)."""
    return str(getattr(config, "privacy_unit", "record"))


def check_label_learners(config: TransferConfig, learners: Sequence[str]) -> None:
    """Refuse the label-DP learners where their guarantee is not the run's, before anything is spent.

    They protect labels only (ε-label-DP, one example's label replaced): a record-privacy run would
    publish a model whose inputs are unprotected, and an add/remove ledger cannot count a replace-one
    spend (DESIGN.md facts 12, 13).
    """
    label_only = [n for n in learners if n in LABEL_DIRECT_LEARNERS]
    if not label_only:
        return
    names = ", ".join(label_only)
    if privacy_unit(config) != "label":
        raise ValueError(
            f"{names} {'is' if len(label_only) == 1 else 'are'} label-DP only (randomised response protects the "
            f"labels, not the inputs); this run's privacy unit is {privacy_unit(config)!r}. Set privacy_unit: label "
            "where the private inputs are public, or leave these learners out"
        )
    if config.neighbouring != "replace_one":
        raise ValueError(
            f"{names}: ε-label-DP holds when one example's label is replaced (Ghazi et al. 2021, Def 1); this run's "
            f"ledger counts neighbouring={config.neighbouring!r}, which cannot count a replace-one spend. Set "
            "neighbouring: replace_one"
        )


def _seed(prep: Prepared, spend_id: str) -> int:
    digest = hashlib.sha256(f"{prep.config.seed}|{spend_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _exact_source(prep: Prepared, spend_id: str) -> RandomSource:
    """The random bits of the exact samplers: the OS's CSPRNG, or (seeded runs) a source derived
    from the run's seed and the spend id, independent of :func:`_generator`'s stream."""
    if prep.config.releaser_noise == "secure":
        return SystemRandomSource()
    return SeededRandomSource(_seed(prep, spend_id + "|exact"))


def _noise_family(learner: str) -> str:
    return learner.split("-", 1)[0]


def _noise_note(learner: str, meta: dict[str, Any]) -> str:
    """What the row's note says about its noise (a model recorded before ``noise_kind`` drew float noise)."""
    if "noise_kind" not in meta:
        return "floating-point noise (a model recorded before the exact samplers)"
    note = _NOISE_NOTES[_noise_family(learner)]
    if learner.startswith("dpsgd"):
        note += " in Opacus's secure mode" if meta.get("secure_mode") else " (a seeded run, without secure mode)"
    return note


def direct_note(learner: str, meta: dict[str, Any]) -> str:
    """A direct row's note: one plain sentence with its README pointer. It names the method, the
    relation and the kind of noise; the parameters (σ, q, steps, clip, λ, R, ...) are the row's
    ``settings`` (the spend's metadata: fixed by the configuration and public data alone)."""
    on = " as a CNN on images" if learner == "dpsgd-cnn" else ""
    words = _RELATION_WORDS["label" if meta.get("privacy_unit") == "label" else meta["neighbouring"]]
    return (
        f"Trained directly on the private data by {_METHODS[_noise_family(learner)]}{on}, private when "
        f"{words}, with {_noise_note(learner, meta)} (README: Privacy notes)."
    )


def check_direct_inputs(prep: Prepared, learners: Sequence[str], dpsgd: DPSGDConfig | None = None) -> None:
    """What ``learners`` train on, checked before anything is spent: finite features (or, for the
    image learners, finite images of a size the CNN takes) in every split, labels in [0, C); and
    :func:`check_direct_config`."""
    check_direct_config(prep.config, learners, dpsgd)
    task = prep.task
    if any(n not in IMAGE_DIRECT_LEARNERS for n in learners):
        for name, x in (("private", task.private_x), ("public", task.public_x), ("evaluation", task.eval_x)):
            if x.dim() != 2:
                raise ValueError(f"direct learners need feature vectors; the {name} inputs have shape {tuple(x.shape)}")
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"the {name} features contain NaN or infinite values")
    if any(n in IMAGE_DIRECT_LEARNERS for n in learners):
        for name, images in _image_splits(prep):
            if images is None:
                raise ValueError(
                    f"dpsgd-cnn trains a CNN on images; the {name} data of this run ({prep.config.dataset!r}) are "
                    "feature vectors or a table, not images"
                )
            cnn.as_images(images, name=f"{name} images")
    check_class_labels(task.private_y, num_classes=task.num_classes, n=task.private_x.shape[0], name="private labels")


def _image_splits(prep: Prepared) -> list[tuple[str, Tensor | None]]:
    t = prep.task
    return [("private", t.private_images), ("public", t.public_images), ("evaluation", t.eval_images)]


def _dpsgd_config(prep: Prepared, learner: str, dpsgd: DPSGDConfig | None) -> DPSGDConfig:
    """The given settings, else the run's (:func:`dpsgd_settings`; unused by the convex heads)."""
    if dpsgd is not None:
        return dpsgd
    return dpsgd_settings(prep.config, learner) if learner.startswith("dpsgd") else _DPSGD


def _head_inputs(prep: Prepared) -> tuple[float, Tensor]:
    """R from the public pool and the private rows divided by R, projected onto the unit ball."""
    norms = torch.linalg.vector_norm(prep.task.public_x.double(), dim=1)
    bound = float(torch.quantile(norms, NORM_QUANTILE))
    return bound, _scale(prep.task.private_x, bound)


def _scale(x: Tensor, bound: float) -> Tensor:
    x = x.double() / bound
    return x / torch.linalg.vector_norm(x, dim=1, keepdim=True).clamp(min=1.0)


def _pool_standardiser(prep: Prepared) -> tuple[Tensor, Tensor]:
    pool = prep.task.public_x.float()
    return pool.mean(dim=0), pool.std(dim=0).clamp(min=1e-6)


def _plan(prep: Prepared, learner: str, epsilon: float, dpsgd: DPSGDConfig) -> tuple[float, float, Any, dict[str, Any]]:
    """What the spend costs and says, before any noise: (ε, δ, event, metadata)."""
    c = prep.task.num_classes
    # no private count here: under add/remove it is private (DESIGN.md fact 8; private diagnostics hold it)
    meta: dict[str, Any] = {"learner": learner, "neighbouring": _relation(prep, learner)}
    if learner.startswith("dpsgd"):
        size = dpsgd_public_size(prep.config)  # public: q, steps, σ and the divisor come from it, never from n
        meta.update({"public_size": size, "public_size_source": public_size_source(prep.config)})
        if learner == "dpsgd-cnn":  # Opacus's loader rule on N: q = 1 / ⌈N / B⌉
            q, steps = engine_schedule(size, dpsgd)
            shape = cnn.as_images(prep.task.private_images, name="private images").shape[1:]
            meta.update({"architecture": cnn.ARCHITECTURE, "input_shape": list(shape),
                         "inputs": "raw private images (no feature stage)"})  # fmt: skip
        else:
            q, steps = dpsgd_schedule(size, dpsgd)
            meta["features"] = "standardised with public-pool statistics"
        sigma = dpsgd_noise_multiplier(epsilon=epsilon, delta=prep.config.delta, sample_rate=q, steps=steps)
        spent = dpsgd_epsilon(noise_multiplier=sigma, sample_rate=q, steps=steps, delta=prep.config.delta)
        meta.update({"dpsgd": dpsgd.to_dict(), "noise_multiplier": sigma, "sample_rate": q, "steps": steps,
                     "accountant": "opacus RDPAccountant"})  # fmt: skip
        # the sampled-Gaussian steps themselves; the charge is Opacus's RDP ε, which the ledger checks they imply
        return spent, prep.config.delta, dpsgd_event(noise_multiplier=sigma, sample_rate=q, steps=steps), meta
    if learner == "alibi":
        meta.update({"privacy_unit": "label",
                     "relation": "one example's label replaced; inputs public (Malek et al. 2021)",
                     "randomiser": "M·onehot(y) + discrete Laplace on each coordinate, each label once",
                     "resolution": ALIBI_RESOLUTION, "noise_scale": str(alibi_scale(epsilon)),
                     "posterior": "uniform prior (no iterations)", "classes": c,
                     "model": "linear softmax on the posterior (soft labels), full-batch L-BFGS",
                     "weight_decay": LABEL_DP_WEIGHT_DECAY, "max_iter": LABEL_DP_MAX_ITER,
                     "features": "standardised with public-pool statistics"})  # fmt: skip
        return epsilon, 0.0, alibi_event(epsilon), meta
    if learner in LABEL_DIRECT_LEARNERS:
        meta.update({"privacy_unit": "label",
                     "relation": "one example's label replaced; inputs public (Ghazi et al. 2021, Def 1)",
                     "randomiser": "RRWithPrior (Ghazi et al. 2021, Alg 2), each label once",
                     "prior": "uniform (C-ary randomised response)" if learner == "rr-lp1st" else
                     "half 1: uniform; half 2: the half-1 model's prediction, corrected for the RR channel",
                     "stages": 1 if learner == "rr-lp1st" else 2, "classes": c,
                     "model": "linear softmax, full-batch L-BFGS", "weight_decay": LABEL_DP_WEIGHT_DECAY,
                     "max_iter": LABEL_DP_MAX_ITER,
                     "features": "standardised with public-pool statistics"})  # fmt: skip
        return epsilon, 0.0, rr_event(epsilon), meta
    bound, _ = _head_inputs(prep)
    meta.update({"lam": HEAD_LAMBDA, "loss": "logistic", "feature_bound": bound,
                 "feature_bound_source": f"public pool, {NORM_QUANTILE} quantile of row norms; rows clipped",
                 "classes": c, "public_size": dpsgd_public_size(prep.config),
                 "public_size_source": public_size_source(prep.config),
                 "objective": "(1/N) Σ loss + (λ/2)||w||², N the public size"})  # fmt: skip
    # softmax: one ε-DP head; one-vs-rest: C binary heads at ε/C each on the same records, composed
    event = PureDpEvent(epsilon) if learner.endswith("softmax") else SelfComposedEvent(PureDpEvent(epsilon / c), c)
    return epsilon, 0.0, event, meta


def _train(
    prep: Prepared,
    learner: str,
    epsilon: float,
    generator: torch.Generator,
    dpsgd: DPSGDConfig,
    meta: dict[str, Any],
    source: RandomSource,
) -> dict[str, Any]:
    """The trained model; output perturbation draws its (exact) noise from ``source``."""
    task = prep.task
    secure_mode = bool(meta.get("secure_mode", False))
    if learner == "dpsgd-cnn":
        assert task.private_images is not None  # check_direct_inputs
        device = cnn.resolve_device(prep.config.accelerator)
        trained = cnn.train_dpsgd_cnn(task.private_images, task.private_y, num_classes=task.num_classes,
                                      epsilon=epsilon, delta=prep.config.delta, generator=generator, config=dpsgd,
                                      public_size=meta["public_size"], device=device,
                                      secure_mode=secure_mode)  # fmt: skip
        ran, planned = (trained.noise_multiplier, trained.sample_rate, trained.steps), (
            meta["noise_multiplier"], meta["sample_rate"], meta["steps"])  # fmt: skip
        if ran != planned:  # the ledger recorded what was planned
            raise RuntimeError(f"DP-SGD ran at (σ, q, steps) = {ran}, the spend recorded {planned}")
        return cnn.cnn_state(trained, task.num_classes)
    if learner in LABEL_DIRECT_LEARNERS:
        mean, std = _pool_standardiser(prep)
        common: dict[str, Any] = {"num_classes": task.num_classes, "epsilon": epsilon, "mean": mean, "std": std,
                                  "source": source}  # fmt: skip
        if learner == "rr-lp1st":
            trained = train_lp_1st(task.private_x, task.private_y, **common)
        elif learner == "alibi":
            trained = train_alibi(task.private_x, task.private_y, **common)
        else:  # the halves from the run's generator: independent of the labels
            trained = train_lp_2st(task.private_x, task.private_y, generator=generator, **common)
        return {"kind": "linear", "weight": trained.weight, "bias": trained.bias, "mean": mean, "std": std,
                "epsilon": epsilon}  # fmt: skip
    if learner == "dpsgd-linear":
        mean, std = _pool_standardiser(prep)
        model = train_dpsgd_linear((task.private_x.float() - mean) / std, task.private_y,
                                   num_classes=task.num_classes, epsilon=epsilon, delta=prep.config.delta,
                                   generator=generator, public_size=meta["public_size"], config=dpsgd,
                                   secure_mode=secure_mode)  # fmt: skip
        if (model.noise_multiplier, model.sample_rate, model.steps) != (
            meta["noise_multiplier"], meta["sample_rate"], meta["steps"]):  # fmt: skip
            raise RuntimeError("DP-SGD ran at other (σ, q, steps) than the spend recorded")
        return {"kind": "linear", "weight": model.weight, "bias": model.bias, "mean": mean, "std": std,
                "epsilon": model.epsilon}  # fmt: skip
    bound, x = _head_inputs(prep)
    # the objective with the public divisor N through the (1/n)-normalised solvers (module docstring)
    lam = public_divisor_lambda(HEAD_LAMBDA, public_size=meta["public_size"], private_size=x.shape[0])
    # output perturbation draws exact lattice noise from ``source``; objective perturbation float noise
    exact = learner.startswith("output")
    if learner.endswith("-softmax"):
        kwargs: dict[str, Any] = {"num_classes": task.num_classes, "epsilon": epsilon, "lam": lam,
                                  "generator": generator}  # fmt: skip
        if exact:
            m = softmax_output_perturbation(x, task.private_y, exact_noise=source, **kwargs)
        else:
            m = softmax_objective_perturbation(x, task.private_y, **kwargs)
        weight = m.weights
    else:
        # one-vs-rest over the public class list range(C), not the classes present in the private
        # labels (PrivateLinearHead.fit reads those from the data): ε/C per class, basic composition
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
        weight = torch.stack(heads)
    c = task.num_classes
    return {"kind": "linear", "weight": weight, "bias": torch.zeros(c, dtype=weight.dtype), "bound": bound,
            "epsilon": epsilon}  # fmt: skip


def _predict(model: dict[str, Any], x: Tensor, prep: Prepared) -> Tensor:
    if model.get("kind") == "cnn":
        return cnn.cnn_predict(model, x, device=cnn.resolve_device(prep.config.accelerator))
    if "mean" in model:
        z = (x.float() - model["mean"]) / model["std"]
        return torch.argmax(z @ model["weight"].T + model["bias"], dim=1)
    return torch.argmax(_scale(x, model["bound"]) @ model["weight"].T.double(), dim=1)


def direct_student(model: dict[str, Any], prep: Prepared, learner: str, *, spend_id: str) -> PublishedStudent:
    """A direct learner's model as a self-contained student (:mod:`pate_stab.run.student_file`): the
    network with the run's public preprocessing and the learner's own public map (the pool's
    standardisation, or the heads' bound R and unit ball), so that ``predict`` takes raw inputs.

    Everything in it is the mechanism's output (the weights) or public (the maps are fitted on the
    public pool; the schema and class names are declared)."""
    task = prep.task
    c = task.num_classes
    names = task.class_names if task.class_names is not None else tuple(str(i) for i in range(c))
    config = {"learner": learner, "spend_id": spend_id, "epsilon": float(model["epsilon"]), "kind": "direct"}
    if model.get("kind") == "cnn":
        shape = tuple(int(v) for v in model["in_shape"])
        inputs = dict(task.inputs) or {"kind": "images", "shape": list(shape)}
        spec = ModelSpec("cnn", input_shape=shape, num_classes=c)
        return PublishedStudent(cnn.cnn_from_state(model), spec, tuple(names), inputs, [{"op": "as_images"}],
                                "direct", config, network_kind="tanh-cnn")  # fmt: skip
    weight, bias = model["weight"].detach().float(), model["bias"].detach().float()
    spec = ModelSpec("logistic", input_shape=(int(weight.shape[1]),), num_classes=c)
    network = build_model(spec)
    layer = network[1][-1]  # type: ignore[index]
    with torch.no_grad():
        layer.weight.copy_(weight)
        layer.bias.copy_(bias)
    network.eval()
    own = ({"op": "standardize", "mean": model["mean"], "std": model["std"], "fitted_on": "public pool"}
           if "mean" in model else {"op": "unit_ball", "bound": float(model["bound"])})  # fmt: skip
    inputs = dict(task.inputs) or {"kind": "arrays", "shape": list(task.public_x.shape[1:])}
    return PublishedStudent(network, spec, tuple(names), inputs, [*task.preprocess, own], "direct", config)


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def run_direct(
    prep: Prepared,
    ledger: PrivacyLedger,
    *,
    learner: str,
    epsilon: float,
    repeat: int = 0,
    dpsgd: DPSGDConfig | None = None,
    student_file: str | None = None,
) -> dict[str, Any]:
    """Train (or replay) one direct learner at ``epsilon`` and return its compare row.

    The model file under ``direct/`` is self-contained (:func:`direct_student`: it loads with
    :func:`pate_stab.load_student`); ``student_file``, a path relative to the run folder
    (``students/<learner>_eps<ε>_r<r>.pt`` for a compare row, ``student.pt`` for a transfer), gets the
    same student (also from a replayed model written before the files held their preprocessing),
    and the row names it (``student_file``).

    ``dpsgd``: DP-SGD settings (default: Tramèr & Boneh 2021's: :class:`DPSGDConfig` for
    ``dpsgd-linear``, :func:`pate_stab.direct.cnn.cnn_dpsgd_config` of the run's data set and
    ``dpsgd_cnn_epochs`` for ``dpsgd-cnn``); q, steps and σ are computed from the public size N
    (:mod:`pate_stab.run.direct_size`), which must be at least the expected batch size (by default
    computed from N: :func:`dpsgd_settings`).

    Raises:
        ValueError: unknown learner, ε ≤ 0, NaN features or labels outside [0, C), ``dpsgd-cnn`` on
            data without images, DP-SGD on own data without ``private_size_hint`` or with N below
            the expected batch size — before any spend.
        ReplayedSpendError: the spend is recorded without its model (a crash during training);
            nothing is trained again under it.
        BudgetExhaustedError: the ledger's budget would be exceeded; nothing trained.
    """
    check_direct_learners([learner])
    epsilon = check_epsilon(epsilon)
    repeat = check_int("repeat", repeat, minimum=0)
    check_direct_inputs(prep, [learner], dpsgd)
    dpsgd = _dpsgd_config(prep, learner, dpsgd)
    spend_id = release_spend_id(prep.config.run_name, learner, epsilon, repeat)
    folder = prep.run_dir / "direct"
    entry = ledger.entry(spend_id)
    if entry is not None:
        if not entry.has_result:
            raise ReplayedSpendError(
                f"spend {spend_id!r} is recorded but its model is not (training was interrupted); a spend id buys "
                "one draw of noise, so nothing is trained again under it. Start a new run for a new model."
            )
        result = entry.result
        path = folder / result["model"]
        if not path.is_file() or _sha256(path) != result["sha256"]:
            raise ReplayedSpendError(f"the model recorded for {spend_id!r} is missing or altered ({path})")
        model = torch.load(path, weights_only=True)
        reused = True
    else:
        charge_eps, charge_delta, event, meta = _plan(prep, learner, epsilon, dpsgd)
        generator, noise = _generator(prep, spend_id)
        meta["noise"] = noise
        meta["noise_kind"] = NOISE_KINDS[_noise_family(learner)]
        if learner.startswith("dpsgd"):
            meta["secure_mode"] = prep.config.releaser_noise == "secure"
        ledger.spend(spend_id, epsilon=charge_eps, delta=charge_delta, event=event, mechanism=learner, metadata=meta,
                     relation=meta["neighbouring"], unit=learner_unit(learner))  # fmt: skip
        model = _train(prep, learner, epsilon, generator, dpsgd, meta, _exact_source(prep, spend_id))
        # the self-contained student beside the model's own fields (load_student reads the file)
        model |= direct_student(model, prep, learner, spend_id=spend_id).record()
        folder.mkdir(parents=True, exist_ok=True)
        name = spend_id.replace(":", "_").replace("=", "-") + ".pt"
        tmp = folder / (name + ".tmp")
        torch.save(model, tmp)
        tmp.replace(folder / name)
        ledger.record_result(spend_id, {"model": name, "sha256": _sha256(folder / name), "epsilon": charge_eps,
                                        "delta": charge_delta, "metadata": meta})  # fmt: skip
        result = {"epsilon": charge_eps, "delta": charge_delta, "metadata": meta}
        reused = False
    if student_file is not None:
        direct_student(model, prep, learner, spend_id=spend_id).save(prep.run_dir / student_file)
    task = prep.task
    # the CNN reads the images, the other learners the features
    on_images = learner in IMAGE_DIRECT_LEARNERS
    eval_x, pool_x = (task.eval_images, task.public_images) if on_images else (task.eval_x, task.public_x)
    assert eval_x is not None and pool_x is not None  # check_direct_inputs
    # None where the labels do not exist (own data: no evaluation set, a pool without labels)
    eval_acc = float((_predict(model, eval_x, prep) == task.eval_y).double().mean()) if task.eval_y.numel() else None
    pool_acc = None
    if task.public_y is not None:
        pool_acc = float((_predict(model, pool_x, prep) == task.public_y).double().mean())
    meta = result["metadata"]
    relation = meta["neighbouring"]
    # a head's ε holds under either relation (module docstring); DP-SGD's add/remove ε converts by group privacy
    held = "replace_one" if DIRECT_RELATIONS[learner] == "either" else relation
    eps_r1, delta_r1 = replace_one_equivalent(epsilon=result["epsilon"], delta=result["delta"], neighbouring=held)
    note = direct_note(learner, meta)
    return {
        "aggregator": learner,
        "kind": "direct",
        "repeat": repeat,
        "target_epsilon": epsilon,
        "epsilon": result["epsilon"],
        "delta": result["delta"],
        "neighbouring": relation,
        # the unit the run ranks the row under, and the unit of the learner's own guarantee (pate_stab.run.units)
        "privacy_unit": meta.get("privacy_unit", privacy_unit(prep.config)),
        "guarantee_unit": learner_unit(learner),
        "epsilon_replace_one": eps_r1,
        "delta_replace_one": delta_r1,
        "seen": None,
        "answered": None,
        "label_acc": None,
        "student_acc": eval_acc,
        "student_acc_unlabelled_pool": pool_acc,
        "spend_id": spend_id,
        "reused": reused,
        "student_file": student_file,
        "settings": meta,
        "note": note,
    }


def direct_legend(rows: list[dict[str, Any]], *, run_neighbouring: str, reference: dict[str, Any] | None = None) -> str:
    """How to read a table with direct rows: columns, relations, the cumulative cost, the best row per ε
    (a best row at or below the majority-class ``reference`` is named as such: :mod:`pate_stab.run.reference`)."""
    # name only the columns the table shows (compare_table.format_rows leaves out empty ones)
    empty = ["label_acc"] if all(r.get("label_acc") is None for r in rows) else []
    dashes = " / ".join(c for c in ("seen", "answered", "label_acc") if c not in empty)
    lines = [  # one plain sentence each, with its README pointer
        f"The direct rows are trained on the private split itself with no teachers or queries, so {dashes} are '-' "
        "and student_acc is the model's own accuracy on the evaluation split (README: Privacy notes).",
        f"The releasers and convex heads are private under the run's {_RELATION_NAMES[run_neighbouring]} relation and "
        "DP-SGD under add/remove, which counts as (2ε, (1 + e^ε)δ) under replace-one (README: Privacy notes).",
    ]
    if any(r.get("privacy_unit") == "label" for r in rows if r.get("aggregator") in LABEL_DIRECT_LEARNERS):
        lines.append(
            f"The {', '.join(n for n in LABEL_DIRECT_LEARNERS if any(r.get('aggregator') == n for r in rows))} rows "
            "are label-DP only: private when one example's label is replaced, their inputs public "
            "(docs/label_dp_learners.md)."
        )
    by_relation: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_relation.setdefault(r.get("neighbouring") or run_neighbouring, []).append(r)
    parts = [
        f"{len(rs)} {_RELATION_NAMES[rel]} rows with Σε = {math.fsum(r['epsilon'] for r in rs):.4g} and "
        f"Σδ = {math.fsum(r['delta'] for r in rs):.3g}"
        for rel, rs in sorted(by_relation.items())
    ]
    conv = [
        (r["epsilon_replace_one"], r["delta_replace_one"])
        if "epsilon_replace_one" in r
        else replace_one_equivalent(
            epsilon=r["epsilon"], delta=r["delta"], neighbouring=r.get("neighbouring") or run_neighbouring
        )
        for r in rows
    ]
    lines.append(
        f"The cumulative cost of all {len(rows)} rows by basic composition is {', '.join(parts)}, or "
        f"ε = {math.fsum(e for e, _ in conv):.4g} and δ = {math.fsum(d for _, d in conv):.3g} all as replace-one "
        "(README: Privacy notes)."
    )
    # each privacy unit ranked apart, its unit shown (pate_stab.run.units)
    for unit in sorted({row_unit(r) for r in rows}):
        best = best_per_epsilon([r for r in rows if row_unit(r) == unit])
        line = f"best mean accuracy per ε ({unit} privacy): " + ", ".join(
            f"ε={eps:g}: {name} {acc:.4f}{' (direct)' if name in DIRECT_LEARNERS else ''}"
            + (" (no better than the majority class)" if at_or_below(acc, reference) else "")
            for eps, (acc, name) in sorted(best.items())
        )
        beaten = [eps for eps, (acc, _) in sorted(best.items()) if at_or_below(acc, reference)]
        if reference is not None and beaten:
            line += (
                f". At ε = {', '.join(f'{e:g}' for e in beaten)} no row beats {reference_words(reference)}: "
                "use the majority class there, or more data or a larger ε"
            )
        lines.append(line)
    return "\n".join(lines)
