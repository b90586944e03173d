"""Helper process for the releaser kill test (run as a script; pytest does not collect it).

Imports the package once, prints ``ready``, then serves one command per stdin line:

``spawn LEDGER RELEASED TRIAL``
    Fork a child that runs StabilityReleaser after StabilityReleaser on one ledger (spend ids
    ``TRIAL-j``), releasing vote histograms in chunks; after every ``release`` call that
    returned labels it appends ``spend_id epsilon`` to RELEASED with one ``write`` and an
    ``fsync``. Prints the child's pid; the test kills it with SIGKILL whenever it likes.
``reap PID``
    Wait for that child and print its wait status.
``quit``
"""

from __future__ import annotations

import os

import torch

from pate_stab.aggregation.releaser import StabilityReleaser
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.mechanisms.calibration import calibrate
from tests.fork_worker import fork_call, serve

CAL = calibrate(epsilon=1.0, delta=1e-6, num_queries=64, max_unstable=2, mode="tight")
BUDGET_EPSILON = 1.0e9
BUDGET_DELTA = 0.999


def _loop(ledger_path: str, released_path: str, trial: str) -> int:
    torch.set_num_threads(1)
    ledger = PrivacyLedger(ledger_path, run_id="t", budget_epsilon=BUDGET_EPSILON, budget_delta=BUDGET_DELTA)
    released = os.open(released_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    gen = torch.Generator().manual_seed(len(trial))
    k = int(2 * CAL.threshold) + 200
    j = 0
    while True:
        spend_id = f"{trial}-{j}"
        rel = StabilityReleaser(CAL, noise="seeded", generator=gen, ledger=ledger, spend_id=spend_id)
        for _ in range(8):  # 8 release calls of 8 queries: several points inside one run
            top = torch.randint(k // 2, k + 1, (8,), generator=gen)
            counts = torch.stack([top, k - top], dim=1)
            rel.release(counts)
            os.write(released, f"{spend_id} {CAL.certified_epsilon!r}\n".encode("ascii"))
            os.fsync(released)
        j += 1


COMMANDS = {"spawn": lambda *args: fork_call(_loop, *args)}


if __name__ == "__main__":
    serve(COMMANDS)
