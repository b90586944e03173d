"""Every aggregator on the same teachers' votes at the same (ε, δ): table and privacy–utility plot.

One set of teachers is trained (or reloaded) for the run; for each target ε and each aggregator
— the stability releaser (hard labels; soft labels on binary tasks) and PATE's LNMax, GNMax and
Confident-GNMax with data-independent accounting — the teachers' votes are released at that
(ε, δ) for m queries, a student is trained on what was released, and the row records queries
answered, label accuracy and the student's test accuracy. Every row chooses its queries by the
run's ``query_selection``: with ``"first"`` all rows release the same m pool points; with
``"student-confidence"`` each release runs the same selection procedure on its own released
outputs (one aggregator instance, one spend, at most m queries), so each aggregator is compared
at the same budget with the same procedure, on the points that procedure chose for it. Each release is a
separate spend in the run's ledger (the ledger's budget is their basic-composition sum), with a
deterministic spend id, so a rerun reuses them.

Published and private (DESIGN.md fact 8, :mod:`pate_stab.run.private`). ``compare.json``,
``compare.txt`` and ``compare.png`` hold what may be published: the certified ε and δ of each
release, the sanitised data-dependent ε, release counts, student accuracy on the evaluation split,
and label accuracy — the released labels against the public pool's true labels, public-side
information. Each row is a separate release from the same private data, so the table's total
cost is printed beside it: (Σε, Σδ) by basic composition. ``private_compare.json`` (mode 0600)
holds what no mechanism paid for: mean teacher and plurality accuracy, the raw data-dependent ε
with its inputs, wall times.

The ledger's budget is the plan's total. A rerun with more repeats (or more ε or aggregators)
raises it by an explicit ``budget`` record in the ledger, with the plan as its reason; earlier
releases replay. Repeated ε values are refused (each ε is one spend id per repeat).

Where the stability releaser cannot answer at a setting, the row says which k (at this ε) or
which ε (with this k) a unanimous vote would need (:func:`pate_stab.theory.teachers_for_unanimous_answer`).
"""

from __future__ import annotations

import json
import math
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tqdm import tqdm

from pate_stab._validation import check_int
from pate_stab.aggregation.registry import aggregator_spec, answerability
from pate_stab.data.own import OwnData
from pate_stab.privacy.ledger import recorded_budget
from pate_stab.privacy.secure_noise import SEEDED_NOISE_WARNING
from pate_stab.rng import spawn_generators
from pate_stab.run.config import IMAGE_DIRECT_LEARNERS, RUN_AGGREGATORS, TransferConfig
from pate_stab.run.data import pool_truth
from pate_stab.run.data_dependent import DATA_DEPENDENT_LABEL, release_data_dependent, split_data_dependent
from pate_stab.run.direct import (
    DIRECT_LEARNERS,
    check_direct_inputs,
    check_direct_learners,
    direct_legend,
    replace_one_equivalent,
    run_direct,
)
from pate_stab.run.prepare import prepare
from pate_stab.run.private import write_private_json
from pate_stab.run.release import label_accuracy, release_labels
from pate_stab.run.report import LABEL_ACCURACY_NOTE, clean_json, noise_report, open_ledger, run_files
from pate_stab.run.selection import SELECTION_PRIVACY
from pate_stab.run.student import fit_student, student_accuracies, teacher_accuracies

__all__ = ["PRIVATE_COMPARE", "format_rows", "format_summary", "plot_rows", "run_compare", "summarise_rows",
           "total_cost", "total_cost_line"]  # fmt: skip

PRIVATE_COMPARE = "private_compare.json"

_COLUMNS = (  # (row key, header, format, width)
    ("aggregator", "aggregator", "{:<16}", 16),
    ("target_epsilon", "target", "{:>6.2f}", 6),
    ("epsilon", "ε", "{:>7.3f}", 7),
    ("epsilon_dd_sanitised", "ε dd san", "{:>8.3f}", 8),
    ("delta", "δ", "{:>9.1e}", 9),
    ("seen", "seen", "{:>6d}", 6),
    ("answered", "answered", "{:>8d}", 8),
    ("label_acc", "label_acc", "{:>9.4f}", 9),
    ("student_acc", "student_acc", "{:>11.4f}", 11),
)
TABLE_LEGEND = (
    "ε: data-independent, enforced against the budget; ε dd san: PATE's data-dependent ε after "
    "smooth-sensitivity sanitisation (private; the raw figure is not, and stays in private_compare.json). "
    "The stability releasers' ε is data-independent by construction. " + LABEL_ACCURACY_NOTE + "."
)


def total_cost(rows: Sequence[dict[str, Any]], *, run_neighbouring: str | None = None) -> dict[str, Any]:
    """The table's total privacy cost: (Σε, Σδ) of its releases by basic composition (Dwork &
    Roth 2014, Thm 3.16): every row is a separate release from the same private data.

    Rows under different neighbouring relations (a row's ``neighbouring``, else the run's) are
    summed per relation, and all of them once more as replace-one guarantees (an add/remove
    (ε, δ) is (2ε, (1 + e^ε)δ) under replace-one by group privacy; :func:`replace_one_equivalent`).
    """
    out: dict[str, Any] = {
        "epsilon": math.fsum(float(r["epsilon"]) for r in rows),
        "delta": math.fsum(float(r["delta"]) for r in rows),
        "releases": len(rows),
        "composition": "basic composition of the releases' certified (epsilon, delta): "
        "every row is a separate release from the same private data",
    }
    relations = {r.get("neighbouring") or run_neighbouring for r in rows}
    if len(relations) > 1 and None not in relations:
        by: dict[str, list[float]] = {}
        for r in rows:
            acc = by.setdefault(r.get("neighbouring") or str(run_neighbouring), [0.0, 0.0, 0])
            acc[0] += float(r["epsilon"])
            acc[1] += float(r["delta"])
            acc[2] += 1
        conv = [
            replace_one_equivalent(
                epsilon=float(r["epsilon"]),
                delta=float(r["delta"]),
                neighbouring=r.get("neighbouring") or str(run_neighbouring),
            )  # fmt: skip
            for r in rows
        ]
        out["by_relation"] = {rel: {"epsilon": e, "delta": d, "releases": n} for rel, (e, d, n) in sorted(by.items())}
        out["replace_one"] = {"epsilon": math.fsum(e for e, _ in conv), "delta": math.fsum(d for _, d in conv)}
        # the plain sums add guarantees under different relations: not a guarantee of their own
        del out["epsilon"], out["delta"]
    return out


def total_cost_line(rows: Sequence[dict[str, Any]], *, run_neighbouring: str | None = None) -> str:
    """One line for a table or a plot: the total of :func:`total_cost`."""
    t = total_cost(rows, run_neighbouring=run_neighbouring)
    if "replace_one" in t:
        parts = "; ".join(
            f"{rel}: Σε = {v['epsilon']:.4g}, Σδ = {v['delta']:.2g} ({v['releases']} releases)"
            for rel, v in t["by_relation"].items()
        )
        return (
            f"total privacy cost of these {t['releases']} releases (basic composition): {parts}; all as replace-one: "
            f"Σε = {t['replace_one']['epsilon']:.4g}, Σδ = {t['replace_one']['delta']:.2g}"
        )
    return (
        f"total privacy cost of these {t['releases']} releases: Σε = {t['epsilon']:.4g}, Σδ = {t['delta']:.2g} "
        "(basic composition)"
    )


def format_rows(rows: Sequence[dict[str, Any]], *, run_neighbouring: str | None = None) -> str:
    """Fixed-width text table (label_acc: on answered queries; student_acc: on the evaluation split)."""
    head = " ".join(f"{label:>{w}}" if i else f"{label:<{w}}" for i, (_, label, _, w) in enumerate(_COLUMNS))
    lines = [head + "  note", "-" * (len(head) + 6)]
    for r in rows:
        cells = []
        for name, _, fmt, width in _COLUMNS:
            v = r.get(name)
            cells.append(" " * (width - 1) + "-" if v is None else fmt.format(v))
        note = r.get("note") or r.get("data_dependent_note") or ""
        lines.append(" ".join(cells) + ("  " + note if note else ""))
    lines.append(TABLE_LEGEND)
    lines.append(total_cost_line(rows, run_neighbouring=run_neighbouring))
    if any(r.get("noise") == "seeded" for r in rows):
        lines.append(f"WARNING: {SEEDED_NOISE_WARNING}")
    return "\n".join(lines)


_SUMMARY_KEYS = ("answered", "label_acc", "student_acc", "student_acc_unlabelled_pool")


def summarise_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (aggregator, target ε) over its repeated releases: mean, sample standard
    deviation, min and max of :data:`_SUMMARY_KEYS` (None where no repeat has the value)."""
    groups: dict[tuple[str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r["aggregator"], r["target_epsilon"]), []).append(r)
    out = []
    for (agg, eps), group in groups.items():
        row: dict[str, Any] = {"aggregator": agg, "target_epsilon": eps, "epsilon": group[0]["epsilon"],
                               "repeats": len(group)}  # fmt: skip
        for key in _SUMMARY_KEYS:
            values = [float(r[key]) for r in group if r.get(key) is not None]
            if not values:
                row.update({key: None, f"{key}_sd": None, f"{key}_min": None, f"{key}_max": None})
                continue
            mean = math.fsum(values) / len(values)
            sd = math.sqrt(math.fsum((v - mean) ** 2 for v in values) / (len(values) - 1)) if len(values) > 1 else 0.0
            row.update({key: mean, f"{key}_sd": sd, f"{key}_min": min(values), f"{key}_max": max(values)})
        out.append(row)
    return out


def format_summary(summary: Sequence[dict[str, Any]]) -> str:
    """Text table of :func:`summarise_rows`: mean ± sd [min, max] over the repeats."""

    def cell(r: dict[str, Any], key: str, digits: int) -> str:
        if r.get(key) is None:
            return "-"
        mean, sd, low, high = (r[key + suffix] for suffix in ("", "_sd", "_min", "_max"))
        return f"{mean:.{digits}f} ± {sd:.{digits}f} [{low:.{digits}f}, {high:.{digits}f}]"

    head = (
        f"{'aggregator':<16} {'ε':>6} {'n':>2}  {'answered':<26} {'student_acc':<32} "
        f"{'student_acc unlabelled pool':<32}"
    )
    lines = [head, "-" * len(head)]
    for r in summary:
        lines.append(
            f"{r['aggregator']:<16} {r['target_epsilon']:>6.2f} {r['repeats']:>2}  {cell(r, 'answered', 1):<26} "
            f"{cell(r, 'student_acc', 4):<32} {cell(r, 'student_acc_unlabelled_pool', 4):<32}"
        )
    lines.append("mean ± sample sd [min, max] over repeated releases (same teachers, fresh noise and selection)")
    return "\n".join(lines)


def plot_rows(
    rows: Sequence[dict[str, Any]],
    path: Path,
    *,
    title: str,
    reference: float | None = None,
    caption: str | None = None,
) -> Path:
    """Student test accuracy vs target ε, one line per aggregator (matplotlib, Agg backend).

    With repeated releases, the line is the mean and the error bar the min–max range.
    ``reference``: a horizontal line (e.g. an accuracy reached without privacy); a plot meant
    for publication draws only published figures. ``caption``: a line under the plot (the
    total privacy cost by default, :func:`total_cost_line`).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarise_rows(rows)
    fig, ax = plt.subplots(figsize=(6, 4))
    for name in dict.fromkeys(r["aggregator"] for r in summary):
        pts = sorted(
            (r["target_epsilon"], r["student_acc"], r["student_acc_min"], r["student_acc_max"])
            for r in summary
            if r["aggregator"] == name and r["student_acc"] is not None
        )
        x, mean = [p[0] for p in pts], [p[1] for p in pts]
        err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
        is_direct = name in DIRECT_LEARNERS  # direct learners: dashed lines, square markers
        label = name + (" (direct)" if is_direct else "")
        ax.errorbar(x, mean, yerr=err, capsize=3, label=label, marker="s" if is_direct else "o",
                    linestyle="--" if is_direct else "-")  # fmt: skip
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", linewidth=1, label="plurality vote (non-private)")
    ax.set_xscale("log")
    ticks = sorted({r["target_epsilon"] for r in summary})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("ε (target; δ fixed)")
    ax.set_ylabel("student test accuracy")
    ax.set_title(title, fontsize=9, wrap=True)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    text = textwrap.fill(total_cost_line(rows) if caption is None else caption, width=110)
    lines = text.count("\n") + 1
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7)
    fig.tight_layout(rect=(0, 0.03 + 0.03 * lines, 1, 1))
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


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
    """
    if not epsilons or any(not (isinstance(e, int | float) and math.isfinite(e) and e > 0) for e in epsilons):
        raise ValueError(f"epsilons must be positive finite numbers, got {list(epsilons)!r}")
    if config.rounds > 1:
        raise ValueError(
            f"compare releases each row in one round; rounds={config.rounds} is supported by transfer only "
            "(set rounds: 1, or run pate-stab transfer per ε)"
        )
    repeated = sorted({float(e) for e in epsilons if [float(x) for x in epsilons].count(float(e)) > 1})
    if repeated:
        raise ValueError(
            f"epsilons repeat {', '.join(f'{e!r}' for e in repeated)}: each ε is one release per repeat; "
            "use repeats=R (--repeats R) for independent releases at one ε"
        )
    start = time.perf_counter()
    direct = check_direct_learners(list(direct), dataset=config.dataset)
    # direct learners only: no teachers; no feature stage unless a learner reads the features
    asks_teachers = aggregators is None or len(aggregators) > 0
    uses_features = asks_teachers or any(d not in IMAGE_DIRECT_LEARNERS for d in direct)
    prep = prepare(config, check_budget=False, data=data, with_teachers=asks_teachers, with_features=uses_features)
    binary = prep.task.num_classes == 2
    if aggregators is None:
        aggregators = [a for a in RUN_AGGREGATORS if binary or not aggregator_spec(a).binary_only]
    bad = [a for a in aggregators if a not in RUN_AGGREGATORS or (aggregator_spec(a).binary_only and not binary)]
    if bad:
        raise ValueError(
            f"aggregators not available for this task: {bad} (choose from {', '.join(RUN_AGGREGATORS)}; "
            "stability-soft needs a binary task)"
        )
    if direct:
        check_direct_inputs(prep, direct)  # before anything is spent
    k, m = config.num_teachers, config.num_queries
    repeats = check_int("repeats", repeats, minimum=1)
    # repeat 0 first: a run extended with more repeats keeps the earlier rows' generators and spends
    plan = [(float(e), a, r) for r in range(repeats) for e in epsilons for a in aggregators]
    if not plan and not direct:
        raise ValueError("nothing to compare: no aggregators and no direct learners")
    n_gens = max(len(plan), 1)
    release_gens = spawn_generators(prep.generators["release"], n_gens)
    student_gens = spawn_generators(prep.generators["student"], n_gens)
    bottom_gens = spawn_generators(prep.generators["bottom"], n_gens)
    selection_gens = spawn_generators(prep.generators["selection"], n_gens)
    dd_gens = spawn_generators(prep.generators["data_dependent"], n_gens)
    direct_plan = [(float(e), d, r) for r in range(repeats) for e in epsilons for d in direct]
    # each release is (ε, δ)-DP on its own; the ledger counts their basic composition. A ledger
    # made for a smaller plan (fewer repeats, ε or aggregators) gets its budget raised by a record
    plan_budget = (math.fsum(e for e, _, _ in plan + direct_plan), config.delta * len(plan + direct_plan))
    recorded = recorded_budget(prep.run_dir / "ledger.jsonl") or plan_budget
    budget = (max(plan_budget[0], recorded[0]), max(plan_budget[1], recorded[1]))
    ledger = open_ledger(
        prep.run_dir,
        run_name=config.run_name,
        budget_epsilon=budget[0],
        budget_delta=budget[1],
        neighbouring=config.neighbouring,
        raise_budget=f"compare plan: {repeats} repeat(s) x epsilons {[float(x) for x in epsilons]} "
        f"x aggregators {list(aggregators)} x direct learners {list(direct)}",
    )
    teacher_mean, plurality = (None, None)
    if prep.teachers is not None:
        teacher_mean, plurality = teacher_accuracies(
            prep.teachers, prep.task.eval_x, prep.task.eval_y, prep.task.num_classes
        )
    rows: list[dict[str, Any]] = []
    private_rows: list[dict[str, Any]] = []
    try:
        for i, (eps, agg, rep) in enumerate(tqdm(plan, desc="compare", disable=not config.progress)):
            note = ""
            needed: dict[str, Any] = {}
            status = answerability(agg, config.aggregator_settings(eps))
            if status is not None:
                needed["teachers_needed"] = status.teachers_needed
                if not status.answerable:
                    needed["epsilon_needed"] = status.epsilon_needed
                    note = f"needs k≈{status.teachers_needed} at this ε, or ε≥{status.epsilon_needed:.3g} with k={k}"
            release = release_labels(
                prep,
                ledger,
                aggregator=agg,
                epsilon=eps,
                generator=release_gens[i],
                selection_generator=selection_gens[i],
                repeat=rep,
            )
            acc_answered, acc_all = label_accuracy(release, pool_truth(prep.task, release.index))
            student, targets = fit_student(prep, release, generator=student_gens[i], bottom_generator=bottom_gens[i])
            s = release.summary
            dd, dd_private = split_data_dependent(release_data_dependent(prep, release, generator=dd_gens[i]))
            accuracy = student_accuracies(prep, student, release)
            rows.append(
                {
                    "aggregator": agg,
                    "repeat": rep,
                    "calibration": s.get("calibration", "data-independent"),
                    "target_epsilon": eps,
                    "epsilon": s["epsilon"],
                    "delta": s["delta"],
                    "query_selection": config.query_selection,
                    "offered": int(release.index.numel()),
                    "selection_rounds": len(release.selection.get("rounds", [])),
                    "seen": int(s.get("queries_seen", m)),
                    "answered": int(s["answered"]),
                    "label_acc": acc_answered,
                    "label_acc_all": acc_all,
                    "student_trained_on": int(targets.index.numel()),
                    "student_acc": accuracy["student"],
                    "student_acc_unlabelled_pool": accuracy["student_unlabelled_pool"],
                    "unlabelled_pool_size": accuracy["unlabelled_pool_size"],
                    "spend_id": release.spend_id,
                    "reused": release.reused,
                    **noise_report(s),
                    **dd,
                    **needed,
                    "note": note,
                }
            )
            private_rows.append({"aggregator": agg, "target_epsilon": eps, "repeat": rep,
                                 "spend_id": release.spend_id, **dd_private})  # fmt: skip
        for eps, learner, rep in tqdm(direct_plan, desc="direct learners", disable=not config.progress):
            rows.append(run_direct(prep, ledger, learner=learner, epsilon=eps, repeat=rep))
        summary = summarise_rows(rows)
        table = format_rows(rows, run_neighbouring=config.neighbouring)
        table += "\n\n" + format_summary(summary) if repeats > 1 else ""
        if direct:
            table += "\n" + direct_legend(rows, run_neighbouring=config.neighbouring)
        plot = plot_rows(
            rows,
            prep.run_dir / "compare.png",
            title=f"{config.dataset}: k={k} {config.teacher_model} teachers, m={m} ({config.query_selection})\n"
            f"{config.student_method} student, δ={config.delta:g}" + (f", {repeats} releases" if repeats > 1 else ""),
            caption=total_cost_line(rows, run_neighbouring=config.neighbouring),
        )
        out = {
            "run": config.run_name,
            "dataset": config.dataset,
            "num_teachers": k,
            "num_queries": m,
            "max_unstable": config.max_unstable,
            "calibration": config.calibration,
            "query_selection": {
                "strategy": config.query_selection,
                "round_size": config.selection_round_size,
                "privacy": SELECTION_PRIVACY,
            },
            "delta": config.delta,
            "noise": noise_report({"noise": config.releaser_noise}),
            "privacy": config.privacy_relation(),
            "epsilon_columns": DATA_DEPENDENT_LABEL,
            "data_dependent_sanitisation": {"order": config.dd_order, "sigma": config.dd_sigma},
            "label_accuracy_note": LABEL_ACCURACY_NOTE,
            "rows": rows,
            "summary": summary,
            "total_cost": total_cost(rows, run_neighbouring=config.neighbouring),
            "repeats": repeats,
            "direct_learners": direct,
            "student": {"model": config.student_model, "method": config.student_method},
            "ledger": ledger.report(),
            "plot": str(plot),
            "files": run_files(prep.run_dir, ["compare.json", "compare.txt", "compare.png"], [PRIVATE_COMPARE]),
        }
        private = {
            "run": config.run_name,
            "teachers": {
                "mean_accuracy": teacher_mean,
                "plurality_accuracy": plurality,
                "evaluated_on": "evaluation split" if prep.task.eval_y.numel() else None,
            },  # fmt: skip
            "rows": private_rows,
            "wall_time_s": {**prep.timings, "total": time.perf_counter() - start},
        }
        out, private = clean_json(out), clean_json(private)
        write_private_json(prep.run_dir / PRIVATE_COMPARE, private)
        (prep.run_dir / "compare.json").write_text(json.dumps(out, indent=2, sort_keys=True))
        (prep.run_dir / "compare.txt").write_text(table + "\n")
        out["table"] = table
        out["private"] = private  # in memory only: written to private_compare.json
        return out
    finally:
        ledger.close()
