"""A generated survey table shaped like a health survey's: integer-coded categorical answers, two
bounded numeric columns, a binary label whose majority class has a rate near 0.7 and which the
answers predict only a little better than that, and string record ids ("R000123").

``write_survey(root, n_private=..., n_pool=..., n_eval=...)`` writes ``private.csv``, ``pool.csv``
(no label column), ``eval.csv`` and ``schema.json`` under ``root`` and returns the file flags of a
``pate-stab transfer`` / ``compare`` command line.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

CATEGORICAL = {"occupation": 6, "region": 4, "education": 5, "smoker": 2}
SCHEMA = {
    "columns": [
        {"name": "age", "kind": "numeric", "bounds": [18, 90]},
        {"name": "visits", "kind": "numeric", "bounds": [0, 40]},
        *({"name": name, "kind": "categorical", "categories": [str(c) for c in range(1, n + 1)]}
          for name, n in CATEGORICAL.items()),
    ],
    "label": "insured",
    "classes": ["no", "yes"],
    "id_column": "respondent",
}  # fmt: skip


def survey_rows(n: int, *, seed: int, signal: float = 1.0) -> tuple[list[dict[str, str]], np.ndarray]:
    """``n`` rows (as CSV cells) and their labels (1 = "yes", rate near 0.7). ``signal`` scales how much the
    answers say about the label: at 1 a non-private logistic regression beats the majority class by about 3
    points (0.743 against 0.714 on 4,456 / 955 rows); at 0.5 it does not."""
    g = np.random.default_rng(seed)
    age = g.integers(18, 91, n)
    visits = np.minimum(g.poisson(4.0, n), 40)
    codes = {name: g.integers(1, k + 1, n) for name, k in CATEGORICAL.items()}
    # a weak signal: the label depends on age, education and smoking, and much on noise
    logit = (
        1.35
        - 0.35 * (1 - signal)
        + signal * (0.03 * (age - 50) + 0.45 * (codes["education"] - 3) - 0.9 * (codes["smoker"] == 2))
    )
    y = (g.random(n) < 1.0 / (1.0 + np.exp(-logit))).astype(np.int64)
    rows = [
        {"age": str(int(age[i])), "visits": str(int(visits[i])), **{k: str(int(v[i])) for k, v in codes.items()}}
        for i in range(n)
    ]
    return rows, y


def _write(path: Path, rows: list[dict[str, str]], y: np.ndarray | None, ids: list[str] | None) -> None:
    names = ["age", "visits", *CATEGORICAL]
    head = ([SCHEMA["id_column"]] if ids is not None else []) + names + (["insured"] if y is not None else [])
    lines = [",".join(head)]
    for i, row in enumerate(rows):
        cells = ([ids[i]] if ids is not None else []) + [row[c] for c in names]
        cells += [SCHEMA["classes"][int(y[i])]] if y is not None else []
        lines.append(",".join(cells))
    path.write_text("\n".join(lines) + "\n")


def write_survey(
    root: Path, *, n_private: int = 1200, n_pool: int = 300, n_eval: int = 300, seed: int = 0, signal: float = 1.0
) -> list[str]:
    """Write the three splits and the schema under ``root``; the flags that read them."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    rows, y = survey_rows(n_private + n_pool + n_eval, seed=seed, signal=signal)
    a, b = n_private, n_private + n_pool
    ids = [f"R{i:06d}" for i in np.random.default_rng(seed + 1).permutation(10**6)[:n_private]]
    _write(root / "private.csv", rows[:a], y[:a], ids)
    _write(root / "pool.csv", rows[a:b], None, None)
    _write(root / "eval.csv", rows[b:], y[b:], None)
    (root / "schema.json").write_text(json.dumps(SCHEMA))
    return ["--private", str(root / "private.csv"), "--public", str(root / "pool.csv"), "--evaluation",
            str(root / "eval.csv"), "--schema", str(root / "schema.json")]  # fmt: skip


def majority_rate(root: Path) -> float:
    """The evaluation split's majority-class rate (read from eval.csv)."""
    labels = [line.rsplit(",", 1)[1] for line in (Path(root) / "eval.csv").read_text().splitlines()[1:]]
    return max(labels.count(c) for c in SCHEMA["classes"]) / len(labels)
