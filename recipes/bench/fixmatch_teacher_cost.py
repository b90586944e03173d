"""Cost of the FixMatch teachers (``teacher_model: fixmatch``) of a recipe on this machine's accelerator.

Reads a recipe (default ``recipes/configs/mnist_label_dp_gpu.yaml``), builds its teachers' FixMatch settings
(:func:`pate_stab.teachers.fixmatch_settings.fixmatch_teacher_config`, with PATE's MNIST split: 60,000 private and
9,000 public images) and the stack size the accelerator allows
(:func:`pate_stab.teachers.fixmatch.teachers_per_stack`), trains one stack of S teachers for ``--steps``
steps on random 28 × 28 images (shards of 60,000 / k images each), and prints one JSON line: S, the
seconds per stack step (the fit's start included), and the recipe's teacher stage extrapolated
linearly (⌈k / S⌉ stacks × the recipe's steps; marked as an extrapolation). Random images: the time,
not the accuracy, is measured.

Usage (from the project root)::

    python recipes/bench/fixmatch_teacher_cost.py --accelerator gpu --steps 50
    python recipes/bench/fixmatch_teacher_cost.py --smoke        # tiny, on the CPU: checks the path
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
import time
from pathlib import Path

import torch
import yaml

from pate_stab.models.networks import ModelSpec
from pate_stab.run import TransferConfig
from pate_stab.teachers.fixmatch import teachers_per_stack, train_fixmatch_teachers
from pate_stab.teachers.fixmatch_settings import fixmatch_teacher_config

ROOT = Path(__file__).resolve().parents[2]
NUM_PRIVATE, NUM_PUBLIC = 60_000, 9_000  # PATE's MNIST split


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", type=Path, default=ROOT / "recipes/configs/mnist_label_dp_gpu.yaml")
    parser.add_argument("--steps", type=int, default=50, help="steps of the timed stack")
    parser.add_argument("--accelerator", default="auto")
    parser.add_argument("--smoke", action="store_true", help="3 tiny teachers, 8 × 8 images, 3 steps, on the CPU")
    args = parser.parse_args(argv)
    settings = yaml.safe_load(args.config.read_text())
    settings.pop("compare", None)
    config = TransferConfig.from_dict(settings)
    full = fixmatch_teacher_config(config, NUM_PRIVATE, NUM_PUBLIC)
    shape, k, accelerator = (1, 28, 28), config.teachers.num_teachers, args.accelerator
    if args.smoke:
        shape, k, accelerator, args.steps = (1, 8, 8), 3, "cpu", 3
        full = dataclasses.replace(full, channels=(4, 8), hidden=(16,), batch_size=8, mu=2)
    spec = ModelSpec("cnn", shape, 10, hidden=full.hidden, channels=full.channels)
    on_gpu = accelerator in ("gpu", "cuda") or (accelerator == "auto" and torch.cuda.is_available())
    stack = teachers_per_stack(spec, full, k, "cuda" if on_gpu else "cpu")
    per_shard = max(1, NUM_PRIVATE // k)
    g = torch.Generator().manual_seed(0)
    x = torch.rand(stack * per_shard, *shape, generator=g)
    y = torch.randint(0, 10, (x.shape[0],), generator=g)
    public = torch.rand(min(NUM_PUBLIC, 2_000), *shape, generator=g)
    shards = [torch.arange(j * per_shard, (j + 1) * per_shard) for j in range(stack)]
    timed = dataclasses.replace(full, steps=args.steps, log_every=args.steps)
    t0 = time.perf_counter()
    train_fixmatch_teachers(
        x, y, shards, public_x=public, privacy_unit="label", spec=spec, config=timed,
        generator=torch.Generator().manual_seed(1), stack_size=stack, accelerator=accelerator,
    )  # fmt: skip
    seconds = time.perf_counter() - t0
    per_step = seconds / args.steps
    stacks = math.ceil(k / stack)
    record = {
        "config": str(args.config), "smoke": args.smoke, "device": "cuda" if on_gpu else "cpu",
        "teachers": k, "teachers_per_stack": stack, "recipe_steps_per_teacher": full.steps,
        "timed_steps": args.steps, "seconds": round(seconds, 2), "seconds_per_stack_step": round(per_step, 4),
        "teacher_stage_s_extrapolated": round(stacks * full.steps * per_step, 1),
    }  # fmt: skip
    print(json.dumps(record))
    return 0


if __name__ == "__main__":
    sys.exit(main())
