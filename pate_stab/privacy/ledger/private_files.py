"""Private files of a run folder: its secret key, keyed digests, files readable by their owner only.

A run writes two kinds of files (DESIGN.md fact 8). Published files hold only mechanism outputs
and what is computed from them and from public data. Everything else computed from private data
goes into files created with mode 0600 whose names say they are private
(``private_diagnostics.json``, ``private_key``, ``private_identity.json``); the published files
never need them. Working state derived from private data without a mechanism (teacher weights,
Lightning checkpoints, feature caches) lives in private folders (:func:`private_folder`, mode 0700)
as files of mode 0600 (:func:`write_private`, :func:`tighten_private_tree`, DESIGN.md fact 14).

A digest of private data is itself private: an unkeyed hash (SHA-256 of the private inputs or
of the teachers' votes) lets anyone who knows every other record test which of two neighbouring
data sets was used. Where a run must recognise private inputs again (a cached item, a rerun's
data), it stores HMAC-SHA256 under the run folder's secret key (:func:`run_private_key`: 32 bytes
from the OS, created once per folder, mode 0600, never written into a published file), and
keeps even that MAC in a private file.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import os
from collections.abc import Iterator
from pathlib import Path

import torch

__all__ = [
    "PRIVATE_KEY_NAME",
    "folder_id",
    "keyed_digest",
    "owner_only_umask",
    "private_folder",
    "public_digest",
    "tighten_private_tree",
    "run_private_key",
    "tensor_bytes",
    "write_private",
]

PRIVATE_KEY_NAME = "private_key"
_KEY_BYTES = 32
_FILE_MODE, _FOLDER_MODE = 0o600, 0o700


def private_folder(path: str | os.PathLike[str]) -> Path:
    """Create ``path`` (and missing parents) and make it a private folder: mode 0700, owner only.

    For working state computed from private data without a mechanism (teacher weights, Lightning
    checkpoints, feature caches): nobody but the owner can list or open what is inside, whatever
    mode a library gives the files it writes there. An existing folder is tightened too. Parents
    created on the way keep the process's default mode (a run folder also holds published files).
    """
    folder = Path(path)
    folder.mkdir(parents=True, exist_ok=True, mode=_FOLDER_MODE)
    os.chmod(folder, _FOLDER_MODE)
    return folder


def tighten_private_tree(path: str | os.PathLike[str]) -> None:
    """Make ``path`` and everything under it owner-only: folders 0700, files 0600.

    For a private folder written by other code (Lightning's checkpoints) or made before its files
    were private (an older run folder, tightened when it is reopened). Symbolic links are left alone
    and not followed. A missing ``path`` is nothing to do; an entry removed during the walk is skipped.
    """
    root = Path(path)
    if root.is_symlink() or not root.is_dir():
        if root.is_file() and not root.is_symlink():
            os.chmod(root, _FILE_MODE)
        return
    os.chmod(root, _FOLDER_MODE)
    for current, folders, files in os.walk(root):
        for names, mode in ((folders, _FOLDER_MODE), (files, _FILE_MODE)):
            for name in names:
                entry = Path(current, name)
                if not entry.is_symlink():
                    with contextlib.suppress(FileNotFoundError):  # removed meanwhile (an old checkpoint)
                        os.chmod(entry, mode)


@contextlib.contextmanager
def owner_only_umask() -> Iterator[None]:
    """Within the block, files and folders are created owner-only (umask 077); the umask is restored after.

    For code that creates files itself (a Lightning fit writing checkpoints): together with a
    :func:`private_folder` around them, nothing it writes is readable by others even for the time
    between its write and a :func:`tighten_private_tree`. The umask is per process: files created
    by other threads during the block are owner-only too (narrower than they asked, never wider).
    """
    previous = os.umask(0o077)
    try:
        yield
    finally:
        os.umask(previous)


def write_private(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` to ``path`` atomically, readable and writable by its owner only (mode 0600).

    The file is written beside ``path`` under a temporary name created with mode 0600 and then
    renamed, so that no reader ever sees a partial file or a wider mode.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    raw = data.encode() if isinstance(data, str) else bytes(data)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)  # a stale temporary file keeps its mode otherwise
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    tmp.replace(target)
    return target


def run_private_key(folder: str | os.PathLike[str]) -> bytes:
    """The folder's secret key (``<folder>/private_key``), created from ``os.urandom`` on first use.

    Raises:
        PermissionError: the key file is readable by others than its owner (mode not 0600);
            the key may have leaked, so nothing keyed with it is trusted.
        ValueError: the key file has the wrong length.
    """
    path = Path(folder) / PRIVATE_KEY_NAME
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:  # another process created it first
            pass
        else:
            with os.fdopen(fd, "wb") as f:
                f.write(os.urandom(_KEY_BYTES))
                f.flush()
                os.fsync(f.fileno())
    mode = path.stat().st_mode & 0o777
    if mode & 0o077:
        raise PermissionError(
            f"{path} has mode {mode:o}; a run's private key must be readable by its owner only (0600)"
        )
    key = path.read_bytes()
    if len(key) != _KEY_BYTES:
        raise ValueError(f"{path} holds {len(key)} bytes, expected a {_KEY_BYTES}-byte key; remove it to start afresh")
    return key


def tensor_bytes(t: torch.Tensor) -> bytes:
    """A tensor's dtype, shape and values as bytes (the input of a digest)."""
    t = t.detach().cpu().contiguous()
    return f"{t.dtype}|{tuple(t.shape)}|".encode("ascii") + t.numpy().tobytes()


def keyed_digest(key: bytes, *parts: bytes) -> str:
    """HMAC-SHA256 of the length-prefixed ``parts`` under ``key`` (hex).

    Reveals nothing about the parts to anyone without the key (HMAC is a pseudo-random
    function; Bellare, Canetti & Krawczyk 1996); still, keep it in private files only.
    """
    if not isinstance(key, bytes) or len(key) < 16:
        raise TypeError("key must be bytes of length >= 16")
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "big"))
        mac.update(part)
    return mac.hexdigest()


def folder_id(run_key: bytes) -> str:
    """A run folder's id in the data holder's ledgers (:mod:`pate_stab.privacy.ledger.data_budget`): a MAC
    under the folder's own secret key, so a deleted and recreated folder (a new key) is a new folder."""
    return keyed_digest(run_key, b"run folder id")[:32]


def public_digest(*parts: bytes) -> str:
    """SHA-256 of the length-prefixed ``parts`` (hex): for public inputs only (e.g. query positions)."""
    h = hashlib.sha256()
    for part in parts:
        h.update(len(part).to_bytes(8, "big"))
        h.update(part)
    return h.hexdigest()
