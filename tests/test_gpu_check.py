"""``recipes/bench/gpu_check.py --smoke``: every part of the GPU check runs on the CPU on tiny data and
fills its row of the table and the JSON file (the path a GPU session takes, scaled down).

The whole smoke (five parts, each a subprocess) is in the slow tier: each part's path has its fast test
(the accelerator tests themselves; the transfer command on ``.npz`` files: tests/run/test_own_data_run.py;
the teachers' benchmark: tests/teachers/test_benchmark_recipe.py; the FixMatch teachers' cost recipe:
tests/teachers/test_fixmatch_teachers.py::test_the_cost_recipe_runs_its_smoke_size; DP-SGD's CNN:
tests/run/test_direct_cnn.py). The fast tier keeps the script's own record and table, on its cheapest part."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _smoke(tmp_path: Path, *parts: str) -> tuple[subprocess.CompletedProcess, dict]:
    out = tmp_path / "gpu_check_smoke.json"
    env = {**os.environ, "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}  # fmt: skip
    cmd = [sys.executable, "recipes/bench/gpu_check.py", "--smoke", "--out", str(out)]
    cmd += ["--parts", *parts] if parts else []
    done = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return done, json.loads(out.read_text())


def test_gpu_check_smoke_records_a_part_and_prints_its_table(tmp_path):
    done, record = _smoke(tmp_path, "tests")
    assert record["smoke"] and record["versions"]["torch"]
    assert list(record["parts"]) == ["tests"]
    part = record["parts"]["tests"]
    assert part["status"] == "ok" and part["seconds"] > 0
    assert " passed" in part["result"] and " failed" not in part["result"]
    assert "tests" in done.stdout and "total" in done.stdout  # the table


@pytest.mark.slow
def test_gpu_check_smoke_fills_every_row(tmp_path):
    done, record = _smoke(tmp_path)
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
