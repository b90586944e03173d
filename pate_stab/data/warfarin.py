"""IWPC warfarin read from a path: the 21-column encoding and the IWPC dosing model's encoding.

Numeric columns are mapped from public ranges passed as arguments (DESIGN.md fact 6); see
:mod:`pate_stab.data.tabular` for the encodings and the ``standardize=True`` opt-out.
"""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from pate_stab.data.bounds import scale_to_bounds
from pate_stab.data.table_encoding import encode_categorical
from pate_stab.data.table_schema import OTHER
from pate_stab.data.tabular_data import Norm, TabularData, require_file, standardize_in_file, to_tabular_data

__all__ = ["WARFARIN_IWPC_FEATURES", "load_warfarin", "load_warfarin_iwpc"]


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
    path = require_file(Path(data_dir) / "warfarin.csv", "IWPC warfarin")
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
        numeric = standardize_in_file(numeric, range(3), "load_warfarin")
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
    return to_tabular_data(x, names, dose, norm=norm, label_format="real")


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
    path = require_file(Path(data_dir) / "warfarin.csv", "IWPC warfarin")
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
