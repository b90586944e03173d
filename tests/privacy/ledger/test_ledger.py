"""The persistent privacy ledger: budget, idempotent retries, verification, locking, crashes."""

from __future__ import annotations

import json
import math
import random
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.accounting.events import (
    ApproxDpEvent,
    ExPostEvent,
    LaplaceEvent,
    PureDpEvent,
    SparseVectorEvent,
)
from pate_stab.privacy.ledger.privacy_ledger import (
    LedgerEntry,
    PrivacyLedger,
    anchor_path,
    line_digest,
    recorded_budget,
    replace_one_cost,
)
from tests.fork_worker import ask, kill_and_reap, worker_process

WORKER = Path(__file__).with_name("ledger_worker.py")
KILL_BUDGET_EPSILON = 1.0e6  # as in ledger_worker.py


def _ledger(path: Path, **kwargs: object) -> PrivacyLedger:
    args: dict[str, object] = {"budget_epsilon": 1.0, "budget_delta": 1e-5, "run_id": "t"}
    args.update(kwargs)
    return PrivacyLedger(path, **args)  # type: ignore[arg-type]


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return tmp_path / "run" / "ledger.jsonl"


def _filled(path: Path) -> PrivacyLedger:
    ledger = _ledger(path)
    ledger.spend("q1", epsilon=0.2, delta=0.0, event=PureDpEvent(0.2), mechanism="svt")
    ledger.record_result("q1", {"labels": [3, None]})
    ledger.spend("q2", epsilon=0.0, delta=1e-6, event=ApproxDpEvent(0.0, 1e-6, "leak"))
    ledger.record_progress(answered=7)
    ledger.spend("q3", epsilon=0.1, delta=0.0, event=LaplaceEvent(10.0))
    return ledger


# -- basic behaviour -------------------------------------------------------------------------------


def test_header_records_budget_and_relation(path: Path) -> None:
    _ledger(path, run_id="run-7", neighbouring="add_remove").close()
    header = json.loads(path.read_text().splitlines()[0])
    assert header["kind"] == "header"
    assert (header["budget_epsilon"], header["budget_delta"]) == (1.0, 1e-5)
    assert header["neighbouring"] == "add_remove"
    assert header["run_id"] == "run-7"


def test_spend_is_on_disk_when_it_returns(path: Path) -> None:
    ledger = _ledger(path)
    entry = ledger.spend("a", epsilon=0.25, delta=0.0, event=SparseVectorEvent(noise_scale=16.0, num_segments=2))
    assert isinstance(entry, LedgerEntry) and entry.seq == 1 and not entry.replayed
    last = json.loads(path.read_text().splitlines()[-1])  # read by a separate file handle
    assert (last["kind"], last["spend_id"], last["epsilon"]) == ("spend", "a", 0.25)


def test_spent_remaining_entries(path: Path) -> None:
    ledger = _filled(path)
    assert ledger.spent() == (0.30000000000000004, 1e-6)  # fsum(0.2, 0.1) in float64
    eps_left, delta_left = ledger.remaining()
    assert math.isclose(eps_left, 0.7) and math.isclose(delta_left, 9e-6)
    assert [e.spend_id for e in ledger.entries()] == ["q1", "q2", "q3"]
    assert ledger.progress_entries() == [{"answered": 7}]


def test_spent_after_reopen_equals_before(path: Path) -> None:
    ledger = _filled(path)
    before, entries = ledger.spent(), ledger.entries()
    ledger.close()
    reopened = _ledger(path)
    assert reopened.spent() == before
    assert reopened.entries() == entries


def test_progress_lines_do_not_count(path: Path) -> None:
    ledger = _ledger(path)
    for i in range(3):
        ledger.record_progress({"answered": i}, phase="label")
    assert ledger.spent() == (0.0, 0.0)
    assert ledger.progress_entries()[-1] == {"answered": 2, "phase": "label"}


# -- budget ----------------------------------------------------------------------------------------


def test_over_budget_raises_and_writes_nothing(path: Path) -> None:
    ledger = _filled(path)
    before = path.read_bytes()
    with pytest.raises(BudgetExhaustedError) as info:
        ledger.spend("big", epsilon=0.75, delta=0.0)
    message = str(info.value)
    assert "0.75" in message and "0.30000000000000004" in message and "epsilon=1.0" in message
    with pytest.raises(BudgetExhaustedError):
        ledger.spend("deltas", epsilon=0.01, delta=9.5e-6)
    assert path.read_bytes() == before
    assert [e.spend_id for e in ledger.entries()] == ["q1", "q2", "q3"]


def test_budget_split_into_equal_parts_is_spendable_exactly(path: Path) -> None:
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=3.0, budget_delta=0.0)
    part = 3.0 / 7  # 7 · fl(3/7) is not exactly 3.0 in floating point
    for i in range(7):
        ledger.spend(f"s{i}", epsilon=part, delta=0.0)
    with pytest.raises(BudgetExhaustedError):
        ledger.spend("extra", epsilon=1e-9, delta=0.0)  # 1e-9 is far above the 1e-12 rounding slack


def test_pure_budget_refuses_any_delta(path: Path) -> None:
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=0.0)
    with pytest.raises(BudgetExhaustedError):
        ledger.spend("d", epsilon=0.1, delta=1e-12)


# -- retries ---------------------------------------------------------------------------------------


def test_repeated_id_returns_recorded_entry_and_result(path: Path) -> None:
    ledger = _filled(path)
    before = path.read_bytes()
    again = ledger.spend("q1", epsilon=0.2, delta=0.0, event=PureDpEvent(0.2), mechanism="svt")
    assert again.replayed and again.seq == 1
    assert again.has_result and again.result == {"labels": [3, None]}
    assert path.read_bytes() == before
    ledger.close()
    reopened = _ledger(path)  # also after a restart
    assert reopened.spend("q1", epsilon=0.2, delta=0.0, event=PureDpEvent(0.2), mechanism="svt").result == {
        "labels": [3, None]
    }
    assert reopened.spent() == (0.30000000000000004, 1e-6)


def test_repeated_id_with_other_parameters_is_refused(path: Path) -> None:
    ledger = _filled(path)
    with pytest.raises(ValueError, match="q1"):
        ledger.spend("q1", epsilon=0.3, delta=0.0, event=PureDpEvent(0.3), mechanism="svt")


def test_record_result_rules(path: Path) -> None:
    ledger = _filled(path)
    ledger.record_result("q1", {"labels": [3, None]})  # same payload: no-op
    with pytest.raises(ValueError, match="different result"):
        ledger.record_result("q1", {"labels": [4, None]})
    with pytest.raises(KeyError):
        ledger.record_result("nope", 1)
    with pytest.raises(ValueError, match="payload"):
        ledger.record_result("q3", float("nan"))


# -- events and ex-post ----------------------------------------------------------------------------


def test_event_must_imply_declared_guarantee(path: Path) -> None:
    ledger = _ledger(path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match="does not imply"):
        ledger.spend("x", epsilon=0.05, delta=0.0, event=LaplaceEvent(10.0))  # Lap(10) is 0.1-DP
    with pytest.raises(ValueError, match="does not imply"):
        ledger.spend("y", epsilon=0.5, delta=0.0, event=SparseVectorEvent(noise_scale=2.0, num_segments=1))
    assert path.read_bytes() == before
    # basic composition of 10 segments of 2/40 = 0.05 each is exactly 0.5
    ledger.spend("z", epsilon=0.5, delta=0.0, event=SparseVectorEvent(noise_scale=40.0, num_segments=10))


def test_ex_post_is_kept_beside_the_ex_ante_spend(path: Path) -> None:
    ledger = _ledger(path)
    ledger.spend("nr1", epsilon=0.4, delta=0.0, event=ExPostEvent(0.15, "noise reduction stopped at step 2"))
    ledger.spend("nr2", epsilon=0.4, delta=0.0, mechanism="noise_reduction")
    ledger.record_ex_post("nr2", ExPostEvent(0.25, "stopped at step 3"))
    with pytest.raises(ValueError):
        ledger.record_ex_post("nr2", ExPostEvent(0.3))
    with pytest.raises(ValueError, match="exceeds"):
        ledger.spend("nr3", epsilon=0.1, delta=0.0, event=ExPostEvent(0.2))
    assert ledger.spent() == (0.8, 0.0)  # the ex-ante guarantees are what is counted
    ledger.close()
    reopened = _ledger(path)
    losses = [(e.spend_id, e.ex_post.epsilon_ex_post) for e in reopened.ex_post_entries() if e.ex_post]
    assert losses == [("nr1", 0.15), ("nr2", 0.25)]
    assert [x["epsilon_ex_post"] for x in reopened.report()["ex_post"]] == [0.15, 0.25]


# -- input validation ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"epsilon": float("nan"), "delta": 0.0}, "epsilon"),
        ({"epsilon": float("inf"), "delta": 0.0}, "epsilon"),
        ({"epsilon": -0.1, "delta": 0.0}, "epsilon"),
        ({"epsilon": 0.1, "delta": 1.0}, "delta"),
        ({"epsilon": 0.1, "delta": -1e-9}, "delta"),
        ({"epsilon": 0.1, "delta": float("nan")}, "delta"),
        ({"epsilon": 0.0, "delta": 0.0}, "epsilon and delta"),
    ],
)
def test_spend_rejects_bad_values(path: Path, kwargs: dict[str, float], name: str) -> None:
    ledger = _ledger(path)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=name):
        ledger.spend("bad", **kwargs)
    assert path.read_bytes() == before


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"budget_epsilon": 0.0, "budget_delta": 0.0}, "budget_epsilon"),
        ({"budget_epsilon": float("nan"), "budget_delta": 0.0}, "budget_epsilon"),
        ({"budget_epsilon": 1.0, "budget_delta": 1.0}, "budget_delta"),
        ({"budget_epsilon": 1.0, "budget_delta": float("inf")}, "budget_delta"),
        ({"budget_epsilon": 1.0, "budget_delta": 0.0, "neighbouring": "swap"}, "neighbouring"),
    ],
)
def test_constructor_rejects_bad_values(path: Path, kwargs: dict[str, object], name: str) -> None:
    with pytest.raises(ValueError, match=name):
        PrivacyLedger(path, **kwargs)  # type: ignore[arg-type]
    assert not path.exists() or path.stat().st_size == 0


def test_spend_id_must_be_a_nonempty_string(path: Path) -> None:
    ledger = _ledger(path)
    for bad in ("", 3, None):
        with pytest.raises(TypeError, match="spend_id"):
            ledger.spend(bad, epsilon=0.1, delta=0.0)  # type: ignore[arg-type]


# -- verification on open --------------------------------------------------------------------------


def _rewrite(path: Path, edit) -> None:  # type: ignore[no-untyped-def]
    lines = path.read_bytes().split(b"\n")[:-1]
    path.write_bytes(edit(lines))


def _join(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\n" for line in lines)


CORRUPTIONS = {
    "invalid JSON": (lambda ls: _join(ls[:2] + [ls[2][:-1] + b"#"] + ls[3:]), "line 3: not valid JSON"),
    "edited number": (
        lambda ls: _join(ls[:1] + [ls[1].replace(b'"epsilon":0.2', b'"epsilon":0.02')] + ls[2:]),
        "line 2: checksum mismatch",
    ),
    "truncated last line": (lambda ls: _join(ls)[:-15], "line 6: truncated"),
    "removed middle line": (lambda ls: _join(ls[:3] + ls[4:]), "line 4: sequence number"),
    "swapped lines": (lambda ls: _join(ls[:1] + [ls[2], ls[1]] + ls[3:]), "line 2: sequence number"),
    "no header": (lambda ls: _join(ls[1:]), "line 1: sequence number"),
    "garbage appended": (lambda ls: _join(ls) + b'{"kind":"spend"}\n', "line 7: checksum mismatch"),
    "binary junk": (lambda ls: _join(ls) + b"\xff\xfe\n", "line 7: not valid JSON"),
}


@pytest.mark.parametrize("corruption", sorted(CORRUPTIONS))
def test_corrupted_ledger_refuses_to_open(path: Path, corruption: str) -> None:
    _filled(path).close()
    edit, message = CORRUPTIONS[corruption]
    _rewrite(path, edit)
    with pytest.raises(LedgerError, match=message):
        _ledger(path)


def _cut_last(lines: list[bytes], keep: int) -> bytes:
    """The ledger with its last line cut after ``keep`` bytes (no newline at the end)."""
    return _join(lines[:-1]) + lines[-1][:keep]


def test_truncation_message_names_the_kind_of_the_cut_line(path: Path) -> None:
    """A cut spend line was never charged; a cut result line belongs to a spend that stays charged."""
    ledger = _filled(path)
    ledger.record_result("q3", {"labels": [1]})
    ledger.close()
    full = path.read_bytes()
    lines = full.split(b"\n")[:-1]
    path.write_bytes(_cut_last(lines, 40))  # '{"kind":"result","payload":...' cut inside the payload
    with pytest.raises(LedgerError, match="line 7: truncated") as cut_result:
        _ledger(path)
    message = str(cut_result.value)
    assert "result record" in message and "stays charged" in message
    assert "never returned, so nothing was charged" not in message
    path.write_bytes(_cut_last(lines[:-1], 120))  # the spend of q3, cut after its "kind"
    with pytest.raises(LedgerError, match="line 6: truncated") as cut_spend:
        _ledger(path)
    assert "was a spend" in str(cut_spend.value) and "nothing was charged or released" in str(cut_spend.value)
    path.write_bytes(_cut_last(lines[:-1], 5))  # too short to tell
    with pytest.raises(LedgerError, match="too short to tell its kind"):
        _ledger(path)


def test_header_mismatch_refuses_to_open(path: Path) -> None:
    _ledger(path, run_id="r1").close()
    with pytest.raises(LedgerError, match="budget"):
        PrivacyLedger(path, run_id="r1", budget_epsilon=2.0, budget_delta=1e-5)
    with pytest.raises(LedgerError, match="neighbouring"):
        _ledger(path, run_id="r1", neighbouring="replace_one")
    with pytest.raises(LedgerError, match="run"):
        _ledger(path, run_id="r2")
    _ledger(path, run_id="r1").close()


def test_live_ledger_notices_corruption_before_spending(path: Path) -> None:
    ledger = _filled(path)
    with open(path, "ab") as f:
        f.write(b'{"kind": "spend", "spend_id": "forged"}\n')
    with pytest.raises(LedgerError, match="line 7"):
        ledger.spend("q4", epsilon=0.1, delta=0.0)


# -- concurrency and crashes -----------------------------------------------------------------------


def test_two_ledger_objects_on_one_file_share_the_budget(path: Path) -> None:
    first = PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=0.0)
    second = PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=0.0)
    first.spend("a", epsilon=0.5, delta=0.0)
    second.spend("b", epsilon=0.5, delta=0.0)
    assert first.spent() == (1.0, 0.0)
    with pytest.raises(BudgetExhaustedError):
        first.spend("c", epsilon=0.25, delta=0.0)
    assert second.spend("a", epsilon=0.5, delta=0.0).replayed  # the other object's spend is seen


def test_threads_sharing_one_ledger_cannot_exceed_the_budget(path: Path) -> None:
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=0.0)
    outcomes: list[bool] = []

    def work(thread: int) -> None:
        for i in range(10):
            try:
                ledger.spend(f"t{thread}-{i}", epsilon=0.125, delta=0.0)
                outcomes.append(True)
            except BudgetExhaustedError:
                outcomes.append(False)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(True) == 16  # 2.0 / 0.125
    assert len(PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=0.0).entries()) == 16


@pytest.fixture(scope="module")
def worker() -> Iterator[subprocess.Popen[str]]:
    """One helper process (imports once) that forks the ledger users of the tests below."""
    with worker_process(WORKER) as proc:
        yield proc


def test_two_processes_cannot_exceed_the_budget(path: Path, worker: subprocess.Popen[str]) -> None:
    num_allowed, epsilon, num_procs = 40, 0.1, 2
    budget = num_allowed * epsilon  # the float sum of 40 spends of 0.1 is 4.000000000000001: slack needed
    PrivacyLedger(path, run_id="t", budget_epsilon=budget, budget_delta=0.0).close()
    # each process alone tries to spend the whole budget
    reply = ask(worker, f"hammer {path} p {num_procs} {num_allowed} {epsilon!r} {budget!r}").split()
    assert reply[0] == "succeeded"
    counts = [int(c) for c in reply[1:]]
    print(f"hammer: successes per process {counts}")
    assert sum(counts) == num_allowed
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=budget, budget_delta=0.0)
    assert len(ledger.entries()) == num_allowed
    assert math.isclose(ledger.spent()[0], budget, rel_tol=1e-12)
    with pytest.raises(BudgetExhaustedError):
        ledger.spend("one-more", epsilon=epsilon, delta=0.0)


def _kill_trials(tmp_path: Path, worker: subprocess.Popen[str], *, trials: int, mode: str, seed: int) -> dict[str, int]:
    """SIGKILL a spending child at random times; compare recorded and released spend after each kill."""
    ledger_path, released_path = tmp_path / "ledger.jsonl", tmp_path / "released.txt"
    rng = random.Random(seed)
    stats = {"trials": 0, "violations": 0, "released": 0, "recorded": 0, "refused_to_open": 0}
    for trial in range(trials):
        size_before = released_path.stat().st_size if released_path.exists() else 0
        child = int(ask(worker, f"kill-spawn {ledger_path} {released_path} {mode} t{trial}"))
        # kill only once the child is in its loop (it has released at least once): a kill while it is
        # still opening the ledger would test nothing, and under load that can take longer than the delay
        deadline = time.monotonic() + 30.0
        while not (released_path.exists() and released_path.stat().st_size > size_before):
            if time.monotonic() > deadline:
                kill_and_reap(worker, child)
                raise AssertionError(f"trial {trial}: the child released nothing within 30 s")
            time.sleep(0.001)
        time.sleep(rng.uniform(0.0, 0.05))
        kill_and_reap(worker, child)
        stats["trials"] += 1
        try:
            ledger = PrivacyLedger(ledger_path, run_id="t", budget_epsilon=KILL_BUDGET_EPSILON, budget_delta=0.0)
        except LedgerError:
            stats["refused_to_open"] += 1
            break
        recorded = {e.spend_id: e.epsilon for e in ledger.entries()}
        recorded_epsilon = ledger.spent()[0]
        ledger.close()
        released: dict[str, float] = {}
        if released_path.exists():
            for line in released_path.read_text().splitlines():
                spend_id, eps = line.split()
                released[spend_id] = float(eps)
        missing = set(released) - set(recorded)
        if missing or math.fsum(released.values()) > recorded_epsilon:
            stats["violations"] += 1
        stats["released"], stats["recorded"] = len(released), len(recorded)
    return stats


def test_kill_never_leaves_released_spend_unrecorded(tmp_path: Path, worker: subprocess.Popen[str]) -> None:
    stats = _kill_trials(tmp_path, worker, trials=30, mode="correct", seed=7)
    print(f"kill test (fast tier): {stats}")
    assert stats["refused_to_open"] == 0
    assert stats["trials"] == 30
    assert stats["released"] > 0  # the children did release between the kills
    assert stats["violations"] == 0
    # at most one spend per kill is recorded but not released (over-count, never under-count)
    assert 0 <= stats["recorded"] - stats["released"] <= stats["trials"]


def test_kill_test_flags_release_before_spend(tmp_path: Path, worker: subprocess.Popen[str]) -> None:
    """Negative control: releasing before recording is caught by the same check."""
    stats = _kill_trials(tmp_path, worker, trials=15, mode="broken", seed=8)
    print(f"kill test, broken order: {stats}")
    assert stats["violations"] > 0


@pytest.mark.slow
def test_kill_never_leaves_released_spend_unrecorded_many(tmp_path: Path, worker: subprocess.Popen[str]) -> None:
    stats = _kill_trials(tmp_path, worker, trials=300, mode="correct", seed=11)
    print(f"kill test (slow tier): {stats}")
    assert stats["refused_to_open"] == 0 and stats["trials"] == 300
    assert stats["violations"] == 0


# -- audit defects: relation, run id, integrity, outputs --------------------------------------------


def test_default_relation_is_add_remove(path: Path) -> None:
    # content-keyed shards move one teacher per added or removed record, two per replaced one
    _ledger(path).close()
    assert json.loads(path.read_text().splitlines()[0])["neighbouring"] == "add_remove"
    assert _ledger(path).report()["neighbouring"] == "add_remove"


def test_reopening_without_run_id_is_refused(path: Path) -> None:
    _ledger(path, run_id="run-a").close()
    with pytest.raises(LedgerError, match="run_id"):
        PrivacyLedger(path, budget_epsilon=1.0, budget_delta=1e-5)  # run_id=None
    with pytest.raises(LedgerError, match="run-a"):
        _ledger(path, run_id="run-b")
    _ledger(path, run_id="run-a").close()


def _forge(path: Path) -> None:
    """Lower a spend's ε and recompute the plain SHA-256 chain, as someone editing the file would."""
    from pate_stab.privacy.ledger.privacy_ledger import line_digest

    records = [json.loads(line) for line in path.read_text().splitlines()]
    prev = ""
    for rec in records:
        rec.pop("sha256", None)
        if rec.get("kind") == "spend":
            rec["epsilon"] = 0.0001
        rec["prev"] = prev
        rec["sha256"] = line_digest(rec)
        prev = rec["sha256"]
    path.write_text("".join(json.dumps(r, sort_keys=True, separators=(",", ":")) + "\n" for r in records))


def _reanchor(path: Path) -> None:
    """Rewrite the anchor to the ledger's last line, as someone editing both files would (a ledger written with
    an anchor is refused without one)."""
    last = json.loads(path.read_text().splitlines()[-1])
    digest = last.get("sha256", last.get("hmac"))
    anchor_path(path).write_text(json.dumps({"kind": "ledger_anchor", "seq": last["seq"], "digest": digest}))


def test_plain_chain_detects_corruption_but_not_a_recomputed_edit(path: Path) -> None:
    # what the module docstring claims for plain ledgers, shown both ways
    ledger = _ledger(path)
    ledger.spend("q1", epsilon=0.5, delta=0.0, mechanism="svt")
    ledger.close()
    _forge(path)
    with pytest.raises(LedgerError, match="differs from the line its anchor"):
        _ledger(path)  # the anchor beside the ledger still holds the old last line's digest
    _reanchor(path)  # whoever can edit the ledger can rewrite its anchor too
    assert _ledger(path).spent() == (0.0001, 0.0)  # a deliberate edit is NOT detected without a key


def test_keyed_ledger_detects_a_recomputed_edit(path: Path) -> None:
    key = b"k" * 32
    ledger = _ledger(path, mac_key=key)
    ledger.spend("q1", epsilon=0.5, delta=0.0, mechanism="svt")
    ledger.close()
    assert key not in path.read_bytes()
    assert _ledger(path, mac_key=key).spent() == (0.5, 0.0)
    with pytest.raises(LedgerError, match="mac_key"):
        _ledger(path)  # a keyed ledger needs its key
    with pytest.raises(LedgerError, match="MAC mismatch"):
        _ledger(path, mac_key=b"x" * 32)
    text = path.read_text().replace('"hmac"', '"sha256"')
    path.write_text(text)
    _forge(path)  # stripped to a plain chain and re-hashed: the key holder refuses it
    with pytest.raises(LedgerError, match="not keyed"):
        _ledger(path, mac_key=key)


def test_mac_key_must_be_long_bytes(path: Path) -> None:
    with pytest.raises(TypeError, match="mac_key"):
        _ledger(path, mac_key="secret")
    with pytest.raises(TypeError, match="mac_key"):
        _ledger(path, mac_key=b"short")


def test_outputs_are_recorded_in_order_and_replayed(path: Path) -> None:
    ledger = _ledger(path)
    entry = ledger.spend("r", epsilon=0.5, delta=0.0, mechanism="svt", output={"labels": [1, 2]})
    assert entry.outputs == ({"labels": [1, 2]},)
    assert ledger.record_output("r", 1, {"labels": [3]}) == {"labels": [3]}
    assert ledger.record_output("r", 1, {"labels": [9]}) == {"labels": [3]}  # first one stays
    with pytest.raises(ValueError, match="gap"):
        ledger.record_output("r", 5, {"labels": []})
    with pytest.raises(KeyError):
        ledger.record_output("nope", 0, {})
    ledger.close()
    again = _ledger(path).spend("r", epsilon=0.5, delta=0.0, mechanism="svt", output={"labels": [7, 7]})
    assert again.replayed and again.outputs == ({"labels": [1, 2]}, {"labels": [3]})


def test_check_budget_refuses_without_writing(path: Path) -> None:
    ledger = _ledger(path)
    ledger.spend("a", epsilon=0.9, delta=0.0, mechanism="svt")
    before = path.read_bytes()
    with pytest.raises(BudgetExhaustedError, match="nothing was drawn"):
        ledger.check_budget(epsilon=0.2, delta=0.0)
    ledger.check_budget(epsilon=0.9, delta=0.0, spend_id="a")  # a retry of a recorded spend fits
    assert path.read_bytes() == before


# -- a ledger meant for publication, and raising its budget ------------------------------------------


def test_ledger_without_timestamps_holds_no_wall_clock_time(path: Path) -> None:
    """Published ledgers carry no times: the time between records measures private stages."""
    ledger = PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=1e-5, timestamps=False)
    ledger.spend("q", epsilon=0.5, delta=0.0)
    ledger.record_progress(done=1)
    ledger.close()
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert all("time" not in r and "created" not in r for r in records)
    with PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=1e-5) as again:
        assert again.entry("q").time is None and again.spent() == (0.5, 0.0)


def _write_chain(path: Path, records: list[dict[str, object]]) -> None:
    """Write records as a plain SHA-256 chain, as an older version of the code would have."""
    prev, lines = "", []
    for seq, rec in enumerate(records):
        rec = {**rec, "seq": seq, "prev": prev}
        rec["sha256"] = line_digest(rec)
        prev = str(rec["sha256"])
        lines.append(json.dumps(rec, sort_keys=True, separators=(",", ":")) + "\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(lines))


def test_the_budget_is_a_cap_that_is_never_raised(path: Path) -> None:
    first = PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=1e-5)
    first.spend("a", epsilon=1.0, delta=0.0)
    first.close()
    assert json.loads(path.read_text().splitlines()[0])["budget_rule"] == "cap"
    before = path.read_bytes()
    with pytest.raises(LedgerError, match="can only be lowered, never raised.*new run folder"):
        PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5)
    with pytest.raises(LedgerError, match="never raised"):
        PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=2e-5, lower_budget="less epsilon")
    with pytest.raises(TypeError, match="raise_budget"):
        PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5, raise_budget="x")  # type: ignore[call-arg]
    assert path.read_bytes() == before


def test_the_cap_is_lowered_by_a_recorded_reason_never_below_the_spent(path: Path) -> None:
    with PrivacyLedger(path, run_id="t", budget_epsilon=4.0, budget_delta=1e-5) as led:
        led.spend("a", epsilon=1.0, delta=0.0)
    with pytest.raises(LedgerError, match="lower_budget"):
        PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5)
    with pytest.raises(LedgerError, match="already spent"):
        PrivacyLedger(path, run_id="t", budget_epsilon=0.5, budget_delta=1e-5, lower_budget="tighter")
    with pytest.raises(TypeError, match="reason"):
        PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5, lower_budget=" ")
    with PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5, lower_budget="tighter") as led:
        assert led.budget == (2.0, 1e-5)
        led.spend("b", epsilon=1.0, delta=0.0)
        with pytest.raises(BudgetExhaustedError, match="cap"):
            led.check_budget(epsilon=0.5, delta=0.0)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    (lowered,) = [r for r in records if r["kind"] == "budget"]
    assert (lowered["budget_epsilon"], lowered["change"], lowered["reason"]) == (2.0, "lower", "tighter")
    assert recorded_budget(path) == (2.0, 1e-5)
    PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5).close()  # the lowered cap opens it
    with pytest.raises(LedgerError, match="never raised"):
        PrivacyLedger(path, run_id="t", budget_epsilon=4.0, budget_delta=1e-5)  # not even back to the header's


def test_a_forged_budget_record_that_raises_a_cap_is_refused(path: Path) -> None:
    PrivacyLedger(path, run_id="t", budget_epsilon=1.0, budget_delta=1e-5).close()
    header = json.loads(path.read_text().splitlines()[0])
    header.pop("sha256")
    header.pop("seq")
    header.pop("prev")
    _write_chain(path, [header, {"kind": "budget", "budget_epsilon": 2.0, "budget_delta": 1e-5, "reason": "more"}])
    _reanchor(path)
    with pytest.raises(LedgerError, match="may only lower it"):
        PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=1e-5)


def test_a_ledger_written_before_caps_is_read_with_its_raised_budget(path: Path) -> None:
    """Old folders: a header without budget_rule, a budget record that raised it, no anchor."""
    header = {"kind": "header", "format": "pate_stab.ledger", "version": 1, "run_id": "t", "budget_epsilon": 1.0,
              "budget_delta": 1e-5, "neighbouring": "add_remove", "integrity": "sha256",
              "accounting": "basic composition of the recorded (epsilon, delta)"}  # fmt: skip
    spend = {"kind": "spend", "spend_id": "a", "epsilon": 1.0, "delta": 0.0, "mechanism": "m", "event": None,
             "metadata": {}}  # fmt: skip
    raised = {"kind": "budget", "budget_epsilon": 2.0, "budget_delta": 2e-5, "reason": "compare plan"}
    _write_chain(path, [header, spend, raised])
    with PrivacyLedger(path, run_id="t", budget_epsilon=2.0, budget_delta=2e-5) as led:
        assert led.spent() == (1.0, 0.0) and led.entry("a").relation is None
    assert anchor_path(path).is_file()  # it gets an anchor
    with pytest.raises(LedgerError, match="never raised"):
        PrivacyLedger(path, run_id="t", budget_epsilon=3.0, budget_delta=2e-5)
    lowering = {"kind": "budget", "budget_epsilon": 1.5, "budget_delta": 2e-5, "reason": "r"}
    _write_chain(path, [header, spend, raised, lowering])
    anchor_path(path).unlink()
    with pytest.raises(LedgerError, match="must raise the budget"):
        PrivacyLedger(path, run_id="t", budget_epsilon=1.5, budget_delta=2e-5)


# -- one relation per ledger ----------------------------------------------------------------------


def test_replace_one_cost_is_group_privacy_over_two_steps() -> None:
    """(ε, δ) under add/remove applied twice bounds every replace-one pair: check the composed
    bound on randomised response-like pairs of output distributions, and the formula's values."""
    assert replace_one_cost(1.0, 1e-5) == (2.0, (1 + math.e) * 1e-5)
    rng = np.random.default_rng(0)
    for _ in range(2000):
        eps, delta = float(rng.uniform(0.01, 3.0)), float(rng.uniform(0.0, 0.1))
        # three output distributions P (on D), Q (on D minus x), R (on D'), each pair (eps, delta)-close
        p = rng.dirichlet(np.ones(4))
        q = _close_to(p, eps, delta, rng)
        r = _close_to(q, eps, delta, rng)
        eps2, delta2 = replace_one_cost(eps, delta)
        for event in range(16):  # every subset S of the four outcomes
            mask = np.array([(event >> i) & 1 for i in range(4)], dtype=bool)
            assert p[mask].sum() <= math.exp(eps2) * r[mask].sum() + delta2 + 1e-12


def _close_to(p: np.ndarray, eps: float, delta: float, rng: np.random.Generator) -> np.ndarray:
    """A distribution q with P[S] <= e^eps Q[S] + delta for every S (drawn until one is found)."""
    while True:
        q = rng.dirichlet(np.ones(p.size)) if rng.random() < 0.5 else p * np.exp(rng.uniform(-eps, eps, p.size))
        q = q / q.sum()
        worst = max(
            float(p[m].sum() - math.exp(eps) * q[m].sum())
            for m in (np.array([(s >> i) & 1 for i in range(p.size)], dtype=bool) for s in range(2**p.size))
        )
        if worst <= delta:
            return q


def test_an_add_remove_spend_in_a_replace_one_ledger_is_counted_by_group_privacy(path: Path) -> None:
    with PrivacyLedger(path, run_id="t", budget_epsilon=10.0, budget_delta=1e-3, neighbouring="replace_one") as led:
        entry = led.spend("dp", epsilon=1.0, delta=1e-5, mechanism="dpsgd", relation="add_remove")
        assert (entry.epsilon, entry.delta) == replace_one_cost(1.0, 1e-5)
        assert entry.relation == "add_remove" and entry.declared == (1.0, 1e-5)
        assert led.spent() == replace_one_cost(1.0, 1e-5)
        again = led.spend("dp", epsilon=1.0, delta=1e-5, mechanism="dpsgd", relation="add_remove")
        assert again.replayed and led.spent() == replace_one_cost(1.0, 1e-5)
        with pytest.raises(ValueError, match="retry must repeat"):
            led.spend("dp", epsilon=1.0, delta=1e-5, mechanism="dpsgd")  # same figures, other relation
        with pytest.raises(BudgetExhaustedError):
            led.spend("big", epsilon=4.5, delta=0.0, relation="add_remove")  # 9 + 2 > 10
    with PrivacyLedger(path, run_id="t", budget_epsilon=10.0, budget_delta=1e-3, neighbouring="replace_one") as led:
        assert led.entry("dp").declared == (1.0, 1e-5)  # read back and re-checked
    records = [json.loads(line) for line in path.read_text().splitlines()]
    records[1]["epsilon"] = 1.0  # counted as declared: not the group-privacy cost
    _write_chain(path, [{k: v for k, v in r.items() if k not in ("seq", "prev", "sha256")} for r in records])
    _reanchor(path)
    with pytest.raises(LedgerError, match="group-privacy cost"):
        PrivacyLedger(path, run_id="t", budget_epsilon=10.0, budget_delta=1e-3, neighbouring="replace_one")


def test_a_replace_one_spend_in_an_add_remove_ledger_is_refused(path: Path) -> None:
    with PrivacyLedger(path, run_id="t", budget_epsilon=10.0, budget_delta=1e-3) as led:
        before = path.read_bytes()
        with pytest.raises(ValueError, match="add_remove.*replace_one.*relation='add_remove'"):
            led.spend("head", epsilon=1.0, delta=0.0, mechanism="objective", relation="replace_one")
        with pytest.raises(ValueError, match="replace_one"):
            led.check_budget(epsilon=1.0, delta=0.0, relation="replace_one")
        with pytest.raises(ValueError, match="relation must be"):
            led.spend("x", epsilon=1.0, delta=0.0, relation="swap")
        assert path.read_bytes() == before
        entry = led.spend("ok", epsilon=1.0, delta=0.0, relation="add_remove")
        assert entry.relation == "add_remove" and entry.declared is None


# -- the anchor: losing the ledger's tail -----------------------------------------------------------


def test_a_ledger_cut_after_its_last_spend_is_refused(path: Path) -> None:
    with _ledger(path) as led:
        led.spend("a", epsilon=0.2, delta=0.0)
        led.record_result("a", {"labels": [1]})
        led.spend("b", epsilon=0.3, delta=0.0)
        led.record_result("b", {"labels": [2]})
    assert oct(anchor_path(path).stat().st_mode & 0o777) == "0o600"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-2]))  # the last spend and its result removed cleanly
    with pytest.raises(LedgerError, match="ends before the last recorded line 5.*truncated or restored"):
        _ledger(path)
    path.write_text("")  # emptied (or removed): not a fresh ledger while its anchor records lines
    with pytest.raises(LedgerError, match="is empty but its anchor"):
        _ledger(path)
    path.unlink()
    with pytest.raises(LedgerError, match="is empty but its anchor"):
        _ledger(path)
    assert not path.exists() or path.stat().st_size == 0


def test_a_ledger_cut_short_whose_anchor_was_removed_is_refused(path: Path) -> None:
    """Audit 4, D1: a truncated ledger with its anchor deleted read as a ledger from before anchors."""
    with _ledger(path) as led:
        led.spend("a", epsilon=0.2, delta=0.0)
        led.spend("b", epsilon=0.3, delta=0.0)
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join(lines[:-1]))  # the last spend removed cleanly
    anchor_path(path).unlink()  # and the anchor that would show it
    with pytest.raises(LedgerError, match="lost its anchor.*cannot be replayed"):
        _ledger(path)
    assert path.read_text() == "".join(lines[:-1]) and not anchor_path(path).exists()  # nothing written
    path.write_text(lines[0])  # cut back to its header: opens (a crash before the first anchor looks the same;
    _ledger(path).close()  # a run folder that holds a report beside it is refused, check_ledger_kept)


def test_an_older_copy_of_the_ledger_is_refused(path: Path) -> None:
    with _ledger(path) as led:
        led.spend("a", epsilon=0.2, delta=0.0)
    older = path.read_bytes()
    with _ledger(path) as led:
        led.spend("b", epsilon=0.3, delta=0.0)
    path.write_bytes(older)
    with pytest.raises(LedgerError, match="ends before the last recorded line 3"):
        _ledger(path)
    assert path.read_bytes() == older  # nothing appended to the refused copy


def test_a_crash_between_the_ledger_line_and_its_anchor_still_opens(path: Path) -> None:
    with _ledger(path) as led:
        led.spend("a", epsilon=0.2, delta=0.0)
    anchored = anchor_path(path).read_bytes()
    with _ledger(path) as led:
        led.spend("b", epsilon=0.3, delta=0.0)
    anchor_path(path).write_bytes(anchored)  # as if the process died after the line, before the anchor
    with _ledger(path) as led:
        assert led.spent() == (0.5, 0.0)
    assert json.loads(anchor_path(path).read_text())["seq"] == 2  # caught up
    # an anchor whose line has another digest (a different file of the same length) is refused
    anchor = json.loads(anchored)
    anchor["digest"] = "0" * 64
    anchor_path(path).write_text(json.dumps(anchor))
    with pytest.raises(LedgerError, match="line 2 differs from the line its anchor"):
        _ledger(path)
