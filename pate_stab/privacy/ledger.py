"""The persistent privacy ledger: one append-only JSON-lines file per run.

Every release is recorded before it is returned (DESIGN.md fact 7). :meth:`PrivacyLedger.spend`
appends one line, flushes it and ``fsync``\\ s it, and only then returns; the caller releases
after ``spend`` returns. A crash can therefore leave a spend recorded whose release never left
(over-count) but never a release without its spend (under-count).

File format (``checkpoints/<run>/ledger.jsonl`` in a run): line 1 is a header with the budget,
the neighbouring relation, the integrity mode and the run id; every later line is one record
(``spend``, ``output``, ``result``, ``ex_post``, ``budget`` or ``progress``). Each line is canonical JSON
(sorted keys) carrying a consecutive ``seq``, the digest of the previous line (``prev``) and its
own digest over the rest of the record.

Integrity: what opening a ledger detects. Every line is verified on open and before each
spend, and :class:`pate_stab.errors.LedgerError` names the line and what is wrong.

* Plain ledgers (the default; digest field ``sha256``) detect *accidental* damage: a corrupted
  or partly written line, reordered or removed lines (except a whole final line removed
  cleanly, which the file alone cannot show), and a header that does not match the budget,
  relation or run it is opened for. They do **not** detect a deliberate edit: anyone who can
  write the file can change a line and recompute the SHA-256 chain.
* Keyed ledgers (``mac_key=...``; digest field ``hmac``, HMAC-SHA256 under that key) also detect
  deliberate edits by anyone who lacks the key, provided the key is kept outside the ledger's
  folder (it is never written to the file). A keyed ledger refuses to open without its key, and
  a key refuses a plain ledger.

A ledger written for publication (``timestamps=False``, as runs open theirs) carries no wall-clock
times: the time between two records measures private stages (teacher training, vote counting).
Its lines hold the budget, the relation, the spends with their events and released outputs, and
digests of public inputs only (see :class:`pate_stab.aggregation.base.LedgerRelease`).

Raising the budget. A ledger opened with a larger budget than the one it records is refused,
unless the caller says why (``raise_budget="..."``): the new budget is then appended as an
explicit ``budget`` record with that reason, and every later spend is checked against it. A
budget is never lowered.

Budget rule: the spent total is the *basic composition* of the recorded spends, (Σ ε_i, Σ δ_i)
(Dwork & Roth 2014, Thm 3.16). It is valid for any adaptive sequence of (ε_i, δ_i)-DP
mechanisms, whatever they are, so the ledger never needs to trust an event description to stay
sound; tighter totals from the recorded events are available through
:func:`pate_stab.privacy.accounting.epsilon_for_delta` for reporting. Sums are exact-rounded
(``math.fsum``), and a total may exceed the budget by at most a relative 1e-12 so that a budget
split into T equal floating-point parts can be spent T times.

Concurrency: read-check-append runs under an exclusive ``fcntl.flock`` on the ledger file (local
file systems), so processes sharing one ledger cannot together exceed the budget; a thread lock
does the same within a process, and a ledger object used in a forked child reopens the file.

One spend id, one draw of noise (DESIGN.md fact 7). A release's outputs are stored with its
spend: :meth:`PrivacyLedger.spend` takes the first ``output`` in the same line (one durable
write: the spend and what it released are recorded together, or neither is), and
:meth:`PrivacyLedger.record_output` appends the outputs of later calls of an online release,
each before it leaves the releaser. A repeated ``spend_id`` returns the recorded entry with its
outputs instead of spending again; the caller returns those outputs and must never draw fresh
noise under the old charge (:class:`pate_stab.aggregation.spend.LedgerRelease` enforces this).
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import math
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pate_stab._validation import check_delta, check_epsilon, check_nonnegative
from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.accounting import implies_guarantee
from pate_stab.privacy.events import ExPostEvent, PrivacyEvent, event_from_dict
from pate_stab.privacy.private_files import run_private_key

__all__ = ["PrivacyLedger", "LedgerEntry", "NEIGHBOURING_RELATIONS", "DEFAULT_NEIGHBOURING", "recorded_budget"]

FORMAT = "pate_stab.ledger"
VERSION = 1
NEIGHBOURING_RELATIONS = ("add_remove", "replace_one")
DEFAULT_NEIGHBOURING = "add_remove"
"""What the library's releases guarantee by default: content-keyed shards move one teacher per
added or removed record (DESIGN.md fact 1); replace-one needs record-id keys or group privacy."""
_RELATIVE_SLACK = 1e-12  # float rounding of a budget split into equal parts


@dataclass(frozen=True)
class LedgerEntry:
    """One recorded spend.

    Attributes:
        seq: line number of the spend in the file (header is 0).
        spend_id: the caller's id for the request.
        epsilon, delta: what was counted against the budget.
        mechanism: short name of the mechanism.
        event: the event describing what was done, if given.
        metadata: free JSON data given with the spend.
        time: Unix time of the spend (None in a ledger written without timestamps).
        result: payload recorded with :meth:`PrivacyLedger.record_result` (``has_result``).
        outputs: the released outputs, one payload per release call, in order (the first one
            stored with the spend itself, see :meth:`PrivacyLedger.spend`).
        ex_post: realised ex-post loss, if recorded.
        replayed: True when ``spend`` returned this earlier record instead of spending.
    """

    seq: int
    spend_id: str
    epsilon: float
    delta: float
    mechanism: str
    event: PrivacyEvent | None
    metadata: dict[str, Any]
    time: float | None
    result: Any = None
    has_result: bool = False
    outputs: tuple[Any, ...] = ()
    ex_post: ExPostEvent | None = None
    replayed: bool = field(default=False, compare=False)


def _canonical(record: Mapping[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def _digest(record: Mapping[str, Any], key: bytes | None = None) -> str:
    data = _canonical(record).encode("ascii")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def _json_value(name: str, value: Any) -> Any:
    try:
        return json.loads(_canonical({"v": value}))["v"]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be JSON-serialisable without NaN/inf: {exc}") from exc


def recorded_budget(path: str | os.PathLike[str]) -> tuple[float, float] | None:
    """The budget a ledger file records now (its header, raised by any ``budget`` records), or
    None when there is no file. Nothing is verified: opening the ledger does that.

    Raises:
        LedgerError: the file has no readable header.
    """
    target = Path(path)
    if not target.is_file() or target.stat().st_size == 0:
        return None
    budget: tuple[float, float] | None = None
    with target.open("rb") as f:
        for raw in f:
            try:
                record = json.loads(raw)
            except ValueError:
                break  # a torn last line: opening the ledger reports it
            if record.get("kind") in ("header", "budget"):
                budget = (float(record["budget_epsilon"]), float(record["budget_delta"]))
    if budget is None:
        raise LedgerError(f"{target} has no ledger header")
    return budget


class PrivacyLedger:
    """A run's privacy budget and the append-only record of what was spent from it.

    Args:
        path: the ledger file (created with its parent folders if absent).
        budget_epsilon: total ε of the run, > 0.
        budget_delta: total δ of the run, in [0, 1).
        run_id: a new file gets this id (or a random one when None); an existing file must
            carry it. Reopening an existing file needs its run id: None is refused, so that one
            run never spends from another run's ledger by accident.
        neighbouring: the neighbouring relation the recorded guarantees hold under:
            ``"add_remove"`` (default: what releases over content-keyed shards guarantee,
            DESIGN.md fact 1) or ``"replace_one"`` (only where it is true: record-id partition
            keys, or calibrations that cover two changed teachers).
        mac_key: optional secret (≥ 16 bytes) for HMAC-SHA256 line digests, so that deliberate
            edits are detected by whoever holds the key (module docstring, "Integrity"). Never
            stored in the file.
        timestamps: write wall-clock times into the header and the spends (default). A ledger
            meant for publication is written without them (module docstring).
        raise_budget: why the budget may be raised: when the file records a smaller budget
            than (``budget_epsilon``, ``budget_delta``), a ``budget`` record with this reason
            raises it (None: a different budget is refused).

    Raises:
        LedgerError: the file exists but is corrupted, truncated, was made for another budget,
            relation, run or integrity mode, or was reopened without its run id; or it records
            another budget and ``raise_budget`` was not given (or would lower it).
        ValueError / TypeError: invalid arguments.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        budget_epsilon: float,
        budget_delta: float,
        run_id: str | None = None,
        neighbouring: str = DEFAULT_NEIGHBOURING,
        mac_key: bytes | None = None,
        timestamps: bool = True,
        raise_budget: str | None = None,
    ) -> None:
        self._requested_budget = (
            check_epsilon(budget_epsilon, "budget_epsilon"),
            check_delta(budget_delta, "budget_delta", allow_zero=True),
        )
        self._budget = self._requested_budget  # the recorded budget once the file is read
        if raise_budget is not None and (not isinstance(raise_budget, str) or not raise_budget.strip()):
            raise TypeError("raise_budget must be a non-empty reason (str) or None")
        self._timestamps = bool(timestamps)
        self._raise_budget = raise_budget
        if neighbouring not in NEIGHBOURING_RELATIONS:
            raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise TypeError("run_id must be a non-empty str or None")
        if mac_key is not None and (not isinstance(mac_key, bytes) or len(mac_key) < 16):
            raise TypeError("mac_key must be bytes of length >= 16 (or None for a plain SHA-256 chain)")
        self._neighbouring = neighbouring
        self._requested_run_id = run_id
        self._mac_key = mac_key
        self._digest_field = "sha256" if mac_key is None else "hmac"
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.RLock()
        self._fd = -1
        self._open()

    # -- file handling -------------------------------------------------------------------------

    def _open(self) -> None:
        self._pid = os.getpid()
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._offset = 0
        self._seq = -1
        self._prev = ""
        self._header: dict[str, Any] | None = None
        self._spends: dict[str, LedgerEntry] = {}
        self._progress: list[dict[str, Any]] = []
        try:
            self._create_or_verify()
        except BaseException:
            os.close(self._fd)
            self._fd = -1
            raise

    def _create_or_verify(self) -> None:
        with self._locked(exclusive=True):
            if os.fstat(self._fd).st_size == 0:
                header = {
                    "kind": "header",
                    "format": FORMAT,
                    "version": VERSION,
                    "run_id": self._requested_run_id or uuid.uuid4().hex,
                    "budget_epsilon": self._budget[0],
                    "budget_delta": self._budget[1],
                    "neighbouring": self._neighbouring,
                    "integrity": "sha256" if self._mac_key is None else "hmac-sha256",
                    "accounting": "basic composition of the recorded (epsilon, delta)",
                }
                if self._timestamps:
                    header["created"] = time.time()
                self._append(header)
                dir_fd = os.open(self._path.parent, os.O_RDONLY)
                try:
                    os.fsync(dir_fd)  # make the new file's directory entry durable
                finally:
                    os.close(dir_fd)
            else:
                if self._requested_run_id is None:
                    raise LedgerError(
                        f"ledger {self._path} already exists: pass its run_id to reopen it (a ledger opened "
                        "without one could be another run's, whose spends would then be mixed with this run's)"
                    )
                self._sync()
                self._settle_budget()
            # a forked child reopens the file: it must accept the same run
            self._requested_run_id = str(self._header["run_id"]) if self._header else self._requested_run_id

    def _settle_budget(self) -> None:
        """Check the recorded budget against the requested one; raise it by a record if allowed."""
        recorded, wanted = self._budget, self._requested_budget
        if recorded == wanted:
            return
        raises = wanted[0] >= recorded[0] and wanted[1] >= recorded[1]
        if self._raise_budget is None or not raises:
            how = (
                "pass raise_budget=<reason> to record a larger budget"
                if raises
                else "a budget is never lowered"
            )
            raise LedgerError(
                f"ledger {self._path}: the ledger records budget (epsilon={recorded[0]}, delta={recorded[1]})"
                f" but was opened with (epsilon={wanted[0]}, delta={wanted[1]}); {how}"
            )
        self._append(
            {"kind": "budget", "budget_epsilon": wanted[0], "budget_delta": wanted[1], "reason": self._raise_budget}
        )

    @contextmanager
    def _locked(self, *, exclusive: bool) -> Iterator[None]:
        with self._thread_lock:
            if self._fd < 0:
                raise LedgerError(f"ledger {self._path} is closed")
            if os.getpid() != self._pid:  # forked child: the inherited descriptor shares locks
                os.close(self._fd)
                self._open()
            fcntl.flock(self._fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                yield
            finally:
                fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Write one record as a line, fsync it, and apply it. Caller holds the exclusive lock."""
        record = {**record, "seq": self._seq + 1, "prev": self._prev}
        record[self._digest_field] = _digest(record, self._mac_key)
        data = (_canonical(record) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        self._apply(record, line_no=self._seq + 2)
        self._offset += len(data)
        return record

    def _sync(self) -> None:
        """Read and verify lines appended since the last read. Caller holds a lock."""
        size = os.fstat(self._fd).st_size
        if size < self._offset:
            raise LedgerError(f"ledger {self._path} shrank from {self._offset} to {size} bytes")
        if size == self._offset:
            return
        data = os.pread(self._fd, size - self._offset, self._offset)
        lines = data.split(b"\n")
        tail = lines.pop()  # bytes after the last newline
        for raw in lines:
            line_no = self._seq + 2
            try:
                record = json.loads(raw.decode("ascii"))
            except (UnicodeDecodeError, ValueError) as exc:
                raise LedgerError(f"ledger {self._path}, line {line_no}: not valid JSON ({exc})") from exc
            self._apply(record, line_no=line_no)
            self._offset += len(raw) + 1
        if tail:
            raise LedgerError(
                f"ledger {self._path}, line {self._seq + 2}: truncated (no newline at end of file; "
                "a write was cut off). The spend on that line never returned, so nothing was "
                "released for it; inspect the file before continuing by hand"
            )

    # -- verification and state ----------------------------------------------------------------

    def _apply(self, record: Any, *, line_no: int) -> None:
        where = f"ledger {self._path}, line {line_no}"
        if not isinstance(record, dict):
            raise LedgerError(f"{where}: not a JSON object")
        field_name = self._digest_field
        other = "hmac" if field_name == "sha256" else "sha256"
        if other in record:
            if other == "hmac":
                raise LedgerError(f"{where}: the ledger is keyed (HMAC-SHA256); open it with its mac_key")
            raise LedgerError(f"{where}: the ledger is not keyed (plain SHA-256) but a mac_key was given")
        body = {k: v for k, v in record.items() if k != field_name}
        try:
            digest = _digest(body, self._mac_key)
        except ValueError as exc:
            raise LedgerError(f"{where}: invalid value ({exc})") from exc
        if not isinstance(record.get(field_name), str) or not hmac.compare_digest(record[field_name], digest):
            what = "MAC mismatch (the line was edited, corrupted, or the key is wrong)"
            raise LedgerError(f"{where}: {what if self._mac_key else 'checksum mismatch (the line was corrupted)'}")
        if record.get("seq") != self._seq + 1:
            raise LedgerError(f"{where}: sequence number {record.get('seq')!r}, expected {self._seq + 1}")
        if record.get("prev") != self._prev:
            raise LedgerError(f"{where}: does not follow the previous line (lines removed or reordered)")
        kind = record.get("kind")
        try:
            if line_no == 1:
                if kind != "header":
                    raise LedgerError(f"{where}: the first line must be the ledger header")
                self._check_header(record, where)
            elif kind == "spend":
                self._apply_spend(record, where)
            elif kind in ("result", "ex_post", "output"):
                self._apply_attachment(record, where)
            elif kind == "progress":
                self._progress.append(dict(record["info"]))
            elif kind == "budget":
                self._apply_budget(record, where)
            else:
                raise LedgerError(f"{where}: unknown record kind {kind!r}")
        except (KeyError, TypeError, ValueError) as exc:
            raise LedgerError(f"{where}: malformed {kind} record ({exc!r})") from exc
        self._seq += 1
        self._prev = record[field_name]

    def _check_header(self, header: dict[str, Any], where: str) -> None:
        if header.get("format") != FORMAT or header.get("version") != VERSION:
            raise LedgerError(f"{where}: not a {FORMAT} v{VERSION} header")
        self._budget = (
            check_epsilon(header["budget_epsilon"], "budget_epsilon"),
            check_delta(header["budget_delta"], "budget_delta", allow_zero=True),
        )  # compared with the requested budget once every line is read (_settle_budget)
        if header.get("neighbouring") != self._neighbouring:
            raise LedgerError(
                f"{where}: the ledger records neighbouring={header.get('neighbouring')!r}, "
                f"opened with {self._neighbouring!r}"
            )
        if self._requested_run_id is not None and header.get("run_id") != self._requested_run_id:
            raise LedgerError(
                f"{where}: the ledger belongs to run {header.get('run_id')!r}, not {self._requested_run_id!r}"
            )
        self._header = header

    def _apply_budget(self, record: dict[str, Any], where: str) -> None:
        new = (
            check_epsilon(record["budget_epsilon"], "budget_epsilon"),
            check_delta(record["budget_delta"], "budget_delta", allow_zero=True),
        )
        if not isinstance(record["reason"], str) or new[0] < self._budget[0] or new[1] < self._budget[1]:
            raise LedgerError(f"{where}: a budget record must raise the budget and give a reason")
        self._budget = new

    def _apply_spend(self, record: dict[str, Any], where: str) -> None:
        spend_id = record["spend_id"]
        if spend_id in self._spends:
            raise LedgerError(f"{where}: spend_id {spend_id!r} recorded twice")
        event = None if record["event"] is None else event_from_dict(record["event"])
        entry = LedgerEntry(
            seq=record["seq"],
            spend_id=str(spend_id),
            epsilon=check_nonnegative("epsilon", record["epsilon"]),
            delta=check_delta(record["delta"], allow_zero=True),
            mechanism=str(record["mechanism"]),
            event=event,
            metadata=dict(record["metadata"]),
            time=None if record.get("time") is None else float(record["time"]),
            outputs=(record["output"],) if "output" in record else (),
            ex_post=event if isinstance(event, ExPostEvent) else None,
        )
        eps, delta = self._totals([entry])
        if not self._within_budget(eps, delta):
            raise LedgerError(f"{where}: recorded spend exceeds the budget {self._budget}")
        self._spends[spend_id] = entry

    def _apply_attachment(self, record: dict[str, Any], where: str) -> None:
        spend_id = record["spend_id"]
        entry = self._spends.get(spend_id)
        if entry is None:
            raise LedgerError(f"{where}: {record['kind']} for unknown spend_id {spend_id!r}")
        if record["kind"] == "result":
            if entry.has_result:
                raise LedgerError(f"{where}: second result for spend_id {spend_id!r}")
            new = {"result": record["payload"], "has_result": True}
        elif record["kind"] == "output":
            if record["index"] != len(entry.outputs):
                raise LedgerError(
                    f"{where}: output {record['index']!r} of {spend_id!r} out of order "
                    f"({len(entry.outputs)} recorded before it)"
                )
            new = {"outputs": (*entry.outputs, record["payload"])}
        else:
            event = event_from_dict(record["event"])
            if not isinstance(event, ExPostEvent) or entry.ex_post is not None:
                raise LedgerError(f"{where}: invalid or repeated ex_post for {spend_id!r}")
            new = {"ex_post": event}
        self._spends[spend_id] = replace(entry, **new)

    def _totals(self, extra: list[LedgerEntry] | None = None) -> tuple[float, float]:
        entries = list(self._spends.values()) + (extra or [])
        return math.fsum(e.epsilon for e in entries), math.fsum(e.delta for e in entries)

    def _within_budget(self, epsilon: float, delta: float) -> bool:
        budget_eps, budget_delta = self._budget
        return epsilon <= budget_eps * (1 + _RELATIVE_SLACK) and delta <= budget_delta * (1 + _RELATIVE_SLACK)

    # -- public API ----------------------------------------------------------------------------

    def spend(
        self,
        spend_id: str,
        *,
        epsilon: float,
        delta: float,
        event: PrivacyEvent | None = None,
        mechanism: str = "unspecified",
        metadata: Mapping[str, Any] | None = None,
        check_event: bool = True,
        output: Any = None,
    ) -> LedgerEntry:
        """Record a spend of (``epsilon``, ``delta``) durably, then return its entry.

        Release only after this returns, and release what the returned entry records. If
        ``spend_id`` was recorded before, nothing is spent and the recorded entry
        (``replayed=True``, with its stored ``outputs`` and ``result``) is returned; the
        ``output`` passed in is then *not* stored and must not be released (it came from a
        second draw of noise under the same charge).

        Args:
            spend_id: the caller's unique id for this request (retries reuse it).
            epsilon: ε counted against the budget, ≥ 0.
            delta: δ counted against the budget, in [0, 1); (0, 0) is rejected.
            event: what was done. With ``check_event``, the event's PLD must imply the declared
                (ε, δ) (δ(ε) ≤ δ); an :class:`ExPostEvent` is kept as the realised loss beside
                the ex-ante (ε, δ), and with δ = 0 it must not exceed ε.
            mechanism: short name for the record.
            metadata: JSON data stored with the spend.
            output: the first output of the release this spend pays for (JSON data), written in
                the same line as the spend, so that the charge and what it bought are durable
                together (``outputs[0]`` of the entry).

        Raises:
            BudgetExhaustedError: the spend would exceed the budget; nothing was written.
            ValueError: invalid values, an event that does not imply (ε, δ), or a reused
                ``spend_id`` whose parameters differ from the recorded ones.
            LedgerError: the file became inconsistent.
        """
        if not isinstance(spend_id, str) or not spend_id:
            raise TypeError("spend_id must be a non-empty str")
        epsilon = check_nonnegative("epsilon", epsilon)
        delta = check_delta(delta, allow_zero=True)
        if epsilon == 0.0 and delta == 0.0:
            raise ValueError("epsilon and delta are both 0: nothing to spend (use record_progress)")
        if not isinstance(mechanism, str):
            raise TypeError("mechanism must be a str")
        if event is not None and not isinstance(event, PrivacyEvent):
            raise TypeError(f"event must be a privacy event, got {type(event).__name__}")
        meta = _json_value("metadata", dict(metadata or {}))
        out = None if output is None else _json_value("output", output)
        event_dict: dict[str, Any] | None = None
        if event is not None:
            event_dict = _json_value("event", event.to_dict())
            if event_from_dict(event_dict) != event:
                raise ValueError(f"event {event!r} does not survive a JSON round trip")
        if event is not None and check_event:
            if isinstance(event, ExPostEvent):
                if delta == 0.0 and event.epsilon_ex_post > epsilon:
                    raise ValueError(f"ex-post loss {event.epsilon_ex_post} exceeds the ex-ante epsilon {epsilon}")
            elif not implies_guarantee(event, epsilon=epsilon, delta=delta):
                raise ValueError(
                    f"the event {event!r} does not imply the declared (epsilon={epsilon}, "
                    f"delta={delta}): its PLD gives a larger delta at that epsilon"
                )
        with self._locked(exclusive=True):
            self._sync()
            recorded = self._spends.get(spend_id)
            if recorded is not None:
                same = (recorded.epsilon, recorded.delta, recorded.mechanism) == (
                    epsilon,
                    delta,
                    mechanism,
                )
                rec_event = None if recorded.event is None else recorded.event.to_dict()
                if not same or rec_event != event_dict:
                    raise ValueError(
                        f"spend_id {spend_id!r} was recorded with epsilon={recorded.epsilon}, "
                        f"delta={recorded.delta}, mechanism={recorded.mechanism!r}, event={rec_event}; "
                        "a retry must repeat the same request"
                    )
                return replace(recorded, replayed=True)
            spent_eps, spent_delta = self._totals()
            total_eps, total_delta = (
                math.fsum([spent_eps, epsilon]),
                math.fsum([spent_delta, delta]),
            )
            if not self._within_budget(total_eps, total_delta):
                raise BudgetExhaustedError(
                    f"spend {spend_id!r} requests (epsilon={epsilon}, delta={delta}) but "
                    f"(epsilon={spent_eps}, delta={spent_delta}) of the budget "
                    f"(epsilon={self._budget[0]}, delta={self._budget[1]}) is already spent; "
                    "nothing was recorded or released"
                )
            record: dict[str, Any] = {
                "kind": "spend",
                "spend_id": spend_id,
                "epsilon": epsilon,
                "delta": delta,
                "mechanism": mechanism,
                "event": event_dict,
                "metadata": meta,
            }
            if self._timestamps:
                record["time"] = time.time()
            if out is not None:
                record["output"] = out
            self._append(record)
            return self._spends[spend_id]

    def check_budget(self, *, epsilon: float, delta: float, spend_id: str | None = None) -> None:
        """Raise :class:`BudgetExhaustedError` now if a spend of (ε, δ) would not fit.

        For refusing before any noise is drawn; :meth:`spend` checks again under the lock. A
        ``spend_id`` that is already recorded fits (its retry spends nothing).
        """
        epsilon = check_nonnegative("epsilon", epsilon)
        delta = check_delta(delta, allow_zero=True)
        with self._locked(exclusive=False):
            self._sync()
            if spend_id is not None and spend_id in self._spends:
                return
            spent_eps, spent_delta = self._totals()
            if not self._within_budget(math.fsum([spent_eps, epsilon]), math.fsum([spent_delta, delta])):
                raise BudgetExhaustedError(
                    f"a spend of (epsilon={epsilon}, delta={delta}) does not fit: (epsilon={spent_eps}, "
                    f"delta={spent_delta}) of the budget (epsilon={self._budget[0]}, delta={self._budget[1]}) "
                    "is already spent; nothing was drawn, recorded or released"
                )

    def record_output(self, spend_id: str, index: int, payload: Any) -> Any:
        """Durably store output number ``index`` of a spend's release; return the stored output.

        Outputs are numbered from 0 (output 0 is usually stored with the spend itself). If
        output ``index`` is already recorded — another releaser under the same spend id got
        there first — nothing is written and the recorded one is returned: release that, never
        ``payload``.

        Raises:
            KeyError: no spend with this id.
            ValueError: ``index`` would leave a gap, or the payload is not JSON data.
        """
        payload = _json_value("payload", payload)
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise ValueError(f"index must be a non-negative int, got {index!r}")
        with self._locked(exclusive=True):
            self._sync()
            entry = self._spends.get(spend_id)
            if entry is None:
                raise KeyError(f"no spend recorded with spend_id {spend_id!r}")
            if index < len(entry.outputs):
                return entry.outputs[index]
            if index > len(entry.outputs):
                raise ValueError(
                    f"output {index} of {spend_id!r} would leave a gap: {len(entry.outputs)} outputs are recorded"
                )
            self._append({"kind": "output", "spend_id": spend_id, "index": index, "payload": payload})
            return self._spends[spend_id].outputs[index]

    def record_result(self, spend_id: str, payload: Any) -> None:
        """Durably store the released payload of a spend, so a retry returns it unchanged.

        Raises:
            KeyError: no spend with this id.
            ValueError: payload not JSON-serialisable, or a different result already stored.
        """
        payload = _json_value("payload", payload)
        with self._locked(exclusive=True):
            self._sync()
            entry = self._spends.get(spend_id)
            if entry is None:
                raise KeyError(f"no spend recorded with spend_id {spend_id!r}")
            if entry.has_result:
                if entry.result != payload:
                    raise ValueError(f"a different result is already recorded for {spend_id!r}")
                return
            self._append({"kind": "result", "spend_id": spend_id, "payload": payload})

    def record_ex_post(self, spend_id: str, event: ExPostEvent) -> None:
        """Attach the realised ex-post loss (Ligett et al. 2017) to a recorded spend.

        The spend's ex-ante (ε, δ) stays what is counted against the budget.
        """
        if not isinstance(event, ExPostEvent):
            raise TypeError(f"event must be an ExPostEvent, got {type(event).__name__}")
        with self._locked(exclusive=True):
            self._sync()
            entry = self._spends.get(spend_id)
            if entry is None:
                raise KeyError(f"no spend recorded with spend_id {spend_id!r}")
            if entry.ex_post is not None:
                raise ValueError(f"an ex-post loss is already recorded for {spend_id!r}")
            if entry.delta == 0.0 and event.epsilon_ex_post > entry.epsilon:
                raise ValueError(f"ex-post loss {event.epsilon_ex_post} exceeds the ex-ante epsilon {entry.epsilon}")
            self._append({"kind": "ex_post", "spend_id": spend_id, "event": event.to_dict()})

    def record_progress(self, info: Mapping[str, Any] | None = None, /, **fields: Any) -> None:
        """Append an informational line (e.g. queries answered so far); it spends nothing."""
        data = _json_value("info", {**dict(info or {}), **fields})
        with self._locked(exclusive=True):
            self._sync()
            self._append({"kind": "progress", "info": data} | ({"time": time.time()} if self._timestamps else {}))

    def spent(self) -> tuple[float, float]:
        """(Σ ε, Σ δ) over all recorded spends (basic composition)."""
        with self._locked(exclusive=False):
            self._sync()
            return self._totals()

    def remaining(self) -> tuple[float, float]:
        """Budget minus :meth:`spent`, floored at 0."""
        eps, delta = self.spent()
        return max(0.0, self._budget[0] - eps), max(0.0, self._budget[1] - delta)

    def entries(self) -> list[LedgerEntry]:
        """All recorded spends in file order."""
        with self._locked(exclusive=False):
            self._sync()
            return list(self._spends.values())

    def entry(self, spend_id: str) -> LedgerEntry | None:
        """The recorded spend with this id (with its outputs and result), or None."""
        with self._locked(exclusive=False):
            self._sync()
            return self._spends.get(spend_id)

    def ex_post_entries(self) -> list[LedgerEntry]:
        """Spends carrying a realised ex-post loss; these losses are reported, not summed into ε."""
        return [e for e in self.entries() if e.ex_post is not None]

    def progress_entries(self) -> list[dict[str, Any]]:
        with self._locked(exclusive=False):
            self._sync()
            return [dict(p) for p in self._progress]

    def report(self) -> dict[str, Any]:
        """A JSON-ready summary for a run's report."""
        entries = self.entries()
        eps, delta = math.fsum(e.epsilon for e in entries), math.fsum(e.delta for e in entries)
        return {
            "path": str(self._path),
            "run_id": self.run_id,
            "neighbouring": self._neighbouring,
            "integrity": "sha256" if self._mac_key is None else "hmac-sha256",
            "budget": {"epsilon": self._budget[0], "delta": self._budget[1]},
            "spent_basic_composition": {"epsilon": eps, "delta": delta},
            "num_spends": len(entries),
            "ex_post": [{"spend_id": e.spend_id, **e.ex_post.to_dict()} for e in entries if e.ex_post],
        }

    @property
    def path(self) -> Path:
        return self._path

    def private_key(self) -> bytes:
        """The secret key of the ledger's folder (:func:`~pate_stab.privacy.private_files.run_private_key`):
        for MACs of private inputs, which are never written into the ledger unkeyed."""
        return run_private_key(self._path.parent)

    @property
    def budget(self) -> tuple[float, float]:
        return self._budget

    @property
    def neighbouring(self) -> str:
        return self._neighbouring

    @property
    def run_id(self) -> str:
        return str(self._header["run_id"]) if self._header else ""

    def close(self) -> None:
        with self._thread_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> PrivacyLedger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0 and getattr(self, "_pid", None) == os.getpid():
            os.close(fd)
