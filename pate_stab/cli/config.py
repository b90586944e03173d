"""The ``pate-stab`` command line's configuration flags: the demo's settings, the flags of
``demo``, ``transfer`` and ``compare``, and the step from parsed flags (and a recipe YAML) to a
:class:`~pate_stab.run.config.TransferConfig`. Used by :mod:`pate_stab.cli.commands`.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from pate_stab.cli.checks import fail

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


def _pca_dim(text: str) -> int | float:
    """``--pca-dim``: an integer is a component count, a number in (0, 1) a variance share."""
    try:
        return int(text)
    except ValueError:
        return float(text)


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
    ("--encoding", "encoding", str, "CSV data: the files' text encoding (default utf-8; e.g. latin-1, cp1252, utf-16)"),
    ("--image-shape", "image_shape", str, "image folders: CHANNELS,HEIGHT,WIDTH (default: the public pool's)"),
    ("--data-dir", "data_dir", str, "folder with the data set's files"),
    ("--features", "features", str, "raw, pca, scattering, ssl or scattering+ssl (fitted on the public pool only)"),
    (
        "--pca-dim",
        "pca_dim",
        _pca_dim,
        "PCA components (an integer) or the share of the public pool's variance to keep (0 < share < 1)",
    ),
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
    (
        "--budget-epsilon",
        "budget_epsilon",
        float,
        "the run folder's budget cap on the total ε: the first run records it (default: the first plan's total); "
        "a rerun may lower it, never raise it; a spend past it is refused before any noise is drawn",
    ),
    ("--budget-delta", "budget_delta", float, "the run folder's budget cap on the total δ (as --budget-epsilon)"),
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
    (
        "--partition-key",
        "partition_key",
        str,
        "content or record_id (ids supplied with the data); default record_id where the CSV schema declares an "
        "id_column, content otherwise",
    ),
    (
        "--privacy-unit",
        "privacy_unit",
        str,
        "record (default: a record's inputs and label) or label (label differential privacy; docs/label_privacy.md)",
    ),
    ("--label-queries", "label_queries", str, "label privacy: pool (default), private or both (docs/label_privacy.md)"),
    ("--query-selection", "query_selection", str, "first (pool order), student-confidence or spread (selection.py)"),
    ("--selection-round-size", "selection_round_size", int, "student-confidence / spread: first and smallest round"),
    ("--selection-coverage", "selection_coverage", float, "spread: share of a round for uncovered confident points"),
    (
        "--selection-representatives",
        "selection_representatives",
        str,
        "student-confidence / spread: k-means cluster stands for: centroid (nearest member) or dense (densest)",
    ),
    ("--student-method", "student_method", str, "supervised, spread (label spreading) or fixmatch (CNN on images)"),
    ("--fixmatch-steps", "fixmatch_steps", int, "fixmatch: optimiser steps (default: the preset's)"),
    ("--bottom", "bottom", str, "drop or random: what the student does with ⊥"),
    ("--pseudo-label-rounds", "pseudo_label_rounds", int, "semi-supervised rounds on the unlabelled pool"),
    ("--student-model", "student_model", str, "logistic, mlp or cnn"),
    ("--student-epochs", "student_epochs", int, "student epochs"),
    ("--student-select", "student_select", str, "none or cv: student_lr / spread_threshold by CV on released labels"),
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
    p.add_argument("--pool-labels", dest="pool_labels", action="store_const", const=True, default=None,
                   help="own files: the public pool's file holds true labels, for reporting only")  # fmt: skip
    p.add_argument("--allow-empty-student", dest="allow_empty_student", action="store_const", const=True,
                   default=None, help="keep a student trained on no released label (else: stop, non-zero)")  # fmt: skip
    p.add_argument("--finish-from-ledger", dest="finish_from_ledger", action="store_const", const=True, default=None,
                   help="finish a run whose release was interrupted from the outputs its ledger recorded: no "
                   "noise is drawn, nothing spent; other queries are not asked, the report says partial")  # fmt: skip
    p.add_argument("--progress", dest="progress", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                   help="any other configuration key, flat (epsilon=2) or with its section (release.epsilon=2); "
                   "YAML syntax for the value")  # fmt: skip


def _config_dict(parser: argparse.ArgumentParser, args: argparse.Namespace, base: dict[str, Any]) -> dict[str, Any]:
    import yaml

    from pate_stab.run.config import flat_key, flat_settings

    data = dict(base)
    extra: dict[str, Any] = {}
    if getattr(args, "config", None) is not None:
        if not args.config.is_file():
            fail(f"config file {args.config} not found")
        loaded = yaml.safe_load(args.config.read_text()) or {}
        if not isinstance(loaded, dict):
            fail(f"{args.config} must hold a mapping of configuration keys")
        extra = loaded.pop("compare", None) or {}
        try:  # sections (release: {epsilon: 2}) or flat names: every setting under its flat name
            data.update(flat_settings(loaded))
        except ValueError as exc:
            fail(f"{args.config}: {exc}")
    for _, dest, _, _ in _FLAGS:
        if getattr(args, dest) is not None:
            data[dest] = getattr(args, dest)
    for dest in (
        "threat_model",
        "allow_unanswerable",
        "allow_empty_student",
        "pool_labels",
        "progress",
        "finish_from_ledger",
    ):
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
        try:  # KEY: a flat name (epsilon) or with its section (release.epsilon)
            name = flat_key(key.strip().replace("-", "_"))
        except ValueError as exc:
            fail(f"--set {item}: {exc}")
        data[name] = yaml.safe_load(value)
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
        fail(f"unknown dataset {dataset!r}; choose from {choices} (arrays: the Python API)")
    if dataset not in ("synthetic", "files") and not data.get("download"):
        if not data.get("data_dir"):
            fail(f"dataset {dataset!r} needs --data-dir (a folder with its files)")
        if not Path(data["data_dir"]).is_dir():
            fail(f"data directory {data['data_dir']} does not exist")
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels", "classes", "image_shape"):
        if key in data and isinstance(data[key], list):
            data[key] = tuple(data[key])
    try:
        return TransferConfig.from_dict(data)
    except (TypeError, ValueError) as exc:
        fail(str(exc))
