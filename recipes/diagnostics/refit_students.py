"""Refit students on a finished run's recorded releases with other student settings.

The student is post-processing of the released labels (BTT18 Alg 5), so trying another student
— a CNN instead of an MLP, more epochs, pseudo-labelling on the unlabelled public pool — costs no
privacy. This script reads a run folder written by ``pate-stab transfer`` or ``pate-stab compare``,
replays the releases recorded in its ledger (it refuses any (aggregator, ε) that was not
recorded: it never spends), trains one student per release with the overridden settings, and
prints and writes ``refit_students.json`` with the original and the new student accuracy.

Only student settings may be overridden (the keys a rerun may change, see
:data:`pate_stab.run.config.STUDENT_FIELDS`); the teachers are reloaded, never retrained.

Usage (from the project root)::

    python recipes/diagnostics/refit_students.py --run-dir checkpoints/mnist_cnn_cpu \\
        --aggregators confident-gnmax --epsilons 3 --set pseudo_label_rounds=1
    python recipes/diagnostics/refit_students.py --run-dir checkpoints/mnist_stab --aggregators stability \\
        --epsilons 2 3 --repeats 3 --set student_method=fixmatch --out refit_fixmatch.json

``--repeats R`` refits the releases of ``pate-stab compare --repeats R`` (repeat r's spend id ends
in ``:rep=r``). Each row gives the student's accuracy on the evaluation split and on the pool
points the release left without a label; with repeats, a summary per (aggregator, ε) follows.

Everything in the output JSON and plot may be published (DESIGN.md fact 8): released counts,
the certified ε of each replayed release and their total (Σε, Σδ by basic composition — the
refit itself costs nothing), students' accuracies, and label accuracy (the released labels
against the public pool's true labels: public-side information). The students' fit times go to
``private_<out>`` (mode 0600) with the run's other wall times.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import yaml

from pate_stab.run.compare import format_summary, plot_rows, summarise_rows, total_cost, total_cost_line
from pate_stab.run.config import STUDENT_FIELDS
from pate_stab.run.refit import RefitError, refit_students
from pate_stab.run.report import LABEL_ACCURACY_NOTE, clean_json
from pate_stab.run.run_folder import RunFolderLockedError, files_section, run_lock, write_private_json, write_published


def overrides_from(pairs: list[str]) -> dict:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit(f"--set takes KEY=VALUE, got {pair!r}")
        if key not in STUDENT_FIELDS:
            raise SystemExit(f"only student settings can be refit ({', '.join(STUDENT_FIELDS)}); got {key!r}")
        value = yaml.safe_load(value)
        out[key] = tuple(value) if isinstance(value, list) else value
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run-dir", type=Path, required=True)
    parser.add_argument("--aggregators", nargs="+", required=True)
    parser.add_argument("--epsilons", type=float, nargs="+", required=True)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the refit students")
    parser.add_argument("--repeats", type=int, default=1, help="repeated releases per (aggregator, ε) to refit")
    parser.add_argument("--out", default="refit_students.json", help="file name in the run folder")
    parser.add_argument("--accelerator", default=None, help="where the students train (default: the run's)")
    args = parser.parse_args(argv)

    run_dir = args.run_dir
    if not (run_dir / "config.json").is_file():
        raise SystemExit(f"{run_dir} is not a finished run folder: config.json is missing")
    try:
        with run_lock(run_dir):  # the refit and its files: one writer in the run folder
            _refit(args, run_dir)
    except RunFolderLockedError as exc:
        raise SystemExit(str(exc)) from exc


def _refit(args: argparse.Namespace, run_dir: Path) -> None:
    try:
        rows, new, spent_before, fit_s = refit_students(
            run_dir, aggregators=args.aggregators, epsilons=args.epsilons, overrides=overrides_from(args.overrides),
            seed=args.seed, repeats=args.repeats, accelerator=args.accelerator, echo=True,
        )  # fmt: skip
    except (RefitError, ValueError, FileNotFoundError) as exc:
        raise SystemExit(str(exc)) from exc
    config = new
    student_settings = {k: getattr(new, k) for k in STUDENT_FIELDS}
    summary = summarise_rows(rows)
    if args.repeats > 1:
        print(format_summary(summary))
    private_name = f"private_{Path(args.out).name}"
    published = [args.out, str(Path(args.out).with_suffix(".png"))]
    out = clean_json({"run": config.run_name, "student": student_settings, "rows": rows, "summary": summary,
                      "spent": list(spent_before), "total_cost": total_cost(rows),
                      "label_accuracy_note": LABEL_ACCURACY_NOTE,
                      "files": files_section(published, [private_name])})  # fmt: skip
    write_published(run_dir / args.out, json.dumps(out, indent=2, sort_keys=True))
    write_private_json(run_dir / private_name, {"run": config.run_name, "wall_time_s": fit_s})
    plot = plot_rows(
        rows,
        (run_dir / args.out).with_suffix(".png"),
        title=f"{config.data.dataset}: refit students ({new.student_method}, {new.student_model})\n"
        f"on the releases of {config.run_name}",
        caption=f"refit: no new privacy cost; the releases' {total_cost_line(rows)}",
    )
    print(f"plot: {plot}")
    print(f"written {run_dir / args.out}; privacy spent unchanged: {spent_before}")


if __name__ == "__main__":
    main()
