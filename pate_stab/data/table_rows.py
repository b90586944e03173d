"""A table read and checked against its public schema, cell by cell, without torch or NumPy.

:func:`check_table` reads a CSV file (or a sequence of rows) and checks every cell that the
schema fixes: each input column is present, numbers parse and are finite (and within the public
bounds when asked), categorical values are declared categories (when asked), labels are classes,
record ids parse and are distinct. It returns the values column by column (numbers, category
indices, class indices, id keys); :func:`pate_stab.data.table_encoding.encode_table` turns them
into tensors. Reading and checking need only the standard library, so the command line refuses a
table that does not fit before it imports torch.

Rows are counted as the file counts them: row 1 is the file's first line (the header row, where
there is one), so the first record of a file with a header is row 2; a sequence of rows is
counted from 1. Every :class:`~pate_stab.data.table_schema.SchemaError` names the file (or
"rows"), the row, the column and the value.
"""

from __future__ import annotations

import codecs
import csv
import gzip
import hashlib
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

from pate_stab.data.table_schema import SchemaError, TabularSchema

__all__ = ["DEFAULT_ENCODING", "CheckedTable", "UnknownCategories", "check_table", "record_id_key"]

DEFAULT_ENCODING = "utf-8-sig"
"""Text files are read as UTF-8 (a leading byte-order mark skipped) unless another encoding is named."""

UnknownCategories = Literal["other", "raise", "fallback"]

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
    if isinstance(value, numbers.Integral):  # int, NumPy's integers
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
class CheckedTable:
    """A table that fits its schema, column by column.

    ``where``: the file (or "rows"); ``lines``: each record's row number (see the module docstring);
    ``numbers``: per numeric column, its values (clipped to the bounds); ``codes``: per categorical
    column, each value's index in its categories (the ``<other>`` slot is ``len(categories)``);
    ``labels``: class indices, or None without a label column; ``ids``: record-id keys
    (:func:`record_id_key`), or None without an id column; ``columns``: the columns the table has.
    """

    where: str
    lines: list[int]
    numbers: dict[str, list[float]]
    codes: dict[str, list[int]]
    labels: list[int] | None
    ids: list[int] | None
    columns: list[str]

    def __len__(self) -> int:
        return len(self.lines)


def _encoding_error(path: Path, encoding: str, exc: UnicodeError) -> SchemaError:
    if isinstance(exc, UnicodeDecodeError) and isinstance(exc.object, bytes | bytearray):
        why = f"byte 0x{exc.object[exc.start : exc.start + 1].hex()} at position {exc.start} is not valid there"
    else:
        why = str(exc)
    return SchemaError(
        f"{path}: cannot be read as {encoding.replace('-sig', '')} text ({why}). Name the file's encoding: "
        "--encoding ENCODING on the command line (encoding: in a recipe; one for all the run's CSV files), e.g. "
        "latin-1, cp1252 or utf-16"
    )


def _read_rows(
    path: Path, columns: Sequence[str] | None, comment: str | None, encoding: str
) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and (row number, fields) of a CSV file; blank lines and lines starting with
    ``comment`` (e.g. UCI's ``|``, the first line of ``adult.test``) are skipped."""
    if not path.is_file():
        raise FileNotFoundError(f"table file {path} does not exist")
    try:
        codecs.lookup(encoding)
    except LookupError:
        raise SchemaError(f"unknown text encoding {encoding!r} (for {path}); e.g. utf-8, latin-1, utf-16") from None
    opener = gzip.open if path.suffix == ".gz" else open
    rows: list[tuple[int, list[str]]] = []
    try:
        with opener(path, "rt", newline="", encoding=encoding) as fh:
            for line, rec in enumerate(csv.reader(fh, skipinitialspace=True), start=1):
                if not rec or all(not v.strip() for v in rec) or (comment is not None and rec[0].startswith(comment)):
                    continue
                rows.append((line, [v.strip() for v in rec]))
    except UnicodeError as exc:  # UnicodeDecodeError, or a UTF-16 file without its byte-order mark
        raise _encoding_error(path, encoding, exc) from None
    except csv.Error as exc:
        raise SchemaError(f"{path}: not a readable CSV file ({exc})") from None
    if columns is None:
        if not rows:
            raise SchemaError(f"{path}: no header row")
        header = rows[0][1]
        rows = rows[1:]
        if "\x00" in "".join(header):
            raise SchemaError(
                f"{path}: the header holds NUL bytes, as text in UTF-16 read as UTF-8 does. Name the file's "
                "encoding: --encoding utf-16 (encoding: in a recipe)"
            )
    else:
        header = list(columns)
    for line, rec in rows:
        if len(rec) != len(header):
            raise SchemaError(f"{path}, row {line}: {len(rec)} fields, expected {len(header)} ({', '.join(header)})")
    return header, rows


def read_table(
    source: str | Path | Sequence[Mapping[str, Any]],
    *,
    columns: Sequence[str] | None = None,
    comment: str | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> tuple[str, list[int], dict[str, list[Any]] | None]:
    """Where the rows come from (for messages), each record's row number, and the table column-wise
    (None for an empty sequence of rows)."""
    if isinstance(source, str | Path):
        path = Path(source)
        header, rows = _read_rows(path, columns, comment, encoding)
        repeated = sorted({n for n in header if header.count(n) > 1})
        if repeated:
            raise SchemaError(f"{path}: column(s) {repeated} appear more than once in the header")
        table = {name: [rec[j] for _, rec in rows] for j, name in enumerate(header)}
        return str(path), [line for line, _ in rows], table
    if isinstance(source, Mapping) or not isinstance(source, Sequence):
        raise TypeError("rows must be a path or a sequence of mappings (column name → value)")
    names: list[str] = []
    records: list[Mapping[str, Any]] = []
    for r in source:
        if not isinstance(r, Mapping):
            raise TypeError(f"rows must be mappings (column name → value), got {type(r).__name__}")
        records.append(r)
        names.extend(k for k in r if k not in names)
    if not records:  # no rows, no names: an empty table with every column of the schema is meant
        return "rows", [], None
    columns_of: dict[str, list[Any]] = {name: [r.get(name) for r in records] for name in names}
    return "rows", list(range(1, len(records) + 1)), columns_of


def bad_cell(where: str, line: int, column: str, value: Any, what: str) -> SchemaError:
    return SchemaError(f"{where}, row {line}, column {column!r}: {what} (value {value!r})")


def _closest(name: str, present: Sequence[str]) -> str:
    import difflib

    close = difflib.get_close_matches(name, list(present), n=1, cutoff=0.6)
    return f"; the closest is {close[0]!r}" if close else ""


def missing_label_message(where: str, label: str, present: Sequence[str]) -> str:
    """ "label column 'X' not found" with the columns the table has and the closest name."""
    return f"{where}: label column {label!r} not found (columns: {', '.join(present)}{_closest(label, present)})"


def _numbers(where: str, lines: list[int], column: str, values: list[Any]) -> list[float]:
    out = []
    for line, v in zip(lines, values, strict=True):
        if v is None or (isinstance(v, str) and not v.strip()):
            raise bad_cell(where, line, column, v, "missing value")
        try:
            f = float(v)
        except (TypeError, ValueError):
            raise bad_cell(where, line, column, v, "cannot parse as a number") from None
        if math.isnan(f):
            raise bad_cell(where, line, column, v, "NaN")
        if math.isinf(f):
            raise bad_cell(where, line, column, v, "not a finite number")
        out.append(f)
    return out


def _codes(
    where: str, lines: list[int], column: Any, values: list[Any], unknown: UnknownCategories, hint: str
) -> list[int]:
    index = {c: j for j, c in enumerate(column.categories)}
    other = len(column.categories)
    fallback = None if column.fallback is None else index[column.fallback]
    out = []
    for line, v in zip(lines, values, strict=True):
        j = index.get(str(v).strip() if v is not None else "")
        if j is None:
            if unknown == "other":
                j = other
            elif unknown == "fallback" and fallback is not None:
                j = fallback
            else:
                what = f"value {v!r} is not a declared category ({', '.join(column.categories)})"
                if unknown == "fallback":
                    what += (
                        f"; the column declares no fallback category: give one with --fallback {column.name}=CATEGORY "
                        "(fallbacks= in Python) or as the column's 'fallback' in the schema"
                    )
                    hint = ""
                raise SchemaError(f"{where}, row {line}, column {column.name!r}: {what}{hint}")
        out.append(j)
    return out


def check_table(
    rows_or_path: str | Path | Sequence[Mapping[str, Any]],
    schema: TabularSchema,
    *,
    columns: Sequence[str] | None = None,
    out_of_bounds: Literal["clip", "raise"] = "clip",
    undeclared: Literal["ignore", "raise"] = "ignore",
    unknown_categories: UnknownCategories = "other",
    unknown_hint: str = "",
    require_label: bool = False,
    encoding: str = DEFAULT_ENCODING,
) -> CheckedTable:
    """Read a table and check it against ``schema``, cell by cell (module docstring).

    Args:
        rows_or_path, schema, columns, out_of_bounds, undeclared: as
            :func:`~pate_stab.data.table_encoding.encode_table`.
        unknown_categories: what a categorical value outside the column's categories does:
            ``"other"`` takes the ``<other>`` slot (the bundled data sets' missing "?");
            ``"raise"`` refuses it; ``"fallback"`` maps it to the column's declared ``fallback``
            category and refuses it where the column declares none.
        unknown_hint: appended to the message refusing such a value (what the user can do).
        require_label: the table must have the schema's label column ("label column 'X' not found").
        encoding: the file's text encoding (default UTF-8, a byte-order mark skipped).

    Raises:
        FileNotFoundError: a missing file.
        SchemaError: as ``encode_table``, plus a repeated record id (both rows and both ids, as
            written), a file that is not text in ``encoding`` (naming the file and the option).
    """
    if not isinstance(schema, TabularSchema):
        raise TypeError(f"schema must be a TabularSchema, got {type(schema).__name__}")
    if out_of_bounds not in ("clip", "raise"):
        raise ValueError(f"out_of_bounds must be 'clip' or 'raise', got {out_of_bounds!r}")
    if undeclared not in ("ignore", "raise"):
        raise ValueError(f"undeclared must be 'ignore' or 'raise', got {undeclared!r}")
    if unknown_categories not in ("other", "raise", "fallback"):
        raise ValueError(f"unknown_categories must be 'other', 'raise' or 'fallback', got {unknown_categories!r}")
    if columns is None and not schema.header:
        columns = schema.order
    where, lines, read = read_table(rows_or_path, columns=columns, comment=schema.comment, encoding=encoding)
    table = read if read is not None else {c.name: [] for c in schema.columns}
    present = list(table)
    if require_label and schema.label is not None and schema.label not in table:
        raise SchemaError(missing_label_message(where, schema.label, present))
    if undeclared == "raise":
        declared = [c.name for c in schema.columns] + [n for n in (schema.label, schema.id_column) if n is not None]
        extra = [name for name in table if name not in declared]
        if extra:
            hint = _closest(extra[0], declared)
            raise SchemaError(f"{where}: column {extra[0]!r} is not in the schema (declared: {declared}{hint})")
    missing = [c.name for c in schema.columns if c.name not in table]
    if missing:
        raise SchemaError(f"{where}: missing column(s) {missing} (columns present: {sorted(table)})")
    numbers: dict[str, list[float]] = {}
    codes: dict[str, list[int]] = {}
    for col in schema.columns:
        values = table[col.name]
        if col.kind == "numeric":
            lo, hi = cast(tuple[float, float], col.bounds)  # set by Column.__post_init__
            v = _numbers(where, lines, col.name, values)
            if out_of_bounds == "raise":
                for i, f in enumerate(v):
                    if f < lo or f > hi:
                        raise bad_cell(
                            where, lines[i], col.name, values[i], f"outside the public bounds [{lo:g}, {hi:g}]"
                        )
            numbers[col.name] = [min(max(f, lo), hi) for f in v]
        else:
            codes[col.name] = _codes(where, lines, col, values, unknown_categories, unknown_hint)
    labels = ids = None
    if schema.label is not None and schema.label in table:
        labels = _class_labels(where, lines, schema, schema.label, table[schema.label])
    if schema.id_column is not None and schema.id_column in table:
        ids = _record_ids(where, lines, schema.id_column, table[schema.id_column])
    return CheckedTable(where, lines, numbers, codes, labels, ids, present)


def _class_labels(
    where: str, lines: Sequence[int], schema: TabularSchema, column: str, values: Sequence[Any]
) -> list[int]:
    """The label column's values as class indices of the schema (its aliases applied), or SchemaError."""
    classes = {c: i for i, c in enumerate(schema.classes)}
    labels = []
    for line, v in zip(lines, values, strict=True):
        s = str(v).strip() if v is not None else ""
        s = schema.label_aliases.get(s, s)
        if s not in classes:
            raise bad_cell(where, line, column, v, f"not a class of the schema ({', '.join(schema.classes)})")
        labels.append(classes[s])
    return labels


def _record_ids(where: str, lines: Sequence[int], column: str, values: Sequence[Any]) -> list[int]:
    """The id column's values as record-id keys, or SchemaError naming both rows of a repeated id."""
    ids = []
    first: dict[int, tuple[int, Any]] = {}
    for line, v in zip(lines, values, strict=True):
        try:
            key = record_id_key(str(v) if v is not None else "")
        except ValueError as exc:
            raise bad_cell(where, line, column, v, str(exc)) from None
        if key in first:
            row, earlier = first[key]
            same = f"id {v!r}" if str(earlier).strip() == str(v).strip() else f"ids {earlier!r} and {v!r} (one number)"
            raise SchemaError(
                f"{where}: record ids must be distinct: rows {row} and {line} share {same} (column {column!r})"
            )
        first[key] = (line, v)
        ids.append(key)
    return ids
