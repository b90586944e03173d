"""The ``compare`` step that runs the direct private learners: one spend each, recorded before training, a row each.

The learners themselves (what each spends, how it trains, its relation, unit and noise) are
:mod:`pate_stab.direct`'s: :mod:`pate_stab.direct.registry` holds one spec per learner and this module
reads it, never a learner's name. The same feature stage (the run's features, fitted on the public
pool only), the same evaluation split, the same (ε, δ) targets and the same ledger as the aggregator
rows. Each learner is one spend with the id ``<run>:<learner>:eps=<ε>[:rep=<r>]``: the spend is
recorded *before* training (a crash over-counts, never under-counts), the trained model is written
to ``<run>/direct/`` and its SHA-256 recorded with the spend. A rerun replays the recorded model
(digest checked); a spend without a recorded model is refused (``ReplayedSpendError``), never
retrained under the old charge (DESIGN.md fact 7).

Relations. The ledger's header holds the run's relation, the ledger counts every spend under it
(:meth:`pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger.cost`), and every direct spend records its own in
its metadata (``neighbouring``) and every row states it. The heads spend under the run's relation;
DP-SGD under add/remove, which a replace-one ledger counts as (2ε, (1 + e^ε) δ) (group privacy over
the removal and the addition); a replace-one guarantee would imply no add/remove one, and an
add/remove ledger refuses it. Each row also carries its replace-one equivalent
(``epsilon_replace_one``, ``delta_replace_one``).

Randomness: the noise comes from the OS when the run's ``releaser_noise`` is ``"secure"``; with
``"seeded"`` (research) it is derived from the run's seed and the spend id, and carries no privacy
against anyone who knows the seed (the kind of noise each learner draws:
:data:`pate_stab.direct.registry.NOISE_KINDS`).
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pate_stab._checks import check_epsilon, check_int
from pate_stab.direct import cnn
from pate_stab.direct.dpsgd import DPSGDConfig, check_public_size
from pate_stab.direct.learners import DEFAULT_DPSGD, predict
from pate_stab.direct.public_size import dpsgd_public_size
from pate_stab.direct.registry import DIRECT_LEARNERS, DIRECT_SPECS, DirectSpec, direct_spec, dpsgd_settings
from pate_stab.erm.multinomial import check_class_labels
from pate_stab.errors import ReplayedSpendError
from pate_stab.models.networks import ModelSpec, build_model
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.noise.discrete import RandomSource, SeededRandomSource, SystemRandomSource
from pate_stab.run.compare_table import (
    at_or_below,
    best_per_epsilon,
    learner_unit,
    reference_words,
    replace_one_equivalent,
    row_unit,
)
from pate_stab.run.config import FEATURE_DATASETS, TransferConfig
from pate_stab.run.prepare import Prepared
from pate_stab.run.release import release_spend_id
from pate_stab.run.report import PlannedSpend
from pate_stab.run.student_file import PublishedStudent

__all__ = [
    "check_direct_config",
    "check_direct_inputs",
    "check_direct_learners",
    "check_label_learners",
    "direct_legend",
    "direct_note",
    "direct_plan_text",
    "direct_planned_spend",
    "direct_student",
    "privacy_unit",
    "run_direct",
]

_RELATION_WORDS = {"add_remove": "one person's record is added or removed",
                   "replace_one": "one person's record is replaced",
                   "label": "one example's label is replaced (its input public)"}  # fmt: skip
_RELATION_NAMES = {"add_remove": "add/remove", "replace_one": "replace-one"}


def check_direct_learners(names: object, *, dataset: str | None = None) -> list[str]:
    """The learners as a list, or ValueError naming the unknown ones, or an image learner asked
    of a bundled ``dataset`` without images (before any data are loaded)."""
    if isinstance(names, str) or not isinstance(names, list | tuple):
        raise TypeError(f"direct learners must be a list of names, got {type(names).__name__}")
    bad = [n for n in names if n not in DIRECT_SPECS]
    if bad:
        raise ValueError(f"unknown direct learners {bad}; choose from {', '.join(DIRECT_LEARNERS)}")
    on_images = [n for n in names if DIRECT_SPECS[n].needs_images]
    if on_images and dataset in FEATURE_DATASETS:
        raise ValueError(f"{', '.join(on_images)} trains a CNN on images; dataset {dataset!r} has none "
                         "(feature vectors or a table)")  # fmt: skip
    return list(names)


def direct_planned_spend(config: Any, learner: str, epsilon: float, repeat: int = 0) -> PlannedSpend:
    """What a direct learner's spend will cost, before anything is trained: DP-SGD's target (ε, δ)
    under add/remove (its accountant's ε is at most the target), a head's (ε, 0) under the run's relation,
    a label-DP learner's (ε, 0) under replace-one."""
    spec = direct_spec(learner)
    spend_id = release_spend_id(config.run_name, learner, epsilon, repeat)
    delta = float(config.release.delta) if spec.is_dpsgd else 0.0
    relation = None if spec.relation == "either" else spec.relation
    return PlannedSpend(spend_id, float(epsilon), delta, relation, learner_unit(learner))


def _generator(prep: Prepared, spend_id: str) -> tuple[torch.Generator, str]:
    if prep.config.release.releaser_noise == "secure":
        return torch.Generator().manual_seed(secrets.randbits(63)), "secure (generator seeded from the OS)"
    seed = _seed(prep, spend_id)
    return torch.Generator().manual_seed(seed), "seeded (research: no privacy against anyone who knows the seed)"


def check_direct_config(config: TransferConfig, learners: Sequence[str], dpsgd: DPSGDConfig | None = None) -> None:
    """What the configuration alone decides, checked before any data are read or teachers trained:
    the public size N of DP-SGD and the heads (own data need ``private_size_hint``; the label-DP
    learners read none and are not asked for it), DP-SGD's expected batch size B ≤ N; a GPU asked of
    an image learner where there is none; a label-DP learner in a run whose privacy unit is not ``label``
    or whose relation is not replace-one."""
    check_label_learners(config, learners)
    specs = [direct_spec(n) for n in learners]
    for spec in (s for s in specs if s.is_dpsgd):
        check_public_size(dpsgd_public_size(config), dpsgd or dpsgd_settings(config, spec.name))
    if any(s.needs_public_size and not s.is_dpsgd for s in specs):
        dpsgd_public_size(config)  # the heads' N (pate_stab.direct.learners): own data need private_size_hint
    if any(s.needs_images for s in specs):
        cnn.resolve_device(config.execution.accelerator)


def direct_plan_text(config: TransferConfig) -> str:
    """What a direct learner's run will do, from its configuration alone (no data read): the learner,
    its one spend and relation, and DP-SGD's schedule from the public size N. It replaces the
    teacher–student plan (:mod:`pate_stab.aggregation.plan`), which does not apply: no teachers, no queries."""
    spec = direct_spec(config.release.aggregator)
    words = _RELATION_WORDS["label" if spec.unit == "label" else spec.held_relation(config.release.neighbouring)]
    delta = f", δ={config.release.delta:g}" if spec.is_dpsgd else ""
    lines = [
        f"plan: {spec.name} trains directly on the private split: {spec.description}. No teachers, no "
        f"queries and no vote gap: one spend of ε={config.release.epsilon:g}{delta}, private when {words}; its "
        "test accuracy "
        "is measured on the evaluation split, beside the majority-class reference"
    ]
    detail = spec.plan_detail(config)
    if detail is not None:
        lines.append(detail)
    return "\n".join(lines)


def privacy_unit(config: TransferConfig) -> str:
    """The run's privacy unit: ``record`` (a record's input and label) or ``label`` (inputs public)."""
    return str(config.release.privacy_unit)


def check_label_learners(config: TransferConfig, learners: Sequence[str]) -> None:
    """Refuse the label-DP learners where their guarantee is not the run's, before anything is spent.

    They protect labels only (ε-label-DP, one example's label replaced): a record-privacy run would
    publish a model whose inputs are unprotected, and an add/remove ledger cannot count a replace-one
    spend (DESIGN.md facts 12, 13).
    """
    label_only = [n for n in learners if direct_spec(n).unit == "label"]
    if not label_only:
        return
    names = ", ".join(label_only)
    if privacy_unit(config) != "label":
        raise ValueError(
            f"{names} {'is' if len(label_only) == 1 else 'are'} label-DP only (randomised response protects the "
            f"labels, not the inputs); this run's privacy unit is {privacy_unit(config)!r}. Set privacy_unit: label "
            "where the private inputs are public, or leave these learners out"
        )
    if config.release.neighbouring != "replace_one":
        raise ValueError(
            f"{names}: ε-label-DP holds when one example's label is replaced (Ghazi et al. 2021, Def 1); this run's "
            f"ledger counts neighbouring={config.release.neighbouring!r}, which cannot count a replace-one spend. Set "
            "neighbouring: replace_one"
        )


def _seed(prep: Prepared, spend_id: str) -> int:
    digest = hashlib.sha256(f"{prep.config.seed}|{spend_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little") >> 1


def _exact_source(prep: Prepared, spend_id: str) -> RandomSource:
    """The random bits of the exact samplers: the OS's CSPRNG, or (seeded runs) a source derived
    from the run's seed and the spend id, independent of :func:`_generator`'s stream."""
    if prep.config.release.releaser_noise == "secure":
        return SystemRandomSource()
    return SeededRandomSource(_seed(prep, spend_id + "|exact"))


def _noise_note(spec: DirectSpec, meta: dict[str, Any]) -> str:
    """What the row's note says about its noise (a model recorded before ``noise_kind`` drew float noise)."""
    if "noise_kind" not in meta:
        return "floating-point noise (a model recorded before the exact samplers)"
    note = spec.noise_note
    if spec.is_dpsgd:
        note += " in Opacus's secure mode" if meta.get("secure_mode") else " (a seeded run, without secure mode)"
    return note


def direct_note(learner: str, meta: dict[str, Any]) -> str:
    """A direct row's note: one plain sentence with its README pointer. It names the method, the
    relation and the kind of noise; the parameters (σ, q, steps, clip, λ, R, ...) are the row's
    ``settings`` (the spend's metadata: fixed by the configuration and public data alone)."""
    spec = direct_spec(learner)
    words = _RELATION_WORDS["label" if meta.get("privacy_unit") == "label" else meta["neighbouring"]]
    return (
        f"Trained directly on the private data by {spec.method}{spec.on_what}, private when "
        f"{words}, with {_noise_note(spec, meta)} (README: Privacy notes)."
    )


def check_direct_inputs(prep: Prepared, learners: Sequence[str], dpsgd: DPSGDConfig | None = None) -> None:
    """What ``learners`` train on, checked before anything is spent: finite features (or, for the
    image learners, finite images of a size the CNN takes) in every split, labels in [0, C); and
    :func:`check_direct_config`."""
    check_direct_config(prep.config, learners, dpsgd)
    task = prep.task
    specs = [direct_spec(n) for n in learners]
    if any(not s.needs_images for s in specs):
        for name, x in (("private", task.private_x), ("public", task.public_x), ("evaluation", task.eval_x)):
            if x.dim() != 2:
                raise ValueError(f"direct learners need feature vectors; the {name} inputs have shape {tuple(x.shape)}")
            if not bool(torch.isfinite(x).all()):
                raise ValueError(f"the {name} features contain NaN or infinite values")
    for spec in (s for s in specs if s.needs_images):
        for name, images in _image_splits(prep):
            if images is None:
                raise ValueError(
                    f"{spec.name} trains a CNN on images; the {name} data of this run "
                    f"({prep.config.data.dataset!r}) are "
                    "feature vectors or a table, not images"
                )
            cnn.as_images(images, name=f"{name} images")
    check_class_labels(task.private_y, num_classes=task.num_classes, n=task.private_x.shape[0], name="private labels")


def _image_splits(prep: Prepared) -> list[tuple[str, Tensor | None]]:
    t = prep.task
    return [("private", t.private_images), ("public", t.public_images), ("evaluation", t.eval_images)]


def _dpsgd_config(prep: Prepared, spec: DirectSpec, dpsgd: DPSGDConfig | None) -> DPSGDConfig:
    """The given settings, else the run's (:func:`~pate_stab.direct.registry.dpsgd_settings`; unused by the others)."""
    if dpsgd is not None:
        return dpsgd
    return dpsgd_settings(prep.config, spec.name) if spec.is_dpsgd else DEFAULT_DPSGD


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
    (:mod:`pate_stab.direct.public_size`), which must be at least the expected batch size (by default
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
    spec = direct_spec(learner)
    epsilon = check_epsilon(epsilon)
    repeat = check_int("repeat", repeat, minimum=0)
    check_direct_inputs(prep, [learner], dpsgd)
    spend_id = release_spend_id(prep.config.run_name, learner, epsilon, repeat)
    entry = ledger.entry(spend_id)
    if entry is not None:
        model, result = _replay(prep, spend_id, entry), entry.result
    else:
        model, result = _spend_and_train(prep, ledger, spec, epsilon, _dpsgd_config(prep, spec, dpsgd), spend_id)
    if student_file is not None:
        direct_student(model, prep, learner, spend_id=spend_id).save(prep.run_dir / student_file)
    eval_acc, pool_acc = _accuracies(prep, spec, model)
    return _row(prep, spec, result, target_epsilon=epsilon, repeat=repeat, spend_id=spend_id,
                reused=entry is not None, student_file=student_file, eval_acc=eval_acc, pool_acc=pool_acc)  # fmt: skip


def _replay(prep: Prepared, spend_id: str, entry: Any) -> dict[str, Any]:
    """The model recorded for a spend, its digest checked; a spend recorded without its model is refused."""
    if not entry.has_result:
        raise ReplayedSpendError(
            f"spend {spend_id!r} is recorded but its model is not (training was interrupted); a spend id buys "
            "one draw of noise, so nothing is trained again under it. Start a new run for a new model."
        )
    path = prep.run_dir / "direct" / entry.result["model"]
    if not path.is_file() or _sha256(path) != entry.result["sha256"]:
        raise ReplayedSpendError(f"the model recorded for {spend_id!r} is missing or altered ({path})")
    model: dict[str, Any] = torch.load(path, weights_only=True)
    return model


def _spend_and_train(
    prep: Prepared, ledger: PrivacyLedger, spec: DirectSpec, epsilon: float, dpsgd: DPSGDConfig, spend_id: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Record the spend, train the learner, write its model under ``direct/`` and record the model's digest:
    (the model, the recorded result)."""
    # no private count in the metadata: under add/remove it is private (DESIGN.md fact 8)
    meta: dict[str, Any] = {"learner": spec.name, "neighbouring": spec.held_relation(prep.config.release.neighbouring)}
    charge_eps, charge_delta, event = spec.plan(prep, epsilon, dpsgd, meta)
    generator, noise = _generator(prep, spend_id)
    meta["noise"] = noise
    meta["noise_kind"] = spec.noise_kind
    if spec.is_dpsgd:
        meta["secure_mode"] = prep.config.release.releaser_noise == "secure"
    ledger.spend(spend_id, epsilon=charge_eps, delta=charge_delta, event=event, mechanism=spec.name, metadata=meta,
                 relation=meta["neighbouring"], unit=learner_unit(spec.name))  # fmt: skip
    model = spec.train(prep, epsilon, generator, dpsgd, meta, _exact_source(prep, spend_id))
    # the self-contained student beside the model's own fields (load_student reads the file)
    model |= direct_student(model, prep, spec.name, spend_id=spend_id).record()
    folder = prep.run_dir / "direct"
    folder.mkdir(parents=True, exist_ok=True)
    name = spend_id.replace(":", "_").replace("=", "-") + ".pt"
    tmp = folder / (name + ".tmp")
    torch.save(model, tmp)
    tmp.replace(folder / name)
    ledger.record_result(spend_id, {"model": name, "sha256": _sha256(folder / name), "epsilon": charge_eps,
                                    "delta": charge_delta, "metadata": meta})  # fmt: skip
    return model, {"epsilon": charge_eps, "delta": charge_delta, "metadata": meta}


def _accuracies(prep: Prepared, spec: DirectSpec, model: dict[str, Any]) -> tuple[float | None, float | None]:
    """The model's accuracy on the evaluation split and on the public pool; None where the labels do not
    exist (own data: no evaluation set, a pool without labels). The image learners read the images."""
    task = prep.task
    on_images = spec.needs_images
    eval_x, pool_x = (task.eval_images, task.public_images) if on_images else (task.eval_x, task.public_x)
    assert eval_x is not None and pool_x is not None  # check_direct_inputs
    accelerator = prep.config.execution.accelerator
    eval_acc = None
    if task.eval_y.numel():
        eval_acc = float((predict(model, eval_x, accelerator=accelerator) == task.eval_y).double().mean())
    pool_acc = None
    if task.public_y is not None:
        pool_acc = float((predict(model, pool_x, accelerator=accelerator) == task.public_y).double().mean())
    return eval_acc, pool_acc


def _row(
    prep: Prepared,
    spec: DirectSpec,
    result: dict[str, Any],
    *,
    target_epsilon: float,
    repeat: int,
    spend_id: str,
    reused: bool,
    student_file: str | None,
    eval_acc: float | None,
    pool_acc: float | None,
) -> dict[str, Any]:
    """The learner's compare row, from its recorded result."""
    meta = result["metadata"]
    relation = meta["neighbouring"]
    # a head's ε holds under either relation (pate_stab.direct.learners); DP-SGD's add/remove ε converts by
    # group privacy
    held = "replace_one" if spec.relation == "either" else relation
    eps_r1, delta_r1 = replace_one_equivalent(epsilon=result["epsilon"], delta=result["delta"], neighbouring=held)
    return {
        "aggregator": spec.name,
        "kind": "direct",
        "repeat": repeat,
        "target_epsilon": target_epsilon,
        "epsilon": result["epsilon"],
        "delta": result["delta"],
        "neighbouring": relation,
        # the unit the run ranks the row under, and the unit of the learner's own guarantee (run/compare_table.py)
        "privacy_unit": meta.get("privacy_unit", privacy_unit(prep.config)),
        "guarantee_unit": learner_unit(spec.name),
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
        "note": direct_note(spec.name, meta),
    }


def direct_legend(rows: list[dict[str, Any]], *, run_neighbouring: str, reference: dict[str, Any] | None = None) -> str:
    """How to read a table with direct rows: columns, relations, the cumulative cost, the best row per ε
    (a best row at or below the majority-class ``reference`` is named as such:
    :func:`pate_stab.run.compare_table.majority_reference`)."""
    # name only the columns the table shows (compare_table.format_rows leaves out empty ones)
    empty = ["label_acc"] if all(r.get("label_acc") is None for r in rows) else []
    dashes = " / ".join(c for c in ("seen", "answered", "label_acc") if c not in empty)
    lines = [  # one plain sentence each, with its README pointer
        f"The direct rows are trained on the private split itself with no teachers or queries, so {dashes} are '-' "
        "and student_acc is the model's own accuracy on the evaluation split (README: Privacy notes).",
        f"The releasers and convex heads are private under the run's {_RELATION_NAMES[run_neighbouring]} relation and "
        "DP-SGD under add/remove, which counts as (2ε, (1 + e^ε)δ) under replace-one (README: Privacy notes).",
    ]
    label_learners = [n for n, spec in DIRECT_SPECS.items() if spec.unit == "label"]
    if any(r.get("privacy_unit") == "label" for r in rows if r.get("aggregator") in label_learners):
        lines.append(
            f"The {', '.join(n for n in label_learners if any(r.get('aggregator') == n for r in rows))} rows "
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
    # each privacy unit ranked apart, its unit shown (pate_stab.run.compare_table)
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
