"""The public-pool PCA (:class:`pate_stab.features.PublicFeatures`)."""

import pytest
import torch

from pate_stab.features import PublicFeatures
from pate_stab.rng import seeded_generator


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
