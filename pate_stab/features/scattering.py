"""2-D wavelet scattering transform (Mallat 2012; Bruna & Mallat 2013) in plain torch.

The transform used by Tramèr & Boneh (2021), "Differentially private learning needs better
features (or much more data)", ICLR: Morlet wavelets at J scales and L angles, order 2, on
28×28 images with J = 2, L = 8 → 1 + J·L + L²·J(J−1)/2 = 81 channels of 7×7. It has no
parameters fitted to data, so it costs no privacy and can be applied to private inputs.

Decision: an own implementation rather than a dependency. kymatio 0.3.0 is the reference, but
``import kymatio.torch`` fails with scipy ≥ 1.15 (its 3-D part imports the removed
``scipy.special.sph_harm``) and this project pins a newer scipy; importing kymatio's 2-D front
end alone would work but would tie the package to private module paths of one kymatio version.
The 2-D algorithm is short, so it is written out here following kymatio's
``scattering2d/filter_bank.py`` and ``scattering2d/core/scattering2d.py`` step by step:

* Filters are built in float64 in the Fourier domain on the padded grid: Morlet wavelets
  ψ_{j,θ} (σ = 0.8·2^j, ξ = 3π/4 / 2^j, slant 4/L, θ = (L/2 − 1 − l)·π/L) and the Gabor low-pass
  φ (σ = 0.8·2^(J−1)), each periodised over 5×5 copies of the grid in space, then made
  real in Fourier (their imaginary parts are ~0). ``levels[r]`` is the filter folded to the
  grid subsampled by 2^r (high frequencies masked, aliases summed).
* The input is reflection-padded to a multiple of 2^J with at least 2^J extra pixels,
  S0 = φ ⋆ x, S1 = φ ⋆ |ψ_{j1,θ1} ⋆ x|, S2 = φ ⋆ ||ψ_{j1,θ1} ⋆ x| ⋆ ψ_{j2,θ2}| for j2 > j1,
  each subsampled by 2^J (subsampling is done in Fourier by averaging the periodised
  spectrum, as kymatio does) and unpadded by one coefficient on every side.
* Channel order is kymatio's: S0, then S1 for (j1, θ1) in lexicographic order, then S2 for
  (j1, θ1, j2, θ2) in lexicographic order with j2 > j1.

Agreement with kymatio 0.3.0 (``kymatio.torch.Scattering2D``) is pinned in
``tests/features/test_scattering.py``.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
from torch import Tensor

from pate_stab._checks import check_int, check_tensor

__all__ = ["ScatteringFilters", "scattering_filters", "scattering2d", "scattering_shape", "num_channels"]


def _gabor_2d(m: int, n: int, sigma: float, theta: float, xi: float, slant: float = 1.0) -> Tensor:
    """Gabor filter in space on an (m, n) grid, periodised over 5×5 copies (complex128)."""
    c, s = math.cos(theta), math.sin(theta)
    rot = torch.tensor([[c, -s], [s, c]], dtype=torch.float64)
    diag = torch.diag(torch.tensor([1.0, slant * slant], dtype=torch.float64))
    curv = rot @ diag @ rot.T / (2 * sigma * sigma)
    gab = torch.zeros(m, n, dtype=torch.complex128)
    for ex in (-2, -1, 0, 1, 2):
        for ey in (-2, -1, 0, 1, 2):
            xx = torch.arange(ex * m, ex * m + m, dtype=torch.float64)[:, None].expand(m, n)
            yy = torch.arange(ey * n, ey * n + n, dtype=torch.float64)[None, :].expand(m, n)
            quad = curv[0, 0] * xx * xx + (curv[0, 1] + curv[1, 0]) * xx * yy + curv[1, 1] * yy * yy
            phase = xi * (xx * c + yy * s)
            gab += torch.exp(torch.complex(-quad, phase))
    # kymatio normalises with the literal 3.1415, kept for agreement
    return gab / (2 * 3.1415 * sigma * sigma / slant)


def _morlet_2d(m: int, n: int, sigma: float, theta: float, xi: float, slant: float) -> Tensor:
    """Morlet = Gabor minus the envelope times the constant that gives it zero mean."""
    wave = _gabor_2d(m, n, sigma, theta, xi, slant)
    envelope = _gabor_2d(m, n, sigma, theta, 0.0, slant)
    return wave - (wave.sum() / envelope.sum()) * envelope


def _periodize(filter_hat: Tensor, res: int) -> Tensor:
    """Fold a Fourier-domain filter to the grid subsampled by 2^res (kymatio's
    ``periodize_filter_fft``): zero the band that would alias, then sum the 2^res × 2^res aliases."""
    m, n = filter_hat.shape
    f = 2**res
    masked = filter_hat.clone()
    start_x, len_x = int(m * 2 ** (-res - 1)), int(m * (1 - 2 ** (-res)))
    start_y, len_y = int(n * 2 ** (-res - 1)), int(n * (1 - 2 ** (-res)))
    masked[start_x : start_x + len_x, :] = 0
    masked[:, start_y : start_y + len_y] = 0
    return masked.reshape(f, m // f, f, n // f).sum(dim=(0, 2))


class ScatteringFilters:
    """The filter bank for one padded grid: ``phi[r]`` (m/2^r, n/2^r) and, per scale j,
    ``psi[j][r]`` (L, m/2^r, n/2^r) for the L angles; all real float32 in Fourier."""

    def __init__(self, phi: list[Tensor], psi: list[list[Tensor]], J: int, L: int) -> None:
        self.phi, self.psi, self.J, self.L = phi, psi, J, L

    def to(self, device: torch.device | str) -> ScatteringFilters:
        return ScatteringFilters(
            [p.to(device) for p in self.phi], [[p.to(device) for p in ps] for ps in self.psi], self.J, self.L
        )


def _padded_size(size: int, J: int) -> int:
    return ((size + 2**J) // 2**J + 1) * 2**J


def scattering_filters(shape: tuple[int, ...], *, J: int = 2, L: int = 8) -> ScatteringFilters:
    """Build the filter bank for inputs of spatial ``shape`` (H, W).

    Args:
        shape: image height and width; each must be ≥ 2^J.
        J: number of scales (the output is subsampled by 2^J), ≥ 1.
        L: number of angles, ≥ 1.

    Returns:
        :class:`ScatteringFilters` on the CPU.
    """
    J = check_int("J", J, minimum=1)
    L = check_int("L", L, minimum=1)
    h, w = (check_int("shape[0]", shape[0], minimum=2**J), check_int("shape[1]", shape[1], minimum=2**J))
    m, n = _padded_size(h, J), _padded_size(w, J)
    psi: list[list[Tensor]] = []
    for j in range(J):
        per_angle = []
        for theta in range(L):
            angle = (int(L - L / 2 - 1) - theta) * math.pi / L
            wave = _morlet_2d(m, n, 0.8 * 2**j, angle, 3.0 / 4.0 * math.pi / 2**j, 4.0 / L)
            per_angle.append(torch.fft.fft2(wave).real)
        levels = [
            torch.stack([_periodize(f, res) for f in per_angle]).float() for res in range(min(j + 1, max(J - 1, 1)))
        ]
        psi.append(levels)
    phi_hat = torch.fft.fft2(_gabor_2d(m, n, 0.8 * 2 ** (J - 1), 0.0, 0.0)).real
    phi = [_periodize(phi_hat, res).float() for res in range(J)]
    return ScatteringFilters(phi, psi, J, L)


def num_channels(*, J: int, L: int) -> int:
    """Scattering channels of order ≤ 2 per input channel: 1 + J·L + L²·J(J−1)/2."""
    return 1 + J * L + L * L * J * (J - 1) // 2


def scattering_shape(shape: tuple[int, ...], *, J: int = 2, L: int = 8) -> tuple[int, int, int]:
    """Output shape (channels, h, w) per input channel for spatial ``shape`` (H, W)."""
    h, w = shape
    return num_channels(J=J, L=L), _padded_size(h, J) // 2**J - 2, _padded_size(w, J) // 2**J - 2


def _subsample(x_hat: Tensor, k: int) -> Tensor:
    """Spatial subsampling by k done in Fourier: average the k × k periodised copies."""
    if k == 1:
        return x_hat
    *batch, m, n = x_hat.shape
    return x_hat.reshape(*batch, k, m // k, k, n // k).mean(dim=(-4, -2))


def _pad(x: Tensor, J: int) -> Tensor:
    """Reflection padding to kymatio's padded size (extra pixel at the bottom/right if odd)."""
    h, w = x.shape[-2:]
    m, n = _padded_size(h, J), _padded_size(w, J)
    top, left = (m - h) // 2, (n - w) // 2
    pad = [left, (n - w + 1) // 2, top, (m - h + 1) // 2]
    if max(pad[2:]) >= h or max(pad[:2]) >= w:
        raise ValueError(f"images of size {h}×{w} are too small to reflection-pad for J = {J}")
    return torch.nn.functional.pad(x[:, None], pad, mode="reflect")[:, 0]


def _low_pass(u_hat: Tensor, filters: ScatteringFilters, res: int) -> Tensor:
    """φ ⋆ u subsampled to scale 2^J and unpadded, from u's spectrum at resolution 2^res."""
    s = _subsample(u_hat * filters.phi[res], 2 ** (filters.J - res))
    return torch.fft.ifft2(s).real[..., 1:-1, 1:-1]


def _scatter_images(x: Tensor, filters: ScatteringFilters) -> Tensor:
    """(b, H, W) real → (b, K, h, w): the order-2 scattering of each image."""
    J = filters.J
    u0_hat = torch.fft.fft2(_pad(x, J).to(torch.complex64))  # (b, m, n)
    order0 = [_low_pass(u0_hat, filters, 0)[:, None]]  # (b, 1, h, w)
    order1: list[Tensor] = []
    order2: list[Tensor] = []
    for j1 in range(J):
        u1 = _subsample(u0_hat[:, None] * filters.psi[j1][0], 2**j1)  # (b, L, m/2^j1, n/2^j1)
        u1_hat = torch.fft.fft2(torch.fft.ifft2(u1).abs().to(torch.complex64))
        order1.append(_low_pass(u1_hat, filters, j1))  # (b, L, h, w)
        per_j2 = []
        for j2 in range(j1 + 1, J):
            u2 = _subsample(u1_hat[:, :, None] * filters.psi[j2][j1], 2 ** (j2 - j1))  # (b, L, L, ., .)
            u2_hat = torch.fft.fft2(torch.fft.ifft2(u2).abs().to(torch.complex64))
            per_j2.append(_low_pass(u2_hat, filters, j2))  # (b, L1, L2, h, w)
        if per_j2:
            s2 = torch.cat(per_j2, dim=2)  # (b, L1, L2·#j2, h, w): order (θ1, j2, θ2)
            order2.append(s2.flatten(1, 2))
    return torch.cat(order0 + order1 + order2, dim=1)


def _batches(n: int, batch_size: int) -> Iterator[slice]:
    for start in range(0, n, batch_size):
        yield slice(start, min(start + batch_size, n))


@torch.no_grad()
def scattering2d(
    x: Tensor,
    *,
    J: int = 2,
    L: int = 8,
    filters: ScatteringFilters | None = None,
    batch_size: int = 256,
    progress: bool = False,
) -> Tensor:
    """Order-2 scattering of every image, computed in batches; each output row depends only on
    its own input row.

    Args:
        x: images (n, H, W) or (n, C, H, W), real, finite.
        J, L: scales and angles (ignored if ``filters`` is given).
        filters: a prebuilt bank from :func:`scattering_filters` for (H, W).
        batch_size: images per batch (memory ~ batch_size · L² · (m/2)² complex numbers).
        progress: show a tqdm progress bar over batches.

    Returns:
        float32 (n, C·K, h, w) with K = :func:`num_channels` and (h, w) from
        :func:`scattering_shape` (MNIST, J = 2, L = 8: (n, 81, 7, 7)); channel c·K + i is
        coefficient i of input channel c.

    Raises:
        ValueError: wrong rank, NaN/inf entries, images too small for J, or a filter bank
            built for another size.
    """
    x = check_tensor("x", x, ndim=(3, 4), floating=True)
    batch_size = check_int("batch_size", batch_size, minimum=1)
    n = x.shape[0]
    images = x.reshape(-1, *x.shape[-2:]).float()  # (n·C, H, W)
    channels = 1 if x.dim() == 3 else x.shape[1]
    if filters is None:
        filters = scattering_filters(tuple(images.shape[-2:]), J=J, L=L)
    expected = (_padded_size(images.shape[-2], filters.J), _padded_size(images.shape[-1], filters.J))
    if tuple(filters.phi[0].shape) != expected:
        raise ValueError(f"the filter bank is for a padded grid {tuple(filters.phi[0].shape)}, images need {expected}")
    filters = filters.to(images.device)
    k, h, w = scattering_shape(tuple(images.shape[-2:]), J=filters.J, L=filters.L)
    out = torch.empty(images.shape[0], k, h, w, dtype=torch.float32, device=images.device)
    slices = list(_batches(images.shape[0], batch_size))
    if progress:
        from tqdm.auto import tqdm

        slices = tqdm(slices, desc="scattering", unit="batch")
    for sl in slices:
        out[sl] = _scatter_images(images[sl], filters)
    return out.reshape(n, channels * k, h, w)
