"""Shared fixtures."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture
def generator() -> torch.Generator:
    gen = torch.Generator()
    gen.manual_seed(20181203)
    return gen


@pytest.fixture
def shared_data() -> Path:
    """``../shared/data`` beside the project root; tests that need it skip when it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"offline data folder {SHARED_DATA} not present")
    return SHARED_DATA
