"""pate_stab: label-private learning through stability.

Teachers trained on disjoint shards of private data, a private online releaser of their votes
(Bassily, Thakkar & Thakurta 2018), students trained on what was released, and the baselines
it is compared against (PATE's aggregators, private convex ERM).

The public API, importable from here (each name is loaded on first use, so that
``import pate_stab`` stays light):

==================  ==============================================================
``transfer_arrays``  the main job on your arrays: teachers, a private release, a student
``compare_arrays``   every aggregator and direct learner on the same arrays, one ledger
``run_transfer``     the main job from a :class:`TransferConfig` (bundled data or files)
``TransferConfig``   every setting of a run (YAML keys and ``--set`` use the same names)
``plan_run``         before training: what each aggregator can answer at your data's size
``make_releaser``    one aggregator of the registry, to release your own teachers' votes
``calibrate``        the stability releaser's noise and threshold for (ε, δ, m, T)
``PrivacyLedger``    the append-only, budget-capped record of every spend
``load_student``     a published student, with its preprocessing: ``.predict(x)``
==================  ==============================================================

Example (a task generated on the spot; a doctest run by the test suite)::

    >>> import tempfile
    >>> import pate_stab
    >>> from pate_stab.data import make_gaussian_mixture
    >>> from pate_stab.rng import seeded_generator
    >>> x, y = make_gaussian_mixture(3000, num_classes=3, dim=5, separation=8.0, generator=seeded_generator(0))
    >>> plan = pate_stab.plan_run(num_private=2000, num_classes=3, num_queries=50, epsilon=8.0, delta=1e-5,
    ...                           max_unstable=10, num_teachers=100)
    >>> plan.row("gnmax").answerable  # before training: can GNMax answer with 100 teachers here?
    True
    >>> folder = tempfile.mkdtemp()  # where the run folder goes (default: checkpoints/)
    >>> result = pate_stab.transfer_arrays(
    ...     private=(x[:2000], y[:2000]), public=x[2000:2500], evaluation=(x[2500:], y[2500:]), classes=3,
    ...     num_teachers=100, num_queries=50, epsilon=8.0, aggregator="gnmax", teacher_epochs=2,
    ...     student_epochs=5, accelerator="cpu", progress=False, checkpoints_dir=folder, run_name="api")
    >>> int((result.labels >= 0).sum()) > 0  # GNMax labels every query it is asked
    True
    >>> student = pate_stab.load_student(f"{folder}/api")  # the published student, with its preprocessing
    >>> tuple(student.predict(x[2500:2505].numpy()).shape)  # NumPy or torch in, one class index per row
    (5,)
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any

from pate_stab.errors import BudgetExhaustedError, LedgerError, PateStabError

__all__ = [
    "BudgetExhaustedError",
    "LedgerError",
    "PateStabError",
    "PrivacyLedger",
    "TransferConfig",
    "__version__",
    "calibrate",
    "compare_arrays",
    "load_student",
    "make_releaser",
    "plan_run",
    "run_transfer",
    "transfer_arrays",
]
__version__ = "0.1.0"

# name → the module that defines it (imported on first access: PEP 562)
_LAZY = {
    "transfer_arrays": "pate_stab.run.api",
    "compare_arrays": "pate_stab.run.api",
    "run_transfer": "pate_stab.run.transfer",
    "TransferConfig": "pate_stab.run.config",
    "plan_run": "pate_stab.aggregation.plan",
    "make_releaser": "pate_stab.aggregation.registry",
    "calibrate": "pate_stab.privacy.mechanisms.calibration",
    "PrivacyLedger": "pate_stab.privacy.ledger.privacy_ledger",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'pate_stab' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


def load_student(path: str | Path) -> Any:
    """A run's published student (``<run>/student.pt``, a compare row's ``students/<name>.pt``, or
    the run folder): a :class:`pate_stab.run.student_file.PublishedStudent` whose ``.predict(x)`` /
    ``.predict_proba(x)`` take raw inputs of the run's kind (NumPy or torch arrays, a CSV path, an
    image folder) and ``.classes`` names the classes (:func:`pate_stab.run.student_file.load_student`).
    The training stack is imported on call, so that ``import pate_stab`` stays light."""
    return importlib.import_module("pate_stab.run.student_file").load_student(path)
