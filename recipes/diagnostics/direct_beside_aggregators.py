"""One table and one plot: the direct learners of a compare run beside aggregator rows measured earlier.

A compare run restricted to the direct learners (``--aggregators --direct …``) and a full
compare table (``compare.txt`` of an earlier run, e.g. ``docs/results/*_stab_compare.txt``)
measure the same features, evaluation split, ε values and δ. This script reads the aggregator
rows from that table (first block: one row per release), the direct rows from the run's
``compare.json``, and writes ``<out>.txt`` (per-release rows, the mean ± sd summary and the
direct-row legend with the cumulative cost), ``<out>.json`` and ``<out>.png``.

    python recipes/diagnostics/direct_beside_aggregators.py --direct-run checkpoints/fashion_mnist_stab_direct \
        --aggregator-table docs/results/fashion_mnist_stab_compare.txt --out docs/results/fashion_mnist_stab_direct
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pate_stab.run.compare import format_rows, format_summary, plot_rows, summarise_rows, total_cost_line
from pate_stab.run.direct import direct_legend


def aggregator_rows(table: Path) -> list[dict[str, Any]]:
    """The per-release rows of a ``compare.txt`` (the fixed-width block before the legend).

    A raw data-dependent ε column (tables written before runs split published and private
    outputs) is skipped: it is a statistic of the private votes and stays out of the output.
    """
    lines = table.read_text().splitlines()
    raw_column = "ε dd raw" in lines[0]
    rows, repeat_of = [], {}
    for line in lines[2:]:
        cells = line.split()
        if len(cells) < 9 + raw_column or line.startswith("ε:"):
            break
        if raw_column:
            del cells[3]
        name, target = cells[0], float(cells[1])
        rep = repeat_of.get((name, target), 0)
        repeat_of[(name, target)] = rep + 1

        def num(v: str) -> float | None:
            return None if v == "-" else float(v)

        rows.append({
            "aggregator": name, "repeat": rep, "target_epsilon": target, "epsilon": float(cells[2]),
            "epsilon_dd_sanitised": num(cells[3]), "delta": float(cells[4]),
            "seen": int(cells[5]), "answered": int(cells[6]), "label_acc": num(cells[7]),
            "student_acc": num(cells[8]), "note": " ".join(cells[9:]), "source": str(table),
        })  # fmt: skip
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--direct-run", type=Path, required=True, help="run folder of the direct-only compare")
    p.add_argument("--aggregator-table", type=Path, required=True, help="compare.txt with the aggregator rows")
    p.add_argument("--out", type=Path, required=True, help="output path without suffix")
    args = p.parse_args()
    direct = json.loads((args.direct_run / "compare.json").read_text())
    rows = aggregator_rows(args.aggregator_table) + direct["rows"]
    summary = summarise_rows(rows)
    relation = direct["privacy"]["neighbouring"]
    text = "\n\n".join([format_rows(rows, run_neighbouring=relation), format_summary(summary),
                         direct_legend(rows, run_neighbouring=relation)])  # fmt: skip
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".txt").write_text(text + "\n")
    # wall times of runs on the private data are private diagnostics: not in this published file
    sources = {"aggregator_rows": str(args.aggregator_table), "direct_rows": str(args.direct_run / "compare.json")}
    args.out.with_suffix(".json").write_text(json.dumps({"sources": sources, "rows": rows, "summary": summary},
                                                        indent=2, sort_keys=True))  # fmt: skip
    title = (f"{direct['dataset']}: aggregators (k={direct['num_teachers']}, m={direct['num_queries']}, spread "
             f"student) and direct learners (dashed), δ={direct['delta']:g}")  # fmt: skip
    plot_rows(rows, args.out.with_suffix(".png"), title=title,
              caption=total_cost_line(rows, run_neighbouring=relation))  # fmt: skip
    print(text)


if __name__ == "__main__":
    main()
