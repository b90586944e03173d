"""The run's report: what was trained, released, spent and measured, as JSON-ready values.

Every figure comes from the run's objects: the ledger (what was spent, under which relation),
the release's summary (the certified (ε, δ), queries answered, ⊥ and not asked), and the
evaluation split (student; teachers). The report is split in two (DESIGN.md fact 8,
:mod:`pate_stab.run.private`): ``report.json`` holds what may be published — mechanism outputs
and what is computed from them and from public data; ``private_diagnostics.json`` (mode 0600)
holds the statistics of the private data that no mechanism paid for (teacher and plurality
accuracy, the exact private size, the raw data-dependent ε and its inputs, wall times). The
label-accuracy figures compare the released labels with the public pool's true labels: public-side
information, published and labelled as such. Without those labels (a user's pool without labels)
the label-accuracy figures are None, as are the evaluation figures of a run without an evaluation set.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from torch import Tensor

from pate_stab.privacy.ledger import PrivacyLedger
from pate_stab.privacy.secure_noise import SEEDED_NOISE_WARNING
from pate_stab.run.config import STUDENT_METHODS, THREAT_MODELS
from pate_stab.run.data_dependent import split_data_dependent
from pate_stab.run.prepare import Prepared
from pate_stab.run.private import (
    PRIVATE_DIAGNOSTICS,
    PRIVATE_FOLDERS,
    PRIVATE_IDENTITY,
    PUBLISHED_FOLDERS,
    files_section,
    split_private,
)
from pate_stab.run.release import Release, selection_report
from pate_stab.run.run_folder import LOCK_NAME
from pate_stab.student import StudentTargets

__all__ = ["LABEL_ACCURACY_NOTE", "clean_json", "noise_report", "open_ledger", "run_files", "transfer_report"]

LABEL_ACCURACY_NOTE = (
    "label accuracy: the released labels against the public pool's true labels (public-side information, "
    "read for this measurement only)"
)

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
    raise_budget: str | None = None,
) -> PrivacyLedger:
    """The run's ledger; its header states the neighbouring relation the run's releases hold under.

    It is a published file, so it is written without wall-clock times
    (:class:`~pate_stab.privacy.ledger.PrivacyLedger`, ``timestamps=False``). ``raise_budget``:
    the reason to record when the ledger holds a smaller budget (e.g. a compare extended with
    more repeats).
    """
    return PrivacyLedger(
        run_dir / "ledger.jsonl",
        budget_epsilon=budget_epsilon,
        budget_delta=budget_delta,
        run_id=run_name,
        neighbouring=neighbouring,
        timestamps=False,
        raise_budget=raise_budget,
    )


def run_files(run_dir: Path, published: list[str], private: list[str] | None = None) -> dict[str, Any]:
    """The ``files`` section of a run's report (:func:`pate_stab.run.private.files_section`)."""
    mine = [*(private or []), PRIVATE_DIAGNOSTICS, PRIVATE_IDENTITY, "private_key"]
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
    (:func:`~pate_stab.run.data_dependent.data_dependent_figures`), reported beside the enforced
    ε; the raw figure and its inputs go to the private part.
    """
    config, task = prep.config, prep.task
    acc_answered, acc_all = accuracies["label_answered"], accuracies["label_all"]
    teacher_mean, plurality = accuracies["teacher_mean"], accuracies["plurality"]
    student_acc = accuracies["student"]
    s = release.summary
    report = {
        "run": config.run_name,
        "run_dir": str(prep.run_dir),
        "status": "complete",
        "dataset": config.dataset,
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
        "num_teachers": config.num_teachers,
        "teacher_model": {**prep.teachers.spec.to_dict(), "train": prep.teachers.config.get("train")},
        "aggregator": config.aggregator,
        "calibration": s.get("calibration_detail", {k: v for k, v in s.items() if k not in _BOOKKEEPING}),
        "noise": noise_report(s),
        "target_epsilon": config.epsilon,
        "target_delta": config.delta,
        "epsilon": s["epsilon"],
        "delta": s["delta"],
        "data_dependent": None if data_dependent is None else split_data_dependent(data_dependent)[0],
        "data_dependent_private": None if data_dependent is None else split_data_dependent(data_dependent)[1],
        "queries": {
            "seen": int(s.get("queries_seen", config.num_queries)),
            "answered": int(s["answered"]),
            "abstained": int(s["abstained"]),
            "not_asked": int(s.get("not_asked", 0)),
            "halted": bool(s.get("halted", False)),
        },
        "privacy": config.privacy_relation(),
        "query_selection": selection_report(release),
        "label_accuracy_answered": acc_answered,
        "label_accuracy_all_queries": acc_all,
        "label_accuracy_note": LABEL_ACCURACY_NOTE,
        "student": {
            "model": student.spec.to_dict(),
            "config": student.config.to_dict(),
            "bottom": config.bottom,
            "trained_on": int(targets.index.numel()),
            "method": config.student_method,
            "method_description": STUDENT_METHODS[config.student_method],
            # student_select "cv": the grid, the cross-validation scores on the released labels, the choice
            "selection": getattr(student, "selection", None),
            "history": student.history,
            "test_accuracy": student_acc,
            # pool points that received no released label (never queried, or ⊥); true labels read
            # for this measurement only
            "unlabelled_pool_accuracy": accuracies.get("student_unlabelled_pool"),
            "unlabelled_pool_size": accuracies.get("unlabelled_pool_size"),
        },
        "teachers": {
            "mean_accuracy": teacher_mean,
            "plurality_accuracy": plurality,
            "evaluated_on": "evaluation split" if task.eval_y.numel() else None,
        },
        "wall_time_s": wall_times,
        "resumed": {"teachers": prep.resumed_teachers, "release": release.reused}
        | ({} if prep.resumed_features is None else {"features": prep.resumed_features}),
        "ledger": {**ledger.report(), "spend_id": release.spend_id},
        "seed": config.seed,
        "files": run_files(prep.run_dir, ["report.json", "student.pt"]),
    }
    public, private = split_private(clean_json(report), list(_PRIVATE_FIELDS))
    if "data_dependent_private" in private:
        private["data_dependent"] = private.pop("data_dependent_private")
    return public, {"run": config.run_name, **private}
