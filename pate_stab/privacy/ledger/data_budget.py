"""The data holder's budget: one ledger per private data set, outside any run folder.

A run folder's ledger caps what that folder spends. The same private data in another folder
(another run name, a deleted and recreated folder) would start from zero. The data holder's
budget counts every spend on a data set, whatever folder made it (DESIGN.md fact 15):

* **Where.** A private folder (mode 0700) given by ``--budget-dir`` / the environment variable
  :data:`BUDGET_DIR_ENV`, else ``~/.pate_stab/budget/`` (:func:`budget_dir`). It holds the data
  holder's secret key (``private_key``, 32 bytes from the OS, mode 0600, created on first use) and
  one ledger per data set (``data_<id>.jsonl``, mode 0600, with its anchor), nothing else.
* **Which data set.** A data set's id is HMAC-SHA256 under that key of the private split as loaded
  (inputs as float32, labels as int64, before any preprocessing: :func:`data_set_of`). The same
  data gives the same id on any machine that holds the key file; without the key, the id is no
  digest anyone can test guesses against (HMAC is a pseudo-random function; Bellare, Canetti &
  Krawczyk 1996). Two loads of the same records in the same order from a CSV and from an ``.npz``
  give the same id when they load to the same tensors.
* **How spends compose.** The data set's ledger is a
  :class:`~pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger` with HMAC line digests under a
  key derived from the data holder's key: the same accountant as a run's ledger (basic
  composition of the recorded (ε, δ), Dwork & Roth 2014, Thm 3.16, valid for any adaptive
  sequence of mechanisms, so also across folders). One relation and one privacy unit per ledger:
  the first run on a data set fixes them (or the data holder, for new data sets:
  ``pate-stab budget --set EPS --neighbouring replace_one``); a later run's spends are
  converted as a run ledger converts them (an add/remove spend in a replace-one ledger by group
  privacy, :func:`~pate_stab.privacy.ledger.format.replace_one_cost`; a record spend in a label
  ledger as under replace-one) or refused (a replace-one spend in an add/remove ledger; a label
  spend in a record ledger).
* **The cap.** A new data set's cap is the data holder's cap for new data sets where one is set
  (``pate-stab budget --set`` without a data set, :func:`set_default_cap`), else its first run's
  (that folder's cap). Only the data holder's explicit command (``pate-stab budget --set``,
  :meth:`DataSetBudget.set_cap`) changes it, up or down but never below what is spent, with a
  recorded ``budget`` line (``change: "set"``); a run never changes it.
* **When.** A run's spend is recorded here, appended and ``fsync``-ed, under the data set ledger's
  lock and while the run's ledger lock is held, before it is recorded in the run's ledger and
  before its outputs leave (:meth:`PrivacyLedger.spend`). A spend that does not fit either cap
  raises :class:`~pate_stab.errors.BudgetExhaustedError` and nothing is recorded. A crash between
  the two writes leaves the spend counted here and not in the run folder: an over-count, never an
  under-count; the rerun's spend carries the same id here (the folder's id and the spend id), so
  it is not counted twice. A folder's id is derived from its own secret key: a deleted and
  recreated folder is a new folder, and its spends count again. Deleting a run folder gives
  nothing back.
* **Concurrency.** Each spend reads, checks and appends under an exclusive ``fcntl.flock`` on the
  data set's ledger (local file systems), so two folders spending on one data set at once are
  serialised and neither spend is lost or counted past the cap. Locks are always taken run ledger
  first, data set ledger second.

Threat model: this protects against accidents and careless reruns (a new run name, a folder
deleted to "start over", a second machine that shares the budget folder). It does not protect
against someone who deletes or rolls back both the run folder's and the data holder's ledgers on
purpose: whoever can write the files can remove the record of what was spent.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import hmac
import json
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from torch import Tensor

from pate_stab._checks import check_delta, check_epsilon
from pate_stab.errors import BudgetExhaustedError, LedgerError
from pate_stab.privacy.ledger.format import HOLDER_BUDGET_RULE, NEIGHBOURING_RELATIONS, PRIVACY_UNITS, recorded_budget
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.privacy.ledger.private_files import (
    folder_id,
    keyed_digest,
    private_folder,
    run_private_key,
    tensor_bytes,
    write_private,
)

__all__ = [
    "BUDGET_DIR_ENV",
    "DataSet",
    "DataSetBudget",
    "DEFAULT_CAP_NAME",
    "budget_dir",
    "data_set_of",
    "data_sets",
    "default_cap",
    "default_relation",
    "set_default_cap",
    "folder_id",
]

BUDGET_DIR_ENV = "PATE_STAB_BUDGET_DIR"
"""The environment variable that names the data holder's budget folder (``--budget-dir`` sets it)."""
_LOCK = "budget.lock"
DEFAULT_CAP_NAME = "default_cap.json"
"""The data holder's cap for data sets not yet recorded (:func:`set_default_cap`), in the budget folder."""
_PREFIX = "data_"


def budget_dir(path: str | os.PathLike[str] | None = None) -> Path:
    """The data holder's budget folder: ``path``, else ``$PATE_STAB_BUDGET_DIR``, else ``~/.pate_stab/budget``."""
    if path is not None:
        return Path(path).expanduser()
    env = os.environ.get(BUDGET_DIR_ENV)
    if env:
        return Path(env).expanduser()
    return Path.home() / ".pate_stab" / "budget"


def _derived(key: bytes, purpose: bytes) -> bytes:
    """A sub-key of the data holder's key for one purpose (HMAC-SHA256 as a PRF)."""
    return hmac.new(key, b"pate_stab data holder: " + purpose, hashlib.sha256).digest()


@dataclass(frozen=True)
class DataSet:
    """A private data set as the data holder's budget knows it: its folder and its id (a keyed MAC)."""

    folder: Path
    data_id: str

    @property
    def path(self) -> Path:
        """The data set's ledger: ``<folder>/data_<id>.jsonl``."""
        return self.folder / f"{_PREFIX}{self.data_id}.jsonl"

    @property
    def short_id(self) -> str:
        """The first 12 hex digits of the id (what ``pate-stab budget`` shows)."""
        return self.data_id[:12]


def data_set_of(tensors: Sequence[Tensor], *, folder: str | os.PathLike[str] | None = None) -> DataSet:
    """The data set of the private split ``tensors`` (as loaded: inputs, labels) in the data holder's folder.

    Creates the folder (0700) and its key (0600) on first use.

    Raises:
        PermissionError: the key file is readable by others (it may have leaked).
    """
    root = private_folder(budget_dir(folder))
    key = run_private_key(root)
    return DataSet(root, keyed_digest(_derived(key, b"data set id"), *(tensor_bytes(t) for t in tensors)))


@contextlib.contextmanager
def _folder_lock(root: Path) -> Iterator[None]:
    """The budget folder's lock while a data set's ledger is created or its cap set (one at a time)."""
    fd = os.open(root / _LOCK, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _header(path: Path) -> dict[str, Any] | None:
    if not path.is_file() or path.stat().st_size == 0:
        return None
    with path.open("rb") as f:
        first = f.readline()
    try:
        header = json.loads(first)
    except ValueError as exc:
        raise LedgerError(f"the data set's ledger {path} has no readable header ({exc})") from exc
    if not isinstance(header, dict) or header.get("kind") != "header":
        raise LedgerError(f"the data set's ledger {path} has no header")
    return header


class DataSetBudget:
    """The data holder's ledger of one data set, open (module docstring).

    Open it with :meth:`open`; a run ledger counts its spends here too once it is attached
    (:meth:`PrivacyLedger.count_in <pate_stab.privacy.ledger.privacy_ledger.PrivacyLedger.count_in>`).
    """

    def __init__(self, data_set: DataSet, ledger: PrivacyLedger) -> None:
        self.data_set = data_set
        self.ledger = ledger

    @classmethod
    def open(
        cls,
        data_set: DataSet,
        *,
        cap: tuple[float, float] | None = None,
        neighbouring: str = "add_remove",
        privacy_unit: str = "record",
        create: bool = True,
    ) -> DataSetBudget:
        """Open the data set's ledger; a new one records ``neighbouring``, ``privacy_unit`` and its cap: the data
        holder's cap for new data sets (:func:`default_cap`) where set, else ``cap`` (the first run's).

        An existing ledger keeps its own cap, relation and unit (``cap`` and the others are then
        ignored: only :meth:`set_cap` changes the cap).

        Raises:
            LedgerError: the ledger is damaged (its lines are verified as a run ledger's are), or it is
                missing and ``create`` is False, or its key is not this folder's.
            ValueError: a new ledger without a cap.
        """
        root = private_folder(data_set.folder)
        key = run_private_key(root)
        mac_key = _derived(key, b"ledger lines")
        path = data_set.path
        with _folder_lock(root):
            header = _header(path)
            if header is None:
                if not create:
                    raise LedgerError(f"no budget is recorded for data set {data_set.short_id} in {root}")
                cap = default_cap(root) or cap
                preset = default_relation(root)  # the data holder's relation and unit for new data sets, if set
                neighbouring, privacy_unit = preset[0] or neighbouring, preset[1] or privacy_unit
                if cap is None:
                    raise ValueError("a new data set's ledger needs a cap (epsilon, delta)")
                fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o600)  # private before its first line
                os.close(fd)
                ledger = PrivacyLedger(
                    path, budget_epsilon=cap[0], budget_delta=cap[1], run_id=data_set.data_id,
                    neighbouring=neighbouring, privacy_unit=privacy_unit, mac_key=mac_key,
                    budget_rule=HOLDER_BUDGET_RULE,
                )  # fmt: skip
            else:
                recorded = recorded_budget(path)
                assert recorded is not None
                ledger = PrivacyLedger(
                    path, budget_epsilon=recorded[0], budget_delta=recorded[1], run_id=data_set.data_id,
                    neighbouring=str(header.get("neighbouring")),
                    privacy_unit=str(header.get("privacy_unit", "record")), mac_key=mac_key,
                    budget_rule=HOLDER_BUDGET_RULE,
                )  # fmt: skip
        return cls(data_set, ledger)

    def set_cap(self, epsilon: float, delta: float) -> None:
        """Set the data set's cap (the data holder's decision: it may be raised or lowered, never below
        what is spent), recorded as a ``budget`` line.

        Raises:
            LedgerError: the cap would fall below what is spent.
        """
        self.ledger.set_holder_cap(epsilon, delta, reason="set by the data holder (pate-stab budget --set)")

    def charge_id(self, folder: str, spend_id: str) -> str:
        """The id of a run folder's spend in this ledger: the folder's id and the run's spend id."""
        return f"{folder}/{spend_id}"

    def check(
        self,
        spends: Sequence[tuple[str, float, float, str | None, str | None]],
        *,
        folder: str,
        where: str,
    ) -> None:
        """Refuse now if the run's new spends (spend id, ε, δ, relation, unit) do not fit the data set's cap.

        Spends this folder already recorded here cost nothing (a rerun after a crash between the two
        writes).

        Raises:
            BudgetExhaustedError: they do not fit; nothing was drawn or recorded.
            ValueError: a spend this ledger cannot count (its relation or unit).
        """
        recorded = {e.spend_id for e in self.ledger.entries()}
        costs = [
            self.cost(epsilon=e, delta=d, relation=r, unit=u)
            for sid, e, d, r, u in spends
            if self.charge_id(folder, sid) not in recorded
        ]
        need = (math.fsum(c[0] for c in costs), math.fsum(c[1] for c in costs))
        spent = self.ledger.spent()
        cap = self.ledger.budget
        total = (math.fsum([spent[0], need[0]]), math.fsum([spent[1], need[1]]))
        if total[0] > cap[0] * (1 + 1e-12) or total[1] > cap[1] * (1 + 1e-12):
            raise BudgetExhaustedError(self.exhausted_message(need, where=where))

    def charge(
        self,
        *,
        folder: str,
        spend_id: str,
        epsilon: float,
        delta: float,
        relation: str | None,
        unit: str | None,
        mechanism: str,
        run: str,
        run_folder: Path,
    ) -> None:
        """Record a run folder's spend here (appended and ``fsync``-ed under this ledger's lock), or refuse it.

        A spend this folder recorded here before (same id) is not counted again.

        Raises:
            BudgetExhaustedError: it does not fit the data set's cap; nothing was recorded.
            ValueError: a spend this ledger cannot count (its relation or unit).
        """
        counted = self.cost(epsilon=epsilon, delta=delta, relation=relation, unit=unit)
        try:
            self.ledger.spend(
                self.charge_id(folder, spend_id), epsilon=epsilon, delta=delta, relation=relation, unit=unit,
                mechanism=mechanism, check_event=False,
                metadata={"folder": str(Path(run_folder).resolve()), "run": run, "spend_id": spend_id},
            )  # fmt: skip
        except BudgetExhaustedError:
            raise BudgetExhaustedError(self.exhausted_message(counted, where=f"spend {spend_id!r}")) from None

    def cost(self, *, epsilon: float, delta: float, relation: str | None, unit: str | None) -> tuple[float, float]:
        """What a spend counts in this ledger (:meth:`PrivacyLedger.cost`), with a message that names the data set.

        Raises:
            ValueError: a spend this ledger cannot count.
        """
        try:
            return self.ledger.cost(epsilon=epsilon, delta=delta, relation=relation, unit=unit)
        except ValueError as exc:
            raise ValueError(
                f"the data set's budget ({self.data_set.short_id}, {self.ledger.path}) counts "
                f"{self.ledger.privacy_unit} privacy under {self.ledger.neighbouring} (fixed by its first run or "
                f"`pate-stab budget --set`), and this run's spend cannot be counted there: {exc}"
            ) from None

    def exhausted_message(self, need: tuple[float, float], *, where: str) -> str:
        spent = self.ledger.spent()
        cap = self.ledger.budget
        folders = sorted({str(e.metadata.get("folder")) for e in self.ledger.entries()})
        return (
            f"the data set's budget cap is (epsilon={cap[0]:g}, delta={cap[1]:g}) (data set {self.data_set.short_id}, "
            f"{self.ledger.path}); (epsilon={spent[0]:g}, delta={spent[1]:g}) of it is spent, by "
            f"{', '.join(folders) or 'no folder'}, and {where} needs (epsilon={need[0]:g}, delta={need[1]:g}) more. "
            "Nothing was drawn, recorded or released. The budget belongs to the data, not to a run folder: another "
            "run name or a deleted folder gives nothing back. Only the data holder may raise it: "
            f"`pate-stab budget --set EPS[,DELTA] --data-set {self.data_set.short_id}`"
        )

    def close(self) -> None:
        self.ledger.close()

    def __enter__(self) -> DataSetBudget:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _defaults(folder: str | os.PathLike[str] | None) -> dict[str, Any] | None:
    path = budget_dir(folder) / DEFAULT_CAP_NAME
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text())
        record["epsilon"] = check_epsilon(record["epsilon"], "epsilon")
        record["delta"] = check_delta(record["delta"], "delta", allow_zero=True)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LedgerError(f"the data holder's cap for new data sets {path} is unreadable ({exc!r})") from exc
    return dict(record)


def default_cap(folder: str | os.PathLike[str] | None = None) -> tuple[float, float] | None:
    """The data holder's cap for data sets not yet recorded (``pate-stab budget --set`` without a data set), or
    None: a new data set then takes its first run's cap.

    Raises:
        LedgerError: the file is unreadable.
    """
    record = _defaults(folder)
    return None if record is None else (record["epsilon"], record["delta"])


def default_relation(folder: str | os.PathLike[str] | None = None) -> tuple[str | None, str | None]:
    """The relation and privacy unit the data holder set for data sets not yet recorded (None: the first run's)."""
    record = _defaults(folder) or {}
    return record.get("neighbouring"), record.get("privacy_unit")


def set_default_cap(
    epsilon: float,
    delta: float,
    *,
    neighbouring: str | None = None,
    privacy_unit: str | None = None,
    folder: str | os.PathLike[str] | None = None,
) -> Path:
    """Set the data holder's cap for data sets not yet recorded (a private file, 0600), and optionally the
    relation and privacy unit they count under (None: their first run's); recorded data sets keep theirs.

    A data set that will see runs under both relations (or both units) counts them all only under
    replace-one (label privacy): set that here before its first run.

    Raises:
        ValueError: an unknown relation or unit, or label privacy under add/remove.
    """
    if neighbouring is not None and neighbouring not in NEIGHBOURING_RELATIONS:
        raise ValueError(f"neighbouring must be one of {NEIGHBOURING_RELATIONS}, got {neighbouring!r}")
    if privacy_unit is not None and privacy_unit not in PRIVACY_UNITS:
        raise ValueError(f"privacy_unit must be one of {PRIVACY_UNITS}, got {privacy_unit!r}")
    if privacy_unit == "label" and neighbouring != "replace_one":
        raise ValueError("label privacy counts under replace_one: give neighbouring='replace_one' with it")
    root = private_folder(budget_dir(folder))
    record: dict[str, Any] = {
        "epsilon": check_epsilon(epsilon, "epsilon"), "delta": check_delta(delta, "delta", allow_zero=True),
    }  # fmt: skip
    record |= {k: v for k, v in (("neighbouring", neighbouring), ("privacy_unit", privacy_unit)) if v is not None}
    with _folder_lock(root):
        return write_private(root / DEFAULT_CAP_NAME, json.dumps(record) + "\n")


def data_sets(folder: str | os.PathLike[str] | None = None) -> list[DataSet]:
    """The data sets the data holder's folder records (sorted by id); none if it does not exist."""
    root = budget_dir(folder)
    if not root.is_dir():
        return []
    return [
        DataSet(root, p.stem[len(_PREFIX) :]) for p in sorted(root.glob(f"{_PREFIX}*.jsonl")) if p.stat().st_size > 0
    ]
