"""Per-data-set augmentation of the FixMatch student: the flip, the named settings, the run setting."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch
import yaml

import pate_stab.student.fixmatch as fixmatch_module
from pate_stab.privacy.ledger.privacy_ledger import PrivacyLedger
from pate_stab.rng import seeded_generator
from pate_stab.run import TransferConfig, run_transfer
from pate_stab.run.config import STUDENT_FIELDS
from pate_stab.student import (
    AUGMENTATIONS,
    FixMatchConfig,
    augmentation_settings,
    strong_augment,
    train_fixmatch,
    weak_augment,
)

RECIPES = Path(__file__).resolve().parents[2] / "recipes" / "configs"
# the strong chain with every random transform at its identity: only the flip can move a pixel
STRONG_IDENTITY = {
    "max_rotation": 0.0, "scale": (1.0, 1.0), "max_shear": 0.0, "max_shift": 0.0, "contrast": (1.0, 1.0),
    "brightness": 0.0, "cutout_fraction": 0.0,
}  # fmt: skip


def _asymmetric(n: int, size: int = 8) -> torch.Tensor:
    """(n, 1, size, size) synthetic images whose columns all differ (x ≠ its mirror), each image its own."""
    ramp = torch.arange(size, dtype=torch.float32)
    return (
        (ramp[None, None, None, :] + 10.0 * torch.arange(n, dtype=torch.float32)[:, None, None, None])
        .expand(n, 1, size, size)
        .clone()
    )


def _flipped(out: torch.Tensor, x: torch.Tensor, *, atol: float = 0.0) -> torch.Tensor:
    """(n,) bool: which outputs are the mirror of their input; fails unless each is x or its mirror."""
    same = torch.isclose(out, x, atol=atol, rtol=0).flatten(1).all(1)
    mirrored = torch.isclose(out, x.flip(-1), atol=atol, rtol=0).flatten(1).all(1)
    assert bool((same ^ mirrored).all()), "an output is neither its input nor the input's mirror"
    return mirrored


@pytest.mark.parametrize(
    "augment, kwargs, atol",
    [(weak_augment, {"max_shift": 0}, 0.0), (strong_augment, STRONG_IDENTITY, 1e-4)],
)
def test_flip_is_applied_exactly_when_configured(augment, kwargs, atol):
    x = _asymmetric(400)
    off = augment(x, generator=seeded_generator(5), **kwargs)
    assert not bool(_flipped(off, x, atol=atol).any())
    flips = _flipped(augment(x, generator=seeded_generator(5), hflip=True, **kwargs), x, atol=atol)
    # each image flips with probability 1/2: 400 draws give 200 ± 10 (sd); 60 is 6 sd
    assert 140 <= int(flips.sum()) <= 260
    with pytest.raises(TypeError, match="hflip"):
        augment(x, generator=seeded_generator(5), hflip="yes", **kwargs)


def test_weak_flip_draws_after_the_shift_so_the_shifts_do_not_change():
    """With a shift, a flipped run is the unflipped run with some images mirrored (same offsets)."""
    x = _asymmetric(300, size=10)
    plain = weak_augment(x, generator=seeded_generator(8), max_shift=2)
    flipped = weak_augment(x, generator=seeded_generator(8), max_shift=2, hflip=True)
    mirrored = _flipped(flipped, plain)
    assert 0 < int(mirrored.sum()) < 300


@pytest.mark.parametrize("augment", [weak_augment, strong_augment])
def test_flipping_augmentations_are_bit_identical_under_the_same_generator(augment):
    x = torch.rand(64, 3, 12, 12)
    a = augment(x, generator=seeded_generator(11), hflip=True)
    b = augment(x, generator=seeded_generator(11), hflip=True)
    c = augment(x, generator=seeded_generator(12), hflip=True)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_named_settings_and_their_checks():
    assert augmentation_settings("digits") == {"hflip": False, "weak_shift": 2}
    assert augmentation_settings("clothes") == {"hflip": True, "weak_shift": 2}
    assert augmentation_settings("natural") == {"hflip": True, "weak_shift": 4}
    assert augmentation_settings("none") == {"hflip": False, "weak_shift": 0}
    for name in AUGMENTATIONS:  # every setting is a valid FixMatchConfig
        assert FixMatchConfig.cpu(**augmentation_settings(name)).hflip is AUGMENTATIONS[name]["hflip"]
    # the default keeps the digits' augmentation of the code before the setting existed
    assert FixMatchConfig().hflip is False and FixMatchConfig().weak_shift == 2
    with pytest.raises(ValueError, match="unknown augmentation 'mirror'"):
        augmentation_settings("mirror")
    with pytest.raises(TypeError, match="hflip"):
        FixMatchConfig(hflip=1)  # type: ignore[arg-type]


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
        assert config.student_augment == expected, recipe
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
