"""recipes/bench/benchmark_teachers.py: the CNN part runs end to end (tiny smoke size on the CPU)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "recipes" / "bench" / "benchmark_teachers.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_cnn_part_times_both_modes_and_extrapolates(shared_data):
    proc = _run(
        "--part", "cnn", "--accelerator", "cpu", "--data-dir", str(shared_data / "mnist"),
        "--k", "3", "--subsample", "96", "--channels", "2", "4", "--hidden", "8",
        "--epochs", "1", "--sequential-teachers", "1", "--threads", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.strip().splitlines()
    assert lines[0].strip().startswith("vectorized: 3 of k=3 CNN teachers")
    assert lines[1].strip().startswith("sequential: 1 of k=3 CNN teachers")
    assert "estimate: 1 teachers timed, scaled linearly" in lines[2]
    assert "speed-up" in lines[2]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message shown without a GPU")
def test_cnn_part_without_gpu_says_so():
    proc = _run("--part", "cnn")
    assert proc.returncode != 0
    assert "none is visible here" in proc.stderr and "--accelerator cpu" in proc.stderr
