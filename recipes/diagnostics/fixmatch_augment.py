"""The FixMatch student alone with each named augmentation: N class-balanced TRUE pool labels.

A diagnostic of the student by itself (no teacher, no releaser, no privacy accounting): N/C
points of each class of the public pool (PATE's split, :func:`pate_stab.data.pate_split`) are
drawn at random and given their true labels; the rest of the pool is unlabelled. For each
augmentation named with ``--augment`` (:data:`pate_stab.models.augment.AUGMENTATIONS`), a
FixMatch student is trained from the same seeds, and its accuracy on the evaluation split and on
the unlabelled pool is printed. It reads pool and evaluation labels, so its figures may compare
settings fixed in advance; they must never choose one.

Usage (from the project root)::

    OMP_NUM_THREADS=1 PYTHONPATH=. python recipes/diagnostics/fixmatch_augment.py --dataset fashion_mnist \\
        --labels 1000 --augment digits clothes --threads 1
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from pate_stab.data import load_fashion_mnist, load_mnist, pate_split
from pate_stab.models import AUGMENTATIONS, FixMatchConfig, augmentation_settings
from pate_stab.rng import child_seed, seeded_generator
from pate_stab.student import train_fixmatch

LOADERS = {
    "mnist": (load_mnist, "../shared/data/mnist"),
    "fashion_mnist": (load_fashion_mnist, "../shared/data/fashion-mnist"),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", choices=sorted(LOADERS), default="fashion_mnist")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--labels", type=int, default=1000, help="labelled pool images N (N/C per class)")
    parser.add_argument("--augment", nargs="+", choices=sorted(AUGMENTATIONS), default=["digits", "clothes"])
    parser.add_argument("--preset", choices=["cpu", "gpu"], default="cpu")
    parser.add_argument("--steps", type=int, default=None, help="override the preset's steps")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument(
        "--pool-accuracy",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also print the accuracy on the unlabelled pool (a prediction over ~9,000 images)",
    )
    args = parser.parse_args()
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    loader, default_dir = LOADERS[args.dataset]
    splits = pate_split(loader(args.data_dir or default_dir))
    pool, evaluation, c = splits.public, splits.evaluation, splits.num_classes
    if args.labels % c or not (0 < args.labels < len(pool)):
        parser.error(f"--labels must be a positive multiple of {c} below {len(pool)}, got {args.labels}")
    root = seeded_generator(args.seed)
    order = torch.randperm(len(pool), generator=root)
    labelled = torch.cat([order[pool.y[order] == k][: args.labels // c] for k in range(c)])
    rest = torch.ones(len(pool), dtype=torch.bool)
    rest[labelled] = False
    student_seed = child_seed(root)  # every augmentation starts from the same initialisation and seeds
    overrides = {} if args.steps is None else {"steps": args.steps}
    base = FixMatchConfig.cpu(**overrides) if args.preset == "cpu" else FixMatchConfig.gpu(**overrides)
    print(f"{args.dataset}: labelled {labelled.numel()} ({args.labels // c} per class), unlabelled {int(rest.sum())}, "
          f"threads {torch.get_num_threads()}, config {json.dumps(base.to_dict())}")  # fmt: skip
    for name in args.augment:
        config = FixMatchConfig(**(base.to_dict() | augmentation_settings(name)))
        start = time.perf_counter()
        student = train_fixmatch(pool.x[labelled], pool.y[labelled], pool.x[rest], num_classes=c, config=config,
                                 generator=seeded_generator(student_seed), accelerator=args.accelerator)  # fmt: skip
        seconds = time.perf_counter() - start
        pool_acc = f"{student.accuracy(pool.x[rest], pool.y[rest]):.4f}" if args.pool_accuracy else "not computed"
        print(
            f"{name} {augmentation_settings(name)}: evaluation {student.accuracy(evaluation.x, evaluation.y):.4f}, "
            f"unlabelled pool {pool_acc}, {seconds:.1f} s over "
            f"{config.steps} steps, final mask rate {student.history[-1].get('mask_rate', float('nan')):.3f}",
            flush=True,
        )


if __name__ == "__main__":
    main()
