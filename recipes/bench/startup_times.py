"""How fast the command line says no: whole-process times of ``plan``, a transfer stopped by an input
error, and ``predict`` on 20 rows, against their targets (issue 44).

    python recipes/bench/startup_times.py [--repeats 5] [--run-dir checkpoints/<a table run>]

Each command runs ``--repeats`` times in a fresh interpreter (``python -m pate_stab.cli``, this
checkout's code); the script prints the median wall time and the median CPU time of the process
(user + sys, from ``wait4``: fairer than wall time on a shared machine) beside the target, and the
load average before and after. Targets (an idle 2-core machine, medians of five runs):

- ``pate-stab plan`` (n = 4456, C = 2, m = 955, ε = 1: the survey table of issue 44) ≤ 3 s;
- a ``transfer`` on a survey table whose private file holds an undeclared category (exit 2) ≤ 3 s;
- ``predict`` on 20 new rows ≤ 4 s.

The tables are generated (categorical codes, a majority rate near 0.7, string ids). ``predict``
uses ``--run-dir``'s student when given (a run on a table with columns age, occupation, rating,
years_married), else a student file of that table's shape written here: a logistic head with
untrained weights and the schema, which is all that ``predict``'s time depends on.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = {
    "columns": [
        {"name": "age", "kind": "numeric", "bounds": [17, 90]},
        {"name": "occupation", "kind": "categorical", "categories": [str(c) for c in range(1, 7)]},
        {"name": "rating", "kind": "categorical", "categories": [str(c) for c in range(1, 6)]},
        {"name": "years_married", "kind": "numeric", "bounds": [0, 50]},
    ],
    "label": "affairs",
    "classes": ["no", "yes"],
    "id_column": "rid",
}
INPUTS = ["age", "occupation", "rating", "years_married"]


def _rows(n: int, seed: int, start: int) -> list[list[str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        rating, occupation = rng.randint(1, 5), rng.randint(1, 6)
        label = "yes" if rng.random() < 0.1 + 0.1 * (5 - rating) + 0.1 * (occupation >= 5) else "no"
        age = rng.randint(18, 75)
        out.append([f"R{start + i:05d}", str(age), str(occupation), str(rating), str(max(0, age - 30)), label])
    return out


def _write(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    path.write_text("\n".join(",".join(r) for r in [header, *rows]) + "\n")
    return path


def _tables(folder: Path) -> dict[str, Path]:
    header = ["rid", *INPUTS, "affairs"]
    private = _rows(4456, 1, 0)
    private[2000][2] = "9"  # an occupation the schema does not declare
    (folder / "schema.json").write_text(json.dumps(SCHEMA))
    return {
        "private": _write(folder / "private.csv", header, private),
        "public": _write(folder / "pool.csv", INPUTS, [r[1:5] for r in _rows(955, 2, 10**4)]),
        "evaluation": _write(folder / "eval.csv", header, _rows(955, 3, 2 * 10**4)),
        "new": _write(folder / "new.csv", INPUTS, [r[1:5] for r in _rows(20, 4, 3 * 10**4)]),
        "schema": folder / "schema.json",
    }


def _student(folder: Path) -> Path:
    """A student file of the table's shape (untrained logistic head): predict's time does not depend on training."""
    code = (
        "import sys; from pate_stab.run.student_file import PublishedStudent; "
        "from pate_stab.models.networks import ModelSpec, build_model; "
        "from pate_stab.data.table_schema import TabularSchema; import json; "
        f"s = TabularSchema.from_dict(json.loads({json.dumps(json.dumps(SCHEMA))})); "
        "spec = ModelSpec('logistic', (s.num_features,), 2); "
        "inputs = {'kind': 'table', 'shape': [s.num_features], 'schema': s.to_dict()}; "
        "PublishedStudent(build_model(spec).eval(), spec, ('no', 'yes'), inputs, []).save(sys.argv[1])"
    )
    run = folder / "run"
    run.mkdir(exist_ok=True)
    subprocess.run([sys.executable, "-c", code, str(run / "student.pt")], check=True, env=_env())
    return run


def _env() -> dict[str, str]:
    return dict(os.environ, PYTHONPATH=str(ROOT))


def _time(argv: list[str], expect: int) -> tuple[float, float]:
    """(wall seconds, user + sys seconds) of one process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != expect:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}, expected {expect}:\n{err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--run-dir", type=Path, default=None, help="a finished run on the survey table's columns")
    args = parser.parse_args()
    cli = [sys.executable, "-m", "pate_stab.cli"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        t = _tables(folder)
        run = args.run_dir if args.run_dir is not None else _student(folder)
        cases = [
            ("plan (n=4456, C=2, m=955, ε=1)", 3.0, 0,
             [*cli, "plan", "--num-private", "4456", "--num-classes", "2", "--num-queries", "955", "--epsilon", "1"]),
            ("transfer stopped by an input error", 3.0, 2,
             [*cli, "transfer", "--private", str(t["private"]), "--public", str(t["public"]), "--evaluation",
              str(t["evaluation"]), "--schema", str(t["schema"]), "--checkpoints-dir", str(folder / "ck")]),
            ("predict on 20 rows", 4.0, 0,
             [*cli, "predict", "--run-dir", str(run), "--input", str(t["new"]), "--out", str(folder / "p.csv")]),
        ]  # fmt: skip
        load_before = os.getloadavg()
        print(f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}; {os.cpu_count()} CPUs")
        print(f"{'command':<38} {'target':>7} {'median wall':>12} {'median cpu':>11}  runs (wall s)")
        for name, target, expect, argv in cases:
            _time(argv, expect)  # one warm-up run: the file cache, not the interpreter, is what it warms
            times = [_time(argv, expect) for _ in range(args.repeats)]
            wall = statistics.median(w for w, _ in times)
            cpu = statistics.median(c for _, c in times)
            verdict = "met" if wall <= target else ("met in CPU time" if cpu <= target else "NOT met")
            runs = " ".join(f"{w:.2f}" for w, _ in times)
            print(f"{name:<38} {target:>6.1f}s {wall:>11.2f}s {cpu:>10.2f}s  {runs}  [{verdict}]")
        print(f"load average after: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
