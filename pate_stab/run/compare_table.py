"""The compare table and how its rows are judged: the fixed-width text table with its legend and total
privacy cost (basic composition), the summary over repeated releases, the privacy–utility plot, the privacy
unit each row is ranked under, and the majority-class reference every row must beat. They read only
published rows (``compare.json``'s), so recipes refit or redraw from a run folder with them.

Every row states its privacy unit (``privacy_unit``: record or label, DESIGN.md fact 13): the
table has a ``unit`` column, the summary groups by unit, and the plot's legend names each line's
unit; rows of two units are never ranked together (:func:`best_per_epsilon`).

Privacy units in tables and rankings (docs/label_privacy.md). A row's ``privacy_unit`` is the unit its
run ranks it under: the run's ledger's unit. Under record privacy (the default) a neighbour differs in
one record's inputs and label; under label privacy in one record's label. A record guarantee implies a
label guarantee (a changed label is a replaced record: replace-one holds as it is, add/remove by group
privacy, :func:`pate_stab.privacy.ledger.privacy_ledger.replace_one_cost`), so a label run may hold
record-private rows, counted in label terms. A label guarantee implies no record guarantee (the inputs
are unprotected), so a record run holds no label-private row: :func:`check_learner_units` refuses such a
plan before anything is read or trained, and :func:`best_per_epsilon` refuses to rank rows of two units
together.

``guarantee_unit`` (direct rows) is the unit of the learner's own guarantee: ``"record"`` for
DP-SGD and the convex heads, ``"label"`` for the learners in :data:`LABEL_PRIVATE_LEARNERS`.

The majority-class reference: what always predicting one class scores on the evaluation split.

A private learner that does not beat a constant predictor has learnt nothing usable, whatever its ε.
Every ``compare`` table carries this reference as a row of its own, and every row, a transfer's
report and the "best mean accuracy per ε" line say in plain words when a learner is at or below it.

Which class. The evaluation split's own most common class, scored on that split. Choosing the
class on the labels it is scored on makes the reference optimistic, but by little: it can beat the
class a predictor fixed in advance would choose only when two classes are nearly tied, and then by
at most the gap between their rates (which is then small). The alternatives are worse: the public
pool's labels are often absent (own data); the released labels differ per row; the private labels
are private. A reference a learner must clear should err high, not low.

Privacy. The evaluation labels are public — the rows' ``student_acc`` is published from the same
labels — and the reference reads nothing else: no spend, no private statistic. It is not a learner
and is never ranked as one (:func:`flag_rows`).
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pate_stab.aggregation.data_dependent import DATA_INDEPENDENT_NOTE
from pate_stab.direct.registry import DIRECT_LEARNERS
from pate_stab.privacy.ledger.format import replace_one_cost
from pate_stab.privacy.ledger.privacy_ledger import PRIVACY_UNITS
from pate_stab.privacy.noise.secure import SEEDED_NOISE_WARNING
from pate_stab.run.config import LABEL_DIRECT_LEARNERS
from pate_stab.run.run_folder import write_published

__all__ = [
    "AT_OR_BELOW",
    "CONFIDENT_FALLS_NOTE",
    "DD_ROW_NOTE",
    "LABEL_PRIVATE_LEARNERS",
    "PRIVACY_UNITS",
    "REFERENCE_NAME",
    "TABLE_LEGEND",
    "MixedUnitsError",
    "at_or_below",
    "best_per_epsilon",
    "check_learner_units",
    "flag_rows",
    "format_rows",
    "format_summary",
    "learner_unit",
    "majority_reference",
    "plot_rows",
    "reference_note",
    "reference_words",
    "replace_one_equivalent",
    "row_unit",
    "summarise_rows",
    "total_cost",
    "total_cost_line",
]

# ---- privacy units: which unit each row is ranked under (DESIGN.md fact 13) ----------------------------------

LABEL_PRIVATE_LEARNERS: set[str] = set(LABEL_DIRECT_LEARNERS)
"""Direct learners whose guarantee is label differential privacy only (RR-with-prior LP-1ST and LP-2ST,
:data:`pate_stab.run.config.names.LABEL_DIRECT_LEARNERS`). Every other direct learner is record-private."""


class MixedUnitsError(ValueError):
    """Rows or learners of different privacy units in one ranking or one run."""


def learner_unit(name: str) -> str:
    """The privacy unit of a direct learner's own guarantee."""
    return "label" if name in LABEL_PRIVATE_LEARNERS else "record"


def check_learner_units(privacy_unit: str, learners: Iterable[str]) -> None:
    """Refuse label-private learners in a record-privacy run (before anything is read or trained).

    Raises:
        ValueError: an unknown unit.
        MixedUnitsError: a label-private learner asked of a record-privacy run.
    """
    if privacy_unit not in PRIVACY_UNITS:
        raise ValueError(f"privacy_unit must be one of {', '.join(PRIVACY_UNITS)}, got {privacy_unit!r}")
    label_only = [name for name in learners if learner_unit(name) == "label"]
    if privacy_unit == "record" and label_only:
        raise MixedUnitsError(
            f"{', '.join(label_only)} {'is' if len(label_only) == 1 else 'are'} label-private (label differential "
            "privacy protects the labels only) and this run ranks its rows under record privacy, which a label "
            "guarantee does not give: run them under privacy_unit: label (a new run folder), where the record-private "
            "rows are counted too, or leave them out"
        )


def row_unit(row: dict[str, Any]) -> str:
    """The unit a row is ranked under (rows written before units: record)."""
    return str(row.get("privacy_unit") or "record")


def best_per_epsilon(rows: Sequence[dict[str, Any]]) -> dict[float, tuple[float, str]]:
    """The best mean student accuracy per target ε, ``{ε: (accuracy, aggregator)}``, over rows of one unit.

    Raises:
        MixedUnitsError: rows of more than one privacy unit (rank each unit's rows apart, with the unit shown).
    """
    units = sorted({row_unit(r) for r in rows})
    if len(units) > 1:
        raise MixedUnitsError(
            f"rows of privacy units {' and '.join(units)} in one ranking: a label guarantee is not a record guarantee, "
            "so rank each unit's rows apart and show the unit beside each (compare_table.format_rows does)"
        )
    means: dict[tuple[float, str], list[float]] = {}
    for r in rows:
        if r.get("student_acc") is not None:
            means.setdefault((r["target_epsilon"], r["aggregator"]), []).append(float(r["student_acc"]))
    best: dict[float, tuple[float, str]] = {}
    for (eps, name), values in means.items():
        mean = math.fsum(values) / len(values)
        if eps not in best or mean > best[eps][0]:
            best[eps] = (mean, name)
    return best


def replace_one_equivalent(*, epsilon: float, delta: float, neighbouring: str) -> tuple[float, float]:
    """(ε, δ) under replace-one: unchanged for replace-one; (2ε, (1 + e^ε) δ) from add/remove.

    Group privacy (Dwork & Roth 2014, Thm 2.2, for (ε, δ): k = 2 gives (2ε, (1 + e^ε) δ)):
    replacing a record is removing it and adding another
    (:func:`~pate_stab.privacy.ledger.format.replace_one_cost`).

    Example:
        >>> replace_one_equivalent(epsilon=1.0, delta=1e-5, neighbouring="add_remove")
        (2.0, 3.718281828459045e-05)
    """
    if neighbouring == "replace_one":
        return epsilon, delta
    if neighbouring != "add_remove":
        raise ValueError(f"neighbouring must be 'add_remove' or 'replace_one', got {neighbouring!r}")
    return replace_one_cost(epsilon, delta)


# ---- the majority-class reference ------------------------------------------------------------------------------

REFERENCE_NAME = "majority-class"
"""The reference's name in a table (its ``aggregator`` cell)."""
AT_OR_BELOW = "at_or_below_majority"
"""The key of a row's flag: its student accuracy is at or below the majority-class reference."""
_TOLERANCE = 1e-12


def majority_reference(eval_y: Any, class_names: Sequence[str] | None, num_classes: int) -> dict[str, Any] | None:
    """The reference on the evaluation labels ``eval_y`` (class indices): ``{"name", "class",
    "class_index", "accuracy", "evaluated_on", "note"}``; None without evaluation labels.

    Ties go to the lowest class index (a fixed rule, not a choice made on the scores).
    """
    labels = [int(v) for v in (eval_y.tolist() if hasattr(eval_y, "tolist") else eval_y)]
    if not labels:
        return None
    counts = [labels.count(c) for c in range(num_classes)]
    index = max(range(num_classes), key=lambda c: (counts[c], -c))
    name = str(class_names[index]) if class_names is not None else str(index)
    accuracy = counts[index] / len(labels)
    return {
        "name": REFERENCE_NAME,
        "class": name,
        "class_index": index,
        "accuracy": accuracy,
        "evaluated_on": "evaluation split (its most common class, scored on it)",
        "note": reference_note(name, accuracy),
    }


def reference_note(name: str, accuracy: float) -> str:
    """The reference row's note, one plain sentence."""
    return (
        f"Always predicting {name!r}, the evaluation split's most common class, scores {accuracy:.4f}: a reference, "
        "not a learner, with no privacy cost; a row at or below it has learnt nothing usable "
        "(docs/plan.md: The majority-class reference)."
    )


def at_or_below(accuracy: float | None, reference: dict[str, Any] | None) -> bool:
    """Whether ``accuracy`` is at or below the reference's (False where either is missing)."""
    if accuracy is None or reference is None:
        return False
    return float(accuracy) <= float(reference["accuracy"]) + _TOLERANCE


def reference_words(reference: dict[str, Any]) -> str:
    """'always predicting 'yes' (0.6781)'."""
    return f"always predicting {reference['class']!r} ({reference['accuracy']:.4f})"


def flag_rows(rows: Sequence[dict[str, Any]], reference: dict[str, Any] | None) -> None:
    """Set every row's :data:`AT_OR_BELOW` flag and add a plain sentence to the note of a flagged row."""
    for r in rows:
        flagged = at_or_below(r.get("student_acc"), reference)
        r[AT_OR_BELOW] = flagged
        if flagged and reference is not None:
            words = f"No better than {reference_words(reference)}: this model has learnt nothing usable."
            r["note"] = f"{words} {r['note']}" if r.get("note") else words


# ---- the table, the summary, the plot ---------------------------------------------------------------------------

_COLUMNS = (  # (row key, header, format, width)
    ("aggregator", "aggregator", "{:<21}", 21),
    ("privacy_unit", "unit", "{:<6}", 6),
    ("target_epsilon", "target", "{:>6.2f}", 6),
    ("epsilon", "ε", "{:>7.3f}", 7),
    ("epsilon_dd_sanitised", "ε dd san", "{:>8.3f}", 8),
    ("delta", "δ", "{:>9.1e}", 9),
    ("seen", "seen", "{:>6d}", 6),
    ("answered", "answered", "{:>8d}", 8),
    ("label_acc", "label_acc", "{:>9.4f}", 9),
    ("student_acc", "student_acc", "{:>11.4f}", 11),
)
# the legend: one plain sentence per column that needs one, each with its README pointer
_EPSILON_LEGEND = (
    "ε is each release's certified privacy cost, which does not depend on the data and is enforced against the "
    "budget (README: Privacy notes)."
)
_DD_LEGEND = (
    "ε dd san: PATE's data-dependent ε after sanitisation, shown only where secure noise makes it publishable, "
    "while the raw figure stays in private_compare.json (README: Privacy notes)."
)
_UNIT_LEGEND = (
    "unit is the privacy unit of the row's ε: record (one record's inputs and label) or label (one record's label; "
    "the inputs are public); rows of different units are not ranked against each other (docs/label_privacy.md)."
)
_LABEL_ACC_LEGEND = (
    "The label_acc column is the label accuracy, the released labels checked against the public pool's true labels "
    "that are read for this measurement only (README: Privacy notes)."
)
TABLE_LEGEND = "\n".join((_EPSILON_LEGEND, _UNIT_LEGEND, _DD_LEGEND, _LABEL_ACC_LEGEND))
"""The legend of a table that shows every column (:func:`format_rows` keeps the sentences of the columns it shows)."""
DD_ROW_NOTE = "This aggregator's noise has no sanitised data-dependent ε to publish (README: Privacy notes)."
"""A row's data-dependent note in the text table, in one plain sentence (``compare.json`` keeps the full note)."""
_ALWAYS = ("aggregator", "privacy_unit", "target_epsilon", "epsilon")


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
        parts = ", ".join(
            f"{rel.replace('_', '-')} Σε = {v['epsilon']:.4g} and Σδ = {v['delta']:.2g} ({v['releases']} releases)"
            for rel, v in t["by_relation"].items()
        )
        return (
            f"The total privacy cost of these {t['releases']} releases by basic composition is {parts}, or "
            f"Σε = {t['replace_one']['epsilon']:.4g} and Σδ = {t['replace_one']['delta']:.2g} all as replace-one "
            "(README: Privacy notes)."
        )
    return (
        f"The total privacy cost of these {t['releases']} releases is Σε = {t['epsilon']:.4g} and "
        f"Σδ = {t['delta']:.2g} by basic composition (README: Privacy notes)."
    )


def format_rows(
    rows: Sequence[dict[str, Any]], *, run_neighbouring: str | None = None, reference: dict[str, Any] | None = None
) -> str:
    """Fixed-width text table (label_acc: on answered queries; student_acc: on the evaluation split).

    A column that is empty in every row (no pool labels: label_acc; no PATE data-dependent figure:
    ε dd san) is left out, with its sentence of the legend. ``reference``: the majority-class
    reference (:func:`majority_reference`), shown as the first row, with
    only its accuracy (it is not a release: no ε, no cost); a row at or below it says so in its note.
    """
    columns = [c for c in _COLUMNS if c[0] in _ALWAYS or any(r.get(c[0]) is not None for r in rows)]
    shown = {c[0] for c in columns}
    head = " ".join(f"{label:>{w}}" if i else f"{label:<{w}}" for i, (_, label, _, w) in enumerate(columns))
    lines = [head + "  note", "-" * (len(head) + 6)]
    if reference is not None:
        cells = []
        for name, _, fmt, width in columns:
            v = {"aggregator": reference["name"], "student_acc": reference["accuracy"]}.get(name)
            cells.append(" " * (width - 1) + "-" if v is None else fmt.format(v))
        lines.append(" ".join(cells) + "  " + reference["note"])
    for r in rows:
        cells = []
        for name, _, fmt, width in columns:
            v = row_unit(r) if name == "privacy_unit" else r.get(name)
            cells.append(" " * (width - 1) + "-" if v is None else fmt.format(v))
        note = r.get("note") or ""
        dd_note = r.get("data_dependent_note") or ""
        if not note and dd_note and dd_note != DATA_INDEPENDENT_NOTE and "epsilon_dd_sanitised" in shown:
            note = DD_ROW_NOTE if r.get("epsilon_dd_sanitised") is None else ""
        lines.append(" ".join(cells) + ("  " + note if note else ""))
    lines.append(_EPSILON_LEGEND)
    lines.append(_UNIT_LEGEND)
    if "epsilon_dd_sanitised" in shown:
        lines.append(_DD_LEGEND)
    if "label_acc" in shown:
        lines.append(_LABEL_ACC_LEGEND)
    if _confident_falls(rows):
        lines.append(CONFIDENT_FALLS_NOTE)
    lines.append(total_cost_line(rows, run_neighbouring=run_neighbouring))
    if any(r.get("noise") == "seeded" for r in rows):
        lines.append(f"WARNING: {SEEDED_NOISE_WARNING}")
    return "\n".join(lines)


CONFIDENT_FALLS_NOTE = (
    "Confident-GNMax answers fewer queries at a larger ε here: it answers a query when the top vote count plus "
    "N(0, σ1²) reaches its threshold (a fixed share of the teachers), and σ1 shrinks as ε grows, so where the "
    "teachers seldom reach the threshold the answers at a small ε are the noise's, labelled with more noise; "
    "not a fault (docs/plan.md: Confident-GNMax at a larger ε)."
)
"""The table's sentence where Confident-GNMax's answered count falls as ε rises (:func:`_confident_falls`)."""


def _confident_falls(rows: Sequence[dict[str, Any]]) -> bool:
    """Whether some Confident-GNMax row answers more queries than one at a larger target ε (same unit)."""
    rs = [r for r in rows if r.get("aggregator") == "confident-gnmax" and r.get("answered") is not None]
    return any(
        a["target_epsilon"] < b["target_epsilon"] and a["answered"] > b["answered"] and row_unit(a) == row_unit(b)
        for a in rs
        for b in rs
    )


_SUMMARY_KEYS = ("answered", "label_acc", "student_acc", "student_acc_unlabelled_pool")


def summarise_rows(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (privacy unit, aggregator, target ε) over its repeated releases: mean, sample
    standard deviation, min and max of :data:`_SUMMARY_KEYS` (None where no repeat has the value)."""
    groups: dict[tuple[str, str, float], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((row_unit(r), r["aggregator"], r["target_epsilon"]), []).append(r)
    out = []
    for (unit, agg, eps), group in groups.items():
        row: dict[str, Any] = {"aggregator": agg, "privacy_unit": unit, "target_epsilon": eps,
                               "epsilon": group[0]["epsilon"], "repeats": len(group)}  # fmt: skip
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
        f"{'aggregator':<21} {'unit':<6} {'ε':>6} {'n':>2}  {'answered':<26} {'student_acc':<32} "
        f"{'student_acc unlabelled pool':<32}"
    )
    lines = [head, "-" * len(head)]
    for r in summary:
        lines.append(
            f"{r['aggregator']:<21} {row_unit(r):<6} {r['target_epsilon']:>6.2f} {r['repeats']:>2}  "
            f"{cell(r, 'answered', 1):<26} "
            f"{cell(r, 'student_acc', 4):<32} {cell(r, 'student_acc_unlabelled_pool', 4):<32}"
        )
    lines.append(
        "Each cell is the mean ± sample sd [min, max] over repeated releases with the same teachers and fresh noise "
        "and selection (README: Before training: a plan)."
    )
    return "\n".join(lines)


def plot_rows(
    rows: Sequence[dict[str, Any]],
    path: Path,
    *,
    title: str,
    reference: float | None = None,
    caption: str | None = None,
    majority: dict[str, Any] | None = None,
) -> Path:
    """Student test accuracy vs target ε, one line per aggregator and privacy unit (matplotlib, Agg backend).

    Each line's legend names its unit (``[record]`` / ``[label]``); label-privacy lines are drawn
    with open markers, so that no two units are read as one ranking.

    With repeated releases, the line is the mean and the error bar the min–max range.
    The legend sits outside the axes (to the right), so it hides no line.
    ``reference``: a horizontal line (e.g. an accuracy reached without privacy); a plot meant
    for publication draws only published figures. ``caption``: a line under the plot (the
    total privacy cost by default, :func:`total_cost_line`). ``majority``: the majority-class
    reference (:func:`majority_reference`), drawn as a dotted line; a line's
    legend entry ends in "≤ majority class" when its accuracy is at or below it at every ε.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    summary = summarise_rows(rows)
    fig, ax = plt.subplots(figsize=(7.5, 4))
    for unit, name in dict.fromkeys((row_unit(r), r["aggregator"]) for r in summary):
        pts = sorted(
            (r["target_epsilon"], r["student_acc"], r["student_acc_min"], r["student_acc_max"])
            for r in summary
            if r["aggregator"] == name and row_unit(r) == unit and r["student_acc"] is not None
        )
        x, mean = [p[0] for p in pts], [p[1] for p in pts]
        err = [[p[1] - p[2] for p in pts], [p[3] - p[1] for p in pts]]
        is_direct = name in DIRECT_LEARNERS  # direct learners: dashed lines, square markers
        label = name + (" (direct)" if is_direct else "") + f" [{unit}]"
        if majority is not None and mean and all(at_or_below(a, majority) for a in mean):
            label += " ≤ majority class"
        ax.errorbar(x, mean, yerr=err, capsize=3, label=label, marker="s" if is_direct else "o",
                    linestyle="--" if is_direct else "-",
                    markerfacecolor="none" if unit == "label" else None)  # fmt: skip
    if reference is not None:
        ax.axhline(reference, color="grey", linestyle="--", linewidth=1, label="plurality vote (non-private)")
    if majority is not None:
        ax.axhline(majority["accuracy"], color="black", linestyle=":", linewidth=1.2,
                   label=f"always {majority['class']!r} (majority class, reference)")  # fmt: skip
    ax.set_xscale("log")
    ticks = sorted({r["target_epsilon"] for r in summary})
    ax.set_xticks(ticks, [f"{t:g}" for t in ticks])
    ax.minorticks_off()
    ax.set_xlabel("ε (target; δ fixed)")
    ax.set_ylabel("student test accuracy")
    ax.set_title(title, fontsize=9, wrap=True)
    ax.grid(True, alpha=0.3)
    # outside the axes, to their right: the legend never hides a line
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    text = textwrap.fill(total_cost_line(rows) if caption is None else caption, width=110)
    lines = text.count("\n") + 1
    fig.text(0.5, 0.01, text, ha="center", va="bottom", fontsize=7)
    fig.tight_layout(rect=(0, 0.03 + 0.03 * lines, 1, 1))
    image = io.BytesIO()
    fig.savefig(image, dpi=120, format="png")
    plt.close(fig)
    write_published(path, image.getvalue())  # replaced whole: a reader never sees part of it
    return path
