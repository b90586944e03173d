"""``recipes/bench/gpu_check.py --smoke``: every part of the GPU check runs on the CPU on tiny data and
fills its row of the table and the JSON file (the path a GPU session takes, scaled down)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_check_smoke_fills_every_row(tmp_path):
    out = tmp_path / "gpu_check_smoke.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    script = "recipes/bench/gpu_check.py"
    done = subprocess.run([sys.executable, script, "--smoke", "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    record = json.loads(out.read_text())
    assert record["smoke"] and record["versions"]["torch"]
    parts = record["parts"]
    assert list(parts) == ["tests", "transfer", "teachers", "fixmatch", "dpsgd"]
    assert all(p["status"] == "ok" for p in parts.values())
    assert " passed" in parts["tests"]["result"] and " failed" not in parts["tests"]["result"]
    stages = [s["stage"] for s in parts["transfer"]["stages"]]
    assert {"features", "teachers", "votes", "release", "student", "report"} <= set(stages)
    assert all(s["device"].startswith("cpu") for s in parts["transfer"]["stages"])
    assert parts["teachers"]["extrapolated"] and parts["teachers"]["vectorized_s"] > 0
    assert parts["fixmatch"]["steps_per_s"] > 0 and "extrapolated" in parts["fixmatch"]["result"]
    assert 0 < parts["dpsgd"]["epsilon"] <= 3.0 + 1e-9
    assert "stage teachers" in done.stdout and "total" in done.stdout  # the table
