"""Benchmark: vectorised vs sequential teacher training on MNIST, and many cheap teachers.

Part 1 (``--part speed``): k = 50 MLP teachers (784-128-10) on record-keyed shards of the
60,000 MNIST training images, the same epochs in both modes, on the CPU. Each mode runs in its
own child process so that its peak resident memory (``ru_maxrss``) is its own. Prints wall
times, their ratio, peak memory (the process's; the part of it reached before training, i.e.
while loading the data; on Linux also the peak during training alone), mean teacher accuracy
and plurality-vote accuracy on the evaluation split (the last 1,000 test images, PATE's
protocol).

Timings on a shared machine. The 1-minute load average (which counts this benchmark too) is
printed before and after each mode; compare modes only within one invocation (they run back to
back). ``--threads`` sets ``torch.set_num_threads`` in both modes. With more runnable processes
than cores, every multi-threaded operation waits for its slowest thread, so on a loaded machine
either mode can run several times faster with ``--threads 1`` and the ratio at ``--threads 2``
mostly measures contention. The two modes use threads differently: the vectorised mode's
operations are large, while most of the sequential mode's are too small for PyTorch to split
(elementwise operations are parallelised from 32,768 elements).

Part 2 (``--part heads``): heads on public features — a whitened PCA fitted on the 9,000-image
public pool only — at k in {1000, 2000}: mean teacher accuracy and plurality-vote accuracy.

Usage (from the project root)::

    python recipes/benchmark_teachers.py --part speed --epochs 2
    python recipes/benchmark_teachers.py --part heads
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

import torch

from pate_stab.data import load_mnist, pate_split
from pate_stab.rng import seeded_generator, spawn_generators
from pate_stab.teachers import (
    ModelSpec,
    PublicFeatures,
    TrainConfig,
    partition_indices,
    record_keys_from_tensors,
    train_teachers,
)

ROOT = Path(__file__).resolve().parents[1]


def _accuracies(votes: torch.Tensor, labels: torch.Tensor, num_classes: int) -> tuple[float, float]:
    """Mean teacher accuracy and plurality-vote accuracy (ties to the smallest class)."""
    mean_teacher = (votes == labels).double().mean().item()
    counts = torch.nn.functional.one_hot(votes, num_classes).sum(0)  # (m, C)
    plurality = (counts.argmax(-1) == labels).double().mean().item()
    return mean_teacher, plurality


def _proc_status_mib(field: str) -> float | None:
    """``VmRSS`` (current) or ``VmHWM`` (peak) of this process in MiB, from /proc (Linux)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _reset_peak_rss() -> bool:
    """Set the kernel's peak-RSS mark (VmHWM) back to the current RSS (Linux >= 4.0)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return False
    return True


def run_mode(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads)
    splits = pate_split(load_mnist(args.data_dir))
    g_part, g_teach = spawn_generators(seeded_generator(args.seed), 2)
    x = splits.private.x.flatten(1)
    shards = partition_indices(
        record_keys_from_tensors(splits.private.x, splits.private.y), args.k, generator=g_part
    )
    spec = ModelSpec("mlp", (784,), 10, hidden=(128,))
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=1e-3)
    load_before = os.getloadavg()[0]
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gc.collect()
    rss_start = _proc_status_mib("VmRSS")
    reset = _reset_peak_rss()
    start, cpu_start = time.perf_counter(), time.process_time()
    teachers = train_teachers(
        x, splits.private.y, shards, spec=spec, config=config, generator=g_teach, mode=args.mode
    )
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    load_after = os.getloadavg()[0]
    training_peak = _proc_status_mib("VmHWM") if reset else None
    votes = teachers.predict_votes(splits.evaluation.x.flatten(1))
    mean_acc, vote_acc = _accuracies(votes, splits.evaluation.y, 10)
    return {
        "mode": args.mode,
        "k": args.k,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "threads": args.threads,
        "wall_s": wall,
        "cpu_s": cpu,
        # resetting VmHWM also resets ru_maxrss, hence the max with the peak before training
        "peak_rss_mib": max(peak_before, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "peak_rss_before_training_mib": peak_before,
        "rss_at_training_start_mib": rss_start,
        "peak_rss_during_training_mib": training_peak,
        "load_avg": [load_before, load_after],
        "mean_teacher_acc": mean_acc,
        "plurality_acc": vote_acc,
    }


def _memory(r: dict) -> str:
    text = f"peak RSS {r['peak_rss_mib']:.0f} MiB ({r['peak_rss_before_training_mib']:.0f} before training)"
    if r["peak_rss_during_training_mib"] is not None and r["rss_at_training_start_mib"] is not None:
        text += (
            f", during training {r['peak_rss_during_training_mib']:.0f} MiB"
            f" (from {r['rss_at_training_start_mib']:.0f} MiB at its start)"
        )
    return text


def speed(args: argparse.Namespace) -> None:
    results = {}
    for mode in ("vectorized", "sequential"):
        cmd = [sys.executable, __file__, "--part", "mode", "--mode", mode, "--k", str(args.k)]
        cmd += ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
        cmd += [
            "--threads",
            str(args.threads),
            "--seed",
            str(args.seed),
            "--data-dir",
            str(args.data_dir),
        ]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout
        results[mode] = json.loads(out.strip().splitlines()[-1])
        r = results[mode]
        print(
            f"{mode:>10}: k={r['k']} MLP teachers, {r['epochs']} epochs, batch {r['batch_size']}, "
            f"{r['threads']} threads: {r['wall_s']:.1f} s wall ({r['cpu_s']:.1f} s CPU), "
            f"{_memory(r)}, "
            f"load avg {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f} on {os.cpu_count()} CPUs, "
            f"mean teacher acc {r['mean_teacher_acc']:.4f}, plurality acc {r['plurality_acc']:.4f}"
        )
    ratio = results["sequential"]["wall_s"] / results["vectorized"]["wall_s"]
    cpu_ratio = results["sequential"]["cpu_s"] / results["vectorized"]["cpu_s"]
    print(f"speed-up (sequential / vectorized): wall {ratio:.1f}x, CPU time {cpu_ratio:.1f}x")


def heads(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads)
    splits = pate_split(load_mnist(args.data_dir))
    feats = PublicFeatures.fit(splits.public.x, dim=args.pca_dim, whiten=args.whiten)  # public only
    x_priv = feats.transform(splits.private.x)
    x_eval = feats.transform(splits.evaluation.x)
    for k in args.head_k:
        for kind in args.head_kinds:
            hidden = (64,) if kind == "mlp" else ()
            g_part, g_teach = spawn_generators(seeded_generator(args.seed), 2)
            shards = partition_indices(
                record_keys_from_tensors(splits.private.x, splits.private.y), k, generator=g_part
            )
            spec = ModelSpec(kind, (args.pca_dim,), 10, hidden=hidden or (1,))
            config = TrainConfig(epochs=args.head_epochs, batch_size=8, lr=1e-2, weight_decay=1e-3)
            start = time.perf_counter()
            teachers = train_teachers(
                x_priv, splits.private.y, shards, spec=spec, config=config, generator=g_teach
            )
            wall = time.perf_counter() - start
            votes = teachers.predict_votes(x_eval)
            mean_acc, vote_acc = _accuracies(votes, splits.evaluation.y, 10)
            sizes = torch.tensor([len(s) for s in shards]).double()
            print(
                f"heads on PCA-{args.pca_dim} (whiten={args.whiten}, public pool): "
                f"k={k} {kind}{list(hidden) or ''}, "
                f"shard size {sizes.mean():.0f}±{sizes.std():.0f}, {args.head_epochs} epochs: "
                f"train {wall:.1f} s, mean teacher acc {mean_acc:.4f}, plurality acc {vote_acc:.4f}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--part", choices=["speed", "heads", "mode"], default="speed")
    parser.add_argument("--mode", choices=["vectorized", "sequential"], default="vectorized")
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "mnist")
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pca-dim", type=int, default=50)
    parser.add_argument("--head-k", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--head-epochs", type=int, default=30)
    parser.add_argument("--whiten", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--head-kinds", nargs="+", default=["logistic", "mlp"])
    args = parser.parse_args()
    if args.part == "mode":
        print(json.dumps(run_mode(args)))
    elif args.part == "speed":
        speed(args)
    else:
        heads(args)


if __name__ == "__main__":
    main()
