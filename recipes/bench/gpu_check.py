"""A GPU check that fits a short session on a GPU machine: one table and one JSON file.

Parts, run one after the other (each in its own process, each under a time cap; a part that
reaches its cap is reported as such, with what it finished):

1. versions (Python, torch, torchvision, lightning, opacus, CUDA) and the device's name;
2. the fast tests whose outcome depends on the accelerator (``pytest -m "accelerator or gpu"``);
3. the MNIST stability GPU transfer at ε = 3 (``recipes/configs/mnist_stab_gpu.yaml``) end to end, with
   its stage lines (``stage <name>: <s> s on <device>``, parsed into the table);
4. 250 of PATE's CNN teachers, vectorised, against a few sequential ones whose time is scaled
   linearly to 250 (``recipes/bench/benchmark_teachers.py --part cnn``; marked as an extrapolation);
5. the FixMatch GPU preset's steps per second on Fashion-MNIST (``recipes/diagnostics/fixmatch_augment.py``,
   fewer steps than the preset's 20,000), with the full preset's time extrapolated (marked);
6. the DP-SGD CNN on Fashion-MNIST at ε = 3 (``pate-stab compare --direct dpsgd-cnn``).

The caps add up to about 8 minutes (``--cap PART=SECONDS`` changes one). ``--smoke`` runs the same
parts on the CPU on tiny data (a few hundred images of ``../shared/data``, or random images where
that folder is absent; 20 teachers, a handful of steps and one DP-SGD epoch) in under 2 minutes;
``tests/test_gpu_check.py`` runs it in the fast test tier. Its figures check the path, not speed.

The transfer and DP-SGD parts read private data and their accuracies are private-side figures of
a benchmark, not results to publish; the run folders are written under ``--workdir`` (a temporary
folder by default, removed at the end).

Usage (from the project root)::

    python recipes/bench/gpu_check.py                      # on a GPU machine: about 8 minutes
    python recipes/bench/gpu_check.py --smoke              # anywhere: under 2 minutes on the CPU
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT.parent / "shared" / "data"
STAGE = re.compile(r"^stage (.+): (\d+\.\d) s on (.+)$")

# seconds per part on the GPU (about 8 minutes in all) and with --smoke
CAPS = {"tests": 45, "transfer": 150, "teachers": 110, "fixmatch": 40, "dpsgd": 120}
SMOKE_CAPS = {"tests": 60, "transfer": 90, "teachers": 60, "fixmatch": 60, "dpsgd": 60}
FIXMATCH_GPU_STEPS = 20_000  # FixMatchConfig.gpu()'s steps
FIXMATCH_TIMED_STEPS = 1_500
N_PRIVATE = 300  # --smoke: private images


def versions() -> dict[str, Any]:
    import lightning
    import torch
    import torchvision

    try:
        import opacus

        opacus_version = opacus.__version__
    except ImportError:  # pragma: no cover - a dependency
        opacus_version = None
    cuda = torch.cuda.is_available()
    return {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "lightning": lightning.__version__,
        "opacus": opacus_version,
        "cuda": torch.version.cuda,
        "device": torch.cuda.get_device_name(0) if cuda else f"cpu ({os.cpu_count()} cores)",
        "cuda_available": cuda,
    }


def run(cmd: list[str], cap: float, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``cmd`` from the project root for at most ``cap`` seconds; its output, exit code and time."""
    start = time.perf_counter()
    full_env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        done = subprocess.run(cmd, cwd=ROOT, env=full_env | (env or {}), capture_output=True, text=True, timeout=cap)
        out, err, code, status = done.stdout, done.stderr, done.returncode, "ok" if done.returncode == 0 else "failed"
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        code, status = None, f"cap of {cap:.0f} s reached"
    return {"cmd": cmd, "stdout": out, "stderr": err, "code": code, "status": status,
            "seconds": time.perf_counter() - start}  # fmt: skip


def _write_idx(path: Path, array: np.ndarray) -> None:
    """An idx file (LeCun et al.'s format, gzip-compressed) of a uint8 array."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(int(d).to_bytes(4, "big") for d in array.shape)
    with gzip.open(path, "wb", compresslevel=1) as fh:
        fh.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def tiny_data(folder: Path) -> dict[str, Path]:
    """Small image sets for ``--smoke``: ``mnist`` and ``fashion`` idx folders (PATE's split needs
    more than 9,000 test images: 9,100; 300 training images) and ``.npz`` files of the three
    sets of a run (300 private, 200 pool, 100 evaluation images). Taken from ``../shared/data``
    where it is present, random images with random labels otherwise (the path is what is checked)."""
    import torch

    from pate_stab.data import load_fashion_mnist, load_mnist

    rng = np.random.default_rng(0)
    out: dict[str, Path] = {}
    for name, loader, source in (("mnist", load_mnist, DATA / "mnist"), ("fashion", load_fashion_mnist,
                                                                          DATA / "fashion-mnist")):  # fmt: skip
        try:
            data = loader(source)
            keep = torch.cat([torch.arange(9000), torch.arange(len(data.test.y) - 100, len(data.test.y))])
            train_x = (data.train.x[:N_PRIVATE, 0] * 255).round().to(torch.uint8).numpy()
            train_y, test_y = data.train.y[:N_PRIVATE].numpy(), data.test.y[keep].numpy()
            test_x = (data.test.x[keep, 0] * 255).round().to(torch.uint8).numpy()
        except (FileNotFoundError, ValueError):
            train_x, train_y = rng.integers(0, 256, (N_PRIVATE, 28, 28)), rng.integers(0, 10, N_PRIVATE)
            test_x, test_y = rng.integers(0, 256, (9100, 28, 28)), rng.integers(0, 10, 9100)
        d = folder / name
        d.mkdir(parents=True, exist_ok=True)
        _write_idx(d / "train-images-idx3-ubyte.gz", train_x)
        _write_idx(d / "train-labels-idx1-ubyte.gz", train_y)
        _write_idx(d / "t10k-images-idx3-ubyte.gz", test_x)
        _write_idx(d / "t10k-labels-idx1-ubyte.gz", test_y)
        out[name] = d
        for split, (x, y) in {"private": (train_x, train_y), "public": (test_x[:200], test_y[:200]),
                              "evaluation": (test_x[-100:], test_y[-100:])}.items():  # fmt: skip
            path = folder / f"{name}_{split}.npz"
            arrays = {"x": (x[:, None] / 255.0).astype(np.float32)}
            if split != "public":  # the public pool is unlabelled input
                arrays["y"] = y.astype(np.int64)
            np.savez(path, **arrays)
            out[f"{name}_{split}"] = path
    return out


def _files_settings(data: dict[str, Path], name: str) -> list[str]:
    """``--set`` options that point a run at the tiny ``.npz`` sets (``dataset: files``); DP-SGD's public
    size of the private set is a round figure above its expected batch (512), as a user would give one."""
    return ["--set", "dataset=files", "--set", "data_dir=null", "--set", f"private={data[name + '_private']}",
            "--set", f"public={data[name + '_public']}", "--set", f"evaluation={data[name + '_evaluation']}",
            "--set", "classes=10", "--set", "image_shape=[1,28,28]", "--set", "private_size_hint=1000"]  # fmt: skip


def part_tests(args: argparse.Namespace, cap: float) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", "accelerator or gpu"]
    # --smoke: one of them, on the CPU, in the pytest process (workers would cost more start-up than the test)
    smoke = ["-n", "0", "tests/teachers/test_training.py", "-k", "vectorized_matches_sequential"]
    cmd += smoke if args.smoke else ["tests"]
    r = run(cmd, cap, env={"OMP_NUM_THREADS": "1"} if args.smoke else None)
    summary = next((line for line in reversed(r["stdout"].splitlines()) if " passed" in line or " failed" in line), "")
    return {**r, "result": summary.strip("= ") or r["status"]}


def part_transfer(args: argparse.Namespace, cap: float, data: dict[str, Path] | None) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "pate_stab.cli", "transfer", "--config", "recipes/configs/mnist_stab_gpu.yaml",
           "--checkpoints-dir", str(args.workdir / "runs"), "--run-name", "gpu_check_mnist", "--epsilon", "3",
           "--no-progress"]  # fmt: skip
    if args.smoke:
        assert data is not None
        # random tiny data: the release may answer nothing; the smoke run checks the path, not the accuracy
        cmd += ["--accelerator", "cpu", "--num-teachers", "20", "--num-queries", "40", "--allow-unanswerable",
                "--max-unstable", "3", "--allow-empty-student",
                "--set", "fixmatch_steps=5", "--set", "graph_neighbors=10", "--set", "selection_round_size=10",
                *_files_settings(data, "mnist")]  # fmt: skip
    else:
        cmd += ["--set", f"data_dir={args.data_dir / 'mnist'}"]
    r = run(cmd, cap)
    stages = [{"stage": m.group(1), "seconds": float(m.group(2)), "device": m.group(3)}
              for m in map(STAGE.match, r["stdout"].splitlines()) if m]  # fmt: skip
    acc = re.search(r"student test accuracy\s+(\S+)", r["stdout"])
    result = f"student acc {acc.group(1)}" if acc else r["status"]
    return {**r, "stages": stages, "result": result}


def part_teachers(args: argparse.Namespace, cap: float, data: dict[str, Path] | None) -> dict[str, Any]:
    cmd = [sys.executable, "recipes/bench/benchmark_teachers.py", "--part", "cnn", "--sequential-teachers", "4"]
    if args.smoke:
        assert data is not None
        cmd += ["--accelerator", "cpu", "--k", "6", "--epochs", "1", "--channels", "2", "4", "--hidden", "8",
                "--sequential-teachers", "2", "--threads", "1", "--data-dir", str(data["mnist"])]  # fmt: skip
    else:
        cmd += ["--data-dir", str(args.data_dir / "mnist")]
    r = run(cmd, cap)
    m = re.search(r"all (\d+) teachers: vectorized ([\d.]+) s .*?; sequential ([\d.]+) s(.*?); speed-up ([\d.]+)x",
                  r["stdout"])  # fmt: skip
    if not m:
        return {**r, "result": r["status"]}
    k, vec, seq, note, speedup = m.groups()
    return {**r, "k": int(k), "vectorized_s": float(vec), "sequential_s": float(seq), "speedup": float(speedup),
            "extrapolated": "estimate" in note,
            "result": f"k={k}: vectorised {float(vec):.1f} s, sequential {float(seq):.0f} s"
                      f"{' (extrapolated)' if 'estimate' in note else ''}, {float(speedup):.1f}x"}  # fmt: skip


def part_fixmatch(args: argparse.Namespace, cap: float, data: dict[str, Path] | None) -> dict[str, Any]:
    steps = 4 if args.smoke else FIXMATCH_TIMED_STEPS
    cmd = [sys.executable, "recipes/diagnostics/fixmatch_augment.py", "--dataset", "fashion_mnist", "--labels", "1000",
           "--augment", "clothes", "--steps", str(steps)]  # fmt: skip
    if args.smoke:
        assert data is not None
        cmd += ["--preset", "cpu", "--accelerator", "cpu", "--threads", "1", "--labels", "100", "--no-pool-accuracy",
                "--data-dir", str(data["fashion"])]  # fmt: skip
    else:
        cmd += ["--preset", "gpu", "--accelerator", "gpu", "--data-dir", str(args.data_dir / "fashion-mnist")]
    r = run(cmd, cap)
    m = re.search(r"evaluation ([\d.]+), .*?, ([\d.]+) s over (\d+) steps", r["stdout"])
    if not m:
        return {**r, "result": r["status"]}
    acc, seconds, ran = float(m.group(1)), max(float(m.group(2)), 0.1), int(m.group(3))
    rate = ran / seconds
    full = FIXMATCH_GPU_STEPS / rate
    return {**r, "steps": ran, "steps_per_s": rate, "full_preset_s_extrapolated": full, "evaluation_acc": acc,
            "result": f"{rate:.1f} steps/s over {ran} steps; {FIXMATCH_GPU_STEPS} steps ≈ {full / 60:.1f} min "
                      "(extrapolated)"}  # fmt: skip


def part_dpsgd(args: argparse.Namespace, cap: float, data: dict[str, Path] | None) -> dict[str, Any]:
    run_dir = args.workdir / "runs" / "gpu_check_dpsgd"
    cmd = [sys.executable, "-m", "pate_stab.cli", "compare", "--config", "recipes/configs/fashion_mnist_stab_gpu.yaml",
           "--checkpoints-dir", str(run_dir.parent), "--run-name", run_dir.name, "--aggregators", "--direct",
           "dpsgd-cnn", "--epsilons", "3", "--repeats", "1", "--no-progress"]  # fmt: skip
    if args.smoke:
        assert data is not None
        cmd += ["--accelerator", "cpu", "--num-queries", "40", "--set", "dpsgd_cnn_epochs=1",
                *_files_settings(data, "fashion")]  # fmt: skip
    else:
        cmd += ["--set", f"data_dir={args.data_dir / 'fashion-mnist'}"]
    r = run(cmd, cap)
    try:
        row = json.loads((run_dir / "compare.json").read_text())["rows"][0]
    except (FileNotFoundError, KeyError, IndexError, json.JSONDecodeError):
        return {**r, "result": r["status"]}
    return {**r, "epsilon": row["epsilon"], "accuracy": row["student_acc"],
            "result": f"acc {row['student_acc']:.4f} at ε={row['epsilon']:.3g}"}  # fmt: skip


PARTS = {
    "tests": ("fast tests that depend on the accelerator", part_tests),
    "transfer": ("MNIST stability transfer, ε=3 (mnist_stab_gpu.yaml)", part_transfer),
    "teachers": ("250 PATE CNN teachers, vectorised vs sequential", part_teachers),
    "fixmatch": ("FixMatch GPU preset, Fashion-MNIST", part_fixmatch),
    "dpsgd": ("DP-SGD CNN, Fashion-MNIST, ε=3", part_dpsgd),
}


def table(record: dict[str, Any]) -> str:
    v = record["versions"]
    lines = [
        f"gpu_check{' --smoke' if record['smoke'] else ''}: {v['device']}; torch {v['torch']} (CUDA {v['cuda']}), "
        f"torchvision {v['torchvision']}, lightning {v['lightning']}, opacus {v['opacus']}, Python {v['python']}",
        f"{'part':<55} {'wall s':>7}  result",
        "-" * 110,
    ]
    for name, part in record["parts"].items():
        lines.append(f"{PARTS[name][0]:<55} {part['seconds']:>7.1f}  {part['result']}")
        for s in part.get("stages", []):
            lines.append(f"{'  stage ' + s['stage']:<55} {s['seconds']:>7.1f}  on {s['device']}")
    lines.append(f"{'total':<55} {record['seconds']:>7.1f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="the same parts on the CPU on tiny data (< 2 min)")
    parser.add_argument("--out", type=Path, default=None, help="the JSON file (default: gpu_check[_smoke].json)")
    parser.add_argument("--data-dir", type=Path, default=DATA, help="folder with mnist/ and fashion-mnist/")
    parser.add_argument("--workdir", type=Path, default=None, help="run folders (default: a temporary folder)")
    parser.add_argument("--parts", nargs="+", choices=sorted(PARTS), default=list(PARTS))
    parser.add_argument("--cap", action="append", default=[], metavar="PART=SECONDS", help="one part's time cap")
    args = parser.parse_args(argv)
    caps = dict(SMOKE_CAPS if args.smoke else CAPS)
    for item in args.cap:
        name, _, seconds = item.partition("=")
        if name not in PARTS or not seconds:
            parser.error(f"--cap takes PART=SECONDS with PART one of {', '.join(PARTS)}, got {item!r}")
        caps[name] = float(seconds)
    out = args.out or ROOT / ("gpu_check_smoke.json" if args.smoke else "gpu_check.json")
    temporary = args.workdir is None
    args.workdir = Path(tempfile.mkdtemp(prefix="gpu_check_")) if temporary else args.workdir
    start = time.perf_counter()
    record: dict[str, Any] = {"smoke": args.smoke, "versions": versions(), "caps_s": caps, "parts": {}}
    print(f"versions: {json.dumps(record['versions'])}", flush=True)
    if not args.smoke and not record["versions"]["cuda_available"]:
        print("no GPU is visible: the parts below run on what 'auto' / 'gpu' finds (use --smoke on the CPU)",
              flush=True)  # fmt: skip
    try:
        data = tiny_data(args.workdir / "data") if args.smoke else None
        for name in args.parts:
            fn = PARTS[name][1]
            part = fn(args, caps[name]) if name == "tests" else fn(args, caps[name], data)  # type: ignore[operator]
            detail = {k: v for k, v in part.items() if k not in ("stdout", "stderr")}
            if part["status"] != "ok":
                detail["stderr_tail"] = part["stderr"][-2000:]
            record["parts"][name] = detail
            print(f"{name}: {part['result']} ({part['seconds']:.1f} s, {part['status']})", flush=True)
    finally:
        if temporary:
            shutil.rmtree(args.workdir, ignore_errors=True)
    record["seconds"] = time.perf_counter() - start
    print(table(record))
    out.write_text(json.dumps(record, indent=2, default=str))
    print(f"json: {out}")
    return 0 if all(p["status"] == "ok" for p in record["parts"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
