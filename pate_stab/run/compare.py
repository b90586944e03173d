"""Every aggregator on the same teachers' votes at the same (ε, δ): table and privacy–utility plot.

One set of teachers is trained (or reloaded) for the run; for each target ε and each aggregator
— the stability releaser (hard labels; soft labels on binary tasks) and PATE's LNMax, GNMax and
Confident-GNMax with data-independent accounting, and, when named, Private-kNN (``private-knn``,
``confident-private-knn``: the votes of each query's nearest private records in a fresh Poisson
sample, drawn inside the release; :mod:`pate_stab.aggregation.private_knn`) — the votes are released at that
(ε, δ) for m queries, a student is trained on what was released, and the row records queries
answered, label accuracy and the student's test accuracy. Every row chooses its queries by the
run's ``query_selection``: with ``"first"`` all rows release the same m pool points; with
``"student-confidence"`` each release runs the same selection procedure on its own released
outputs (one aggregator instance, one spend, at most m queries), so each aggregator is compared
at the same budget with the same procedure, on the points that procedure chose for it. Each release is a
separate spend in the run's ledger (which counts their basic-composition sum against its cap), with a
deterministic spend id, so a rerun reuses them.

Each aggregator row's student is saved, self-contained (:mod:`pate_stab.run.student_file`), as
``students/<aggregator>_eps<ε>_r<repeat>.pt`` (the row's ``student_file``); ``pate-stab predict
--run-dir RUN --student NAME`` or ``pate_stab.load_student`` uses it. A direct learner's row saves
its model the same way, ``students/<learner>_eps<ε>_r<repeat>.pt``, beside the model file its spend
recorded under ``direct/`` (:mod:`pate_stab.run.direct`; that file loads too).

Published and private (DESIGN.md fact 8, :mod:`pate_stab.run.run_folder`). ``compare.json``,
``compare.txt`` and ``compare.png`` hold what may be published: the certified ε and δ of each
release, the sanitised data-dependent ε, release counts, student accuracy on the evaluation split,
and label accuracy — the released labels against the public pool's true labels, public-side
information. Each row is a separate release from the same private data, so the table's total
cost is printed beside it: (Σε, Σδ) by basic composition. ``private_compare.json`` (mode 0600)
holds what no mechanism paid for: mean teacher and plurality accuracy, the exact private size
(private under add/remove: the DP-SGD rows publish only the public size N they were computed
from), the raw data-dependent ε with its inputs, wall times.

The budget is a cap (DESIGN.md fact 12, :func:`pate_stab.run.report.open_ledger`): the first run
records the user's ``budget_epsilon`` / ``budget_delta``, or the plan's total where none is set. Before
any student is trained or anything released, the plan's unspent spends are checked against what
the cap leaves (earlier releases replay at no cost); a plan that does not fit — a rerun with more
repeats, ε values or rows than the cap allows — is refused with nothing spent. A run never raises
the cap: set a cap that covers the larger plan at the first run, or use a new run folder (a new
ledger: a new use of the data that the user accounts for). Repeated ε values are refused (each ε
is one spend id per repeat).

One relation per ledger: the releasers and the convex heads spend under the run's relation; DP-SGD
(add/remove) in a replace-one run is counted by group privacy
(:meth:`pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger.cost`).

Where the stability releaser cannot answer at a setting, the row says which k (at this ε) or
which ε (with this k) a unanimous vote would need (:func:`pate_stab.theory.teachers_for_unanimous_answer`).

The table, the summary over repeats and the plot are in :mod:`pate_stab.run.compare_table` (re-exported here).
"""

from __future__ import annotations

import json
import math
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch
from tqdm import tqdm

from pate_stab._checks import check_int
from pate_stab.aggregation.data_dependent import DATA_DEPENDENT_LABEL, split_data_dependent
from pate_stab.aggregation.registry import aggregator_spec, answerability
from pate_stab.data.own import OwnData
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.rng import spawn_generators
from pate_stab.run.compare_table import (
    check_learner_units,
    flag_rows,
    format_rows,
    format_summary,
    majority_reference,
    plot_rows,
    summarise_rows,
    total_cost,
    total_cost_line,
)
from pate_stab.run.config import IMAGE_DIRECT_LEARNERS, RUN_AGGREGATORS, TransferConfig
from pate_stab.run.data import pool_truth
from pate_stab.run.direct import (
    check_direct_config,
    check_direct_inputs,
    check_direct_learners,
    direct_legend,
    direct_planned_spend,
    run_direct,
)
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
    LABEL_ACCURACY_NOTE,
    PlannedSpend,
    check_data_set_budget,
    check_run_budget,
    clean_json,
    noise_report,
    open_run_ledger,
    run_files,
)
from pate_stab.run.run_folder import run_lock, write_private_json, write_published
from pate_stab.run.student import (
    FewLabelsWarning,
    fit_student,
    released_label_warnings,
    student_accuracies,
    student_device,
    teacher_accuracies,
)
from pate_stab.run.student_file import save_student
from pate_stab.selection.adaptive_batches import SELECTION_PRIVACY

__all__ = ["PRIVATE_COMPARE", "compare_title", "format_rows", "format_summary", "plot_rows", "run_compare",
           "summarise_rows", "total_cost", "total_cost_line"]  # fmt: skip

PRIVATE_COMPARE = "private_compare.json"
UNANSWERABLE_NOTE = (
    "At this ε too few of the teachers agree for the releaser to answer, so more teachers or a larger ε is needed "
    "(README: Before training: a plan)."
)
"""A row whose aggregator answers nothing at the run's k and ε (the k and ε it needs are the row's
``teachers_needed`` and ``epsilon_needed``: computed from the configuration alone)."""
NO_STUDENT_NOTE = "No query was answered, so this row has no student (README: Your own data)."
"""A row whose release answered nothing (the run keeps no student for it)."""
UNANSWERABLE_NO_STUDENT_NOTE = (
    "At this ε too few of the teachers agree for the releaser to answer, so no query was answered and this row has "
    "no student (README: Before training: a plan)."
)
"""Both of the above in one sentence."""
STUDENTS_DIR = "students"  # each aggregator row's student (published: trained on released labels)


def student_name(aggregator: str, epsilon: float, repeat: int) -> str:
    """A compare row's student file name, e.g. ``gnmax_eps8_r0.pt`` (``pate-stab predict --student``)."""
    return f"{aggregator}_eps{epsilon:g}_r{repeat}.pt"


def run_compare(
    config: TransferConfig,
    *,
    epsilons: Sequence[float],
    aggregators: Sequence[str] | None = None,
    repeats: int = 1,
    data: OwnData | None = None,
    direct: Sequence[str] = (),
) -> dict[str, Any]:
    """Release the same votes with every aggregator at every ε, train a student on each release.

    ``repeats`` > 1 releases every (aggregator, ε) that many times, each a separate spend with
    its own noise, selection and student; the summary gives mean, spread and range per setting.
    ``direct`` adds direct private learners trained on the private split at the same ε values
    (:mod:`pate_stab.run.direct`), each a spend of the same ledger, after the aggregator rows.
    Writes ``compare.json``, ``compare.txt`` and ``compare.png`` in the run folder. ``data``: the
    user's checked arrays for ``dataset="arrays"`` (:func:`pate_stab.data.own.own_data`).

    Returns:
        ``{"rows": [...], "table": str, "plot": path, ...}``.

    The run holds its folder's lock throughout (:func:`~pate_stab.run.run_folder.run_lock`): a
    concurrent run in the same folder is refused at once.
    """
    with run_lock(config.run_dir):
        return _run_compare(config, epsilons=epsilons, aggregators=aggregators, repeats=repeats, data=data,
                            direct=direct)  # fmt: skip


def compare_title(config: TransferConfig, repeats: int = 1) -> str:
    """The title of ``compare.png``: data set and privacy unit, teachers, queries and their selection,
    the student and δ (and the releases per setting when ``repeats`` > 1)."""
    return (
        f"{config.data.dataset} ({config.release.privacy_unit} privacy): k={config.teachers.num_teachers} "
        f"{config.teachers.teacher_model} teachers, "
        f"m={config.release.num_queries} ({config.selection.query_selection})\n"
        f"{config.student.student_method} student, δ={config.release.delta:g}"
        + (f", {repeats} releases" if repeats > 1 else "")
    )


def _check_compare(config: TransferConfig, epsilons: Sequence[float]) -> None:
    """Settings compare refuses before anything is read, trained or spent."""
    if not epsilons or any(not (isinstance(e, int | float) and math.isfinite(e) and e > 0) for e in epsilons):
        raise ValueError(f"epsilons must be positive finite numbers, got {list(epsilons)!r}")
    if config.execution.finish_from_ledger:
        raise ValueError(
            "finish_from_ledger finishes one interrupted release of a transfer; compare replays its recorded rows "
            "on a rerun and has no partial row (run pate-stab transfer with the row's settings to finish one)"
        )
    if config.release_rounds.rounds > 1:
        raise ValueError(
            f"compare releases each row in one round; rounds={config.release_rounds.rounds} is supported by "
            "transfer only "
            "(set rounds: 1, or run pate-stab transfer per ε)"
        )
    repeated = sorted({float(e) for e in epsilons if [float(x) for x in epsilons].count(float(e)) > 1})
    if repeated:
        raise ValueError(
            f"epsilons repeat {', '.join(f'{e!r}' for e in repeated)}: each ε is one release per repeat; "
            "use repeats=R (--repeats R) for independent releases at one ε"
        )


def _planned_spends(
    config: TransferConfig,
    aggregators: Sequence[str],
    epsilons: Sequence[float],
    repeats: int,
    direct_plan: list[tuple[float, str, int]],
) -> Callable[[PrivacyLedger | None], list[PlannedSpend]]:
    """The plan's spends (each release is (ε, δ)-DP on its own; the ledger counts their basic
    composition), with their ids as ``ledger`` holds them (None: as a new ledger would)."""

    def spends(ledger: PrivacyLedger | None) -> list[PlannedSpend]:
        out = [
            PlannedSpend(
                release_spend_id(config.run_name, a, e, r) if ledger is None
                else recorded_spend_id(ledger, config.run_name, a, e, r),
                e, config.release.delta,
            )  # fmt: skip
            for r in range(repeats) for e in map(float, epsilons) for a in aggregators
        ]  # fmt: skip
        return out + [direct_planned_spend(config, d, e, r) for e, d, r in direct_plan]

    return spends


def _run_aggregators(aggregators: Sequence[str] | None, *, binary: bool) -> list[str]:
    """The rows' aggregators: the given ones, checked, or every run aggregator the task allows."""
    if aggregators is None:  # the teachers' aggregators; Private-kNN's neighbour-vote rows are asked for by name
        teachers = [a for a in RUN_AGGREGATORS if aggregator_spec(a).votes != "queries"]
        return [a for a in teachers if binary or not aggregator_spec(a).binary_only]
    bad = [a for a in aggregators if a not in RUN_AGGREGATORS or (aggregator_spec(a).binary_only and not binary)]
    if bad:
        raise ValueError(
            f"aggregators not available for this task: {bad} (choose from {', '.join(RUN_AGGREGATORS)}; "
            "stability-soft needs a binary task)"
        )
    return list(aggregators)


def _run_compare(
    config: TransferConfig,
    *,
    epsilons: Sequence[float],
    aggregators: Sequence[str] | None,
    repeats: int,
    data: OwnData | None,
    direct: Sequence[str],
) -> dict[str, Any]:
    _check_compare(config, epsilons)
    start = time.perf_counter()
    direct = check_direct_learners(list(direct), dataset=config.data.dataset)
    check_direct_config(config, direct)  # DP-SGD's N and batch size: before any data are read or teachers trained
    check_learner_units(config.release.privacy_unit, direct)  # a label-private learner in a record run: refused here
    repeats = check_int("repeats", repeats, minimum=1)
    # repeat 0 first: a run extended with more repeats keeps the earlier rows' generators and spends
    direct_plan = [(float(e), d, r) for r in range(repeats) for e in epsilons for d in direct]
    how = (
        f"lower the plan (fewer repeats, ε values or rows), or use a new run folder (not {config.run_name!r}: a new "
        "ledger, a new use of the data that you must account for)"
    )
    budget_args: dict[str, Any] = {"run_name": config.run_name, "neighbouring": config.release.neighbouring,
                   "privacy_unit": config.release.privacy_unit, "how": how,
                   "cap_epsilon": config.release.budget_epsilon, "cap_delta": config.release.budget_delta}  # fmt: skip
    if aggregators is not None:  # before any training: the plan against the cap (the default list needs C)
        spends = _planned_spends(config, aggregators, epsilons, repeats, direct_plan)
        check_run_budget(config.run_dir, spends=spends, **budget_args)
    # direct learners only: no teachers; no feature stage unless a learner reads the features
    # neighbour-vote rows (Private-kNN) read the private records themselves: they ask no teachers
    asks_teachers = aggregators is None or any(aggregator_spec(a).votes != "queries" for a in aggregators)
    asks_votes = aggregators is None or len(aggregators) > 0
    uses_features = asks_votes or any(d not in IMAGE_DIRECT_LEARNERS for d in direct)

    def before_teachers(p: Prepared) -> None:  # the data set's cap across folders; the direct learners' inputs
        if aggregators is not None:
            check_data_set_budget(p.run_dir, p.data_set, _planned_spends(config, aggregators, epsilons, repeats,
                                  direct_plan)(None), neighbouring=config.release.neighbouring,
                                  privacy_unit=config.release.privacy_unit)  # fmt: skip
        if direct:
            check_direct_inputs(p, direct)

    prep = prepare(config, check_budget=False, data=data, with_teachers=asks_teachers, with_features=uses_features,
                   before_teachers=before_teachers)  # fmt: skip
    aggregators = _run_aggregators(aggregators, binary=prep.task.num_classes == 2)
    plan = [(float(e), a, r) for r in range(repeats) for e in epsilons for a in aggregators]
    if not plan and not direct:
        raise ValueError("nothing to compare: no aggregators and no direct learners")
    n_gens = max(len(plan), 1)
    gens = {name: spawn_generators(prep.generators[name], n_gens)
            for name in ("release", "student", "bottom", "selection", "data_dependent")}  # fmt: skip
    # the whole plan's unspent cost against the cap, before any release or student
    spends = _planned_spends(config, aggregators, epsilons, repeats, direct_plan)
    ledger = open_run_ledger(prep.run_dir, spends=spends, data_set=prep.data_set, **budget_args)
    try:
        teachers = _teacher_accuracies(prep)
        rows: list[dict[str, Any]] = []
        private_rows: list[dict[str, Any]] = []
        for i, (eps, agg, rep) in enumerate(tqdm(plan, desc="compare", disable=not config.execution.progress)):
            row_name = f"{agg} ε={eps:g}" + (f" repeat {rep}" if repeats > 1 else "")
            row, private_row = _aggregator_row(prep, ledger, agg, eps, rep, {k: g[i] for k, g in gens.items()},
                                               row_name=row_name)  # fmt: skip
            rows.append(row)
            private_rows.append(private_row)
        direct_device = accelerator_device(config.execution.accelerator)
        for eps, learner, rep in tqdm(direct_plan, desc="direct learners", disable=not config.execution.progress):
            t0 = time.perf_counter()
            (prep.run_dir / STUDENTS_DIR).mkdir(exist_ok=True)
            rows.append(run_direct(prep, ledger, learner=learner, epsilon=eps, repeat=rep,
                                   student_file=f"{STUDENTS_DIR}/{student_name(learner, eps, rep)}"))  # fmt: skip
            device = direct_device if learner in IMAGE_DIRECT_LEARNERS else "cpu"
            name = f"direct {learner} ε={eps:g}" + (f" repeat {rep}" if repeats > 1 else "")
            report_stage(prep.timings, name, time.perf_counter() - t0, device, prep.devices)
        return _write_compare(prep, ledger, rows, private_rows, teachers=teachers, repeats=repeats, direct=direct,
                              has_students=bool(plan) or bool(direct), start=start)  # fmt: skip
    finally:
        ledger.close()


def _answerability(agg: str, eps: float, config: TransferConfig) -> tuple[dict[str, Any], str]:
    """What a stability row needs to answer (``teachers_needed``, and ``epsilon_needed`` where it cannot),
    from the configuration alone, and the row's note."""
    needed: dict[str, Any] = {}
    status = answerability(agg, config.aggregator_settings(eps))
    if status is None:
        return needed, ""
    needed["teachers_needed"] = status.teachers_needed
    if status.answerable:
        return needed, ""
    needed["epsilon_needed"] = status.epsilon_needed
    return needed, UNANSWERABLE_NOTE  # the k and ε it needs: teachers_needed, epsilon_needed


def _aggregator_row(
    prep: Prepared,
    ledger: PrivacyLedger,
    agg: str,
    eps: float,
    rep: int,
    gens: dict[str, torch.Generator],
    *,
    row_name: str,
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One aggregator row: release (one spend), data-dependent ε, student; (published row, private row)."""
    config, devices = prep.config, prep.devices
    needed, note = _answerability(agg, eps, config)
    t0, votes_before = time.perf_counter(), prep.votes.seconds if prep.votes is not None else 0.0
    release = release_labels(prep, ledger, aggregator=agg, epsilon=eps, generator=gens["release"],
                             selection_generator=gens["selection"], repeat=rep)  # fmt: skip
    if prep.votes is not None:  # votes are computed as releases ask for them (part of the release)
        report_stage(prep.timings, f"votes ({row_name})", prep.votes.seconds - votes_before, prep.votes.device, devices)
    report_stage(prep.timings, f"release ({row_name})", time.perf_counter() - t0, release_device(prep), devices)
    acc_answered, acc_all = label_accuracy(release, pool_truth(prep.task, release.index))
    s = release.summary
    t0 = time.perf_counter()
    dd, dd_private = split_data_dependent(release_data_dependent(prep, release, generator=gens["data_dependent"]))
    report_stage(prep.timings, f"data-dependent ({row_name})", time.perf_counter() - t0, "cpu", devices)
    label_warnings = released_label_warnings(release, prep.task.num_classes, prep.task.class_names)
    empty = int(s["answered"]) == 0 and not config.student.allow_empty_student
    if empty:  # nothing released to learn from: no student (allow_empty_student keeps one)
        student: dict[str, Any] = {"accuracy": {"student": None, "student_unlabelled_pool": None,
                                                "unlabelled_pool_size": None}, "trained_on": 0, "selection": None,
                                   "file": None}  # fmt: skip
        note = NO_STUDENT_NOTE if not note else UNANSWERABLE_NO_STUDENT_NOTE
    else:
        student = _row_student(prep, release, agg, eps, rep, gens, row_name=row_name)
        for message in label_warnings:
            warnings.warn(f"{agg} at ε={eps:g}: {message}", FewLabelsWarning, stacklevel=3)
    accuracy = student["accuracy"]
    row = {
        "aggregator": agg,
        "privacy_unit": config.release.privacy_unit,
        "repeat": rep,
        "calibration": s.get("calibration", "data-independent"),
        "target_epsilon": eps,
        "epsilon": s["epsilon"],
        "delta": s["delta"],
        "query_selection": config.selection.query_selection,
        "offered": int(release.index.numel()),
        "selection_rounds": len(release.selection.get("rounds", [])),
        "seen": int(s.get("queries_seen", config.release.num_queries)),
        "answered": int(s["answered"]),
        "label_acc": acc_answered,
        "label_acc_all": acc_all,
        "student_trained_on": student["trained_on"],
        "student_acc": accuracy["student"],
        "student_acc_unlabelled_pool": accuracy["student_unlabelled_pool"],
        "unlabelled_pool_size": accuracy["unlabelled_pool_size"],
        "student_selection": student["selection"],  # student_select: cv
        "student_warnings": [] if empty else label_warnings,
        "student_file": student["file"],
        "spend_id": release.spend_id,
        "reused": release.reused,
        **noise_report(s),
        **dd,
        **needed,
        "note": note,
    }
    private_row = {"aggregator": agg, "target_epsilon": eps, "repeat": rep, "spend_id": release.spend_id, **dd_private}
    if prep.task.pool_labels_private is not None:  # queries over private inputs: their labels are private
        private_answered, private_all = label_accuracy(release, prep.task.pool_labels_private[release.index])
        private_row |= {"label_acc_private": private_answered, "label_acc_all_private": private_all}
    return row, private_row


def _row_student(
    prep: Prepared, release: Release, agg: str, eps: float, rep: int, gens: dict[str, torch.Generator], *, row_name: str
) -> dict[str, Any]:
    """Train and save a row's student (``students/``); its accuracies, size of training set and selection record."""
    t0 = time.perf_counter()
    student, targets = fit_student(prep, release, generator=gens["student"], bottom_generator=gens["bottom"])
    report_stage(prep.timings, f"student ({row_name})", time.perf_counter() - t0, student_device(prep), prep.devices)
    student_file = f"{STUDENTS_DIR}/{student_name(agg, eps, rep)}"
    (prep.run_dir / STUDENTS_DIR).mkdir(exist_ok=True)
    save_student(prep.run_dir / student_file, student, prep.task, prep.config)
    return {
        "accuracy": student_accuracies(prep, student, release),
        "trained_on": int(targets.index.numel()),
        "selection": getattr(student, "selection", None),
        "file": student_file,
    }


def _write_compare(
    prep: Prepared,
    ledger: PrivacyLedger,
    rows: list[dict[str, Any]],
    private_rows: list[dict[str, Any]],
    *,
    teachers: tuple[float | None, float | None],
    repeats: int,
    direct: list[str],
    has_students: bool,
    start: float,
) -> dict[str, Any]:
    """The table, the plot, ``compare.json`` / ``compare.txt`` (published) and ``private_compare.json``."""
    config = prep.config
    t_report = time.perf_counter()
    # always predicting the evaluation split's most common class: public labels, no spend
    # (pate_stab.run.compare_table.majority_reference)
    reference = majority_reference(prep.task.eval_y, prep.task.class_names, prep.task.num_classes)
    flag_rows(rows, reference)
    summary = summarise_rows(rows)
    table = format_rows(rows, run_neighbouring=config.release.neighbouring, reference=reference)
    table += "\n\n" + format_summary(summary) if repeats > 1 else ""
    if direct:
        table += "\n" + direct_legend(rows, run_neighbouring=config.release.neighbouring, reference=reference)
    plot = plot_rows(rows, prep.run_dir / "compare.png", title=compare_title(config, repeats),
                     caption=total_cost_line(rows, run_neighbouring=config.release.neighbouring),
                     majority=reference)  # fmt: skip
    out = {
        "run": config.run_name,
        "dataset": config.data.dataset,
        "num_teachers": config.teachers.num_teachers,
        "num_queries": config.release.num_queries,
        "max_unstable": config.release.max_unstable,
        "calibration": config.release.calibration,
        "query_selection": {
            "strategy": config.selection.query_selection,
            "round_size": config.selection.selection_round_size,
            "privacy": SELECTION_PRIVACY,
        },
        "delta": config.release.delta,
        "noise": noise_report({"noise": config.release.releaser_noise}),
        "privacy": config.privacy_relation(),
        "epsilon_columns": DATA_DEPENDENT_LABEL,
        "data_dependent_sanitisation": {"order": config.release.dd_order, "sigma": config.release.dd_sigma},
        "label_accuracy_note": LABEL_ACCURACY_NOTE,
        "rows": rows,
        "reference": reference,
        "summary": summary,
        "total_cost": total_cost(rows, run_neighbouring=config.release.neighbouring),
        "repeats": repeats,
        "direct_learners": direct,
        "student": {"model": config.student.student_model, "method": config.student.student_method},
        "ledger": ledger.report(),
        "plot": str(plot),
        "files": run_files(
            prep.run_dir,
            ["compare.json", "compare.txt", "compare.png", *([f"{STUDENTS_DIR}/"] if has_students else [])],
            [PRIVATE_COMPARE],
        ),
    }
    private = _private_compare(prep, private_rows, teachers=teachers, start=start)
    out, private = clean_json(out), clean_json(private)
    write_private_json(prep.run_dir / PRIVATE_COMPARE, private)
    write_published(prep.run_dir / "compare.json", json.dumps(out, indent=2, sort_keys=True))
    write_published(prep.run_dir / "compare.txt", table + "\n")
    report_stage({}, "report", time.perf_counter() - t_report, "cpu")
    out["table"] = table
    out["private"] = private  # in memory only: written to private_compare.json
    return out


def _teacher_accuracies(prep: Prepared) -> tuple[float | None, float | None]:
    """Mean teacher and plurality accuracy on the evaluation split (private; None without teachers)."""
    if prep.teachers is None:
        return None, None
    task = prep.task
    return teacher_accuracies(prep.teachers, task.eval_x, task.eval_y, task.num_classes)


def _private_compare(
    prep: Prepared,
    private_rows: list[dict[str, Any]],
    *,
    teachers: tuple[float | None, float | None],
    start: float,
) -> dict[str, Any]:
    """``private_compare.json``: what no mechanism paid for (teacher accuracy, the private size, raw
    data-dependent ε, wall times, devices)."""
    teacher_mean, plurality = teachers
    return {
        "run": prep.config.run_name,
        "teachers": {
            "mean_accuracy": teacher_mean,
            "plurality_accuracy": plurality,
            "evaluated_on": "evaluation split" if prep.task.eval_y.numel() else None,
        },  # fmt: skip
        "sizes": {"private": int(prep.task.private_y.shape[0])},
        "rows": private_rows,
        "wall_time_s": {**prep.timings, "total": time.perf_counter() - start},
        "stage_device": dict(prep.devices),
    }
