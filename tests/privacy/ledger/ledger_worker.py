"""Helper process for the ledger tests (run as a script; pytest does not collect it).

It imports the ledger once, prints ``ready``, and then serves one command per stdin line, forking
a fresh child process for every ledger user (each child opens its own ``PrivacyLedger``):

``kill-spawn LEDGER RELEASED MODE TRIAL``
    Fork a child that loops "spend, record the result, release" (``MODE=correct``) or
    "release, then spend" (``MODE=broken``, the negative control) and print its pid; the test
    kills that pid with SIGKILL whenever it likes. A release is one line ``spend_id epsilon``
    appended to RELEASED with a single ``write``, then ``fsync``.
``reap PID``
    Wait for that child and print its wait status.
``hammer LEDGER PREFIX NUM_PROCS ATTEMPTS EPSILON BUDGET_EPSILON``
    Fork NUM_PROCS children that open the ledger, wait at a common barrier, then each try
    ATTEMPTS spends of EPSILON (ids PREFIX<p>-<i>); print ``succeeded n_0 n_1 …`` (ATTEMPTS < 255:
    the counts travel as exit codes).
``hammer-data BUDGET_DIR DATA_ID RUNS_DIR NUM_PROCS ATTEMPTS EPSILON``
    Fork NUM_PROCS children, each with a run ledger of its own (``RUNS_DIR/run<p>/ledger.jsonl``, a
    cap no spend reaches) that counts its spends in data set DATA_ID's budget in BUDGET_DIR; they wait
    at a common barrier, then each try ATTEMPTS spends of EPSILON; print ``succeeded n_0 n_1 …``.
``quit``
"""

from __future__ import annotations

import os
from pathlib import Path

from pate_stab.errors import BudgetExhaustedError
from pate_stab.privacy.accounting.events import PureDpEvent
from pate_stab.privacy.ledger.data_budget import DataSet, DataSetBudget
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from tests.fork_worker import fork_call, serve

KILL_BUDGET_EPSILON = 1.0e6
KILL_SPEND_EPSILON = 0.001


def _release(fd: int, spend_id: str, epsilon: float) -> None:
    os.write(fd, f"{spend_id} {epsilon!r}\n".encode("ascii"))
    os.fsync(fd)


def _spend_loop(ledger_path: str, released_path: str, mode: str, trial: str) -> None:
    ledger = PrivacyLedger(ledger_path, run_id="t", budget_epsilon=KILL_BUDGET_EPSILON, budget_delta=0.0)
    released = os.open(released_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    event = PureDpEvent(KILL_SPEND_EPSILON)
    i = 0
    while True:
        spend_id = f"{trial}-{i}"
        if mode == "correct":
            entry = ledger.spend(spend_id, epsilon=KILL_SPEND_EPSILON, delta=0.0, event=event, mechanism="kill")
            ledger.record_result(spend_id, {"label": i % 10})
            _release(released, entry.spend_id, entry.epsilon)
        elif mode == "broken":  # the release leaves before the spend is recorded
            _release(released, spend_id, KILL_SPEND_EPSILON)
            ledger.spend(spend_id, epsilon=KILL_SPEND_EPSILON, delta=0.0, event=event, mechanism="kill")
        else:
            raise ValueError(f"unknown mode {mode!r}")
        i += 1


def _hammer(
    ledger_path: str, prefix: str, barrier: tuple[int, int], attempts: int, epsilon: float, budget: float
) -> int:
    ledger = PrivacyLedger(ledger_path, run_id="t", budget_epsilon=budget, budget_delta=0.0)
    os.close(barrier[1])
    os.read(barrier[0], 1)  # returns (EOF) when the parent closes the write end: all start together
    succeeded = 0
    for i in range(attempts):
        try:
            ledger.spend(f"{prefix}-{i}", epsilon=epsilon, delta=0.0, mechanism="hammer")
            succeeded += 1
        except BudgetExhaustedError:
            pass
    return succeeded


def _hammer_all(path: str, prefix: str, num_procs: str, attempts: str, epsilon: str, budget: str) -> str:
    read_end, write_end = os.pipe()
    barrier = (read_end, write_end)
    pids = [
        fork_call(_hammer, path, f"{prefix}{p}", barrier, int(attempts), float(epsilon), float(budget))
        for p in range(int(num_procs))
    ]
    os.close(read_end)
    os.close(write_end)
    counts = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    return " ".join(["succeeded", *map(str, counts)])


def _hammer_folder(
    budget_dir: str, data_id: str, run_dir: str, barrier: tuple[int, int], attempts: int, epsilon: float
) -> int:
    ledger = PrivacyLedger(os.path.join(run_dir, "ledger.jsonl"), run_id="r", budget_epsilon=1e6, budget_delta=0.0)
    ledger.count_in(DataSetBudget.open(DataSet(Path(budget_dir), data_id), create=False))
    os.close(barrier[1])
    os.read(barrier[0], 1)  # all start together
    succeeded = 0
    for i in range(attempts):
        try:
            ledger.spend(f"s-{i}", epsilon=epsilon, delta=0.0, mechanism="hammer")
            succeeded += 1
        except BudgetExhaustedError:
            pass
    return succeeded


def _hammer_data(budget_dir: str, data_id: str, runs: str, num_procs: str, attempts: str, epsilon: str) -> str:
    read_end, write_end = os.pipe()
    pids = [
        fork_call(
            _hammer_folder,
            budget_dir,
            data_id,
            os.path.join(runs, f"run{p}"),
            (read_end, write_end),
            int(attempts),
            float(epsilon),
        )  # fmt: skip
        for p in range(int(num_procs))
    ]
    os.close(read_end)
    os.close(write_end)
    counts = [os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) for pid in pids]
    return " ".join(["succeeded", *map(str, counts)])


COMMANDS = {
    "kill-spawn": lambda *args: fork_call(_spend_loop, *args),
    "hammer": _hammer_all,
    "hammer-data": _hammer_data,
}


if __name__ == "__main__":
    serve(COMMANDS)
