"""Tabular data sets read from a path: UCI Adult, MAGIC gamma, KDD-99 (10 %), IWPC warfarin.

Preprocessing follows the papers that use them:

* Adult, MAGIC (Chaudhuri & Vinterbo 2013, Section 5): categorical variables one-hot encoded
  (Adult: 14 attributes → 108 columns here; the paper's 98 after its own recoding), numeric
  columns standardised, rows "constrained to the unit ball". Label 1 = income > 50K (Adult),
  1 = gamma / signal (MAGIC).
* KDD-99 (Ligett et al. 2017, Appendix B.1): log(1 + x) on duration, src_bytes and dst_bytes,
  the three text columns (protocol_type, service, flag) dropped (38 features) or one-hot
  encoded, rows rescaled to ℓ1 norm ≤ 1. Label 1 = any attack, 0 = "normal.".
* IWPC warfarin (Wu et al. 2016, Section 6, after the IWPC 2009 model): age in decades,
  height, weight, race, VKORC1 rs9923231 genotype, CYP2C9 genotype, enzyme-inducer status,
  amiodarone; real target = therapeutic dose (mg/week). Rows without a dose are dropped;
  missing height/weight are imputed with the column mean and missing age with the median
  decade; unknown genotypes get their own one-hot column. :func:`load_warfarin_iwpc` is the
  encoding of the IWPC dosing model used by the ERM reproductions (Wu et al. 2016, Ligett et
  al. 2017): complete rows only, age / height / weight / dose mapped with public ranges passed
  as arguments (:mod:`pate_stab.data.bounds`), rows in the unit ball.

Two kinds of preprocessing are kept apart, because only one of them is private:

* ``norm="l2"`` / ``"l1"`` projects each row into the unit ball, x ↦ x / max(1, ‖x‖). It uses
  no statistic of the data set, so it adds no privacy cost (DESIGN.md fact 6).
* ``standardize=True`` (z-scores) and the one-hot vocabularies use statistics of the whole
  loaded file, as in the papers. This is *not* a private operation; where that matters, pass
  ``standardize=False`` and standardise with statistics of public data (:func:`standardize`).

Labels: ``label_format="01"`` gives int64 {0, 1}; ``"pm1"`` gives float32 {−1, +1}.
"""

from __future__ import annotations

import csv
import gzip
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
import torch
from torch import Tensor

from pate_stab._validation import check_tensor
from pate_stab.data.bounds import scale_to_bounds

__all__ = [
    "TabularData",
    "standardize",
    "project_to_unit_ball",
    "load_adult",
    "load_magic",
    "load_kddcup99",
    "load_warfarin",
    "load_warfarin_iwpc",
    "WARFARIN_IWPC_FEATURES",
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


def _finish(
    numeric: np.ndarray,
    numeric_names: list[str],
    categorical: list[list[str]],
    categorical_names: list[str],
    labels: np.ndarray,
    *,
    standardize_numeric: bool,
    norm: Norm,
    label_format: LabelFormat | Literal["real"],
) -> TabularData:
    blocks = [numeric.astype(np.float64)]
    names = list(numeric_names)
    if standardize_numeric and numeric.shape[1]:
        mean = blocks[0].mean(axis=0)
        std = blocks[0].std(axis=0)
        blocks[0] = (blocks[0] - mean) / np.where(std > 0, std, 1.0)
    for col_name, values in zip(categorical_names, categorical, strict=True):
        vocab = sorted(set(values))
        index = {v: i for i, v in enumerate(vocab)}
        onehot = np.zeros((len(values), len(vocab)))
        onehot[np.arange(len(values)), [index[v] for v in values]] = 1.0
        blocks.append(onehot)
        names.extend(f"{col_name}={v}" for v in vocab)
    x = torch.from_numpy(np.concatenate(blocks, axis=1)).to(torch.float32)
    if norm is not None:
        x = project_to_unit_ball(x, norm=norm)
    if label_format == "real":
        y = torch.from_numpy(labels.astype(np.float64)).to(torch.float32)
    elif label_format == "01":
        y = torch.from_numpy(labels.astype(np.int64))
    elif label_format == "pm1":
        y = torch.from_numpy(labels.astype(np.float32) * 2 - 1)
    else:
        raise ValueError(f"label_format must be '01' or 'pm1', got {label_format!r}")
    return TabularData(x=x, y=y, feature_names=names)


def _require(path: Path, what: str) -> Path:
    if not path.is_file():
        raise FileNotFoundError(f"{what}: expected the file {path}")
    return path


_ADULT_COLUMNS = [
    ("age", "num"),
    ("workclass", "cat"),
    ("fnlwgt", "num"),
    ("education", "cat"),
    ("education-num", "num"),
    ("marital-status", "cat"),
    ("occupation", "cat"),
    ("relationship", "cat"),
    ("race", "cat"),
    ("sex", "cat"),
    ("capital-gain", "num"),
    ("capital-loss", "num"),
    ("hours-per-week", "num"),
    ("native-country", "cat"),
]


def load_adult(
    data_dir: str | Path,
    *,
    include_test: bool = True,
    standardize: bool = True,
    norm: Norm = "l2",
    label_format: LabelFormat = "01",
) -> TabularData:
    """UCI Adult from ``data_dir/adult.data`` (+ ``adult.test``): 32,561 (+16,281) rows.

    Rows from ``adult.data`` come first, then ``adult.test`` (so the official split is
    ``[:32561]`` / ``[32561:]``). Missing values ("?") are a category of their own.
    """
    data_dir = Path(data_dir)
    files = [_require(data_dir / "adult.data", "UCI Adult")]
    if include_test:
        files.append(_require(data_dir / "adult.test", "UCI Adult"))
    rows: list[list[str]] = []
    for path in files:
        with open(path, newline="") as fh:
            for rec in csv.reader(fh, skipinitialspace=True):
                if len(rec) == 15:
                    rows.append([v.strip() for v in rec])
    num_idx = [i for i, (_, kind) in enumerate(_ADULT_COLUMNS) if kind == "num"]
    cat_idx = [i for i, (_, kind) in enumerate(_ADULT_COLUMNS) if kind == "cat"]
    numeric = np.array([[float(r[i]) for i in num_idx] for r in rows])
    labels = np.array([1 if r[14].rstrip(".") == ">50K" else 0 for r in rows])
    return _finish(
        numeric,
        [_ADULT_COLUMNS[i][0] for i in num_idx],
        [[r[i] for r in rows] for i in cat_idx],
        [_ADULT_COLUMNS[i][0] for i in cat_idx],
        labels,
        standardize_numeric=standardize,
        norm=norm,
        label_format=label_format,
    )


def load_magic(
    data_dir: str | Path,
    *,
    standardize: bool = True,
    norm: Norm = "l2",
    label_format: LabelFormat = "01",
) -> TabularData:
    """MAGIC gamma telescope from ``data_dir/magic04.data``: 19,020 rows, 10 features.

    Label 1 = gamma (signal, "g"), 0 = hadron (background, "h").
    """
    path = _require(Path(data_dir) / "magic04.data", "MAGIC gamma telescope")
    with open(path, newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) == 11]
    numeric = np.array([[float(v) for v in r[:10]] for r in rows])
    labels = np.array([1 if r[10].strip() == "g" else 0 for r in rows])
    names = [
        "fLength",
        "fWidth",
        "fSize",
        "fConc",
        "fConc1",
        "fAsym",
        "fM3Long",
        "fM3Trans",
        "fAlpha",
        "fDist",
    ]
    return _finish(
        numeric,
        names,
        [],
        [],
        labels,
        standardize_numeric=standardize,
        norm=norm,
        label_format=label_format,
    )


def load_kddcup99(
    data_dir: str | Path,
    *,
    text_columns: Literal["drop", "onehot"] = "drop",
    standardize: bool = False,
    norm: Norm = "l1",
    label_format: LabelFormat = "01",
) -> TabularData:
    """KDD Cup 1999, 10 % subset, from ``data_dir/kddcup.data_10_percent[.gz]``: 494,021 rows.

    Defaults follow Ligett et al. 2017: log1p on the first three numeric columns, text columns
    dropped (38 features), rows projected into the unit ℓ1 ball. (The paper divides by the
    largest row norm instead, which reads a statistic of the data; the projection does not.)
    """
    data_dir = Path(data_dir)
    path = data_dir / "kddcup.data_10_percent.gz"
    if not path.is_file():
        path = _require(
            data_dir / "kddcup.data_10_percent", "KDD-99 10% (kddcup.data_10_percent.gz)"
        )
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) == 42]
    text_idx = [1, 2, 3]
    num_idx = [i for i in range(41) if i not in text_idx]
    numeric = np.array([[r[i] for i in num_idx] for r in rows]).astype(np.float64)
    numeric[:, :3] = np.log1p(numeric[:, :3])  # duration, src_bytes, dst_bytes
    labels = np.array([0 if r[41] == "normal." else 1 for r in rows])
    text_names = ["protocol_type", "service", "flag"]
    categorical = [[r[i] for r in rows] for i in text_idx] if text_columns == "onehot" else []
    if text_columns not in ("drop", "onehot"):
        raise ValueError(f"text_columns must be 'drop' or 'onehot', got {text_columns!r}")
    return _finish(
        numeric,
        [f"f{i}" for i in num_idx],
        categorical,
        text_names if categorical else [],
        labels,
        standardize_numeric=standardize,
        norm=norm,
        label_format=label_format,
    )


def load_warfarin(
    data_dir: str | Path,
    *,
    standardize: bool = True,
    norm: Norm = "l2",
) -> TabularData:
    """IWPC warfarin from ``data_dir/warfarin.csv``: real target = therapeutic dose (mg/week).

    Features (20 columns): age (decades), height (cm), weight (kg) (standardised), race
    (Asian / Black or African American / White / Unknown), VKORC1 rs9923231 (A/A, A/G, G/G,
    NA), CYP2C9 (*1/*1, *1/*2, *1/*3, *2/*2, *2/*3, *3/*3, other-or-NA), enzyme inducer
    (carbamazepine, phenytoin or rifampin = 1), amiodarone = 1. Labels are the raw dose; scale
    them into a bounded range with a bound you choose, not one read from the data.
    """
    path = _require(Path(data_dir) / "warfarin.csv", "IWPC warfarin")
    with open(path, newline="", encoding="utf-8-sig") as fh:
        table = list(csv.reader(fh))
    header, body = table[0], table[1:]
    col = {name: i for i, name in enumerate(header)}
    vk = "VKORC1 genotype: -1639 G>A (3673); chr16:31015190; rs9923231; C/T"
    body = [
        r
        for r in body
        if len(r) > col[vk] and r[col["Therapeutic Dose of Warfarin"]] not in ("", "NA")
    ]

    def number(name: str) -> np.ndarray:
        vals = np.array(
            [float(r[col[name]]) if r[col[name]] not in ("", "NA") else np.nan for r in body]
        )
        return np.where(np.isnan(vals), np.nanmean(vals), vals)

    decades = np.array(
        [float(r[col["Age"]][0]) if r[col["Age"]][:1].isdigit() else np.nan for r in body]
    )
    decades = np.where(np.isnan(decades), np.nanmedian(decades), decades)
    numeric = np.stack([decades, number("Height (cm)"), number("Weight (kg)")], axis=1)
    race = [r[col["Race"]] or "Unknown" for r in body]
    vkorc1 = [r[col[vk]] if r[col[vk]] in ("A/A", "A/G", "G/G") else "NA" for r in body]
    known = {"*1/*1", "*1/*2", "*1/*3", "*2/*2", "*2/*3", "*3/*3"}
    cyp = [
        r[col["Cyp2C9 genotypes"]] if r[col["Cyp2C9 genotypes"]] in known else "other" for r in body
    ]

    def flag(*names: str) -> np.ndarray:
        return np.array([[1.0 if any(r[col[n]] == "1" for n in names) else 0.0] for r in body])

    inducer = flag("Carbamazepine (Tegretol)", "Phenytoin (Dilantin)", "Rifampin or Rifampicin")
    amiodarone = flag("Amiodarone (Cordarone)")
    dose = np.array([float(r[col["Therapeutic Dose of Warfarin"]]) for r in body])
    data = _finish(
        numeric,
        ["age_decades", "height_cm", "weight_kg"],
        [race, vkorc1, cyp],
        ["race", "vkorc1_rs9923231", "cyp2c9"],
        dose,
        standardize_numeric=standardize,
        norm=None,
        label_format="real",
    )
    x = torch.cat([data.x, torch.from_numpy(np.concatenate([inducer, amiodarone], 1)).float()], 1)
    if norm is not None:
        x = project_to_unit_ball(x, norm=norm)
    return TabularData(
        x=x, y=data.y, feature_names=data.feature_names + ["enzyme_inducer", "amiodarone"]
    )


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
