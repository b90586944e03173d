"""The persistent privacy ledger of a run and the run folder's private files.

Modules:

- ``data_budget``: The data holder's budget: one ledger per private data set, outside any run folder,
  that counts every run's spends on that data under its cap.
- ``file``: Verifying a ledger file: opening, locking, reading and checking every line, and what it
  holds.
- ``format``: What a ledger line holds: the file's format constants, the recorded spend and line
  encoding.
- ``privacy_ledger``: The persistent privacy ledger: one append-only JSON-lines file per run.
- ``private_files``: Private files of a run folder: its secret key, keyed digests, files readable by
  their owner only.
"""

from pate_stab.privacy.ledger.privacy_ledger import (
    DEFAULT_NEIGHBOURING,
    NEIGHBOURING_RELATIONS,
    PRIVACY_UNITS,
    LedgerEntry,
    PrivacyLedger,
    anchor_path,
    recorded_budget,
    replace_one_cost,
)

__all__ = [
    "DEFAULT_NEIGHBOURING",
    "NEIGHBOURING_RELATIONS",
    "PRIVACY_UNITS",
    "LedgerEntry",
    "PrivacyLedger",
    "anchor_path",
    "recorded_budget",
    "replace_one_cost",
]
