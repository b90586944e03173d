"""Generated survey tables shaped like a health analyst's: categorical codes, a majority rate near 0.7,
string record ids, and the schema that declares them (tests of issue 44's input checks)."""

from __future__ import annotations

import json
import random
from pathlib import Path

OCCUPATIONS = [str(c) for c in range(1, 7)]  # declared codes 1–6: a 7 or a 9 is undeclared
RATINGS = [str(c) for c in range(1, 6)]
SCHEMA = {
    "columns": [
        {"name": "age", "kind": "numeric", "bounds": [17, 90]},
        {"name": "occupation", "kind": "categorical", "categories": OCCUPATIONS},
        {"name": "rating", "kind": "categorical", "categories": RATINGS},
        {"name": "years_married", "kind": "numeric", "bounds": [0, 50]},
    ],
    "label": "affairs",
    "classes": ["no", "yes"],
    "id_column": "rid",
}
HEADER = ["rid", "age", "occupation", "rating", "years_married", "affairs"]


def survey_rows(n: int, *, seed: int, start: int = 0) -> list[list[str]]:
    """``n`` rows: about 70 % "no" (the majority class), the label leaning on rating and occupation."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        rating = rng.randint(1, 5)
        occupation = rng.randint(1, 6)
        p_yes = 0.1 + 0.1 * (5 - rating) + (0.1 if occupation >= 5 else 0.0)
        label = "yes" if rng.random() < p_yes else "no"
        age = rng.randint(18, 75)
        years = min(50, max(0, age - 18 - rng.randint(0, 20)))
        rows.append([f"R{start + i:05d}", str(age), str(occupation), str(rating), str(years), label])
    return rows


def write_csv(path: Path, rows: list[list[str]], *, header: list[str] = HEADER, encoding: str = "utf-8") -> Path:
    text = "\n".join(",".join(r) for r in [header, *rows]) + "\n"
    path.write_bytes(text.encode(encoding))
    return path


def survey_files(folder: Path, *, n: tuple[int, int, int] = (300, 120, 120), schema: dict | None = None) -> dict:
    """private.csv (labelled, ids), pool.csv (no labels, no ids), eval.csv (labelled) and schema.json."""
    folder.mkdir(parents=True, exist_ok=True)
    sch = dict(SCHEMA if schema is None else schema)
    (folder / "schema.json").write_text(json.dumps(sch))
    pool_header = [h for h in HEADER if h not in ("rid", "affairs")]
    pool = [r[1:5] for r in survey_rows(n[1], seed=2, start=10**4)]
    return {
        "private": write_csv(folder / "private.csv", survey_rows(n[0], seed=1)),
        "public": write_csv(folder / "pool.csv", pool, header=pool_header),
        "evaluation": write_csv(folder / "eval.csv", survey_rows(n[2], seed=3, start=2 * 10**4)),
        "schema": folder / "schema.json",
    }
