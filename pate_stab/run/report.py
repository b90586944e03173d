"""The run's report: what was trained, released, spent and measured, as JSON-ready values.

Every figure in ``report.json`` comes from the run's objects: the ledger (what was spent, under
which relation), the release's summary (the certified (ε, δ), queries answered, ⊥ and not asked),
and the evaluation split (teachers and student). True labels of the public queries are used for
the label-accuracy figures only.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from torch import Tensor

from pate_stab.privacy.ledger import PrivacyLedger
from pate_stab.privacy.secure_noise import SEEDED_NOISE_WARNING
from pate_stab.run.config import STUDENT_METHODS, THREAT_MODELS
from pate_stab.run.prepare import Prepared
from pate_stab.run.release import Release, selection_report
from pate_stab.student import StudentTargets

__all__ = ["clean_json", "noise_report", "open_ledger", "transfer_report"]

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
    run_dir: Path, *, run_name: str, budget_epsilon: float, budget_delta: float, neighbouring: str
) -> PrivacyLedger:
    """The run's ledger; its header states the neighbouring relation the run's releases hold under."""
    return PrivacyLedger(
        run_dir / "ledger.jsonl",
        budget_epsilon=budget_epsilon,
        budget_delta=budget_delta,
        run_id=run_name,
        neighbouring=neighbouring,
    )


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
) -> dict[str, Any]:
    """The report of a complete transfer run (``report.json``), JSON-safe.

    ``accuracies`` holds ``label_answered``, ``label_all`` (on the queries, true labels for
    evaluation only), ``teacher_mean``, ``plurality`` and ``student`` (on the evaluation split).
    ``data_dependent``: PATE's data-dependent figures
    (:func:`~pate_stab.run.data_dependent.data_dependent_figures`), reported beside the enforced ε.
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
        "data_dependent": data_dependent,
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
        "student": {
            "model": student.spec.to_dict(),
            "config": student.config.to_dict(),
            "bottom": config.bottom,
            "trained_on": int(targets.index.numel()),
            "method": config.student_method,
            "method_description": STUDENT_METHODS[config.student_method],
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
            "evaluated_on": "evaluation split",
        },
        "wall_time_s": wall_times,
        "resumed": {"teachers": prep.resumed_teachers, "release": release.reused}
        | ({} if prep.resumed_features is None else {"features": prep.resumed_features}),
        "ledger": {**ledger.report(), "spend_id": release.spend_id},
        "seed": config.seed,
    }
    return clean_json(report)
