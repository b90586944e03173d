"""Exceptions raised by pate_stab."""

from __future__ import annotations

__all__ = [
    "PateStabError",
    "BudgetExhaustedError",
    "LedgerError",
    "ConvergenceError",
    "HaltedError",
    "ReplayedSpendError",
    "LabelRelationError",
]


class PateStabError(Exception):
    """Base class of the package's own errors."""


class BudgetExhaustedError(PateStabError):
    """A spend would exceed the privacy budget; nothing was released."""


class LedgerError(PateStabError):
    """The privacy ledger is unreadable, truncated or inconsistent; the library refuses to run."""


class ConvergenceError(PateStabError):
    """A solver did not reach its stated tolerance, so a guarantee that assumes it would not hold."""


class HaltedError(PateStabError):
    """A sparse-vector mechanism was asked for more answers after it halted at its cutoff."""


class ReplayedSpendError(PateStabError):
    """A release under a spend id that already bought its noise asked for outputs that were not recorded.

    A spend id buys exactly one draw of noise (DESIGN.md fact 7): a replay returns the outputs
    recorded for it, or refuses with this error; it never draws again.
    """


class LabelRelationError(PateStabError, ValueError):
    """Label privacy without the replace-one relation: refused by every entry point (``transfer``,
    ``compare``, ``release --votes``, :class:`~pate_stab.run.config.TransferConfig`,
    :func:`~pate_stab.run.release_votes.release_votes`) with the same message
    (:func:`pate_stab._checks.check_label_relation`); the relation is never inferred."""
