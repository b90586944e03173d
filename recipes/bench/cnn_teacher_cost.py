"""Per-teacher cost of PATE's MNIST CNN teacher on this machine's CPU (one thread).

Trains k CNN teachers (two 5×5 convolutions of ``c1``/``c2`` filters, fully connected 384 and 192,
10 classes, 28×28 inputs) on random data, ``per`` records each, for 5 epochs in one vectorised
fit, and prints one JSON line: parameters per teacher, each epoch's wall time, the time per
teacher-step (B = 32; min and median over epochs 1–4, epoch 0 includes warm-up) and the growth of
the process's peak resident memory during the fit. Run it at two k and take the difference of the
memory growth over the difference of k for the memory per teacher. On a shared machine compare
the printed load averages; the minimum epoch time is the least disturbed.

Usage (from the project root)::

    python recipes/bench/cnn_teacher_cost.py 16 32 8 128
    python recipes/bench/cnn_teacher_cost.py 64 128 4 128
"""

from __future__ import annotations

import json
import resource
import statistics
import sys
import time

import lightning as L
import torch

from pate_stab.models import ModelSpec, build_model
from pate_stab.rng import seeded_generator
from pate_stab.teachers import TrainConfig, train_teachers


class _EpochTimes(L.Callback):
    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_train_epoch_start(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: L.Trainer, module: L.LightningModule) -> None:
        self.seconds.append(time.perf_counter() - self._start)


def main(c1: int, c2: int, k: int, per: int) -> None:
    torch.set_num_threads(1)
    spec = ModelSpec("cnn", (1, 28, 28), 10, channels=(c1, c2), hidden=(384, 192))
    params = sum(p.numel() for p in build_model(spec).parameters())
    n, gen = k * per, seeded_generator(0)
    x, y = torch.rand(n, 1, 28, 28, generator=gen), torch.randint(0, 10, (n,), generator=gen)
    shards = list(torch.arange(n).view(k, per))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    timer = _EpochTimes()
    config = TrainConfig(epochs=5, batch_size=32)
    train_teachers(x, y, shards, spec=spec, config=config, generator=seeded_generator(1), accelerator="cpu",
                   callbacks=[timer])  # fmt: skip
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    steps = -(-per // config.batch_size)
    later = timer.seconds[1:]
    print(json.dumps({
        "channels": [c1, c2], "k": k, "steps_per_epoch": steps, "params_per_teacher": params,
        "param_MiB_per_teacher": params * 4 / 2**20, "epoch_s": [round(s, 3) for s in timer.seconds],
        "min_s_per_teacher_step": min(later) / k / steps,
        "median_s_per_teacher_step": statistics.median(later) / k / steps,
        "peak_rss_growth_MiB": (rss1 - rss0) / 1024, "loadavg": open("/proc/loadavg").read().split()[:3],
    }))  # fmt: skip


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:5]))
