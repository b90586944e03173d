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
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from pate_stab.errors import PateStabError

__all__ = ["LOCK_NAME", "RunFolderLockedError", "claim_run_folder", "run_lock", "write_published"]

LOCK_NAME = "run.lock"

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
