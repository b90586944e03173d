"""The own scattering transform against kymatio 0.3.0, plus its structural properties.

Reference values were produced outside the repository with kymatio 0.3.0, torch 2.14.1 and
scipy 1.14.1 (kymatio.torch does not import with scipy ≥ 1.15), in a throwaway venv:

    python -m venv /tmp/kym && /tmp/kym/bin/pip install kymatio==0.3.0 torch==2.14.1 'scipy<1.15'
    out = kymatio.torch.Scattering2D(J=2, shape=(28, 28), L=8)(_pinned_images())  # (3, 81, 7, 7)

and read off at the indices below. On 64 MNIST test images, 8 uniform-noise images, a 16×20 input
with L = 4 and a 32×32 input with J = 3, L = 6 the two implementations agreed to 2e-7 (absolute)
when this file was written.
"""

import pytest
import torch

from pate_stab.features.scattering import num_channels, scattering2d, scattering_filters, scattering_shape


def _pinned_images() -> torch.Tensor:
    i = torch.arange(28.0)[:, None]
    j = torch.arange(28.0)[None, :]
    ring = torch.exp(-((((i - 13) ** 2 + (j - 14) ** 2).sqrt() - 7) ** 2) / 4)
    bar = torch.exp(-((j - 0.4 * i - 8) ** 2) / 3) * (i > 4) * (i < 24)
    noise = torch.rand(28, 28, generator=torch.Generator().manual_seed(0))
    return torch.stack([ring, bar.float(), noise])


KYMATIO_VALUES = {
    (0, 0, 3, 3): 0.0839383527636528,
    (0, 1, 3, 0): 0.0031706043519079685,
    (0, 12, 1, 5): 0.0589006133377552,
    (0, 17, 3, 3): 0.007863001897931099,
    (0, 60, 2, 4): 0.004710618406534195,
    (1, 0, 3, 3): 0.5393001437187195,
    (1, 4, 2, 2): 0.015552534721791744,
    (1, 33, 4, 1): 1.7595179087948054e-05,
    (1, 80, 6, 6): 0.0008356634061783552,
    (2, 0, 0, 0): 0.3828255236148834,
    (2, 9, 5, 5): 0.021356862038373947,
    (2, 70, 3, 3): 0.003236213466152549,
}
KYMATIO_RING_CHANNEL_SUMS = {
    0: 9.771206,
    1: 0.915339,
    8: 0.887481,
    16: 1.762652,
    17: 0.197675,
    50: 0.098841,
    80: 0.189116,
}


def test_shape_mnist_and_channels():
    out = scattering2d(torch.rand(5, 1, 28, 28))
    assert out.shape == (5, 81, 7, 7) and out.dtype == torch.float32
    assert scattering2d(torch.rand(2, 28, 28)).shape == (2, 81, 7, 7)
    assert scattering2d(torch.rand(2, 3, 28, 28)).shape == (2, 243, 7, 7)
    assert num_channels(J=2, L=8) == 81 and num_channels(J=3, L=6) == 127
    assert scattering_shape((28, 28), J=2, L=8) == (81, 7, 7)


def test_matches_kymatio_reference_values():
    out = scattering2d(_pinned_images())
    for index, value in KYMATIO_VALUES.items():
        assert out[index].item() == pytest.approx(value, rel=1e-5, abs=1e-7), index
    sums = out[0].sum(dim=(1, 2))
    for channel, value in KYMATIO_RING_CHANNEL_SUMS.items():
        assert sums[channel].item() == pytest.approx(value, rel=1e-5, abs=1e-6), channel


def test_rows_do_not_depend_on_the_batch():
    x = torch.rand(7, 28, 28, generator=torch.Generator().manual_seed(1))
    together = scattering2d(x, batch_size=7)
    alone = torch.cat([scattering2d(x[i : i + 1]) for i in range(7)])
    in_threes = scattering2d(x, batch_size=3)
    torch.testing.assert_close(together, alone, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(together, in_threes, rtol=1e-5, atol=1e-6)
    changed = x.clone()
    changed[1:] = torch.rand(6, 28, 28)
    torch.testing.assert_close(scattering2d(changed)[0], together[0], rtol=1e-5, atol=1e-6)


def test_small_translations_change_scattering_much_less_than_pixels():
    img = _pinned_images()[:2]
    shifted = torch.roll(img, shifts=(1, 1), dims=(-2, -1))
    pixel_change = (shifted - img).norm(dim=(1, 2)) / img.norm(dim=(1, 2))
    s, s_shift = scattering2d(img), scattering2d(shifted)
    scat_change = (s_shift - s).flatten(1).norm(dim=1) / s.flatten(1).norm(dim=1)
    # a one-pixel shift is well below the averaging scale 2^J = 4: the relative change of the
    # coefficients is about 0.5–0.6 of the relative change of the pixels on these images
    assert (scat_change < 0.75 * pixel_change).all(), (scat_change, pixel_change)


def test_prebuilt_filters_and_size_mismatch():
    bank = scattering_filters((28, 28), J=2, L=8)
    x = torch.rand(2, 28, 28)
    torch.testing.assert_close(scattering2d(x, filters=bank), scattering2d(x))
    with pytest.raises(ValueError, match="padded grid"):
        scattering2d(torch.rand(2, 32, 32), filters=bank)


def test_bad_inputs():
    x = torch.rand(2, 28, 28)
    x[0, 3, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        scattering2d(x)
    with pytest.raises(ValueError, match="dimensions"):
        scattering2d(torch.rand(28, 28))
    with pytest.raises(TypeError, match="floating"):
        scattering2d(torch.zeros(2, 28, 28, dtype=torch.uint8))
    with pytest.raises(ValueError, match="shape"):
        scattering2d(torch.rand(2, 3, 3), J=2)
