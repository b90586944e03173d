"""A public table schema and the encoding of CSV rows with it (minimal; see :mod:`pate_stab.data.own`).

The schema is the user's public declaration of a table (DESIGN.md fact 6): column order, which
columns are numeric and their public bounds, which are categorical and their categories, the
label column and its classes, and an optional record-id column. Nothing of it is read from the
rows. Encoding:

* numeric column with bounds (lo, hi): v ↦ (clip(v, lo, hi) − lo) / (hi − lo) ∈ [0, 1];
* categorical column with categories c_1 … c_J: one-hot over J + 1 slots, the last one "other"
  for any value the schema does not list (missing values included);
* label: the index of its class (a class may list several spellings; the first names it);
  a label value the schema does not list is refused.

Schema file (JSON, or YAML with PyYAML)::

    {"columns": [{"name": "age", "kind": "numeric", "bounds": [17, 90]},
                 {"name": "workclass", "kind": "categorical", "categories": ["Private", "State-gov"]}],
     "label": "income", "classes": [["<=50K", "<=50K."], [">50K", ">50K."]],
     "id_column": null, "header": true, "comment": null}

``header: false`` reads files without a header row, their columns in the schema's order (the
label and id columns placed by ``order``, a list of every column name in file order);
``comment`` is a prefix of lines to skip.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

__all__ = ["Column", "EncodedTable", "SchemaError", "TabularSchema", "encode_table"]


class SchemaError(ValueError):
    """A schema that cannot be used, or a table that does not fit its schema (names the file and column)."""


@dataclass(frozen=True)
class Column:
    """One feature column: ``kind`` "numeric" with public ``bounds``, or "categorical" with ``categories``."""

    name: str
    kind: str
    bounds: tuple[float, float] | None = None
    categories: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.kind == "numeric":
            if self.bounds is None or len(self.bounds) != 2:
                raise SchemaError(f"numeric column {self.name!r} needs public bounds [lo, hi]")
            lo, hi = (float(b) for b in self.bounds)
            if not (math.isfinite(lo) and math.isfinite(hi) and lo < hi):
                raise SchemaError(f"column {self.name!r}: bounds must be finite with lo < hi, got {self.bounds!r}")
            object.__setattr__(self, "bounds", (lo, hi))
        elif self.kind == "categorical":
            cats = tuple(str(c) for c in self.categories)
            if not cats or len(set(cats)) != len(cats):
                raise SchemaError(f"categorical column {self.name!r} needs a list of distinct categories")
            object.__setattr__(self, "categories", cats)
        else:
            raise SchemaError(f"column {self.name!r}: kind must be 'numeric' or 'categorical', got {self.kind!r}")

    @property
    def width(self) -> int:
        return 1 if self.kind == "numeric" else len(self.categories) + 1


@dataclass(frozen=True)
class TabularSchema:
    """A table's public schema: feature columns in order, the label column and its classes, an id column."""

    columns: tuple[Column, ...]
    label: str
    classes: tuple[tuple[str, ...], ...]
    id_column: str | None = None
    header: bool = True
    order: tuple[str, ...] | None = None
    comment: str | None = None

    def __post_init__(self) -> None:
        names = [c.name for c in self.columns] + [self.label] + ([self.id_column] if self.id_column else [])
        if not self.columns:
            raise SchemaError("the schema declares no feature column")
        if len(set(names)) != len(names):
            raise SchemaError(f"the schema names a column twice: {names}")
        if len(self.classes) < 2:
            raise SchemaError(f"label {self.label!r} needs at least two classes, got {len(self.classes)}")
        spellings = [s for c in self.classes for s in c]
        if len(set(spellings)) != len(spellings) or not all(self.classes):
            raise SchemaError(f"the classes of {self.label!r} must be distinct, non-empty spellings")
        if not self.header:
            if self.order is None or sorted(self.order) != sorted(names):
                raise SchemaError("a schema with header: false needs 'order': every column's name in file order")

    @property
    def num_features(self) -> int:
        return sum(c.width for c in self.columns)

    @property
    def class_names(self) -> tuple[str, ...]:
        return tuple(c[0] for c in self.classes)

    @property
    def feature_names(self) -> list[str]:
        out: list[str] = []
        for c in self.columns:
            out += [c.name] if c.kind == "numeric" else [f"{c.name}={v}" for v in (*c.categories, "<other>")]
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TabularSchema:
        if not isinstance(data, dict):
            raise SchemaError(f"a schema is a mapping, got {type(data).__name__}")
        unknown = sorted(set(data) - {"columns", "label", "classes", "id_column", "header", "order", "comment"})
        if unknown:
            raise SchemaError(f"unknown schema keys: {', '.join(unknown)}")
        for key in ("columns", "label", "classes"):
            if key not in data:
                raise SchemaError(f"the schema needs {key!r}")
        columns = []
        for c in data["columns"]:
            extra = sorted(set(c) - {"name", "kind", "bounds", "categories"})
            if extra or "name" not in c or "kind" not in c:
                raise SchemaError(f"a column is {{name, kind, bounds | categories}}, got {c!r}")
            bounds = tuple(c["bounds"]) if c.get("bounds") is not None else None
            columns.append(Column(str(c["name"]), c["kind"], bounds, tuple(c.get("categories") or ())))  # type: ignore[arg-type]
        classes = tuple(tuple(str(s) for s in c) if isinstance(c, list | tuple) else (str(c),) for c in data["classes"])
        order = data.get("order")
        return cls(
            tuple(columns), str(data["label"]), classes, data.get("id_column"), bool(data.get("header", True)),
            tuple(order) if order is not None else None, data.get("comment"),
        )  # fmt: skip

    @classmethod
    def from_file(cls, path: str | Path) -> TabularSchema:
        """Read a JSON (``.json``) or YAML (``.yaml`` / ``.yml``) schema file."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"schema file {path} not found")
        text = path.read_text()
        try:
            if path.suffix in (".yaml", ".yml"):
                import yaml

                data = yaml.safe_load(text)
            else:
                data = json.loads(text)
        except ValueError as exc:
            raise SchemaError(f"schema file {path}: {exc}") from exc
        try:
            return cls.from_dict(data)
        except SchemaError as exc:
            raise SchemaError(f"schema file {path}: {exc}") from exc


@dataclass(frozen=True)
class EncodedTable:
    """Encoded rows: ``x`` float32 (n, num_features); ``y`` int64 class indices or None (no label
    column in the file); ``ids`` int64 record ids or None (no id column)."""

    x: Tensor
    y: Tensor | None
    ids: Tensor | None


def _read_rows(path: Path, schema: TabularSchema) -> tuple[list[str], list[list[str]], list[int]]:
    """(column names, rows, line numbers) of a CSV file; cells stripped of surrounding spaces."""
    if not path.is_file():
        raise FileNotFoundError(f"CSV file {path} not found")
    names: list[str] | None = None if schema.header else list(schema.order or ())
    rows, lines = [], []
    with open(path, newline="") as fh:
        for line_no, rec in enumerate(csv.reader(fh), start=1):
            if not rec or (len(rec) == 1 and not rec[0].strip()):
                continue
            if schema.comment and rec[0].startswith(schema.comment):
                continue
            cells = [v.strip() for v in rec]
            if names is None:
                names = cells
                continue
            if len(cells) != len(names):
                raise SchemaError(f"{path}, line {line_no}: {len(cells)} fields, the header has {len(names)}")
            rows.append(cells)
            lines.append(line_no)
    if names is None:
        raise SchemaError(f"{path} is empty")
    return names, rows, lines


def encode_table(
    rows_or_path: str | Path | Sequence[dict[str, Any]], schema: TabularSchema, *, source: str | None = None
) -> EncodedTable:
    """Encode a CSV file (or rows as mappings) with a public schema.

    Every schema column must be present; a file column that the schema does not name is refused
    (so a misspelt column is never dropped silently). The label and id columns are optional (None:
    the table has none); label values must be among the schema's classes.

    Raises:
        SchemaError: a missing or undeclared column, a numeric cell that is not a finite number,
            an undeclared label value, a non-integer record id — naming the file, line and column.
    """
    if isinstance(rows_or_path, str | Path):
        where = str(rows_or_path)
        names, cells, lines = _read_rows(Path(rows_or_path), schema)
    else:
        where = source or "rows"
        records = list(rows_or_path)
        names = list(records[0]) if records else [c.name for c in schema.columns]
        cells = [[str(r.get(n, "")).strip() for n in names] for r in records]
        lines = list(range(1, len(records) + 1))
    declared = {c.name for c in schema.columns} | {schema.label} | ({schema.id_column} if schema.id_column else set())
    undeclared = [n for n in names if n not in declared]
    if undeclared:
        raise SchemaError(f"{where}: column {undeclared[0]!r} is not in the schema (declared: {sorted(declared)})")
    missing = [c.name for c in schema.columns if c.name not in names]
    if missing:
        raise SchemaError(f"{where}: schema column {missing[0]!r} is missing from the table")
    if not cells:
        raise SchemaError(f"{where} holds no rows")
    pos = {n: i for i, n in enumerate(names)}
    n = len(cells)
    x = np.zeros((n, schema.num_features), dtype=np.float32)
    offset = 0
    for col in schema.columns:
        j = pos[col.name]
        if col.kind == "numeric":
            lo, hi = col.bounds  # type: ignore[misc]
            for r, row in enumerate(cells):
                try:
                    v = float(row[j])
                except ValueError:
                    v = math.nan
                if not math.isfinite(v):
                    raise SchemaError(
                        f"{where}, line {lines[r]}, column {col.name!r}: {row[j]!r} is not a finite number"
                    )
                x[r, offset] = (min(max(v, lo), hi) - lo) / (hi - lo)
        else:
            index = {c: i for i, c in enumerate(col.categories)}
            other = len(col.categories)
            for r, row in enumerate(cells):
                x[r, offset + index.get(row[j], other)] = 1.0
        offset += col.width
    y = None
    if schema.label in pos:
        j = pos[schema.label]
        cls_of = {s: i for i, c in enumerate(schema.classes) for s in c}
        labels = []
        for r, row in enumerate(cells):
            if row[j] not in cls_of:
                raise SchemaError(
                    f"{where}, line {lines[r]}, column {schema.label!r}: label {row[j]!r} is not one of the "
                    f"schema's classes {list(schema.class_names)}"
                )
            labels.append(cls_of[row[j]])
        y = torch.tensor(labels, dtype=torch.int64)
    ids = None
    if schema.id_column and schema.id_column in pos:
        j = pos[schema.id_column]
        try:
            ids = torch.tensor([int(row[j]) for row in cells], dtype=torch.int64)
        except ValueError as exc:
            raise SchemaError(f"{where}, column {schema.id_column!r}: record ids must be integers ({exc})") from exc
    return EncodedTable(torch.from_numpy(x), y, ids)
