"""The public pair: :func:`transfer` and :func:`compare` (``pate_stab.transfer``, ``pate_stab.compare``).

Each takes the data as one object (:class:`Data`: the user's arrays, the user's files, or a bundled
data set) and the settings as a :class:`~pate_stab.run.config.TransferConfig`, a mapping of its keys,
or keywords checked against it (an unknown name is refused, naming it). :func:`transfer` returns a
:class:`~pate_stab.run.transfer.TransferResult`, :func:`compare` a :class:`CompareResult`.

Example (a task generated on the spot; any tensors or NumPy arrays will do)::

    import torch
    from pate_stab import Data, transfer

    g = torch.Generator().manual_seed(0)
    y = torch.randint(0, 3, (9000,), generator=g)
    x = 6.0 * torch.eye(3, 10)[y] + torch.randn(9000, 10, generator=g)
    data = Data.arrays((x[:6000], y[:6000]), x[6000:8000], (x[8000:], y[8000:]), classes=3)
    result = transfer(data, num_teachers=300, num_queries=100, epsilon=8.0, run_name="mine")
    result.student.predict(x[8000:])   # the student (publishable)
    result.labels, result.index        # the released labels and the pool points they label
    result.report["student"]["test_accuracy"]

The four steps, for a user who wants to swap one (:func:`pate_stab.run.transfer.transfer_result` runs
them in this order): :func:`~pate_stab.run.prepare.prepare` (data, partition, teachers; pass
``data=``), :func:`~pate_stab.run.release.release_labels` (one aggregator through the run's
ledger), :func:`~pate_stab.run.student.fit_student` (post-processing), and
:func:`~pate_stab.run.transfer.evaluate_and_report`.

A run lives in ``<checkpoints_dir>/<run_name>/``; calling again with the same run name resumes it
(its teachers and recorded releases are reused), so give new data a new run name. Arrays are
checked when :meth:`Data.arrays` is called (:func:`pate_stab.data.own.own_data`): bad input raises
:class:`~pate_stab.data.own.InputDataError` before anything is trained or spent.

The names of the previous release, ``transfer_arrays``, ``compare_arrays`` and ``pate_stab.run_transfer``,
still work for this release and warn (``DeprecationWarning``); they call the pair.

The module imports the pipeline on call only, so that ``pate_stab.Data`` loads no training code.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pate_stab.data.own import OwnData, own_data

if TYPE_CHECKING:
    from pate_stab.aggregation.plan import RunPlan
    from pate_stab.run.config import TransferConfig
    from pate_stab.run.student_file import PublishedStudent
    from pate_stab.run.transfer import TransferResult

__all__ = ["CompareResult", "Data", "DataKind", "compare", "run_config", "transfer"]

DataKind = Literal["arrays", "files", "bundled"]
# the data section's settings that say which data a run reads: set by a Data, never by a keyword beside it
_SOURCE_KEYS = (
    "dataset",
    "data_dir",
    "download",
    "private",
    "public",
    "evaluation",
    "schema",
    "classes",
    "image_shape",
    "pool_labels",
    "encoding",
)
_OWN = ("files", "arrays")  # the data set names that are not bundled sets


@dataclass(frozen=True)
class Data:
    """What a run reads, as one object: build it with :meth:`arrays`, :meth:`files` or :meth:`bundled`.

    Attributes:
        kind: ``"arrays"`` (checked arrays in memory), ``"files"`` (paths the own-data loader reads when
            the run starts, :func:`pate_stab.data.own.load_files`) or ``"bundled"`` (a data set the
            toolkit knows: ``synthetic``, ``mnist``, ``adult``, …).
        settings: the configuration's data settings this source sets (``dataset`` and, for files, the
            paths; recorded in the run's ``config.json`` as from the command line).
        own: the checked arrays (kind ``"arrays"`` only).
    """

    kind: DataKind
    settings: Mapping[str, Any]
    own: OwnData | None = field(default=None, repr=False)

    @classmethod
    def arrays(
        cls,
        private: tuple[Any, Any] | OwnData,
        public: Any = None,
        evaluation: tuple[Any, Any] | None = None,
        *,
        classes: int | Sequence[str] | None = None,
        public_y: Any = None,
        private_ids: Any = None,
    ) -> Data:
        """The user's arrays (tensors or NumPy), checked now (:func:`pate_stab.data.own.own_data`).

        Args:
            private: (x, y) — inputs (n, features...) and integer labels in [0, C); or an
                :class:`~pate_stab.data.own.OwnData` (e.g. from :func:`~pate_stab.data.own.load_files`),
                which then carries every set (give nothing else).
            public: the public pool's inputs, no labels.
            evaluation: (x, y), optional; the evaluation figures are None without it.
            classes: C or the class names (default: read from the evaluation labels, never the private ones).
            public_y: the pool's labels, for reporting only.
            private_ids: distinct record ids (integers or strings), for ``partition_key="record_id"``;
                private, used as partition keys only.

        Raises:
            InputDataError: the arrays do not fit (nothing is trained or spent).
            ValueError: an :class:`OwnData` with other sets beside it.
        """
        if isinstance(private, OwnData):
            given = {
                "public": public,
                "evaluation": evaluation,
                "classes": classes,
                "public_y": public_y,
                "private_ids": private_ids,
            }
            extra = [name for name, value in given.items() if value is not None]
            if extra:
                raise ValueError(f"Data.arrays: an OwnData carries every set; got {', '.join(extra)} beside it")
            return cls("arrays", {"dataset": "arrays"}, private)
        if public is None:
            raise ValueError("Data.arrays needs the public pool's inputs (public=)")
        own = own_data(private, public, evaluation, classes=classes, public_y=public_y, private_ids=private_ids)
        return cls("arrays", {"dataset": "arrays"}, own)

    @classmethod
    def files(
        cls,
        private: str | Path,
        public: str | Path,
        evaluation: str | Path | None = None,
        *,
        schema: str | Path | None = None,
        classes: int | Sequence[str] | None = None,
        image_shape: Sequence[int] | None = None,
        pool_labels: bool = False,
        encoding: str | None = None,
    ) -> Data:
        """The user's files, read and checked when the run starts (``dataset: files``;
        :func:`pate_stab.data.own.load_files`, whose arguments these are; docs/own_data.md).

        ``private``, ``public``, ``evaluation``: paths of one kind (``.npz`` / ``.pt`` / ``.npy``, ``.csv``
        with ``schema``, or image folders)."""
        settings: dict[str, Any] = {
            "dataset": "files",
            "private": str(private),
            "public": str(public),
            "evaluation": None if evaluation is None else str(evaluation),
            "schema": None if schema is None else str(schema),
            "classes": classes if classes is None or isinstance(classes, int) else tuple(str(c) for c in classes),
            "image_shape": None if image_shape is None else tuple(image_shape),
            "pool_labels": pool_labels,
            "encoding": encoding,
        }
        return cls("files", settings)

    @classmethod
    def bundled(cls, name: str, *, data_dir: str | Path | None = None, download: bool = False) -> Data:
        """A data set the toolkit knows (``synthetic``, ``mnist``, ``fashion_mnist``, ``svhn``, ``cifar10``,
        ``adult``), read from ``data_dir`` (downloaded there with ``download=True``); the synthetic task's
        sizes are settings of the configuration (``num_private``, …).

        Raises:
            ValueError: an unknown name (naming the known ones).
        """
        from pate_stab.run.config import DATASETS

        known = [d for d in DATASETS if d not in _OWN]
        if name not in known:
            raise ValueError(
                f"unknown bundled data set {name!r}; choose from {', '.join(known)} (or use "
                "Data.arrays / Data.files for your own data)"
            )
        settings: dict[str, Any] = {"dataset": name}
        if data_dir is not None:
            settings["data_dir"] = str(data_dir)
        if download:
            settings["download"] = True
        return cls("bundled", settings)


def _as_data(data: Data | str) -> Data:
    if isinstance(data, Data):
        return data
    if isinstance(data, str):
        return Data.bundled(data)
    raise TypeError(
        f"data must be a Data (Data.arrays, Data.files, Data.bundled) or a bundled data set's name, got "
        f"{type(data).__name__}"
    )


def run_config(
    data: Data | str, config: TransferConfig | Mapping[str, Any] | None = None, **settings: Any
) -> TransferConfig:
    """The run's configuration: ``config``'s settings (a :class:`TransferConfig` or a mapping of its keys;
    default: the defaults), then ``settings`` (flat names, or sections as mappings or section objects), then
    the data settings of ``data`` (which decides what the run reads).

    Raises:
        ValueError: an unknown setting (naming it), a bad value, or a keyword that names the data
            (``dataset``, a path, …: give it through ``data``).
        TypeError: ``config`` is neither a TransferConfig nor a mapping.
    """
    from pate_stab.run.config import SECTIONS, TransferConfig, flat_settings

    source = _as_data(data)
    if config is None:
        base: dict[str, Any] = {}
    elif isinstance(config, TransferConfig):
        base = config.to_dict()
    elif isinstance(config, Mapping):
        base = flat_settings(config)
    else:
        raise TypeError(f"config must be a TransferConfig or a mapping of its keys, got {type(config).__name__}")
    given = flat_settings(settings)
    for mapping in (base, given):
        for name in SECTIONS:  # a section object: each of its settings replaces config's
            if name in mapping:
                mapping.update(mapping.pop(name).to_dict())
    named = [k for k in _SOURCE_KEYS if k in given]
    if named:
        raise ValueError(
            f"{', '.join(named)} name the data: give them through data (Data.arrays, Data.files, "
            "Data.bundled), not as keywords"
        )
    merged = {**base, **given, **source.settings}
    for key in ("teacher_hidden", "teacher_channels", "student_hidden", "student_channels"):
        if isinstance(merged.get(key), list):
            merged[key] = tuple(merged[key])
    return TransferConfig.from_dict(merged)


def transfer(
    data: Data | str, config: TransferConfig | Mapping[str, Any] | None = None, **settings: Any
) -> TransferResult:
    """Teachers on the private set, a private release on the public pool, a student; or one direct learner.

    Args:
        data: a :class:`Data` (:meth:`Data.arrays`, :meth:`Data.files`, :meth:`Data.bundled`), or a
            bundled data set's name.
        config, settings: the run's settings (:func:`run_config`): ``epsilon``, ``num_teachers``,
            ``aggregator``, ``run_name``, …

    Returns:
        :class:`~pate_stab.run.transfer.TransferResult` (``student``, ``labels``, ``index``, ``report``).
        With a direct learner as ``aggregator`` (``dpsgd-linear``, …) its model is the release: ``release``
        is None and ``report["row"]`` is its row.

    Raises:
        InputDataError: own data that does not fit (before anything is trained or spent).
        BudgetTooSmallError, ValueError: as :func:`~pate_stab.run.transfer.run_transfer`; ``stop_after``
            is refused (:func:`pate_stab.run.transfer.transfer_result` stops early).
    """
    from pate_stab.run.transfer import TransferResult, transfer_result

    source = _as_data(data)
    cfg = run_config(source, config, **settings)
    if cfg.execution.stop_after is not None:
        raise ValueError("transfer runs to the end; use pate_stab.run.transfer.transfer_result for stop_after")
    result = transfer_result(cfg, data=source.own)
    if not isinstance(result, TransferResult):  # pragma: no cover - stop_after is refused above
        raise RuntimeError(f"the run stopped early: {result}")
    return result


class _Students(Mapping[str, "PublishedStudent"]):
    """A compare run's students by name (``gnmax_eps8_r0``), each loaded from its file on first use."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self.files = dict(files)
        self._loaded: dict[str, PublishedStudent] = {}

    def __getitem__(self, name: str) -> PublishedStudent:
        if name not in self.files:
            raise KeyError(f"no student {name!r} in this compare run; it has: {', '.join(self.files) or 'none'}")
        if name not in self._loaded:
            from pate_stab.run.student_file import load_student

            self._loaded[name] = load_student(self.files[name])
        return self._loaded[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.files)

    def __len__(self) -> int:
        return len(self.files)

    def __repr__(self) -> str:
        return f"<students: {', '.join(self.files)}>"


@dataclass(frozen=True)
class CompareResult:
    """A finished compare: every row's release at every ε, with a student for each.

    Attributes:
        report: ``compare.json`` (published): the rows, the total privacy cost, the ledger, the files.
        table: ``compare.txt``, the table as printed.
        students: each row's published student by name (``gnmax_eps8_r0``: aggregator, ε, repeat), a
            :class:`~pate_stab.run.student_file.PublishedStudent` loaded from ``students/`` on first use.
        private: ``private_compare.json`` (mode 0600): what no mechanism paid for (teacher accuracy, the
            private size, wall times). Never publish it.
        run_dir: the run folder.
    """

    report: dict[str, Any]
    table: str
    students: Mapping[str, PublishedStudent]
    private: dict[str, Any] = field(repr=False)
    run_dir: Path

    @property
    def rows(self) -> list[dict[str, Any]]:
        """The table's rows (``report["rows"]``)."""
        return list(self.report["rows"])

    @classmethod
    def from_output(cls, out: Mapping[str, Any], run_dir: Path) -> CompareResult:
        """From :func:`~pate_stab.run.compare.run_compare`'s dict (``compare.json`` with ``table`` and ``private``)."""
        report = {k: v for k, v in out.items() if k not in ("table", "private")}
        files = {
            Path(r["student_file"]).stem: run_dir / r["student_file"] for r in report["rows"] if r.get("student_file")
        }
        return cls(report, str(out["table"]), _Students(files), dict(out["private"]), run_dir)


def compare(
    data: Data | str,
    config: TransferConfig | Mapping[str, Any] | None = None,
    *,
    epsilons: Sequence[float] | None = None,
    aggregators: Sequence[str] | None = None,
    repeats: int = 1,
    direct: Sequence[str] = (),
    **settings: Any,
) -> CompareResult:
    """Every aggregator (and the named direct learners) on the same teachers, one ledger
    (:func:`~pate_stab.run.compare.run_compare`); ``compare.json``, ``compare.txt``, ``compare.png`` in the run folder.

    Args:
        data, config, settings: as :func:`transfer`.
        epsilons: the target ε values (default: the configuration's ``epsilon``).
        aggregators: the aggregators (default: every one the task allows).
        repeats: releases per (aggregator, ε), each its own spend.
        direct: direct private learners as extra rows (:mod:`pate_stab.run.direct`).
    """
    from pate_stab.run.compare import run_compare

    source = _as_data(data)
    cfg = run_config(source, config, **settings)
    eps = [cfg.release.epsilon] if epsilons is None else list(epsilons)
    out = run_compare(cfg, epsilons=eps, aggregators=aggregators, repeats=repeats, data=source.own, direct=direct)
    return CompareResult.from_output(out, cfg.run_dir)


# ---- the previous release's names: thin aliases that warn ---------------------------------------------------------


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"{old} is deprecated and will be removed in the next release: use {new}", DeprecationWarning, stacklevel=3
    )


def arrays_config(config: TransferConfig | None = None, **settings: Any) -> TransferConfig:
    """A ``dataset="arrays"`` configuration: ``config``'s settings (default: the defaults) with ``settings``."""
    return run_config(Data("arrays", {"dataset": "arrays"}), config, **settings)


def _arrays(private: tuple[Any, Any] | OwnData, public: Any, evaluation: tuple[Any, Any] | None, **keys: Any) -> Data:
    if isinstance(private, OwnData):
        return Data.arrays(private)
    return Data.arrays(private, public, evaluation, **keys)


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
    """Deprecated: ``transfer(Data.arrays(private, public, evaluation, ...), config, **settings)``."""
    _deprecated("transfer_arrays", "pate_stab.transfer(pate_stab.Data.arrays(private, public, evaluation), ...)")
    from pate_stab.run.config import DIRECT_LEARNER_NAMES

    cfg = arrays_config(config, **settings)
    if cfg.release.aggregator in DIRECT_LEARNER_NAMES:  # as before: no teachers, no released labels
        raise ValueError(
            f"{cfg.release.aggregator!r} is a direct learner (no teachers, no released labels): use "
            "pate_stab.transfer(data, ...) or pate_stab.compare(data, ..., direct=...)"
        )
    data = _arrays(private, public, evaluation, classes=classes, public_y=public_y, private_ids=private_ids)
    return transfer(data, cfg)


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
    """Deprecated: ``compare(Data.arrays(private, public, evaluation, ...), config, epsilons=...)``; returns the
    previous dict (``compare.json`` with ``table`` and ``private``)."""
    _deprecated("compare_arrays", "pate_stab.compare(pate_stab.Data.arrays(private, public, evaluation), ...)")
    from pate_stab.run.compare import run_compare

    data = _arrays(private, public, evaluation, classes=classes, public_y=public_y, private_ids=private_ids)
    cfg = run_config(data, config, **settings)
    return run_compare(cfg, epsilons=epsilons, aggregators=aggregators, repeats=repeats, data=data.own, direct=direct)


def run_transfer(
    config: TransferConfig, *, data: OwnData | None = None, on_plan: Callable[[RunPlan], None] | None = None
) -> dict[str, Any]:
    """Deprecated as ``pate_stab.run_transfer``: ``pate_stab.transfer(data, config).report``
    (:func:`pate_stab.run.transfer.run_transfer`, the pipeline's, is unchanged)."""
    _deprecated("pate_stab.run_transfer", "pate_stab.transfer(data, config) (its .report)")
    from pate_stab.run.transfer import run_transfer as pipeline_run_transfer

    return pipeline_run_transfer(config, data=data, on_plan=on_plan)
