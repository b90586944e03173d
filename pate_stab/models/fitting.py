"""Lightning fits without noise: the package's log filter and one plain single-device fit.

:func:`quiet_lightning` silences Lightning's per-fit banners in every fit of the teachers and the
students; :func:`fit_module` is the single-device fit of the students and of the FixMatch teachers.
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import lightning as L

__all__ = ["fit_module", "quiet_lightning"]


@contextlib.contextmanager
def quiet_lightning(quiet: bool) -> Iterator[None]:
    """Silence Lightning's per-fit banners (GPU/TPU availability, tips) when ``quiet`` (every fit of
    the package passes True: a progress bar is drawn by its callback, not logged), and always
    its notices about choices made here on purpose: no DataLoader workers (the data are in-memory
    tensors; the loader yields step numbers), a one-batch-per-epoch loader, the deprecation
    notice its own pytree helper triggers in torch (``LeafSpec``), and "GPU available but not used"
    (the caller chose the CPU). Nothing else is filtered."""
    from lightning.fabric.utilities.warnings import PossibleUserWarning

    loggers = [logging.getLogger(n) for n in ("lightning.pytorch", "lightning.fabric", "lightning")]
    levels = [lg.level for lg in loggers]
    if quiet:
        for lg in loggers:
            lg.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*does not have many workers.*", category=PossibleUserWarning)
            warnings.filterwarnings("ignore", message=".*is smaller than the logging interval.*")
            warnings.filterwarnings("ignore", message=".*LeafSpec.*is deprecated.*")
            # a fit the caller put on the CPU (accelerator="cpu") on a machine with a GPU: a choice, not a mistake
            warnings.filterwarnings("ignore", message=".*GPU available but not used.*")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


def fit_module(module: L.LightningModule, loader: Any, *, accelerator: str, progress_bar: bool, **limits: Any) -> None:
    """One single-device Lightning fit of ``module`` (a student, or a stack of FixMatch teachers), without
    logger or checkpoints; ``limits`` are the Trainer's ``max_epochs`` / ``max_steps``."""
    with quiet_lightning(True):  # banners and tips off in every fit; the progress bar is not a log line
        trainer = L.Trainer(
            accelerator=accelerator,
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=progress_bar,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            **limits,
        )
        trainer.fit(module, loader)
