"""One writer per run folder, and published files replaced whole.

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

from pate_stab.errors import LedgerError, PateStabError
from pate_stab.privacy.ledger.format import anchor_path

__all__ = [
    "LEDGER_MARK",
    "LOCK_NAME",
    "SPEND_WITNESSES",
    "RunFolderLockedError",
    "check_ledger_kept",
    "claim_run_folder",
    "run_lock",
    "write_published",
]

LOCK_NAME = "run.lock"
LEDGER_NAME = "ledger.jsonl"
IDENTITY_NAME = "private_identity.json"  # pate_stab.run.private.PRIVATE_IDENTITY
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
