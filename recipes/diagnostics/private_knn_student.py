"""Why a spread student learns little from accurate Private-kNN labels: which queries were answered, and
what the student makes of the same queries with their true labels.

Runs (or, in an existing run folder, replays: the release recorded in its ledger is reused, nothing is
spent twice) one ``transfer`` from a recipe with ``--set`` overrides, then measures on the public pool:

* the true classes of the queries asked, of the answered ones and of the ⊥ ones, and the released classes;
* the spread student (the run's own settings) refitted three times on the same queries: with the released
  labels, with the true labels on the answered queries (same ⊥), and with the true labels on every query.
  Each line gives how many pool points the spread adds, how many of them it labels right, the class counts
  of the student's training set and the student's accuracy on the evaluation split.

The true labels are the public pool's, read for this measurement only (as ``label_acc``); no setting is
chosen from them. Everything printed and written is computed from released outputs and public data.

Usage (from the project root)::

    python recipes/diagnostics/private_knn_student.py --config recipes/configs/mnist_private_knn.yaml \\
        --run-name knn_diag --set features=pca --set student_select=none --set epsilon=1 --out knn_diag.json
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import torch
import yaml
from pate_stab.run.selection import answered_mask

from pate_stab.run.config import TransferConfig
from pate_stab.run.student import fit_student, student_accuracies
from pate_stab.run.student_base import spread_pseudo_labels, student_targets
from pate_stab.run.transfer import TransferResult, transfer_result


class _Labels:
    """A release's labels at its pool positions (what the student stage reads)."""

    def __init__(self, labels: torch.Tensor, index: torch.Tensor) -> None:
        self.labels, self.index, self.soft = labels, index, False


def _counts(y: torch.Tensor, c: int) -> list[int]:
    return torch.bincount(y.long(), minlength=c).tolist()


def _probe(result: TransferResult, labels: torch.Tensor, seed: int) -> dict[str, Any]:
    prep, index = result.prep, result.release.index
    c, truth = prep.task.num_classes, prep.task.public_y
    release = _Labels(labels, index)
    targets = student_targets(labels, soft=False, num_classes=c, bottom="drop",
                              generator=torch.Generator().manual_seed(seed))  # fmt: skip
    seeds = index[targets.index]
    added, added_labels = spread_pseudo_labels(prep, seeds, targets, index[~answered_mask(labels)])
    train = torch.cat([targets.targets.long(), added_labels.long()])
    student, _ = fit_student(prep, release, generator=torch.Generator().manual_seed(seed + 1),
                             bottom_generator=torch.Generator().manual_seed(seed + 2))  # fmt: skip
    return {
        "seeds": int(seeds.numel()),
        "spread_added": int(added.numel()),
        "spread_added_correct": float((added_labels == truth[added]).float().mean()) if added.numel() else None,
        "train_class_counts": _counts(train, c),
        "student": student_accuracies(prep, student, release)["student"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--run-name", required=True)
    parser.add_argument("--checkpoints-dir", default="checkpoints")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--seed", type=int, default=0, help="seed of the refitted students")
    parser.add_argument("--out", default=None)
    args = parser.parse_args(argv)
    data = yaml.safe_load(open(args.config))
    data.pop("compare", None)
    flat: dict[str, Any] = {}
    for key, value in data.items():
        flat.update(value if isinstance(value, dict) else {key: value})
    for item in args.set:
        key, _, value = item.partition("=")
        flat[key] = yaml.safe_load(value)
    flat |= {"run_name": args.run_name, "checkpoints_dir": args.checkpoints_dir, "progress": False}
    result = transfer_result(TransferConfig.from_dict(flat))
    if not isinstance(result, TransferResult):
        raise SystemExit(f"the run stopped early: {result}")
    release, c = result.release, result.prep.task.num_classes
    truth = result.prep.task.public_y[release.index]
    answered = answered_mask(release.labels)
    oracle_answered = release.labels.clone()
    oracle_answered[answered] = truth[answered]
    out = {
        "run": args.run_name,
        "queries": int(truth.numel()),
        "answered": int(answered.sum()),
        "label_acc": float((release.labels[answered] == truth[answered]).float().mean()) if answered.any() else None,
        "true_classes": {
            "asked": _counts(truth, c),
            "answered": _counts(truth[answered], c),
            "bottom": _counts(truth[~answered], c),
        },  # fmt: skip
        "released_classes": _counts(release.labels[answered], c),
        "student_as_run": result.report["student"]["test_accuracy"],
        "refit": {
            "released labels": _probe(result, release.labels, args.seed),
            "true labels on the answered queries": _probe(result, oracle_answered, args.seed),
            "true labels on every query": _probe(result, truth.clone(), args.seed),
        },
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
