"""MNIST, heads on public PCA features: every aggregator on the same votes for several k and ε.

For each k, one set of k logistic heads is trained (recipes/configs/mnist_quick.yaml settings) and its
votes on the m public queries are released by the stability releaser (tight calibration) and by
LNMax, GNMax and Confident-GNMax at each target ε (δ = 1e-5); a student is trained on each
release. Prints one table per k; each run folder holds compare.json / compare.txt / compare.png.

Usage (from the project root)::

    python recipes/bench/transfer_mnist_sweep.py --k 1000 2000 --epsilons 2 4 8 16
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import yaml

from pate_stab.run import TransferConfig, run_compare
from pate_stab.run.config import flat_settings

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "recipes" / "configs" / "mnist_quick.yaml")
    parser.add_argument("--k", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--epsilons", type=float, nargs="+", default=[2.0, 4.0, 8.0, 16.0])
    parser.add_argument("--checkpoints-dir", default="checkpoints")
    args = parser.parse_args()
    data = yaml.safe_load(args.config.read_text())
    data.pop("compare", None)
    data = flat_settings(data)  # the recipe's sections (or flat names) by flat name
    data["teacher_hidden"] = tuple(data.get("teacher_hidden", (64,)))
    data["student_hidden"] = tuple(data.get("student_hidden", (64,)))
    base = TransferConfig.from_dict({**data, "checkpoints_dir": args.checkpoints_dir})
    for k in args.k:
        config = dataclasses.replace(base, num_teachers=k, run_name=f"{base.run_name}_k{k}_sweep")
        out = run_compare(config, epsilons=args.epsilons)
        t = out["private"]["teachers"]  # private diagnostics (private_compare.json): never publish
        print(
            f"\nk={k}: mean teacher acc {t['mean_accuracy']:.4f}, plurality acc {t['plurality_accuracy']:.4f} "
            "(private diagnostics), "
            f"m={out['num_queries']}, T={out['max_unstable']}, δ={out['delta']:g}"
        )
        print(out["table"])


if __name__ == "__main__":
    main()
