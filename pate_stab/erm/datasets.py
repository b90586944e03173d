"""Minimal loaders for the ERM reproductions: UCI Adult, MAGIC gamma, IWPC warfarin.

Small and self-contained on purpose (``pate_stab.data`` will hold the general tabular loaders).
Each returns float64 tensors. Scaling to the unit ball is left to the caller, who must say
where the bounds come from: ``adult``/``magic`` features are min-max scaled with ranges read from
the data (as in Chaudhuri & Vinterbo 2013, Sec. 5, "data sets were scaled such that covariate
vectors were constrained to the unit ball"); ``warfarin`` uses fixed, public ranges.
"""

from __future__ import annotations

import csv
from pathlib import Path

import torch

__all__ = ["load_adult", "load_magic", "load_warfarin", "WARFARIN_FEATURES"]

_DTYPE = torch.float64
_ADULT_NUMERIC = [0, 2, 4, 10, 11, 12]
_ADULT_CATEGORICAL = [1, 3, 5, 6, 7, 8, 9, 13]


def _minmax(x: torch.Tensor) -> torch.Tensor:
    lo, hi = x.min(dim=0).values, x.max(dim=0).values
    return (x - lo) / torch.where(hi > lo, hi - lo, torch.ones_like(hi))


def load_adult(root: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    """Adult (train + test files): 6 numeric features min-max scaled, 8 categorical one-hot;
    labels +1 for income > 50K. Rows with missing values ('?') are dropped."""
    rows = []
    for name in ("adult.data", "adult.test"):
        with open(Path(root) / "adult" / name) as f:
            for line in f:
                parts = [p.strip() for p in line.strip().split(",")]
                if len(parts) != 15 or "?" in parts:
                    continue
                rows.append(parts)
    y = torch.tensor([1.0 if r[14].rstrip(".") == ">50K" else -1.0 for r in rows], dtype=_DTYPE)
    num = _minmax(torch.tensor([[float(r[i]) for i in _ADULT_NUMERIC] for r in rows], dtype=_DTYPE))
    blocks = [num]
    for j in _ADULT_CATEGORICAL:
        values = sorted({r[j] for r in rows})
        index = {v: i for i, v in enumerate(values)}
        codes = torch.tensor([index[r[j]] for r in rows])
        blocks.append(torch.nn.functional.one_hot(codes, len(values)).to(_DTYPE))
    return torch.cat(blocks, dim=1), y


def load_magic(root: str | Path) -> tuple[torch.Tensor, torch.Tensor]:
    """MAGIC gamma telescope: 10 features min-max scaled; +1 for gamma ('g')."""
    with open(Path(root) / "magic" / "magic04.data") as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    x = torch.tensor([[float(v) for v in r[:10]] for r in rows], dtype=_DTYPE)
    y = torch.tensor([1.0 if r[10] == "g" else -1.0 for r in rows], dtype=_DTYPE)
    return _minmax(x), y


WARFARIN_FEATURES = [
    "bias", "age_decade", "height", "weight", "vkorc1_AG", "vkorc1_AA", "cyp_12", "cyp_13",
    "cyp_22", "cyp_23", "cyp_33", "cyp_unknown", "asian", "black", "race_other", "enzyme_inducer",
    "amiodarone",
]


def load_warfarin(root: str | Path) -> dict[str, torch.Tensor]:
    """IWPC warfarin, encoded as in the IWPC pharmacogenetic dosing model (IWPC 2009).

    Keeps patients with a therapeutic dose, age, height, weight and a VKORC1 -1639 genotype.
    Features use fixed public ranges (age decade / 9, height (cm - 120)/90, weight (kg - 30)/170,
    clamped to [0, 1]) and indicators; 9 groups contribute at most 1 each to ||x||^2, so rows are
    divided by 3 to lie in the unit ball without reading any bound from the data. The dose
    (mg/week) is mapped to y = min(dose, 140)/70 - 1 in [-1, 1].

    Returns:
        dict with ``x`` (n, 17), ``y`` (n,), ``dose`` (n,), ``vkorc1`` (n,) in {0: G/G, 1: A/G,
        2: A/A}, and ``vkorc1_columns`` (the two VKORC1 indicator columns).
    """
    path = Path(root) / "warfarin" / "warfarin.csv"
    with open(path, encoding="utf-8-sig") as f:
        reader = csv.DictReader(f)
        recs = list(reader)
    vk_col = "VKORC1 -1639 consensus"
    feats, ys, doses, vks = [], [], [], []
    vk_code = {"G/G": 0, "A/G": 1, "A/A": 2}
    cyp_codes = {"*1/*2": 6, "*1/*3": 7, "*2/*2": 8, "*2/*3": 9, "*3/*3": 10}
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
        x = [0.0] * len(WARFARIN_FEATURES)
        x[0] = 1.0
        x[1] = min(max(age / 9.0, 0.0), 1.0)
        x[2] = min(max((height - 120.0) / 90.0, 0.0), 1.0)
        x[3] = min(max((weight - 30.0) / 170.0, 0.0), 1.0)
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
        inducer = any(r.get(c) == "1" for c in ("Carbamazepine (Tegretol)", "Phenytoin (Dilantin)",
                                                "Rifampin or Rifampicin"))
        x[15] = 1.0 if inducer else 0.0
        x[16] = 1.0 if r.get("Amiodarone (Cordarone)") == "1" else 0.0
        feats.append(x)
        doses.append(dose)
        ys.append(min(dose, 140.0) / 70.0 - 1.0)
        vks.append(vk_code[vk])
    return {
        "x": torch.tensor(feats, dtype=_DTYPE) / 3.0,
        "y": torch.tensor(ys, dtype=_DTYPE),
        "dose": torch.tensor(doses, dtype=_DTYPE),
        "vkorc1": torch.tensor(vks),
        "vkorc1_columns": torch.tensor([4, 5]),
    }
