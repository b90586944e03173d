"""Teachers on tiny shards: mean teacher and plurality accuracy for a training schedule.

An own-data-like task: 1,200 private MNIST training images (pixels in [0, 1], flattened), k = 100
logistic teachers (12 records each), evaluated on 2,000 MNIST test images (evaluation only: the
schedule is not chosen on these labels). Prints, for each schedule, the optimiser steps each
teacher made, its final training loss (mean over teachers) and the accuracies.

    OMP_NUM_THREADS=1 python recipes/diagnostics/teacher_schedule.py --data-dir ../shared/data/mnist \
        --schedule default --schedule epochs=10,batch_size=32,lr=0.001
"""

from __future__ import annotations

import argparse
import time

import torch

from pate_stab.data.images import load_mnist
from pate_stab.models import ModelSpec
from pate_stab.teachers import TrainConfig, partition_indices, record_keys_from_tensors, train_teachers


def _config(text: str) -> TrainConfig:
    if text == "default":
        return TrainConfig()
    kwargs = {}
    for item in text.split(","):
        key, _, value = item.partition("=")
        kwargs[key] = float(value) if key == "lr" else int(value)
    return TrainConfig(**kwargs)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data-dir", default="../shared/data/mnist")
    p.add_argument("--num-private", type=int, default=1200)
    p.add_argument("--num-teachers", type=int, default=100)
    p.add_argument("--num-eval", type=int, default=2000)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--schedule", action="append", default=[], help="'default' or key=value,... of TrainConfig")
    args = p.parse_args()
    torch.set_num_threads(1)
    data = load_mnist(args.data_dir)
    gen = torch.Generator().manual_seed(args.seed)
    pick = torch.randperm(len(data.train), generator=gen)[: args.num_private]
    x, y = data.train.x[pick].flatten(1), data.train.y[pick].long()
    ex, ey = data.test.x[: args.num_eval].flatten(1), data.test.y[: args.num_eval].long()
    shards = partition_indices(record_keys_from_tensors(x, y), args.num_teachers, generator=gen)
    spec = ModelSpec("logistic", (x.shape[1],), 10)
    for text in args.schedule or ["default"]:
        config = _config(text)
        t0 = time.perf_counter()
        teachers = train_teachers(x, y, shards, spec=spec, config=config, generator=torch.Generator().manual_seed(1))
        seconds = time.perf_counter() - t0
        votes = teachers.predict_votes(ex)  # (k, n)
        mean_teacher = float((votes == ey).double().mean())
        counts = torch.nn.functional.one_hot(votes, 10).sum(0)  # (n, C)
        plurality = float((counts.argmax(1) == ey).double().mean())
        loss = teachers.metrics.get("train_loss")
        final = float(loss[-1][teachers.metrics["trained"][-1]].mean()) if loss is not None else float("nan")
        print(f"{text}: {config}\n  final train loss {final:.4f}  mean teacher {mean_teacher:.3f}  "
              f"plurality {plurality:.3f}  ({seconds:.1f} s)", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
