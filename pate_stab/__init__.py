"""pate_stab: label-private learning through stability.

Teachers trained on disjoint shards of private data, a private online releaser of their votes
(Bassily, Thakkar & Thakurta 2018), students trained on what was released, and the baselines
it is compared against (PATE's aggregators, private convex ERM).

The public API, importable from here (each name is loaded on first use, so that
``import pate_stab`` stays light):

=====================  ==============================================================
``transfer``           the main job: teachers, a private release, a student (a :class:`TransferResult`)
``compare``            every aggregator and direct learner on the same data, one ledger (a :class:`CompareResult`)
``Data``               what a run reads: ``Data.arrays(...)``, ``Data.files(...)``, ``Data.bundled("adult")``
``TransferConfig``     every setting of a run (YAML keys, ``--set`` and keywords use the same names)
``plan_run``           before training: what each aggregator can answer at your data's size (a :class:`RunPlan`)
``make_releaser``      one aggregator of the registry (:class:`AggregatorSettings` in, a :class:`Releaser` out)
``calibrate``          the stability releaser's noise and threshold for (ε, δ, m, T) (a :class:`Calibration`)
``PrivacyLedger``      the append-only, budget-capped record of every spend
``load_student``       a published student, with its preprocessing (a :class:`PublishedStudent`): ``.predict(x)``
=====================  ==============================================================

``transfer_arrays``, ``compare_arrays`` and ``run_transfer`` (the previous release's names) still work for
this release, with a ``DeprecationWarning``.

Example (a task generated on the spot; a doctest run by the test suite)::

    >>> import tempfile
    >>> import torch
    >>> from pate_stab import Data, load_student, plan_run, transfer
    >>> g = torch.Generator().manual_seed(0)
    >>> y = torch.randint(0, 3, (3000,), generator=g)
    >>> x = 8.0 * torch.eye(3, 5)[y] + torch.randn(3000, 5, generator=g)  # three separated classes
    >>> plan = plan_run(num_private=2000, num_classes=3, num_queries=50, epsilon=8.0, delta=1e-5,
    ...                 max_unstable=10, num_teachers=100)
    >>> plan.row("gnmax").answerable  # before training: can GNMax answer with 100 teachers here?
    True
    >>> folder = tempfile.mkdtemp()  # where the run folder goes (default: checkpoints/)
    >>> data = Data.arrays((x[:2000], y[:2000]), x[2000:2500], (x[2500:], y[2500:]), classes=3)
    >>> result = transfer(data, num_teachers=100, num_queries=50, epsilon=8.0, aggregator="gnmax",
    ...                   teacher_epochs=2, student_epochs=5, accelerator="cpu", progress=False,
    ...                   checkpoints_dir=folder, run_name="api")
    >>> int((result.labels >= 0).sum()) > 0  # GNMax labels every query it is asked
    True
    >>> student = load_student(f"{folder}/api")  # the published student, with its preprocessing
    >>> tuple(student.predict(x[2500:2505].numpy()).shape)  # NumPy or torch in, one class index per row
    (5,)
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports
from pate_stab.errors import BudgetExhaustedError, LabelRelationError, LedgerError, PateStabError

if TYPE_CHECKING:
    from pate_stab.aggregation.plan import RunPlan, plan_run
    from pate_stab.aggregation.private_knn import NeighbourIndex
    from pate_stab.aggregation.registry import AggregatorSettings, Releaser, make_releaser
    from pate_stab.data.own import OwnData
    from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
    from pate_stab.privacy.mechanisms.calibration import Calibration, calibrate
    from pate_stab.privacy.noise.discrete import RandomSource
    from pate_stab.run.api import CompareResult, Data, compare, transfer
    from pate_stab.run.config import TransferConfig
    from pate_stab.run.student_file import PublishedStudent
    from pate_stab.run.transfer import TransferResult

__all__ = [
    "AggregatorSettings",
    "BudgetExhaustedError",
    "Calibration",
    "CompareResult",
    "Data",
    "LabelRelationError",
    "LedgerError",
    "NeighbourIndex",
    "OwnData",
    "PateStabError",
    "PrivacyLedger",
    "PublishedStudent",
    "RandomSource",
    "Releaser",
    "RunPlan",
    "TransferConfig",
    "TransferResult",
    "__version__",
    "calibrate",
    "compare",
    "load_student",
    "make_releaser",
    "plan_run",
    "transfer",
]
__version__ = "0.1.0"

# name → the module that defines it (imported on first access: PEP 562)
_LAZY = {
    "transfer": "pate_stab.run.api",
    "compare": "pate_stab.run.api",
    "Data": "pate_stab.run.api",
    "CompareResult": "pate_stab.run.api",
    "TransferResult": "pate_stab.run.transfer",
    "TransferConfig": "pate_stab.run.config",
    "PublishedStudent": "pate_stab.run.student_file",
    "OwnData": "pate_stab.data.own",
    "plan_run": "pate_stab.aggregation.plan",
    "RunPlan": "pate_stab.aggregation.plan",
    "make_releaser": "pate_stab.aggregation.registry",
    "AggregatorSettings": "pate_stab.aggregation.registry",
    "Releaser": "pate_stab.aggregation.registry",
    "NeighbourIndex": "pate_stab.aggregation.private_knn",
    "RandomSource": "pate_stab.privacy.noise.discrete",
    "calibrate": "pate_stab.privacy.mechanisms.calibration",
    "Calibration": "pate_stab.privacy.mechanisms.calibration",
    "PrivacyLedger": "pate_stab.privacy.ledger.privacy_ledger",
}
# the previous release's names: thin aliases that warn (DeprecationWarning) when called; not in __all__
_DEPRECATED = {
    "transfer_arrays": "pate_stab.run.api",
    "compare_arrays": "pate_stab.run.api",
    "run_transfer": "pate_stab.run.api",
}

__getattr__, __dir__ = lazy_exports(globals(), {**_LAZY, **_DEPRECATED}, __all__)


def load_student(path: str | Path) -> PublishedStudent:
    """A run's published student (``<run>/student.pt``, a compare row's ``students/<name>.pt``, or
    the run folder): a :class:`PublishedStudent` whose ``.predict(x)`` / ``.predict_proba(x)`` take raw
    inputs of the run's kind (NumPy or torch arrays, a CSV path, an image folder) and ``.classes`` names
    the classes (:func:`pate_stab.run.student_file.load_student`). The training stack is imported on
    call, so that ``import pate_stab`` stays light."""
    from pate_stab.run.student_file import load_student as load

    return load(path)
