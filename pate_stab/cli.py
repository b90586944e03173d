"""The ``pate-stab`` command line: demo, transfer, compare, release, plan, calibrate.

    pate-stab demo                                   # synthetic task, no data, under a minute
    pate-stab transfer --config recipes/mnist_quick.yaml [--epsilon 4 ...]
    pate-stab compare --config recipes/mnist_quick.yaml --epsilons 2 4 8
    pate-stab compare --config recipes/mnist_quick.yaml --query-selection student-confidence
    pate-stab release --votes votes.npy --aggregator gnmax --epsilon 8 [--public-inputs x.npy]
    pate-stab plan --num-private 1200 --num-classes 10 --num-queries 450 --epsilon 8 [--num-teachers 150]
    pate-stab calibrate --epsilon 8 --delta 1e-5 --num-queries 300 --max-unstable 10
    pate-stab transfer --private mine.npz --public pool.npz --evaluation test.npz --classes 3
    pate-stab transfer --private train/ --public pool/ --evaluation test/   # image folders
    pate-stab transfer --private a.csv --public b.csv --schema schema.json  # CSV with a public schema

Every run writes ``<checkpoints-dir>/<run-name>/`` (config.json, teachers/, ledger.jsonl,
report.json or compare.{json,txt,png}). Flags given on the command line override the YAML.
Usage errors (unknown data set, missing data directory, your own data not fitting — lengths,
labels, NaN, image sizes, CSV columns —, a budget too small for the stability releaser to answer
anything) exit with status 2 before any training or spending, and say what to change.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["main", "build_parser"]

# the synthetic demo: k large enough that the stability releaser answers most queries at ε = 8
DEMO = {
    "run_name": "demo",
    "dataset": "synthetic",
    "num_classes": 3,
    "dim": 10,
    "separation": 5.0,
    "num_teachers": 800,
    "num_private": 20000,
    "num_public": 2000,
    "num_eval": 2000,
    "teacher_model": "logistic",
    "aggregator": "stability",
    "calibration": "tight",
    "epsilon": 8.0,
    "delta": 1e-5,
    "max_unstable": 10,
    "num_queries": 300,
    "student_model": "mlp",
    "student_epochs": 20,
}

# flag → (config key, type, help)
_FLAGS: list[tuple[str, str, Any, str]] = [
    ("--run-name", "run_name", str, "run folder name under --checkpoints-dir"),
    ("--checkpoints-dir", "checkpoints_dir", str, "where run folders live (default: checkpoints)"),
    ("--seed", "seed", int, "seed of every random stage"),
    ("--dataset", "dataset", str, "synthetic, mnist, fashion_mnist, svhn, cifar10, adult, or files (--private ...)"),
    ("--private", "private", str, "your private set: .npz/.pt/.npy (x, y), .csv (with --schema) or an image folder"),
    ("--public", "public", str, "your public pool (no labels needed): same kind; images in a flat folder"),
    ("--evaluation", "evaluation", str, "your evaluation set (labelled, not private), optional"),
    ("--schema", "schema", str, "CSV data: the public schema file (JSON or YAML)"),
    ("--image-shape", "image_shape", str, "image folders: CHANNELS,HEIGHT,WIDTH (default: the public pool's)"),
    ("--data-dir", "data_dir", str, "folder with the data set's files"),
    ("--features", "features", str, "raw, pca, scattering or ssl (fitted on the public pool only)"),
    ("--pca-dim", "pca_dim", int, "PCA components for --features pca"),
    ("--num-teachers", "num_teachers", int, "k"),
    ("--teacher-model", "teacher_model", str, "logistic, mlp, cnn, or propagate (public-pool graph)"),
    ("--teacher-epochs", "teacher_epochs", int, "epochs over each teacher's shard (default: sized in steps)"),
    (
        "--aggregator",
        "aggregator",
        str,
        "stability, stability-soft, lnmax, gnmax, confident-gnmax, or a direct "
        "learner (objective-softmax, output-softmax, objective-ovr, output-ovr, dpsgd-linear, dpsgd-cnn)",
    ),
    ("--epsilon", "epsilon", float, "target ε"),
    ("--delta", "delta", float, "target δ"),
    ("--max-unstable", "max_unstable", int, "T, the ⊥ allowed before the stability releaser halts"),
    ("--num-queries", "num_queries", int, "m, public queries to label"),
    ("--calibration", "calibration", str, "paper or tight (stability releaser)"),
    (
        "--releaser-noise",
        "releaser_noise",
        str,
        "secure (default: exact noise from the OS) or seeded (research "
        "only: no privacy against anyone who knows the seed)",
    ),
    ("--neighbouring", "neighbouring", str, "add_remove (default) or replace_one: the guarantee's relation"),
    ("--partition-key", "partition_key", str, "content (default) or record_id (ids supplied with the data)"),
    ("--query-selection", "query_selection", str, "first (pool order), student-confidence or spread (selection.py)"),
    ("--selection-round-size", "selection_round_size", int, "student-confidence / spread: first and smallest round"),
    ("--selection-coverage", "selection_coverage", float, "spread: share of a round for uncovered confident points"),
    ("--student-method", "student_method", str, "supervised, spread (label spreading) or fixmatch (CNN on images)"),
    ("--fixmatch-steps", "fixmatch_steps", int, "fixmatch: optimiser steps (default: the preset's)"),
    ("--bottom", "bottom", str, "drop or random: what the student does with ⊥"),
    ("--pseudo-label-rounds", "pseudo_label_rounds", int, "semi-supervised rounds on the unlabelled pool"),
    ("--student-model", "student_model", str, "logistic, mlp or cnn"),
    ("--student-epochs", "student_epochs", int, "student epochs"),
    ("--accelerator", "accelerator", str, "auto, cpu, gpu, ..."),
    ("--stop-after", "stop_after", str, "teachers or release: stop after that stage (resume later)"),
]


def _add_config_flags(p: argparse.ArgumentParser) -> None:
    for flag, dest, typ, help_ in _FLAGS:
        p.add_argument(flag, dest=dest, type=typ, default=None, help=help_)
    p.add_argument(
        "--label-only",
        dest="threat_model",
        action="store_const",
        const="label-only",
        default=None,
        help="BTT18 §4.2 (ii): only labels are private; part of the training set becomes the public pool",
    )
    p.add_argument("--classes", dest="classes", nargs="+", default=None, metavar="C | NAME",
                   help="own data: the number of classes, or their names in label order")  # fmt: skip
    p.add_argument("--allow-unanswerable", dest="allow_unanswerable", action="store_const", const=True, default=None)
    p.add_argument("--progress", dest="progress", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any other configuration key (YAML syntax for the value)")  # fmt: skip


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
    compare.add_argument("--direct", nargs="*", default=None, metavar="LEARNER",
                         help="direct private learners trained on the private split, as rows beside the aggregators: "
                         "objective-softmax, output-softmax, objective-ovr, output-ovr, dpsgd-linear, dpsgd-cnn "
                         "(images only; epochs: --set dpsgd_cnn_epochs=N)")  # fmt: skip
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
    rel.add_argument("--layout", default="predictions", choices=("predictions", "counts", "scores"),
                     help="predictions: k × n teacher labels (PATE); counts: n × C vote counts; scores: k × n "
                     "(or k × n × 2) scores in [0, 1] for stability-soft")  # fmt: skip
    rel.add_argument("--aggregator", required=True, help="stability, stability-paper, stability-tight, "
                     "stability-soft, lnmax, gnmax, confident-gnmax")  # fmt: skip
    rel.add_argument("--epsilon", type=float, required=True, help="target ε (also the output folder's budget)")
    rel.add_argument("--delta", type=float, default=1e-5, help="target δ")
    rel.add_argument("--num-classes", type=int, default=None, help="C (predictions; default: largest label + 1)")
    rel.add_argument("--num-queries", type=int, default=None, help="m calibrated for (default: the file's n)")
    rel.add_argument("--max-unstable", type=int, default=10, help="T, the ⊥ before the stability releaser halts")
    rel.add_argument("--calibration", default="tight", choices=("paper", "tight"))
    rel.add_argument("--noise", default="secure", choices=("secure", "seeded"),
                     help="secure (default: exact noise from the OS) or seeded (reproducible research only: no "
                     "privacy against anyone who knows the seed)")  # fmt: skip
    rel.add_argument("--gamma", type=float, default=0.1, help="stability-soft: the discretisation γ")
    rel.add_argument("--confident-threshold", type=float, default=0.6, help="Confident-GNMax threshold / k")
    rel.add_argument("--neighbouring", default="add_remove", choices=("add_remove", "replace_one"))
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
    plan.add_argument("--calibration", default="tight", choices=("paper", "tight"))
    plan.add_argument("--teachers-changed", type=int, default=1, choices=(1, 2),
                      help="teachers one neighbouring data set changes (2: replace-one over content keys)")  # fmt: skip
    plan.add_argument("--confident-threshold", type=float, default=0.6, help="Confident-GNMax threshold / k")
    cal = sub.add_parser("calibrate", help="stability releaser calibrations (paper and tight)")
    cal.add_argument("--epsilon", type=float, required=True)
    cal.add_argument("--delta", type=float, default=1e-5)
    cal.add_argument("--num-queries", type=int, required=True)
    cal.add_argument("--max-unstable", type=int, required=True)
    cal.add_argument("--soft", action="store_true", help="soft-label releaser (Alg 6/8)")
    return parser


def _config_dict(parser: argparse.ArgumentParser, args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    import yaml

    data = dict(base)
    extra: dict[str, Any] = {}
    if getattr(args, "config", None) is not None:
        if not args.config.is_file():
            parser.error(f"config file {args.config} not found")
        loaded = yaml.safe_load(args.config.read_text()) or {}
        if not isinstance(loaded, dict):
            parser.error(f"{args.config} must hold a mapping of configuration keys")
        extra = loaded.pop("compare", None) or {}
        data.update(loaded)
    for _, dest, _, _ in _FLAGS:
        if getattr(args, dest) is not None:
            data[dest] = getattr(args, dest)
    for dest in ("threat_model", "allow_unanswerable", "progress"):
        if getattr(args, dest) is not None:
            data[dest] = getattr(args, dest)
    if args.classes is not None:
        one = args.classes[0]
        data["classes"] = int(one) if len(args.classes) == 1 and one.isdigit() else list(args.classes)
    if isinstance(data.get("image_shape"), str):
        try:
            data["image_shape"] = [int(v) for v in data["image_shape"].split(",")]
        except ValueError:
            parser.error(f"--image-shape takes CHANNELS,HEIGHT,WIDTH, got {data['image_shape']!r}")
    if data.get("private") is not None and "dataset" not in data:
        data["dataset"] = "files"
    for item in args.overrides:
        key, sep, value = item.partition("=")
        if not sep:
            parser.error(f"--set expects KEY=VALUE, got {item!r}")
        data[key.strip().replace("-", "_")] = yaml.safe_load(value)
    from pate_stab.run.progress import default_progress

    data.setdefault("progress", default_progress())  # on in a terminal, off under CI or when piped
    data["_compare"] = extra
    return data


def _make_config(parser: argparse.ArgumentParser, data: dict[str, Any]):
    from pate_stab.run.config import DATASETS, TransferConfig

    data = {k: v for k, v in data.items() if k != "_compare"}
    dataset = data.get("dataset", "synthetic")
    if dataset not in DATASETS or dataset == "arrays":
        choices = ", ".join(d for d in DATASETS if d != "arrays")
        parser.error(f"unknown dataset {dataset!r}; choose from {choices} (arrays: the Python API)")
    if dataset not in ("synthetic", "files") and not data.get("download"):
        if not data.get("data_dir"):
            parser.error(f"dataset {dataset!r} needs --data-dir (a folder with its files)")
        if not Path(data["data_dir"]).is_dir():
            parser.error(f"data directory {data['data_dir']} does not exist")
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels", "classes", "image_shape"):
        if key in data and isinstance(data[key], list):
            data[key] = tuple(data[key])
    try:
        return TransferConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))


def _fmt(v: Any, spec: str = ".4f") -> str:
    return "-" if v is None else format(v, spec)


def _relation_line(privacy: dict[str, Any] | None) -> str:
    if not privacy:
        return "-"
    teachers = privacy["teachers_changed_per_neighbour"]
    return (
        f"{privacy['neighbouring'].replace('_', '/')} ({privacy['partition_key']} partition keys; "
        f"{teachers} teacher{'s' if teachers > 1 else ''} per neighbour)"
    )


def _print_report(r: dict[str, Any]) -> None:
    diagnostics = Path(r["run_dir"]) / "private_diagnostics.json"
    d = json.loads(diagnostics.read_text()) if diagnostics.is_file() else {}
    q, t = r["queries"], d.get("teachers", {})
    not_asked = q.get("not_asked", 0)
    halted = f" (halted: {not_asked} not asked)" if q["halted"] else ""
    lines = [
        ("dataset", f"{r['dataset']} ({r['threat_model']['name']})"),
        ("teachers", f"k={r['num_teachers']} {r['teacher_model']['kind']}"),
        (
            "mean teacher / plurality acc",
            f"{_fmt(t.get('mean_accuracy'))} / {_fmt(t.get('plurality_accuracy'))} (private diagnostic)",
        ),  # fmt: skip
        ("aggregator", f"{r['aggregator']}"),
        ("query selection", _selection_line(r["query_selection"])),
        ("certified (ε, δ)", f"({r['epsilon']:.4g}, {r['delta']:.3g})"),
        ("noise", _noise_line(r.get("noise", {}))),
        ("queries seen / answered / ⊥", f"{q['seen']} / {q['answered']} / {q['abstained']}{halted}"),
        ("privacy relation", _relation_line(r.get("privacy"))),
        ("label accuracy (answered)", _fmt(r["label_accuracy_answered"])),
        ("student test accuracy", _fmt(r["student"]["test_accuracy"])),
        ("student acc, unlabelled pool", _fmt(r["student"].get("unlabelled_pool_accuracy"))),
    ]
    # figures that need labels the run does not have (pool without labels, no evaluation set) are left out
    if not r.get("pool_labelled", True):
        lines = [(k, v) for k, v in lines if k not in ("label accuracy (answered)", "student acc, unlabelled pool")]
    if r["student"]["test_accuracy"] is None:
        lines = [(k, v) for k, v in lines if k not in ("mean teacher / plurality acc", "student test accuracy")]
    lines += [
        ("wall time (s)", " ".join(f"{k}={v:.1f}" for k, v in d.get("wall_time_s", {}).items())),
        ("report (published)", str(Path(r["run_dir"]) / "report.json")),
        ("private diagnostics", f"{diagnostics} (mode 0600: never publish)"),
        ("ledger", r["ledger"]["path"]),
    ]
    width = max(len(k) for k, _ in lines)
    for k, v in lines:
        print(f"{k:<{width}}  {v}")


def _noise_line(noise: dict[str, Any]) -> str:
    if noise.get("noise") == "secure":
        return "secure (exact discrete noise from the OS's CSPRNG)"
    from pate_stab.privacy.secure_noise import SEEDED_NOISE_WARNING

    return f"SEEDED — {noise.get('warning', SEEDED_NOISE_WARNING)}"


def _selection_line(sel: dict[str, Any]) -> str:
    rounds = sel.get("rounds", [])
    if sel["strategy"] == "first":
        return "first (pool order)"
    return f"{sel['strategy']} ({len(rounds)} rounds: {'/'.join(str(r['size']) for r in rounds)} queries)"


def _quiet() -> None:
    # Lightning's banners; its warnings about deliberate choices and torch's sparse-tensor notices
    # are filtered where the package triggers them (quiet_lightning, features.propagation)
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    logging.getLogger("lightning.fabric").setLevel(logging.WARNING)


def _cmd_calibrate(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pate_stab.privacy.calibration import calibrate
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
                parser.error(str(exc))
            print(f"  {mode:<6} unavailable: {exc}")
            continue
        need = teachers_for_unanimous_answer(cal)
        print(f"  {mode:<6} {cal}")
        print(f"  {'':<6} a unanimous vote is answered w.p. ≥ 0.95 from k ≈ {need} teachers")
    return 0


def _cmd_plan(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from pate_stab.run.plan import plan_run

    try:
        plan = plan_run(
            num_private=args.num_private, num_classes=args.num_classes, num_queries=args.num_queries,
            epsilon=args.epsilon, delta=args.delta, max_unstable=args.max_unstable, num_teachers=args.num_teachers,
            calibration=args.calibration, teachers_changed=args.teachers_changed,
            confident_fraction=args.confident_threshold,
        )  # fmt: skip
    except (TypeError, ValueError) as exc:
        parser.error(str(exc))
    print(plan.text())
    return 0


def _cmd_release(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
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
            teachers_changed=args.teachers_changed, seed=args.seed, public_inputs=args.public_inputs,
            query_selection=args.query_selection, allow_unanswerable=args.allow_unanswerable, progress=progress,
        )  # fmt: skip
    except (ValueError, PateStabError) as exc:
        parser.error(str(exc))
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


def _export_votes(config: Any, path: Path) -> None:
    from pate_stab.run.prepare import prepare
    from pate_stab.run.release_votes import export_votes

    prep = prepare(config, check_budget=False)  # the run's own teachers, reloaded
    written = export_votes(prep.teachers, prep.task.public_x, path)
    print(f"teachers' votes on the public pool (PRIVATE, owner-only file): {written}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "calibrate":
        return _cmd_calibrate(parser, args)
    if args.command == "plan":
        return _cmd_plan(parser, args)
    _quiet()
    if args.command == "release":
        return _cmd_release(parser, args)
    from pate_stab.errors import PateStabError

    base = DEMO if args.command == "demo" else {}
    data = _config_dict(parser, args, base)
    compare_opts = data["_compare"]
    config = _make_config(parser, data)
    try:
        if args.command == "compare":
            from pate_stab.run.compare import run_compare

            epsilons = args.epsilons or compare_opts.get("epsilons") or [config.epsilon]
            aggregators = args.aggregators if args.aggregators is not None else compare_opts.get("aggregators")
            direct = args.direct if args.direct is not None else compare_opts.get("direct") or []
            repeats = args.repeats or compare_opts.get("repeats") or 1
            out = run_compare(config, epsilons=epsilons, aggregators=aggregators, repeats=repeats, direct=direct)
            print(
                f"{config.dataset}: k={out['num_teachers']} teachers, m={out['num_queries']} queries "
                f"(query selection: {config.query_selection}), δ={config.delta:g}; "
                f"mean teacher acc {_fmt(out['private']['teachers']['mean_accuracy'])}, "
                f"plurality acc {_fmt(out['private']['teachers']['plurality_accuracy'])} (private diagnostics, "
                "private_compare.json: never publish)"
            )
            print(out["table"])
            print(f"plot: {out['plot']}")
            if args.export_votes is not None:
                _export_votes(config, args.export_votes)
            return 0
        from pate_stab.run.transfer import run_transfer

        report = run_transfer(config, on_plan=lambda plan: print(plan.text(), flush=True))
        if report["status"] != "complete":
            print(f"stopped after stage '{config.stop_after}' in {report['run_dir']}; rerun to resume")
            return 0
        if report.get("kind") == "direct":
            print(
                f"{report['aggregator']} (direct, {report['neighbouring'].replace('_', '-')}): certified (ε, δ) = "
                f"({report['epsilon']:.4g}, {report['delta']:.3g}); test accuracy {_fmt(report['test_accuracy'])}"
                f"{' (replayed from the ledger)' if report['row']['reused'] else ''}; {report['row']['note']}"
            )
            print(f"report: {Path(report['run_dir']) / 'report.json'}; ledger: {report['ledger']['path']}")
            return 0
        _print_report(report)
        if getattr(args, "export_votes", None) is not None:
            _export_votes(config, args.export_votes)
        return 0
    except (ValueError, FileNotFoundError, PateStabError) as exc:
        parser.error(str(exc))
    return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
