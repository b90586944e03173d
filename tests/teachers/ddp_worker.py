"""Script run by test_distributed.py: trains a small ensemble with 2 CPU ranks (gloo).

Lightning's ``popen`` launcher re-runs this script for rank 1. Rank 0 saves the joined ensemble
to the folder given as the first argument.
"""

from __future__ import annotations

import faulthandler
import sys
from dataclasses import replace

import torch

from pate_stab.data import make_gaussian_mixture
from pate_stab.models import ModelSpec
from pate_stab.rng import seeded_generator
from pate_stab.teachers import TrainConfig, partition_indices, record_keys_from_tensors
from pate_stab.teachers.distributed import train_teachers_ddp

SPECS = {
    "mlp": ModelSpec("mlp", (4,), 3, hidden=(8,)),
    "cnn": ModelSpec("cnn", (1, 8, 8), 3, channels=(2, 3), hidden=(6,)),
}
# early stopping chosen so that all of rank 0's teachers (0, 1, 2) stop while one of rank 1's
# (3, 4) trains on: rank 0 must keep stepping, as one process would
CONFIGS = {
    "mlp": TrainConfig(epochs=5, batch_size=8, lr=1e-2, patience=1, min_delta=0.1),
    "cnn": TrainConfig(epochs=5, batch_size=8, lr=1e-2, patience=1, min_delta=0.05),
}


def problem(kind: str, n: int = 150, k: int = 5):
    shape = SPECS[kind].input_shape
    dim = int(torch.tensor(shape).prod())
    x, y = make_gaussian_mixture(n, num_classes=3, dim=dim, generator=seeded_generator(0))
    x = x.reshape(n, *shape)
    shards = partition_indices(record_keys_from_tensors(x.reshape(n, -1), y), k, generator=seeded_generator(1))
    return x, y, shards


def main(out: str, kind: str, epochs: int | None = None, resume: bool = False, assemble: bool = True) -> None:
    """Rank 0 saves the ensemble to ``out``; with ``epochs``, ``out`` is also the run folder."""
    faulthandler.dump_traceback_later(240, exit=True)  # never hang CI
    torch.set_num_threads(1)
    x, y, shards = problem(kind)
    config = CONFIGS[kind] if epochs is None else replace(CONFIGS[kind], epochs=epochs, patience=None)
    ensemble = train_teachers_ddp(
        x,
        y,
        shards,
        spec=SPECS[kind],
        config=config,
        generator=seeded_generator(7),
        devices=2,
        accelerator="cpu",
        run_dir=out if epochs is not None else None,
        resume=resume,
        assemble=assemble,
    )
    if ensemble is not None and assemble and epochs is None:
        ensemble.save(out)
    # leave the process group before the interpreter exits, as a script using DDP should: a gloo
    # group torn down at exit can abort the process ("terminate called without an active exception")
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()


if __name__ == "__main__":
    # out kind [epochs [resume|fresh [slices]]]
    main(
        sys.argv[1],
        sys.argv[2],
        int(sys.argv[3]) if len(sys.argv) > 3 else None,
        len(sys.argv) > 4 and sys.argv[4] == "resume",
        not (len(sys.argv) > 5 and sys.argv[5] == "slices"),
    )
