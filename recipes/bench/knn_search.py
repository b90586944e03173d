"""Private-kNN's neighbour search: 1,000 queries against 60,000 private records at the recipe's feature size.

Times the three parts of a release's votes (:mod:`pate_stab.aggregation.private_knn`) on random data of
MNIST's size and mnist_stab.yaml's feature dimension (scattering + public PCA to 95 % of the variance:
170 components): the secure coins (a fresh Poisson sample per query from the OS's CSPRNG), the blocked
pairwise distances (torch ``cdist`` pair by pair, so that one pair's distance does not depend on the other
records: :class:`~pate_stab.aggregation.private_knn.NeighbourIndex`) with the K nearest sampled records
(``topk`` and the tie rule), and the whole :meth:`NeighbourIndex.histograms`, for the exact grid search
that runs use (float64 matrix products of integer grid coordinates: exact whatever the blocking) and the
pairwise one. For comparison it also times
``cdist``'s matrix-product shortcut, which is faster but computes a pair's distance from whole-block
products (its last bits may depend on the block), and faiss where it is installed. Prints the load average
before and after: the machine is shared.

    python recipes/bench/knn_search.py [--queries 1000] [--records 60000] [--dim 170] [--neighbours 300]
"""

from __future__ import annotations

import argparse
import os
import time

import torch

from pate_stab.aggregation.private_knn import NeighbourIndex, draw_coins, exact_sampling_rate
from pate_stab.privacy.noise.secure import SystemRandomSource


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--records", type=int, default=60000)
    parser.add_argument("--dim", type=int, default=170)
    parser.add_argument("--neighbours", type=int, default=300)
    parser.add_argument("--sampling-rate", type=float, default=0.05)
    parser.add_argument("--block", type=int, default=128)
    args = parser.parse_args()
    print(f"load average before: {os.getloadavg()}; torch threads: {torch.get_num_threads()}")
    g = torch.Generator().manual_seed(0)
    x = torch.randn(args.records, args.dim, generator=g)
    y = torch.randint(0, 10, (args.records,), generator=g)
    q = torch.randn(args.queries, args.dim, generator=g)
    rate = exact_sampling_rate(args.sampling_rate)
    source = SystemRandomSource()

    t0 = time.perf_counter()
    coins = draw_coins(args.queries, args.records, rate, source=source)
    t_coins = time.perf_counter() - t0
    print(f"coins ({args.queries} × {args.records}, γ = {float(rate):.6f}): {t_coins:.1f} s")

    for mode in ("donot_use_mm_for_euclid_dist", "use_mm_for_euclid_dist"):
        t0 = time.perf_counter()
        for start in range(0, args.queries, args.block):
            torch.cdist(q[start : start + args.block], x, compute_mode=mode)
        print(f"cdist {mode}: {time.perf_counter() - t0:.1f} s")

    for name, resolution in (("exact grid (runs)", NeighbourIndex.public_resolution(q)), ("pairwise cdist", None)):
        index = NeighbourIndex(x, y, num_classes=10, block=args.block, resolution=resolution)
        offset = [0]

        def block_coins(b: int, offset: list[int] = offset) -> torch.Tensor:
            out = coins[offset[0] : offset[0] + b]
            offset[0] += b
            return out

        t0 = time.perf_counter()
        votes = index.histograms(q, block_coins, num_neighbours=args.neighbours)
        t_votes = time.perf_counter() - t0
        assert bool((votes.sum(dim=1) == args.neighbours).all())
        total = t_coins + t_votes
        print(
            f"{name}: votes (distances + K nearest sampled, K = {args.neighbours}): {t_votes:.1f} s; with the "
            f"coins, {args.queries} queries against {args.records} records, d = {args.dim}: {total:.1f} s"
        )
    try:
        import faiss  # type: ignore[import-not-found]  # noqa: F401
    except ImportError:
        print("faiss: not installed")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
