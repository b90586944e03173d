"""LP-1ST, LP-2ST (Ghazi et al. 2021) and ALIBI (Malek et al. 2021) on a run's features under label privacy.

Reads a run configuration (its data set and feature stage: e.g. ``recipes/configs/fashion_mnist_stab.yaml``),
sets the privacy unit to ``label`` under replace-one (the learners' relation: one example's label
replaced), computes or reloads the features (fitted on the public pool only; cached in the run
folder), and runs each label-DP learner at each ε as a direct row of one ledger
(:func:`pate_stab.run.direct.run_direct`: the spend recorded before training, the model written and
digested, a rerun replays). Prints accuracy on the evaluation split beside Ghazi et al.'s CNN figures
and writes ``label_dp_direct.json`` in the run folder.

    python recipes/repro/label_dp_direct.py --config recipes/configs/fashion_mnist_stab.yaml \\
        --run-name label_dp_fashion_mnist
    python recipes/repro/label_dp_direct.py --config recipes/configs/mnist_stab.yaml --run-name label_dp_mnist

The anchors are Ghazi et al. 2021 (NeurIPS), LP-2ST on CNNs (ResNet-style) trained on the raw images:
Fashion-MNIST 83.3 / 91.2 / 93.2 % and MNIST 95.8 / 98.8 / 99.1 % at ε = 1 / 2 / 3. Here the model is a
linear softmax layer on privacy-free features, so the features' linear ceiling bounds it.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path

import yaml

from pate_stab.run.config import LABEL_DIRECT_LEARNERS, TransferConfig, flat_settings
from pate_stab.run.direct import run_direct
from pate_stab.run.prepare import prepare
from pate_stab.run.report import open_ledger

ANCHORS = {  # Ghazi et al. 2021, LP-2ST, ε = 1 / 2 / 3
    "fashion_mnist": {1.0: 0.833, 2.0: 0.912, 3.0: 0.932},
    "mnist": {1.0: 0.958, 2.0: 0.988, 3.0: 0.991},
}


def label_config(data: dict, run_name: str) -> TransferConfig:
    """The configuration under label privacy and replace-one (the label-DP learners' relation)."""
    data = flat_settings({k: v for k, v in data.items() if k != "compare"})
    data.update(run_name=run_name, aggregator=LABEL_DIRECT_LEARNERS[0], neighbouring="replace_one")
    return TransferConfig.from_dict(data | {"privacy_unit": "label"})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, required=True)
    parser.add_argument("--run-name", required=True)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[1.0, 2.0, 3.0])
    parser.add_argument("--learners", nargs="+", default=list(LABEL_DIRECT_LEARNERS), choices=LABEL_DIRECT_LEARNERS)
    parser.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args()

    config = label_config(yaml.safe_load(args.config.read_text()), args.run_name)
    start = time.perf_counter()
    prep = prepare(config, with_teachers=False, with_features=True, check_budget=False)
    print(f"features {tuple(prep.task.private_x.shape)} private, {tuple(prep.task.eval_x.shape)} evaluation "
          f"({time.perf_counter() - start:.0f} s)", flush=True)  # fmt: skip
    plan = [(e, learner, r) for r in range(args.repeats) for e in args.epsilons for learner in args.learners]
    budget = math.fsum(e for e, _, _ in plan)
    rows = []
    with open_ledger(prep.run_dir, run_name=config.run_name, budget_epsilon=budget, budget_delta=config.release.delta,
                     neighbouring=config.release.neighbouring) as ledger:  # fmt: skip
        for eps, learner, rep in plan:
            t0 = time.perf_counter()
            row = run_direct(prep, ledger, learner=learner, epsilon=eps, repeat=rep)
            row["seconds"] = time.perf_counter() - t0
            rows.append(row)
            anchor = ANCHORS.get(config.data.dataset, {}).get(eps)
            print(
                f"{config.data.dataset:14s} {learner:9s} ε={eps:g} repeat {rep}: eval accuracy {row['student_acc']:.4f}"
                f"{f' (Ghazi LP-2ST CNN {anchor:.3f})' if anchor else ''}  {row['seconds']:.0f} s"
                f"{' (replayed)' if row['reused'] else ''}",
                flush=True,
            )
        spent = ledger.spent()
    out = prep.run_dir / "label_dp_direct.json"
    keep = ("aggregator", "target_epsilon", "repeat", "epsilon", "neighbouring", "privacy_unit", "student_acc",
            "spend_id", "reused", "note")  # fmt: skip
    out.write_text(
        json.dumps(
            {
                "dataset": config.data.dataset,
                "features": config.feature_stage.features,
                "spent": spent,
                "anchors": ANCHORS.get(config.data.dataset),
                "rows": [{k: r[k] for k in keep} for r in rows],
            },
            indent=2,
        )
    )
    print(f"ledger: Σε = {spent[0]:g} under one label replaced; wrote {out}")


if __name__ == "__main__":
    main()
