"""pate_stab.features: privacy-free feature extractors (data-independent or fitted on public data only)."""

from pate_stab.features.scattering import num_channels, scattering2d, scattering_filters, scattering_shape
from pate_stab.features.ssl import ConvEncoder, SSLConfig, augment, encode, nt_xent_loss, train_ssl_encoder

__all__ = [
    "ConvEncoder",
    "SSLConfig",
    "augment",
    "encode",
    "nt_xent_loss",
    "num_channels",
    "scattering2d",
    "scattering_filters",
    "scattering_shape",
    "train_ssl_encoder",
]
