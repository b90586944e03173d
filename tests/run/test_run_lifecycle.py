"""A run folder's life: finishing a release that a SIGKILL interrupted, one writer per folder, refusals
that come early and do not block a corrected rerun.

* A release killed after two of its four calls were recorded: a plain rerun is refused and says how
  to finish; ``finish_from_ledger`` trains the student on exactly the recorded outputs, draws no
  noise, leaves the ledger's bytes as they were and marks the report partial.
* A second run in a folder whose lock another process holds is refused at once, before it reads or
  writes anything; published files are replaced whole (a reader holding the old file keeps it).
* More teachers than private records is refused before anything is trained or written; a run
  refused after ``config.json`` was written, with nothing trained or spent, accepts a corrected
  configuration in the same folder.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from pate_stab.aggregation.base import LedgerRelease
from pate_stab.errors import PateStabError, ReplayedSpendError
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.run import run_transfer
from pate_stab.run.transfer import transfer_result
from tests.fork_worker import ROOT
from tests.run.interrupted_release_worker import lifecycle_config, lifecycle_data

WORKER = Path(__file__).with_name("interrupted_release_worker.py")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
            "OMP_NUM_THREADS": "1"}  # fmt: skip


# --------------------------------------------------------------------------- an interrupted release


@pytest.fixture(scope="module")
def killed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run whose release was SIGKILLed while recording its third call (calls 0 and 1 are recorded)."""
    folder = tmp_path_factory.mktemp("killed")
    done = subprocess.run([sys.executable, str(WORKER), str(folder), "run", "2"], cwd=ROOT, env=_env())
    assert done.returncode == -signal.SIGKILL, done  # killed as planned, in the middle of the release
    return folder


@pytest.fixture
def interrupted(killed: Path, tmp_path: Path) -> Path:
    """A fresh copy of the killed run's checkpoints folder (its run.lock stays behind, unlocked)."""
    shutil.copytree(killed, tmp_path / "ck")
    return tmp_path / "ck"


def _recorded(run_dir: Path) -> tuple[list[dict], bool]:
    """The outputs recorded for the run's one spend, and whether it has a result."""
    with PrivacyLedger(run_dir / "ledger.jsonl", run_id="run", budget_epsilon=8.0, budget_delta=1e-5) as ledger:
        (entry,) = ledger.entries()
        return list(entry.outputs), entry.has_result


def test_a_killed_release_is_refused_on_rerun_and_the_error_names_the_option(interrupted: Path) -> None:
    cfg = lifecycle_config(str(interrupted), "run")
    outputs, has_result = _recorded(cfg.run_dir)
    assert len(outputs) == 2 and not has_result  # paid for; two calls' outputs on disk
    before = (cfg.run_dir / "ledger.jsonl").read_bytes()
    with pytest.raises(ReplayedSpendError, match="--finish-from-ledger"):
        run_transfer(cfg, data=lifecycle_data())
    assert (cfg.run_dir / "ledger.jsonl").read_bytes() == before
    assert not (cfg.run_dir / "report.json").exists()


def test_finish_from_ledger_trains_on_exactly_the_recorded_labels_without_spending(
    interrupted: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = lifecycle_config(str(interrupted), "run")
    outputs, _ = _recorded(cfg.run_dir)
    ledger_path = cfg.run_dir / "ledger.jsonl"
    before = ledger_path.read_bytes()

    real_run = LedgerRelease.run

    def never_draw(self, inputs, draw, **kwargs):  # type: ignore[no-untyped-def]
        def refuse():  # type: ignore[no-untyped-def]
            raise AssertionError("noise drawn while finishing from the ledger")

        return real_run(self, inputs, refuse, **kwargs)

    monkeypatch.setattr(LedgerRelease, "run", never_draw)
    result = transfer_result(replace(cfg, finish_from_ledger=True), data=lifecycle_data())
    assert not isinstance(result, dict)
    assert ledger_path.read_bytes() == before  # no spend, no output, no result appended

    recorded_labels = [v for out in outputs for v in out["labels"]]
    assert result.labels.tolist() == recorded_labels  # the recorded outputs, call by call, nothing else
    from pate_stab.aggregation.base import query_ids_digest

    sizes = [len(out["labels"]) for out in outputs]
    parts = torch.split(result.index, sizes)
    assert [query_ids_digest(p) for p in parts] == [out["queries"] for out in outputs]  # the recorded queries

    report = json.loads((cfg.run_dir / "report.json").read_text())
    assert report == result.report
    assert report["status"] == "partial"
    assert report["partial_release"]["interrupted"] is True
    assert report["partial_release"]["recorded_calls"] == 2
    assert report["partial_release"]["queries_released"] == len(recorded_labels)
    answered = sum(v != -1 for v in recorded_labels)
    q = report["queries"]
    assert q["seen"] == len(recorded_labels) and q["answered"] == answered
    assert q["not_asked"] == cfg.num_queries - len(recorded_labels)
    assert report["student"]["trained_on"] == answered  # exactly the recorded labels
    assert (cfg.run_dir / "student.pt").is_file()
    assert report["data_dependent"] is None  # nothing is drawn for a partial release
    # finishing is not part of the run's identity, and finishing again gives the same release
    again = transfer_result(replace(cfg, finish_from_ledger=True), data=lifecycle_data())
    assert not isinstance(again, dict) and again.labels.tolist() == recorded_labels
    assert ledger_path.read_bytes() == before
    # the command line prints the report and says that the release is partial
    import pate_stab.run.transfer as run_transfer_module
    from pate_stab.cli.commands import main

    monkeypatch.setattr(run_transfer_module, "run_transfer", lambda config, **kw: report)
    assert main(["transfer", "--finish-from-ledger", "--checkpoints-dir", str(interrupted), "--run-name", "run"]) == 0
    printed = capsys.readouterr().out
    assert f"PARTIAL release, finished from the ledger: {len(recorded_labels)} queries from 2 recorded" in printed
    from pate_stab.run.release import PARTIAL_RELEASE_NOTE

    assert report["partial_release"]["note"] == PARTIAL_RELEASE_NOTE and "(README: Run the main job)." in printed


def test_finish_from_ledger_with_nothing_recorded_is_refused(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "fresh", finish_from_ledger=True)
    with pytest.raises(ValueError, match="no recorded outputs to finish from"):
        run_transfer(cfg, data=lifecycle_data())
    ledger = cfg.run_dir / "ledger.jsonl"
    assert not ledger.exists() or all(json.loads(x)["kind"] == "header" for x in ledger.read_text().splitlines())


def test_finish_from_ledger_on_the_command_line() -> None:
    from pate_stab.cli.commands import build_parser
    from pate_stab.cli.config import _config_dict

    parser = build_parser()
    args = parser.parse_args(["transfer", "--finish-from-ledger"])
    assert _config_dict(parser, args, {})["finish_from_ledger"] is True
    args = parser.parse_args(["transfer"])
    assert "finish_from_ledger" not in _config_dict(parser, args, {})


# --------------------------------------------------------------------------- one writer per run folder


_HOLD = (
    "import fcntl, os, sys; os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True); "
    "fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); fcntl.flock(fd, fcntl.LOCK_EX); "
    "print('locked', flush=True); sys.stdin.read()"
)


@contextlib.contextmanager
def _lock_held_by_another_process(lock: Path) -> Iterator[None]:
    """Another process takes ``lock`` (an exclusive flock, as a run does) and holds it for the block."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLD, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              text=True)  # fmt: skip
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait()


@pytest.fixture
def held_lock(tmp_path: Path) -> Iterator[Path]:
    """A finished run whose folder's lock another process holds until the test ends."""
    cfg = lifecycle_config(str(tmp_path), "run", query_selection="first")
    run_transfer(cfg, data=lifecycle_data())
    with _lock_held_by_another_process(cfg.run_dir / "run.lock"):
        yield cfg.run_dir


def test_a_second_run_in_a_locked_folder_is_refused_before_touching_it(held_lock: Path) -> None:
    run_dir = held_lock
    cfg = lifecycle_config(str(run_dir.parent), "run", query_selection="first")
    published = {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()}
    with pytest.raises(PateStabError, match=f"{run_dir} is in use: another run holds its lock"):
        run_transfer(replace(cfg, student_epochs=3), data=lifecycle_data())  # other student settings
    from pate_stab.run.compare import run_compare

    with pytest.raises(PateStabError, match="another run holds its lock"):
        run_compare(cfg, epsilons=[8.0], aggregators=["gnmax"], data=lifecycle_data())
    from pate_stab.run.refit import refit_students

    with pytest.raises(PateStabError, match="another run holds its lock"):
        refit_students(run_dir, aggregators=["gnmax"], epsilons=[8.0], data=lifecycle_data())
    assert {p.name: p.read_bytes() for p in run_dir.iterdir() if p.is_file()} == published  # config.json untouched


def test_a_second_release_into_a_locked_output_folder_is_refused(tmp_path: Path) -> None:
    import numpy as np

    from pate_stab.run.release_votes import release_votes

    votes = tmp_path / "votes.npy"
    np.save(votes, np.random.default_rng(0).integers(0, 3, size=(50, 20)))
    out = tmp_path / "out"
    options = dict(aggregator="gnmax", epsilon=8.0, delta=1e-5, num_classes=3, out_dir=out)
    release_votes(votes, **options)  # type: ignore[arg-type]
    published = {p.name: p.read_bytes() for p in out.iterdir()}
    with _lock_held_by_another_process(out / "run.lock"):
        with pytest.raises(PateStabError, match="another run holds its lock"):
            release_votes(votes, **options)  # type: ignore[arg-type]
    assert {p.name: p.read_bytes() for p in out.iterdir()} == published
    assert release_votes(votes, **options)["reused"] is True  # the lock is free again once its holder is gone


def test_published_files_are_replaced_whole(tmp_path: Path) -> None:
    """A rerun replaces report.json and config.json by renaming a complete new file over them: a
    reader that opened the old file keeps reading all of it (an in-place rewrite would cut it)."""
    cfg = lifecycle_config(str(tmp_path), "run", query_selection="first")
    run_transfer(cfg, data=lifecycle_data())
    names = ("report.json", "config.json", "student.pt")
    old = {name: (cfg.run_dir / name).read_bytes() for name in names}
    readers = {name: open(cfg.run_dir / name, "rb") for name in names}  # noqa: SIM115
    try:
        run_transfer(replace(cfg, student_epochs=3), data=lifecycle_data())  # refits the student only
        for name in names:
            assert readers[name].read() == old[name], name
    finally:
        for f in readers.values():
            f.close()
    assert json.loads((cfg.run_dir / "config.json").read_text())["student_epochs"] == 3
    assert json.loads((cfg.run_dir / "report.json").read_text())["student"]["config"]["epochs"] == 3
    assert not [p for p in cfg.run_dir.iterdir() if p.name.endswith(".tmp")]


# --------------------------------------------------------------------------- early refusals


def test_more_teachers_than_private_records_is_refused_before_anything_is_written(tmp_path: Path) -> None:
    cfg = lifecycle_config(str(tmp_path), "big_k", num_teachers=500, query_selection="first")
    with pytest.raises(ValueError, match="num_teachers=500 exceeds the 400 private records"):
        run_transfer(cfg, data=lifecycle_data(400))
    for name in ("config.json", "ledger.jsonl", "teachers", "report.json", "private_identity.json"):
        assert not (cfg.run_dir / name).exists(), name
    # the corrected rerun in the same folder
    report = run_transfer(replace(cfg, num_teachers=40), data=lifecycle_data(400))
    assert report["status"] == "complete" and report["num_teachers"] == 40


def test_a_refusal_after_config_json_does_not_block_the_corrected_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A refusal that comes after the run folder holds config.json, with nothing trained or spent
    (here: the partition step refuses), leaves the folder open to the corrected configuration; once
    something was spent the folder holds that configuration and another one is refused."""
    import pate_stab.run.prepare as run_prepare

    original = run_prepare.partition_indices

    def refusing(keys: torch.Tensor, num_teachers: int, **kwargs: object) -> list[torch.Tensor]:
        if num_teachers == 40:
            raise ValueError("refused after config.json (test)")
        return original(keys, num_teachers, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(run_prepare, "partition_indices", refusing)
    cfg = lifecycle_config(str(tmp_path), "late", num_teachers=40, query_selection="first")
    with pytest.raises(ValueError, match="refused after config.json"):
        run_transfer(cfg, data=lifecycle_data(400))
    assert (cfg.run_dir / "config.json").is_file()  # written before the refusal
    assert not (cfg.run_dir / "teachers").exists()
    report = run_transfer(replace(cfg, num_teachers=30), data=lifecycle_data(400))
    assert report["status"] == "complete" and report["num_teachers"] == 30
    assert json.loads((cfg.run_dir / "config.json").read_text())["num_teachers"] == 30
    with pytest.raises(ValueError, match="holds a run with another configuration"):
        run_transfer(replace(cfg, num_teachers=20), data=lifecycle_data(400))


def test_dpsgd_without_a_public_size_is_refused_before_config_json(tmp_path: Path) -> None:
    """DP-SGD on own data needs a public size: a configuration-only refusal, before the run folder
    holds anything; the rerun that sets it, in the same folder, runs."""
    cfg = lifecycle_config(str(tmp_path), "dpsgd", aggregator="dpsgd-linear", epsilon=2.0)
    with pytest.raises(ValueError, match="set private_size_hint"):
        run_transfer(cfg, data=lifecycle_data())
    assert not (cfg.run_dir / "config.json").exists()
    with pytest.warns(UserWarning, match="may train badly"):
        report = run_transfer(replace(cfg, private_size_hint=10000), data=lifecycle_data())
    assert report["status"] == "complete" and report["kind"] == "direct"
    assert json.loads((cfg.run_dir / "config.json").read_text())["private_size_hint"] == 10000


def test_a_run_that_finds_no_folder_takes_the_lock_at_its_first_write(tmp_path: Path) -> None:
    """The folder does not exist when the run starts (bad input must leave none behind); another
    process creates and locks it meanwhile: the run is refused at its first write."""
    from pate_stab.run.run_folder import claim_run_folder, run_lock

    folder = tmp_path / "new"
    with run_lock(folder):
        assert not folder.exists()  # nothing created before the run writes
        with _lock_held_by_another_process(folder / "run.lock"):
            with pytest.raises(PateStabError, match="another run holds its lock"):
                claim_run_folder(folder)
        assert claim_run_folder(folder) == folder  # free again: this run takes it
        assert not _another_process_can_lock(folder / "run.lock")
    assert _another_process_can_lock(folder / "run.lock")  # released with the block


def _another_process_can_lock(lock: Path) -> bool:
    """Whether another process can take ``lock`` without waiting."""
    probe = (
        "import fcntl, os, sys; fd = os.open(sys.argv[1], os.O_RDWR)\n"
        "try:\n    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\nexcept BlockingIOError:\n    sys.exit(3)\n"
    )
    return subprocess.run([sys.executable, "-c", probe, str(lock)]).returncode == 0
