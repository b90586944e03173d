"""The checks of a user's files that need neither torch nor NumPy: kinds, paths, and whole tables.

:func:`check_own_files` is what :func:`pate_stab.data.own.load_files` runs first, and what the
command line runs before it imports torch, so that a file that does not fit is refused in a
second, before anything is trained or spent. For CSV tables it checks every cell against the
public schema (:func:`pate_stab.data.table_rows.check_table`): a categorical value outside the
schema's categories is refused in every set (private, pool, evaluation), naming the file, the
row, the column and the value, unless the schema declares ``"unlisted": "other"`` (such values
then take the column's ``<other>`` slot); record ids must be distinct (both rows and the ids as written);
the label column must be there where labels are needed ("label column 'X' not found"). Array
files and image folders are checked further when they are loaded (:mod:`pate_stab.data.own`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pate_stab.data.table_rows import DEFAULT_ENCODING, CheckedTable, check_table, missing_label_message
from pate_stab.data.table_schema import SchemaError, TabularSchema

__all__ = ["POOL_LABELS", "InputDataError", "check_own_files", "file_kind", "set_names"]

POOL_LABELS = (
    "{what} holds {where}: the public pool is unlabelled input. If these are true labels kept for reporting "
    "only (label and pool accuracy), declare them (pool_labels: true / --pool-labels); otherwise remove them"
)

UNDECLARED_CATEGORY = (
    ". The private set, the pool and the evaluation set take only the schema's categories: correct the value, "
    "declare it in the column's categories, or declare that unlisted values take the column's <other> slot "
    '("unlisted": "other" in the schema)'
)


class InputDataError(ValueError):
    """The user's data does not fit what the run needs; the message names the set, file, column or index."""


def file_kind(path: Path, schema: object) -> str:
    """The kind of a path: "images" (a folder), "arrays" (.npz / .pt / .npy) or "table" (.csv, or any
    other file when a schema is given)."""
    if path.is_dir():
        return "images"
    if not path.exists():
        raise FileNotFoundError(f"{path} not found")
    if path.suffix in (".npz", ".pt", ".npy"):
        return "arrays"
    if path.suffix == ".csv" or schema is not None:
        return "table"
    raise InputDataError(
        f"{path}: unknown kind of file {path.suffix!r}; use .npz, .pt, .npy, .csv (or any text table with a "
        "schema) or an image folder"
    )


def set_names(paths: dict[str, Path]) -> dict[str, str]:
    """What each set is called in messages: "private set PATH", "public pool PATH", "evaluation set PATH"."""
    return {role: f"{role} set {p}" if role != "public" else f"public pool {p}" for role, p in paths.items()}


def check_own_files(
    private: str | Path,
    public: str | Path,
    evaluation: str | Path | None = None,
    *,
    classes: Any = None,
    schema: str | Path | TabularSchema | None = None,
    pool_labels: bool = False,
    encoding: str | None = None,
) -> tuple[str, TabularSchema | None, dict[str, CheckedTable]]:
    """The sets' kind, a table's schema, and the checked tables (empty for other kinds).

    Raises:
        InputDataError: files of mixed kinds, a CSV set without its schema or with declared classes,
            a table that does not fit its schema (:func:`~pate_stab.data.table_rows.check_table`, with
            categories strict and distinct record ids), a private or evaluation table without the
            label column, a private table without the id column the schema declares, a pool with
            undeclared labels; ``encoding`` given for files that are not tables.
        FileNotFoundError: a path that does not exist.
    """
    paths = {"private": Path(private), "public": Path(public)} | (
        {} if evaluation is None else {"evaluation": Path(evaluation)}
    )
    kinds = {role: file_kind(p, schema) for role, p in paths.items()}
    if len(set(kinds.values())) > 1:
        raise InputDataError(f"the three sets must be of one kind, got {kinds}")
    kind = kinds["private"]
    if kind != "table":
        if encoding is not None:
            raise InputDataError(f"encoding applies to CSV tables, not to {kind} ({paths['private']})")
        return kind, None, {}
    names = set_names(paths)
    if schema is None:
        raise InputDataError("a CSV data set needs its public schema (schema: PATH / --schema)")
    if classes is not None:
        raise InputDataError("a CSV data set takes its classes from the schema; do not also pass classes")
    try:
        sch = schema if isinstance(schema, TabularSchema) else TabularSchema.from_file(schema)
    except SchemaError as exc:
        raise InputDataError(str(exc)) from exc
    if sch.label is None:
        raise InputDataError("the CSV schema names no label column ('label' and its 'classes')")
    tables: dict[str, CheckedTable] = {}
    for role, p in paths.items():
        try:
            # a column the schema does not declare is refused, never dropped silently; so is a
            # category it does not declare (never folded into the <other> slot silently)
            tables[role] = check_table(
                p, sch, undeclared="raise", unknown_categories="other" if sch.unlisted == "other" else "raise",
                unknown_hint=UNDECLARED_CATEGORY,
                require_label=role != "public", encoding=encoding or DEFAULT_ENCODING,
            )  # fmt: skip
        except SchemaError as exc:
            what = names[role] if str(p) not in str(exc) else names[role].removesuffix(f" {p}")
            raise InputDataError(f"{what}: {exc}") from exc
    for role in ("private", "evaluation"):
        if role in tables and tables[role].labels is None:  # pragma: no cover - require_label refuses first
            raise InputDataError(missing_label_message(names[role], sch.label, tables[role].columns))
    if sch.id_column and tables["private"].ids is None:
        raise InputDataError(
            f"{names['private']} has no record-id column {sch.id_column!r} (the schema's id_column; columns: "
            f"{', '.join(tables['private'].columns)})"
        )
    if tables["public"].labels is not None and not pool_labels:
        raise InputDataError(POOL_LABELS.format(what=names["public"], where=f"the label column {sch.label!r}"))
    return kind, sch, tables
