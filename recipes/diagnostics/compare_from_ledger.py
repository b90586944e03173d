"""The compare table of a run folder whose ``pate-stab compare`` was stopped before it wrote it.

``pate-stab compare`` writes ``compare.json``, ``compare.txt`` and ``compare.png`` only when its
whole plan is done; a run stopped earlier (for time) keeps every completed row in its ledger (the
released outputs and their summary) and in ``students/`` (each row's student, saved as soon as it
was trained). This script rebuilds the table from those: for every recorded aggregator release
whose student file exists, the row's certified ε and δ, queries seen and answered (from the
ledger), and the saved student's accuracy on the evaluation split; the direct learners' rows are
read from an earlier compare of the same run folder (``--direct-from``: its ``compare.json``). It
spends nothing, retrains nothing, and reads no private label (the evaluation split's labels only,
as ``compare`` does). The table is written with compare's own formatting
(:func:`pate_stab.run.compare.format_rows`, ``format_summary``, ``plot_rows``) to ``--out``
(``.txt``, ``.json``, ``.png``).

Under label privacy with ``label_queries: private|both`` the query pool's true labels are private,
so the rows carry no label accuracy (as in ``compare``).

    PYTHONPATH=. python recipes/diagnostics/compare_from_ledger.py --run-dir checkpoints/mnist_label_dp \\
        --direct-from checkpoints/mnist_label_dp/direct_compare.json --out docs/results/mnist_label_dp_compare
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import torch

from pate_stab.run import clean_json
from pate_stab.run.compare import format_rows, format_summary, plot_rows, summarise_rows, total_cost, total_cost_line
from pate_stab.run.config import TransferConfig
from pate_stab.run.data import _raw_splits
from pate_stab.run.report import noise_report
from pate_stab.run.student_file import load_student


def _spend(spend_id: str) -> tuple[str, float, int]:
    """(aggregator, ε, repeat) of ``run:agg:eps=E[:rep=R]``."""
    parts = spend_id.split(":")
    rep = int(parts[3].removeprefix("rep=")) if len(parts) > 3 else 0
    return parts[1], float(parts[2].removeprefix("eps=")), rep


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run-dir", type=Path, required=True)
    p.add_argument("--direct-from", type=Path, default=None, help="compare.json holding the direct learners' rows")
    p.add_argument("--out", type=Path, required=True, help="output path without suffix")
    args = p.parse_args()
    config = TransferConfig.from_dict(json.loads((args.run_dir / "config.json").read_text()))
    # the evaluation split as read (raw records): a saved student applies its own feature pipeline
    splits, _ = _raw_splits(config, torch.Generator().manual_seed(config.seed))
    eval_x, eval_y = splits[4], splits[5]
    lines = [json.loads(line) for line in (args.run_dir / "ledger.jsonl").read_text().splitlines()]
    results = {r["spend_id"]: r["payload"] for r in lines if r.get("kind") == "result"}
    rows: list[dict[str, Any]] = []
    for spend_id, payload in results.items():
        if "selection" not in payload:
            continue  # a direct learner's record
        agg, eps, rep = _spend(spend_id)
        file = args.run_dir / "students" / f"{agg}_eps{eps:g}_r{rep}.pt"
        if not file.exists():
            continue  # released, but the run stopped before its student was saved
        s = payload["summary"]
        rows.append({
            "aggregator": agg, "privacy_unit": config.privacy_unit, "repeat": rep, "target_epsilon": eps,
            "epsilon": s["epsilon"], "delta": s["delta"], "query_selection": config.query_selection,
            "offered": payload["selection"]["offered"], "seen": int(s.get("queries_seen", config.num_queries)),
            "answered": int(s["answered"]), "label_acc": None,
            "student_acc": load_student(file).accuracy(eval_x, eval_y),
            "student_file": f"students/{file.name}", "spend_id": spend_id, **noise_report(s), "note": "",
        })  # fmt: skip
    if args.direct_from is not None:
        rows += [r for r in json.loads(args.direct_from.read_text())["rows"] if r.get("kind") == "direct"]
    rows.sort(key=lambda r: (r.get("kind") == "direct", r["repeat"], r["target_epsilon"]))
    table = format_rows(rows, run_neighbouring=config.neighbouring)
    summary = summarise_rows(rows)
    table += "\n\n" + format_summary(summary)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    plot = plot_rows(
        rows, args.out.with_suffix(".png"),
        title=f"{config.dataset} ({config.privacy_unit} privacy): k={config.num_teachers} {config.teacher_model} "
        f"teachers, m={config.num_queries} ({config.query_selection})\n{config.student_method} student, "
        f"δ={config.delta:g}, rows rebuilt from the ledger",
        caption=total_cost_line(rows, run_neighbouring=config.neighbouring),
    )  # fmt: skip
    out = {"run": config.run_name, "dataset": config.dataset, "privacy": config.privacy_relation(), "rows": rows,
           "summary": summary, "total_cost": total_cost(rows, run_neighbouring=config.neighbouring),
           "note": __doc__.splitlines()[0], "plot": str(plot)}  # fmt: skip
    args.out.with_suffix(".json").write_text(json.dumps(clean_json(out), indent=2, sort_keys=True) + "\n")
    args.out.with_suffix(".txt").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main()
