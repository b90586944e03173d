"""New students on a finished run's recorded releases, with other student settings (no spend).

The student is post-processing of the released labels (BTT18 Alg 5), so trying another student
costs no privacy. :func:`refit_students` reads a run folder written by a transfer or a compare,
replays the releases recorded in its ledger (it refuses any (aggregator, ε, repeat) that was not
recorded: it never spends), reloads the teachers (never retrains them) and trains one student per
release with the overridden settings (:data:`~pate_stab.run.config.STUDENT_FIELDS` only).
``recipes/diagnostics/refit_students.py`` is its command line.

The rows may be published (DESIGN.md fact 8): released counts, the certified (ε, δ) of each
replayed release, students' accuracies and label accuracy (the released labels against the public
pool's true labels: public-side information). The students' fit times are returned apart, for a
private file, with the run's other wall times.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pate_stab.data.own import OwnData
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger, recorded_budget
from pate_stab.rng import seeded_generator, spawn_generators
from pate_stab.run.config import STUDENT_FIELDS, TransferConfig
from pate_stab.run.config.names import Accelerator
from pate_stab.run.data import pool_truth
from pate_stab.run.prepare import PAST_DEFAULTS, prepare
from pate_stab.run.release import label_accuracy, recorded_spend_id, release_labels
from pate_stab.run.run_folder import run_lock
from pate_stab.run.student import fit_student, student_accuracies

__all__ = ["RefitError", "refit_students", "saved_config"]


class RefitError(ValueError):
    """The run folder cannot be refit as asked (not a finished run, an unrecorded release, a non-student key)."""


def saved_config(run_dir: Path) -> TransferConfig:
    """The configuration a run folder was made with, placed where the folder is now."""
    for name in ("config.json", "ledger.jsonl"):
        if not (run_dir / name).is_file():
            raise RefitError(f"{run_dir} is not a finished run folder: {name} is missing")
    # a key missing from an older config.json had its default of then (PAST_DEFAULTS where it changed)
    saved = PAST_DEFAULTS | json.loads((run_dir / "config.json").read_text())
    return TransferConfig.from_dict(
        {k: tuple(v) if isinstance(v, list) else v for k, v in saved.items()}
        | {"checkpoints_dir": str(run_dir.parent), "run_name": run_dir.name}
    )


def refit_students(
    run_dir: str | Path,
    *,
    aggregators: Sequence[str],
    epsilons: Sequence[float],
    overrides: dict[str, Any] | None = None,
    seed: int = 0,
    repeats: int = 1,
    accelerator: Accelerator | None = None,
    data: OwnData | None = None,
    echo: bool = False,
) -> tuple[list[dict[str, Any]], TransferConfig, tuple[float, float], list[dict[str, Any]]]:
    """One new student per recorded release.

    Returns:
        (rows, the refit configuration, privacy spent, fit times): the rows may be published; the
        fit times (one ``{"aggregator", "target_epsilon", "repeat", "fit_s"}`` per row) are wall
        times of training on the private run's outputs, for a private file.

    ``data``: for a run made from arrays (``dataset="arrays"``), the same arrays again.

    Raises:
        RefitError: not a run folder, an override of a non-student setting, a release that was
            not recorded (before any student is trained).
        RunFolderLockedError: another run holds the run folder's lock; nothing was written.
    """
    run_dir = Path(run_dir)
    saved_config(run_dir)  # a run folder, before its lock is taken (the lock would create the folder)
    with run_lock(run_dir):  # one writer per run folder (pate_stab.run.run_folder)
        return _refit(run_dir, aggregators, epsilons, overrides, seed, repeats, accelerator, data, echo)


def _refit(
    run_dir: Path,
    aggregators: Sequence[str],
    epsilons: Sequence[float],
    overrides: dict[str, Any] | None,
    seed: int,
    repeats: int,
    accelerator: Accelerator | None,
    data: OwnData | None,
    echo: bool,
) -> tuple[list[dict[str, Any]], TransferConfig, tuple[float, float], list[dict[str, Any]]]:
    config = saved_config(run_dir)
    overrides = dict(overrides or {})
    bad = [k for k in overrides if k not in STUDENT_FIELDS]
    if bad:
        raise RefitError(f"only student settings can be refit ({', '.join(STUDENT_FIELDS)}); got {bad[0]!r}")
    new = replace(config, **overrides)
    if accelerator is not None:
        new = replace(new, execution=replace(new.execution, accelerator=accelerator))
    header = json.loads((run_dir / "ledger.jsonl").open().readline())
    budget = recorded_budget(run_dir / "ledger.jsonl")  # the header's, or as raised since
    if budget is None:
        raise RefitError(f"{run_dir / 'ledger.jsonl'} is empty")
    rows: list[dict[str, Any]] = []
    fit_s: list[dict[str, Any]] = []
    with PrivacyLedger(
        run_dir / "ledger.jsonl",
        budget_epsilon=budget[0],
        budget_delta=budget[1],
        run_id=config.run_name,
        neighbouring=header.get("neighbouring", "replace_one"),
        privacy_unit=header.get("privacy_unit", "record"),
        timestamps=False,
    ) as ledger:
        recorded = {e.spend_id: e for e in ledger.entries() if e.has_result}
        plan = [(a, e, r) for r in range(repeats) for a in aggregators for e in epsilons]
        missing = [f"{a} at ε={e:g} (repeat {r})" for a, e, r in plan
                   if recorded_spend_id(ledger, config.run_name, a, e, r) not in recorded]  # fmt: skip
        if missing:
            raise RefitError(f"no recorded release for {', '.join(missing)}: run transfer/compare first")
        spent_before = ledger.spent()
        prep = prepare(config, check_budget=False, data=data)  # same configuration: reloads teachers
        prep.config = new
        gens = spawn_generators(seeded_generator(seed), 2 * len(plan))
        for i, (agg, eps, rep) in enumerate(plan):
            release = release_labels(prep, ledger, aggregator=agg, epsilon=eps, generator=gens[2 * i], repeat=rep)
            if not release.reused or ledger.spent() != spent_before:
                raise RuntimeError("a release was not replayed from the ledger; stopping before any student")
            t0 = time.perf_counter()
            student, targets = fit_student(prep, release, generator=gens[2 * i], bottom_generator=gens[2 * i + 1])
            accuracy = student_accuracies(prep, student, release)
            row = {
                "aggregator": agg,
                "target_epsilon": eps,
                "repeat": rep,
                "epsilon": release.summary["epsilon"],
                "delta": release.summary["delta"],
                "answered": int(release.summary["answered"]),
                "label_acc": label_accuracy(release, pool_truth(prep.task, release.index))[0],
                "student_trained_on": int(targets.index.numel()),
                "student_acc": accuracy["student"],
                "student_acc_unlabelled_pool": accuracy["student_unlabelled_pool"],
                "student_history": student.history,
                "student_selection": getattr(student, "selection", None),  # student_select: cv
            }
            rows.append(row)
            fit_s.append({"aggregator": agg, "target_epsilon": eps, "repeat": rep, "fit_s": time.perf_counter() - t0})
            if echo:
                print(
                    f"{agg:<16} ε={row['epsilon']:.3f} answered {row['answered']:>5} label acc "
                    f"{_num(row['label_acc'])} → student {_num(row['student_acc'])}, unlabelled pool "
                    f"{_num(row['student_acc_unlabelled_pool'])} (repeat {rep}, trained on "
                    f"{row['student_trained_on']}, {fit_s[-1]['fit_s']:.0f} s)",
                    flush=True,
                )
    return rows, new, spent_before, fit_s


def _num(v: float | None) -> str:
    return "-" if v is None else f"{v:.4f}"
