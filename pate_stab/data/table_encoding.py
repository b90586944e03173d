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
another record changes neither it nor the width. A table is read and checked cell by cell by
:func:`pate_stab.data.table_rows.check_table` (standard library only); one that does not fit its
schema raises :class:`~pate_stab.data.table_schema.SchemaError` naming the file, the row, the
column and the value. A user's own data refuses categorical values outside the schema's
categories (``unknown_categories="raise"``, :mod:`pate_stab.data.own`); the bundled data sets
keep the ``<other>`` slot.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
from torch import Tensor

from pate_stab.data.table_rows import (
    DEFAULT_ENCODING,
    CheckedTable,
    UnknownCategories,
    check_table,
    record_id_key,
)
from pate_stab.data.table_schema import TabularSchema

__all__ = ["EncodedTable", "encode_categorical", "encode_checked", "encode_table", "record_id_key"]


@dataclass(frozen=True)
class EncodedTable:
    """A table encoded with a schema: ``x`` (n, num_features) float32, ``y`` int64 or None, ``ids`` or None."""

    x: Tensor
    y: Tensor | None
    ids: Tensor | None
    feature_names: list[str]

    def __len__(self) -> int:
        return int(self.x.shape[0])


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
    unknown_categories: UnknownCategories = "other",
    unknown_hint: str = "",
    encoding: str = DEFAULT_ENCODING,
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
        unknown_categories: a categorical value outside its column's categories: ``"other"`` (the
            ``<other>`` slot), ``"raise"`` (refused, naming the row, column and value) or
            ``"fallback"`` (the column's declared ``fallback`` category; refused without one);
            ``unknown_hint`` is added to the refusal (:func:`~pate_stab.data.table_rows.check_table`).
        encoding: a file's text encoding (default UTF-8; a byte-order mark is skipped).

    Returns:
        :class:`EncodedTable`: ``x`` (n, ``schema.num_features``) float32 in [0, 1], ``y`` int64
        class indices or None, ``ids`` int64 or None, and the feature names.

    Raises:
        FileNotFoundError: a missing file.
        SchemaError: naming the file (or "rows"), the row and the column: a missing input column
            (an undeclared one with ``undeclared="raise"``), a missing or unparsable number, NaN
            or ±inf, a value outside the bounds with ``"raise"``, a label that is not a class, an
            id that is not an integer, a repeated record id, a category outside the schema's with
            ``unknown_categories="raise"``; a line with the wrong number of fields; a file that is
            not text in ``encoding``.
    """
    checked = check_table(
        rows_or_path, schema, columns=columns, out_of_bounds=out_of_bounds, undeclared=undeclared,
        unknown_categories=unknown_categories, unknown_hint=unknown_hint, encoding=encoding,
    )  # fmt: skip
    return encode_checked(checked, schema)


def encode_checked(checked: CheckedTable, schema: TabularSchema) -> EncodedTable:
    """The encoding of a table :func:`~pate_stab.data.table_rows.check_table` read with ``schema``."""
    n = len(checked)
    blocks: list[np.ndarray] = []
    for col in schema.columns:
        if col.kind == "numeric":
            lo, hi = col.bounds  # type: ignore[misc]  # set by Column.__post_init__
            v = np.asarray(checked.numbers[col.name], dtype=np.float64).reshape(n)
            blocks.append(((v - lo) / (hi - lo))[:, None])
        else:
            codes = np.asarray(checked.codes[col.name], dtype=np.int64).reshape(n)
            onehot = np.zeros((n, col.width))
            onehot[np.arange(n), codes] = 1.0
            blocks.append(onehot)
    x = torch.from_numpy(np.concatenate(blocks, axis=1) if n else np.zeros((0, schema.num_features)))
    y = None if checked.labels is None else torch.tensor(checked.labels, dtype=torch.int64)
    ids = None if checked.ids is None else torch.tensor(checked.ids, dtype=torch.int64)
    return EncodedTable(x=x.to(torch.float32), y=y, ids=ids, feature_names=schema.feature_names)
