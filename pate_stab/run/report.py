"""The run's report: what was trained, released, spent and measured, as JSON-ready values.

Every figure comes from the run's objects: the ledger (what was spent, under which relation),
the release's summary (the certified (ε, δ), queries answered, ⊥ and not asked), and the
evaluation split (student; teachers). The report is split in two (DESIGN.md fact 8,
:mod:`pate_stab.run.run_folder`): ``report.json`` holds what may be published — mechanism outputs
and what is computed from them and from public data; ``private_diagnostics.json`` (mode 0600)
holds the statistics of the private data that no mechanism paid for (teacher and plurality
accuracy, the exact private size, the raw data-dependent ε and its inputs, wall times). The
label-accuracy figures compare the released labels with the public pool's true labels: public-side
information, published and labelled as such. Without those labels (a user's pool without labels)
the label-accuracy figures are None, as are the evaluation figures of a run without an evaluation set.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from pate_stab.aggregation.data_dependent import split_data_dependent
from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.ledger.data_budget import DataSet, DataSetBudget, default_cap, default_relation, folder_id
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger, anchor_path, recorded_budget, replace_one_cost
from pate_stab.privacy.ledger.private_files import run_private_key
from pate_stab.privacy.noise.secure import SEEDED_NOISE_WARNING
from pate_stab.run.config import STUDENT_METHODS, THREAT_MODELS, check_cap
from pate_stab.run.prepare import Prepared
from pate_stab.run.release import Release, selection_report
from pate_stab.run.run_folder import (
    LEDGER_MARK,
    LOCK_NAME,
    PRIVATE_DIAGNOSTICS,
    PRIVATE_FOLDERS,
    PRIVATE_IDENTITY,
    PUBLISHED_FOLDERS,
    check_ledger_kept,
    files_section,
    split_private,
    write_private_json,
)
from pate_stab.run.student import released_label_warnings
from pate_stab.student import StudentTargets

__all__ = [
    "LABEL_ACCURACY_NOTE",
    "PlannedSpend",
    "check_cap",
    "check_data_set_budget",
    "check_plan_budget",
    "check_run_budget",
    "open_run_ledger",
    "clean_json",
    "ledger_cap",
    "noise_report",
    "open_ledger",
    "plan_default_cap",
    "plan_cost",
    "run_files",
    "transfer_report",
]

LABEL_ACCURACY_NOTE = (
    "label accuracy: the released labels against the public pool's true labels (public-side information, "
    "read for this measurement only)"
)

_SLACK = 1e-12  # the ledger's float slack: a budget split into equal parts can be spent in full

# report fields computed from private data without a charged mechanism (private_diagnostics.json)
_PRIVATE_FIELDS = (("sizes", "private"), ("teachers",), ("wall_time_s",), ("data_dependent_private",))

# summary fields that describe the run's counters and ledger, not the aggregator's calibration
_BOOKKEEPING = ("queries_seen", "answered", "abstained", "not_asked", "halted", "replayed_calls", "spend_id")


def clean_json(value: Any) -> Any:
    """JSON-safe: NaN/inf → None, tuples → lists, tensors → lists."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): clean_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [clean_json(v) for v in value]
    if isinstance(value, Tensor):
        return clean_json(value.tolist())
    return value


def open_ledger(
    run_dir: Path,
    *,
    run_name: str,
    budget_epsilon: float,
    budget_delta: float,
    neighbouring: str,
    cap_epsilon: float | None = None,
    cap_delta: float | None = None,
    privacy_unit: str = "record",
    data_set: DataSet | None = None,
) -> PrivacyLedger:
    """The run's ledger; its header states the neighbouring relation, the privacy unit and the budget cap.

    A folder that shows a run spent in it but has lost its ledger is refused
    (:func:`~pate_stab.run.run_folder.check_ledger_kept`); before a new ledger is created,
    ``private_identity.json`` records that it was. With ``data_set``, every spend is also counted in the
    data holder's ledger of that data set (:mod:`pate_stab.privacy.ledger.data_budget`; a new one records
    this ledger's cap, relation and unit).

    The cap (DESIGN.md fact 12): a new ledger records the user's cap (``cap_epsilon``,
    ``cap_delta``), or, where the user set none, what this run needs (``budget_epsilon``,
    ``budget_delta``: the plan's total). An existing ledger keeps its recorded cap; a user's cap
    below it lowers it (a ``budget`` record), one above it is refused (a cap is never raised: a
    new run folder is a new ledger, and a new use of the data the user must account for). A run
    never changes the cap by itself. Check what the run will spend against it with
    :func:`check_plan_budget` before drawing any noise.

    It is a published file, so it is written without wall-clock times
    (:class:`~pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger`, ``timestamps=False``).

    Raises:
        ValueError: a cap that is not a positive ε or a δ in [0, 1).
        LedgerError: the cap would be raised, or lowered below what is spent (nothing written).
    """
    check_cap(cap_epsilon, cap_delta)
    check_ledger_kept(run_dir)
    path = run_dir / "ledger.jsonl"
    if not path.is_file() or path.stat().st_size == 0:
        _mark_ledger(run_dir)
    recorded = recorded_budget(path)
    base = recorded if recorded is not None else (float(budget_epsilon), float(budget_delta))
    wanted = ledger_cap(base, cap_epsilon, cap_delta)
    lower = None
    if recorded is not None and wanted != recorded:
        lower = f"lowered by the user's cap (budget_epsilon={cap_epsilon}, budget_delta={cap_delta})"
    ledger = PrivacyLedger(
        path,
        budget_epsilon=wanted[0],
        budget_delta=wanted[1],
        run_id=run_name,
        neighbouring=neighbouring,
        privacy_unit=privacy_unit,
        timestamps=False,
        lower_budget=lower,
    )
    if data_set is not None:
        try:
            ledger.count_in(DataSetBudget.open(data_set, cap=ledger.budget, neighbouring=ledger.neighbouring,
                                               privacy_unit=ledger.privacy_unit))  # fmt: skip
        except BaseException:
            ledger.close()
            raise
    return ledger


def _mark_ledger(run_dir: Path) -> None:
    """Record in ``private_identity.json`` that the folder's ledger is created (before it is: a crash between
    the two leaves a folder that is refused, never one that starts afresh; :func:`check_ledger_kept`)."""
    path = run_dir / PRIVATE_IDENTITY
    record = json.loads(path.read_text()) if path.is_file() else {}
    if not record.get(LEDGER_MARK):
        record[LEDGER_MARK] = "ledger.jsonl created"
        write_private_json(path, {k: v for k, v in record.items() if k != "private"})


@dataclass(frozen=True)
class PlannedSpend:
    """One spend a run plans: its id, its (ε, δ), and the relation and privacy unit they hold under
    (None: the ledger's)."""

    spend_id: str
    epsilon: float
    delta: float
    relation: str | None = None
    unit: str | None = None


def plan_cost(spends: list[PlannedSpend], *, neighbouring: str, privacy_unit: str = "record") -> tuple[float, float]:
    """What ``spends`` count together in a ledger under ``neighbouring`` and ``privacy_unit`` (basic
    composition; an add/remove spend in a replace-one ledger by group privacy,
    :func:`~pate_stab.privacy.ledger.privacy_ledger.replace_one_cost`; a record spend in a label ledger as in any
    replace-one ledger, :meth:`~pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger.cost`).

    Raises:
        ValueError: a replace-one spend for an add/remove ledger (it implies no add/remove guarantee),
            or a label spend for a record ledger (it implies no record guarantee).
    """
    costs = []
    for s in spends:
        if (s.unit or privacy_unit) == "label" and privacy_unit == "record":
            raise ValueError(
                f"spend {s.spend_id!r} is label-private and the run's ledger counts record privacy: a label guarantee "
                "implies no record guarantee (run under privacy_unit=label)"
            )
        relation = s.relation or neighbouring
        if relation == neighbouring:
            costs.append((s.epsilon, s.delta))
        elif relation == "add_remove":
            costs.append(replace_one_cost(s.epsilon, s.delta))
        else:
            raise ValueError(
                f"spend {s.spend_id!r} holds under {relation}, the run's ledger counts {neighbouring}: a replace-one "
                "guarantee implies no add/remove one (run under neighbouring=replace_one)"
            )
    return math.fsum(e for e, _ in costs), math.fsum(d for _, d in costs)


def check_plan_budget(ledger: PrivacyLedger, spends: list[PlannedSpend], *, how: str) -> None:
    """Refuse now, before any noise is drawn, if the plan's unspent spends do not fit the ledger's cap.

    Spends already recorded (a rerun replays them) cost nothing. ``how``: what the user can do
    instead, for the message (a lower plan, a new run folder).

    Raises:
        BudgetExhaustedError: naming the cap, what is spent, what the plan still needs; nothing was
            drawn, recorded or released.
    """
    recorded = {e.spend_id for e in ledger.entries()}
    new = [s for s in spends if s.spend_id not in recorded]
    need = plan_cost(new, neighbouring=ledger.neighbouring, privacy_unit=ledger.privacy_unit)
    _check_fits(ledger.budget, ledger.spent(), need,
                where=str(ledger.path), new=len(new), replayed=len(spends) - len(new), how=how)  # fmt: skip
    budget, folder = ledger.data_budget, ledger.folder_id
    if budget is not None and folder is not None:  # the data set's cap, across folders
        own = ledger.privacy_unit
        budget.check([(s.spend_id, s.epsilon, s.delta, s.relation or ledger.neighbouring, s.unit or own) for s in new],
                     folder=folder, where=f"this run ({len(new)} new spend(s))")  # fmt: skip


def _check_fits(
    cap: tuple[float, float],
    spent: tuple[float, float],
    need: tuple[float, float],
    *,
    where: str,
    new: int,
    replayed: int,
    how: str,
) -> None:
    total = (math.fsum([spent[0], need[0]]), math.fsum([spent[1], need[1]]))
    if total[0] > cap[0] * (1 + _SLACK) or total[1] > cap[1] * (1 + _SLACK):
        raise BudgetExhaustedError(
            f"the run's budget cap is (epsilon={cap[0]:g}, delta={cap[1]:g}) ({where}); (epsilon={spent[0]:g}, "
            f"delta={spent[1]:g}) of it is spent, and this plan needs (epsilon={need[0]:g}, delta={need[1]:g}) more "
            f"for {new} new spend(s) ({replayed} recorded one(s) replay at no cost). Nothing was drawn, recorded or "
            f"released. A cap is never raised: {how}"
        )


def ledger_cap(base: tuple[float, float], cap_epsilon: float | None, cap_delta: float | None) -> tuple[float, float]:
    """The cap a ledger holds: the user's ε and δ where set, else ``base``'s (the recorded cap; for a new
    ledger, :func:`plan_default_cap`). Example: ``ledger_cap((8.0, 1e-5), 4.0, None) == (4.0, 1e-5)``."""
    return (
        base[0] if cap_epsilon is None else float(cap_epsilon),
        base[1] if cap_delta is None else float(cap_delta),
    )


def plan_default_cap(
    planned: list[PlannedSpend],
    *,
    neighbouring: str,
    privacy_unit: str,
    default_cap: tuple[float, float] | None,
) -> tuple[float, float]:
    """A new run folder's cap where the user sets none: ``default_cap`` (the run's declared (ε, δ)) if
    given, else what the plan's spends count together (:func:`plan_cost`)."""
    return default_cap or plan_cost(planned, neighbouring=neighbouring, privacy_unit=privacy_unit)


def open_run_ledger(
    run_dir: Path,
    *,
    run_name: str,
    neighbouring: str,
    spends: Callable[[PrivacyLedger | None], list[PlannedSpend]],
    cap_epsilon: float | None,
    cap_delta: float | None,
    how: str,
    default_cap: tuple[float, float] | None = None,
    privacy_unit: str = "record",
    data_set: DataSet | None = None,
) -> PrivacyLedger:
    """:func:`open_ledger` for a run's plan, checked by :func:`check_plan_budget` before it is returned.

    ``spends(ledger)`` lists the plan's spends (their ids as ``ledger`` holds them; ``None``: as a
    new ledger would). A new ledger's cap is the user's, else ``default_cap`` (the run's declared
    (ε, δ), where it has one), else the plan's total (:func:`plan_cost`). With ``data_set``, the plan is
    checked against the data set's cap too, and every spend is counted there (:func:`open_ledger`).

    Raises:
        BudgetExhaustedError: the plan does not fit; nothing was drawn or spent (a lowered cap stays recorded).
        LedgerError: the user's cap would raise the recorded one, or fall below what is spent.
    """
    need = plan_default_cap(spends(None), neighbouring=neighbouring, privacy_unit=privacy_unit, default_cap=default_cap)
    ledger = open_ledger(run_dir, run_name=run_name, budget_epsilon=need[0], budget_delta=need[1],
                         neighbouring=neighbouring, cap_epsilon=cap_epsilon, cap_delta=cap_delta,
                         privacy_unit=privacy_unit, data_set=data_set)  # fmt: skip
    try:
        check_plan_budget(ledger, spends(ledger), how=how)
    except BaseException:
        ledger.close()
        raise
    return ledger


def check_run_budget(
    run_dir: Path,
    *,
    run_name: str,
    neighbouring: str,
    spends: Callable[[PrivacyLedger | None], list[PlannedSpend]],
    cap_epsilon: float | None,
    cap_delta: float | None,
    how: str,
    default_cap: tuple[float, float] | None = None,
    privacy_unit: str = "record",
) -> None:
    """:func:`open_run_ledger`'s check before anything is trained: against the folder's ledger if it
    has one (a user's lower cap is recorded then), else the plan against the user's cap; a folder
    without a ledger is not created.

    Raises:
        ValueError / BudgetExhaustedError / LedgerError: as :func:`open_run_ledger`.
    """
    check_ledger_kept(run_dir)
    if (run_dir / "ledger.jsonl").is_file():
        open_run_ledger(run_dir, run_name=run_name, neighbouring=neighbouring, spends=spends, cap_epsilon=cap_epsilon,
                        cap_delta=cap_delta, how=how, default_cap=default_cap,
                        privacy_unit=privacy_unit).close()  # fmt: skip
        return
    check_cap(cap_epsilon, cap_delta)
    planned = spends(None)
    need = plan_cost(planned, neighbouring=neighbouring, privacy_unit=privacy_unit)
    default = plan_default_cap(planned, neighbouring=neighbouring, privacy_unit=privacy_unit, default_cap=default_cap)
    cap = ledger_cap(default, cap_epsilon, cap_delta)  # what open_run_ledger would record
    _check_fits(cap, (0.0, 0.0), need, where="the user's cap; no ledger yet", new=len(planned), replayed=0, how=how)


def check_data_set_budget(
    run_dir: Path,
    data_set: DataSet | None,
    spends: list[PlannedSpend],
    *,
    neighbouring: str,
    privacy_unit: str = "record",
) -> None:
    """Before any training: refuse a new run folder's plan that the data set's cap cannot cover.

    Only a folder without a ledger is checked here (its spends are all new); a rerun's plan is checked
    exactly, replays excluded, when its ledger is opened (:func:`open_run_ledger`). A data set without a
    ledger yet takes the data holder's cap for new data sets, checked here, or else the run's cap, which
    :func:`check_run_budget` has checked.

    Raises:
        BudgetExhaustedError: the plan does not fit the data set's cap; nothing was trained, drawn or recorded.
        ValueError: a spend the data set's ledger cannot count (its relation or unit).
    """
    if data_set is None or (run_dir / "ledger.jsonl").is_file():
        return
    if not data_set.path.is_file():  # a new data set: the data holder's cap for new data sets, if set
        cap = default_cap(data_set.folder)
        if cap is not None:
            preset = default_relation(data_set.folder)  # how the new data set will count (a spend it cannot: refused)
            need = plan_cost(spends, neighbouring=preset[0] or neighbouring, privacy_unit=preset[1] or privacy_unit)
            where = f"the data holder's cap for new data sets, {data_set.folder}"
            _check_fits(cap, (0.0, 0.0), need, where=where, new=len(spends), replayed=0,
                        how="the data holder may raise it (pate-stab budget --set)")  # fmt: skip
        return
    budget = DataSetBudget.open(data_set, create=False)
    try:
        budget.check([(s.spend_id, s.epsilon, s.delta, s.relation or neighbouring, s.unit or privacy_unit)
                      for s in spends], folder=folder_id(run_private_key(run_dir)),
                     where=f"this run ({len(spends)} spend(s))")  # fmt: skip
    finally:
        budget.close()


def run_files(run_dir: Path, published: list[str], private: list[str] | None = None) -> dict[str, Any]:
    """The ``files`` section of a run's report (:func:`pate_stab.run.run_folder.files_section`)."""
    mine = [*(private or []), PRIVATE_DIAGNOSTICS, PRIVATE_IDENTITY, "private_key", anchor_path("ledger.jsonl").name]
    working = [f"{name}/" for name in PRIVATE_FOLDERS if (run_dir / name).exists()]
    # the PCA fitted on the public pool; the direct learners' models (mechanism outputs)
    extra = ["features.pt"] if (run_dir / "features.pt").exists() else []
    extra += [f"{name}/" for name in PUBLISHED_FOLDERS if (run_dir / name).exists()]
    if (run_dir / LOCK_NAME).exists():  # empty: the run folder's lock (pate_stab.run.run_folder)
        extra.append(LOCK_NAME)
    shown = ["config.json", "ledger.jsonl", *published, *extra]
    return files_section(list(dict.fromkeys(shown)), mine + working)


_SECURE_NOISE_KEYS = (
    "threshold", "noise_scale_exact", "noise_parameter_exact", "sigma_sq_exact", "sigma1_sq_exact", "sigma2_sq_exact",
)  # fmt: skip


def noise_report(summary: dict[str, Any]) -> dict[str, Any]:
    """The release's noise: secure with the exact parameters used (integer threshold and λ' of the
    stability releasers, the discrete Laplace parameter or discrete Gaussian variances of PATE's
    aggregators), or seeded with the warning that it carries no privacy against the seed's holder.

    A summary without a ``noise`` field was made before every aggregator had secure noise: seeded.
    """
    if summary.get("noise") != "secure":
        return {"noise": "seeded", "warning": SEEDED_NOISE_WARNING}
    if summary.get("mechanism") in ("LNMax", "GNMax", "Confident-GNMax"):
        keys: tuple[str, ...] = tuple(k for k in _SECURE_NOISE_KEYS if k.endswith("_exact"))
    else:
        keys = _SECURE_NOISE_KEYS
    return {"noise": "secure", **{key: summary[key] for key in keys if key in summary}}


def _task_section(prep: Prepared) -> dict[str, Any]:
    """The run, its data (task, sizes, features) and its teachers' ensemble: the report's opening fields."""
    config, task = prep.config, prep.task
    return {
        "run": config.run_name,
        "run_dir": str(prep.run_dir),
        "status": "complete",
        "dataset": config.data.dataset,
        "threat_model": {"name": task.threat_model, "description": THREAT_MODELS[task.threat_model]},
        "num_classes": task.num_classes,
        "classes": None if task.class_names is None else list(task.class_names),
        "pool_labelled": task.public_y is not None,
        "sizes": {
            "private": int(task.private_x.shape[0]),
            "public_pool": int(task.public_x.shape[0]),
            "evaluation": int(task.eval_x.shape[0]),
        },
        "features": {k: v for k, v in task.feature_map.items() if k != "state"},
        "num_teachers": config.teachers.num_teachers,
        "teacher_model": None
        if prep.teachers is None
        else {**prep.teachers.spec.to_dict(), "train": prep.teachers.config.get("train")},
    }


def _release_section(prep: Prepared, release: Release, data_dependent: dict[str, Any] | None) -> dict[str, Any]:
    """The release: aggregator, calibration, noise, the certified (ε, δ) beside the target, PATE's
    data-dependent figures (published and private parts), the query counters and the selection."""
    config, s = prep.config, release.summary
    return {
        "aggregator": config.release.aggregator,
        "calibration": s.get("calibration_detail", {k: v for k, v in s.items() if k not in _BOOKKEEPING}),
        "noise": noise_report(s),
        "target_epsilon": config.release.epsilon,
        "target_delta": config.release.delta,
        "epsilon": s["epsilon"],
        "delta": s["delta"],
        "data_dependent": None if data_dependent is None else split_data_dependent(data_dependent)[0],
        "data_dependent_private": None if data_dependent is None else split_data_dependent(data_dependent)[1],
        "queries": {
            "seen": int(s.get("queries_seen", config.release.num_queries)),
            "answered": int(s["answered"]),
            "abstained": int(s["abstained"]),
            "not_asked": int(s.get("not_asked", 0)),
            "halted": bool(s.get("halted", False)),
        },
        "privacy": config.privacy_relation(),
        "query_selection": selection_report(release),
    }


def _student_section(
    prep: Prepared, release: Release, *, student: Any, targets: StudentTargets, accuracies: dict[str, Any]
) -> dict[str, Any]:
    """The student: its model and training, the labels it learnt from, its accuracy."""
    config, task = prep.config, prep.task
    return {
        "model": student.spec.to_dict(),
        "config": student.config.to_dict(),
        "bottom": config.student.bottom,
        "trained_on": int(targets.index.numel()),
        # plain sentences where the released labels cannot teach every class (released outputs only)
        "warnings": released_label_warnings(release, task.num_classes, task.class_names),
        "method": config.student.student_method,
        "method_description": STUDENT_METHODS[config.student.student_method],
        # student_select "cv": the grid, the cross-validation scores on the released labels, the choice
        "selection": getattr(student, "selection", None),
        "history": student.history,
        "test_accuracy": accuracies["student"],
        # pool points that received no released label (never queried, or ⊥); true labels read
        # for this measurement only
        "unlabelled_pool_accuracy": accuracies.get("student_unlabelled_pool"),
        "unlabelled_pool_size": accuracies.get("unlabelled_pool_size"),
    }


def _bookkeeping_section(
    prep: Prepared, ledger: PrivacyLedger, release: Release, wall_times: dict[str, float]
) -> dict[str, Any]:
    """Wall times, what was resumed, the ledger's state, the seed and the run folder's files."""
    return {
        "wall_time_s": wall_times,
        "resumed": {"teachers": prep.resumed_teachers, "release": release.reused}
        | ({} if prep.resumed_features is None else {"features": prep.resumed_features}),
        "ledger": {**ledger.report(), "spend_id": release.spend_id},
        "seed": prep.config.seed,
        "files": run_files(prep.run_dir, ["report.json", "student.pt"]),
    }


def transfer_report(
    prep: Prepared,
    ledger: PrivacyLedger,
    release: Release,
    *,
    student: Any,
    targets: StudentTargets,
    accuracies: dict[str, Any],
    wall_times: dict[str, float],
    data_dependent: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """The report of a complete transfer run, JSON-safe: (published ``report.json``, private diagnostics).

    ``accuracies`` holds ``label_answered``, ``label_all`` (on the queries, the public pool's
    true labels read for this only), ``teacher_mean``, ``plurality`` and ``student`` (on the
    evaluation split). ``data_dependent``: PATE's data-dependent figures
    (:func:`~pate_stab.aggregation.data_dependent.data_dependent_figures`), reported beside the enforced
    ε; the raw figure and its inputs go to the private part.
    """
    report = {
        **_task_section(prep),
        **_release_section(prep, release, data_dependent),
        "label_accuracy_answered": accuracies["label_answered"],
        "label_accuracy_all_queries": accuracies["label_all"],
        "label_accuracy_note": LABEL_ACCURACY_NOTE,
        "student": _student_section(prep, release, student=student, targets=targets, accuracies=accuracies),
        "teachers": {
            "mean_accuracy": accuracies["teacher_mean"],
            "plurality_accuracy": accuracies["plurality"],
            "evaluated_on": "evaluation split" if prep.task.eval_y.numel() else None,
        },
        **_bookkeeping_section(prep, ledger, release, wall_times),
    }
    public, private = split_private(clean_json(report), list(_PRIVATE_FIELDS))
    if "data_dependent_private" in private:
        private["data_dependent"] = private.pop("data_dependent_private")
    return public, {"run": prep.config.run_name, **private}
