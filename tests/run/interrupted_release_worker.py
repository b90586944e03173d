"""Helper process for the interrupted-release tests (run as a script; pytest does not collect it).

``python interrupted_release_worker.py CHECKPOINTS_DIR RUN_NAME KILL_AT`` runs the small transfer of
:func:`lifecycle_config` on :func:`lifecycle_data` and SIGKILLs itself when the releaser is about to
record the output of release call ``KILL_AT``: the spend and the outputs of calls 0 … KILL_AT − 1
are in the ledger, the result is not, as after a crash in the middle of a release.
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

import torch

from pate_stab.data.own import OwnData, own_data
from pate_stab.run import TransferConfig


def lifecycle_data(n: int = 400) -> OwnData:
    """Three Gaussian classes in 6 dimensions: n private records, a labelled pool of 200, 200 to evaluate."""
    g = torch.Generator().manual_seed(3)
    centres = 4 * torch.randn(3, 6, generator=g)

    def part(m: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.randint(0, 3, (m,), generator=g)
        return centres[y] + torch.randn(m, 6, generator=g), y

    (px, py), (ux, uy), (ex, ey) = part(n), part(200), part(200)
    return own_data((px, py), ux, (ex, ey), classes=3, public_y=uy)


def lifecycle_config(checkpoints_dir: str, name: str, **kw: Any) -> TransferConfig:
    """GNMax over 40 propagation teachers, 60 queries chosen by spread in rounds of 10, 10, 20, 20
    (four release calls of one spend): a transfer that takes well under a second."""
    base: dict[str, Any] = dict(
        run_name=name, checkpoints_dir=checkpoints_dir, dataset="arrays", aggregator="gnmax", num_teachers=40,
        teacher_model="propagate", num_queries=60, query_selection="spread", selection_round_size=10,
        student_epochs=2, accelerator="cpu",
    )  # fmt: skip
    base.update(kw)
    return TransferConfig(**base)


def _main(checkpoints_dir: str, name: str, kill_at: str) -> None:
    from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
    from pate_stab.run import run_transfer

    torch.set_num_threads(1)
    real = PrivacyLedger.record_output

    def record_output(self: PrivacyLedger, spend_id: str, index: int, payload: Any) -> Any:
        if index == int(kill_at):
            os.kill(os.getpid(), signal.SIGKILL)
        return real(self, spend_id, index, payload)

    PrivacyLedger.record_output = record_output  # type: ignore[method-assign]
    run_transfer(lifecycle_config(checkpoints_dir, name), data=lifecycle_data())


if __name__ == "__main__":
    _main(*sys.argv[1:])
