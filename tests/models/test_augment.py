"""FixMatch's augmentations (pate_stab.models.augment): shapes, determinism, the weak shift, the strong chain,
cutout, the flip and the named per-data-set settings."""

from __future__ import annotations

import pytest
import torch

from pate_stab.models import (
    AUGMENTATIONS,
    FixMatchConfig,
    augmentation_settings,
    cutout_size,
    strong_augment,
    weak_augment,
)
from pate_stab.rng import seeded_generator

# the strong chain with every random transform at its identity: only the flip can move a pixel
STRONG_IDENTITY = {
    "max_rotation": 0.0, "scale": (1.0, 1.0), "max_shear": 0.0, "max_shift": 0.0, "contrast": (1.0, 1.0),
    "brightness": 0.0, "cutout_fraction": 0.0,
}  # fmt: skip


def _blobs(n: int, size: int = 12) -> torch.Tensor:
    """(n, 1, size, size): one bright square of side 3–4 well inside the image, random place."""
    g = seeded_generator(n)
    x = torch.zeros(n, 1, size, size)
    for i in range(n):
        side = 3 + int(torch.randint(0, 2, (1,), generator=g))
        top, left = (int(v) for v in torch.randint(3, size - 3 - side + 1, (2,), generator=g))
        x[i, 0, top : top + side, left : left + side] = torch.rand(side, side, generator=g) + 0.5
    return x


@pytest.mark.parametrize("augment", [weak_augment, strong_augment])
def test_augmentations_keep_shape_and_repeat_under_the_same_generator(augment):
    x = torch.rand(6, 3, 10, 14)
    a = augment(x, generator=seeded_generator(1))
    b = augment(x, generator=seeded_generator(1))
    c = augment(x, generator=seeded_generator(2))
    assert a.shape == x.shape and a.dtype == x.dtype
    assert torch.equal(a, b)
    assert not torch.equal(a, c)


def test_weak_augmentation_only_translates_by_at_most_two_pixels():
    x = _blobs(40)
    out = weak_augment(x, generator=seeded_generator(3), max_shift=2)
    # pixels moved, none lost or blended: each image keeps its multiset of values (and its mass)
    assert torch.equal(out.flatten(1).sort(1).values, x.flatten(1).sort(1).values)
    shifts = set()
    for i in range(len(x)):
        match = [
            (dy, dx)
            for dy in range(-2, 3)
            for dx in range(-2, 3)
            if torch.equal(out[i], torch.roll(x[i], (dy, dx), dims=(1, 2)))
        ]
        assert match, f"image {i} is not a translation of its input by at most 2 pixels"
        shifts.add(match[0])
    assert len(shifts) > 5  # offsets vary across images


def test_strong_augmentation_changes_every_image_and_works_on_standardised_data():
    x = _blobs(16)
    x = (x - x.mean()) / x.std()  # negative background: no range is assumed
    out = strong_augment(x, generator=seeded_generator(4))
    assert torch.isfinite(out).all()
    assert ((out - x).abs().amax((1, 2, 3)) > 0.1).all()


def test_cutout_fills_one_square_with_the_image_mean():
    x = torch.randn(8, 2, 28, 28) + 3.0
    identity = {"max_rotation": 0.0, "scale": (1.0, 1.0), "max_shear": 0.0, "max_shift": 0.0}
    out = strong_augment(x, generator=seeded_generator(5), contrast=(1.0, 1.0), brightness=0.0, **identity)
    side = cutout_size(28)
    assert side == 10
    for i in range(len(x)):
        filled = ((out[i] - x[i].mean()).abs() < 1e-4).all(0)  # (H, W); both channels at the mean
        rows, cols = filled.any(1).nonzero()[:, 0], filled.any(0).nonzero()[:, 0]
        assert 0 < len(rows) <= side and 0 < len(cols) <= side
        assert filled[rows[0] : rows[-1] + 1, cols[0] : cols[-1] + 1].all()  # one (edge-clipped) square
        assert torch.allclose(out[i][:, ~filled], x[i][:, ~filled], atol=1e-4)  # nothing else moved


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
