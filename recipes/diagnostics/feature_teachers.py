"""Teacher accuracy on privacy-free features: many tiny-shard teachers on MNIST (PATE's split).

For each feature kind — fitted on the 9,000-image public pool only, or on nothing — the
features of all 70,000 images are computed once and cached under ``checkpoints/features/``
(git-ignored), the 60,000 private images are split into k record-keyed shards, k teachers are
built (one per shard) and the script prints the mean teacher accuracy and the plurality-vote
accuracy on the 1,000-image evaluation split and on the first ``--pool-queries`` points of the
public pool, for every k. The pool labels are read for reporting only; no teacher or feature
map sees them.

Feature kinds: ``pca`` (PCA-50 whitened, pixels), ``scattering`` (J = 2, L = 8, standardised,
PCA-300), ``ssl`` (SimCLR encoder trained on the public images, standardised embedding).

Heads: ``logistic`` / ``mlp`` (the project's vectorised :func:`pate_stab.teachers.train_teachers`)
and ``propagate`` (label propagation over a k-nearest-neighbour graph of the public pool:
:func:`propagation_teachers`, :mod:`pate_stab.features.propagation`).

The ``propagate`` head's settings are fixed in advance from Iscen et al. (2019) and their code
(k = 50, γ = 3, α = 0.99, 20 iterations, no PCA before the graph), as in ``TransferConfig``. The
``logistic`` / ``mlp`` head settings (300 epochs, lr 0.01, batch 16, weight decay 0.01) were
chosen by comparing a handful of settings on the pool accuracy (the first 1,000 pool points):
a measurement of what such heads can reach, not settings a deployment could use (it has no pool
labels); no recipe of the main job uses them.

Usage (from the project root)::

    nice -n 10 python recipes/diagnostics/feature_teachers.py            # pca, scattering, ssl; k = 250, 1000, 2000
    nice -n 10 python recipes/diagnostics/feature_teachers.py --features ssl --ssl-epochs 60 --heads propagate
"""

from __future__ import annotations

import argparse
import hashlib
import json
import time
from pathlib import Path
from typing import Any

import torch

from pate_stab.data import load_mnist, pate_split
from pate_stab.data.images import PateSplits
from pate_stab.features import PCAFeatures, ScatteringFeatures, SSLConfig, SSLFeatures
from pate_stab.features.propagation import PoolGraph, kernel_votes
from pate_stab.models import ModelSpec
from pate_stab.rng import child_seed, seeded_generator, spawn_generators
from pate_stab.teachers import (
    TrainConfig,
    partition_indices,
    record_keys_from_tensors,
    shard_of_records,
    train_teachers,
)

ROOT = Path(__file__).resolve().parents[2]


def _digest(options: dict[str, Any]) -> str:
    return hashlib.sha1(json.dumps(options, sort_keys=True).encode()).hexdigest()[:10]


def build_extractor(kind: str, args: argparse.Namespace, cache: Path, generator: torch.Generator):
    """The extractor for ``kind`` and the options that identify its cache file."""
    if kind == "pca":
        options = {"dim": args.pca_dim, "whiten": True}
        return PCAFeatures(**options), options
    if kind == "scattering":
        options = {"J": 2, "L": 8, "standardize": True, "pca_dim": args.scattering_pca, "whiten": False}
        return ScatteringFeatures(**options, progress=True), options
    if kind == "ssl":
        config = SSLConfig(epochs=args.ssl_epochs)
        options = {"config": config.to_dict(), "standardize": True, "pca_dim": None, "seed": args.seed}
        ckpt = cache / f"ssl_encoder_{_digest(options)}.pt"
        return SSLFeatures(config, generator=generator, checkpoint=ckpt, standardize=True, progress=True), options
    raise ValueError(f"unknown feature kind {kind!r}")


def features(kind: str, splits: PateSplits, args: argparse.Namespace, generator: torch.Generator) -> dict[str, Any]:
    """Features of the private, public and evaluation images; fitted on ``splits.public.x`` only."""
    cache = ROOT / "checkpoints" / "features" / "mnist"
    cache.mkdir(parents=True, exist_ok=True)
    extractor, options = build_extractor(kind, args, cache, generator)
    path = cache / f"{kind}_{_digest(options)}.pt"
    if path.is_file():
        print(f"[{kind}] cached features: {path.relative_to(ROOT)}")
        return torch.load(path, weights_only=False)
    start = time.perf_counter()
    extractor.fit(splits.public.x)  # public pool only, no labels
    fit_s = time.perf_counter() - start
    out = {
        "private": extractor.transform(splits.private.x),
        "public": extractor.transform(splits.public.x),
        "evaluation": extractor.transform(splits.evaluation.x),
        "meta": extractor.meta,
        "state": extractor.state_dict(),
        "fit_s": fit_s,
        "total_s": time.perf_counter() - start,
    }
    torch.save(out, path)
    print(f"[{kind}] features computed in {out['total_s']:.0f} s (fit {fit_s:.0f} s): {path.relative_to(ROOT)}")
    return out


def accuracies(votes: torch.Tensor, labels: torch.Tensor, num_classes: int = 10) -> tuple[float, float]:
    """Mean teacher accuracy and plurality-vote accuracy (ties to the smallest class)."""
    mean_teacher = (votes == labels).double().mean().item()
    counts = torch.nn.functional.one_hot(votes, num_classes).sum(0)  # (m, C)
    return mean_teacher, (counts.argmax(-1) == labels).double().mean().item()


def gradient_teachers(
    kind: str,
    feats: dict[str, Any],
    y: torch.Tensor,
    shards: list[torch.Tensor],
    queries: dict[str, torch.Tensor],
    args: argparse.Namespace,
    generator: torch.Generator,
) -> dict[str, torch.Tensor]:
    """k logistic / MLP heads with the project's vectorised trainer; their votes on each query set."""
    x = feats["private"]
    spec = ModelSpec(kind, (x.shape[1],), 10, hidden=tuple(args.hidden) if kind == "mlp" else (1,))
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr, weight_decay=args.weight_decay)
    teachers = train_teachers(x, y, shards, spec=spec, config=config, generator=generator, accelerator="cpu")
    return {name: teachers.predict_votes(q) for name, q in queries.items()}


def propagation_teachers(
    feats: dict[str, Any],
    y: torch.Tensor,
    shard_of: torch.Tensor,
    k: int,
    queries: dict[str, torch.Tensor],
    args: argparse.Namespace,
) -> dict[str, torch.Tensor]:
    """Label propagation over the public pool's kNN graph (:mod:`pate_stab.features.propagation`):
    teacher j votes by the mean propagated kernel to its own records of each class."""
    graph = PoolGraph(
        num_neighbors=args.neighbors, power=args.power, alpha=args.alpha, steps=args.steps, pca_dim=args.graph_dim
    )
    graph.fit(feats["public"])  # public features only
    return {
        name: kernel_votes(graph.kernel(feats["private"], q), y, shard_of, num_teachers=k, num_classes=10)
        for name, q in queries.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data-dir", default="/work/shared/data/mnist")
    parser.add_argument("--features", nargs="+", default=["pca", "scattering", "ssl"])
    parser.add_argument("--heads", nargs="+", default=["logistic", "propagate"])
    parser.add_argument("--teachers", nargs="+", type=int, default=[250, 1000, 2000])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pca-dim", type=int, default=50)
    parser.add_argument("--scattering-pca", type=int, default=300)
    parser.add_argument("--ssl-epochs", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=300, help="logistic/mlp heads")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--weight-decay", type=float, default=1e-2)
    parser.add_argument("--hidden", nargs="+", type=int, default=[64])
    # propagate: Iscen et al. 2019's settings, fixed in advance (see TransferConfig's graph_* fields)
    parser.add_argument("--neighbors", type=int, default=50, help="propagate: kNN graph degree")
    parser.add_argument("--power", type=float, default=3.0, help="propagate: affinity exponent")
    parser.add_argument("--alpha", type=float, default=0.99, help="propagate: propagation weight")
    parser.add_argument("--steps", type=int, default=20, help="propagate: terms of the series")
    parser.add_argument(
        "--graph-dim", type=int, default=None, help="propagate: public PCA before the graph (default: none)"
    )
    parser.add_argument(
        "--pool-queries",
        type=int,
        default=1000,
        help="also report accuracy on the first N public-pool points (their labels are used for reporting only)",
    )
    parser.add_argument("--report", default=None, help="JSON file for the table (default: none)")
    args = parser.parse_args()
    torch.set_num_threads(1)

    start = time.perf_counter()
    splits = pate_split(load_mnist(args.data_dir))
    g_ssl, g_partition, g_teachers = spawn_generators(seeded_generator(args.seed), 3)
    partition_seed, teacher_seed = child_seed(g_partition), child_seed(g_teachers)
    keys = record_keys_from_tensors(splits.private.x, splits.private.y)
    # partition_indices(keys, k, g) groups the records by shard_of_records(keys, k, g) (same generator draw)
    shard_of = {
        k: shard_of_records(keys, k, generator=torch.Generator().manual_seed(partition_seed)) for k in args.teachers
    }
    shards = {
        k: partition_indices(keys, k, generator=torch.Generator().manual_seed(partition_seed)) for k in args.teachers
    }
    targets = {"pool": splits.public.y[: args.pool_queries], "evaluation": splits.evaluation.y}
    rows = []
    for kind in args.features:
        feats = features(kind, splits, args, g_ssl)
        for head in args.heads:
            for k in args.teachers:
                t0 = time.perf_counter()
                g = torch.Generator().manual_seed(teacher_seed)
                queries = {"pool": feats["public"][: args.pool_queries], "evaluation": feats["evaluation"]}
                if head in ("logistic", "mlp"):
                    votes = gradient_teachers(head, feats, splits.private.y, shards[k], queries, args, g)
                elif head == "propagate":
                    votes = propagation_teachers(feats, splits.private.y, shard_of[k], k, queries, args)
                else:
                    raise ValueError(f"unknown head {head!r}")
                pool_teacher, pool_plurality = accuracies(votes["pool"], targets["pool"])
                mean_teacher, plurality = accuracies(votes["evaluation"], targets["evaluation"])
                sizes = torch.tensor([len(s) for s in shards[k]]).double()
                row = {
                    "features": kind,
                    "dim": int(feats["private"].shape[1]),
                    "head": head,
                    "k": k,
                    "shard_size": f"{sizes.mean():.0f}±{sizes.std():.0f}",
                    "pool_mean_teacher": round(pool_teacher, 4),
                    "pool_plurality": round(pool_plurality, 4),
                    "mean_teacher": round(mean_teacher, 4),
                    "plurality": round(plurality, 4),
                    "seconds": round(time.perf_counter() - t0, 1),
                }
                rows.append(row)
                print(" | ".join(f"{key} {value}" for key, value in row.items()), flush=True)
    total = time.perf_counter() - start
    print(
        f"\n| features | dim | head | k | shard size | pool[:{args.pool_queries}] mean teacher | pool plurality "
        "| eval mean teacher | eval plurality | s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['features']} | {r['dim']} | {r['head']} | {r['k']} | {r['shard_size']} | "
            f"{r['pool_mean_teacher']:.4f} | {r['pool_plurality']:.4f} | {r['mean_teacher']:.4f} | "
            f"{r['plurality']:.4f} | {r['seconds']} |"
        )
    print(
        f"\nwall time {total:.0f} s; gradient heads: epochs {args.epochs}, batch {args.batch_size}, lr {args.lr}, "
        f"weight decay {args.weight_decay}; propagate: neighbors {args.neighbors}, power {args.power}, "
        f"alpha {args.alpha}, steps {args.steps}, graph PCA {args.graph_dim}"
    )
    if args.report:
        Path(args.report).write_text(json.dumps({"args": vars(args), "rows": rows, "wall_s": total}, indent=1))


if __name__ == "__main__":
    main()
