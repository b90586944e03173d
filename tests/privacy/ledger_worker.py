"""Helper processes for the ledger tests (run as a script, not collected by pytest).

``kill-server LEDGER RELEASED MODE``
    Imports the ledger once, prints ``ready``, then serves commands read from stdin:
    ``spawn TRIAL`` forks a child that opens the ledger and loops "spend, record the result,
    release" (``MODE=correct``) or "release, then spend" (``MODE=broken``, the negative control)
    and prints the child's pid; the test kills that pid with SIGKILL whenever it likes;
    ``reap`` waits for the child and prints its wait status. A release is one line
    ``spend_id epsilon`` appended to RELEASED with a single write, flushed and fsync'ed.

``hammer LEDGER PREFIX ATTEMPTS EPSILON BUDGET_EPSILON``
    Prints ``ready``, waits for ``go`` on stdin, then tries ATTEMPTS spends of EPSILON with ids
    PREFIX-0, PREFIX-1, … and prints ``succeeded N refused M``.
"""

from __future__ import annotations

import os
import sys

from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.accounting import PrivacyLedger, PureDpEvent

KILL_BUDGET_EPSILON = 1.0e6
KILL_SPEND_EPSILON = 0.001


def _release(fd: int, spend_id: str, epsilon: float) -> None:
    os.write(fd, f"{spend_id} {epsilon!r}\n".encode("ascii"))
    os.fsync(fd)


def _spend_loop(ledger_path: str, released_path: str, trial: str, mode: str) -> None:
    ledger = PrivacyLedger(ledger_path, budget_epsilon=KILL_BUDGET_EPSILON, budget_delta=0.0)
    released = os.open(released_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    event = PureDpEvent(KILL_SPEND_EPSILON)
    i = 0
    while True:
        spend_id = f"{trial}-{i}"
        if mode == "correct":
            entry = ledger.spend(spend_id, epsilon=KILL_SPEND_EPSILON, delta=0.0, event=event, mechanism="kill")
            ledger.record_result(spend_id, {"label": i % 10})
            _release(released, entry.spend_id, entry.epsilon)
        else:  # broken order: the release leaves before the spend is recorded
            _release(released, spend_id, KILL_SPEND_EPSILON)
            ledger.spend(spend_id, epsilon=KILL_SPEND_EPSILON, delta=0.0, event=event, mechanism="kill")
        i += 1


def kill_server(ledger_path: str, released_path: str, mode: str) -> None:
    if mode not in ("correct", "broken"):
        raise SystemExit(f"unknown mode {mode!r}")
    print("ready", flush=True)
    child = 0
    for line in sys.stdin:
        command, *args = line.split()
        if command == "spawn":
            child = os.fork()
            if child == 0:
                try:
                    _spend_loop(ledger_path, released_path, args[0], mode)
                finally:
                    os._exit(3)  # only reached on an error: the loop never ends by itself
            print(child, flush=True)
        elif command == "reap":
            _, status = os.waitpid(child, 0)
            print(status, flush=True)
        elif command == "quit":
            return


def hammer(ledger_path: str, prefix: str, attempts: int, epsilon: float, budget_epsilon: float) -> None:
    ledger = PrivacyLedger(ledger_path, budget_epsilon=budget_epsilon, budget_delta=0.0)
    print("ready", flush=True)
    sys.stdin.readline()
    succeeded = refused = 0
    for i in range(attempts):
        try:
            ledger.spend(f"{prefix}-{i}", epsilon=epsilon, delta=0.0, mechanism="hammer")
            succeeded += 1
        except BudgetExhaustedError:
            refused += 1
    print(f"succeeded {succeeded} refused {refused}", flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "kill-server":
        kill_server(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "hammer":
        hammer(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]))
    else:
        raise SystemExit(f"unknown command {sys.argv[1]!r}")
