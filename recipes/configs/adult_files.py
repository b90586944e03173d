"""UCI Adult through the generic CSV path, beside the dedicated loader, on the same split and settings.

``recipes/configs/adult.yaml`` reads Adult with :func:`pate_stab.data.load_adult` (the shipped schema
``pate_stab/data/schemas/adult.json``, from ``adult.names``); ``recipes/configs/adult_files.yaml`` reads
the same rows as ``dataset: files`` with the public schema ``recipes/configs/adult_schema.json`` (the
shipped one, for header-less files). This script writes the public pool and the evaluation set
(the two halves of ``adult.test``, as the dedicated loader splits it) into ``--split-dir`` (a
git-ignored folder under ``checkpoints/``; the data stays out of the repository), then runs
``compare`` on both configurations and prints the two tables.

Usage (from the project root)::

    python recipes/configs/adult_files.py                 # split, then both compares (minutes on 2 cores)
    python recipes/configs/adult_files.py --split-only
    pate-stab compare --config recipes/configs/adult_files.yaml  # after --split-only
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from pate_stab.run import TransferConfig, run_compare
from pate_stab.run.config import flat_settings

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "recipes" / "configs"


def split_test(data_dir: Path, out: Path) -> tuple[Path, Path]:
    """adult.test's rows → first half (public pool) and second half (evaluation), header-less CSVs."""
    rows = [
        line for line in (data_dir / "adult.test").read_text().splitlines() if line.strip() and not line.startswith("|")
    ]
    half = len(rows) // 2  # load_adult's official test rows, split as pate_stab.run.data does
    out.mkdir(parents=True, exist_ok=True)
    pool, evaluation = out / "adult_pool.csv", out / "adult_eval.csv"
    pool.write_text("\n".join(rows[:half]) + "\n")
    evaluation.write_text("\n".join(rows[half:]) + "\n")
    return pool, evaluation


def load_recipe(path: Path, **override: object) -> tuple[TransferConfig, dict]:
    data = yaml.safe_load(path.read_text())
    extra = data.pop("compare", {})
    return TransferConfig.from_dict({**flat_settings(data), **override}), extra


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", type=Path, default=Path("../shared/data/adult"))
    parser.add_argument("--split-dir", type=Path, default=Path("checkpoints/adult_split"))
    parser.add_argument("--split-only", action="store_true")
    parser.add_argument("--aggregators", nargs="+", default=None)
    parser.add_argument("--epsilons", type=float, nargs="+", default=None)
    args = parser.parse_args(argv)
    pool, evaluation = split_test(args.data_dir, args.split_dir)
    print(f"public pool: {pool}; evaluation: {evaluation}")
    if args.split_only:
        return
    results = {}
    for name, override in (
        ("adult", {"data_dir": str(args.data_dir)}),
        ("adult_files", {"private": str(args.data_dir / "adult.data"), "public": str(pool),
                         "evaluation": str(evaluation), "schema": str(CONFIGS / "adult_schema.json")}),
    ):  # fmt: skip
        config, extra = load_recipe(CONFIGS / f"{name}.yaml", **override)
        out = run_compare(config, epsilons=args.epsilons or extra["epsilons"], aggregators=args.aggregators, repeats=1)
        results[name] = out
        teachers = out["private"]["teachers"]  # private diagnostics (private_compare.json), printed here only
        print(f"\n{name}: mean teacher {teachers['mean_accuracy']:.4f}, plurality "
              f"{teachers['plurality_accuracy']:.4f}")  # fmt: skip
        print(out["table"])
    keys = ("aggregator", "target_epsilon", "answered", "label_acc", "student_acc")
    both = {n: [{k: r[k] for k in keys} for r in out["rows"]] for n, out in results.items()}
    (args.split_dir / "adult_files_vs_loader.json").write_text(json.dumps(both, indent=2))


if __name__ == "__main__":
    main()
