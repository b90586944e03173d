"""Tabular data sets read from a path: UCI Adult, MAGIC gamma, KDD-99 (10 %), IWPC warfarin.

Every encoding is fixed by public information before a row is read (DESIGN.md fact 6), so one
record never changes the width, the column order, another record's encoding or a split's size:

* Adult: the :class:`~pate_stab.data.schema.TabularSchema` shipped as ``schemas/adult.json``,
  built from the published ``adult.names`` by :func:`adult_schema_from_names` (a test checks that
  the two agree): the 14 attributes in the file's order, each categorical one with its published
  categories plus an ``<other>`` slot (the missing value "?"), the six numeric ones scaled from
  the a-priori bounds :data:`~pate_stab.data.bounds.ADULT_NUMERIC_BOUNDS` to [0, 1] (clipped):
  113 columns. The shipped file makes ``adult.names`` unnecessary at load time; the parser shows
  where every entry comes from. Label 1 = income > 50K. The official split is by file
  (``part="train"``: ``adult.data``, ``part="test"``: ``adult.test``).
* MAGIC (Chaudhuri & Vinterbo 2013, Section 5): the ten columns of ``magic04.names`` scaled from
  :data:`~pate_stab.data.bounds.MAGIC_BOUNDS` to [0, 1] (clipped). Label 1 = gamma (signal).
* KDD-99 (Ligett et al. 2017, Appendix B.1): log(1 + x) on duration, src_bytes and dst_bytes,
  the three text columns (protocol_type, service, flag) dropped (38 features) or one-hot encoded
  over category lists the caller states (``categories=``; values not listed go to ``<other>``),
  rows projected into the unit ℓ1 ball. Label 1 = any attack, 0 = "normal.".
* IWPC warfarin (Wu et al. 2016, Section 6, after the IWPC 2009 model): age in decades, height,
  weight scaled from the public ranges of :func:`load_warfarin_iwpc` to [0, 1] (clipped; a
  missing value gets the range's midpoint 0.5, fixed a priori), race (the IWPC data's White /
  Asian / Black or African American / Unknown), VKORC1 rs9923231 genotype (A/A, A/G, G/G),
  CYP2C9 genotype (*1/*1 … *3/*3), each with an ``<other>`` slot, enzyme-inducer status,
  amiodarone; real target = therapeutic dose (mg/week). :func:`load_warfarin_iwpc` is the
  encoding of the IWPC dosing model used by the ERM reproductions (Wu et al. 2016, Ligett et
  al. 2017): complete rows only, age / height / weight / dose mapped with public ranges passed
  as arguments (:mod:`pate_stab.data.bounds`), rows in the unit ball.

``norm="l2"`` / ``"l1"`` projects each row into the unit ball, x ↦ x / max(1, ‖x‖): a map of
each row on its own, no statistic of the data set. ``standardize=True`` (z-scores with the mean
and standard deviation of the whole loaded file, as the papers do) and KDD-99's
``categories="from_data"`` read statistics of every row, private ones included: they are
opt-outs and raise :class:`~pate_stab._validation.PrivacyLeakWarning`. For a private pipeline
standardise with statistics of public data (:func:`standardize`).

Labels: ``label_format="01"`` gives int64 {0, 1}; ``"pm1"`` gives float32 {−1, +1}.
"""

from __future__ import annotations

import csv
import gzip
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from pate_stab._validation import check_tensor, warn_privacy_leak
from pate_stab.data.bounds import ADULT_NUMERIC_BOUNDS, MAGIC_BOUNDS, scale_to_bounds
from pate_stab.data.schema import (
    OTHER,
    UCI_COMMENT,
    Column,
    EncodedTable,
    SchemaError,
    TabularSchema,
    encode_categorical,
    encode_table,
    schema_from_uci_names,
)

__all__ = [
    "ADULT_FIELDS",
    "KDD_TEXT_COLUMNS",
    "OTHER",
    "Column",
    "EncodedTable",
    "SchemaError",
    "TabularData",
    "TabularSchema",
    "WARFARIN_IWPC_FEATURES",
    "adult_schema",
    "adult_schema_from_names",
    "encode_table",
    "load_adult",
    "load_kddcup99",
    "load_magic",
    "load_warfarin",
    "load_warfarin_iwpc",
    "magic_schema",
    "project_to_unit_ball",
    "standardize",
]

Norm = Literal["l2", "l1"] | None
LabelFormat = Literal["01", "pm1"]


@dataclass(frozen=True)
class TabularData:
    """Features (n, d) float32, labels (n,), and the name of every feature column."""

    x: Tensor
    y: Tensor
    feature_names: list[str] = field(default_factory=list)

    def __len__(self) -> int:
        return int(self.x.shape[0])


def standardize(x: Tensor, *, mean: Tensor, std: Tensor) -> Tensor:
    """z-scores with given statistics (fit them on public data for a private pipeline).

    Columns with ``std == 0`` are only centred.
    """
    x = check_tensor("x", x, ndim=2, floating=True)
    mean = check_tensor("mean", mean, ndim=1, floating=True)
    std = check_tensor("std", std, ndim=1, floating=True)
    if mean.shape[0] != x.shape[1] or std.shape[0] != x.shape[1] or bool((std < 0).any()):
        raise ValueError("mean and std must have one non-negative entry per column of x")
    return (x - mean) / torch.where(std > 0, std, torch.ones_like(std))


def project_to_unit_ball(x: Tensor, *, norm: Literal["l2", "l1"] = "l2") -> Tensor:
    """Each row x ↦ x / max(1, ‖x‖): rows already inside the unit ball are unchanged.

    Uses no statistic of the data set (each row is scaled on its own), so it is free under DP.
    """
    x = check_tensor("x", x, ndim=2, floating=True)
    if norm not in ("l2", "l1"):
        raise ValueError(f"norm must be 'l2' or 'l1', got {norm!r}")
    p = 2 if norm == "l2" else 1
    return x / x.norm(p=p, dim=1, keepdim=True).clamp_min(1.0)


def _standardize_in_file(x: np.ndarray, columns: Sequence[int], what: str) -> np.ndarray:
    """The opt-out: z-scores of ``columns`` with statistics of every loaded row (PrivacyLeakWarning)."""
    warn_privacy_leak(
        f"{what}(standardize=True): means and standard deviations read from every row of the file, private "
        "ones included; this is not covered by any privacy guarantee. Use standardize=False and "
        "standardise with statistics of public data.",
        stacklevel=4,
    )
    x = x.copy()
    cols = list(columns)
    if cols:
        mean, std = x[:, cols].mean(axis=0), x[:, cols].std(axis=0)
        x[:, cols] = (x[:, cols] - mean) / np.where(std > 0, std, 1.0)
    return x


def _finish(
    x: np.ndarray,
    names: list[str],
    labels: np.ndarray,
    *,
    norm: Norm,
    label_format: LabelFormat | Literal["real"],
) -> TabularData:
    xt = torch.from_numpy(np.asarray(x, dtype=np.float64)).to(torch.float32)
    if norm is not None:
        xt = project_to_unit_ball(xt, norm=norm)
    if label_format == "real":
        y = torch.from_numpy(labels.astype(np.float64)).to(torch.float32)
    elif label_format == "01":
        y = torch.from_numpy(labels.astype(np.int64))
    elif label_format == "pm1":
        y = torch.from_numpy(labels.astype(np.float32) * 2 - 1)
    else:
        raise ValueError(f"label_format must be '01' or 'pm1', got {label_format!r}")
    return TabularData(x=xt, y=y, feature_names=names)


def _require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{what}: expected the file {path}")
    return path


def _from_schema(
    table: EncodedTable,
    schema: TabularSchema,
    *,
    standardize: bool,
    norm: Norm,
    label_format: LabelFormat,
    what: str,
) -> TabularData:
    if table.y is None:
        raise ValueError(f"{what}: the file has no label column {schema.label!r}")
    x = table.x.double().numpy()
    if standardize:
        numeric, j = [], 0
        for col in schema.columns:
            if col.kind == "numeric":
                numeric.append(j)
            j += col.width
        x = _standardize_in_file(x, numeric, what)
    return _finish(x, table.feature_names, table.y.numpy(), norm=norm, label_format=label_format)


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
    files = [_require(data_dir / name, "UCI Adult") for name in names]
    schema = adult_schema()
    tables = [encode_table(path, schema, columns=ADULT_FIELDS) for path in files]
    y = [t.y for t in tables if t.y is not None]
    table = EncodedTable(torch.cat([t.x for t in tables]), torch.cat(y), None, tables[0].feature_names)
    return _from_schema(table, schema, standardize=standardize, norm=norm, label_format=label_format, what="load_adult")


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
    path = _require(Path(data_dir) / "magic04.data", "MAGIC gamma telescope")
    schema = magic_schema()
    table = encode_table(path, schema, columns=_MAGIC_FIELDS)
    return _from_schema(table, schema, standardize=standardize, norm=norm, label_format=label_format, what="load_magic")


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
        path = _require(data_dir / "kddcup.data_10_percent", "KDD-99 10% (kddcup.data_10_percent.gz)")
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) == 42]
    text_idx = [1, 2, 3]
    num_idx = [i for i in range(41) if i not in text_idx]
    numeric = np.array([[r[i] for i in num_idx] for r in rows]).astype(np.float64)
    numeric[:, :3] = np.log1p(numeric[:, :3])  # duration, src_bytes, dst_bytes
    if standardize:
        numeric = _standardize_in_file(numeric, range(numeric.shape[1]), "load_kddcup99")
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
    return _finish(np.concatenate(blocks, axis=1), names, labels, norm=norm, label_format=label_format)


WARFARIN_RACES = ("Asian", "Black or African American", "White", "Unknown")
WARFARIN_VKORC1 = ("A/A", "A/G", "G/G")
WARFARIN_CYP2C9 = ("*1/*1", "*1/*2", "*1/*3", "*2/*2", "*2/*3", "*3/*3")


def load_warfarin(
    data_dir: str | Path,
    *,
    standardize: bool = False,
    norm: Norm = "l2",
    age_decades: tuple[float, float] = (0.0, 9.0),
    height_cm: tuple[float, float] = (120.0, 210.0),
    weight_kg: tuple[float, float] = (30.0, 200.0),
) -> TabularData:
    """IWPC warfarin from ``data_dir/warfarin.csv``: real target = therapeutic dose (mg/week).

    Features (21 columns): age (decades), height (cm), weight (kg), each mapped from its public
    range to [0, 1] (clipped; missing → 0.5, the range's midpoint), race (Asian / Black or African
    American / White / Unknown / other), VKORC1 rs9923231 (A/A, A/G, G/G, other = NA), CYP2C9
    (*1/*1, *1/*2, *1/*3, *2/*2, *2/*3, *3/*3, other), enzyme inducer (carbamazepine, phenytoin
    or rifampin = 1), amiodarone = 1. Rows without a dose are dropped (a rule on each row alone).
    Labels are the raw dose; scale them into a bounded range with a bound you choose, not one
    read from the data. ``standardize=True`` z-scores age, height and weight with statistics of
    the file (PrivacyLeakWarning).
    """
    path = _require(Path(data_dir) / "warfarin.csv", "IWPC warfarin")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        table = list(csv.reader(fh))
    header, body = table[0], table[1:]
    col = {name: i for i, name in enumerate(header)}
    vk = "VKORC1 genotype: -1639 G>A (3673); chr16:31015190; rs9923231; C/T"
    body = [r for r in body if len(r) > col[vk] and r[col["Therapeutic Dose of Warfarin"]] not in ("", "NA")]

    def number(name: str) -> list[float]:
        return [float(r[col[name]]) if r[col[name]] not in ("", "NA") else np.nan for r in body]

    decades = [float(r[col["Age"]][0]) if r[col["Age"]][:1].isdigit() else np.nan for r in body]
    raw = np.array([decades, number("Height (cm)"), number("Weight (kg)")], dtype=np.float64).T  # (n, 3)
    missing = np.isnan(raw)
    raw[missing] = 0.0
    numeric = scale_to_bounds(torch.from_numpy(raw), bounds=[age_decades, height_cm, weight_kg]).numpy()
    numeric[missing] = 0.5  # midpoint of the public range, fixed before any row is read
    if standardize:
        numeric = _standardize_in_file(numeric, range(3), "load_warfarin")
    race = encode_categorical([r[col["Race"]] or "Unknown" for r in body], WARFARIN_RACES)
    vkorc1 = encode_categorical([r[col[vk]] for r in body], WARFARIN_VKORC1)
    cyp = encode_categorical([r[col["Cyp2C9 genotypes"]] for r in body], WARFARIN_CYP2C9)

    def flag(*names: str) -> np.ndarray:
        return np.array([[1.0 if any(r[col[n]] == "1" for n in names) else 0.0] for r in body]).reshape(-1, 1)

    inducer = flag("Carbamazepine (Tegretol)", "Phenytoin (Dilantin)", "Rifampin or Rifampicin")
    amiodarone = flag("Amiodarone (Cordarone)")
    dose = np.array([float(r[col["Therapeutic Dose of Warfarin"]]) for r in body])
    names = ["age_decades", "height_cm", "weight_kg"]
    for name, cats in (("race", WARFARIN_RACES), ("vkorc1_rs9923231", WARFARIN_VKORC1), ("cyp2c9", WARFARIN_CYP2C9)):
        names.extend(f"{name}={c}" for c in (*cats, OTHER))
    names += ["enzyme_inducer", "amiodarone"]
    x = np.concatenate([numeric, race, vkorc1, cyp, inducer, amiodarone], axis=1)
    return _finish(x, names, dose, norm=norm, label_format="real")


WARFARIN_IWPC_FEATURES = [
    "bias",
    "age_decade",
    "height",
    "weight",
    "vkorc1_AG",
    "vkorc1_AA",
    "cyp_12",
    "cyp_13",
    "cyp_22",
    "cyp_23",
    "cyp_33",
    "cyp_unknown",
    "asian",
    "black",
    "race_other",
    "enzyme_inducer",
    "amiodarone",
]


def load_warfarin_iwpc(
    data_dir: str | Path,
    *,
    age_decades: tuple[float, float] = (0.0, 9.0),
    height_cm: tuple[float, float] = (120.0, 210.0),
    weight_kg: tuple[float, float] = (30.0, 200.0),
    dose_mg_per_week: tuple[float, float] = (0.0, 140.0),
) -> dict[str, Tensor]:
    """IWPC warfarin in the encoding of the IWPC pharmacogenetic dosing model (IWPC 2009), unit ball.

    The encoding of Wu et al. 2016 and Ligett et al. 2017's ridge experiments: patients with a
    therapeutic dose, age, height, weight and a VKORC1 −1639 consensus genotype (others are
    dropped: no imputation from the data). Age (decade), height and weight are mapped to [0, 1]
    with the public ranges passed here, values outside clipped (:func:`scale_to_bounds`); the
    other features are indicators. The 9 groups (bias, age, height, weight, VKORC1, CYP2C9, race,
    inducer, amiodarone) contribute at most 1 each to ||x||², so rows are divided by 3 to lie in
    the unit ℓ2 ball without reading any bound from the data. The dose (mg/week) is mapped from
    ``dose_mg_per_week`` to y ∈ [−1, 1] (clipped), by default y = min(dose, 140)/70 − 1.

    Returns:
        dict with ``x`` (n, 17) float64, ``y`` (n,), ``dose`` (n,), ``vkorc1`` (n,) in {0: G/G,
        1: A/G, 2: A/A}, and ``vkorc1_columns`` (the two VKORC1 indicator columns of ``x``).

    Raises:
        FileNotFoundError: ``data_dir/warfarin.csv`` is missing.
        ValueError: a range with upper ≤ lower, or not finite.
    """
    path = _require(Path(data_dir) / "warfarin.csv", "IWPC warfarin")
    with open(path, encoding="utf-8-sig") as f:
        recs = list(csv.DictReader(f))
    vk_col = "VKORC1 -1639 consensus"
    vk_code = {"G/G": 0, "A/G": 1, "A/A": 2}
    cyp_codes = {"*1/*2": 6, "*1/*3": 7, "*2/*2": 8, "*2/*3": 9, "*3/*3": 10}
    feats, raw, doses, vks = [], [], [], []
    for r in recs:
        try:
            dose = float(r["Therapeutic Dose of Warfarin"])
            age = int(r["Age"].strip()[0]) if r["Age"] not in ("", "NA") else None
            height = float(r["Height (cm)"])
            weight = float(r["Weight (kg)"])
        except (ValueError, KeyError, TypeError):
            continue
        vk = r.get(vk_col, "NA")
        if age is None or vk not in vk_code:
            continue
        x = [0.0] * len(WARFARIN_IWPC_FEATURES)
        x[0] = 1.0
        if vk == "A/G":
            x[4] = 1.0
        elif vk == "A/A":
            x[5] = 1.0
        cyp = r.get("Cyp2C9 genotypes", "NA")
        if cyp in cyp_codes:
            x[cyp_codes[cyp]] = 1.0
        elif cyp != "*1/*1":
            x[11] = 1.0
        race = r.get("Race", "")
        if race == "Asian":
            x[12] = 1.0
        elif race == "Black or African American":
            x[13] = 1.0
        elif race != "White":
            x[14] = 1.0
        inducers = ("Carbamazepine (Tegretol)", "Phenytoin (Dilantin)", "Rifampin or Rifampicin")
        x[15] = 1.0 if any(r.get(c) == "1" for c in inducers) else 0.0
        x[16] = 1.0 if r.get("Amiodarone (Cordarone)") == "1" else 0.0
        feats.append(x)
        raw.append([float(age), height, weight])
        doses.append(dose)
        vks.append(vk_code[vk])
    features = torch.tensor(feats, dtype=torch.float64)
    features[:, 1:4] = scale_to_bounds(
        torch.tensor(raw, dtype=torch.float64), bounds=[age_decades, height_cm, weight_kg]
    )
    dose_t = torch.tensor(doses, dtype=torch.float64)
    y = 2.0 * scale_to_bounds(dose_t.unsqueeze(1), bounds=[dose_mg_per_week]).squeeze(1) - 1.0
    return {
        "x": features / 3.0,
        "y": y,
        "dose": dose_t,
        "vkorc1": torch.tensor(vks),
        "vkorc1_columns": torch.tensor([4, 5]),
    }
