"""Privacy units in tables and rankings: which unit each row's guarantee is stated in, and rankings
that never put two units side by side unmarked (DESIGN.md fact 13; docs/label_privacy.md).

A row's ``privacy_unit`` is the unit its run ranks it under: the run's ledger's unit. Under
record privacy (the default) a neighbour differs in one record's inputs and label; under label
privacy in one record's label. A record guarantee implies a label guarantee (a changed label is
a replaced record: replace-one holds as it is, add/remove by group privacy,
:func:`pate_stab.privacy.ledger.privacy_ledger.replace_one_cost`), so a label run may hold record-private rows,
counted in label terms. A label guarantee implies no record guarantee (the inputs are unprotected),
so a record run holds no label-private row: :func:`check_learner_units` refuses such a plan before
anything is read or trained, and :func:`best_per_epsilon` refuses to rank rows of two units together.

``guarantee_unit`` (direct rows) is the unit of the learner's own guarantee: ``"record"`` for
DP-SGD and the convex heads, ``"label"`` for the learners in :data:`LABEL_PRIVATE_LEARNERS`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from pate_stab.privacy.ledger.privacy_ledger import PRIVACY_UNITS
from pate_stab.run.config.names import LABEL_DIRECT_LEARNERS

__all__ = [
    "LABEL_PRIVATE_LEARNERS",
    "PRIVACY_UNITS",
    "MixedUnitsError",
    "best_per_epsilon",
    "check_learner_units",
    "learner_unit",
    "row_unit",
]

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
