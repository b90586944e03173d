"""Speed of the exact samplers behind secure noise, and of every aggregator releasing with them.

A comparison row releases m = 1000 queries of C = 10 vote counts: LNMax draws m·C discrete
Laplace values, GNMax m·C discrete Gaussians, Confident-GNMax m·(1 + C) discrete Gaussians; the
stability releaser runs the integer sparse vector query by query. Each is calibrated to the target
(ε, δ) for m queries (so the noise scales are the real ones), and timed on its own, best of
``--repeats`` runs, with random bits from the OS (``os.urandom``, read in one batch per round of
draws). The seeded float releases are timed beside them for reference.

    python recipes/bench/benchmark_secure_noise.py [--queries 1000] [--classes 10] [--epsilon 3] [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import time
from collections.abc import Callable

import torch

from pate_stab.aggregation import AggregatorSettings, make_releaser
from pate_stab.aggregation.baselines import ConfidentGNMax, GNMax, LNMax
from pate_stab.privacy.noise.secure import (
    SystemRandomSource,
    discrete_gaussian,
    discrete_laplace,
    exact_laplace_parameter,
)


def best_of(repeats: int, run: Callable[[], object], setup: Callable[[], object] | None = None) -> float:
    """Fastest of ``repeats`` timed calls of ``run`` (``setup``, untimed, before each)."""
    times = []
    for _ in range(repeats):
        state = setup() if setup is not None else None
        t0 = time.perf_counter()
        run() if state is None else run(state)  # type: ignore[call-arg]
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--queries", type=int, default=1000)
    p.add_argument("--classes", type=int, default=10)
    p.add_argument("--teachers", type=int, default=250)
    p.add_argument("--epsilon", type=float, default=3.0)
    p.add_argument("--delta", type=float, default=1e-5)
    p.add_argument("--repeats", type=int, default=5)
    args = p.parse_args()
    torch.set_num_threads(1)
    m, c, k = args.queries, args.classes, args.teachers
    gen = torch.Generator().manual_seed(0)
    counts = torch.multinomial(torch.full((c,), 1.0 / c), k * m, replacement=True, generator=gen)
    counts = torch.nn.functional.one_hot(counts.view(m, k), c).sum(1)  # (m, C) vote histograms
    per = 1000.0 / m  # seconds per 1000 queries

    lnmax = LNMax.calibrate(epsilon=args.epsilon, delta=args.delta, num_queries=m)
    gnmax = GNMax.calibrate(epsilon=args.epsilon, delta=args.delta, num_queries=m)
    conf = ConfidentGNMax.calibrate(epsilon=args.epsilon, delta=args.delta, num_queries=m, threshold=0.6 * k)
    src = SystemRandomSource()
    scale = 1 / exact_laplace_parameter(lnmax.noise_scale)
    print(f"m={m} C={c} k={k} ε={args.epsilon:g} δ={args.delta:g}; best of {args.repeats}; seconds per 1000 queries")
    print(f"b (LNMax) = {lnmax.noise_scale:.4g}, σ (GNMax) = {gnmax.sigma:.4g}, "
          f"σ1/σ2 (Confident-GNMax) = {conf.sigma1:.4g}/{conf.sigma2:.4g}")  # fmt: skip
    rows = [
        ("discrete Laplace, m·C draws", lambda: discrete_laplace(scale, m * c, source=src)),
        ("discrete Gaussian, m·C draws", lambda: discrete_gaussian(gnmax.sigma, m * c, source=src)),
        ("discrete Gaussian, m·(1 + C) draws", lambda: discrete_gaussian(conf.sigma2, m * (1 + c), source=src)),
    ]
    for label, run in rows:
        print(f"  {label:<44} {best_of(args.repeats, run) * per:8.4f} s")
    # the releases, calibrated once (not timed); the stability releaser at ε = 1000 on near-unanimous
    # votes so that it answers every query instead of halting (throughput only)
    agree = torch.zeros(m, c, dtype=torch.int64)
    agree[:, 0] = k
    for name in ("lnmax", "gnmax", "confident-gnmax", "stability"):
        eps, votes = (1000.0, agree) if name == "stability" else (args.epsilon, counts)
        for noise in ("secure", "seeded"):
            settings = AggregatorSettings(
                epsilon=eps, delta=args.delta, num_queries=m, num_teachers=k, max_unstable=10, noise=noise
            )
            built = make_releaser(name, settings, generator=torch.Generator().manual_seed(1))

            def setup(built: object = built) -> object:  # a fresh copy of the calibrated releaser
                return copy.deepcopy(built)

            def run(rel: object, votes: torch.Tensor = votes) -> object:
                return rel.release(votes)  # type: ignore[attr-defined]

            seconds = best_of(args.repeats, run, setup)  # type: ignore[arg-type]
            print(f"  {name + ' release, ' + noise + (' (ε = 1000)' if name == 'stability' else ''):<44} "
                  f"{seconds * per:8.4f} s")  # fmt: skip


if __name__ == "__main__":
    main()
