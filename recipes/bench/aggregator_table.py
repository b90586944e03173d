"""Answered fraction and label accuracy of every aggregator on synthetic teacher votes.

Synthetic teachers vote the true label with probability p and a uniformly random other class
otherwise, independently. For each (p, k, ε) every aggregator is calibrated to (ε, δ) for the
same m queries (stability releaser: paper and tight calibration with cutoff T; LNMax, GNMax,
Confident-GNMax: data-independent accounting) and run on the same votes. Writes a CSV under
``checkpoints/<run>/`` and prints the table.

    python recipes/bench/aggregator_table.py [--queries 1000] [--max-unstable 10] [--run aggregator_table]
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

import torch

from pate_stab.aggregation import compare_aggregators
from pate_stab.privacy.mechanisms.calibration import calibrate
from pate_stab.theory import teachers_for_unanimous_answer


def synthetic_votes(k: int, m: int, c: int, p: float, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    truth = torch.randint(0, c, (m,), generator=gen)
    agree = torch.rand(k, m, generator=gen) < p
    other = (truth + torch.randint(1, c, (k, m), generator=gen)) % c  # a different class, uniform
    return torch.where(agree, truth.expand(k, m), other), truth


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--queries", type=int, default=1000)
    ap.add_argument("--classes", type=int, default=10)
    ap.add_argument("--max-unstable", type=int, default=10)
    ap.add_argument("--delta", type=float, default=1e-5)
    ap.add_argument("--agreement", type=float, nargs="+", default=[0.7, 0.9, 0.99])
    ap.add_argument("--teachers", type=int, nargs="+", default=[250, 1000, 4000])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 3.0, 8.0])
    ap.add_argument("--run", default="aggregator_table")
    ap.add_argument("--seed", type=int, default=0, help="synthetic votes (and the noise with --noise seeded)")
    ap.add_argument("--noise", default="secure", choices=("secure", "seeded"),
                    help="secure (exact noise from the OS) or seeded (reproducible research only)")  # fmt: skip
    args = ap.parse_args()

    out_dir = Path("checkpoints") / args.run
    out_dir.mkdir(parents=True, exist_ok=True)
    gen = torch.Generator().manual_seed(args.seed)
    records = []
    start = time.perf_counter()
    for eps in args.epsilons:
        for mode in ("paper", "tight"):
            cal = calibrate(
                epsilon=eps, delta=args.delta, num_queries=args.queries, max_unstable=args.max_unstable, mode=mode
            )
            need = teachers_for_unanimous_answer(cal, fail_probability=0.05)
            print(f"ε={eps:g} {mode}: λ={cal.noise_scale:.3g} w={cal.threshold:.4g}; a unanimous vote needs k ≥ {need}")
    for p in args.agreement:
        for k in args.teachers:
            preds, truth = synthetic_votes(k, args.queries, args.classes, p, gen)
            for eps in args.epsilons:
                rows = compare_aggregators(
                    preds,
                    truth,
                    num_classes=args.classes,
                    epsilon=eps,
                    delta=args.delta,
                    max_unstable=args.max_unstable,
                    generator=gen,
                    noise=args.noise,
                )
                for r in rows:
                    records.append({"p": p, "k": k, "target_epsilon": eps, **r.to_dict()})
    path = out_dir / "aggregators.csv"
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(records[0]))
        writer.writeheader()
        writer.writerows(records)
    mechs = list(dict.fromkeys(r["mechanism"] for r in records))
    print(f"\nm={args.queries}, T={args.max_unstable}, δ={args.delta}: answered fraction / label accuracy on answered")
    print(f"{'p':>5}{'k':>6}{'ε':>5}  " + "".join(f"{m:>22}" for m in mechs))
    for p in args.agreement:
        for k in args.teachers:
            for eps in args.epsilons:
                cells = []
                for mech in mechs:
                    r = next(
                        x
                        for x in records
                        if x["p"] == p and x["k"] == k and x["target_epsilon"] == eps and x["mechanism"] == mech
                    )
                    acc = r["label_accuracy_answered"]
                    cells.append(f"{r['answered'] / args.queries:>12.3f} / {acc:>6.3f}")
                print(f"{p:>5}{k:>6}{eps:>5g}  " + "".join(f"{c:>22}" for c in cells))
    print(f"\nwrote {path} ({time.perf_counter() - start:.0f} s)")


if __name__ == "__main__":
    main()
