"""The teachers' progress bar counts every optimiser step of the fit to a known total (an ETA for
the whole stage), not Lightning's per-epoch count."""

from __future__ import annotations

import re

import torch

from pate_stab.rng import seeded_generator
from pate_stab.teachers import ModelSpec, TrainConfig, partition_indices, train_teachers


def test_teacher_bar_counts_all_steps_to_a_known_total(capfd):
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(200, 4, generator=g), torch.randint(0, 2, (200,), generator=g)
    shards = partition_indices(list(range(200)), 10, generator=seeded_generator(1))
    config = TrainConfig(epochs=6, batch_size=8, lr=0.1)
    train_teachers(x, y, shards, spec=ModelSpec("logistic", (4,), 2), config=config, generator=seeded_generator(2),
                   accelerator="cpu", progress_bar=True)  # fmt: skip
    err = capfd.readouterr().err
    done = re.findall(r"10 teachers: 100%\|[^|]*\| (\d+)/(\d+)", err)
    assert done, err[-500:]
    steps, total = map(int, done[-1])
    assert steps == total and total >= 6  # every epoch's steps, counted to the end
    assert "Epoch 0:" not in err  # Lightning's per-epoch bar is replaced
