"""The persistent privacy ledger: one append-only JSON-lines file per run.

Every release is recorded before it is returned (DESIGN.md fact 7). :meth:`PrivacyLedger.spend`
appends one line, flushes it and ``fsync``\\ s it, and only then returns; the caller releases
after ``spend`` returns. A crash can therefore leave a spend recorded whose release never left
(over-count) but never a release without its spend (under-count).

Where each part lives: what a line holds (format, :class:`LedgerEntry`, :func:`recorded_budget`)
in :mod:`pate_stab.privacy.ledger.format`; opening, locking and verifying the file, and what its
lines hold, in :mod:`pate_stab.privacy.ledger.file` (with the integrity guarantees: plain SHA-256
chains detect accidental damage, keyed HMAC chains also deliberate edits); spending, attaching
outputs and replaying a spend id here. Every public name is importable from this module.

A ledger written for publication (``timestamps=False``, as runs open theirs) carries no wall-clock
times: the time between two records measures private stages (teacher training, vote counting).
Its lines hold the budget, the relation, the spends with their events and released outputs, and
digests of public inputs only (see :class:`pate_stab.aggregation.base.LedgerRelease`).

The budget is a cap (DESIGN.md fact 12). The first opening of a ledger records it in the header;
a ledger opened with a larger budget than the one it records is refused (a cap is never raised:
more spending needs a new ledger, i.e. a new run folder, whose use of the same data its owner
must account for). A smaller budget lowers the cap when the caller says why
(``lower_budget="..."``): a ``budget`` record with that reason is appended, and every later spend
is checked against it; a cap is never lowered below what is already spent. Ledgers written
before caps (whose ``budget`` records raised the budget) are still read as written.

One relation per ledger (DESIGN.md fact 12). The header states the neighbouring relation of the
ledger's total, and every spend states its own (``relation``, default the ledger's). A spend made
under add/remove in a replace-one ledger is counted as (2ε, (1 + e^ε) δ), what it guarantees
under replace-one by group privacy
(:func:`~pate_stab.privacy.ledger.format.replace_one_cost`), and keeps its own (ε, δ) as
``declared``. A spend made under replace-one in an add/remove ledger is refused: a replace-one
guarantee implies no add/remove guarantee, so the mechanism must state its add/remove (ε, δ)
(spend with ``relation="add_remove"``) or run under a replace-one ledger.

One privacy unit per ledger (DESIGN.md fact 13): the header states it (``privacy_unit``:
``"record"``, the default, or ``"label"``; a header without it was written for record privacy), and a
spend may state its own (``unit``). A label ledger's relation is replace-one (a neighbour changes one
record's label: a replacement that keeps the inputs), so a record spend in it is counted as a record
spend in a replace-one ledger is: as it is under replace-one, by group privacy under add/remove.
A label spend in a record ledger is refused: label differential privacy protects the labels only
and implies nothing for a record's inputs.

Budget rule: the spent total is the *basic composition* of the recorded spends, (Σ ε_i, Σ δ_i)
(Dwork & Roth 2014, Thm 3.16). It is valid for any adaptive sequence of (ε_i, δ_i)-DP
mechanisms, whatever they are, so the ledger never needs to trust an event description to stay
sound; tighter totals from the recorded events are available through
:func:`pate_stab.privacy.accounting.composition.epsilon_for_delta` for reporting (an event holds under its
spend's ``relation``: compose only events of one relation). Sums are exact-rounded
(``math.fsum``), and a total may exceed the budget by at most a relative 1e-12 so that a budget
split into T equal floating-point parts can be spent T times.

The data set's budget (DESIGN.md fact 15). A run ledger may also count its spends in the data
holder's ledger of its data set (:meth:`PrivacyLedger.count_in`,
:mod:`pate_stab.privacy.ledger.data_budget`): :meth:`PrivacyLedger.spend` then records each new spend
there first (an over-count there if the process dies before the run's line, never an under-count)
and refuses, writing nothing here, what does not fit the data set's cap.

One spend id, one draw of noise (DESIGN.md fact 7). A release's outputs are stored with its
spend: :meth:`PrivacyLedger.spend` takes the first ``output`` in the same line (one durable
write: the spend and what it released are recorded together, or neither is), and
:meth:`PrivacyLedger.record_output` appends the outputs of later calls of an online release,
each before it leaves the releaser. A repeated ``spend_id`` returns the recorded entry with its
outputs instead of spending again; the caller returns those outputs and must never draw fresh
noise under the old charge (:class:`pate_stab.aggregation.spend.LedgerRelease` enforces this).
"""

from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Protocol

from pate_stab._checks import check_delta, check_epsilon, check_nonnegative
from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.accounting.composition import implies_guarantee
from pate_stab.privacy.accounting.events import ExPostEvent, PrivacyEvent, event_from_dict
from pate_stab.privacy.ledger.file import LedgerFile
from pate_stab.privacy.ledger.format import (
    BUDGET_RULE,
    DEFAULT_NEIGHBOURING,
    HOLDER_BUDGET_RULE,
    NEIGHBOURING_RELATIONS,
    PRIVACY_UNITS,
    LedgerEntry,
    SpendRequest,
    anchor_path,
    json_value,
    recorded_budget,
    replace_one_cost,
)
from pate_stab.privacy.ledger.format import FORMAT as FORMAT  # re-exported, as are VERSION and line_digest
from pate_stab.privacy.ledger.format import VERSION as VERSION
from pate_stab.privacy.ledger.format import line_digest as line_digest  # the line digest (tests recompute it)
from pate_stab.privacy.ledger.private_files import folder_id, run_private_key


class DataBudget(Protocol):
    """What a run ledger asks of the data holder's ledger it also counts in
    (:class:`pate_stab.privacy.ledger.data_budget.DataSetBudget`)."""

    def charge(
        self, *, folder: str, spend_id: str, epsilon: float, delta: float, relation: str | None, unit: str | None,
        mechanism: str, run: str, run_folder: Path,
    ) -> None: ...  # fmt: skip

    def check(
        self, spends: Sequence[tuple[str, float, float, str | None, str | None]], *, folder: str, where: str
    ) -> None: ...

    def close(self) -> None: ...


__all__ = [
    "DEFAULT_NEIGHBOURING",
    "NEIGHBOURING_RELATIONS",
    "PRIVACY_UNITS",
    "LedgerEntry",
    "PrivacyLedger",
    "anchor_path",
    "recorded_budget",
    "replace_one_cost",
]


def _check_event_implies(event: PrivacyEvent, *, epsilon: float, delta: float) -> None:
    """Raise ValueError unless ``event`` implies (ε, δ): its PLD's δ(ε) ≤ δ, or, for an ex-post event
    under pure DP, a realised loss within ε."""
    if isinstance(event, ExPostEvent):
        if delta == 0.0 and event.epsilon_ex_post > epsilon:
            raise ValueError(f"ex-post loss {event.epsilon_ex_post} exceeds the ex-ante epsilon {epsilon}")
    elif not implies_guarantee(event, epsilon=epsilon, delta=delta):
        raise ValueError(
            f"the event {event!r} does not imply the declared (epsilon={epsilon}, "
            f"delta={delta}): its PLD gives a larger delta at that epsilon"
        )


class PrivacyLedger(LedgerFile):
    """A run's privacy budget and the append-only record of what was spent from it.

    Args:
        path: the ledger file (created with its parent folders if absent).
        budget_epsilon: the run's cap on the total ε, > 0 (recorded by a new file; an existing
            file's recorded cap must equal it, or be lowered to it with ``lower_budget``).
        budget_delta: the cap on the total δ, in [0, 1).
        run_id: a new file gets this id (or a random one when None); an existing file must
            carry it. Reopening an existing file needs its run id: None is refused, so that one
            run never spends from another run's ledger by accident.
        neighbouring: the neighbouring relation the recorded guarantees hold under:
            ``"add_remove"`` (default: what releases over content-keyed shards guarantee,
            DESIGN.md fact 1) or ``"replace_one"`` (only where it is true: record-id partition
            keys, or calibrations that cover two changed teachers, and every label ledger).
        privacy_unit: what one neighbour changes (:data:`PRIVACY_UNITS`): ``"record"`` (default) or
            ``"label"`` (label differential privacy; ``neighbouring`` must be ``"replace_one"``).
        mac_key: optional secret (≥ 16 bytes) for HMAC-SHA256 line digests, so that deliberate
            edits are detected by whoever holds the key (module docstring, "Integrity"). Never
            stored in the file.
        timestamps: write wall-clock times into the header and the spends (default). A ledger
            meant for publication is written without them (module docstring).
        lower_budget: why the cap may be lowered: when the file records a larger cap than
            (``budget_epsilon``, ``budget_delta``), a ``budget`` record with this reason lowers it
            (None: a different budget is refused).
        budget_rule: what a new file's header states: the run's cap (the default) or the data
            holder's (:data:`~pate_stab.privacy.ledger.format.HOLDER_BUDGET_RULE`: only
            :meth:`set_holder_cap` raises it; :mod:`pate_stab.privacy.ledger.data_budget`).

    Raises:
        LedgerError: the file exists but is corrupted, truncated (also: shorter than its anchor),
            was made for another relation, run or integrity mode, or was reopened without its
            run id; or it records a smaller cap than asked for (a cap is never raised), or a larger
            one and ``lower_budget`` was not given, or one that would fall below what is spent.
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
        privacy_unit: str = "record",
        mac_key: bytes | None = None,
        timestamps: bool = True,
        lower_budget: str | None = None,
        budget_rule: str = BUDGET_RULE,
    ) -> None:
        if budget_rule not in (BUDGET_RULE, HOLDER_BUDGET_RULE):
            raise ValueError(f"budget_rule must be {BUDGET_RULE!r} or {HOLDER_BUDGET_RULE!r}, got {budget_rule!r}")
        self._budget_rule = budget_rule
        self._data_budget: tuple[DataBudget, str] | None = None
        self._requested_budget = (
            check_epsilon(budget_epsilon, "budget_epsilon"),
            check_delta(budget_delta, "budget_delta", allow_zero=True),
        )
        self._budget = self._requested_budget  # the recorded budget once the file is read
        if lower_budget is not None and (not isinstance(lower_budget, str) or not lower_budget.strip()):
            raise TypeError("lower_budget must be a non-empty reason (str) or None")
        self._timestamps = bool(timestamps)
        self._lower_budget = lower_budget
        if neighbouring not in NEIGHBOURING_RELATIONS:
            raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
        if run_id is not None and (not isinstance(run_id, str) or not run_id):
            raise TypeError("run_id must be a non-empty str or None")
        if mac_key is not None and (not isinstance(mac_key, bytes) or len(mac_key) < 16):
            raise TypeError("mac_key must be bytes of length >= 16 (or None for a plain SHA-256 chain)")
        if privacy_unit not in PRIVACY_UNITS:
            raise ValueError(f"privacy_unit must be one of {PRIVACY_UNITS}, got {privacy_unit!r}")
        if privacy_unit == "label" and neighbouring != "replace_one":
            raise ValueError(
                "a label-privacy ledger counts neighbours that differ in one record's label, a replacement: open it "
                f"with neighbouring='replace_one', got {neighbouring!r}"
            )
        self._neighbouring = neighbouring
        self._privacy_unit = privacy_unit
        self._requested_run_id = run_id
        self._mac_key = mac_key
        self._digest_field = "sha256" if mac_key is None else "hmac"
        self._path = Path(path)
        self._path.parent.mkdir(parents=True, exist_ok=True)
        self._thread_lock = threading.RLock()
        self._fd = -1
        self._open()

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
        relation: str | None = None,
        unit: str | None = None,
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
            relation: the neighbouring relation (``epsilon``, ``delta``) holds under (None: the
                ledger's). An add/remove spend in a replace-one ledger is counted by group privacy
                (:meth:`cost`); a replace-one spend in an add/remove ledger is refused.
            unit: the privacy unit (``epsilon``, ``delta``) holds for (None: the ledger's). A record
                spend in a label ledger is counted under ``relation`` as in any replace-one ledger;
                a label spend in a record ledger is refused (:meth:`cost`).

        Raises:
            BudgetExhaustedError: the spend would exceed the budget; nothing was written.
            ValueError: invalid values, an event that does not imply (ε, δ), a relation the
                ledger cannot count, or a reused ``spend_id`` whose parameters differ from the
                recorded ones.
            LedgerError: the file became inconsistent.

        Why (ε, δ) are declared and checked against the event, not derived from it: an event's
        privacy loss distribution is a curve of (ε, δ) pairs, and the charge is the point a
        calibration was made for (the paper's ε under advanced composition, which the PLD beats;
        the target ε in the tight mode, which the PLD's ε is below by the search tolerance), so a
        derived charge would change every recorded charge and guarantee. A replay compares the
        request with the recorded one exactly, and a derived ε moves with dp-accounting's
        discretisation and version. Some spends have no PLD to derive from: an ex-post search
        (Ligett et al. 2017) declares its ex-ante ε beside an :class:`ExPostEvent`, DP-SGD's ε
        comes from the RDP accountant (its PLD may be out of range), and the data holder's ledger
        mirrors a spend its run ledger has checked against its event (``check_event=False``).
        """
        request = self._spend_request(
            spend_id,
            epsilon=epsilon,
            delta=delta,
            event=event,
            mechanism=mechanism,
            metadata=metadata,
            check_event=check_event,
            output=output,
            relation=relation,
            unit=unit,
        )
        with self._locked(exclusive=True):
            self._sync()
            recorded = self._spends.get(spend_id)
            if recorded is not None:
                return self._replayed(recorded, request)
            self._check_fits(request)
            if self._data_budget is not None:  # the data holder's ledger first: a crash can over-count there only
                budget, folder = self._data_budget
                budget.charge(
                    folder=folder, spend_id=spend_id, epsilon=request.epsilon, delta=request.delta,
                    relation=request.relation, unit=request.unit, mechanism=request.mechanism, run=self.run_id,
                    run_folder=self._path.parent,
                )  # fmt: skip
            line = request.line(
                neighbouring=self._neighbouring,
                privacy_unit=self._privacy_unit,
                time=time.time() if self._timestamps else None,
            )
            self._append(line)  # appended, flushed and fsync-ed before it returns
            return self._spends[spend_id]

    def _spend_request(
        self,
        spend_id: str,
        *,
        epsilon: float,
        delta: float,
        event: PrivacyEvent | None,
        mechanism: str,
        metadata: Mapping[str, Any] | None,
        check_event: bool,
        output: Any,
        relation: str | None,
        unit: str | None,
    ) -> SpendRequest:
        """Check a spend's arguments (no I/O) and return them with what it counts here (:meth:`cost`)."""
        if not isinstance(spend_id, str) or not spend_id:
            raise TypeError("spend_id must be a non-empty str")
        epsilon = check_nonnegative("epsilon", epsilon)
        delta = check_delta(delta, allow_zero=True)
        if epsilon == 0.0 and delta == 0.0:
            raise ValueError("epsilon and delta are both 0: nothing to spend (use record_progress)")
        if not isinstance(mechanism, str):
            raise TypeError("mechanism must be a str")
        relation = self._neighbouring if relation is None else relation
        unit = self._privacy_unit if unit is None else unit
        counted = self.cost(epsilon=epsilon, delta=delta, relation=relation, unit=unit)
        if event is not None and not isinstance(event, PrivacyEvent):
            raise TypeError(f"event must be a privacy event, got {type(event).__name__}")
        meta = json_value("metadata", dict(metadata or {}))
        out = None if output is None else json_value("output", output)
        event_dict: dict[str, Any] | None = None
        if event is not None:
            event_dict = json_value("event", event.to_dict())
            if event_from_dict(event_dict) != event:
                raise ValueError(f"event {event!r} does not survive a JSON round trip")
            if check_event:
                _check_event_implies(event, epsilon=epsilon, delta=delta)
        return SpendRequest(spend_id, epsilon, delta, counted, relation, unit, mechanism, event_dict, meta, out)

    def _replayed(self, recorded: LedgerEntry, request: SpendRequest) -> LedgerEntry:
        """The recorded entry of a retried spend (``replayed=True``), or ValueError if the request differs."""
        same = (
            recorded.declared or (recorded.epsilon, recorded.delta),
            recorded.relation or self._neighbouring,
            recorded.unit or self._privacy_unit,
            recorded.mechanism,
        ) == ((request.epsilon, request.delta), request.relation, request.unit, request.mechanism)
        rec_event = None if recorded.event is None else recorded.event.to_dict()
        if not same or rec_event != request.event:
            raise ValueError(
                f"spend_id {request.spend_id!r} was recorded with epsilon={recorded.epsilon}, "
                f"delta={recorded.delta} (relation {recorded.relation or self._neighbouring}), "
                f"mechanism={recorded.mechanism!r}, event={rec_event}; "
                "a retry must repeat the same request"
            )
        return replace(recorded, replayed=True)

    def _check_fits(self, request: SpendRequest) -> None:
        """Raise :class:`BudgetExhaustedError` if the spend's counted (ε, δ) does not fit (under the lock)."""
        counted_eps, counted_delta = request.counted
        spent_eps, spent_delta = self._totals()
        total_eps, total_delta = math.fsum([spent_eps, counted_eps]), math.fsum([spent_delta, counted_delta])
        if not self._within_budget(total_eps, total_delta):
            raise BudgetExhaustedError(
                f"spend {request.spend_id!r} requests (epsilon={counted_eps}, delta={counted_delta}) but "
                f"(epsilon={spent_eps}, delta={spent_delta}) of the budget "
                f"(epsilon={self._budget[0]}, delta={self._budget[1]}) is already spent; "
                "nothing was recorded or released"
            )

    def cost(
        self, *, epsilon: float, delta: float, relation: str | None = None, unit: str | None = None
    ) -> tuple[float, float]:
        """What a spend of (ε, δ) under ``relation`` and ``unit`` (None: the ledger's) counts in this ledger.

        Unchanged under the ledger's own relation; (2ε, (1 + e^ε) δ) for an add/remove spend in a
        replace-one ledger (group privacy, :func:`~pate_stab.privacy.ledger.format.replace_one_cost`).
        A record spend in a label ledger (whose relation is replace-one) is counted the same way:
        changing one label replaces one record, so a record guarantee under replace-one holds as it
        is, and one under add/remove by group privacy over the removal and the addition.

        Raises:
            ValueError: an unknown relation or unit, a replace-one spend in an add/remove ledger (a
                replace-one guarantee implies no add/remove one), or a label spend in a record
                ledger (a label guarantee implies no record one).
        """
        epsilon = check_nonnegative("epsilon", epsilon)
        delta = check_delta(delta, allow_zero=True)
        unit = self._privacy_unit if unit is None else unit
        if unit not in PRIVACY_UNITS:
            raise ValueError(f"unit must be one of {PRIVACY_UNITS}, got {unit!r}")
        if unit == "label" and self._privacy_unit == "record":
            raise ValueError(
                f"ledger {self._path} counts record-privacy spends, and this spend's guarantee is label privacy, "
                "which protects only the labels and implies nothing for a record's inputs: run it under "
                "privacy_unit='label' (a new run folder), where record-privacy spends are counted too"
            )
        if unit == "label" and relation not in (None, "replace_one"):
            raise ValueError(f"a label-privacy guarantee holds under replace_one (one label changed), got {relation!r}")
        relation = self._neighbouring if relation is None else relation
        if relation not in NEIGHBOURING_RELATIONS:
            raise ValueError(f"relation must be one of {NEIGHBOURING_RELATIONS}, got {relation!r}")
        if relation == self._neighbouring:
            return epsilon, delta
        if relation == "add_remove":  # in a replace-one ledger
            return replace_one_cost(epsilon, delta)
        raise ValueError(
            f"ledger {self._path} counts spends under add_remove, and this spend's guarantee holds under "
            "replace_one, which implies no add/remove guarantee: state the mechanism's add/remove (epsilon, delta) "
            "(relation='add_remove'), or run under neighbouring='replace_one' (a new run folder), where add/remove "
            "spends are converted by group privacy"
        )

    def check_budget(
        self,
        *,
        epsilon: float,
        delta: float,
        spend_id: str | None = None,
        relation: str | None = None,
        unit: str | None = None,
    ) -> None:
        """Raise :class:`BudgetExhaustedError` now if a spend of (ε, δ) would not fit.

        For refusing before any noise is drawn; :meth:`spend` checks again under the lock. A
        ``spend_id`` that is already recorded fits (its retry spends nothing). ``relation``: as
        in :meth:`spend`; ``unit`` likewise.
        """
        epsilon_in, delta_in = epsilon, delta
        epsilon, delta = self.cost(epsilon=epsilon, delta=delta, relation=relation, unit=unit)
        with self._locked(exclusive=False):
            self._sync()
            if spend_id is not None and spend_id in self._spends:
                return
            spent_eps, spent_delta = self._totals()
            if not self._within_budget(math.fsum([spent_eps, epsilon]), math.fsum([spent_delta, delta])):
                raise BudgetExhaustedError(
                    f"a spend of (epsilon={epsilon}, delta={delta}) does not fit: (epsilon={spent_eps}, "
                    f"delta={spent_delta}) of the budget cap (epsilon={self._budget[0]}, delta={self._budget[1]}) "
                    "is already spent; nothing was drawn, recorded or released"
                )
        if self._data_budget is not None:
            budget, folder = self._data_budget
            mine = (relation or self._neighbouring, unit or self._privacy_unit)  # what the spend holds under
            budget.check([(spend_id or "", epsilon_in, delta_in, *mine)], folder=folder, where="this spend")

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
        payload = json_value("payload", payload)
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
        payload = json_value("payload", payload)
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
        data = json_value("info", {**dict(info or {}), **fields})
        with self._locked(exclusive=True):
            self._sync()
            self._append({"kind": "progress", "info": data} | ({"time": time.time()} if self._timestamps else {}))

    def count_in(self, budget: DataBudget) -> None:
        """Count every later spend of this ledger in the data holder's ledger of its data set too
        (:mod:`pate_stab.privacy.ledger.data_budget`): :meth:`spend` records it there first, and refuses
        what does not fit there; :meth:`check_budget` checks it there. The run folder is known there by
        an id derived from its secret key (:func:`~pate_stab.privacy.ledger.data_budget.folder_id`).
        This ledger closes ``budget`` when it is closed."""
        if self._data_budget is not None:
            raise ValueError(f"ledger {self._path} already counts its spends in a data set's budget")
        self._data_budget = (budget, folder_id(self.private_key()))

    @property
    def data_budget(self) -> DataBudget | None:
        """The data holder's ledger this ledger's spends are also counted in (:meth:`count_in`), or None."""
        return None if self._data_budget is None else self._data_budget[0]

    @property
    def folder_id(self) -> str | None:
        """This ledger's folder id in the data holder's ledger (:meth:`count_in`), or None."""
        return None if self._data_budget is None else self._data_budget[1]

    def set_holder_cap(self, epsilon: float, delta: float, *, reason: str) -> None:
        """Set the cap of a data holder's ledger (header ``budget_rule``
        :data:`~pate_stab.privacy.ledger.format.HOLDER_BUDGET_RULE`): up or down, never below what is spent.

        Raises:
            LedgerError: a run's ledger (its cap is only lowered, when it is opened), or a cap below what is spent.
        """
        new = (check_epsilon(epsilon, "budget_epsilon"), check_delta(delta, "budget_delta", allow_zero=True))
        with self._locked(exclusive=True):
            self._sync()
            if self._header is None or self._header.get("budget_rule") != HOLDER_BUDGET_RULE:
                raise LedgerError(f"ledger {self._path} is a run's ledger: its cap is never raised")
            spent = self._totals()
            if spent[0] > new[0] * (1 + 1e-12) or spent[1] > new[1] * (1 + 1e-12):
                raise LedgerError(
                    f"the cap (epsilon={new[0]:g}, delta={new[1]:g}) is below what is already spent "
                    f"(epsilon={spent[0]:g}, delta={spent[1]:g}) ({self._path}); nothing was changed"
                )
            if new != self._budget:
                self._append({"kind": "budget", "change": "set", "budget_epsilon": new[0], "budget_delta": new[1],
                              "reason": reason})  # fmt: skip

    def close(self) -> None:
        super().close()
        if self._data_budget is not None:
            self._data_budget[0].close()

    def private_key(self) -> bytes:
        """The secret key of the ledger's folder (:func:`~pate_stab.privacy.ledger.private_files.run_private_key`):
        for MACs of private inputs, which are never written into the ledger unkeyed."""
        return run_private_key(self._path.parent)
