"""pate_stab: label-private learning through stability.

Teachers trained on disjoint shards of private data, a private online releaser of their votes
(Bassily, Thakkar & Thakurta 2018), students trained on what was released, and the baselines
it is compared against (PATE's aggregators, private convex ERM).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pate_stab.errors import BudgetExhaustedError, LedgerError, PateStabError

if TYPE_CHECKING:
    from pate_stab.run.student_file import PublishedStudent

__all__ = ["BudgetExhaustedError", "LedgerError", "PateStabError", "__version__", "load_student"]
__version__ = "0.1.0"


def load_student(path: str | Path) -> PublishedStudent:
    """A run's published student (``<run>/student.pt``, a compare row's ``students/<name>.pt``, or the
    run folder): ``.predict(x)`` / ``.predict_proba(x)`` on raw inputs of the run's kind (NumPy or
    torch arrays, a CSV path, an image folder), ``.classes`` the class names
    (:func:`pate_stab.run.student_file.load_student`). Imported on call, so that ``import pate_stab``
    stays light."""
    from pate_stab.run.student_file import load_student as _load

    return _load(path)
