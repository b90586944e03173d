"""Extractor contract: public-only fitting, row independence, state round trips, bad inputs."""

import subprocess
import sys

import pytest
import torch

from pate_stab.features import (
    FeatureExtractor,
    NotFittedError,
    PCAFeatures,
    PublicProjection,
    RawFeatures,
    ScatteringFeatures,
    make_features,
)


def _images(n: int, seed: int, size: int = 16) -> torch.Tensor:
    return torch.rand(n, 1, size, size, generator=torch.Generator().manual_seed(seed))


def test_registry_builds_every_kind_and_rejects_unknown_names():
    for name, cls in (("raw", RawFeatures), ("pca", PCAFeatures), ("scattering", ScatteringFeatures)):
        f = make_features(name)
        assert isinstance(f, cls) and isinstance(f, FeatureExtractor)
    assert make_features("ssl").name == "ssl"
    with pytest.raises(ValueError, match="unknown features 'hog'"):
        make_features("hog")
    with pytest.raises(TypeError):
        make_features("pca", bogus=1)


@pytest.mark.parametrize(
    "make",
    [
        lambda: RawFeatures(),
        lambda: PCAFeatures(dim=10),
        lambda: ScatteringFeatures(pca_dim=20),
        lambda: ScatteringFeatures(standardize=False, pca_dim=None),
    ],
)
def test_rows_depend_only_on_their_own_image(make):
    f = make().fit(_images(60, 0))
    x = _images(6, 1)
    together = f.transform(x)
    alone = torch.cat([f.transform(x[i : i + 1]) for i in range(6)])
    torch.testing.assert_close(together, alone, rtol=1e-4, atol=1e-5)
    assert together.dtype == torch.float32 and together.shape[0] == 6


def test_fit_uses_only_the_tensor_passed():
    public = _images(80, 2)
    a = ScatteringFeatures(pca_dim=15).fit(public)
    b = ScatteringFeatures(pca_dim=15).fit(public.clone())
    x = _images(5, 3)
    torch.testing.assert_close(a.transform(x), b.transform(x))
    # fitting on other data changes the map: it was learned from public_x and nothing else
    c = ScatteringFeatures(pca_dim=15).fit(_images(80, 4))
    assert not torch.allclose(a.transform(x), c.transform(x))


def test_projection_statistics_are_those_of_the_public_features():
    g = torch.Generator().manual_seed(5)
    public = torch.randn(200, 8, generator=g) * torch.arange(1.0, 9.0) + 3
    proj = PublicProjection(standardize=True, pca_dim=4, whiten=True).fit(public)
    torch.testing.assert_close(proj.mean.float(), public.mean(0), rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(proj.std.float(), public.std(0), rtol=1e-5, atol=1e-5)
    z = proj.transform(public)
    assert z.shape == (200, 4)
    torch.testing.assert_close(z.mean(0), torch.zeros(4), atol=1e-4, rtol=0)
    torch.testing.assert_close(z.std(0), torch.ones(4), atol=1e-3, rtol=0)


def test_data_independent_scattering_needs_no_fit():
    f = ScatteringFeatures(standardize=False, pca_dim=None)
    out = f.transform(_images(3, 6, size=28))
    assert out.shape == (3, 81 * 7 * 7)
    assert f.meta["fitted_on"] == "nothing"


def test_state_dict_round_trip():
    public, x = _images(50, 7), _images(4, 8)
    for make in (lambda: PCAFeatures(dim=12), lambda: ScatteringFeatures(pca_dim=10, whiten=True), RawFeatures):
        f = make().fit(public)
        g = make()
        g.load_state_dict(f.state_dict())
        torch.testing.assert_close(g.transform(x), f.transform(x))
        assert g.meta == f.meta


def test_meta_reports_dims_and_public_fit():
    f = ScatteringFeatures(pca_dim=12).fit(_images(40, 9, size=28))
    assert f.meta["dim"] == 12 and f.meta["scattering_dim"] == 81 * 49
    assert f.meta["fitted_on"] == "public pool (40 images)"
    assert PCAFeatures(dim=5).fit(_images(20, 1)).meta["dim"] == 5


def test_errors_are_clear():
    with pytest.raises(NotFittedError):
        PCAFeatures(dim=3).transform(_images(2, 0))
    with pytest.raises(NotFittedError):
        ScatteringFeatures(pca_dim=3).transform(_images(2, 0))
    f = PCAFeatures(dim=3).fit(_images(20, 0))
    bad = _images(2, 0)
    bad[0, 0, 1, 1] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        f.transform(bad)
    with pytest.raises(ValueError, match="dimensions"):
        f.transform(torch.rand(16))
    with pytest.raises(ValueError, match="features"):
        f.transform(_images(2, 0, size=12))
    with pytest.raises(ValueError, match="shape"):
        RawFeatures().fit(_images(3, 0)).transform(_images(2, 0, size=12))
    with pytest.raises(TypeError, match="floating"):
        RawFeatures().fit(torch.zeros(3, 1, 4, 4, dtype=torch.int64))
    with pytest.raises(ValueError, match="pca_dim"):
        ScatteringFeatures(pca_dim=500).fit(_images(10, 0))
    with pytest.raises(ValueError, match="pca_dim"):
        PublicProjection(pca_dim=0)


def test_importing_the_package_does_not_load_lightning():
    code = "import sys, pate_stab.features; print(any(m.split('.')[0] == 'lightning' for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
