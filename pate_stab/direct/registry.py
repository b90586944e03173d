"""The direct learners' registry: one :class:`DirectSpec` per learner says everything that differs between them.

Its relation, the unit of its guarantee, the kind of noise it draws, whether it trains on images,
its DP-SGD settings (where it is DP-SGD) and the two functions of :mod:`pate_stab.direct.learners`
that plan its spend and train it. The pipeline (:mod:`pate_stab.run.direct`) reads a learner's spec
and never branches on its name.

The names agree with the run's vocabularies (``DIRECT_LEARNER_NAMES``, ``LABEL_DIRECT_LEARNERS``,
``IMAGE_DIRECT_LEARNERS`` of :mod:`pate_stab.run.config`; ``tests/direct/test_registry.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import torch

from pate_stab.direct import learners
from pate_stab.direct.dpsgd import DPSGDConfig, dpsgd_schedule
from pate_stab.direct.label_dp import LABEL_DP_LEARNERS
from pate_stab.direct.opacus_engine import engine_schedule
from pate_stab.direct.public_size import dpsgd_public_size, public_size_source
from pate_stab.privacy.noise.discrete import RandomSource

__all__ = [
    "DIRECT_LEARNERS",
    "DIRECT_RELATIONS",
    "DIRECT_SPECS",
    "NOISE_KINDS",
    "DirectSpec",
    "direct_spec",
    "dpsgd_settings",
]

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
"""The kind of noise each family of direct learners draws (:mod:`pate_stab.direct.learners`), by family."""
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

# (prep, ε, DP-SGD settings, the spend's metadata) → (ε, δ, event), filling the metadata
PlanFn = Callable[[Any, float, DPSGDConfig, dict[str, Any]], learners.Plan]
# (prep, ε, generator, DP-SGD settings, the spend's metadata, exact random source) → the model
TrainFn = Callable[[Any, float, torch.Generator, DPSGDConfig, dict[str, Any], RandomSource], dict[str, Any]]


@dataclass(frozen=True)
class DirectSpec:
    """One direct learner.

    Attributes:
        name: the learner's name (a ``compare --direct`` / ``aggregator`` value).
        description: one line for listings.
        relation: the neighbouring relation its guarantee holds under: ``"add_remove"`` (DP-SGD),
            ``"replace_one"`` (the label-DP learners: one example's label replaced) or ``"either"`` (the
            convex heads: the run's).
        unit: the unit of its own guarantee, ``"record"`` or ``"label"`` (inputs public).
        noise: its noise family, a key of :data:`NOISE_KINDS`.
        needs_images: it trains on the raw images (no feature stage), refused on data without them.
        plan: what its spend charges and records, before any noise.
        train: trains it.
        dpsgd_base: its DP-SGD settings from the run's configuration, before the batch size (None: not DP-SGD).
        schedule: (public size N, DP-SGD settings) → (sampling rate q, steps) (DP-SGD only).
        needs_public_size: it computes from the public size N (DP-SGD and the heads; own data need
            ``private_size_hint``).
        on_what: how its row's note names what it trains (e.g. " as a CNN on images").
    """

    name: str
    description: str
    relation: str
    unit: str
    noise: str
    needs_images: bool
    plan: PlanFn
    train: TrainFn
    dpsgd_base: Callable[[Any], DPSGDConfig] | None = None
    schedule: Callable[[int, DPSGDConfig], tuple[float, int]] | None = None
    needs_public_size: bool = True
    on_what: str = ""

    @property
    def is_dpsgd(self) -> bool:
        """DP-SGD: an (ε, δ) spend under add/remove, its settings from the run (:func:`dpsgd_settings`)."""
        return self.dpsgd_base is not None

    @property
    def noise_kind(self) -> str:
        """What its noise is, for the spend's metadata (:data:`NOISE_KINDS`)."""
        return NOISE_KINDS[self.noise]

    @property
    def noise_note(self) -> str:
        """Its noise in a few words, for the row's note."""
        return _NOISE_NOTES[self.noise]

    @property
    def method(self) -> str:
        """Its method in a few words, for the row's note."""
        return _METHODS[self.noise]

    def held_relation(self, run_relation: str) -> str:
        """The relation its spend holds under in a run whose ledger counts ``run_relation``."""
        return run_relation if self.relation == "either" else self.relation

    def plan_detail(self, config: Any) -> str | None:
        """The second line of its plan (:func:`pate_stab.run.direct.direct_plan_text`), from the configuration
        alone: DP-SGD's schedule from the public size N, a head's λ and N; none for the label-DP learners."""
        if self.schedule is not None:
            settings = dpsgd_settings(config, self.name)
            size = dpsgd_public_size(config)
            q, steps = self.schedule(size, settings)
            return (
                f"  DP-SGD: public size N={size} ({public_size_source(config)}), expected batch B="
                f"{settings.expected_batch_size}, sampling rate q={q:.4g}, {steps} steps, clipping norm "
                f"{settings.max_grad_norm:g}, learning rate {settings.lr:g}"
            )
        if self.needs_public_size:
            return (
                f"  convex head: λ={learners.HEAD_LAMBDA:g}, public size N={dpsgd_public_size(config)} "
                f"({public_size_source(config)}); features scaled by a bound read from the public pool"
            )
        return None


def _head(name: str, description: str, *, exact: bool, per_class: bool) -> DirectSpec:
    train = learners.train_ovr_heads if per_class else learners.train_softmax_head
    return DirectSpec(name, description, "either", "record", "output" if exact else "objective", False,
                      partial(learners.plan_head, per_class=per_class), partial(train, exact=exact))  # fmt: skip


def _label(name: str, noise: str, plan: PlanFn, train: TrainFn) -> DirectSpec:
    return DirectSpec(name, LABEL_DP_LEARNERS[name], "replace_one", "label", noise, False, plan, train,
                      needs_public_size=False)  # fmt: skip


DIRECT_SPECS: dict[str, DirectSpec] = {
    spec.name: spec
    for spec in (
        _head("objective-softmax", "softmax head, objective perturbation (Chaudhuri et al. 2011 Alg 2, C classes at "
              "once)", exact=False, per_class=False),
        _head("output-softmax", "softmax head, output perturbation (Chaudhuri et al. 2011 Alg 1, C classes at once)",
              exact=True, per_class=False),
        _head("objective-ovr", "one-vs-rest logistic heads, objective perturbation, ε/C per class", exact=False,
              per_class=True),
        _head("output-ovr", "one-vs-rest logistic heads, output perturbation, ε/C per class", exact=True,
              per_class=True),
        DirectSpec("dpsgd-linear", "DP-SGD, linear softmax layer (Abadi et al. 2016; Tramèr & Boneh 2021 settings; "
                   "Opacus accountant)", "add_remove", "record", "dpsgd", False, learners.plan_dpsgd_linear,
                   learners.train_dpsgd_linear_learner, dpsgd_base=learners.linear_dpsgd_base,
                   schedule=dpsgd_schedule),
        DirectSpec("dpsgd-cnn", "DP-SGD, Tramèr & Boneh 2021's tanh CNN on the raw images (their settings; Opacus "
                   "engine)", "add_remove", "record", "dpsgd", True, learners.plan_dpsgd_cnn,
                   learners.train_dpsgd_cnn_learner, dpsgd_base=learners.cnn_dpsgd_base, schedule=engine_schedule,
                   on_what=" as a CNN on images"),
        _label("rr-lp1st", "rr", partial(learners.plan_lp, stages=1), partial(learners.train_lp_learner, stages=1)),
        _label("rr-lp2st", "rr", partial(learners.plan_lp, stages=2), partial(learners.train_lp_learner, stages=2)),
        _label("alibi", "alibi", learners.plan_alibi, learners.train_alibi_learner),
    )
}  # fmt: skip
"""Every direct learner, in the order runs list them."""

DIRECT_LEARNERS = {name: spec.description for name, spec in DIRECT_SPECS.items()}
"""The direct private learners a run offers, with a line each (the names of ``DIRECT_LEARNER_NAMES``)."""
DIRECT_RELATIONS = {name: spec.relation for name, spec in DIRECT_SPECS.items()}
"""The neighbouring relation each learner's guarantee holds under ("either": the run's; the label-DP
learners: one example's label replaced)."""


def direct_spec(name: str) -> DirectSpec:
    """The learner's spec; ValueError naming the known ones for an unknown name."""
    spec = DIRECT_SPECS.get(name)
    if spec is None:
        raise ValueError(f"unknown direct learner {name!r}; choose from {', '.join(DIRECT_SPECS)}")
    return spec


def dpsgd_settings(config: Any, learner: str) -> DPSGDConfig:
    """The DP-SGD settings of ``learner`` for this run, from its configuration only.

    ``dpsgd-linear``: Tramèr & Boneh 2021's (:class:`DPSGDConfig`) with the expected batch size
    B of :func:`~pate_stab.direct.dpsgd.default_batch_size` for the public size N; ``dpsgd-cnn``:
    its data set's settings (:func:`pate_stab.direct.cnn.cnn_dpsgd_config`) with B at most that
    rule's. The run's ``dpsgd_batch_size``, ``dpsgd_epochs`` (``dpsgd_cnn_epochs`` first, for the
    CNN) and ``dpsgd_lr`` replace them where set.

    Raises:
        ValueError: ``learner`` is not DP-SGD; a default B is needed and N is not known (own data
            without ``private_size_hint``).
    """
    spec = direct_spec(learner)
    if spec.dpsgd_base is None:
        raise ValueError(f"{learner} is not a DP-SGD learner")
    return learners.dpsgd_run_settings(config, spec.dpsgd_base(config))
