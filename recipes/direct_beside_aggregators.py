"""One table and one plot: the direct learners of a compare run beside aggregator rows measured earlier.

A compare run restricted to the direct learners (``--aggregators --direct …``) and a full
compare table (``compare.txt`` of an earlier run, e.g. ``docs/results/*_stab_compare.txt``)
measure the same features, evaluation split, ε values and δ. This script reads the aggregator
rows from that table (first block: one row per release), the direct rows from the run's
``compare.json``, and writes ``<out>.txt`` (per-release rows, the mean ± sd summary and the
direct-row legend with the cumulative cost), ``<out>.json`` and ``<out>.png``.

    python recipes/direct_beside_aggregators.py --direct-run checkpoints/fashion_mnist_stab_direct \
        --aggregator-table docs/results/fashion_mnist_stab_compare.txt --out docs/results/fashion_mnist_stab_direct
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from pate_stab.run.compare import format_rows, format_summary, plot_rows, summarise_rows
from pate_stab.run.direct import direct_legend


def aggregator_rows(table: Path) -> list[dict[str, Any]]:
    """The per-release rows of a ``compare.txt`` (the fixed-width block before the legend)."""
    rows, repeat_of = [], {}
    for line in table.read_text().splitlines()[2:]:
        cells = line.split()
        if len(cells) < 10 or line.startswith("ε:"):
            break
        name, target = cells[0], float(cells[1])
        rep = repeat_of.get((name, target), 0)
        repeat_of[(name, target)] = rep + 1

        def num(v: str) -> float | None:
            return None if v == "-" else float(v)

        rows.append({
            "aggregator": name, "repeat": rep, "target_epsilon": target, "epsilon": float(cells[2]),
            "epsilon_dd_raw": num(cells[3]), "epsilon_dd_sanitised": num(cells[4]), "delta": float(cells[5]),
            "seen": int(cells[6]), "answered": int(cells[7]), "label_acc": num(cells[8]),
            "student_acc": num(cells[9]), "note": " ".join(cells[10:]), "source": str(table),
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
    text = "\n\n".join([format_rows(rows), format_summary(summary), direct_legend(rows, run_neighbouring=relation)])
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".txt").write_text(text + "\n")
    sources = {"aggregator_rows": str(args.aggregator_table), "direct_rows": str(args.direct_run / "compare.json"),
               "direct_wall_time_s": direct["wall_time_s"]}  # fmt: skip
    args.out.with_suffix(".json").write_text(json.dumps({"sources": sources, "rows": rows, "summary": summary},
                                                        indent=2, sort_keys=True))  # fmt: skip
    title = (f"{direct['dataset']}: aggregators (k={direct['num_teachers']}, m={direct['num_queries']}, spread "
             f"student) and direct learners (dashed), δ={direct['delta']:g}")  # fmt: skip
    plot_rows(rows, args.out.with_suffix(".png"), title=title, reference=direct["teachers"]["plurality_accuracy"])
    print(text)


if __name__ == "__main__":
    main()
