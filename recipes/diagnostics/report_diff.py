"""Check that two checkouts write the same reports: ``transfer`` and ``compare`` with seeded noise.

A refactor must leave what a run publishes unchanged. This runs ``pate-stab transfer`` and
``pate-stab compare`` with ``releaser_noise: seeded`` (so every draw follows the seed) from a
checkout, on small cases, and compares two such output folders file by file — ``report.json``,
``compare.json`` and ``compare.txt`` — ignoring wall times and paths (a run folder's absolute path
differs between checkouts; timings differ between runs).

Usage (from a checkout; ``--repo`` picks the checkout whose package runs)::

    python recipes/diagnostics/report_diff.py run --repo /tmp/wt-base --out /tmp/reports-base
    python recipes/diagnostics/report_diff.py run --out /tmp/reports-new
    python recipes/diagnostics/report_diff.py diff /tmp/reports-base /tmp/reports-new

Cases: ``synthetic`` (the default config: nothing to download), ``adult`` (recipes/configs/adult.yaml
with 400 teachers and 300 queries; needs ``--data-dir``'s ``adult/`` folder) and ``pate_dpsgd``
(a ``compare`` on the synthetic default with PATE's aggregators, DP-SGD and the convex heads as
direct rows at two ε: every kind of spend the ledger records) and ``label`` (the synthetic default
under label privacy, replace-one stated: a ``transfer`` that labels public and private queries, and
a ``compare`` with GNMax, the stability releaser, the label-DP learners RR-with-prior and ALIBI, and
DP-SGD as a record row counted in the label ledger, at two ε; docs/label_privacy.md).
Besides the reports, each run's ledger (``ledger.jsonl``) is compared spend by spend — id,
mechanism, certified (ε, δ), relation, metadata and released outputs — with the recorded privacy
*event* (and the integrity chain's hashes, which cover it) left out of the comparison and listed
apart (``event changes``, not a failure): a change of accounting vocabulary must leave every
certified (ε, δ) as it was.
Each command runs with a fresh, temporary data-set budget folder (``PATE_STAB_BUDGET_DIR``), so the
cases' spends meet no cap from another case and none under ``~/.pate_stab`` is read or written.
``diff`` prints each difference as ``case/file: json.path: a != b`` and exits 1 if there is any.
The published files hold only mechanism outputs and what is computed from them and public data;
the private files of a run folder are not read.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parents[2]
COMPARED = ("report.json", "compare.json", "compare.txt")
LEDGER = "ledger.jsonl"
# Every run gets a fresh data-set budget folder (pate_stab.privacy.ledger.data_budget's variable): the cases
# spend on the same data sets, more than one cap allows, and the user's caps are left alone.
BUDGET_DIR_ENV = "PATE_STAB_BUDGET_DIR"
# keys of wall-clock durations or instants; every other key is compared
TIME_KEY = re.compile(r"(^|_)(seconds|secs|wall|elapsed|duration|time|times|timestamp|timings?)($|_)")


# Label privacy with its relation stated: the base of the redesign and the code after it both take these
# flags and read them the same way (the redesign refuses label privacy without replace-one everywhere).
LABEL = ["--privacy-unit", "label", "--neighbouring", "replace_one"]
CASES = ("synthetic", "adult", "pate_dpsgd", "label")

# The Adult config's path in a checkout: recipes/configs/ since recipes/ was sorted, recipes/ before.
ADULT_CONFIGS = ("recipes/configs/adult.yaml", "recipes/adult.yaml")


def adult_config(repo: Path) -> str:
    """The Adult config of the checkout ``repo`` (the newer layout first)."""
    for name in ADULT_CONFIGS:
        if (repo / name).is_file():
            return name
    raise SystemExit(f"{repo} holds none of {ADULT_CONFIGS}")


def cases(data_dir: Path, repo: Path = HERE) -> dict[str, dict[str, list[str]]]:
    """Each case's ``transfer`` and ``compare`` arguments (after the subcommand) for the checkout ``repo``."""
    adult = [
        "--config", adult_config(repo), "--data-dir", str(data_dir / "adult"), "--num-teachers", "400",
        "--num-queries", "300",
    ]  # fmt: skip
    return {
        "synthetic": {"transfer": [], "compare": []},
        "adult": {"transfer": adult, "compare": [*adult, "--epsilons", "4", "8"]},
        "pate_dpsgd": {
            "compare": [
                "--epsilons", "2", "8", "--aggregators", "lnmax", "gnmax", "confident-gnmax",
                "--direct", "dpsgd-linear", "objective-softmax", "output-ovr",
            ],
        },
        "label": {
            "transfer": [*LABEL, "--label-queries", "both"],
            "compare": [
                *LABEL, "--epsilons", "2", "8", "--aggregators", "gnmax", "stability",
                "--direct", "rr-lp1st", "alibi", "dpsgd-linear",
            ],
        },
    }  # fmt: skip


def run(repo: Path, out: Path, names: list[str], data_dir: Path) -> None:
    """Run every case's transfer and compare from ``repo`` into ``out/<case>/<command>/``."""
    table = cases(data_dir, repo)
    unknown = [n for n in names if n not in table]
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; known: {sorted(table)}")
    env = {**os.environ, "PYTHONPATH": str(repo), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    for name in names:
        for command, extra in table[name].items():
            folder = out / name
            args = [
                sys.executable, "-m", "pate_stab.cli", command, *extra, "--checkpoints-dir", str(folder),
                "--run-name", command, "--releaser-noise", "seeded", "--no-progress",
            ]  # fmt: skip
            start = time.perf_counter()
            with tempfile.TemporaryDirectory(prefix="report_diff_budget_") as budget:
                done = subprocess.run(
                    args, cwd=repo, env={**env, BUDGET_DIR_ENV: budget}, capture_output=True, text=True
                )
            folder.mkdir(parents=True, exist_ok=True)
            (folder / f"{command}.stdout").write_text(done.stdout)
            (folder / f"{command}.stderr").write_text(done.stderr)
            if done.returncode != 0:
                raise SystemExit(f"{name} {command} failed ({done.returncode}):\n{done.stderr[-3000:]}")
            print(f"{name} {command}: {time.perf_counter() - start:.0f} s", flush=True)


def _normalise(value: Any, roots: list[tuple[str, str]]) -> Any:
    """``value`` with time keys dropped and the run folders' paths replaced by placeholders."""
    if isinstance(value, dict):
        return {k: _normalise(v, roots) for k, v in value.items() if not TIME_KEY.search(k.lower())}
    if isinstance(value, list):
        return [_normalise(v, roots) for v in value]
    if isinstance(value, str):
        for path, name in roots:
            value = value.replace(path, name)
    return value


def _json_diffs(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}.{k}: only in {'a' if k in a else 'b'}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _json_diffs(a[k], b[k], f"{where}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{where}: {len(a)} items != {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in _json_diffs(x, y, f"{where}[{i}]")]
    return [] if a == b else [f"{where or '.'}: {a!r} != {b!r}"]


def _ledger(path: Path) -> tuple[list[Any], list[Any]]:
    """A ledger's lines without wall times, and the events recorded in it (apart).

    The integrity chain (``sha256`` of each line, ``prev`` of the line before) hashes the lines'
    events too, so it is left out with them; every other field of every line is compared.
    """
    lines, events = [], []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if isinstance(record, dict):
            if "event" in record:
                events.append([record.get("spend_id"), record.pop("event")])
            record.pop("sha256", None)
            record.pop("prev", None)
        lines.append(_normalise(record, []))
    return lines, events


def diff(a: Path, b: Path, notes: list[str] | None = None) -> list[str]:
    """Every difference between the published files of two ``run`` output folders.

    ``notes`` (if given) receives the changes of recorded events, which are not differences.
    """
    found: list[str] = []
    for case in sorted({p.name for p in a.iterdir() if p.is_dir()} | {p.name for p in b.iterdir() if p.is_dir()}):
        for command in ("transfer", "compare"):
            da, db = a / case / command, b / case / command
            configs = [(name, "<adult config>") for name in ADULT_CONFIGS]
            roots_a = [(str(da.resolve()), "<run>"), (str(da), "<run>"), (str(HERE), "<repo>"), *configs]
            roots_b = [(str(db.resolve()), "<run>"), (str(db), "<run>"), (str(HERE), "<repo>"), *configs]
            for file in COMPARED:
                fa, fb = da / file, db / file
                if not fa.exists() and not fb.exists():
                    continue
                if fa.exists() != fb.exists():
                    found.append(f"{case}/{command}/{file}: only in {'a' if fa.exists() else 'b'}")
                    continue
                if file.endswith(".json"):
                    ja = _normalise(json.loads(fa.read_text()), roots_a)
                    jb = _normalise(json.loads(fb.read_text()), roots_b)
                    found += [f"{case}/{command}/{file}: {d}" for d in _json_diffs(ja, jb)]
                else:
                    ta = _normalise(fa.read_text(), roots_a).splitlines()
                    tb = _normalise(fb.read_text(), roots_b).splitlines()
                    found += [f"{case}/{command}/{file}: {line}" for line in difflib.unified_diff(ta, tb, lineterm="")]
            la, lb = da / LEDGER, db / LEDGER
            if la.exists() != lb.exists():
                found.append(f"{case}/{command}/{LEDGER}: only in {'a' if la.exists() else 'b'}")
            elif la.exists():
                (lines_a, events_a), (lines_b, events_b) = _ledger(la), _ledger(lb)
                found += [f"{case}/{command}/{LEDGER}: {d}" for d in _json_diffs(lines_a, lines_b)]
                if notes is not None:
                    notes += [f"{case}/{command}/{LEDGER}: event {d}" for d in _json_diffs(events_a, events_b)]
    return found


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="action", required=True)
    r = sub.add_parser("run", help="run the cases from a checkout")
    r.add_argument("--repo", type=Path, default=HERE, help="the checkout to run (default: this one)")
    r.add_argument("--out", type=Path, required=True, help="output folder (one subfolder per case)")
    r.add_argument("--cases", nargs="+", default=list(CASES))
    r.add_argument("--data-dir", type=Path, default=HERE.parent / "shared" / "data")
    d = sub.add_parser("diff", help="compare two run output folders")
    d.add_argument("a", type=Path)
    d.add_argument("b", type=Path)
    args = ap.parse_args()
    if args.action == "run":
        run(args.repo.resolve(), args.out.resolve(), args.cases, args.data_dir.resolve())
        return
    notes: list[str] = []
    found = diff(args.a, args.b, notes)
    if notes:
        print("event changes (recorded privacy events; not compared):\n" + "\n".join(notes))
    print("\n".join(found) if found else "identical (wall times and paths aside)")
    raise SystemExit(1 if found else 0)


if __name__ == "__main__":
    main()
