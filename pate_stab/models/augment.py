"""Batched image augmentations for FixMatch (the student and the teachers), driven by an explicit generator.

Both functions take images (n, C, H, W) of any value range — [0, 1] or standardised — and make
no assumption about it: translations repeat the edge pixels, affine maps sample the border outside
the image, brightness moves by a multiple of each image's own standard deviation and the cutout
square is filled with each image's mean. Horizontal flips are off unless asked for
(``hflip=True``): digits are not mirror-symmetric, clothes and natural images are. Which
augmentation a data set gets is a named setting, :data:`AUGMENTATIONS`.

Every random number is drawn on the generator's device (normally the CPU, a handful per image),
then moved to the images' device, so the same generator gives the same augmentation on CPU and
GPU up to the floating-point differences of ``grid_sample``.

References:
    Sohn et al., "FixMatch: Simplifying Semi-Supervised Learning with Consistency and
    Confidence", NeurIPS 2020, Sec. 2.3 (weak: flip-and-shift; strong: RandAugment or
    CTAugment, each followed by Cutout). The strong chain here is a fixed random affine map,
    contrast and brightness jitter and one Cutout square, a simplification of RandAugment that
    suits single-channel digits.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from pate_stab._checks import check_generator, check_int, check_nonnegative, check_real, check_tensor

__all__ = ["AUGMENTATIONS", "augmentation_settings", "weak_augment", "strong_augment", "cutout_size"]

AUGMENTATIONS: dict[str, dict[str, object]] = {
    "digits": {"hflip": False, "weak_shift": 2},
    "clothes": {"hflip": True, "weak_shift": 2},
    "natural": {"hflip": True, "weak_shift": 4},
    "none": {"hflip": False, "weak_shift": 0},
}
"""Per-data-set augmentation of the FixMatch student, fixed in advance (no pool or evaluation label
chose them): the :class:`~pate_stab.models.fixmatch.FixMatchConfig` fields each name sets.

- ``"digits"`` (MNIST, SVHN digits): translation by up to 2 px, no flip — a mirrored digit is
  another symbol or none (2, 3, 4, 5, 7, 9), so a flip does not preserve the label; the 2 px are
  this module's shift from before the setting existed (MNIST's digits are centred by their centre
  of mass in the 28 × 28 frame, LeCun et al. 1998, so small shifts stay inside the frame).
- ``"clothes"`` (Fashion-MNIST): the digits' 2 px shift (its images are centred and scaled the same
  way, Xiao, Rasul & Vollgraf 2017, Sec. 2) plus a horizontal flip with probability 1/2: a mirrored
  shirt, bag or shoe is the same article, so the flip preserves the label — the condition under
  which FixMatch's weak "flip-and-shift" applies (Sohn et al. 2020, Sec. 2.3).
- ``"natural"`` (CIFAR-10 and other photographs): FixMatch's weak augmentation as published —
  flip with probability 1/2 and translation by up to 12.5 % of the side (4 px on 32 × 32;
  Sohn et al. 2020, Sec. 2.3).
- ``"none"``: the weak augmentation is the identity (the strong chain is unchanged).

When ``hflip`` is on, the strong augmentation flips too (with probability 1/2, before its affine
map): FixMatch's released code applies RandAugment after the weak flip-and-crop.
"""


def augmentation_settings(name: str) -> dict[str, object]:
    """The FixMatchConfig fields of the named augmentation (:data:`AUGMENTATIONS`)."""
    if name not in AUGMENTATIONS:
        raise ValueError(f"unknown augmentation {name!r}; choose from {', '.join(AUGMENTATIONS)}")
    return dict(AUGMENTATIONS[name])


def _uniform(n: int, low: float, high: float, generator: torch.Generator) -> Tensor:
    """(n,) draws from U(low, high) on the generator's device."""
    return low + (high - low) * torch.rand(n, generator=generator, device=generator.device)


def _check_images(x: Tensor, generator: torch.Generator) -> Tensor:
    check_generator(generator)
    return check_tensor("x", x, ndim=4, floating=True, finite=False, nonempty=False)


def _flip_halves(x: Tensor, generator: torch.Generator) -> Tensor:
    """Mirror each image left–right with probability 1/2 (n uniform draws on the generator's device)."""
    flip = (torch.rand(x.shape[0], generator=generator, device=generator.device) < 0.5).to(x.device)
    return torch.where(flip[:, None, None, None], x.flip(-1), x)


def _check_flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise TypeError(f"{name} must be True or False, got {value!r}")
    return value


def weak_augment(x: Tensor, *, generator: torch.Generator, max_shift: int = 2, hflip: bool = False) -> Tensor:
    """Translate every image by an integer offset in [−max_shift, max_shift]² (edge padding), then
    mirror it left–right with probability 1/2 when ``hflip`` (FixMatch's weak "flip-and-shift",
    Sohn et al. 2020, Sec. 2.3).

    Args:
        x: images (n, C, H, W), floating.
        generator: draws the 2n offsets, then (``hflip`` only) n flip draws; without ``hflip`` the
            draws are exactly those of the shift alone.
        max_shift: largest shift in pixels along each axis (0 and no flip returns a copy).
        hflip: flip each image with probability 1/2.

    Returns:
        The augmented images, same shape, dtype and device as ``x``. Pixel values are only
        moved, never interpolated: every output pixel is an input pixel.
    """
    x = _check_images(x, generator)
    max_shift = check_int("max_shift", max_shift, minimum=0)
    hflip = _check_flag("hflip", hflip)
    n, c, h, w = x.shape
    offsets = torch.randint(0, 2 * max_shift + 1, (2, n), generator=generator, device=generator.device).to(x.device)
    if max_shift == 0 or n == 0:
        return _flip_halves(x, generator) if hflip else x.clone()
    padded = F.pad(x, (max_shift,) * 4, mode="replicate")  # (n, C, H + 2s, W + 2s)
    rows = offsets[0][:, None] + torch.arange(h, device=x.device)  # (n, H)
    cols = offsets[1][:, None] + torch.arange(w, device=x.device)  # (n, W)
    batch = torch.arange(n, device=x.device)[:, None, None, None]
    chan = torch.arange(c, device=x.device)[None, :, None, None]
    shifted = padded[batch, chan, rows[:, None, :, None], cols[:, None, None, :]]  # (n, C, H, W)
    return _flip_halves(shifted, generator) if hflip else shifted


def cutout_size(height: int, fraction: float = 0.36) -> int:
    """Side of the Cutout square for images of ``height`` rows: round(fraction · H), at least 1
    (10 px on 28 × 28, 12 px on 32 × 32)."""
    return max(1, round(fraction * height))


def strong_augment(
    x: Tensor,
    *,
    generator: torch.Generator,
    max_rotation: float = 20.0,
    scale: tuple[float, float] = (0.85, 1.15),
    max_shear: float = 15.0,
    max_shift: float = 3.0,
    contrast: tuple[float, float] = (0.5, 1.5),
    brightness: float = 0.3,
    cutout_fraction: float = 0.36,
    hflip: bool = False,
) -> Tensor:
    """Optional flip, random affine map, contrast and brightness jitter, then one Cutout square per image.

    Per image, independently: with ``hflip``, a left–right mirror with probability 1/2; then
    rotation by U(±max_rotation) degrees, zoom by U(scale), shear by U(±max_shear) degrees and
    translation by U(±max_shift) pixels per axis (bilinear sampling,
    border values outside the image); then ``m + a·(x − m) + b·s`` with ``m`` and ``s`` the
    image's mean and standard deviation, ``a ~ U(contrast)``, ``b ~ U(±brightness)``; then a
    square of side :func:`cutout_size` (its centre uniform over the image, clipped at the
    edges) set to the image's mean.

    Args:
        x: images (n, C, H, W), floating.
        generator: draws every random parameter (9 numbers per image, then one more per image
            with ``hflip``; without it the draws are exactly those of the chain without flips).
        max_rotation, scale, max_shear, max_shift, contrast, brightness: ranges as above.
        cutout_fraction: Cutout side over image height (0 disables Cutout).
        hflip: flip each image with probability 1/2 before the affine map.

    Returns:
        Augmented images, same shape, dtype and device as ``x``.
    """
    x = _check_images(x, generator)
    max_rotation = check_nonnegative("max_rotation", max_rotation)
    max_shear = check_real("max_shear", max_shear, low=0.0, high=60.0)
    max_shift = check_nonnegative("max_shift", max_shift)
    brightness = check_nonnegative("brightness", brightness)
    cutout_fraction = check_real("cutout_fraction", cutout_fraction, low=0.0, high=1.0)
    s_lo, s_hi = (check_real("scale", s, low=0.0, low_inclusive=False) for s in scale)
    c_lo, c_hi = (check_nonnegative("contrast", a) for a in contrast)
    if not (s_lo <= s_hi and c_lo <= c_hi):
        raise ValueError(f"scale and contrast must be (low, high) with low <= high, got {scale} and {contrast}")
    n, _, h, w = x.shape
    g = generator
    angle = torch.deg2rad(_uniform(n, -max_rotation, max_rotation, g))
    shear = torch.deg2rad(_uniform(n, -max_shear, max_shear, g))
    zoom = _uniform(n, s_lo, s_hi, g)
    shift = _uniform(2 * n, -max_shift, max_shift, g).view(n, 2)  # pixels (x, y)
    a = _uniform(n, c_lo, c_hi, g)
    b = _uniform(n, -brightness, brightness, g)
    centre = torch.rand(n, 2, generator=g, device=g.device)  # cutout centre, fraction of (H, W)
    hflip = _check_flag("hflip", hflip)
    if hflip:
        x = _flip_halves(x, g)
    if n == 0:
        return x.clone()
    # output → input sampling map in pixel units: rotation · shear / zoom
    cos, sin, tan = torch.cos(angle), torch.sin(angle), torch.tan(shear)
    m00, m01 = cos / zoom, (cos * tan - sin) / zoom
    m10, m11 = sin / zoom, (sin * tan + cos) / zoom
    # affine_grid works in coordinates normalised to [−1, 1] per axis: u = p / (W/2, H/2)
    theta = torch.stack(
        [
            torch.stack([m00, m01 * h / w, shift[:, 0] * 2 / w], dim=1),
            torch.stack([m10 * w / h, m11, shift[:, 1] * 2 / h], dim=1),
        ],
        dim=1,
    ).to(device=x.device, dtype=x.dtype)  # (n, 2, 3)
    grid = F.affine_grid(theta, list(x.shape), align_corners=False)
    out = F.grid_sample(x, grid, mode="bilinear", padding_mode="border", align_corners=False)
    mean = out.mean(dim=(1, 2, 3), keepdim=True)  # (n, 1, 1, 1)
    std = out.std(dim=(1, 2, 3), keepdim=True) if out[0].numel() > 1 else torch.zeros_like(mean)
    a4, b4 = (v.to(device=x.device, dtype=x.dtype).view(n, 1, 1, 1) for v in (a, b))
    out = mean + a4 * (out - mean) + b4 * std
    side = cutout_size(h, cutout_fraction) if cutout_fraction > 0 else 0
    if side:
        side_w = max(1, round(side * w / h))
        cy = (centre[:, 0] * h).floor().to(x.device)  # (n,)
        cx = (centre[:, 1] * w).floor().to(x.device)
        top, left = cy - side // 2, cx - side_w // 2
        rows = torch.arange(h, device=x.device)[None, :, None]
        cols = torch.arange(w, device=x.device)[None, None, :]
        box = (
            (rows >= top[:, None, None])
            & (rows < top[:, None, None] + side)
            & (cols >= left[:, None, None])
            & (cols < left[:, None, None] + side_w)
        )  # (n, H, W)
        fill = out.mean(dim=(1, 2, 3), keepdim=True)
        out = torch.where(box[:, None], fill, out)
    return out
