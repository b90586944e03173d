"""The student's ceiling on as many TRUE labels as a release answered (a private diagnostic).

Under the stability releaser the student learns from the answered queries only, so its accuracy is
bounded by what the same student reaches from the same number of *true* labels. This script fits
the run's student (same settings, same query pool, same unlabelled data) on ``--answered`` query-pool
points drawn uniformly at random with their true labels, ``--repeats`` times, and reports the
evaluation accuracy. It reads true labels of the query pool (under label privacy with
``label_queries: private|both``, those are private labels) and so is a diagnostic: it chooses no
setting, and its output is written to ``<run>/private_ceiling.json`` (mode 0600), never published.

    OMP_NUM_THREADS=1 PYTHONPATH=. python recipes/diagnostics/label_dp_ceiling.py \
        --config recipes/configs/mnist_label_dp.yaml --answered 700 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import time

import torch
import yaml

from pate_stab.rng import spawn_generators
from pate_stab.run.config import TransferConfig, flat_settings
from pate_stab.run.prepare import prepare
from pate_stab.run.release import Release
from pate_stab.run.run_folder import write_private_json
from pate_stab.run.student import fit_student, student_accuracies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--answered", type=int, nargs="+", required=True, help="label counts (each a ceiling)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=12345, help="the random subsets' seed")
    args = parser.parse_args()
    data = yaml.safe_load(open(args.config).read())
    data.pop("compare", None)
    data = flat_settings(data)  # the recipe's sections (or flat names) by flat name
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    config = TransferConfig.from_dict(data)
    prep = prepare(config, check_budget=False, with_teachers=False)
    task = prep.task
    truth = task.pool_labels_private if task.pool_labels_private is not None else task.public_y
    if truth is None:
        raise SystemExit("the query pool has no true labels to measure a ceiling with")
    out = {"run": config.run_name, "note": __doc__.splitlines()[0], "student_method": config.student.student_method,
           "rows": []}  # fmt: skip
    gens = spawn_generators(torch.Generator().manual_seed(args.seed), 3 * len(args.answered) * args.repeats)
    i = 0
    for n in args.answered:
        for rep in range(args.repeats):
            index = torch.randperm(truth.shape[0], generator=gens[i])[:n]
            release = Release("true-labels", truth[index].clone(), False, {"answered": n}, "ceiling", False, index, {})
            t0 = time.perf_counter()
            student, _ = fit_student(prep, release, generator=gens[i + 1], bottom_generator=gens[i + 2])
            acc = student_accuracies(prep, student, release)["student"]
            row = {"labels": n, "repeat": rep, "classes": int(truth[index].unique().numel()), "student_acc": acc,
                   "seconds": time.perf_counter() - t0}  # fmt: skip
            print(json.dumps(row), flush=True)
            out["rows"].append(row)
            i += 3
    write_private_json(prep.run_dir / "private_ceiling.json", out)


if __name__ == "__main__":
    main()
