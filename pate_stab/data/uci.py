"""UCI Adult, MAGIC gamma and KDD-99 (10 %) read from a path, with encodings fixed in advance.

Adult and MAGIC are encoded with a public :class:`~pate_stab.data.table_schema.TabularSchema`;
KDD-99's text columns are dropped or one-hot encoded over category lists the caller states. The
encodings, and the opt-outs that read statistics of the file, are described in
:mod:`pate_stab.data.tabular`.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Mapping, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import torch

from pate_stab._checks import warn_privacy_leak
from pate_stab.data.bounds import ADULT_NUMERIC_BOUNDS, MAGIC_BOUNDS
from pate_stab.data.table_encoding import EncodedTable, encode_categorical, encode_table
from pate_stab.data.table_schema import OTHER, UCI_COMMENT, Column, TabularSchema, schema_from_uci_names
from pate_stab.data.tabular_data import (
    LabelFormat,
    Norm,
    TabularData,
    from_encoded_table,
    require_file,
    standardize_in_file,
    to_tabular_data,
)

__all__ = [
    "ADULT_FIELDS",
    "KDD_TEXT_COLUMNS",
    "adult_schema",
    "adult_schema_from_names",
    "load_adult",
    "load_kddcup99",
    "load_magic",
    "magic_schema",
]


ADULT_LABEL_ALIASES = {"<=50K.": "<=50K", ">50K.": ">50K"}  # adult.test writes the class with a full stop


def adult_schema_from_names(path: str | Path) -> TabularSchema:
    """UCI Adult's schema from its published ``adult.names``: columns, order and categories as
    listed there, numeric bounds :data:`~pate_stab.data.bounds.ADULT_NUMERIC_BOUNDS`, classes
    (``<=50K``, ``>50K``) so that label 1 = income > 50K. Builds ``schemas/adult.json``."""
    return schema_from_uci_names(
        path, bounds=ADULT_NUMERIC_BOUNDS, label="income", classes=("<=50K", ">50K"), label_aliases=ADULT_LABEL_ALIASES
    )


@cache
def adult_schema() -> TabularSchema:
    """The shipped Adult schema (``pate_stab/data/schemas/adult.json``, from ``adult.names``)."""
    text = resources.files("pate_stab.data").joinpath("schemas/adult.json").read_text(encoding="utf-8")
    return TabularSchema.from_dict(json.loads(text))


ADULT_FIELDS = (
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation",
    "relationship", "race", "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
)  # fmt: skip
"""The fields of a line of ``adult.data`` / ``adult.test`` (the files have no header row)."""


def load_adult(
    data_dir: str | Path,
    *,
    part: Literal["all", "train", "test"] = "all",
    standardize: bool = False,
    norm: Norm = "l2",
    label_format: LabelFormat = "01",
) -> TabularData:
    """UCI Adult from ``data_dir/adult.data`` (32,561 rows) and / or ``adult.test`` (16,281 rows).

    Encoded with :func:`adult_schema` (module docstring): 113 columns whatever the rows. ``part``
    picks the file(s): ``"train"`` = ``adult.data``, ``"test"`` = ``adult.test``, ``"all"`` = both,
    ``adult.data`` first. ``standardize=True`` z-scores the numeric columns with statistics of the
    loaded rows (PrivacyLeakWarning).
    """
    if part not in ("all", "train", "test"):
        raise ValueError(f"part must be 'all', 'train' or 'test', got {part!r}")
    data_dir = Path(data_dir)
    names = {"all": ("adult.data", "adult.test"), "train": ("adult.data",), "test": ("adult.test",)}[part]
    files = [require_file(data_dir / name, "UCI Adult") for name in names]
    schema = adult_schema()
    tables = [encode_table(path, schema, columns=ADULT_FIELDS) for path in files]
    y = [t.y for t in tables if t.y is not None]
    table = EncodedTable(torch.cat([t.x for t in tables]), torch.cat(y), None, tables[0].feature_names)
    return from_encoded_table(
        table, schema, standardize=standardize, norm=norm, label_format=label_format, what="load_adult"
    )


_MAGIC_FIELDS = (*MAGIC_BOUNDS, "class")


def magic_schema() -> TabularSchema:
    """MAGIC's schema: the ten columns of ``magic04.names`` with :data:`~pate_stab.data.bounds.MAGIC_BOUNDS`,
    classes ``h`` (hadron, 0) and ``g`` (gamma, 1)."""
    return TabularSchema(
        columns=tuple(Column(name, "numeric", bounds=b) for name, b in MAGIC_BOUNDS.items()),
        label="class",
        classes=("h", "g"),
        source="magic04.names (columns, order, classes); bounds pate_stab.data.bounds.MAGIC_BOUNDS (a priori)",
        comment=UCI_COMMENT,
    )


def load_magic(
    data_dir: str | Path,
    *,
    standardize: bool = False,
    norm: Norm = "l2",
    label_format: LabelFormat = "01",
) -> TabularData:
    """MAGIC gamma telescope from ``data_dir/magic04.data``: 19,020 rows, 10 features in [0, 1].

    Label 1 = gamma (signal, "g"), 0 = hadron (background, "h"). ``standardize=True`` z-scores
    the columns with statistics of the file (PrivacyLeakWarning).
    """
    path = require_file(Path(data_dir) / "magic04.data", "MAGIC gamma telescope")
    schema = magic_schema()
    table = encode_table(path, schema, columns=_MAGIC_FIELDS)
    return from_encoded_table(
        table, schema, standardize=standardize, norm=norm, label_format=label_format, what="load_magic"
    )


KDD_TEXT_COLUMNS = ("protocol_type", "service", "flag")


def load_kddcup99(
    data_dir: str | Path,
    *,
    text_columns: Literal["drop", "onehot"] = "drop",
    categories: Mapping[str, Sequence[str]] | Literal["from_data"] | None = None,
    standardize: bool = False,
    norm: Norm = "l1",
    label_format: LabelFormat = "01",
) -> TabularData:
    """KDD Cup 1999, 10 % subset, from ``data_dir/kddcup.data_10_percent[.gz]``: 494,021 rows.

    Defaults follow Ligett et al. 2017: log1p on the first three numeric columns, text columns
    dropped (38 features), rows projected into the unit ℓ1 ball. (The paper divides by the
    largest row norm instead, which reads a statistic of the data; the projection does not.)

    Args:
        text_columns: ``"onehot"`` encodes protocol_type, service and flag over ``categories``.
        categories: for ``"onehot"``, the public list of each text column's values (every column
            of :data:`KDD_TEXT_COLUMNS`); values not listed go to ``<other>``. ``"from_data"``
            reads the values present in the file (PrivacyLeakWarning).
        standardize: z-scores of the numeric columns over the file (PrivacyLeakWarning).
    """
    if text_columns not in ("drop", "onehot"):
        raise ValueError(f"text_columns must be 'drop' or 'onehot', got {text_columns!r}")
    if text_columns == "onehot" and categories is None:
        raise ValueError(
            "text_columns='onehot' needs the public category lists of "
            f"{', '.join(KDD_TEXT_COLUMNS)} (categories={{column: [values]}}); categories='from_data' reads them "
            "from the records (PrivacyLeakWarning)"
        )
    if isinstance(categories, Mapping):
        missing = [c for c in KDD_TEXT_COLUMNS if c not in categories]
        if missing:
            raise ValueError(f"categories lacks the column(s) {missing}")
    data_dir = Path(data_dir)
    path = data_dir / "kddcup.data_10_percent.gz"
    if not path.is_file():
        path = require_file(data_dir / "kddcup.data_10_percent", "KDD-99 10% (kddcup.data_10_percent.gz)")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) == 42]
    text_idx = [1, 2, 3]
    num_idx = [i for i in range(41) if i not in text_idx]
    numeric = np.array([[r[i] for i in num_idx] for r in rows]).astype(np.float64)
    numeric[:, :3] = np.log1p(numeric[:, :3])  # duration, src_bytes, dst_bytes
    if standardize:
        numeric = standardize_in_file(numeric, range(numeric.shape[1]), "load_kddcup99")
    labels = np.array([0 if r[41] == "normal." else 1 for r in rows])
    blocks, names = [numeric], [f"f{i}" for i in num_idx]
    if text_columns == "onehot":
        if categories == "from_data":
            warn_privacy_leak(
                "load_kddcup99(categories='from_data'): the one-hot vocabularies are read from every record, "
                "private ones included; one record can add a column. Pass public category lists."
            )
        for j, name in zip(text_idx, KDD_TEXT_COLUMNS, strict=True):
            values = [r[j] for r in rows]
            cats = sorted(set(values)) if categories == "from_data" else list(categories[name])  # type: ignore[index]
            blocks.append(encode_categorical(values, cats))
            names.extend(f"{name}={c}" for c in (*cats, OTHER))
    return to_tabular_data(np.concatenate(blocks, axis=1), names, labels, norm=norm, label_format=label_format)
