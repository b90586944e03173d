"""Argument checks shared by PATE's aggregators (LNMax, GNMax, Confident-GNMax).

Their accounting is :mod:`pate_stab.privacy.accounting.composition`: one query of an aggregator is a
:mod:`pate_stab.privacy.accounting.events` event, the run is that event self-composed ``num_queries`` times
(:class:`~pate_stab.privacy.accounting.events.SelfComposedEvent`), and a fresh dp-accounting accountant (PLD
by default, or RDP) turns it into ε at the target δ
(:func:`~pate_stab.privacy.accounting.composition.accountant_epsilon`);
:func:`~pate_stab.privacy.accounting.composition.calibrate_scale` searches the noise scale.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from pate_stab._checks import check_tensor

__all__ = ["ROWS_PER_CHUNK", "SQRT2", "check_accountant", "check_vote_counts"]

ROWS_PER_CHUNK = 1 << 18  # bounds the noise buffer at 2^18 · C float64 values
SQRT2 = math.sqrt(2.0)


def check_vote_counts(counts: Any) -> torch.Tensor:
    counts = check_tensor("counts", counts, ndim=2, floating=False)
    if bool((counts < 0).any()):
        raise ValueError("counts must be non-negative vote counts")
    return counts.to(torch.float64)


def check_accountant(accountant: Any) -> str:
    if accountant not in ("pld", "rdp"):
        raise ValueError(f"accountant must be 'pld' or 'rdp', got {accountant!r}")
    return str(accountant)
