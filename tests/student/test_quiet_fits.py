"""Lightning's per-fit banners ("GPU available: …", "TPU available: …", tips) are off in every fit,
with or without a progress bar."""

from __future__ import annotations

import logging

import torch

from pate_stab.models import ModelSpec
from pate_stab.rng import seeded_generator
from pate_stab.student import StudentConfig, hard_targets, train_student


def test_a_student_fit_with_a_progress_bar_logs_no_banner(caplog):
    caplog.set_level(logging.INFO, logger="lightning.pytorch")  # what a terminal would show
    x, y = torch.randn(64, 4), torch.randint(0, 2, (64,))
    targets = hard_targets(y, num_classes=2, bottom="drop", generator=None)
    train_student(x, targets, spec=ModelSpec("logistic", (4,), 2), config=StudentConfig(epochs=1, batch_size=32),
                  generator=seeded_generator(0), accelerator="cpu", progress_bar=True)  # fmt: skip
    text = "\n".join(r.getMessage() for r in caplog.records)
    assert "GPU available" not in text and "TPU available" not in text and "litlogger" not in text
