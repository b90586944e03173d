"""A transfer with FixMatch teachers (``teacher_model: fixmatch``, PATE-FM) end to end on the CPU: a few
hundred synthetic 8 × 8 images, 3 teachers, a few steps; and the settings that are refused before the
run folder is written."""

from __future__ import annotations

import json
import stat

import pytest
import torch

import pate_stab.run.data as run_data
from pate_stab import Data, transfer
from pate_stab.data import make_gaussian_mixture
from pate_stab.run import TransferConfig
from pate_stab.teachers.fixmatch_settings import FIXMATCH_TEACHER_FIXED, fixmatch_teacher_config

N_PRIVATE, N_PUBLIC, N_EVAL = 150, 60, 40


def _images(n: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, y = make_gaussian_mixture(
        n, num_classes=3, dim=64, separation=4.0, generator=torch.Generator().manual_seed(seed)
    )
    return x.view(n, 1, 8, 8), y


SETTINGS = {
    "teacher_model": "fixmatch", "privacy_unit": "label", "neighbouring": "replace_one", "label_queries": "both",
    "num_teachers": 3, "teacher_epochs": 1, "teacher_batch_size": 64, "teacher_channels": (4, 8),
    "teacher_hidden": (16,), "aggregator": "lnmax", "epsilon": 8.0, "num_queries": 20, "releaser_noise": "seeded",
    "accelerator": "cpu", "student_epochs": 2,
}  # fmt: skip


def test_a_transfer_with_fixmatch_teachers_runs_end_to_end(tmp_path):
    x, y = _images(N_PRIVATE + N_PUBLIC + N_EVAL, 0)
    a, b = N_PRIVATE, N_PRIVATE + N_PUBLIC
    result = transfer(
        Data.arrays((x[:a], y[:a]), x[a:b], (x[b:], y[b:])), checkpoints_dir=str(tmp_path), run_name="fm", **SETTINGS
    )
    teachers = result.report["teacher_model"]
    assert teachers["kind"] == "cnn" and teachers["train"]["method"] == "fixmatch"
    # label privacy: every private and public input unlabelled; an epoch is ⌊(150 + 60) / 64⌋ = 3 steps
    assert teachers["train"]["unlabelled"].startswith("every private and public input")
    assert teachers["train"]["steps"] == 3 and teachers["train"]["mu"] == FIXMATCH_TEACHER_FIXED["mu"]
    assert result.labels.numel() == 20
    folder = tmp_path / "fm" / "teachers"
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "weights.pt").stat().st_mode) == 0o600
    saved = json.loads((folder / "config.json").read_text())
    assert saved["config"]["num_teachers_total"] == 3 and saved["config"]["mode"] == "stacks of 3"


def test_fixmatch_teachers_need_raw_images_and_are_refused_before_the_run_folder(tmp_path):
    x, y = _images(N_PRIVATE + N_PUBLIC, 0)
    with pytest.raises(ValueError, match="features: raw"):
        transfer(
            Data.arrays((x[:N_PRIVATE], y[:N_PRIVATE]), x[N_PRIVATE:], classes=3),
            checkpoints_dir=str(tmp_path),
            run_name="pca",
            **{**SETTINGS, "features": "pca", "pca_dim": 5},
        )
    vectors = x.flatten(1)
    with pytest.raises(ValueError, match="needs images"):
        transfer(
            Data.arrays((vectors[:N_PRIVATE], y[:N_PRIVATE]), vectors[N_PRIVATE:], classes=3),
            checkpoints_dir=str(tmp_path),
            run_name="vectors",
            **SETTINGS,
        )
    assert not (tmp_path / "pca").exists() and not (tmp_path / "vectors" / "config.json").exists()


def test_the_teachers_fixmatch_settings_come_from_public_sizes_only():
    """An epoch is ⌊N_u / B⌋ steps with N_u the inputs public under the unit: under record privacy the
    public pool only (the private count is private), under label privacy every input."""
    label = TransferConfig(**{**SETTINGS, "teacher_epochs": 2, "teacher_batch_size": 10})
    record = TransferConfig(**{**SETTINGS, "privacy_unit": "record", "neighbouring": "add_remove",
                               "label_queries": "pool", "teacher_epochs": 2, "teacher_batch_size": 10})  # fmt: skip
    assert fixmatch_teacher_config(label, 150, 60).steps == 2 * 21
    assert fixmatch_teacher_config(record, 150, 60).steps == fixmatch_teacher_config(record, 999, 60).steps == 2 * 6
    mnist = TransferConfig(**{**SETTINGS, "dataset": "fashion_mnist", "teacher_epochs": None})
    cfg = fixmatch_teacher_config(mnist, 60_000, 9_000)
    assert cfg.steps == 40 * (69_000 // 64) and cfg.hflip and cfg.threshold == 0.95


# slow tier: the same label-neighbour pair as tests/run/test_label_neighbour_outputs.py (fast), here with FixMatch
# teachers, whose end-to-end path test_a_transfer_with_fixmatch_teachers_runs_end_to_end (fast) runs; that one
# changed label moves at most one shard under label privacy (shards keyed on the inputs, whatever the teachers) is
# tests/run/test_label_privacy.py::test_one_changed_label_moves_at_most_one_teacher (fast).
@pytest.mark.slow
def test_one_changed_label_under_fixmatch_teachers(tmp_path, monkeypatch):
    """The label-privacy neighbour test (tests/run/test_label_neighbour_outputs.py) with FixMatch teachers:
    D and D with one private label changed, seeded noise; every published file identical except the released
    outputs and what follows from them, at most one teacher's votes differ and some queried vote does."""
    from tests.run.test_neighbour_outputs import _run_pair

    original = run_data._raw_splits

    def install(monkeypatch: pytest.MonkeyPatch, *, change: bool = True) -> None:
        def splits(config: TransferConfig, generator: torch.Generator):
            (px, py, ux, uy, ex, ey), num_classes = original(config, generator)
            px, ux, ex = (t.view(t.shape[0], 1, 4, 4) for t in (px, ux, ex))  # 16 features as 4 × 4 images
            if change:
                py = py.clone()
                py[7] = (py[7] + 1) % num_classes
            return [px, py, ux, uy, ex, ey], num_classes

        monkeypatch.setattr(run_data, "_raw_splits", splits)

    config = TransferConfig(
        run_name="fmnb", checkpoints_dir=str(tmp_path), dim=16, num_private=300, num_public=100, num_eval=100,
        separation=2.0, **{**SETTINGS, "num_teachers": 10, "num_queries": 400, "teacher_lr": 0.3, "teacher_epochs": 5},
        allow_unanswerable=True,
    )  # fmt: skip
    assert config.teachers_changed == 1
    install(monkeypatch, change=False)  # D
    _run_pair(config, monkeypatch, install)
