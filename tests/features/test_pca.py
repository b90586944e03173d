"""The public-pool PCA (:class:`pate_stab.features.PublicFeatures`)."""

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pate_stab.features import PublicFeatures
from pate_stab.features.base import PublicProjection
from pate_stab.features.pca import check_pca_dim, components_for_share
from pate_stab.rng import seeded_generator
from pate_stab.run.config import TransferConfig


def test_public_features_fit_on_public_only_and_whiten():
    public = torch.randn(400, 30, generator=seeded_generator(0)) * torch.linspace(0.1, 3, 30)
    feats = PublicFeatures.fit(public, dim=5)
    z = feats.transform(public)
    assert z.shape == (400, 5)
    torch.testing.assert_close(z.mean(0), torch.zeros(5), atol=1e-4, rtol=0)
    torch.testing.assert_close(z.std(0), torch.ones(5), atol=1e-3, rtol=0)
    assert feats.meta["fitted_on"] == "public"
    again = PublicFeatures.from_state_dict(feats.state_dict())
    assert torch.equal(again.transform(public[:3]), z[:3])
    with pytest.raises(ValueError, match="features"):
        feats.transform(torch.randn(2, 7))
    with pytest.raises(ValueError, match="dim"):
        PublicFeatures.fit(public, dim=31)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.floats(0.0, 100.0, allow_nan=False), min_size=1, max_size=30),
    st.floats(0.01, 0.99),
)
def test_components_for_share_is_the_fewest_components_holding_the_share(values, share):
    s = torch.tensor(sorted(values, reverse=True), dtype=torch.float64)
    d = components_for_share(s, share)
    assert 1 <= d <= len(values)
    var = s**2
    total = float(var.sum())
    if total > 0:
        assert float(var[:d].sum()) / total >= share - 1e-9
        if d > 1:  # one component fewer falls short
            assert float(var[: d - 1].sum()) / total < share


def test_a_variance_share_keeps_the_components_the_public_spectrum_asks_for():
    g = seeded_generator(1)
    # public data whose variance sits in 4 directions (98 % of it) plus a little isotropic noise
    public = torch.randn(500, 4, generator=g) @ torch.randn(4, 40, generator=g) * 5 + 0.1 * torch.randn(
        500, 40, generator=g
    )
    feats = PublicFeatures.fit(public, dim=0.95, whiten=False)
    assert feats.components.shape[0] == 4
    assert feats.meta["dim"] == 4 and feats.meta["requested"] == 0.95
    assert feats.transform(public).shape == (500, 4)
    proj = PublicProjection(standardize=True, pca_dim=0.95).fit(public)
    assert proj.out_dim == 4
    assert proj.transform(public[:7]).shape == (7, 4)


@pytest.mark.parametrize("bad", [0.0, 1.0, 1.5, -0.2, float("nan"), 0, -3, True, "0.9"])
def test_a_bad_pca_size_is_refused(bad):
    with pytest.raises(ValueError, match="pca_dim"):
        check_pca_dim("pca_dim", bad)
    with pytest.raises(ValueError, match="pca_dim"):
        TransferConfig(pca_dim=bad)


def test_the_cli_reads_a_share_or_a_count():
    from pate_stab.cli.commands import _pca_dim

    assert _pca_dim("300") == 300 and isinstance(_pca_dim("300"), int)
    assert _pca_dim("0.95") == 0.95
