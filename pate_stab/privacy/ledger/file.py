"""Verifying a ledger file: opening, locking, reading and checking every line, and what it holds.

:class:`LedgerFile` is the file side of :class:`pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger`: it
creates the file with its header or verifies an existing one line by line (digest chain,
sequence numbers, header against the budget, relation and run it is opened for, spends within
the budget, attachments to known spends), appends one record as one ``fsync``-ed line under the
lock, and answers what the verified lines hold (spent, entries, report).

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

Anchor: losing the ledger's tail. Removing whole final lines cleanly leaves a valid chain, so
the file alone cannot show it. The ledger therefore keeps the last line's sequence number and
digest outside the file, in an anchor beside it (:func:`~pate_stab.privacy.ledger.format.anchor_path`,
mode 0600, replaced atomically and ``fsync``-ed), written after every append under the same lock:
the line first, then the anchor, so a crash between the two leaves the ledger ahead of its
anchor, never behind. On open, a ledger that ends before the anchored line, or whose line at the
anchored sequence number has another digest (an older copy restored), is refused; a ledger
that extends the anchored line (a crash between the two writes) is accepted and the anchor
catches up. A ledger without an anchor (a folder written before anchors) opens as before and
gets one; a ledger whose header shows it was written with an anchor (its ``budget_rule``, which
came with anchors) and that holds more than its header is refused without one (the anchor was
deleted: a cut-off tail would go unseen). The anchor guards against accidents and restored
backups; whoever can write both files can still roll both back (keep a copy of the anchor
elsewhere, or use a keyed ledger and an external record, where that matters).

Concurrency: read-check-append runs under an exclusive ``fcntl.flock`` on the ledger file (local
file systems), so processes sharing one ledger cannot together exceed the budget; a thread lock
does the same within a process, and a ledger object used in a forked child reopens the file.
"""

from __future__ import annotations

import fcntl
import hmac
import json
import math
import os
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any, Self

from pate_stab._checks import check_delta, check_epsilon, check_nonnegative
from pate_stab.errors import LedgerError
from pate_stab.privacy.accounting.events import ExPostEvent, event_from_dict
from pate_stab.privacy.ledger.format import (
    BUDGET_RULE,
    FORMAT,
    HOLDER_BUDGET_RULE,
    NEIGHBOURING_RELATIONS,
    PRIVACY_UNITS,
    RELATIVE_SLACK,
    VERSION,
    LedgerEntry,
    anchor_path,
    canonical_line,
    line_digest,
    replace_one_cost,
)
from pate_stab.privacy.ledger.private_files import write_private

__all__ = ["LedgerFile"]

_CUT_KIND = re.compile(rb'"kind":"([a-z_]+)"')


def _cut_line_consequence(tail: bytes) -> str:
    """What a cut-off last line means, by the kind of record it was (read from its partial text).

    Every record is written whole and synced before the call that writes it returns, so the call
    that wrote the cut line never returned. A spend line: nothing was charged or released for it. A
    result, output or ex-post line: its spend, recorded above, stays charged, and the output the
    line was storing never left. Records are serialised with sorted keys, so a line cut before its
    ``kind`` says nothing about it.
    """
    match = _CUT_KIND.search(tail)
    kind = match.group(1).decode("ascii") if match else None
    spend_id = re.search(rb'"spend_id":"([^"\\]*)"', tail)
    of = f" of spend {spend_id.group(1).decode('ascii', 'replace')!r}" if spend_id else ""
    if kind == "spend":
        return f"The cut line was a spend{of}; that spend never returned, so nothing was charged or released for it"
    if kind in ("result", "output", "ex_post"):
        return (
            f"The cut line was a {kind} record{of}: the spend it belongs to is recorded above and stays charged, "
            "and the call that was storing it never returned, so the output was not released (a rerun refuses to "
            "draw that spend's noise again)"
        )
    if kind is not None:
        return f"The cut line was a {kind} record, which spends nothing; the records above it are intact"
    return (
        "The cut line is too short to tell its kind: if it was a spend, nothing was charged or released for it; "
        "if it stored a spend's output, that spend stays charged and the output was not released"
    )


class LedgerFile:
    """An open, verified ledger file and the state its lines hold (see the module docstring).

    Built by :class:`~pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger`, whose constructor checks and sets
    the settings below and then calls :meth:`_open`.
    """

    # settings (set by PrivacyLedger.__init__)
    _path: Path
    _requested_budget: tuple[float, float]
    _budget: tuple[float, float]  # the recorded budget once the file is read
    _lower_budget: str | None
    _timestamps: bool
    _neighbouring: str
    _privacy_unit: str
    _requested_run_id: str | None
    _mac_key: bytes | None
    _digest_field: str
    _budget_rule: str
    _thread_lock: threading.RLock
    _fd: int
    # what the verified lines hold (set by _open)
    _pid: int
    _offset: int
    _seq: int
    _prev: str
    _digests: list[str]  # every line's digest, by sequence number (the anchor's check)
    _header: dict[str, Any] | None
    _spends: dict[str, LedgerEntry]
    _progress: list[dict[str, Any]]

    # -- file handling -------------------------------------------------------------------------

    def _open(self) -> None:
        self._pid = os.getpid()
        self._fd = os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self._offset = 0
        self._seq = -1
        self._prev = ""
        self._digests = []
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
                if anchor_path(self._path).is_file():
                    raise LedgerError(
                        f"ledger {self._path} is empty but its anchor {anchor_path(self._path)} records earlier lines: "
                        "it was truncated or replaced. Spends recorded in the lost lines were paid for and may have "
                        "been released; do not continue from this file (a new run folder starts a new ledger)"
                    )
                header = {
                    "kind": "header",
                    "format": FORMAT,
                    "version": VERSION,
                    "run_id": self._requested_run_id or uuid.uuid4().hex,
                    "budget_epsilon": self._budget[0],
                    "budget_delta": self._budget[1],
                    "neighbouring": self._neighbouring,
                    "privacy_unit": self._privacy_unit,
                    "integrity": "sha256" if self._mac_key is None else "hmac-sha256",
                    "accounting": "basic composition of the recorded (epsilon, delta)",
                    "budget_rule": self._budget_rule,
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
                self._check_anchor()
                self._settle_budget()
            # a forked child reopens the file: it must accept the same run
            self._requested_run_id = str(self._header["run_id"]) if self._header else self._requested_run_id

    def _settle_budget(self) -> None:
        """Check the recorded budget against the requested one; lower it by a record if asked.

        The budget is a cap: it is never raised. A run that needs more is refused; a new run
        folder starts a new ledger (a new use of the data, which its owner must account for).
        """
        recorded, wanted = self._budget, self._requested_budget
        if recorded == wanted:
            return
        where = f"ledger {self._path}: the ledger records the budget cap (epsilon={recorded[0]}, delta={recorded[1]})"
        if wanted[0] > recorded[0] or wanted[1] > recorded[1]:
            raise LedgerError(
                f"{where} but was opened with (epsilon={wanted[0]}, delta={wanted[1]}): a budget cap can only be "
                "lowered, never raised. To spend more, start a new run folder (a new ledger: a new use of the "
                "data, which you must account for yourself)"
            )
        if self._lower_budget is None:
            raise LedgerError(
                f"{where} but was opened with (epsilon={wanted[0]}, delta={wanted[1]}); pass lower_budget=<reason> "
                "to lower the cap"
            )
        spent = self._totals()
        if wanted[0] < spent[0] or wanted[1] < spent[1]:
            raise LedgerError(
                f"{where}; (epsilon={spent[0]}, delta={spent[1]}) of it is already spent, so it cannot be lowered to "
                f"(epsilon={wanted[0]}, delta={wanted[1]}): a cap is never below what is spent"
            )
        self._append(
            {
                "kind": "budget",
                "change": "lower",
                "budget_epsilon": wanted[0],
                "budget_delta": wanted[1],
                "reason": self._lower_budget,
            }
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
        record[self._digest_field] = line_digest(record, self._mac_key)
        data = (canonical_line(record) + "\n").encode("ascii")
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        os.fsync(self._fd)
        self._apply(record, line_no=self._seq + 2)
        self._offset += len(data)
        self._write_anchor()  # after the line is durable: a crash leaves the ledger ahead, never behind
        return record

    def _write_anchor(self) -> None:
        """Record the last line's sequence number and digest in the anchor (atomic, 0600, fsync-ed)."""
        path = anchor_path(self._path)
        write_private(path, canonical_line({"kind": "ledger_anchor", "seq": self._seq, "digest": self._prev}) + "\n")
        dir_fd = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)  # make the rename durable
        finally:
            os.close(dir_fd)

    def _check_anchor(self) -> None:
        """Refuse a ledger that ends before, or diverges from, its anchored last line (module docstring)."""
        path = anchor_path(self._path)
        if not path.is_file():
            written_with_anchors = self._header is not None and "budget_rule" in self._header
            if written_with_anchors and self._seq > 0:
                raise LedgerError(
                    f"ledger {self._path} has lost its anchor {path}: its header shows it was written with one (every "
                    "ledger since anchors states its budget_rule), so lines cut from its end can no longer be "
                    "detected, and spends recorded in such lines cannot be replayed (a rerun would draw fresh noise "
                    "under their ids). Nothing was drawn or written. Restore the anchor from a backup, or use a new "
                    "run folder"
                )
            # a ledger written before anchors (no budget_rule in its header), or one whose header was
            # written and the process stopped before its anchor: it gets one
            self._write_anchor()
            return
        try:
            anchor = json.loads(path.read_text(encoding="ascii"))
            seq, digest = int(anchor["seq"]), str(anchor["digest"])
        except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
            raise LedgerError(f"ledger {self._path}: its anchor {path} is unreadable ({exc!r})") from exc
        if seq > self._seq:
            raise LedgerError(
                f"ledger {self._path} ends before the last recorded line {seq + 1} (it has {self._seq + 1} lines; "
                f"anchor {path}): it was truncated or restored from an older copy. Spends recorded in the lost "
                "lines were paid for and may have been released; do not continue from this file"
            )
        if not hmac.compare_digest(self._digests[seq], digest):
            raise LedgerError(
                f"ledger {self._path}, line {seq + 1} differs from the line its anchor {path} recorded: the file was "
                "replaced by another copy or edited. Do not continue from this file"
            )
        if seq < self._seq:  # the ledger is ahead (a crash after a line, before its anchor): catch up
            self._write_anchor()

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
                f"a write was cut off). {_cut_line_consequence(tail)}; inspect the file before continuing by hand"
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
            digest = line_digest(body, self._mac_key)
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
        self._digests.append(self._prev)

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
        unit = header.get("privacy_unit", "record")  # headers written before units: record privacy
        if unit != self._privacy_unit:
            raise LedgerError(
                f"{where}: the ledger records privacy_unit={unit!r}, opened with {self._privacy_unit!r} (one unit per "
                "ledger: a run under the other unit needs a new run folder)"
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
        if not isinstance(record["reason"], str):
            raise LedgerError(f"{where}: a budget record must give a reason")
        lowers = new[0] <= self._budget[0] and new[1] <= self._budget[1]
        raises = new[0] >= self._budget[0] and new[1] >= self._budget[1]
        rule = None if self._header is None else self._header.get("budget_rule")
        if rule == HOLDER_BUDGET_RULE:  # the data holder's ledger: lowered, or set by the data holder
            if record.get("change") not in ("lower", "set") or (record.get("change") == "lower" and not lowers):
                raise LedgerError(f"{where}: a budget record must lower the cap, or be set by the data holder")
            spent = self._totals()
            if not (spent[0] <= new[0] * (1 + RELATIVE_SLACK) and spent[1] <= new[1] * (1 + RELATIVE_SLACK)):
                raise LedgerError(f"{where}: the budget is set below what is already spent {spent}")
        elif rule == BUDGET_RULE:
            if record.get("change") != "lower" or not lowers:
                raise LedgerError(f"{where}: the budget is a cap: a budget record may only lower it")
            spent = self._totals()
            if not (spent[0] <= new[0] * (1 + RELATIVE_SLACK) and spent[1] <= new[1] * (1 + RELATIVE_SLACK)):
                raise LedgerError(f"{where}: the budget is lowered below what is already spent {spent}")
        elif not raises:  # a ledger written before caps: its budget records raised it
            raise LedgerError(f"{where}: a budget record of this ledger must raise the budget")
        self._budget = new

    def _apply_spend(self, record: dict[str, Any], where: str) -> None:
        spend_id = record["spend_id"]
        if spend_id in self._spends:
            raise LedgerError(f"{where}: spend_id {spend_id!r} recorded twice")
        event = None if record["event"] is None else event_from_dict(record["event"])
        relation = record.get("relation")
        unit = record.get("unit")
        if unit is not None and unit not in PRIVACY_UNITS:
            raise LedgerError(f"{where}: unknown privacy unit {unit!r}")
        if unit == "label" and self._privacy_unit != "label":
            raise LedgerError(f"{where}: a label-privacy spend in a record-privacy ledger")
        declared = None
        if relation is not None and relation not in NEIGHBOURING_RELATIONS:
            raise LedgerError(f"{where}: unknown relation {relation!r}")
        if relation is not None and relation != self._neighbouring:
            if (relation, self._neighbouring) != ("add_remove", "replace_one"):
                raise LedgerError(f"{where}: a {relation} spend in a {self._neighbouring} ledger")
            declared = (
                check_nonnegative("epsilon", record["declared"]["epsilon"]),
                check_delta(record["declared"]["delta"], allow_zero=True),
            )
            if replace_one_cost(*declared) != (record["epsilon"], record["delta"]):
                raise LedgerError(
                    f"{where}: the counted (epsilon, delta) is not the group-privacy cost of the declared"
                )
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
            relation=relation,
            declared=declared,
            unit=unit,
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
        return epsilon <= budget_eps * (1 + RELATIVE_SLACK) and delta <= budget_delta * (1 + RELATIVE_SLACK)

    # -- what the verified file holds ---------------------------------------------------------------

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
            "privacy_unit": self._privacy_unit,
            "integrity": "sha256" if self._mac_key is None else "hmac-sha256",
            "budget": {"epsilon": self._budget[0], "delta": self._budget[1]},
            "spent_basic_composition": {"epsilon": eps, "delta": delta},
            "num_spends": len(entries),
            "ex_post": [{"spend_id": e.spend_id, **e.ex_post.to_dict()} for e in entries if e.ex_post],
        }

    @property
    def path(self) -> Path:
        return self._path

    @property
    def budget(self) -> tuple[float, float]:
        return self._budget

    @property
    def neighbouring(self) -> str:
        return self._neighbouring

    @property
    def privacy_unit(self) -> str:
        return self._privacy_unit

    @property
    def run_id(self) -> str:
        return str(self._header["run_id"]) if self._header else ""

    def close(self) -> None:
        with self._thread_lock:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        fd = getattr(self, "_fd", -1)
        if fd >= 0 and getattr(self, "_pid", None) == os.getpid():
            os.close(fd)
