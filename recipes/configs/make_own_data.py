"""Write two small generated data sets in the layouts of "Your own data" (README.md, docs/own_data.md): a patient table
(CSV with a public schema, string patient ids) and a folder of 16 × 16 grey images.

    python recipes/configs/make_own_data.py --out mydata [--rows 4000 1000 1000] [--images 1500 300 300]

``mydata/table/``: ``private.csv`` (with ``outcome`` and ``patient_id``), ``pool.csv`` (no label, no
id), ``eval.csv`` (labelled), ``new.csv`` (10 unlabelled rows to predict) and ``schema.json``.
``mydata/images/``: ``train/<class>/``, ``pool/`` (flat), ``test/<class>/`` and ``new/`` (10 images).
Everything is drawn from a fixed seed; nothing is downloaded.

The table: outcome "yes" with probability sigmoid(0.06 (age − 55) + 0.15 (bmi − 27) + ward effect
+ 0.8 smoker), so about three in four patients are classified correctly from the inputs. The
images: class c ∈ {bar, cross, ring} drawn with noise and a random shift.
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np

SCHEMA = {
    "columns": [
        {"name": "age", "kind": "numeric", "bounds": [18, 95]},
        {"name": "bmi", "kind": "numeric", "bounds": [15, 50]},
        {"name": "ward", "kind": "categorical", "categories": ["A", "B", "C", "D"]},
        {"name": "smoker", "kind": "categorical", "categories": ["no", "yes"]},
    ],
    "label": "outcome",
    "classes": ["no", "yes"],
    "id_column": "patient_id",
}
WARD_EFFECT = {"A": -0.8, "B": 0.0, "C": 0.6, "D": 1.2}
SHAPES = ("bar", "cross", "ring")


def patients(n: int, rng: np.random.Generator, start: int) -> list[dict[str, str]]:
    rows = []
    for i in range(n):
        age, bmi = float(rng.normal(55, 15)), float(rng.normal(27, 5))
        ward, smoker = str(rng.choice(list(WARD_EFFECT))), bool(rng.random() < 0.3)
        logit = 0.06 * (age - 55) + 0.15 * (bmi - 27) + WARD_EFFECT[ward] + 0.8 * smoker
        outcome = "yes" if rng.random() < 1 / (1 + math.exp(-logit)) else "no"
        rows.append({"patient_id": f"P{start + i:06d}", "age": f"{age:.1f}", "bmi": f"{bmi:.1f}", "ward": ward,
                     "smoker": "yes" if smoker else "no", "outcome": outcome})  # fmt: skip
    return rows


def write_csv(path: Path, rows: list[dict[str, str]], columns: list[str]) -> None:
    lines = [",".join(columns)] + [",".join(r[c] for c in columns) for r in rows]
    path.write_text("\n".join(lines) + "\n")


def write_table(out: Path, sizes: tuple[int, int, int], rng: np.random.Generator) -> None:
    out.mkdir(parents=True, exist_ok=True)
    inputs = ["age", "bmi", "ward", "smoker"]
    n_priv, n_pool, n_eval = sizes
    write_csv(out / "private.csv", patients(n_priv, rng, 0), ["patient_id", *inputs, "outcome"])
    write_csv(out / "pool.csv", patients(n_pool, rng, n_priv), inputs)
    write_csv(out / "eval.csv", patients(n_eval, rng, n_priv + n_pool), [*inputs, "outcome"])
    write_csv(out / "new.csv", patients(10, rng, 10**6), inputs)
    (out / "schema.json").write_text(json.dumps(SCHEMA, indent=1) + "\n")


def shape_image(c: int, rng: np.random.Generator) -> np.ndarray:
    img = np.zeros((16, 16))
    dy, dx = rng.integers(-2, 3, size=2)
    if c == 0:  # a horizontal bar
        img[7 + dy : 10 + dy, 3:13] = 1
    elif c == 1:  # a cross
        img[7 + dy : 9 + dy, 3:13] = 1
        img[3:13, 7 + dx : 9 + dx] = 1
    else:  # a ring
        yy, xx = np.mgrid[:16, :16]
        r = np.hypot(yy - 7.5 - dy, xx - 7.5 - dx)
        img[(r > 3.5) & (r < 5.5)] = 1
    img = 0.8 * img + rng.normal(0, 0.25, size=img.shape)
    return (np.clip(img, 0, 1) * 255).astype(np.uint8)


def write_images(out: Path, sizes: tuple[int, int, int], rng: np.random.Generator) -> None:
    from PIL import Image

    for name, n, labelled in (("train", sizes[0], True), ("pool", sizes[1], False), ("test", sizes[2], True),
                              ("new", 10, False)):  # fmt: skip
        for i in range(n):
            c = int(rng.integers(len(SHAPES)))
            folder = out / name / SHAPES[c] if labelled else out / name
            folder.mkdir(parents=True, exist_ok=True)
            Image.fromarray(shape_image(c, rng), mode="L").save(folder / f"{name}_{i:05d}.png")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=Path("mydata"))
    parser.add_argument("--rows", type=int, nargs=3, default=[4000, 1000, 1000], metavar=("PRIVATE", "POOL", "EVAL"))
    parser.add_argument("--images", type=int, nargs=3, default=[1500, 300, 300], metavar=("TRAIN", "POOL", "TEST"))
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    write_table(args.out / "table", tuple(args.rows), rng)
    write_images(args.out / "images", tuple(args.images), rng)
    print(f"wrote {args.out / 'table'} and {args.out / 'images'}")


if __name__ == "__main__":
    main()
