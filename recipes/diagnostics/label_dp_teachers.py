"""A run's teachers rebuilt with its secret key: their accuracy and the vote shares at the stability first round.

A private diagnostic for a ``pate-stab compare`` run folder (written for the label-privacy runs,
docs/label_privacy.md): the teachers are rebuilt from the run's config in a new folder
``<run>_teacherdiag`` holding a copy of the run's ``private_key`` (so the shards, and the teachers,
are the run's), then

* their mean accuracy and the plurality vote's accuracy on the evaluation split
  (:func:`pate_stab.run.student.teacher_accuracies`, what ``compare`` writes to ``private_compare.json``);
* for each stability release in the run's ledger, the plurality's share of the votes at each point of
  its first selection round, beside the released output (⊥ or a label): how far the representatives'
  agreement lies from what the releaser answers;
* with ``--ceiling N``, the run's student fitted on N query-pool points drawn at random with their
  true labels (``recipes/diagnostics/label_dp_ceiling.py``'s procedure and seed), ``--repeats`` times.

It reads private labels and votes, so it chooses no setting and writes only
``<run>_teacherdiag/private_teachers.json`` (mode 0600).

    OMP_NUM_THREADS=1 PYTHONPATH=. python recipes/diagnostics/label_dp_teachers.py \\
        --config recipes/configs/mnist_label_dp.yaml --run mnist_label_dp --ceiling 11 --repeats 3
"""

from __future__ import annotations

import argparse
import json
import shutil
import time
from pathlib import Path
from typing import Any

import torch
import yaml

from pate_stab.rng import spawn_generators
from pate_stab.run.config import TransferConfig
from pate_stab.run.prepare import prepare
from pate_stab.run.release import Release
from pate_stab.run.run_folder import write_private_json
from pate_stab.run.student import fit_student, student_accuracies, teacher_accuracies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--run", required=True, help="the compare run's folder name under checkpoints/")
    parser.add_argument("--ceiling", type=int, default=0, help="true labels for the ceiling student (0: none)")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    data = yaml.safe_load(open(args.config).read())
    data.pop("compare", None)
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    run_dir = Path(data.get("checkpoints_dir", "checkpoints")) / args.run
    data["run_name"] = args.run + "_teacherdiag"
    config = TransferConfig.from_dict(data)
    config.run_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy(run_dir / "private_key", config.run_dir / "private_key")  # the run's shards
    out_file = config.run_dir / "private_teachers.json"
    t0 = time.perf_counter()
    prep = prepare(config, check_budget=False, with_teachers=True)
    task = prep.task
    out: dict[str, Any] = {"run": args.run, "note": __doc__.splitlines()[0], "prepare_s": time.perf_counter() - t0}
    t0 = time.perf_counter()
    mean, plurality = teacher_accuracies(prep.teachers, task.eval_x, task.eval_y, task.num_classes)
    out |= {"teacher_mean_acc_eval": mean, "plurality_acc_eval": plurality, "eval_s": time.perf_counter() - t0}
    print(json.dumps(out), flush=True)
    out["first_round"] = []
    for line in (run_dir / "ledger.jsonl").read_text().splitlines():
        record = json.loads(line)
        if record.get("kind") != "result" or ":stability:" not in record["spend_id"]:
            continue
        selection = record["payload"]["selection"]
        size = selection["rounds"][0]["size"]
        index = torch.tensor(selection["index"][:size])
        hist = prep.votes.histograms(index).double()
        row = {"spend_id": record["spend_id"], "released": record["payload"]["labels"][:size],
               "top_share": [round(float(s), 3) for s in hist.max(1).values / hist.sum(1)]}  # fmt: skip
        print(json.dumps(row), flush=True)
        out["first_round"].append(row)
    write_private_json(out_file, out)
    if args.ceiling:
        truth = task.pool_labels_private if task.pool_labels_private is not None else task.public_y
        gens = spawn_generators(torch.Generator().manual_seed(12345), 3 * args.repeats)
        out["ceiling"] = []
        for rep in range(args.repeats):
            i = 3 * rep
            index = torch.randperm(truth.shape[0], generator=gens[i])[: args.ceiling]
            release = Release("true-labels", truth[index].clone(), False, {"answered": args.ceiling}, "ceiling",
                              False, index, {})  # fmt: skip
            t0 = time.perf_counter()
            student, _ = fit_student(prep, release, generator=gens[i + 1], bottom_generator=gens[i + 2])
            row = {"labels": args.ceiling, "repeat": rep, "classes": int(truth[index].unique().numel()),
                   "student_acc": student_accuracies(prep, student, release)["student"],
                   "seconds": time.perf_counter() - t0}  # fmt: skip
            print(json.dumps(row), flush=True)
            out["ceiling"].append(row)
            write_private_json(out_file, out)


if __name__ == "__main__":
    main()
