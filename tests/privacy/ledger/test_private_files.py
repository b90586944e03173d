"""Private files of a run folder: mode 0600, one secret key per folder, keyed and public digests."""

from __future__ import annotations

import hashlib
import hmac
import os
from pathlib import Path

import pytest
import torch

from pate_stab.privacy.ledger.private_files import (
    PRIVATE_KEY_NAME,
    keyed_digest,
    public_digest,
    run_private_key,
    tensor_bytes,
    write_private,
)


def test_write_private_gives_mode_0600_even_over_a_wider_file(tmp_path: Path) -> None:
    path = tmp_path / "private_diagnostics.json"
    path.write_text("old")
    os.chmod(path, 0o644)
    write_private(path, '{"a": 1}')
    assert path.read_text() == '{"a": 1}' and path.stat().st_mode & 0o777 == 0o600
    assert [p.name for p in tmp_path.iterdir()] == [path.name]  # no temporary file left


def test_run_private_key_is_created_once_and_refused_when_readable_by_others(tmp_path: Path) -> None:
    key = run_private_key(tmp_path)
    path = tmp_path / PRIVATE_KEY_NAME
    assert len(key) == 32 and path.stat().st_mode & 0o777 == 0o600
    assert run_private_key(tmp_path) == key
    assert run_private_key(tmp_path / "other") != key
    os.chmod(path, 0o644)
    with pytest.raises(PermissionError, match="0600"):
        run_private_key(tmp_path)
    os.chmod(path, 0o600)
    path.write_bytes(b"short")
    with pytest.raises(ValueError, match="32-byte"):
        run_private_key(tmp_path)


def test_keyed_digest_is_hmac_sha256_of_length_prefixed_parts() -> None:
    key = b"k" * 32
    expected = hmac.new(key, (2).to_bytes(8, "big") + b"ab", hashlib.sha256).hexdigest()
    assert keyed_digest(key, b"ab") == expected
    assert keyed_digest(key, b"ab", b"c") != keyed_digest(key, b"a", b"bc")  # parts cannot be shifted
    assert keyed_digest(key, b"ab") != keyed_digest(b"j" * 32, b"ab")
    assert public_digest(b"ab") == hashlib.sha256((2).to_bytes(8, "big") + b"ab").hexdigest()
    with pytest.raises(TypeError, match="16"):
        keyed_digest(b"short", b"ab")


def test_tensor_bytes_distinguish_dtype_and_shape() -> None:
    x = torch.arange(6, dtype=torch.int64)
    assert tensor_bytes(x) != tensor_bytes(x.view(2, 3)) != tensor_bytes(x.to(torch.int32))
    assert tensor_bytes(x) == tensor_bytes(x.clone())
