"""Working state derived from private data (teachers, checkpoints) is owner-only, and the report says so.

DESIGN.md fact 14: teacher weights and Lightning checkpoints are models of the private data that no
mechanism paid for; every file under ``teachers/`` is mode 0600 in folders of mode 0700, whatever the
process's umask, and a run folder made before that is tightened when it is reopened.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from pate_stab.models import ModelSpec, init_stacked_parameters
from pate_stab.privacy.ledger.private_files import owner_only_umask, private_folder, tighten_private_tree
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.teachers import TeacherEnsemble


def _modes(root: Path) -> dict[str, int]:
    """Permission bits of ``root`` and of everything under it, by path relative to ``root``."""
    out = {".": stat.S_IMODE(root.stat().st_mode)}
    for path in root.rglob("*"):
        out[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return out


def _wide_open(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        os.chmod(path, 0o755 if path.is_dir() else 0o644)


def _assert_owner_only(root: Path) -> None:
    modes = _modes(root)
    wrong = {p: oct(m) for p, m in modes.items() if m != (0o700 if (root / p).is_dir() else 0o600)}
    assert not wrong, f"not owner-only under {root}: {wrong}"


@pytest.fixture
def usual_umask():
    """The common umask 022 (files 0644, folders 0755 unless the code asks for less), restored after."""
    previous = os.umask(0o022)
    try:
        yield 0o022
    finally:
        os.umask(previous)


def _tiny(tmp_path: Path) -> TransferConfig:
    return TransferConfig(
        run_name="priv", checkpoints_dir=str(tmp_path), num_teachers=20, num_private=600, num_public=200,
        num_eval=100, separation=6.0, num_queries=30, epsilon=8.0, max_unstable=10, teacher_epochs=2,
        student_epochs=1, accelerator="cpu", releaser_noise="seeded", aggregator="gnmax",
    )  # fmt: skip


def test_transfer_writes_teachers_owner_only_and_lists_them_private(tmp_path, usual_umask):
    cfg = _tiny(tmp_path)
    report = run_transfer(cfg)
    teachers = cfg.run_dir / "teachers"
    assert (teachers / "weights.pt").is_file() and list((teachers / "lightning").glob("*.ckpt"))
    _assert_owner_only(teachers)
    assert os.umask(usual_umask) == usual_umask  # the process's umask is what it was
    files = report["files"]
    assert "teachers/" in files["private"] and "teachers/" not in files["published"]
    assert "0700" in files["note"] and "teachers/" in files["note"]
    published = json.loads((cfg.run_dir / "report.json").read_text())["files"]
    assert published == files
    # a run folder made before its teachers were private is tightened when it is reopened
    _wide_open(teachers)
    run_transfer(cfg)
    _assert_owner_only(teachers)


def test_saved_ensemble_is_owner_only(tmp_path, usual_umask):
    spec = ModelSpec("mlp", (4,), 3, hidden=(5,))
    folder = TeacherEnsemble(spec, init_stacked_parameters(spec, list(range(4)))).save(tmp_path / "t")
    _assert_owner_only(folder)
    assert TeacherEnsemble.load(folder).num_teachers == 4


def test_private_folder_tree_and_umask_helpers(tmp_path, usual_umask):
    root = tmp_path / "state"
    (root / "a" / "b").mkdir(parents=True)
    (root / "a" / "b" / "f.ckpt").write_bytes(b"x")
    (root / "g").write_bytes(b"y")
    _wide_open(root)
    tighten_private_tree(root)
    _assert_owner_only(root)
    made = private_folder(tmp_path / "new" / "deep")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "new").stat().st_mode) == 0o755  # a parent keeps the default mode
    with owner_only_umask():
        (tmp_path / "inside").write_bytes(b"z")
    (tmp_path / "after").write_bytes(b"z")
    assert stat.S_IMODE((tmp_path / "inside").stat().st_mode) == 0o600
    assert stat.S_IMODE((tmp_path / "after").stat().st_mode) == 0o644
