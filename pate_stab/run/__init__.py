"""The main job in steps: configure, prepare, select and release, train the student, report.

The step functions live in their modules (``pate_stab.run.prepare.prepare``, …); the package
exports what the pipeline offers: the configuration, the steps, :func:`run_transfer`, :func:`run_compare`,
:func:`refit_students` and the types they take and return (the user's entry points are ``pate_stab.transfer``
and ``pate_stab.compare``, :mod:`pate_stab.run.api`).
The plan (:func:`plan_run`, what each aggregator can answer before training) lives beside the
aggregators' registry in :mod:`pate_stab.aggregation.plan`; the package re-exports it.

| module | step |
|---|---|
| :mod:`~pate_stab.run.config` | :class:`TransferConfig`: every setting of a run, in sections, checked |
| :mod:`~pate_stab.run.data` | the private set, public pool and evaluation split (features fitted on public data) |
| :mod:`~pate_stab.run.prepare` | budget check, run folder, record-keyed partition, teachers |
| :mod:`~pate_stab.run.release` | one registry aggregator releases labels through the run's ledger; the selectors |
| :mod:`~pate_stab.run.student` | the student on the released labels (post-processing) |
| :mod:`~pate_stab.run.student_base` | what the student, its cross-validation and the confidence selector share |
| :mod:`~pate_stab.run.report` | ``report.json`` (published) and the private diagnostics (0600) |
| :mod:`~pate_stab.run.run_folder` | one writer per run folder; which files a run may publish, private files |
| :mod:`~pate_stab.run.transfer` | :func:`run_transfer`: the steps above in order |
| :mod:`~pate_stab.run.compare` | :func:`run_compare`: every aggregator on the same teachers, table and plot |
| :mod:`~pate_stab.run.compare_table` | the compare table, its cost, summary and plot; the rows' units and reference |
| :mod:`~pate_stab.run.refit` | :func:`refit_students`: new students on a run's recorded releases (no spend) |
| :mod:`~pate_stab.run.api` | ``pate_stab.transfer`` / ``pate_stab.compare``: :class:`Data` in, typed results out |
| :mod:`~pate_stab.run.direct` | :func:`run_direct`: a direct private learner on the private split, as a compare row |

The names below are imported on first use (PEP 562): a module of the package loads without the
others (``pate-stab predict`` reads a student without Lightning's training code). The previous release's
``transfer_arrays`` and ``compare_arrays`` are still reachable here, with a ``DeprecationWarning`` when called.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports

if TYPE_CHECKING:
    from pate_stab.aggregation.plan import RunPlan, plan_run
    from pate_stab.run.compare import run_compare
    from pate_stab.run.config import TransferConfig
    from pate_stab.run.data import Task, load_task
    from pate_stab.run.direct import run_direct
    from pate_stab.run.prepare import BudgetTooSmallError, Prepared
    from pate_stab.run.refit import refit_students
    from pate_stab.run.release import Release, release_labels
    from pate_stab.run.student import fit_student
    from pate_stab.run.transfer import TransferResult, evaluate_and_report, run_transfer, transfer_result

_LAZY = {
    "RunPlan": "pate_stab.aggregation.plan",
    "plan_run": "pate_stab.aggregation.plan",
    "run_compare": "pate_stab.run.compare",
    "TransferConfig": "pate_stab.run.config",
    "Task": "pate_stab.run.data",
    "load_task": "pate_stab.run.data",
    "run_direct": "pate_stab.run.direct",
    "BudgetTooSmallError": "pate_stab.run.prepare",
    "Prepared": "pate_stab.run.prepare",
    "refit_students": "pate_stab.run.refit",
    "Release": "pate_stab.run.release",
    "release_labels": "pate_stab.run.release",
    "fit_student": "pate_stab.run.student",
    "TransferResult": "pate_stab.run.transfer",
    "evaluate_and_report": "pate_stab.run.transfer",
    "run_transfer": "pate_stab.run.transfer",
    "transfer_result": "pate_stab.run.transfer",
}
# the previous release's names: thin aliases that warn (DeprecationWarning) when called; not in __all__
_DEPRECATED = {
    "compare_arrays": "pate_stab.run.api",
    "transfer_arrays": "pate_stab.run.api",
}

__all__ = [
    "BudgetTooSmallError",
    "Prepared",
    "Release",
    "RunPlan",
    "Task",
    "TransferConfig",
    "TransferResult",
    "evaluate_and_report",
    "fit_student",
    "load_task",
    "plan_run",
    "refit_students",
    "release_labels",
    "run_compare",
    "run_direct",
    "run_transfer",
    "transfer_result",
]


__getattr__, __dir__ = lazy_exports(globals(), {**_LAZY, **_DEPRECATED}, __all__)
