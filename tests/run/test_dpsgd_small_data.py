"""DP-SGD on small own data: settable batch size, epochs and learning rate, defaults from the public
size N by a documented rule, and every refusal that needs only the configuration made before any
teacher is trained."""

from __future__ import annotations

import json

import pytest
import torch

import pate_stab.teachers.registry as teacher_registry
from pate_stab import Data, compare
from pate_stab.cli.commands import main
from pate_stab.data.own import own_data
from pate_stab.run.config import TransferConfig

FAST = dict(num_teachers=20, num_queries=20, max_unstable=3, epsilon=8.0, teacher_epochs=2, student_epochs=2,
            accelerator="cpu", progress=False)  # fmt: skip


def _data(n_private: int, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    centres = 4 * torch.randn(3, 6, generator=g)

    def part(m):
        y = torch.randint(0, 3, (m,), generator=g)
        return centres[y] + torch.randn(m, 6, generator=g), y

    (px, py), (ux, _), (ex, ey) = part(n_private), part(300), part(300)
    return own_data((px, py), ux, (ex, ey), classes=3)


def _no_teachers(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("teachers trained before a configuration-only refusal")

    monkeypatch.setattr(teacher_registry, "train_teachers", refuse)


def test_default_batch_size_keeps_tramer_boneh_sampling_rate():
    from pate_stab.direct.dpsgd import default_batch_size
    from pate_stab.direct.registry import dpsgd_settings

    assert default_batch_size(60000) == 8192  # their setting where N is large
    assert [default_batch_size(n) for n in (6000, 1000, 100, 10)] == [1024, 128, 16, 10]
    for n in (500, 6000, 20000, 60000, 10**6):
        assert default_batch_size(n) <= min(n, 8192)
    cfg = TransferConfig(dataset="arrays", private_size_hint=6000)
    assert dpsgd_settings(cfg, "dpsgd-linear").expected_batch_size == 1024
    cfg = TransferConfig(dataset="arrays", private_size_hint=6000, dpsgd_batch_size=256, dpsgd_epochs=3, dpsgd_lr=1.5)
    s = dpsgd_settings(cfg, "dpsgd-linear")
    assert (s.expected_batch_size, s.epochs, s.lr) == (256, 3, 1.5)
    # the CNN keeps its data set's batch (MNIST's 512) where N allows it, else the size rule's
    assert dpsgd_settings(TransferConfig(dataset="mnist"), "dpsgd-cnn").expected_batch_size == 512
    cnn_small = dpsgd_settings(TransferConfig(dataset="arrays", private_size_hint=400), "dpsgd-cnn")
    assert (cnn_small.expected_batch_size, cnn_small.lr) == (64, 0.5)


def test_compare_without_size_hint_is_refused_before_any_teacher(tmp_path, monkeypatch):
    _no_teachers(monkeypatch)
    with pytest.raises(ValueError, match="set private_size_hint"):
        compare(
            Data.arrays(_data(600)),
            epsilons=[4.0],
            aggregators=["gnmax"],
            direct=["dpsgd-linear"],
            checkpoints_dir=str(tmp_path),
            run_name="nohint",
            **FAST,
        )
    assert not (tmp_path / "nohint" / "teachers").exists()


def test_compare_with_a_batch_larger_than_n_is_refused_before_any_teacher(tmp_path, monkeypatch):
    _no_teachers(monkeypatch)
    with pytest.raises(ValueError, match="expected batch size 2048 exceeds the public size N=1000"):
        compare(
            Data.arrays(_data(600)),
            epsilons=[4.0],
            aggregators=["gnmax"],
            direct=["dpsgd-linear"],
            private_size_hint=1000,
            dpsgd_batch_size=2048,
            checkpoints_dir=str(tmp_path),
            run_name="big",
            **FAST,
        )
    assert not (tmp_path / "big" / "teachers").exists()


def test_dpsgd_runs_at_the_honest_size_of_small_data(tmp_path):
    """6,000 private records, N = 6,000 stated: DP-SGD runs with B = 1,024 (it was refused: B = 8,192 > N)."""
    out = compare(
        Data.arrays(_data(6000)),
        epsilons=[2.0],
        aggregators=[],
        direct=["dpsgd-linear"],
        private_size_hint=6000,
        dpsgd_epochs=2,
        checkpoints_dir=str(tmp_path),
        run_name="ok",
        **FAST,
    )
    (row,) = out.rows
    assert row["settings"]["public_size"] == 6000 and row["settings"]["dpsgd"]["expected_batch_size"] == 1024
    assert row["settings"]["sample_rate"] == 1024 / 6000 and row["student_acc"] > 0.8


def test_cli_sets_the_dpsgd_keys(tmp_path, capsys):
    import numpy as np

    d = _data(1200)
    np.savez(tmp_path / "p.npz", x=d.private_x.numpy(), y=d.private_y.numpy())
    np.savez(tmp_path / "u.npz", x=d.public_x.numpy())
    np.savez(tmp_path / "e.npz", x=d.eval_x.numpy(), y=d.eval_y.numpy())
    args = ["compare", "--private", str(tmp_path / "p.npz"), "--public", str(tmp_path / "u.npz"), "--evaluation",
            str(tmp_path / "e.npz"), "--classes", "3", "--checkpoints-dir", str(tmp_path), "--run-name", "cli",
            "--aggregators", "--direct", "dpsgd-linear", "--epsilons", "2", "--accelerator", "cpu", "--no-progress",
            "--num-queries", "20",
            "--set", "private_size_hint=1200", "--set", "dpsgd_batch_size=128", "--set", "dpsgd_epochs=2",
            "--set", "dpsgd_lr=2.0"]  # fmt: skip
    assert main(args) == 0
    capsys.readouterr()
    (row,) = json.loads((tmp_path / "cli" / "compare.json").read_text())["rows"]
    assert row["settings"]["dpsgd"]["expected_batch_size"] == 128 and row["settings"]["dpsgd"]["epochs"] == 2
    assert row["settings"]["dpsgd"]["lr"] == 2.0
