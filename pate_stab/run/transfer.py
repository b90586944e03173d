"""The main job, end to end: private data → teachers → private release → student → report.

:func:`run_transfer` runs the toolkit's pipeline (DESIGN.md, "The pipeline") as its steps, in
order:

1. :func:`~pate_stab.run.prepare.prepare` — the data (:mod:`pate_stab.run.data`), a record-keyed
   partition into k shards and the k teachers (vectorised Lightning training, or reloaded);
2. :func:`~pate_stab.run.release.release_labels` — one aggregator from the registry, spending
   through the run's ledger, asked about ``num_queries`` public inputs chosen by
   ``query_selection`` (:mod:`pate_stab.selection`);
3. :func:`~pate_stab.run.student.fit_student` — the student on the released labels
   (post-processing);
4. :func:`evaluate_and_report` — evaluation and :func:`~pate_stab.run.report.transfer_report`
   → ``report.json``.

With a direct learner as ``aggregator`` (:data:`~pate_stab.run.config.DIRECT_LEARNER_NAMES`), steps 2–4
are one spend of :func:`~pate_stab.run.direct.run_direct` on the private split instead, and
``report.json`` holds its row (no partition and no teachers are made; for ``dpsgd-cnn``, which
trains on the images, no feature stage either).

A run lives in ``<checkpoints_dir>/<run_name>/``: ``config.json``, ``features.pt`` (the PCA fitted
on the public pool, if used), ``features/`` (scattering or SSL features fitted on the public pool, one file each,
:mod:`pate_stab.run.features`), ``teachers/`` (trained heads; propagation teachers are rebuilt
from the public graph and the shards instead), ``ledger.jsonl``, ``student.pt``, ``report.json``
(published) and ``private_diagnostics.json`` (mode 0600: statistics of the private data that no
mechanism paid for, never published; :mod:`pate_stab.run.run_folder` says which file is which and
the report lists them under ``files``).

Budget. The run folder's ledger records the budget cap at the first run: the user's
``budget_epsilon`` / ``budget_delta``, else the run's own (ε, δ). The run's spends are checked
against what the cap leaves before anything is trained (and again before the release), and a run
that does not fit is refused with nothing spent; a rerun may lower the cap, never raise it
(:func:`pate_stab.run.report.open_ledger`).

Resume. A rerun must read the same data: the run folder records a MAC of its splits under the
folder's secret key (``private_identity.json``, 0600) and refuses other data. Rerunning the
same run folder reuses the cached features, the trained teachers (``teachers/weights.pt``, or
Lightning's ``last.ckpt`` of an interrupted fit) and the recorded release (the ledger stores the
released outputs with the spend; a rerun replays them: no fresh selection or noise, no second
spend). A rerun that changes only the student's settings refits the student (post-processing:
no privacy cost); a rerun that changes anything upstream of the student is refused, unless nothing
was trained or spent in the folder yet (a run refused before its first training step). A release
interrupted by a crash can be finished from the outputs its spend recorded, without drawing noise
(``finish_from_ledger``, :mod:`pate_stab.run.release`; the report then says ``"partial"``). One run
writes a run folder at a time (:mod:`pate_stab.run.run_folder`). With the
same seed and ``releaser_noise: seeded``, two runs give the same report (wall times, paths and resume flags
aside); with the default secure noise the releases differ from run to run (the noise comes from the OS).
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import Tensor

from pate_stab.aggregation.plan import RunPlan
from pate_stab.data.own import OwnData
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.run.compare_table import at_or_below, majority_reference, reference_words
from pate_stab.run.config import DIRECT_LEARNER_NAMES, IMAGE_DIRECT_LEARNERS, TransferConfig
from pate_stab.run.data import pool_truth
from pate_stab.run.direct import check_direct_config, check_direct_inputs, direct_planned_spend, run_direct
from pate_stab.run.prepare import Prepared, prepare
from pate_stab.run.progress import accelerator_device, report_stage
from pate_stab.run.release import (
    Release,
    label_accuracy,
    recorded_spend_id,
    release_data_dependent,
    release_device,
    release_labels,
    release_spend_id,
)
from pate_stab.run.report import (
    PlannedSpend,
    check_data_set_budget,
    check_run_budget,
    clean_json,
    open_run_ledger,
    run_files,
    transfer_report,
)
from pate_stab.run.rounds import release_rounds, round_spend_id, rounds_private_diagnostics, rounds_report
from pate_stab.run.run_folder import PRIVATE_DIAGNOSTICS, run_lock, write_private_json, write_published
from pate_stab.run.student import (
    FewLabelsWarning,
    check_labels_released,
    fit_student,
    released_label_warnings,
    student_accuracies,
    student_device,
    teacher_accuracies,
)
from pate_stab.run.student_file import PublishedStudent, load_student, save_student
from pate_stab.student import StudentTargets

__all__ = ["TransferResult", "evaluate_and_report", "run_transfer", "transfer_result"]


@dataclass
class TransferResult:
    """A finished transfer: the student, the release (labels and the pool points they label),
    the report, and the prepared run (teachers, task) the steps shared.

    ``student`` is the published student (:class:`~pate_stab.run.student_file.PublishedStudent`):
    its ``predict`` takes raw inputs like the ones the run read (NumPy or torch) and applies the
    run's public preprocessing; ``student.trained`` is the trained model on the run's features.
    A direct learner's run (``aggregator: dpsgd-linear``, …) releases its model, not labels: ``release``
    is None, ``student`` is that model, and ``report["row"]`` its compare row."""

    student: PublishedStudent
    release: Release | None
    report: dict[str, Any]
    prep: Prepared

    def _released(self) -> Release:
        if self.release is None:
            raise ValueError(
                f"{self.prep.config.release.aggregator!r} is a direct learner: its model is the release (.student, "
                ".report['row']); it released no labels"
            )
        return self.release

    @property
    def labels(self) -> Tensor:
        """The released labels (int64, −1 for ⊥; float scores, NaN for ⊥, for soft labels)."""
        return self._released().labels

    @property
    def index(self) -> Tensor:
        """Pool positions of :attr:`labels` (``labels[i]`` labels public pool point ``index[i]``)."""
        return self._released().index


def evaluate_and_report(
    prep: Prepared,
    ledger: PrivacyLedger,
    release: Release,
    student: Any,
    targets: StudentTargets,
    *,
    start: float | None = None,
    rounds: list[dict[str, Any]] | None = None,
    rounds_private: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """Step 4: teachers and student on the evaluation split, pool figures where the pool has
    labels, PATE's data-dependent ε; the published report, also written to ``report.json``.

    ``rounds``: a release in rounds (:func:`~pate_stab.run.rounds.rounds_report`), shown under
    ``"rounds"``; ``release`` is then all rounds combined (no data-dependent figure: the stability
    releaser has none).

    The private diagnostics (teacher and plurality accuracy, the exact private size, the raw
    data-dependent ε, wall times) are written to ``private_diagnostics.json`` (mode 0600) only.
    """
    t0 = time.perf_counter()
    task = prep.task
    label_answered, label_all = label_accuracy(release, pool_truth(task, release.index))
    teacher_mean, plurality = (None, None) if prep.teachers is None else teacher_accuracies(
        prep.teachers, task.eval_x, task.eval_y, task.num_classes)  # fmt: skip  # neighbour votes: no teachers
    accuracies = {
        "label_answered": label_answered,
        "label_all": label_all,
        "teacher_mean": teacher_mean,
        "plurality": plurality,
        **student_accuracies(prep, student, release),
    }
    # PATE's data-dependent ε, reported beside the enforced data-independent ε
    data_dependent = None
    if rounds is None and release.partial is None:  # a partial release (finish_from_ledger) draws nothing
        t1 = time.perf_counter()
        data_dependent = release_data_dependent(prep, release, generator=prep.generators["data_dependent"])
        report_stage(prep.timings, "data-dependent", time.perf_counter() - t1, "cpu", prep.devices)
    # the report stage: evaluation (CPU predictions) and the files; its line follows the file writes
    prep.timings["evaluation"] = time.perf_counter() - t0
    prep.devices["evaluation"] = "cpu"
    total = {} if start is None else {"total": time.perf_counter() - start}
    report, diagnostics = transfer_report(
        prep,
        ledger,
        release,
        student=student,
        targets=targets,
        accuracies=accuracies,
        data_dependent=data_dependent,
        wall_times={**prep.timings, **total},
    )
    if rounds is not None:
        report["rounds"] = rounds
    if release.partial is not None:  # finished from the ledger after an interruption (pate_stab.run.release)
        report["status"] = "partial"
        report["partial_release"] = release.partial
    if rounds_private:  # teachers rebuilt for later rounds (round_features: student)
        diagnostics["rounds_teachers"] = rounds_private
    _flag_majority(report, prep, report["student"]["test_accuracy"], report["student"].setdefault("warnings", []))
    if task.pool_labels_private is not None:  # label privacy, queries over private inputs: private labels
        answered, everything = label_accuracy(release, task.pool_labels_private[release.index])
        diagnostics["label_accuracy_private"] = {"answered": answered, "all_queries": everything}
    diagnostics["stage_device"] = dict(prep.devices)
    write_private_json(prep.run_dir / PRIVATE_DIAGNOSTICS, diagnostics)
    write_published(prep.run_dir / "report.json", json.dumps(report, indent=2, sort_keys=True))
    report_stage({}, "report", time.perf_counter() - t0, "cpu")
    return report


def _flag_majority(report: dict[str, Any], prep: Prepared, accuracy: float | None, warnings_: list[str]) -> None:
    """The majority-class reference in ``report`` (public evaluation labels, no spend:
    :func:`pate_stab.run.compare_table.majority_reference`), and a plain warning in ``warnings_`` where
    ``accuracy`` is at or below it."""
    task = prep.task
    reference = majority_reference(task.eval_y, task.class_names, task.num_classes)
    report["majority_reference"] = reference
    report["at_or_below_majority"] = at_or_below(accuracy, reference)
    if report["at_or_below_majority"] and reference is not None:
        warnings_.append(
            f"the test accuracy {accuracy:.4f} is no better than {reference_words(reference)}, the evaluation split's "
            "most common class: this model has learnt nothing usable (docs/plan.md: The majority-class reference)"
        )


def _planned_spends(config: TransferConfig, ledger: PrivacyLedger | None) -> list[PlannedSpend]:
    """The run's spends (ids as ``ledger`` holds them): one release, its rounds, or one direct learner."""
    if config.release.aggregator in DIRECT_LEARNER_NAMES:
        return [direct_planned_spend(config, config.release.aggregator, config.release.epsilon)]
    if config.release_rounds.rounds > 1:
        return [
            PlannedSpend(
                round_spend_id(
                    config.run_name,
                    config.release.aggregator,
                    config.release.epsilon,
                    r + 1,
                    config.release_rounds.rounds,
                ),
                config.release.epsilon * share,
                config.release.delta * share,
            )  # fmt: skip
            for r, share in enumerate(config.round_shares)
        ]
    spend_id = (
        release_spend_id(config.run_name, config.release.aggregator, config.release.epsilon)
        if ledger is None
        else recorded_spend_id(ledger, config.run_name, config.release.aggregator, config.release.epsilon)
    )
    return [PlannedSpend(spend_id, config.release.epsilon, config.release.delta)]


def _budget_args(config: TransferConfig) -> dict[str, Any]:
    return {
        "run_name": config.run_name,
        "neighbouring": config.release.neighbouring,
        "privacy_unit": config.release.privacy_unit,
        "spends": lambda ledger: _planned_spends(config, ledger),
        "cap_epsilon": config.release.budget_epsilon,
        "cap_delta": config.release.budget_delta,
        "default_cap": (config.release.epsilon, config.release.delta),
        "how": f"use a lower ε, or a new run folder (not {config.run_name!r}: a new ledger, a new use of the data "
        "that you must account for)",
    }


def _run_direct(prep: Prepared, start: float) -> dict[str, Any]:
    """A direct private learner as the run's release (:mod:`pate_stab.run.direct`): ``report.json`` holds its row."""
    config = prep.config
    check_direct_inputs(prep, [config.release.aggregator])  # before the ledger is opened
    ledger = open_run_ledger(prep.run_dir, data_set=prep.data_set, **_budget_args(config))
    try:
        t0 = time.perf_counter()
        row = run_direct(
            prep, ledger, learner=config.release.aggregator, epsilon=config.release.epsilon, student_file="student.pt"
        )
        device = (
            accelerator_device(config.execution.accelerator)
            if config.release.aggregator in IMAGE_DIRECT_LEARNERS
            else "cpu"
        )
        report_stage(
            prep.timings, f"direct {config.release.aggregator}", time.perf_counter() - t0, device, prep.devices
        )
        report = {
            "run": config.run_name, "run_dir": str(prep.run_dir), "status": "complete", "kind": "direct",
            "dataset": config.data.dataset, "aggregator": config.release.aggregator, "epsilon": row["epsilon"],
            "delta": row["delta"], "neighbouring": row["neighbouring"], "row": row,
            "test_accuracy": row["student_acc"], "ledger": ledger.report(),
            # the models are the mechanism outputs; student.pt the same model with its preprocessing
            "files": run_files(prep.run_dir, ["report.json", "student.pt", "direct/"]),
            "warnings": [],
        }  # fmt: skip
        _flag_majority(report, prep, row["student_acc"], report["warnings"])
        report = clean_json(report)
        # wall times of a private stage depend on the private data: private diagnostics only
        private = {"wall_time_s": {**prep.timings, "total": time.perf_counter() - start},
                   "stage_device": dict(prep.devices)}  # fmt: skip
        write_private_json(prep.run_dir / PRIVATE_DIAGNOSTICS, clean_json(private))
        write_published(prep.run_dir / "report.json", json.dumps(report, indent=2, sort_keys=True))
        return report
    finally:
        ledger.close()


def run_transfer(
    config: TransferConfig, *, data: OwnData | None = None, on_plan: Callable[[RunPlan], None] | None = None
) -> dict[str, Any]:
    """Run (or resume) one transfer and return its published report (also written to ``report.json``).

    The private diagnostics (teacher and plurality accuracy, the exact private size, the raw
    data-dependent ε, wall times) are written to ``private_diagnostics.json`` (mode 0600) only.

    ``data``: the user's checked arrays for ``dataset="arrays"`` (:func:`pate_stab.data.own.own_data`).
    ``on_plan`` receives the run's plan (:mod:`pate_stab.aggregation.plan`) before the budget check and
    any training (the command line prints it; it holds the private size n: not for publication).

    Raises:
        BudgetTooSmallError: the stability releaser would answer nothing (before any training).
        FileNotFoundError: data directory or files missing.
        InputDataError: own data that does not fit (before any training or spending).
        ValueError: bad configuration, or a run folder made with another configuration.
        ReplayedSpendError: the ledger holds a paid release of this run whose outputs were not
            all recorded; nothing is drawn again (finish from the recorded outputs with
            ``finish_from_ledger=True``, or start a new run).
        RunFolderLockedError: another run holds the run folder's lock; nothing was written.
        NoLabelsError: the release answered no query; no student or report is written (unless
            ``allow_empty_student``). The spend stays recorded in the ledger.

    Warns:
        FewLabelsWarning: the student learns from labels of one class, or of fewer classes than the
            task's (also in the report, ``student.warnings``).
    """
    result = transfer_result(config, data=data, on_plan=on_plan)
    return result if isinstance(result, dict) else result.report


def transfer_result(
    config: TransferConfig, *, data: OwnData | None = None, on_plan: Callable[[RunPlan], None] | None = None
) -> TransferResult | dict[str, Any]:
    """:func:`run_transfer`, returning the student and the release with the report (a status dict
    when ``stop_after`` stops the run early).

    The run holds its folder's lock throughout (:func:`~pate_stab.run.run_folder.run_lock`): a
    second run in the same folder meanwhile is refused at once
    (:class:`~pate_stab.run.run_folder.RunFolderLockedError`).
    """
    with run_lock(config.run_dir):
        return _transfer_result(config, data=data, on_plan=on_plan)


def _transfer_result(
    config: TransferConfig, *, data: OwnData | None, on_plan: Callable[[RunPlan], None] | None
) -> TransferResult | dict[str, Any]:
    start = time.perf_counter()
    check_run_budget(config.run_dir, **_budget_args(config))  # the cap, before anything is trained
    if config.release.aggregator in DIRECT_LEARNER_NAMES:
        check_direct_config(config, [config.release.aggregator])  # before any data are read

    def data_set_cap(p: Prepared) -> None:  # the data set's cap across folders, before any training
        check_data_set_budget(
            p.run_dir,
            p.data_set,
            _planned_spends(config, None),
            neighbouring=config.release.neighbouring,
            privacy_unit=config.release.privacy_unit,
        )

    prep = prepare(config, data=data, on_plan=on_plan, before_teachers=data_set_cap)  # 1. data, partition, teachers
    report: dict[str, Any] = {"run": config.run_name, "run_dir": str(prep.run_dir), "status": "teachers trained"}
    if config.execution.stop_after == "teachers":
        return report
    if config.release.aggregator in DIRECT_LEARNER_NAMES:  # its model, saved as student.pt, is the release
        report = _run_direct(prep, start)
        return TransferResult(load_student(prep.run_dir / "student.pt"), None, report, prep)
    # refused here if the folder's cap or the data set's does not cover it
    ledger = open_run_ledger(prep.run_dir, data_set=prep.data_set, **_budget_args(config))
    try:
        t0 = time.perf_counter()
        rounds = rounds_private = None
        if config.release_rounds.rounds > 1:  # 2. the private release, in rounds (pate_stab.run.rounds)
            in_rounds = release_rounds(prep, ledger)
            release = in_rounds.combined
            rounds = rounds_report(config, in_rounds, prep.task.num_classes)
            rounds_private = rounds_private_diagnostics(in_rounds, prep)
        else:
            release = release_labels(  # 2. the private release
                prep,
                ledger,
                aggregator=config.release.aggregator,
                epsilon=config.release.epsilon,
                generator=prep.generators["release"],
                selection_generator=prep.generators["selection"],
                finishable=True,  # an interrupted release can be finished (finish_from_ledger)
            )
        # the votes are computed as the release asks for them: their time is part of the release's
        if prep.votes is not None:  # neighbour votes (Private-kNN) are computed inside the release
            report_stage(prep.timings, "votes", prep.votes.seconds, prep.votes.device, prep.devices)
        report_stage(prep.timings, "release", time.perf_counter() - t0, release_device(prep), prep.devices)
        if config.execution.stop_after == "release":
            report["status"] = "released"
            return report
        if not config.student.allow_empty_student:
            check_labels_released(release, num_queries=config.release.num_queries)  # nothing to learn: no student
        for message in released_label_warnings(release, prep.task.num_classes, prep.task.class_names):
            warnings.warn(message, FewLabelsWarning, stacklevel=2)
        t0 = time.perf_counter()
        student, targets = fit_student(  # 3. the student
            prep, release, generator=prep.generators["student"], bottom_generator=prep.generators["bottom"]
        )
        published = save_student(prep.run_dir / "student.pt", student, prep.task, config)
        report_stage(prep.timings, "student", time.perf_counter() - t0, student_device(prep), prep.devices)
        report = evaluate_and_report(
            prep, ledger, release, student, targets, start=start, rounds=rounds, rounds_private=rounds_private
        )  # 4.
        return TransferResult(published, release, report, prep)
    finally:
        ledger.close()
