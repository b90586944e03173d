"""pate_stab.features: privacy-free feature extractors, data-independent or fitted on public data only.

Teachers that train on a few dozen private examples each need features that cost no privacy:
maps that use no data (wavelet scattering) or only the public pool (PCA, a self-supervised
encoder trained on the public images). See DESIGN.md, "Why k must be large".

Usage::

    feats = make_features("scattering", pca_dim=300).fit(public_x)   # public pool only
    teachers = train_teachers(feats.transform(private_x), private_y, shards, spec=..., generator=g)
    votes = teachers.predict_votes(feats.transform(public_x))
"""

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
