"""pate_stab.features: privacy-free feature extractors, data-independent or fitted on public data only.

Teachers that train on a few dozen private examples each need features that cost no privacy:
maps that use no data (wavelet scattering) or only the public pool (PCA, a self-supervised
encoder trained on the public images). See DESIGN.md, "Why k must be large".

Usage::

    feats = make_features("scattering", pca_dim=300).fit(public_x)   # public pool only
    teachers = train_teachers(feats.transform(private_x), private_y, shards, spec=..., generator=g)
    votes = teachers.predict_votes(feats.transform(public_x))

The names below are imported on first use (PEP 562): a module of the package loads without the
others (``pate-stab predict`` reads a student without Lightning's training code).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pate_stab._lazy import lazy_exports

if TYPE_CHECKING:
    from pate_stab.features.base import FeatureExtractor, NotFittedError, PublicProjection, check_images
    from pate_stab.features.extractors import PCAFeatures, RawFeatures, ScatteringFeatures, SSLFeatures
    from pate_stab.features.pca import PublicFeatures
    from pate_stab.features.propagation import PoolGraph, kernel_votes, knn_affinities
    from pate_stab.features.registry import FEATURES, make_features
    from pate_stab.features.scattering import (
        ScatteringFilters,
        num_channels,
        scattering2d,
        scattering_filters,
        scattering_shape,
    )
    from pate_stab.features.ssl import ConvEncoder, SSLConfig, augment, encode, nt_xent_loss, train_ssl_encoder

_LAZY = {
    "FeatureExtractor": "pate_stab.features.base",
    "NotFittedError": "pate_stab.features.base",
    "PublicProjection": "pate_stab.features.base",
    "check_images": "pate_stab.features.base",
    "PCAFeatures": "pate_stab.features.extractors",
    "RawFeatures": "pate_stab.features.extractors",
    "ScatteringFeatures": "pate_stab.features.extractors",
    "SSLFeatures": "pate_stab.features.extractors",
    "PublicFeatures": "pate_stab.features.pca",
    "PoolGraph": "pate_stab.features.propagation",
    "kernel_votes": "pate_stab.features.propagation",
    "knn_affinities": "pate_stab.features.propagation",
    "FEATURES": "pate_stab.features.registry",
    "make_features": "pate_stab.features.registry",
    "ScatteringFilters": "pate_stab.features.scattering",
    "num_channels": "pate_stab.features.scattering",
    "scattering2d": "pate_stab.features.scattering",
    "scattering_filters": "pate_stab.features.scattering",
    "scattering_shape": "pate_stab.features.scattering",
    "ConvEncoder": "pate_stab.features.ssl",
    "SSLConfig": "pate_stab.features.ssl",
    "augment": "pate_stab.features.ssl",
    "encode": "pate_stab.features.ssl",
    "nt_xent_loss": "pate_stab.features.ssl",
    "train_ssl_encoder": "pate_stab.features.ssl",
}

__all__ = [
    "FEATURES",
    "ConvEncoder",
    "FeatureExtractor",
    "NotFittedError",
    "PCAFeatures",
    "PoolGraph",
    "PublicFeatures",
    "PublicProjection",
    "RawFeatures",
    "SSLConfig",
    "SSLFeatures",
    "ScatteringFeatures",
    "ScatteringFilters",
    "augment",
    "check_images",
    "encode",
    "kernel_votes",
    "knn_affinities",
    "make_features",
    "nt_xent_loss",
    "num_channels",
    "scattering2d",
    "scattering_filters",
    "scattering_shape",
    "train_ssl_encoder",
]


__getattr__, __dir__ = lazy_exports(globals(), _LAZY, __all__)
