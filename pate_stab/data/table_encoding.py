"""Tables encoded with a public schema, each row on its own.

:func:`encode_table` maps a CSV file or a sequence of rows with a
:class:`~pate_stab.data.table_schema.TabularSchema` (DESIGN.md fact 6: nothing of the encoding is
read from the rows):

* ``numeric`` column with public bounds (lo, hi): ``(clip(v, lo, hi) − lo) / (hi − lo)`` ∈ [0, 1];
  values outside the bounds are clipped (``out_of_bounds="raise"`` rejects them instead);
* ``categorical`` column with categories c_1 … c_K: K + 1 indicator columns, c_1 … c_K and one
  ``<other>`` slot that takes every value not listed (a missing "?", a category nobody listed);
* the label column (optional in a table: a public pool has none) → the index of its class;
* the id column (optional) → an int64 record key, e.g. for ``partition_key: record_id``: an
  integer id as itself, a string id ("P000123") through SHA-256 (:func:`record_id_key`).

So every row's encoding depends on the schema and that row alone: adding, removing or changing
another record changes neither it nor the width. A table that does not fit its schema raises
:class:`~pate_stab.data.table_schema.SchemaError` naming the file, the row and the column.
"""

from __future__ import annotations

import csv
import gzip
import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import numpy as np
import torch
from torch import Tensor

from pate_stab.data.table_schema import SchemaError, TabularSchema

__all__ = ["EncodedTable", "encode_categorical", "encode_table", "record_id_key"]

_ID_DOMAIN = b"pate_stab record id\x00"


def record_id_key(value: Any) -> int:
    """One record id as the int64 key the partition hashes: an integer (or a string of one) as
    itself; any other string ("P000123") through SHA-256 (the first 8 bytes, signed). Each key
    depends on its own record's id alone, so adding or removing a record changes no other key. Ids
    are private: they key the partition (and the run's private data identity), never a published file.

    Raises:
        ValueError: an empty id, or a value that is neither an integer nor a string.
    """
    if isinstance(value, bool) or value is None:
        raise ValueError(f"record id {value!r} is neither an integer nor a string")
    if isinstance(value, int | np.integer):
        return int(value)
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str):
        raise ValueError(f"record id {value!r} is neither an integer nor a string")
    text = value.strip()
    if not text:
        raise ValueError("record id is empty")
    try:
        number = int(text)
    except ValueError:
        digest = hashlib.sha256(_ID_DOMAIN + text.encode("utf-8")).digest()
        return int.from_bytes(digest[:8], "little", signed=True)
    if -(2**63) <= number < 2**63:
        return number
    raise ValueError(f"record id {text!r} is an integer outside int64")


@dataclass(frozen=True)
class EncodedTable:
    """A table encoded with a schema: ``x`` (n, num_features) float32, ``y`` int64 or None, ``ids`` or None."""

    x: Tensor
    y: Tensor | None
    ids: Tensor | None
    feature_names: list[str]

    def __len__(self) -> int:
        return int(self.x.shape[0])


def _read_rows(
    path: Path, columns: Sequence[str] | None, comment: str | None
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (line number, fields) of a CSV file; blank lines and lines starting with
    ``comment`` (e.g. UCI's ``|``, the first line of ``adult.test``) are skipped."""
    if not path.is_file():
        raise FileNotFoundError(f"table file {path} does not exist")
    opener = gzip.open if path.suffix == ".gz" else open
    rows: list[tuple[int, list[str]]] = []
    with opener(path, "rt", newline="", encoding="utf-8-sig") as fh:
        for line, rec in enumerate(csv.reader(fh, skipinitialspace=True), start=1):
            if not rec or all(not v.strip() for v in rec) or (comment is not None and rec[0].startswith(comment)):
                continue
            rows.append((line, [v.strip() for v in rec]))
    if columns is None:
        if not rows:
            raise SchemaError(f"{path}: no header row")
        header = rows[0][1]
        rows = rows[1:]
    else:
        header = list(columns)
    for line, rec in rows:
        if len(rec) != len(header):
            raise SchemaError(f"{path}, line {line}: {len(rec)} fields, expected {len(header)} ({', '.join(header)})")
    return header, rows


def _table(
    source: str | Path | Sequence[Mapping[str, Any]], columns: Sequence[str] | None, comment: str | None
) -> tuple[str, list[int], dict[str, list[Any]] | None]:
    """Where the rows come from (for messages), each row's number, and the table column-wise
    (None for an empty sequence of rows)."""
    if isinstance(source, str | Path):
        path = Path(source)
        header, rows = _read_rows(path, columns, comment)
        repeated = sorted({n for n in header if header.count(n) > 1})
        if repeated:
            raise SchemaError(f"{path}: column(s) {repeated} appear more than once in the header")
        table = {name: [rec[j] for _, rec in rows] for j, name in enumerate(header)}
        return str(path), [line for line, _ in rows], table
    if isinstance(source, Mapping) or not isinstance(source, Sequence):
        raise TypeError("rows must be a path or a sequence of mappings (column name → value)")
    names: list[str] = []
    for r in source:
        if not isinstance(r, Mapping):
            raise TypeError(f"rows must be mappings (column name → value), got {type(r).__name__}")
        names.extend(k for k in r if k not in names)
    if not source:  # no rows, no names: an empty table with every column of the schema is meant
        return "rows", [], None
    table = {name: [r.get(name) for r in source] for name in names}
    return "rows", list(range(1, len(source) + 1)), table


def _bad(where: str, line: int, column: str, value: Any, what: str) -> SchemaError:
    return SchemaError(f"{where}, row {line}, column {column!r}: {what} (value {value!r})")


def _numbers(where: str, lines: list[int], column: str, values: list[Any]) -> Iterator[float]:
    for line, v in zip(lines, values, strict=True):
        if v is None or (isinstance(v, str) and not v.strip()):
            raise _bad(where, line, column, v, "missing value")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise _bad(where, line, column, v, "cannot parse as a number") from None
        if math.isnan(f):
            raise _bad(where, line, column, v, "NaN")
        if math.isinf(f):
            raise _bad(where, line, column, v, "not a finite number")
        yield f


def encode_categorical(values: Sequence[Any], categories: Sequence[str]) -> np.ndarray:
    """Indicators (n, K + 1) of ``values`` over the fixed ``categories`` and the ``<other>`` slot."""
    index = {c: j for j, c in enumerate(categories)}
    other = len(categories)
    n = len(values)
    codes = np.fromiter((index.get(str(v).strip(), other) for v in values), dtype=np.int64, count=n)
    onehot = np.zeros((n, other + 1))
    onehot[np.arange(n), codes] = 1.0
    return onehot


def encode_table(
    rows_or_path: str | Path | Sequence[Mapping[str, Any]],
    schema: TabularSchema,
    *,
    columns: Sequence[str] | None = None,
    out_of_bounds: Literal["clip", "raise"] = "clip",
    undeclared: Literal["ignore", "raise"] = "ignore",
) -> EncodedTable:
    """Encode a table with a public schema, row by row (module docstring).

    Args:
        rows_or_path: a CSV file (``.gz`` read as gzip; header row unless ``columns`` is given) or
            a sequence of mappings column name → value. Columns the schema does not name are
            ignored (``undeclared="raise"`` refuses them, so that a misspelt column is never
            dropped silently); the label and id columns may be absent (``y`` / ``ids`` are then None).
        schema: the public encoding.
        columns: the field names of a CSV file without a header row (e.g. UCI's ``adult.data``);
            default the schema's ``order`` where it says ``header: false``.
        out_of_bounds: ``"clip"`` clamps numeric values to their public bounds (documented, no
            privacy cost: a fixed map of each value); ``"raise"`` rejects them.

    Returns:
        :class:`EncodedTable`: ``x`` (n, ``schema.num_features``) float32 in [0, 1], ``y`` int64
        class indices or None, ``ids`` int64 or None, and the feature names.

    Raises:
        FileNotFoundError: a missing file.
        SchemaError: naming the file (or "rows"), the row and the column: a missing input column
            (an undeclared one with ``undeclared="raise"``), a missing or unparsable number, NaN
            or ±inf, a value outside the bounds with ``"raise"``, a label that is not a class, an
            id that is not an integer; a line with the wrong number of fields.
    """
    if not isinstance(schema, TabularSchema):
        raise TypeError(f"schema must be a TabularSchema, got {type(schema).__name__}")
    if out_of_bounds not in ("clip", "raise"):
        raise ValueError(f"out_of_bounds must be 'clip' or 'raise', got {out_of_bounds!r}")
    if undeclared not in ("ignore", "raise"):
        raise ValueError(f"undeclared must be 'ignore' or 'raise', got {undeclared!r}")
    if columns is None and not schema.header:
        columns = schema.order
    where, lines, read = _table(rows_or_path, columns, schema.comment)
    n = len(lines)
    table = read if read is not None else {c.name: [] for c in schema.columns}
    if undeclared == "raise":
        declared = [c.name for c in schema.columns] + [n for n in (schema.label, schema.id_column) if n is not None]
        extra = [name for name in table if name not in declared]
        if extra:
            raise SchemaError(f"{where}: column {extra[0]!r} is not in the schema (declared: {declared})")
    missing = [c.name for c in schema.columns if c.name not in table]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {missing} (columns present: {sorted(table)})")
    blocks: list[np.ndarray] = []
    for col in schema.columns:
        values = table[col.name]
        if col.kind == "numeric":
            lo, hi = cast(tuple[float, float], col.bounds)  # set by Column.__post_init__
            v = np.fromiter(_numbers(where, lines, col.name, values), dtype=np.float64, count=n)
            if out_of_bounds == "raise":
                outside = np.flatnonzero((v < lo) | (v > hi))
                if outside.size:
                    i = int(outside[0])
                    raise _bad(where, lines[i], col.name, values[i], f"outside the public bounds [{lo:g}, {hi:g}]")
            blocks.append(((np.clip(v, lo, hi) - lo) / (hi - lo))[:, None])
        else:
            blocks.append(encode_categorical(values, col.categories))
    x = torch.from_numpy(np.concatenate(blocks, axis=1) if n else np.zeros((0, schema.num_features)))
    y = None
    if schema.label is not None and schema.label in table:
        classes = {c: i for i, c in enumerate(schema.classes)}
        labels = []
        for line, v in zip(lines, table[schema.label], strict=True):
            s = str(v).strip() if v is not None else ""
            s = schema.label_aliases.get(s, s)
            if s not in classes:
                raise _bad(where, line, schema.label, v, f"not a class of the schema ({', '.join(schema.classes)})")
            labels.append(classes[s])
        y = torch.tensor(labels, dtype=torch.int64)
    ids = None
    if schema.id_column is not None and schema.id_column in table:
        parsed = []
        for line, v in zip(lines, table[schema.id_column], strict=True):
            try:
                parsed.append(record_id_key(str(v) if v is not None else ""))
            except ValueError as exc:
                raise _bad(where, line, schema.id_column, v, str(exc)) from None
        ids = torch.tensor(parsed, dtype=torch.int64)
    return EncodedTable(x=x.to(torch.float32), y=y, ids=ids, feature_names=schema.feature_names)
