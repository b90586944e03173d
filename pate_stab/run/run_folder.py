"""The run folder: one writer at a time, published files replaced whole, and what may be published.

A run folder (a transfer's or compare's ``<checkpoints_dir>/<run_name>/``, a ``release --votes``
output folder) is written by one process at a time. :func:`run_lock` holds an exclusive
``fcntl.flock`` on ``<folder>/run.lock`` for the whole run (training, release, student, report;
taken at the start where the folder exists, else when the run first writes to it,
:func:`claim_run_folder`, so that input refused before that leaves no folder) and refuses at once
— it never waits — when another process holds it: two
concurrent reruns with different settings would otherwise interleave their writes (one's
``config.json`` beside the other's ``report.json``). The lock belongs to the open file, so the
kernel drops it when its holder exits, however it exits (a SIGKILL leaves ``run.lock`` behind, but
not the lock). Within one process the lock is re-entrant (a transfer's stages and helpers that take
it again share the holder's).

:func:`write_published` writes a published file under a temporary name beside it and renames it
over the old one (``os.replace``, atomic on POSIX), so a reader sees the old file or the new one,
never a part of one. Private files have their own atomic writer
(:func:`pate_stab.privacy.ledger.private_files.write_private`, mode 0600).

Neither changes what a file holds: the lock file is empty and is neither published nor private.

:func:`check_ledger_kept` refuses a folder that shows a run spent in it but has lost its ledger
(DESIGN.md fact 15): a run there would start a new ledger and draw fresh noise under the spend ids
of the lost one.

What a run may publish and what stays private: the split of its outputs, and its data identity.

DESIGN.md fact 8. A run folder holds

* **published** files: mechanism outputs and what is computed from them and from public data —
  ``config.json`` (the settings), ``ledger.jsonl`` (budget, relation, spends, released labels;
  written without wall-clock times, calls recorded by public query positions), ``student.pt``,
  ``report.json`` (the certified (ε, δ) and relation, release counts, PATE's *sanitised*
  data-dependent ε, the student's accuracy on the evaluation split, label accuracy computed from
  the released labels and the public pool's true labels), and for ``compare`` its
  ``compare.json`` / ``compare.txt`` / ``compare.png``;
* **private** files (mode 0600, named ``private*``), never needed to use the published ones:
  ``private_diagnostics.json`` (teacher and plurality accuracy, the exact private size, the raw
  data-dependent ε with its RDP and smooth-sensitivity inputs, wall times of the stages —
  teacher training time depends on the private size), ``private_key`` (the folder's secret key)
  and ``private_identity.json`` (the MAC of the data the run was made with); likewise
  ``private_compare.json`` for ``compare``;
* **private folders** (:data:`PRIVATE_FOLDERS`, mode 0700, every file in them 0600): ``teachers/``
  (the teachers' weights, ``config.json`` and Lightning's checkpoints: models of the private data
  that no mechanism paid for) and ``features/`` (the private records' features). A run made before
  they were private has its folders tightened when it is reopened.

``features.pt`` (a PCA fitted on the public pool only) may be published, and so may ``direct/``
(:data:`PUBLISHED_FOLDERS`): the direct learners' models, each a mechanism output charged in the
ledger, and nothing else.

:func:`split_private` moves the private fields out of a report; :func:`check_data_identity`
makes a rerun refuse data other than the run's.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from torch import Tensor

from pate_stab.errors import LedgerError, PateStabError
from pate_stab.privacy.ledger.format import anchor_path
from pate_stab.privacy.ledger.private_files import keyed_digest, run_private_key, tensor_bytes, write_private

__all__ = [
    "LEDGER_MARK",
    "LOCK_NAME",
    "PRIVATE_DIAGNOSTICS",
    "PRIVATE_FOLDERS",
    "PRIVATE_IDENTITY",
    "PUBLISHED_FOLDERS",
    "SPEND_WITNESSES",
    "RunFolderLockedError",
    "check_data_identity",
    "check_ledger_kept",
    "claim_run_folder",
    "files_section",
    "run_lock",
    "split_private",
    "write_private_json",
    "write_published",
]

LOCK_NAME = "run.lock"
LEDGER_NAME = "ledger.jsonl"
IDENTITY_NAME = "private_identity.json"  # PRIVATE_IDENTITY
LEDGER_MARK = "ledger"
"""The field of ``private_identity.json`` that records, before a run folder's ledger is created, that it was."""
SPEND_WITNESSES = (
    "report.json", "compare.json", "compare.txt", "compare.png", "private_compare.json", "private_diagnostics.json",
    "labels.npy", "labels.csv", "student.pt", "students", "direct", "refit_students.json",
)  # fmt: skip
"""Files and folders a run writes only after it has spent (a release, a direct learner's model, their report)."""

_depth: dict[Path, int] = {}  # lock paths inside a run_lock block of this process → nesting depth
_fds: dict[Path, int] = {}  # lock paths this process holds → the locked file descriptor
_guard = threading.Lock()


class RunFolderLockedError(PateStabError):
    """Another process is running in this run folder; nothing was written to it."""


def _lock_path(folder: str | os.PathLike[str]) -> Path:
    return Path(os.path.abspath(Path(folder) / LOCK_NAME))


def _acquire(path: Path) -> None:
    """Create the folder and take its lock for this process (``_guard`` held), or refuse at once."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
            raise
        raise RunFolderLockedError(
            f"{path.parent} is in use: another run holds its lock ({path}). One run writes a run folder at a time; "
            "wait for it to finish, or use another run name / output folder. Nothing was written to it"
        ) from None
    _fds[path] = fd


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the run folder's exclusive lock for the block.

    An existing folder is locked at once. A folder that does not exist yet is locked when the run
    first writes to it (:func:`claim_run_folder`, which creates it), so a run refused before that —
    bad input, a refused setting — leaves no folder behind.

    Raises:
        RunFolderLockedError: another process holds the lock (raised at once, never waiting).
    """
    path = _lock_path(folder)
    with _guard:
        if path not in _depth and path.parent.is_dir():
            _acquire(path)
        _depth[path] = _depth.get(path, 0) + 1  # nested blocks share the holder's lock
    try:
        yield path
    finally:
        with _guard:
            _depth[path] -= 1
            if _depth[path] == 0:
                del _depth[path]
                fd = _fds.pop(path, None)
                if fd is not None:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)


def claim_run_folder(folder: str | os.PathLike[str]) -> Path:
    """Create ``folder`` for writing; inside a :func:`run_lock` block, take its lock first if not held yet.

    Raises:
        RunFolderLockedError: another process holds the lock; nothing was written.
    """
    path = _lock_path(folder)
    with _guard:
        if path in _depth and path not in _fds:
            _acquire(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path.parent


def write_published(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write a published file atomically: a temporary file beside ``path``, then ``os.replace``.

    The file gets the process's default mode (published files are meant to be read).
    """
    target = Path(path)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def check_ledger_kept(folder: str | os.PathLike[str]) -> None:
    """Refuse a run folder that shows a run spent in it but holds no ledger (or a ledger that lost its anchor).

    A run folder's ledger is created before its first spend, and ``private_identity.json`` records
    that it was (:data:`LEDGER_MARK`, written first). A folder without ``ledger.jsonl`` (or with an
    empty one) is refused when it holds the ledger's anchor, that mark, or anything a run writes only
    after spending (:data:`SPEND_WITNESSES`: a report, labels, students, direct models): the spends the
    lost ledger recorded cannot be replayed, and a new ledger would draw fresh noise under their ids
    (DESIGN.md facts 7 and 15). A ledger without its anchor whose header shows it was written with one
    (``budget_rule``) is refused beside such files too (it may have been cut back to its header). A folder
    that never had a ledger — new, or stopped after its teachers — and a ledger written before anchors
    open as before.

    Raises:
        LedgerError: naming what is missing and what the folder still holds; nothing was drawn or written.
    """
    root = Path(folder)
    ledger = root / LEDGER_NAME
    anchor = anchor_path(ledger)
    found = [name + ("/" if (root / name).is_dir() else "") for name in SPEND_WITNESSES if (root / name).exists()]
    identity = root / IDENTITY_NAME
    if identity.is_file():
        try:
            marked = bool(json.loads(identity.read_text()).get(LEDGER_MARK))
        except (OSError, ValueError, AttributeError):
            marked = False
        if marked:
            found.append(f"{IDENTITY_NAME} (which records that the folder's ledger was created)")
    if ledger.is_file() and ledger.stat().st_size > 0:
        if anchor.is_file() or not found:
            return
        try:
            header = json.loads(ledger.open("rb").readline())
        except ValueError:
            return  # unreadable: opening the ledger says what is wrong with it
        if not isinstance(header, dict) or "budget_rule" not in header:
            return  # written before anchors
        missing = f"{anchor.name} (the anchor of {LEDGER_NAME}, which its header shows it was written with)"
    else:
        if anchor.is_file():
            found.append(anchor.name)
        if not found:
            return
        missing = LEDGER_NAME if not anchor.is_file() else f"{LEDGER_NAME} (its anchor {anchor.name} remains)"
    raise LedgerError(
        f"{root} shows that a run spent privacy budget in it ({', '.join(found)}) but {missing} is missing. The "
        "spends recorded there cannot be replayed, and a run here would draw fresh noise under their ids (a leak), "
        "so nothing was drawn or written. Restore the folder's ledger and its anchor from a backup, or use a new run "
        "folder: the data set's budget (pate-stab budget) still counts what this folder spent"
    )


# ---- what may be published, what stays private, the data identity --------------------------------------------

PRIVATE_DIAGNOSTICS = "private_diagnostics.json"
PRIVATE_IDENTITY = "private_identity.json"
PRIVATE_FOLDERS = ("teachers", "features")
"""Folders of working state derived from private data without a mechanism: 0700, files 0600."""
PUBLISHED_FOLDERS = ("direct",)
"""Folders of mechanism outputs: the direct learners' models (one charged spend each)."""

_PRIVATE_NOTE = (
    "computed from private data without a charged mechanism: NOT differentially private. Keep it "
    "with the private data; never publish it. The published files never need it."
)


def write_private_json(path: Path, data: Any) -> Path:
    """Write JSON to a private file (mode 0600), with a note that says it is private."""
    return write_private(path, json.dumps({"private": _PRIVATE_NOTE, **data}, indent=2, sort_keys=True))


def files_section(published: list[str], private: list[str]) -> dict[str, Any]:
    """The report's ``files`` section: which file of the run folder may be published, which not."""
    return {
        "published": sorted(published),
        "private": sorted(private),
        "note": "published: mechanism outputs and what is computed from them and public data; private (files "
        "0600, folders 0700): statistics of the private data no mechanism paid for, secret keys and working "
        "state derived from private data (teachers/: the teachers' weights and checkpoints; features/: the "
        "private records' features)",
    }


def split_private(report: dict[str, Any], paths: list[tuple[str, ...]]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Move the fields at ``paths`` (key tuples) out of ``report``: (published, private) copies.

    A path whose field is absent is skipped; emptied sections are dropped from the published copy.
    """
    public = json.loads(json.dumps(report))
    private: dict[str, Any] = {}
    for path in paths:
        src: Any = public
        for key in path[:-1]:
            src = src.get(key) if isinstance(src, dict) else None
        if not isinstance(src, dict) or path[-1] not in src:
            continue
        dst = private
        for key in path[:-1]:
            dst = dst.setdefault(key, {})
        dst[path[-1]] = src.pop(path[-1])
    for path in paths:  # drop sections the move emptied
        if len(path) > 1 and isinstance(public.get(path[0]), dict) and not public[path[0]]:
            public.pop(path[0])
    return public, private


LOADED_IDENTITY = "splits as loaded"
"""``private_identity.json``'s ``identity``: the MAC covers the splits before any preprocessing."""


def check_data_identity(run_dir: Path, tensors: list[Tensor], *, legacy: list[Tensor] | None = None) -> None:
    """Record the run's data on first use; refuse other data on a rerun.

    The identity is HMAC-SHA256 of the tensors (the splits as loaded, :attr:`pate_stab.run.data.Task.loaded`)
    under the folder's secret key (:func:`~pate_stab.privacy.ledger.private_files.run_private_key`), kept in
    ``private_identity.json`` (0600): a digest of private data is itself private, so it never goes into
    ``config.json`` or the report. A folder whose identity was recorded from the preprocessed splits
    (``legacy``; before the identity read the data as loaded) is checked against those and then given the
    new identity.

    Raises:
        ValueError: the folder was made with other data (a rerun would reuse teachers and
            releases that belong to it).
    """
    key = run_private_key(run_dir)
    mac = keyed_digest(key, *(tensor_bytes(t) for t in tensors))
    path = run_dir / PRIVATE_IDENTITY
    record = json.loads(path.read_text()) if path.is_file() else {}
    if set(record) - {"private", LEDGER_MARK}:  # recorded before (a file with the ledger's mark alone records none)
        if record.get("identity") == LOADED_IDENTITY:
            same = record.get("data_mac") == mac
        else:  # recorded from the preprocessed splits
            same = legacy is not None and record.get("data_mac") == keyed_digest(
                key, *(tensor_bytes(t) for t in legacy)
            )
        if not same:
            raise ValueError(
                f"{run_dir} was made with other data than this run reads (the data files or the split changed "
                "since its teachers were trained and its labels released); its teachers and releases belong to "
                "that data. Choose another run name or remove the folder"
            )
        if record.get("identity") == LOADED_IDENTITY:
            return
    # other fields (the mark of the folder's ledger, pate_stab.run.run_folder.check_ledger_kept) are kept
    kept = {k: v for k, v in record.items() if k not in ("private", "data_mac", "identity", "mac")}
    mine = {"data_mac": mac, "identity": LOADED_IDENTITY, "mac": "HMAC-SHA256 under private_key of the run's splits"}
    write_private_json(path, kept | mine)
