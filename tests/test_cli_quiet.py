"""Library noise stays out of a user's terminal: a CLI transfer on the synthetic task, with the
public-pool graph (sparse tensors) and Lightning fits, writes no warning to stderr."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _transfer(tmp_path, accelerator):
    cmd = [
        sys.executable, "-m", "pate_stab.cli", "transfer", "--checkpoints-dir", str(tmp_path), "--run-name", "quiet",
        "--num-teachers", "20", "--aggregator", "gnmax", "--num-queries", "100", "--set", "num_private=3000",
        "--set", "num_public=400", "--set", "num_eval=200", "--query-selection", "spread", "--student-method",
        "spread", "--student-epochs", "2", "--no-progress", "--accelerator", accelerator,
    ]  # fmt: skip
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path, "PYTHONWARNINGS": "default", "OMP_NUM_THREADS": "1"}
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return done


@pytest.mark.accelerator
def test_cli_transfer_prints_no_library_warnings(tmp_path):
    done = _transfer(tmp_path, "cpu")  # the device is pinned: on a machine with CUDA "auto" would pick the GPU
    assert "student test accuracy" in done.stdout and "plan:" in done.stdout
    noisy = [line for line in done.stderr.splitlines() if "warn" in line.lower() or "deprecat" in line.lower()]
    assert not noisy, "\n".join(noisy)


@pytest.mark.gpu
def test_cli_transfer_on_the_gpu_prints_no_library_warnings(tmp_path):
    done = _transfer(tmp_path, "gpu")
    assert "student test accuracy" in done.stdout
    noisy = [line for line in done.stderr.splitlines() if "warn" in line.lower() or "deprecat" in line.lower()]
    assert not noisy, "\n".join(noisy)
