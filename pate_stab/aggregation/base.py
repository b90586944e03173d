"""What every aggregator shares: its result type and its one ledger spend.

A release is paid for once, before its first output leaves, and a spend id buys exactly one
draw of noise (DESIGN.md fact 7). :class:`LedgerRelease` is the one place that enforces it, for
the stability releasers and the PATE baselines alike:

* the first call of a release draws its outputs, then writes the spend **and** those outputs in
  one durable ledger line (:meth:`PrivacyLedger.spend` with ``output=``), and only then returns
  them; every later call of an online release appends its outputs
  (:meth:`PrivacyLedger.record_output`) before returning them. A crash can therefore lose only
  outputs that never left, never outputs whose charge is recorded without them;
* a releaser built again under a recorded spend id (a rerun, a retry) returns the recorded
  outputs call by call, after checking that each call asks about the same queries, and raises
  :class:`~pate_stab.errors.ReplayedSpendError` as soon as a call was not recorded: it never
  draws again under the old charge;
* two releasers racing on one spend id get the same outputs: the ledger stores one per call,
  and a releaser that returned outputs it did not draw itself never draws afterwards (its own
  noise state no longer matches what was released).

Each output carries the releaser's counters after the call (``state``), so a replayed releaser
reports the same summary as the one that drew.

What identifies a call in the ledger (which is published: DESIGN.md fact 8). The inputs of a
call are the teachers' votes, a function of the private data: an unkeyed digest of them would
let anyone who knows the other records tell neighbouring data sets apart. A call is therefore
recorded by

* ``queries``: SHA-256 of the *public* positions of its queries (``query_ids``, e.g. pool
  indices), when the caller gives them — what runs do. The replay check then asks "same
  queries, in the same order?"; that the votes on them are the same is the run's own check
  (its private data identity, :func:`pate_stab.run.run_folder.check_data_identity`); or
* ``inputs_mac``: HMAC-SHA256 of the votes under the ledger folder's secret key
  (:meth:`PrivacyLedger.private_key`, a 0600 file never published), when no query ids are
  given. It checks the votes themselves and reveals nothing about them without the key.

Ledgers written before this recorded ``inputs`` (plain SHA-256 of the votes); they still replay.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from pate_stab._checks import check_int
from pate_stab.errors import BudgetExhaustedError, ReplayedSpendError
from pate_stab.privacy.accounting.events import PrivacyEvent
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.ledger.private_files import keyed_digest, public_digest, tensor_bytes

__all__ = [
    "ABSTAIN",
    "ReleaseResult",
    "LedgerRelease",
    "check_num_teachers",
    "check_teachers_changed",
    "check_vote_totals",
    "inputs_digest",
    "query_ids_digest",
]

ABSTAIN = -1
"""The label that encodes ⊥ (no answer) for hard labels; soft labels use NaN."""


def check_teachers_changed(value: Any) -> int:
    """How many teachers one neighbouring data set may change: 1, or 2 (replace-one over content keys).

    DESIGN.md fact 1: a record-keyed partition makes add/remove (and replace-one with record-id
    keys) change one teacher; replace-one under content keys can change two.
    """
    value = check_int("teachers_changed", value, minimum=1)
    if value > 2:
        raise ValueError(f"teachers_changed must be 1 or 2, got {value}")
    return value


def check_num_teachers(value: Any) -> int | None:
    """A releaser's declared number of teachers k (an integer ≥ 1), or None (fixed by its first call)."""
    return None if value is None else check_int("num_teachers", value, minimum=1)


def check_vote_totals(totals: torch.Tensor, num_teachers: int | None, *, what: str = "counts") -> int:
    """The number of teachers k behind one release call; refuses votes that are not k teachers' votes.

    Every query's votes come from the same k teachers: each row of a vote histogram sums to k
    (each column of k × m scores has k entries). A call whose rows sum to different totals, or to
    another k than the releaser's (``num_teachers``: declared, or fixed by its first call), is not
    one ensemble's votes: the threshold of Confident-GNMax (a fraction of k) and the answerability
    of the stability releasers are set for k. Releasers check it before anything is admitted,
    recorded or drawn.

    Args:
        totals: (m,) the number of votes behind each query of the call.
        num_teachers: the releaser's k, or None (the call's first row then sets it).
        what: what the votes are called in the message.

    Returns:
        k.

    Raises:
        ValueError: a row whose total differs (naming the row and both totals); nothing was spent.
    """
    k = int(totals[0]) if num_teachers is None else num_teachers
    bad = torch.nonzero(totals != k).flatten()
    if bad.numel():
        i = int(bad[0])
        against = f"the releaser's k = {k} teachers" if num_teachers is not None else f"row 0's {k}"
        raise ValueError(
            f"{what}: every query's votes must come from the same k teachers; query {i} has {int(totals[i])} votes, "
            f"not {against}. Nothing was spent"
        )
    return k


@dataclass(frozen=True)
class ReleaseResult:
    """Labels (int64 with −1 for ⊥ and unprocessed queries, or float64 scores with NaN) and status codes (int8)."""

    labels: torch.Tensor
    status: torch.Tensor


def inputs_digest(inputs: torch.Tensor) -> str:
    """SHA-256 of a tensor's dtype, shape and values (unkeyed).

    For public tensors only, and for checking ledgers written before calls were recorded by
    public query positions or a keyed MAC: on private inputs such as vote histograms this
    digest identifies the data set (module docstring).
    """
    t = inputs.detach().cpu().contiguous()
    h = hashlib.sha256(f"{t.dtype}|{tuple(t.shape)}|".encode("ascii"))
    h.update(t.numpy().tobytes())
    return h.hexdigest()


def query_ids_digest(query_ids: torch.Tensor) -> str:
    """SHA-256 of public query positions (int64, in order): how a run's release call is recorded."""
    ids = torch.as_tensor(query_ids)
    if ids.dim() != 1 or ids.is_floating_point() or ids.is_complex() or ids.dtype == torch.bool:
        raise TypeError(f"query_ids must be a 1-d integer tensor, got {ids.dtype} of shape {tuple(ids.shape)}")
    return public_digest(tensor_bytes(ids.to(torch.int64)))


def _labels_to_json(labels: torch.Tensor) -> list[Any]:
    if labels.is_floating_point():
        return [None if v != v else float(v) for v in labels.tolist()]
    return [int(v) for v in labels.tolist()]


def _labels_from_json(values: list[Any], dtype: torch.dtype) -> torch.Tensor:
    if dtype.is_floating_point:
        return torch.tensor([float("nan") if v is None else float(v) for v in values], dtype=dtype)
    return torch.tensor(values, dtype=dtype)


class LedgerRelease:
    """One release's spend: admits queries, records each call's outputs before they leave, replays.

    Args:
        ledger: the run's ledger, or None (no recording; nothing to replay).
        spend_id: the ledger id of this release (None: a fresh random id).
        mechanism: short name recorded with the spend.
        epsilon, delta: what the whole release costs (counted once, at the first call).
        event: the privacy event recorded with the spend (checked by the ledger to imply (ε, δ)).
        metadata: JSON data recorded with the spend (calibration, noise mode, …).
        num_queries: the most queries the spend covers; more are refused.
    """

    def __init__(
        self,
        *,
        ledger: PrivacyLedger | None,
        spend_id: str | None,
        mechanism: str,
        epsilon: float,
        delta: float,
        event: PrivacyEvent | None,
        metadata: dict[str, Any],
        num_queries: int,
    ) -> None:
        if ledger is not None and not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"ledger must be a PrivacyLedger or None, got {type(ledger).__name__}")
        self.ledger = ledger
        self.spend_id = spend_id or f"{mechanism}-{uuid.uuid4().hex}"
        self.mechanism = mechanism
        self.epsilon = epsilon
        self.delta = delta
        self.event = event
        self.metadata = metadata
        self.num_queries = num_queries
        self.queries_offered = 0
        self.calls = 0
        self.replayed_calls = 0
        self._owner = False  # this object recorded the spend: its noise state is what was released
        self._may_draw = True

    def bind(self, ledger: PrivacyLedger, spend_id: str) -> None:
        """Spend through ``ledger`` under ``spend_id`` from the first call on.

        For a releaser built (and so checked) before its ledger is opened, e.g. to refuse bad
        settings before anything is written. Refused once a call was made or a ledger is bound:
        what was released before would not be in the ledger.

        Raises:
            TypeError: ``ledger`` is not a PrivacyLedger, or ``spend_id`` not a non-empty string.
            RuntimeError: a ledger is bound already, or a call was made.
        """
        if not isinstance(ledger, PrivacyLedger):
            raise TypeError(f"ledger must be a PrivacyLedger, got {type(ledger).__name__}")
        if not isinstance(spend_id, str) or not spend_id:
            raise TypeError(f"spend_id must be a non-empty string, got {spend_id!r}")
        if self.ledger is not None:
            raise RuntimeError(f"{self.mechanism} spends through a ledger already (spend {self.spend_id!r})")
        if self.calls or self.queries_offered:
            raise RuntimeError(
                f"{self.mechanism} has released without a ledger; a ledger is bound before the first call"
            )
        self.ledger = ledger
        self.spend_id = spend_id

    def metadata_noise(self) -> dict[str, Any]:
        """The noise fields of the spend's metadata (what the releaser really draws)."""
        return {
            k: v for k, v in self.metadata.items() if k in ("noise", "noise_warning", "threshold", "noise_scale_exact")
        }

    def admit(self, m: int) -> None:
        """Refuse (nothing released) a call that would go past the queries the spend covers."""
        if self.queries_offered + m > self.num_queries:
            raise BudgetExhaustedError(
                f"{self.mechanism} is calibrated for {self.num_queries} queries; "
                f"{self.queries_offered} offered so far, {m} more requested"
            )

    def skip(self, m: int) -> None:
        """Offer ``m`` queries to a releaser that has halted: nothing is tested, drawn or recorded."""
        self.admit(m)
        self.queries_offered += m

    def _refuse(self, why: str) -> ReplayedSpendError:
        return ReplayedSpendError(
            f"spend {self.spend_id!r} ({self.mechanism}) is already paid for and its noise drawn; {why}. A spend id "
            "buys one draw of noise: nothing was drawn or released now. Replay exactly the recorded calls, or "
            "start a new run (new run name or ledger) with its own budget."
        )

    def _check_noise(self, recorded: dict[str, Any]) -> None:
        """Refuse to replay a spend paid for with another noise mode (a spend without one was seeded).

        Its outputs carry that mode's guarantee, not this releaser's: a seeded release must never
        be returned as a secure one.
        """
        then, now = recorded.get("noise", "seeded"), self.metadata.get("noise", "seeded")
        if then != now:
            raise self._refuse(f"it was drawn with noise={then!r}, and this releaser has noise={now!r}")

    def _identity(self, inputs: torch.Tensor, query_ids: torch.Tensor | None) -> dict[str, str]:
        """What the ledger records of a call's inputs (module docstring): public positions or a MAC."""
        if query_ids is not None:
            n, m = int(torch.as_tensor(query_ids).numel()), int(inputs.shape[0]) if inputs.dim() else 1
            if n != m:
                raise ValueError(f"query_ids has {n} entries for {m} queries")
            return {"queries": query_ids_digest(query_ids)}
        if self.ledger is None:
            raise RuntimeError("a call is identified only when a ledger records it")
        return {"inputs_mac": keyed_digest(self.ledger.private_key(), tensor_bytes(inputs))}

    def _replay(self, output: Any, identity: dict[str, str], inputs: torch.Tensor) -> Any:
        if not isinstance(output, dict):
            raise self._refuse(f"call {self.calls} has no recorded output")
        if "inputs" in output:  # a ledger written before calls were recorded without private digests
            same = output["inputs"] == inputs_digest(inputs)
        else:
            recorded = {k: output[k] for k in ("queries", "inputs_mac") if k in output}
            same = bool(recorded) and recorded == identity
        if not same:
            raise self._refuse(f"call {self.calls} was recorded for other inputs than this call's")
        return output

    def run(
        self,
        inputs: torch.Tensor,
        draw: Callable[[], tuple[ReleaseResult, dict[str, Any]]],
        *,
        query_ids: torch.Tensor | None = None,
    ) -> tuple[ReleaseResult, dict[str, Any], bool]:
        """The outputs of one release call on ``inputs``: drawn and recorded, or replayed.

        Args:
            inputs: what the call releases outputs for (the teachers' votes: private).
            draw: draws the noise and returns (result, the releaser's counters after it).
            query_ids: the public positions of the call's queries (one per row of ``inputs``):
                recorded as their SHA-256 and checked on replay. Without them the call is
                recorded by a MAC of ``inputs`` under the ledger folder's secret key.

        Returns:
            (result, counters, replayed): ``replayed`` is True when the outputs came from the
            ledger; the caller then adopts ``counters`` instead of its own.

        Raises:
            BudgetExhaustedError: more queries than the spend covers, or the ledger's budget
                is spent; nothing drawn or released.
            ReplayedSpendError: the spend is recorded but this call's outputs are not (or were
                recorded for other inputs); nothing drawn or released.
        """
        m = int(inputs.shape[0]) if inputs.dim() else 1
        self.admit(m)
        if self.ledger is None:
            result, state = draw()
            self.queries_offered += m
            self.calls += 1
            return result, state, False
        identity = self._identity(inputs, query_ids)
        entry = self.ledger.entry(self.spend_id)
        index = self.calls
        if entry is not None:
            self._check_noise(entry.metadata)
        if entry is not None and index < len(entry.outputs):
            output = self._replay(entry.outputs[index], identity, inputs)
            if not self._owner:
                self._may_draw = False
            return self._adopt(output, m, replayed=True)
        if entry is not None and not (self._owner and self._may_draw):
            raise self._refuse(f"the ledger records {len(entry.outputs)} release call(s) and this is call {index}")
        if entry is None:
            self.ledger.check_budget(epsilon=self.epsilon, delta=self.delta, spend_id=self.spend_id)
        result, state = draw()
        output = {
            **identity,
            "labels": _labels_to_json(result.labels),
            "dtype": str(result.labels.dtype).removeprefix("torch."),
            "status": [int(v) for v in result.status.tolist()],
            "state": state,
        }
        if entry is None:
            recorded = self.ledger.spend(
                self.spend_id,
                epsilon=self.epsilon,
                delta=self.delta,
                event=self.event,
                mechanism=self.mechanism,
                metadata=self.metadata,
                output=output,
            )
            if recorded.replayed:  # another releaser recorded this spend first: release its outputs
                self._may_draw = False
                return self._adopt(
                    self._replay(recorded.outputs[0] if recorded.outputs else None, identity, inputs), m, True
                )
            self._owner = True
        else:
            stored = self.ledger.record_output(self.spend_id, index, output)
            if stored != output:
                self._may_draw = False
                return self._adopt(self._replay(stored, identity, inputs), m, True)
        self.queries_offered += m
        self.calls += 1
        return result, state, False

    def _adopt(self, output: dict[str, Any], m: int, replayed: bool) -> tuple[ReleaseResult, dict[str, Any], bool]:
        result = ReleaseResult(
            _labels_from_json(output["labels"], getattr(torch, output["dtype"])),
            torch.tensor(output["status"], dtype=torch.int8),
        )
        self.queries_offered += m
        self.calls += 1
        self.replayed_calls += int(replayed)
        return result, dict(output["state"]), replayed
