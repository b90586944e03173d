"""The ``pate-stab`` command line: demo, transfer, compare, predict, release, plan, budget, calibrate.

    pate-stab demo                                   # synthetic task, no data, under a minute
    pate-stab transfer --config recipes/configs/mnist_quick.yaml [--epsilon 4 ...]
    pate-stab compare --config recipes/configs/mnist_quick.yaml --epsilons 2 4 8
    pate-stab compare --config recipes/configs/mnist_quick.yaml --query-selection student-confidence
    pate-stab release --votes votes.npy --num-classes 10 --aggregator gnmax --epsilon 8 [--public-inputs x.npy]
    pate-stab plan --num-private 1200 --num-classes 10 --num-queries 450 --epsilon 8 [--num-teachers 150]
    pate-stab calibrate --epsilon 8 --delta 1e-5 --num-queries 300 --max-unstable 10
    pate-stab transfer --private mine.npz --public pool.npz --evaluation test.npz --classes 3
    pate-stab transfer --private train/ --public pool/ --evaluation test/   # image folders
    pate-stab transfer --private a.csv --public b.csv --schema schema.json  # CSV with a public schema
    pate-stab predict --run-dir checkpoints/mine --input new.csv --out predictions.csv
    pate-stab budget [--set EPS[,DELTA] --data-set ID]  # what each private data set has spent, across folders

Every run writes ``<checkpoints-dir>/<run-name>/`` (config.json, teachers/, ledger.jsonl,
report.json or compare.{json,txt,png}). Flags given on the command line override the YAML.
Usage errors (unknown data set, missing data directory, your own data not fitting — lengths,
labels, NaN, image sizes, CSV columns and categories —, a budget too small for the stability
releaser to answer anything, a target ε above 64) exit with status 2 before any training or
spending, and say what to change in one line (argparse's usage lines only for flags it cannot
parse). The checks of a target ε and of a user's CSV files run before torch is imported
(:mod:`pate_stab.cli.checks`).
"""

from __future__ import annotations

import argparse
import logging
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pate_stab.cli.budget import add_budget_dir_flag, add_budget_parser, cmd_budget, use_budget_dir
from pate_stab.cli.checks import check_early, epsilon_error, fail
from pate_stab.cli.config import DEMO, _add_config_flags, _config_dict, _make_config
from pate_stab.cli.config import _pca_dim as _pca_dim  # re-exported: tests import it from here
from pate_stab.cli.output import _fmt, _noise_line, _print_report
from pate_stab.vocabulary import CALIBRATIONS, LAYOUTS, NEIGHBOURING_RELATIONS, NOISE_MODES, PRIVACY_UNITS

__all__ = ["main", "build_parser"]


class _Names:
    """A list of names from :mod:`pate_stab.run.config.names` (the run's registry of choices), read when a
    help text is shown (argparse fills ``%(name)s`` from the action's attributes), not when the parser is built."""

    def __init__(self, table: str) -> None:
        self.table = table

    def __str__(self) -> str:
        from pate_stab.run.config import names as config_names

        return ", ".join(getattr(config_names, self.table))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pate-stab", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="synthetic end-to-end run (no data, no network)")
    _add_config_flags(demo)
    transfer = sub.add_parser("transfer", help="teachers → private release → student → report.json")
    transfer.add_argument("--config", type=Path, help="recipe YAML (keys of TransferConfig)")
    _add_config_flags(transfer)
    compare = sub.add_parser("compare", help="all aggregators on the same votes: table + plot")
    compare.add_argument("--config", type=Path, help="recipe YAML")
    compare.add_argument("--epsilons", type=float, nargs="+", default=None, help="target ε values")
    compare.add_argument("--aggregators", nargs="*", default=None,
                         help="subset of aggregators (none given: only the direct learners)")  # fmt: skip
    direct = compare.add_argument("--direct", nargs="*", default=None, metavar="LEARNER",
                                  help="direct private learners trained on the private split, as rows beside the "
                                  "aggregators: %(learners)s (dpsgd-cnn: images only, epochs: --set "
                                  "dpsgd_cnn_epochs=N; %(label_learners)s: label privacy only, --privacy-unit label "
                                  "--neighbouring replace_one)")  # fmt: skip
    direct.learners, direct.label_learners = _Names("DIRECT_LEARNER_NAMES"), _Names("LABEL_DIRECT_LEARNERS")  # type: ignore[attr-defined]
    compare.add_argument(
        "--repeats", type=int, default=None, help="releases per (aggregator, ε), each its own spend: mean and spread"
    )
    _add_config_flags(compare)
    for p in (transfer, compare):
        p.add_argument("--export-votes", type=Path, default=None, metavar="FILE.npy",
                       help="also write the teachers' k × n votes on the public pool (PATE's layout). The votes are "
                       "PRIVATE (a function of the private data, not differentially private): the file is "
                       "created readable by its owner only")  # fmt: skip
    rel = sub.add_parser("release", help="bring your own teachers: a votes file in, private labels out")
    rel.add_argument("--votes", type=Path, required=True, help="votes file: .npy, .pt or .csv")
    rel.add_argument("--layout", default="predictions", choices=LAYOUTS,
                     help="predictions: k × n teacher labels (PATE); counts: n × C vote counts; scores: k × n "
                     "(or k × n × 2) scores in [0, 1] for stability-soft")  # fmt: skip
    rel.add_argument("--aggregator", required=True, help="stability, stability-paper, stability-tight, "
                     "stability-soft, lnmax, gnmax, confident-gnmax")  # fmt: skip
    rel.add_argument("--epsilon", type=float, required=True, help="target ε")
    rel.add_argument("--delta", type=float, default=1e-5, help="target δ")
    rel.add_argument("--budget-epsilon", type=float, default=None,
                     help="the output folder's budget cap on the total ε: recorded at its first release (default: "
                     "that release's ε); a later release may lower it, never raise it")  # fmt: skip
    rel.add_argument("--budget-delta", type=float, default=None, help="the folder's budget cap on the total δ")
    rel.add_argument("--num-classes", type=int, default=None,
                     help="C, the number of classes: required with --layout predictions (declared, never read "
                     "from the votes); counts: must equal the file's columns; scores: 2")  # fmt: skip
    rel.add_argument("--num-queries", type=int, default=None, help="m calibrated for (default: the file's n)")
    rel.add_argument("--max-unstable", type=int, default=10, help="T, the ⊥ before the stability releaser halts")
    rel.add_argument("--calibration", default="tight", choices=CALIBRATIONS)
    rel.add_argument("--noise", default="secure", choices=NOISE_MODES,
                     help="secure (default: exact noise from the OS) or seeded (reproducible research only: no "
                     "privacy against anyone who knows the seed)")  # fmt: skip
    rel.add_argument("--gamma", type=float, default=0.1, help="stability-soft: the discretisation γ")
    rel.add_argument("--confident-threshold", type=float, default=0.6, help="Confident-GNMax threshold / k")
    rel.add_argument("--neighbouring", default=None, choices=NEIGHBOURING_RELATIONS,
                     help="the relation (default: add_remove; --privacy-unit label needs replace_one)")  # fmt: skip
    rel.add_argument("--privacy-unit", default="record", choices=PRIVACY_UNITS,
                     help="record (default) or label: one changed label moves at most --teachers-changed teachers' "
                     "votes (label differential privacy; docs/label_privacy.md)")  # fmt: skip
    rel.add_argument("--teachers-changed", type=int, default=1, choices=(1, 2),
                     help="teachers one neighbouring data set changes (2: replace-one over content keys)")  # fmt: skip
    rel.add_argument("--seed", type=int, default=0, help="noise seed (seeded mode only)")
    rel.add_argument("--out", type=Path, default=Path("checkpoints") / "release",
                     help="output folder: labels.npy, labels.csv, report.json, ledger.jsonl")  # fmt: skip
    rel.add_argument("--public-inputs", type=Path, default=None, metavar="PATH",
                     help="the public points' inputs or features (.npy/.pt/.csv, one row per query, in the votes' "
                     "order): queries are chosen by --query-selection from them and the released labels")  # fmt: skip
    rel.add_argument("--query-selection", default=None, choices=("first", "spread"),
                     help="with --public-inputs: spread (default there) or first (file order)")  # fmt: skip
    rel.add_argument("--allow-unanswerable", action="store_true",
                     help="release through a stability releaser even where a unanimous vote cannot pass")  # fmt: skip
    rel.add_argument("--progress", dest="progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bar over the release (default: on in a terminal)")  # fmt: skip
    plan = sub.add_parser("plan", help="before training: what each aggregator can answer at your data's size")
    plan.add_argument("--num-private", type=int, required=True, help="n, private records")
    plan.add_argument("--num-classes", type=int, required=True, help="C")
    plan.add_argument("--num-queries", type=int, required=True, help="m, public queries to label")
    plan.add_argument("--epsilon", type=float, required=True, help="target ε")
    plan.add_argument("--delta", type=float, default=1e-5, help="target δ")
    plan.add_argument("--max-unstable", type=int, default=10, help="T, the ⊥ before the stability releaser halts")
    plan.add_argument("--num-teachers", type=int, default=None, help="k, if chosen: whether each aggregator answers")
    plan.add_argument("--calibration", default="tight", choices=CALIBRATIONS)
    plan.add_argument("--teachers-changed", type=int, default=1, choices=(1, 2),
                      help="teachers one neighbouring data set changes (2: replace-one over content keys)")  # fmt: skip
    plan.add_argument("--confident-threshold", type=float, default=0.6, help="Confident-GNMax threshold / k")
    plan.add_argument("--knn-sampling-rate", type=float, default=None,
                      help="γ: also plan private-knn, confident-private-knn (k is K neighbours)")  # fmt: skip
    pred = sub.add_parser("predict", help="the published student's classes for new inputs: predictions.csv")
    pred.add_argument("--run-dir", type=Path, required=True,
                      help="a finished run's folder (its student.pt; a compare run: one of students/)")  # fmt: skip
    pred.add_argument("--student", default=None, metavar="NAME",
                      help="a compare run's student, a file name under students/ (e.g. gnmax_eps8_r0.pt)")  # fmt: skip
    pred.add_argument("--input", type=Path, required=True,
                      help="new inputs of the run's kind: a .csv (the run's schema), an image folder or file, "
                      ".npz (key x) or .npy")  # fmt: skip
    pred.add_argument("--out", type=Path, default=Path("predictions.csv"),
                      help="one row per input: input, class, probability (default predictions.csv)")  # fmt: skip
    pred.add_argument("--unknown-category", default="refuse", choices=("refuse", "fallback"),
                      help="a CSV value outside its column's declared categories: refuse (default: naming the row, "
                      "column and value) or fallback (the column's declared fallback category: the schema's "
                      "'fallback', or --fallback)")  # fmt: skip
    pred.add_argument("--fallback", action="append", default=[], metavar="COLUMN=CATEGORY",
                      help="with --unknown-category fallback: the declared category a column's unknown values take "
                      "(overrides the schema's 'fallback'; repeat for several columns)")  # fmt: skip
    pred.add_argument("--encoding", default=None, metavar="ENCODING",
                      help="the CSV's text encoding (default utf-8; e.g. latin-1, cp1252, utf-16)")  # fmt: skip
    for p in (demo, transfer, compare, rel):
        add_budget_dir_flag(p)
    add_budget_parser(sub)
    cal = sub.add_parser("calibrate", help="stability releaser calibrations (paper and tight)")
    cal.add_argument("--epsilon", type=float, required=True)
    cal.add_argument("--delta", type=float, default=1e-5)
    cal.add_argument("--num-queries", type=int, required=True)
    cal.add_argument("--max-unstable", type=int, required=True)
    cal.add_argument("--soft", action="store_true", help="soft-label releaser (Alg 6/8)")
    return parser


def _format_warning(message: Warning | str, category: type[Warning], filename: str, lineno: int,
                    line: str | None = None) -> str:  # fmt: skip
    """A warning as one line for the terminal: its kind and its message, no source file or line."""
    return f"{category.__name__}: {message}\n"


def _quiet() -> None:
    # Lightning's banners; its warnings about deliberate choices and torch's sparse-tensor notices
    # are filtered where the package triggers them (quiet_lightning, features.propagation)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric").setLevel(logging.WARNING)
    warnings.formatwarning = _format_warning


def _cmd_calibrate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pate_stab.privacy.mechanisms.calibration import calibrate
    from pate_stab.theory import teachers_for_unanimous_answer

    print(
        f"stability releaser ({'soft' if args.soft else 'hard'} labels): ε={args.epsilon:g}, δ={args.delta:g}, "
        f"m={args.num_queries}, T={args.max_unstable}"
    )
    for mode in ("paper", "tight"):
        try:
            cal = calibrate(
                epsilon=args.epsilon,
                delta=args.delta,
                num_queries=args.num_queries,
                max_unstable=args.max_unstable,
                mode=mode,
                soft_labels=args.soft,
            )
        except (TypeError, ValueError) as exc:
            if mode == "tight":
                fail(str(exc))
            print(f"  {mode:<6} unavailable: {exc}")
            continue
        need = teachers_for_unanimous_answer(cal)
        print(f"  {mode:<6} {cal}")
        print(f"  {'':<6} a unanimous vote is answered w.p. ≥ 0.95 from k ≈ {need} teachers")
    return 0


def _cmd_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    message = epsilon_error(args.epsilon)
    if message:
        fail(message)
    from pate_stab.aggregation.plan import plan_run

    try:
        plan = plan_run(
            num_private=args.num_private, num_classes=args.num_classes, num_queries=args.num_queries,
            epsilon=args.epsilon, delta=args.delta, max_unstable=args.max_unstable, num_teachers=args.num_teachers,
            calibration=args.calibration, teachers_changed=args.teachers_changed,
            confident_fraction=args.confident_threshold, knn_sampling_rate=args.knn_sampling_rate,
        )  # fmt: skip
    except (TypeError, ValueError) as exc:
        fail(str(exc))
    print(plan.text())
    return 0


def _cmd_release(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    message = epsilon_error(args.epsilon)
    if message:
        fail(message)
    from pate_stab.errors import PateStabError
    from pate_stab.run.progress import default_progress
    from pate_stab.run.release_votes import release_votes

    progress = default_progress() if args.progress is None else args.progress
    try:
        report = release_votes(
            args.votes, aggregator=args.aggregator, epsilon=args.epsilon, delta=args.delta, out_dir=args.out,
            layout=args.layout, num_classes=args.num_classes, num_queries=args.num_queries,
            max_unstable=args.max_unstable, calibration=args.calibration, noise=args.noise, gamma=args.gamma,
            confident_threshold=args.confident_threshold, neighbouring=args.neighbouring,
            teachers_changed=args.teachers_changed, privacy_unit=args.privacy_unit, seed=args.seed,
            public_inputs=args.public_inputs,
            query_selection=args.query_selection, allow_unanswerable=args.allow_unanswerable, progress=progress,
            budget_epsilon=args.budget_epsilon, budget_delta=args.budget_delta,
        )  # fmt: skip
    except (ValueError, PateStabError) as exc:
        fail(str(exc))
    q = report["queries"]
    print(
        f"{report['aggregator']}: certified (ε, δ) = ({report['epsilon']:.4g}, {report['delta']:.3g}) "
        f"({report['accounting']}); k={report['votes']['num_teachers']}, "
        f"queries seen / answered / ⊥ / not asked: {q['seen']} / {q['answered']} / {q['abstained']} / {q['not_asked']}"
        f"{' (replayed from the ledger)' if report['reused'] else ''}"
    )
    print(f"noise: {_noise_line(report['noise'])}")
    print(f"labels: {report['outputs']['labels_npy']}, {report['outputs']['labels_csv']}")
    print(f"report: {Path(args.out) / 'report.json'}; ledger: {report['ledger']['path']}")
    return 0


def _student_path(run_dir: Path, name: str | None) -> Path:
    """The student file of a run folder: ``student.pt``, or one of a compare run's ``students/``."""
    if name is not None:
        path = run_dir / "students" / name
        if not path.is_file():
            raise FileNotFoundError(f"{path} not found (the students of this run: {_students(run_dir) or 'none'})")
        return path
    if (run_dir / "student.pt").is_file():
        return run_dir / "student.pt"
    found = _students(run_dir)
    if len(found) == 1:
        return run_dir / "students" / found[0]
    if found:
        raise ValueError(f"{run_dir} holds {len(found)} students (a compare run): choose one with --student, "
                         f"from {', '.join(found)}")  # fmt: skip
    raise FileNotFoundError(f"{run_dir} holds no student.pt and no students/ (not a finished run?)")


def _students(run_dir: Path) -> list[str]:
    folder = run_dir / "students"
    return sorted(p.name for p in folder.glob("*.pt")) if folder.is_dir() else []


def _table_options(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict[str, Any]:
    """``predict``'s options for a CSV input: what an undeclared category does, fallbacks, the encoding."""
    fallbacks = {}
    for item in args.fallback:
        column, sep, category = item.partition("=")
        if not sep or not column.strip():
            parser.error(f"--fallback expects COLUMN=CATEGORY, got {item!r}")
        fallbacks[column.strip()] = category.strip()
    if fallbacks and args.unknown_category != "fallback":
        parser.error("--fallback applies with --unknown-category fallback")
    unknown = "raise" if args.unknown_category == "refuse" else "fallback"
    return {"unknown_categories": unknown, "fallbacks": fallbacks or None, "encoding": args.encoding}


def _cmd_predict(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import csv

    from pate_stab.run.student_file import load_student

    try:
        path = _student_path(args.run_dir, args.student)
        student = load_student(path)
        x, names = student.read(args.input, **_table_options(parser, args))
        proba = student.predict_proba(x)
    except (ValueError, FileNotFoundError, TypeError) as exc:
        fail(str(exc))
    confidence, classes = proba.max(-1)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    with args.out.open("w", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(["input", "class", "probability"])
        for name, c, p in zip(names, classes.tolist(), confidence.tolist(), strict=True):
            writer.writerow([name, student.classes[c], f"{p:.4f}"])
    print(f"{len(names)} predictions by {path}: {args.out}")
    return 0


def _export_votes(config: Any, path: Path) -> None:
    from pate_stab.run.prepare import prepare
    from pate_stab.run.release_votes import export_votes
    from pate_stab.run.run_folder import run_lock

    with run_lock(config.run_dir):
        prep = prepare(config, check_budget=False)  # the run's own teachers, reloaded
    written = export_votes(prep.teachers, prep.task.public_x, path)
    print(f"teachers' votes on the public pool (PRIVATE, owner-only file): {written}")


def _follow_plan(parser: argparse.ArgumentParser, data: dict[str, Any], config: Any) -> Any:
    """A transfer on the user's files without an aggregator: the plan's recommendation
    (:func:`pate_stab.aggregation.plan.plan_run`, from n, C, m, ε and the settings alone) instead of
    the default stability releaser where that would rarely answer; it says so. The choice is published
    (report.json), so the plan reads the public size ``private_size_hint`` where the user states one,
    else the private count n, and takes the plan's k only from the public size (docs/plan.md: The
    default aggregator). An explicit ``--aggregator`` (or a recipe's) is always honoured, the plan's
    warning printed before training."""
    from pate_stab.aggregation.plan import DIRECT_LEARNER, plan_for_config
    from pate_stab.run.data import load_own_data

    own = load_own_data(config)  # the checked files; n is private: the plan goes to this terminal only
    # the choice lands in published files (report.json): from the public size N where the user states one
    public = config.direct.private_size_hint
    size = public if public is not None else int(own.private_y.shape[0])
    plan = plan_for_config(config, num_private=size, num_classes=own.num_classes)
    if plan.recommended == config.release.aggregator:
        return config
    chosen = dict(data, aggregator=plan.recommended)
    note = ""
    if plan.recommended_teachers is not None and "num_teachers" not in data:
        if public is not None:
            chosen["num_teachers"] = plan.recommended_teachers
        else:  # k = n / 30 would publish the private size, near enough: the user chooses k
            note += (
                f" The run keeps k={config.teachers.num_teachers}: the plan's k is computed from the private size, so "
                f"give --num-teachers {plan.recommended_teachers} yourself, or state the public size "
                "(--set private_size_hint=N) to have it chosen."
            )
    if plan.recommended == DIRECT_LEARNER and config.direct.private_size_hint is None:
        # a direct learner calibrates on a public size the user must state; until then, GNMax labels every query
        note += (f" {plan.recommended} needs the private set's public size (--set private_size_hint=N); without "
                 "it this run uses gnmax, which labels every query.")  # fmt: skip
        chosen["aggregator"] = "gnmax"
    print(
        f"no --aggregator given: following the plan's recommendation, {plan.recommendation}.{note} "
        "(--aggregator stability runs the stability releaser anyway.)",
        flush=True,
    )
    return _make_config(parser, chosen)


def _run_compare(args: argparse.Namespace, config: Any, compare_opts: dict[str, Any]) -> int:
    """``compare``: the sweep over ε and aggregators (the run's settings, the recipe's ``compare`` section, flags)."""
    from pate_stab.run.compare import run_compare

    epsilons = args.epsilons or compare_opts.get("epsilons") or [config.release.epsilon]
    aggregators = args.aggregators if args.aggregators is not None else compare_opts.get("aggregators")
    direct = args.direct if args.direct is not None else compare_opts.get("direct") or []
    repeats = args.repeats or compare_opts.get("repeats") or 1
    out = run_compare(config, epsilons=epsilons, aggregators=aggregators, repeats=repeats, direct=direct)
    print(
        f"{config.data.dataset}: k={out['num_teachers']} teachers, m={out['num_queries']} queries "
        f"(query selection: {config.selection.query_selection}), δ={config.release.delta:g}; "
        f"mean teacher acc {_fmt(out['private']['teachers']['mean_accuracy'])}, "
        f"plurality acc {_fmt(out['private']['teachers']['plurality_accuracy'])} (private diagnostics, "
        "private_compare.json: never publish)"
    )
    print(out["table"])
    print(f"plot: {out['plot']}")
    if args.export_votes is not None:
        _export_votes(config, args.export_votes)
    return 0


def _print_direct_report(report: dict[str, Any]) -> None:
    """A direct learner's run: its certified (ε, δ), test accuracy, note, files and warnings."""
    print(
        f"{report['aggregator']} (direct, {report['neighbouring'].replace('_', '-')}): certified (ε, δ) = "
        f"({report['epsilon']:.4g}, {report['delta']:.3g}); test accuracy {_fmt(report['test_accuracy'])}"
        f"{' (replayed from the ledger)' if report['row']['reused'] else ''}"
    )
    print(report["row"]["note"])
    print(f"report: {Path(report['run_dir']) / 'report.json'}; ledger: {report['ledger']['path']}")
    for message in report.get("warnings", []):
        print(f"WARNING: {message}")


def _run_transfer(parser: argparse.ArgumentParser, args: argparse.Namespace, data: dict[str, Any], config: Any) -> int:
    """``demo`` and ``transfer``: the plan, the run, its report (a stop, a direct learner, a partial release)."""
    from pate_stab.run.config import DIRECT_LEARNER_NAMES
    from pate_stab.run.transfer import run_transfer

    if args.command == "transfer" and "aggregator" not in data and config.data.dataset == "files":
        config = _follow_plan(parser, data, config)  # no aggregator chosen: the plan's, which it expects to answer
    if config.release.aggregator in DIRECT_LEARNER_NAMES:  # the teachers' plan does not apply: what the learner does
        from pate_stab.run.direct import direct_plan_text

        print(direct_plan_text(config), flush=True)

    report = run_transfer(config, on_plan=lambda plan: print(plan.text(), flush=True))
    if report["status"] not in ("complete", "partial"):
        print(f"stopped after stage '{config.execution.stop_after}' in {report['run_dir']}; rerun to resume")
        return 0
    if report.get("kind") == "direct":
        _print_direct_report(report)
        return 0
    _print_report(report)
    if report["status"] == "partial":
        p = report["partial_release"]
        print(
            f"PARTIAL release, finished from the ledger: {p['queries_released']} queries from "
            f"{p['recorded_calls']} recorded call(s), with the rest of the queries not asked and nothing spent "
            "now (README: Run the main job)."
        )
    if getattr(args, "export_votes", None) is not None:
        _export_votes(config, args.export_votes)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "calibrate":
        return _cmd_calibrate(parser, args)
    if args.command == "plan":
        return _cmd_plan(parser, args)
    _quiet()
    if args.command in ("demo", "transfer", "compare"):
        check_early(args)  # a target ε and the user's files, before torch is imported
    use_budget_dir(args)
    if args.command == "budget":
        return cmd_budget(parser, args)
    if args.command == "predict":
        return _cmd_predict(parser, args)
    if args.command == "release":
        return _cmd_release(parser, args)
    from pate_stab.run.progress import print_stage_lines

    print_stage_lines()  # one line per finished stage, also under --no-progress and into a pipe
    from pate_stab.errors import PateStabError

    base = DEMO if args.command == "demo" else {}
    data = _config_dict(parser, args, base)
    compare_opts = data["_compare"]
    config = _make_config(parser, data)
    try:
        if args.command == "compare":
            return _run_compare(args, config, compare_opts)
        return _run_transfer(parser, args, data, config)
    except (ValueError, FileNotFoundError, PateStabError) as exc:
        fail(str(exc))


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
