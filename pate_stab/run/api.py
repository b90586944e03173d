"""The main job on a user's arrays, in one call: :func:`transfer_arrays` (and :func:`compare_arrays`).

Example (a task generated on the spot; any tensors or NumPy arrays will do)::

    from pate_stab.data import make_gaussian_mixture
    from pate_stab.rng import seeded_generator
    from pate_stab.run import transfer_arrays

    x, y = make_gaussian_mixture(9000, num_classes=3, dim=10, separation=6.0, generator=seeded_generator(0))
    result = transfer_arrays(
        private=(x[:6000], y[:6000]), public=x[6000:8000], evaluation=(x[8000:], y[8000:]), classes=3,
        num_teachers=300, num_queries=100, epsilon=8.0, checkpoints_dir="checkpoints", run_name="mine",
    )
    result.student.predict(x[8000:])   # the student (publishable)
    result.labels, result.index        # the released labels and the pool points they label
    result.report["student"]["test_accuracy"]

The four steps, for a user who wants to swap one (:func:`pate_stab.run.transfer.transfer_result` runs
them in this order): :func:`~pate_stab.run.prepare.prepare` (data, partition, teachers; pass
``data=``), :func:`~pate_stab.run.release.release_labels` (one aggregator through the run's
ledger), :func:`~pate_stab.run.student.fit_student` (post-processing), and
:func:`~pate_stab.run.transfer.evaluate_and_report`.

Every setting of :class:`~pate_stab.run.config.TransferConfig` may be passed as a keyword. A
run lives in ``<checkpoints_dir>/<run_name>/``; calling again with the same run name resumes it
(its teachers and recorded releases are reused), so give new data a new run name. The
arrays are checked first (:func:`pate_stab.data.own.own_data`): bad input raises
:class:`~pate_stab.data.own.InputDataError` before anything is trained or spent.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pate_stab.data.own import OwnData, own_data
from pate_stab.run.compare import run_compare
from pate_stab.run.config import DIRECT_LEARNER_NAMES, SECTIONS, TransferConfig, flat_settings
from pate_stab.run.transfer import TransferResult, transfer_result

__all__ = ["arrays_config", "compare_arrays", "transfer_arrays"]


def arrays_config(config: TransferConfig | None = None, **settings: Any) -> TransferConfig:
    """A ``dataset="arrays"`` configuration: ``config``'s settings (default: the defaults) with ``settings``
    (flat names, or sections as mappings or section objects)."""
    base = {} if config is None else config.to_dict()
    given = flat_settings(settings)
    for name in SECTIONS:  # a section object: each of its settings replaces config's
        if name in given:
            given.update(given.pop(name).to_dict())
    data = {**base, **given, "dataset": "arrays"}
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels"):
        if isinstance(data.get(key), list):
            data[key] = tuple(data[key])
    return TransferConfig.from_dict(data)


def _data(
    private: tuple[Any, Any] | OwnData,
    public: Any,
    evaluation: tuple[Any, Any] | None,
    classes: int | Sequence[str] | None,
    public_y: Any,
    private_ids: Any,
) -> OwnData:
    if isinstance(private, OwnData):
        return private
    return own_data(private, public, evaluation, classes=classes, public_y=public_y, private_ids=private_ids)


def transfer_arrays(
    private: tuple[Any, Any] | OwnData,
    public: Any = None,
    evaluation: tuple[Any, Any] | None = None,
    *,
    classes: int | Sequence[str] | None = None,
    public_y: Any = None,
    private_ids: Any = None,
    config: TransferConfig | None = None,
    **settings: Any,
) -> TransferResult:
    """Teachers on ``private``, a private release on ``public``, a student: the student, the labels, the report.

    Args:
        private: (x, y) — inputs (n, features...) and integer labels in [0, C); or an
            :class:`~pate_stab.data.own.OwnData` (e.g. from :func:`~pate_stab.data.own.load_files`),
            which then carries every set.
        public: the public pool's inputs, no labels.
        evaluation: (x, y), optional; its figures are None without it.
        classes: C or the class names (default: read from the evaluation labels, never the private ones).
        public_y: the pool's labels, for reporting only.
        private_ids: distinct record ids (integers or strings), for ``partition_key="record_id"``;
            private, used as partition keys only.
        config, settings: the run's settings (``epsilon``, ``num_teachers``, ``run_name``, …).

    Returns:
        :class:`~pate_stab.run.transfer.TransferResult` (``student``, ``labels``, ``index``,
        ``report``); a run stopped early by ``stop_after`` raises ValueError instead.

    Raises:
        InputDataError: the arrays do not fit (before anything is trained or spent).
        BudgetTooSmallError, ValueError: as :func:`~pate_stab.run.transfer.run_transfer`.
    """
    cfg = arrays_config(config, **settings)
    if cfg.stop_after is not None:
        raise ValueError("transfer_arrays runs to the end; use pate_stab.run.transfer.transfer_result for stop_after")
    if cfg.aggregator in DIRECT_LEARNER_NAMES:
        raise ValueError(
            f"{cfg.aggregator!r} is a direct learner (no teachers, no released labels): use "
            "pate_stab.run.run_transfer(config, data=...) or compare_arrays(..., direct=...)"
        )
    result = transfer_result(cfg, data=_data(private, public, evaluation, classes, public_y, private_ids))
    if not isinstance(result, TransferResult):  # pragma: no cover - stop_after is refused above
        raise RuntimeError(f"the run stopped early: {result}")
    return result


def compare_arrays(
    private: tuple[Any, Any] | OwnData,
    public: Any = None,
    evaluation: tuple[Any, Any] | None = None,
    *,
    epsilons: Sequence[float],
    aggregators: Sequence[str] | None = None,
    repeats: int = 1,
    direct: Sequence[str] = (),
    classes: int | Sequence[str] | None = None,
    public_y: Any = None,
    private_ids: Any = None,
    config: TransferConfig | None = None,
    **settings: Any,
) -> dict[str, Any]:
    """:func:`~pate_stab.run.compare.run_compare` on the user's arrays (arguments as :func:`transfer_arrays`;
    ``direct``: direct private learners as extra rows, :mod:`pate_stab.run.direct`)."""
    cfg = arrays_config(config, **settings)
    data = _data(private, public, evaluation, classes, public_y, private_ids)
    return run_compare(cfg, epsilons=epsilons, aggregators=aggregators, repeats=repeats, data=data, direct=direct)
