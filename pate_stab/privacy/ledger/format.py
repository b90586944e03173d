"""What a ledger line holds: the file's format constants, the recorded spend and line encoding.

File format (``checkpoints/<run>/ledger.jsonl`` in a run): line 1 is a header with the budget,
the neighbouring relation, the integrity mode and the run id; every later line is one record
(``spend``, ``output``, ``result``, ``ex_post``, ``budget`` or ``progress``). Each line is canonical JSON
(sorted keys) carrying a consecutive ``seq``, the digest of the previous line (``prev``) and its
own digest over the rest of the record: SHA-256 (field ``sha256``) or HMAC-SHA256 under the
ledger's key (field ``hmac``). :class:`LedgerEntry` is what a ``spend`` line and the lines
attached to it (outputs, result, ex-post loss) amount to once read.

The budget is a cap (header field ``budget_rule: "cap"``): a ``budget`` record may only lower it
(``change: "lower"``). Ledgers written before caps (no ``budget_rule``) may hold ``budget`` records
that raised it; they are read as they were written. A spend line states the neighbouring relation
its guarantee holds under (``relation``; lines without it hold under the ledger's); a spend made
under add/remove in a replace-one ledger is counted by group privacy
(:func:`replace_one_cost`) and keeps its own figures under ``declared``.

The ledger itself is :class:`pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pate_stab.errors import LedgerError
from pate_stab.privacy.accounting.events import ExPostEvent, PrivacyEvent
from pate_stab.vocabulary import NEIGHBOURING_RELATIONS, PRIVACY_UNITS, Neighbouring, PrivacyUnit

__all__ = [
    "BUDGET_RULE",
    "DEFAULT_NEIGHBOURING",
    "HOLDER_BUDGET_RULE",
    "FORMAT",
    "NEIGHBOURING_RELATIONS",
    "PRIVACY_UNITS",
    "VERSION",
    "LedgerEntry",
    "Neighbouring",
    "PrivacyUnit",
    "SpendRequest",
    "anchor_path",
    "recorded_budget",
    "replace_one_cost",
    "RELATIVE_SLACK",
    "canonical_line",
    "json_value",
    "line_digest",
]

FORMAT = "pate_stab.ledger"
VERSION = 1
DEFAULT_NEIGHBOURING = "add_remove"
"""What the library's releases guarantee by default: content-keyed shards move one teacher per
added or removed record (DESIGN.md fact 1); replace-one needs record-id keys or group privacy."""
RELATIVE_SLACK = 1e-12  # float rounding of a budget split into equal parts
BUDGET_RULE = "cap"
"""The header's ``budget_rule``: the budget is the user's cap, which a ``budget`` record may only lower."""
HOLDER_BUDGET_RULE = "data holder's cap"
"""The ``budget_rule`` of a data holder's ledger (:mod:`pate_stab.privacy.ledger.data_budget`): a ``budget``
record may lower the cap (``change: "lower"``) or set it (``change: "set"``: the data holder's explicit
decision, up or down), never below what is spent."""


def replace_one_cost(epsilon: float, delta: float) -> tuple[float, float]:
    """What an (ε, δ) guarantee under add/remove one record guarantees under replace-one: (2ε, (1 + e^ε) δ).

    Replacing a record is removing it and adding another: D ~ D \\ {x} ~ D'. Applying the
    add/remove guarantee twice (group privacy over k = 2 steps; Dwork & Roth 2014, Thm 2.2 for
    pure DP; Vadhan 2017, Lemma 2.2 (kε, k·e^{(k−1)ε}·δ) for approximate DP, here tightened by
    summing the two steps exactly): P[M(D) ∈ S] ≤ e^ε (e^ε P[M(D') ∈ S] + δ) + δ
    = e^{2ε} P[M(D') ∈ S] + (1 + e^ε) δ. The converse does not hold: a replace-one guarantee
    implies no add/remove guarantee (a mechanism that outputs the number of records is 0-DP under
    replace-one and not DP at all under add/remove).

    Example:
        >>> replace_one_cost(1.0, 1e-5)
        (2.0, 3.718281828459045e-05)
    """
    return 2.0 * epsilon, (1.0 + math.exp(epsilon)) * delta


def anchor_path(ledger_path: str | os.PathLike[str]) -> Path:
    """The anchor file beside a ledger: ``private_<stem>_anchor.json`` (mode 0600), holding the last
    line's sequence number and digest (:mod:`pate_stab.privacy.ledger.file`, "Anchor")."""
    path = Path(ledger_path)
    return path.with_name(f"private_{path.stem}_anchor.json")


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
        relation: the neighbouring relation the spend's own guarantee holds under (None: the
            ledger's, in lines written before spends stated it).
        declared: the spend's own (ε, δ) under ``relation`` where it differs from what is counted
            (an add/remove spend in a replace-one ledger, :func:`replace_one_cost`), else None.
        unit: the privacy unit of the spend's own guarantee (:data:`PRIVACY_UNITS`; None: the
            ledger's). A label ledger may hold record spends; a record ledger holds no label spend.
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
    relation: str | None = None
    declared: tuple[float, float] | None = None
    unit: str | None = None
    replayed: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class SpendRequest:
    """A checked spend (:meth:`PrivacyLedger.spend`): the declared (ε, δ) under ``relation`` and
    ``unit``, what it counts in the ledger (``counted``, :meth:`PrivacyLedger.cost`), and the JSON
    parts of its line (``event`` as a dict)."""

    spend_id: str
    epsilon: float
    delta: float
    counted: tuple[float, float]
    relation: str
    unit: str
    mechanism: str
    event: dict[str, Any] | None
    metadata: Any
    output: Any

    def line(self, *, neighbouring: str, privacy_unit: str, time: float | None) -> dict[str, Any]:
        """The ``spend`` line in a ledger of relation ``neighbouring`` and unit ``privacy_unit``: the
        counted (ε, δ); ``unit`` and the ``declared`` pair only where they differ from the ledger's."""
        record: dict[str, Any] = {
            "kind": "spend",
            "spend_id": self.spend_id,
            "epsilon": self.counted[0],
            "delta": self.counted[1],
            "relation": self.relation,
            "mechanism": self.mechanism,
            "event": self.event,
            "metadata": self.metadata,
        }
        if self.unit != privacy_unit:
            record["unit"] = self.unit
        if self.relation != neighbouring:
            record["declared"] = {"epsilon": self.epsilon, "delta": self.delta}
        if time is not None:
            record["time"] = time
        if self.output is not None:
            record["output"] = self.output
        return record


def canonical_line(record: Mapping[str, Any]) -> str:
    """The canonical JSON of a ledger record: sorted keys, no spaces, ASCII, no NaN/inf."""
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=True, allow_nan=False)


def line_digest(record: Mapping[str, Any], key: bytes | None = None) -> str:
    """A line's digest over its canonical JSON: SHA-256, or HMAC-SHA256 under ``key``."""
    data = canonical_line(record).encode("ascii")
    if key is None:
        return hashlib.sha256(data).hexdigest()
    return hmac.new(key, data, hashlib.sha256).hexdigest()


def json_value(name: str, value: Any) -> Any:
    """``value`` as it reads back from a ledger line (ValueError naming ``name`` if it is not JSON data)."""
    try:
        return json.loads(canonical_line({"v": value}))["v"]
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be JSON-serialisable without NaN/inf: {exc}") from exc


def recorded_budget(path: str | os.PathLike[str]) -> tuple[float, float] | None:
    """The budget a ledger file records now (its header, changed by any ``budget`` records), or
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
