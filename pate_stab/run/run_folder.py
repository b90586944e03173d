"""One writer per run folder, and published files replaced whole.

A run folder (a transfer's or compare's ``<checkpoints_dir>/<run_name>/``, a ``release --votes``
output folder) is written by one process at a time. :func:`run_lock` takes an exclusive
``fcntl.flock`` on ``<folder>/run.lock`` for the whole run (data checks, training, release,
student, report) and refuses at once — it never waits — when another process holds it: two
concurrent reruns with different settings would otherwise interleave their writes (one's
``config.json`` beside the other's ``report.json``). The lock belongs to the open file, so the
kernel drops it when its holder exits, however it exits (a SIGKILL leaves ``run.lock`` behind, but
not the lock). Within one process the lock is re-entrant (a transfer's stages and helpers that take
it again share the holder's).

:func:`write_published` writes a published file under a temporary name beside it and renames it
over the old one (``os.replace``, atomic on POSIX), so a reader sees the old file or the new one,
never a part of one. Private files have their own atomic writer
(:func:`pate_stab.privacy.private_files.write_private`, mode 0600).

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

__all__ = ["LOCK_NAME", "RunFolderLockedError", "run_lock", "write_published"]

LOCK_NAME = "run.lock"

_held: dict[Path, int] = {}  # lock paths this process holds → nesting depth
_guard = threading.Lock()


class RunFolderLockedError(PateStabError):
    """Another process is running in this run folder; nothing was read, trained, spent or written."""


@contextlib.contextmanager
def run_lock(folder: str | os.PathLike[str]) -> Iterator[Path]:
    """Hold the run folder's exclusive lock for the block (creating the folder and ``run.lock``).

    Raises:
        RunFolderLockedError: another process holds the lock (raised at once; the folder is untouched).
    """
    path = (Path(folder) / LOCK_NAME).resolve()
    with _guard:
        if path in _held:  # this process holds it already: share the holder's lock
            _held[path] += 1
            fd = -1
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    raise
                raise RunFolderLockedError(
                    f"{path.parent} is in use: another run holds its lock ({path}). One run writes a run folder at "
                    "a time; wait for it to finish, or use another run name / output folder. Nothing was done"
                ) from None
            _held[path] = 1
    try:
        yield path
    finally:
        with _guard:
            _held[path] -= 1
            if _held[path] == 0:
                del _held[path]
                if fd >= 0:
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    os.close(fd)


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
