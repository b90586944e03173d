"""Throughput of the hard-label stability releaser (seeded float noise): vote counts → labels.

k = 250 teachers, C = 10 classes, m = 10^6 queries on the CPU. The vectorised releaser
(:class:`pate_stab.aggregation.StabilityReleaser`) is timed on all m queries; a plain per-query
Python loop of the same algorithm (argmax, sensitivity-1 distance, sparse vector with Laplace
noise from Python's ``random``) is timed on a prefix and its rate extrapolated. Both run in this
process, one after the other, and the ratio of their rates is printed.

    python recipes/bench/benchmark_releaser.py [--queries 1000000] [--loop-queries 50000]
"""

from __future__ import annotations

import argparse
import math
import random
import time

import torch

from pate_stab.aggregation import StabilityReleaser
from pate_stab.privacy.mechanisms.calibration import calibrate


def make_counts(k: int, m: int, c: int, gen: torch.Generator) -> torch.Tensor:
    truth = torch.randint(0, c, (m,), generator=gen)
    agree = torch.rand(k, m, generator=gen) < 0.97
    preds = torch.where(agree, truth.expand(k, m), torch.randint(0, c, (k, m), generator=gen))
    counts = torch.zeros(m, c, dtype=torch.int64)
    counts.scatter_add_(1, preds.T.contiguous(), torch.ones(m, k, dtype=torch.int64))
    return counts


def loop_release(counts: list[list[int]], lam: float, w: float, t: int, rng: random.Random) -> list[int]:
    """BTT18 Alg 4 with the sensitivity-1 distance, one query at a time, plain Python."""

    def lap(b: float) -> float:
        return b * (rng.expovariate(1.0) - rng.expovariate(1.0))

    out, failed, w_hat = [], 0, w + lap(lam)
    for row in counts:
        if failed >= t:
            out.append(-1)
            continue
        top = max(range(len(row)), key=row.__getitem__)
        second = max(v for i, v in enumerate(row) if i != top)
        dist = max(0, math.ceil((row[top] - second) / 2) - 1)
        if dist + lap(2 * lam) > w_hat:
            out.append(top)
        else:
            out.append(-1)
            failed += 1
            if failed < t:
                w_hat = w + lap(lam)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--teachers", type=int, default=250)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--queries", type=int, default=1_000_000)
    p.add_argument("--loop-queries", type=int, default=50_000)
    p.add_argument("--epsilon", type=float, default=1000.0, help="large so that k = 250 answers (throughput only)")
    args = p.parse_args()

    gen = torch.Generator().manual_seed(0)
    counts = make_counts(args.teachers, args.queries, args.classes, gen)
    cal = calibrate(epsilon=args.epsilon, delta=1e-5, num_queries=args.queries, max_unstable=50, mode="tight")
    rel = StabilityReleaser(cal, generator=torch.Generator().manual_seed(1), noise="seeded")
    t0 = time.perf_counter()
    labels = rel.release(counts).labels
    vec_s = time.perf_counter() - t0
    vec_rate = args.queries / vec_s

    rows = counts[: args.loop_queries].tolist()
    t0 = time.perf_counter()
    loop_labels = loop_release(rows, cal.noise_scale, cal.threshold, cal.max_unstable, random.Random(1))
    loop_s = time.perf_counter() - t0
    loop_rate = len(rows) / loop_s

    answered = int((labels >= 0).sum())
    print(f"k={args.teachers} C={args.classes} m={args.queries} λ={cal.noise_scale:.3g} w={cal.threshold:.3g}")
    print(
        f"vectorised releaser: {vec_s:.3f} s for {args.queries} queries = {vec_rate:,.0f} queries/s "
        f"({answered} answered)"
    )
    print(
        f"per-query Python loop: {loop_s:.3f} s for {len(rows)} queries = {loop_rate:,.0f} queries/s "
        f"({sum(1 for x in loop_labels if x >= 0)} answered)"
    )
    print(f"ratio (vectorised / loop): {vec_rate / loop_rate:.1f}x")


if __name__ == "__main__":
    main()
