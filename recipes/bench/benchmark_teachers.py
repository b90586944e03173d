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
back). ``--threads`` sets ``torch.set_num_threads`` in both modes; several values (``--threads 1
2``) run both modes at each and print the ratio at each thread count and the ratio of the two
modes each at its own fastest thread count. With more runnable processes than cores, every
multi-threaded operation waits for its slowest thread, so on a loaded machine either mode can
run several times faster with ``--threads 1`` and the ratio at ``--threads 2`` mostly measures
contention. The two modes use threads differently: the vectorised mode's operations are large,
while most of the sequential mode's are too small for PyTorch to split (elementwise operations
are parallelised from 32,768 elements), so extra threads mostly add synchronisation to it.

Part 1b (``--part cnn``): k = 250 of PATE's MNIST CNN teachers (two 5×5 convolutions, 64 and
128 filters; fully connected 384 and 192, as ``recipes/configs/mnist_gpu.yaml``), on the GPU: wall time
to train all of them in the vectorised mode (the issue's goal: under 2 minutes) and its ratio to
the sequential mode, with peak GPU memory and the teachers' accuracies. Without a GPU it stops
with a message, unless ``--accelerator cpu`` is given (a CPU run at PATE's widths takes hours;
``--channels``, ``--hidden``, ``--subsample`` make small smoke runs). The sequential mode is
timed on the first ``--sequential-teachers`` teachers (default: all k) and, when that is fewer
than k, its time for all k is extrapolated linearly and printed as an estimate.

Part 2 (``--part heads``): heads on public features — a whitened PCA fitted on the 9,000-image
public pool only — at k in {1000, 2000}: mean teacher accuracy and plurality-vote accuracy.

Usage (from the project root)::

    python recipes/bench/benchmark_teachers.py --part speed --epochs 2
    python recipes/bench/benchmark_teachers.py --part speed --epochs 2 --threads 1 2
    python recipes/bench/benchmark_teachers.py --part cnn          # needs a GPU
    python recipes/bench/benchmark_teachers.py --part heads
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
from pate_stab.features import PublicFeatures
from pate_stab.models import ModelSpec
from pate_stab.rng import seeded_generator, spawn_generators
from pate_stab.teachers import TrainConfig, partition_indices, record_keys_from_tensors, train_teachers

ROOT = Path(__file__).resolve().parents[2]


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


def _cuda_sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def run_mode(args: argparse.Namespace) -> dict:
    torch.set_num_threads(args.threads[0])
    splits = pate_split(load_mnist(args.data_dir))
    private = splits.private
    x, y = private.x, private.y
    if args.subsample is not None:  # smoke runs only: the first records of the private split
        x, y = x[: args.subsample], y[: args.subsample]
    g_part, g_teach = spawn_generators(seeded_generator(args.seed), 2)
    shards = partition_indices(record_keys_from_tensors(x, y), args.k, generator=g_part)
    if args.model == "cnn":
        spec = ModelSpec("cnn", (1, 28, 28), 10, hidden=tuple(args.hidden), channels=tuple(args.channels))
        x_eval = splits.evaluation.x
    else:
        spec = ModelSpec("mlp", (784,), 10, hidden=(128,))
        x, x_eval = x.flatten(1), splits.evaluation.x.flatten(1)
    config = TrainConfig(epochs=args.epochs, batch_size=args.batch_size, lr=args.lr)
    # the sequential mode may be timed on the first teachers only (extrapolated by the caller)
    chosen = None
    if args.mode == "sequential" and args.sequential_teachers is not None:
        chosen = list(range(min(args.sequential_teachers, args.k)))
    load_before = os.getloadavg()[0]
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    gc.collect()
    rss_start = _proc_status_mib("VmRSS")
    reset = _reset_peak_rss()
    gpu = args.accelerator != "cpu" and torch.cuda.is_available()
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    _cuda_sync()
    start, cpu_start = time.perf_counter(), time.process_time()
    teachers = train_teachers(
        x,
        y,
        shards,
        spec=spec,
        config=config,
        generator=g_teach,
        mode=args.mode,
        teacher_indices=chosen,
        accelerator=args.accelerator,
    )
    _cuda_sync()
    wall, cpu = time.perf_counter() - start, time.process_time() - cpu_start
    load_after = os.getloadavg()[0]
    training_peak = _proc_status_mib("VmHWM") if reset else None
    gpu_peak = torch.cuda.max_memory_allocated() / 2**20 if gpu else None
    votes = teachers.predict_votes(x_eval)
    mean_acc, vote_acc = _accuracies(votes, splits.evaluation.y, 10)
    return {
        "mode": args.mode,
        "model": args.model,
        "k": args.k,
        "teachers_trained": teachers.num_teachers,
        "device": torch.cuda.get_device_name() if gpu else "cpu",
        "peak_gpu_mib": gpu_peak,
        "epochs": args.epochs,
        "batch_size": args.batch_size,
        "threads": args.threads[0],
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


def _run_child(args: argparse.Namespace, mode: str, threads: int, model: str = "mlp") -> dict:
    cmd = [sys.executable, __file__, "--part", "mode", "--mode", mode, "--k", str(args.k)]
    cmd += ["--epochs", str(args.epochs), "--batch-size", str(args.batch_size)]
    cmd += ["--threads", str(threads), "--seed", str(args.seed), "--data-dir", str(args.data_dir)]
    cmd += ["--model", model, "--lr", str(args.lr), "--accelerator", args.accelerator]
    cmd += ["--channels", *map(str, args.channels), "--hidden", *map(str, args.hidden)]
    if args.subsample is not None:
        cmd += ["--subsample", str(args.subsample)]
    if args.sequential_teachers is not None:
        cmd += ["--sequential-teachers", str(args.sequential_teachers)]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if proc.returncode != 0:
        sys.exit(f"the {mode} run failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cnn(args: argparse.Namespace) -> None:
    if args.accelerator != "cpu" and not torch.cuda.is_available():
        sys.exit(
            "--part cnn times k CNN teachers on a GPU and none is visible here "
            "(torch.cuda.is_available() is False); pass --accelerator cpu to run it on the CPU"
        )
    results = {}
    for mode in ("vectorized", "sequential"):
        r = results[mode] = _run_child(args, mode, args.threads[0], model="cnn")
        gpu = f", peak GPU memory {r['peak_gpu_mib']:.0f} MiB" if r["peak_gpu_mib"] else ""
        print(
            f"{mode:>10}: {r['teachers_trained']} of k={r['k']} CNN teachers "
            f"(channels {args.channels}, hidden {args.hidden}), {r['epochs']} epochs, "
            f"batch {r['batch_size']}, on {r['device']}: {r['wall_s']:.1f} s wall{gpu}, "
            f"mean teacher acc {r['mean_teacher_acc']:.4f}"
            + (f", plurality acc {r['plurality_acc']:.4f}" if mode == "vectorized" else ""),
            flush=True,
        )
    vec, seq = results["vectorized"], results["sequential"]
    seq_all = seq["wall_s"] * vec["teachers_trained"] / seq["teachers_trained"]
    estimate = seq["teachers_trained"] < vec["teachers_trained"]
    print(
        f"all {vec['teachers_trained']} teachers: vectorized {vec['wall_s']:.1f} s "
        f"({vec['wall_s'] / 60:.2f} min); sequential {seq_all:.1f} s"
        + (f" (estimate: {seq['teachers_trained']} teachers timed, scaled linearly)" if estimate else "")
        + f"; speed-up {seq_all / vec['wall_s']:.1f}x"
    )


def speed(args: argparse.Namespace) -> None:
    results: dict[tuple[str, int], dict] = {}
    for threads in args.threads:
        for mode in ("vectorized", "sequential"):
            r = results[mode, threads] = _run_child(args, mode, threads)
            print(
                f"{mode:>10}: k={r['k']} MLP teachers, {r['epochs']} epochs, "
                f"batch {r['batch_size']}, {r['threads']} threads: {r['wall_s']:.1f} s wall "
                f"({r['cpu_s']:.1f} s CPU), {_memory(r)}, "
                f"load avg {r['load_avg'][0]:.1f}->{r['load_avg'][1]:.1f} on {os.cpu_count()} CPUs, "
                f"mean teacher acc {r['mean_teacher_acc']:.4f}, "
                f"plurality acc {r['plurality_acc']:.4f}",
                flush=True,
            )
        seq, vec = results["sequential", threads], results["vectorized", threads]
        print(
            f"speed-up at {threads} threads (sequential / vectorized): "
            f"wall {seq['wall_s'] / vec['wall_s']:.1f}x, CPU time {seq['cpu_s'] / vec['cpu_s']:.1f}x",
            flush=True,
        )
    if len(args.threads) > 1:
        best = {
            mode: min((r for (m, _), r in results.items() if m == mode), key=lambda r: r["wall_s"])
            for mode in ("vectorized", "sequential")
        }
        seq, vec = best["sequential"], best["vectorized"]
        print(
            f"speed-up, each mode at its fastest thread count: sequential {seq['wall_s']:.1f} s "
            f"({seq['threads']} threads) / vectorized {vec['wall_s']:.1f} s "
            f"({vec['threads']} threads) = {seq['wall_s'] / vec['wall_s']:.1f}x"
        )


def heads(args: argparse.Namespace) -> None:
    torch.set_num_threads(args.threads[0])
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
            teachers = train_teachers(x_priv, splits.private.y, shards, spec=spec, config=config, generator=g_teach)
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["speed", "cnn", "heads", "mode"], default="speed")
    parser.add_argument("--mode", choices=["vectorized", "sequential"], default="vectorized")
    parser.add_argument("--model", choices=["mlp", "cnn"], default="mlp", help=argparse.SUPPRESS)
    parser.add_argument("--data-dir", type=Path, default=ROOT.parent / "shared" / "data" / "mnist")
    parser.add_argument("--k", type=int, default=None, help="teachers (speed: 50, cnn: 250)")
    parser.add_argument("--epochs", type=int, default=None, help="epochs (speed: 2, cnn: 40)")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--accelerator", default="auto", help="cnn: 'auto' (a GPU), or 'cpu'")
    parser.add_argument("--channels", type=int, nargs=2, default=[64, 128], help="cnn filters")
    parser.add_argument("--hidden", type=int, nargs="+", default=[384, 192], help="cnn FC widths")
    parser.add_argument("--subsample", type=int, default=None, help="use the first N private records (smoke runs)")
    parser.add_argument(
        "--sequential-teachers",
        type=int,
        default=None,
        help="cnn: time the sequential mode on this many teachers and extrapolate to k",
    )
    parser.add_argument("--threads", type=int, nargs="+", default=[2], help="one or more thread counts (speed)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--pca-dim", type=int, default=50)
    parser.add_argument("--head-k", type=int, nargs="+", default=[1000, 2000])
    parser.add_argument("--head-epochs", type=int, default=30)
    parser.add_argument("--whiten", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--head-kinds", nargs="+", default=["logistic", "mlp"])
    args = parser.parse_args()
    is_cnn = args.part == "cnn" or args.model == "cnn"
    if args.k is None:
        args.k = 250 if is_cnn else 50
    if args.epochs is None:
        args.epochs = 40 if is_cnn else 2
    if args.part == "mode":
        print(json.dumps(run_mode(args)))
    elif args.part == "speed":
        if args.accelerator != "auto":
            parser.error("--part speed is the CPU benchmark; --accelerator is for --part cnn")
        args.accelerator = "cpu"
        speed(args)
    elif args.part == "cnn":
        cnn(args)
    else:
        heads(args)


if __name__ == "__main__":
    main()
