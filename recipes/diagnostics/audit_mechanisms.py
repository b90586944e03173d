"""Run every mechanism of the package, and every kept broken variant, through the DP test harness.

Prints a table (claimed ε, samples used, Clopper–Pearson lower bound on the privacy loss at
level α) and writes it as CSV. Correct mechanisms must show ``violates = False``; the broken
variants ``True``.

    python recipes/diagnostics/audit_mechanisms.py --num-samples 200000 --alpha 1e-6 --out checkpoints/audit_mechanisms
"""

from __future__ import annotations

import argparse
import csv
import time
from pathlib import Path

from pate_stab.audit.mechanism_cases import audit_mechanisms, mechanism_cases, mutation_cases
from pate_stab.audit.releaser_cases import releaser_cases, releaser_mutation_cases
from pate_stab.rng import seeded_generator


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-samples", type=int, default=200_000)
    parser.add_argument("--alpha", type=float, default=1e-6)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("checkpoints/audit_mechanisms"))
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    start = time.perf_counter()
    groups = (
        ("correct", mechanism_cases() + releaser_cases()),
        ("mutation", mutation_cases() + releaser_mutation_cases()),
    )
    for kind, cases in groups:
        for row in audit_mechanisms(
            cases, num_samples=args.num_samples, alpha=args.alpha, generator=seeded_generator(args.seed)
        ):
            rows.append(
                {
                    "kind": kind,
                    "mechanism": row.name,
                    "claimed_epsilon": f"{row.claimed_epsilon:.6g}",
                    "claimed_delta": f"{row.claimed_delta:.3g}",
                    "num_samples": row.num_samples,
                    "epsilon_lower_bound": f"{row.epsilon_lower_bound:.4f}",
                    "violates": row.violates,
                    "alpha": args.alpha,
                    "event": row.event,
                }
            )
    path = args.out / "mechanisms.csv"
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"{'kind':9s} {'mechanism':62s} {'ε claim':>8s} {'δ':>7s} {'samples':>8s} {'ε lower':>8s}  violates")
    for r in rows:
        print(
            f"{r['kind']:9s} {r['mechanism']:62s} {r['claimed_epsilon']:>8s} {r['claimed_delta']:>7s} "
            f"{r['num_samples']:>8d} {r['epsilon_lower_bound']:>8s}  {r['violates']}"
        )
    correct = [r for r in rows if r["kind"] == "correct"]
    mutations = [r for r in rows if r["kind"] == "mutation"]
    print(
        f"summary: {sum(r['violates'] for r in mutations)} of {len(mutations)} mutations flagged; "
        f"{sum(r['violates'] for r in correct)} of {len(correct)} correct cases flagged (α = {args.alpha:g} each)"
    )
    print(f"wrote {path} ({time.perf_counter() - start:.1f} s)")


if __name__ == "__main__":
    main()
