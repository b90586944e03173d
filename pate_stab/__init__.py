"""pate_stab: label-private learning through stability.

Teachers trained on disjoint shards of private data, a private online releaser of their votes
(Bassily, Thakkar & Thakurta 2018), students trained on what was released, and the baselines
it is compared against (PATE's aggregators, private convex ERM).
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pate_stab.errors import BudgetExhaustedError, LedgerError, PateStabError

__all__ = ["BudgetExhaustedError", "LedgerError", "PateStabError", "__version__", "load_student"]
__version__ = "0.1.0"


def load_student(path: str | Path) -> Any:
    """A run's published student (``<run>/student.pt``, a compare row's ``students/<name>.pt``, or
    the run folder): a :class:`pate_stab.run.student_file.PublishedStudent` whose ``.predict(x)`` /
    ``.predict_proba(x)`` take raw inputs of the run's kind (NumPy or torch arrays, a CSV path, an
    image folder) and ``.classes`` names the classes (:func:`pate_stab.run.student_file.load_student`).
    The training stack is imported on call, so that ``import pate_stab`` stays light."""
    return importlib.import_module("pate_stab.run.student_file").load_student(path)
