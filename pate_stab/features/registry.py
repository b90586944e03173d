"""``make_features(name, **options)``: build an extractor by name ("raw", "pca", "scattering", "ssl")."""

from __future__ import annotations

from typing import Any

from pate_stab.features.base import FeatureExtractor
from pate_stab.features.extractors import PCAFeatures, RawFeatures, ScatteringFeatures, SSLFeatures

__all__ = ["FEATURES", "make_features"]

FEATURES: dict[str, type] = {
    "raw": RawFeatures,
    "pca": PCAFeatures,
    "scattering": ScatteringFeatures,
    "ssl": SSLFeatures,
}


def make_features(name: str, **options: Any) -> FeatureExtractor:
    """A new, unfitted extractor.

    Example::

        feats = make_features("scattering", pca_dim=300).fit(public_x)
        private_f = feats.transform(private_x)

    Raises:
        ValueError: unknown name. TypeError: an option the extractor does not take.
    """
    if name not in FEATURES:
        raise ValueError(f"unknown features {name!r}; choose from {sorted(FEATURES)}")
    return FEATURES[name](**options)
