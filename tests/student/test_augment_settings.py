"""Per-data-set augmentation of the FixMatch student: the training uses the configured flip, the run setting
(the augmentations themselves: tests/models/test_augment.py)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

import pate_stab.models.fixmatch as fixmatch_module
from pate_stab.models import FixMatchConfig, augmentation_settings
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.rng import seeded_generator
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.config import STUDENT_FIELDS
from pate_stab.student import train_fixmatch

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "configs"


@pytest.mark.parametrize("name, hflip", [("digits", False), ("clothes", True)])
def test_training_uses_the_configured_flip_in_both_augmentations(monkeypatch, name, hflip):
    seen: list[tuple[str, bool]] = []
    real_weak, real_strong = fixmatch_module.weak_augment, fixmatch_module.strong_augment

    def weak(x, **kw):
        seen.append(("weak", kw["hflip"]))
        return real_weak(x, **kw)

    def strong(x, **kw):
        seen.append(("strong", kw["hflip"]))
        return real_strong(x, **kw)

    monkeypatch.setattr(fixmatch_module, "weak_augment", weak)
    monkeypatch.setattr(fixmatch_module, "strong_augment", strong)
    x = torch.rand(24, 1, 8, 8)
    config = FixMatchConfig(steps=2, batch_size=4, mu=2, channels=(2, 2), hidden=(4,), log_every=1,
                            **augmentation_settings(name))  # fmt: skip
    train_fixmatch(x[:8], torch.arange(8) % 2, x[8:], num_classes=2, config=config, generator=seeded_generator(0),
                   accelerator="cpu")  # fmt: skip
    assert {kind for kind, _ in seen} == {"weak", "strong"}
    assert all(flag is hflip for _, flag in seen)


def test_recipes_set_the_augmentation_and_round_trip():
    for recipe, expected in [
        ("fashion_mnist_stab.yaml", "clothes"),
        ("fashion_mnist_stab_gpu.yaml", "clothes"),
        ("mnist_stab.yaml", "digits"),
    ]:
        data = yaml.safe_load((RECIPES / recipe).read_text())
        data.pop("compare", None)
        config = TransferConfig.from_dict(data)
        assert config.student.student_augment == expected, recipe
        assert TransferConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    assert "student_augment" in STUDENT_FIELDS
    with pytest.raises(ValueError, match="student_augment must be one of digits, clothes, natural, none"):
        TransferConfig(student_augment="mirror")  # type: ignore[arg-type]


def test_changing_the_augmentation_refits_only_the_student(tmp_path, monkeypatch):
    import pate_stab.run.data as run_data
    import pate_stab.student as student_pkg
    import pate_stab.teachers.registry as teacher_registry
    from tests.run.test_features_stage import fake_splits
    from tests.run.test_features_stage import small as image_run

    monkeypatch.setattr(run_data, "_raw_splits", fake_splits)
    configs: list[FixMatchConfig] = []
    real = student_pkg.train_fixmatch

    def spy(labelled_x, labels, unlabelled_x, **kwargs):
        configs.append(kwargs["config"])
        return real(labelled_x, labels, unlabelled_x, **kwargs)

    monkeypatch.setattr(student_pkg, "train_fixmatch", spy)
    cfg = image_run(tmp_path, student_method="fixmatch", fixmatch_steps=5, releaser_noise="seeded")
    first = run_transfer(cfg)
    with PrivacyLedger(cfg.run_dir / "ledger.jsonl", run_id=cfg.run_name, budget_epsilon=cfg.epsilon,
                       budget_delta=cfg.delta) as ledger:  # fmt: skip
        entries, spent = ledger.entries(), ledger.spent()

    def no_training(*args, **kwargs):
        raise AssertionError("teachers were retrained")

    monkeypatch.setattr(teacher_registry, "train_teachers", no_training)
    again = run_transfer(replace(cfg, student_augment="clothes"))
    assert [c.hflip for c in configs] == [False, True]
    assert again["resumed"]["release"] is True and again["queries"] == first["queries"]
    assert again["student"]["config"]["hflip"] is True
    with PrivacyLedger(cfg.run_dir / "ledger.jsonl", run_id=cfg.run_name, budget_epsilon=cfg.epsilon,
                       budget_delta=cfg.delta) as ledger:  # fmt: skip
        assert ledger.entries() == entries and ledger.spent() == spent
