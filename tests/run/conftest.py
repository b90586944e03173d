"""Fixtures shared by the run tests: trained teachers once per test session, accounting computed once per event.

``trained_teachers`` (session): ``trained_teachers.seed(config)`` puts into ``config.run_dir`` a copy of the
``teachers/`` folder of a run with the same data, partition and teacher settings, trained once per session per
such settings (any other setting — aggregator, ε, m, the student, the run's name and folder — may differ). The
pipeline's own resume rule (:func:`pate_stab.run.prepare.prepare`: a ``teachers/`` folder holding ``weights.pt``
and ``config.json`` is reloaded) then reuses them: nothing is trained again. Use it wherever the teachers are not
what a test checks (reports, ledgers, replay, budgets, published files, the student); a test that checks training
itself (reproducibility, resume after an interruption, retraining refused) trains its own. A test that changes
the data a run reads (a patched ``_raw_splits``, a neighbour) must train its own too: the cache is keyed on the
configuration, not on the data.

``STANDARD``: the settings of the standard small ensemble (300 MLP teachers on 6,000 synthetic records, as
``tests/run/test_transfer.small``); ``standard_config(tmp_path, ...)`` builds a run config from them.

The accounting memo (autouse for every test under tests/run): :func:`accountant_epsilon`, the baselines'
:func:`calibrate_scale` and DP-SGD's :func:`dpsgd_noise_multiplier` and :func:`dpsgd_epsilon` are deterministic
functions of hashable arguments (frozen event dataclasses, floats, strings); the accountants behind them
(dp-accounting's PLD composition, Opacus's RDP search) are the costliest step of a small run, far above training
(a seeded GNMax calibration at ε = 8 takes tens of seconds, 300 small teachers a second or two). The memo
computes each distinct call once per test session, with the code under test, and returns the same float for a
repeated call; an argument it cannot hash is computed every time. Under pytest-xdist the workers of one run
share what they have computed (a file a call, named by a digest of the call's exact ``repr``, in the run's
temporary folder). The privacy, aggregation and direct-learner tests (tests/privacy, tests/aggregation,
tests/direct) run without it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

import pate_stab.aggregation.baselines as baselines
import pate_stab.aggregation.pate_aggregator as pate_aggregator
import pate_stab.direct.dpsgd as dpsgd
import pate_stab.direct.learners as direct_learners
import pate_stab.direct.opacus_engine as opacus_engine
import pate_stab.privacy.accounting.composition as composition
from pate_stab.run import TransferConfig
from pate_stab.run.prepare import prepare

# ------------------------------------------------------------------------------------------- accounting memo

_EPSILONS: dict[tuple, float] = {}
_SCALES: dict[tuple, float] = {}
_accountant_epsilon = composition.accountant_epsilon
_calibrate_scale = composition.calibrate_scale
_dpsgd_noise_multiplier = dpsgd.dpsgd_noise_multiplier
_dpsgd_epsilon = dpsgd.dpsgd_epsilon
_DPSGD: dict[tuple, float] = {}


_SHARED: list[Path] = []  # the folder the workers of this test run share (set by _accounting_memo)


def _shared_folder() -> Path | None:
    """Under pytest-xdist, a folder the workers of one test run share, so that a call one worker has computed
    is not computed again by the other; None in a single process."""
    return _SHARED[0] if _SHARED else None


def _shared_name(key: tuple) -> str | None:
    """The file of ``key`` in the shared folder: a digest of its ``repr`` (frozen dataclasses, dp-accounting's
    events, floats and strings print every field exactly); None where the ``repr`` is not a faithful one (an
    object's address, or a shortened array)."""
    text = repr(key)
    if " at 0x" in text or "..." in text:
        return None
    return hashlib.sha256(text.encode()).hexdigest()


def _memo(table: dict[tuple, float], key: tuple, compute: Callable[[], float]) -> float:
    try:
        return table[key]
    except KeyError:
        pass
    except TypeError:  # unhashable: not memoised
        return compute()
    folder, name = _shared_folder(), _shared_name(key)
    if folder is not None and name is not None:
        try:
            table[key] = value = float((folder / name).read_text())
            return value
        except (OSError, ValueError):  # not computed yet (or being written): compute it here
            pass
    table[key] = value = compute()
    if folder is not None and name is not None and type(value) is float:
        partial = folder / f"{name}.{os.getpid()}"
        partial.write_text(repr(value))  # a float's repr reads back to the same float
        os.replace(partial, folder / name)
    return value


def _memo_accountant_epsilon(event: Any, *, delta: float, accountant: str) -> float:
    return _memo(_EPSILONS, (event, delta, accountant),
                 lambda: _accountant_epsilon(event, delta=delta, accountant=accountant))  # fmt: skip


def _memo_dpsgd_noise_multiplier(*, epsilon: float, delta: float, sample_rate: float, steps: int) -> float:
    def compute() -> float:
        return _dpsgd_noise_multiplier(epsilon=epsilon, delta=delta, sample_rate=sample_rate, steps=steps)

    return _memo(_DPSGD, ("sigma", epsilon, delta, sample_rate, steps), compute)


def _memo_dpsgd_epsilon(*, noise_multiplier: float, sample_rate: float, steps: int, delta: float) -> float:
    return _memo(_DPSGD, ("epsilon", noise_multiplier, sample_rate, steps, delta),
                 lambda: _dpsgd_epsilon(noise_multiplier=noise_multiplier, sample_rate=sample_rate, steps=steps,
                                        delta=delta))  # fmt: skip


def _memo_calibrate_scale(
    make_event: Callable[[float], Any], *, epsilon: float, delta: float, guess: float, accountant: str
) -> float:
    def call() -> float:
        return _calibrate_scale(make_event, epsilon=epsilon, delta=delta, guess=guess, accountant=accountant)

    try:  # the event family, identified by its code and its events at two scales
        code = make_event.__code__
        family = (code.co_filename, code.co_firstlineno, code.co_qualname)
        key = (family, make_event(guess), make_event(2.0 * guess), epsilon, delta, guess, accountant)
        hash(key)
    except (AttributeError, TypeError, ValueError):
        return call()
    return _memo(_SCALES, key, call)


def memoised_accounting(mp: pytest.MonkeyPatch) -> None:
    """Install the memo on ``mp`` (every module that holds its own reference to the two functions)."""
    mp.setattr(composition, "accountant_epsilon", _memo_accountant_epsilon)
    mp.setattr(pate_aggregator, "accountant_epsilon", _memo_accountant_epsilon)
    mp.setattr(baselines, "calibrate_scale", _memo_calibrate_scale)
    for module in (dpsgd, opacus_engine, direct_learners):
        mp.setattr(module, "dpsgd_noise_multiplier", _memo_dpsgd_noise_multiplier)
        mp.setattr(module, "dpsgd_epsilon", _memo_dpsgd_epsilon)


@pytest.fixture(scope="package", autouse=True)
def _accounting_memo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    if os.environ.get("PYTEST_XDIST_WORKER") and not _SHARED:
        # a worker's base folder is popen-gwN inside the test run's, which pytest removes with its old runs
        _SHARED.append(tmp_path_factory.getbasetemp().parent / "accounting_memo")
        _SHARED[0].mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        memoised_accounting(mp)
        yield


# --------------------------------------------------------------------------------------------------- teachers

STANDARD: dict[str, Any] = dict(
    num_teachers=300, num_private=6000, num_public=400, num_eval=300, separation=6.0, teacher_epochs=5,
    teacher_lr=0.05, accelerator="cpu",
)  # fmt: skip
"""The standard small ensemble: 300 MLP teachers on 6,000 synthetic records (about a second to train alone)."""


def standard_config(tmp_path: Path | str, name: str = "run", **kw: Any) -> TransferConfig:
    """A run on the standard ensemble's settings (``kw`` overrides any of them), seeded noise by default."""
    settings: dict[str, Any] = dict(
        run_name=name, checkpoints_dir=str(tmp_path), num_queries=100, epsilon=8.0, max_unstable=10,
        student_epochs=3, releaser_noise="seeded", **STANDARD,
    )  # fmt: skip
    settings.update(kw)
    return TransferConfig(**settings)


# settings that are read only after the teachers exist (release, student, report, bookkeeping): a run that
# differs from another only in these has the same data, partition and teachers
_AFTER_TEACHERS = frozenset(
    {
        "run_name", "checkpoints_dir", "progress", "stop_after", "allow_unanswerable", "allow_empty_student",
        "finish_from_ledger", "budget_epsilon", "budget_delta", "aggregator", "epsilon", "delta", "max_unstable",
        "num_queries", "calibration", "releaser_noise", "confident_threshold", "sigma_ratio", "gamma", "dd_order",
        "dd_sigma", "query_selection", "selection_round_size", "selection_coverage", "selection_representatives",
        "spread_threshold", "student_model", "student_hidden", "student_channels", "student_epochs",
        "student_batch_size", "student_lr", "student_method", "student_select", "student_augment", "bottom",
        "pseudo_label_rounds", "pseudo_label_threshold", "rounds", "round_budget_shares", "round_features",
        "dpsgd_batch_size", "dpsgd_epochs", "dpsgd_lr", "dpsgd_cnn_epochs", "fixmatch_preset", "fixmatch_steps",
    }
)  # fmt: skip


def teachers_key(config: TransferConfig) -> tuple:
    """What the trained teachers of ``config`` depend on: every setting not in :data:`_AFTER_TEACHERS`."""
    return tuple(sorted((k, repr(v)) for k, v in config.to_dict().items() if k not in _AFTER_TEACHERS))


class TrainedTeachers:
    """Teachers trained once per settings (:func:`teachers_key`) in a session folder, copied into run folders."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.folders: dict[tuple, Path] = {}
        self.trained = 0  # how many ensembles this session trained (for the fixture's own test)

    def folder(self, config: TransferConfig) -> Path:
        """The session's ``teachers/`` folder for ``config``'s settings (trained on first use)."""
        key = teachers_key(config)
        if key not in self.folders:
            if config.teachers.teacher_model == "propagate":
                raise ValueError("propagation teachers are not trained (rebuilt on every run): nothing to reuse")
            cache = replace(config, run_name=f"teachers-{len(self.folders)}", checkpoints_dir=str(self.root),
                            stop_after="teachers", progress=False)  # fmt: skip
            prep = prepare(cache, check_budget=False, with_teachers=True)
            assert not prep.resumed_teachers and (prep.run_dir / "teachers" / "weights.pt").is_file()
            self.trained += 1
            self.folders[key] = prep.run_dir / "teachers"
        return self.folders[key]

    def seed(self, config: TransferConfig) -> TransferConfig:
        """Copy the teachers for ``config`` into its (new) run folder; returns ``config``."""
        target = config.run_dir / "teachers"
        if target.exists():
            raise FileExistsError(f"{target} exists: seed a new run folder")
        source = self.folder(config)
        config.run_dir.mkdir(parents=True, exist_ok=True)
        shutil.copytree(source, target)  # modes kept: the folder 0700, its files 0600
        return config


@pytest.fixture(scope="session")
def trained_teachers(tmp_path_factory: pytest.TempPathFactory) -> TrainedTeachers:
    """Teachers trained once per session per settings; ``trained_teachers.seed(config)`` (module docstring)."""
    return TrainedTeachers(tmp_path_factory.mktemp("session-teachers"))
